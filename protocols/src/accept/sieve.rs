//! Sieve at delivery (issue 43): the account's active script decides what
//! becomes of its copy. This module loads the script (compiled once per
//! node and text, [`cached`]), answers what the pure run asks of the
//! store ([`crate::sieve::Env`]) and runs it; [`super::sieve_actions`]
//! carries the actions out.
//!
//! The run itself never waits on I/O, so the store's answers are fetched
//! around it: the active record alone first (one point read: most
//! deliveries ask nothing else), then the run is repeated while it asks
//! for mailboxes (`mailboxexists`), duplicate ids or included scripts not
//! yet fetched, at most [`PASSES_MAX`] times. Runs are pure, so a repeat
//! with more answers is the same run with fewer unknowns. Last, the
//! `fileinto` targets not yet known are looked up by name, in one read.
//! Nothing reads the account's whole mailbox list: that read was most of
//! a delivery's Sieve cost (bench smtp --sieve-rules, issue 43 item 7).
//!
//! A failure of any kind (runtime error, budget, a store read) is a keep
//! in INBOX, logged and counted: a script never loses a message.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use meshmail_storage::StorageError;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::{mailboxes, now_ms, sieve as store};

use super::Acceptor;
use crate::sieve::{self, Action, Env, Envelope, Outcome, Script, SieveError};

/// Runs of one delivery while it still asks for store answers it lacks.
pub const PASSES_MAX: usize = 4;
/// Compiled scripts a node keeps (a full cache starts over).
const CACHE_ENTRIES_MAX: usize = 4096;

/// What the script decided for one copy; `None` from [`decide`] means the
/// account has no active script (the usual INBOX delivery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub actions: Vec<Action>,
    /// The message after editheader, stored instead of the original.
    pub edited: Option<Vec<u8>>,
    /// Ids to record once the copy is stored.
    pub duplicates: Vec<sieve::DuplicateMark>,
    /// The mailboxes the run asked about or files into that existed when
    /// it ran (canonical names).
    pub mailboxes: HashSet<String>,
}

impl Decision {
    /// The fallback of RFC 5228 §2.10.6: keep in INBOX.
    fn keep() -> Self {
        Decision {
            actions: vec![Action::Keep { flags: Vec::new() }],
            edited: None,
            duplicates: Vec::new(),
            mailboxes: HashSet::new(),
        }
    }
}

type CacheKey = (AccountId, String, u64);

/// A node's compiled scripts by (account, name, version): delivery never
/// re-parses a script it ran before, and on a hit never reads its text.
/// A version is unique per account and name in one store (the store
/// raises it at every write), and one process serves one store.
fn cache() -> &'static Mutex<HashMap<CacheKey, Arc<Script>>> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Arc<Script>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

fn cached(key: &CacheKey) -> Option<Arc<Script>> {
    let hit = cache().lock().ok()?.get(key).cloned();
    if hit.is_some() {
        metrics::counter!("meshmail_sieve_compiles_total", "result" => "cached").increment(1);
    }
    hit
}

/// The compiled form of a stored script, from the cache or compiled now.
fn compiled(account: AccountId, s: &store::StoredScript, own: &str) -> Result<Arc<Script>, SieveError> {
    let key = (account, s.name.clone(), s.version);
    if let Some(script) = cached(&key) {
        return Ok(script);
    }
    let ctx = sieve::Context {
        own_addresses: vec![own.to_string()],
    };
    let script = Arc::new(sieve::compile(s.source.as_bytes(), &ctx)?);
    metrics::counter!("meshmail_sieve_compiles_total", "result" => "compiled").increment(1);
    if let Ok(mut c) = cache().lock() {
        if c.len() >= CACHE_ENTRIES_MAX {
            c.clear();
        }
        c.insert(key, script.clone());
    }
    Ok(script)
}

/// The store's answers a run may ask for, and what it asked for that is
/// not here yet (fetched before the next pass).
struct Answers {
    /// Canonical mailbox name: whether it exists.
    mailboxes: HashMap<String, bool>,
    seen: HashSet<String>,
    unseen: HashSet<String>,
    scripts: HashMap<String, Option<store::StoredScript>>,
    account: AccountId,
    own: Vec<String>,
    now_s: i64,
    asked_ids: RefCell<HashSet<String>>,
    asked_scripts: RefCell<HashSet<String>>,
    asked_mailboxes: RefCell<HashSet<String>>,
}

/// What one pass asked for that the answers lack.
#[derive(Default)]
struct Asked {
    ids: HashSet<String>,
    scripts: HashSet<String>,
    mailboxes: HashSet<String>,
}

impl Asked {
    fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.scripts.is_empty() && self.mailboxes.is_empty()
    }
}

impl Answers {
    fn take_asked(&self) -> Asked {
        Asked {
            ids: self.asked_ids.take(),
            scripts: self.asked_scripts.take(),
            mailboxes: self.asked_mailboxes.take(),
        }
    }

    /// The names known to exist.
    fn existing(&self) -> HashSet<String> {
        self.mailboxes
            .iter()
            .filter(|&(_, exists)| *exists)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

impl Env for Answers {
    fn mailbox_exists(&self, name: &str) -> bool {
        let name = mailboxes::canonical_name(name);
        match self.mailboxes.get(&name) {
            Some(exists) => *exists,
            None => {
                self.asked_mailboxes.borrow_mut().insert(name);
                false
            }
        }
    }
    fn duplicate_seen(&self, id: &str) -> bool {
        if !self.seen.contains(id) && !self.unseen.contains(id) {
            self.asked_ids.borrow_mut().insert(id.to_string());
        }
        self.seen.contains(id)
    }
    fn script(&self, personal: bool, name: &str) -> Option<Result<Arc<Script>, SieveError>> {
        // Global scripts (`:global`) are not kept by this server.
        if !personal {
            return None;
        }
        match self.scripts.get(name) {
            None => {
                self.asked_scripts.borrow_mut().insert(name.to_string());
                None
            }
            Some(None) => None,
            Some(Some(s)) => Some(compiled(self.account, s, &self.own[0])),
        }
    }
    fn now_s(&self) -> i64 {
        self.now_s
    }
    fn own_addresses(&self) -> &[String] {
        &self.own
    }
}

/// Runs the account's active script over `raw`; `None` when there is none.
pub async fn decide(
    acceptor: Acceptor<'_>,
    account: AccountId,
    address: &str,
    sender: &str,
    raw: &[u8],
) -> Option<Decision> {
    let started = Instant::now();
    let decision = match run_active(acceptor, account, address, sender, raw).await {
        Ok(None) => return None,
        Ok(Some(Ok((outcome, mailboxes)))) => Decision {
            actions: outcome.actions,
            edited: outcome.edited,
            duplicates: outcome.duplicates,
            mailboxes,
        },
        Ok(Some(Err(why))) => {
            tracing::warn!(account, reason = %why, "sieve script failed; the message is kept in INBOX");
            metrics::counter!("meshmail_sieve_errors_total", "kind" => why.kind()).increment(1);
            Decision::keep()
        }
        Err(e) => {
            tracing::warn!(account, error = %e, "sieve: store read failed; the message is kept in INBOX");
            metrics::counter!("meshmail_sieve_errors_total", "kind" => "store").increment(1);
            Decision::keep()
        }
    };
    metrics::histogram!("meshmail_sieve_run_seconds").record(started.elapsed().as_secs_f64());
    for a in &decision.actions {
        metrics::counter!("meshmail_sieve_actions_total", "action" => a.kind()).increment(1);
    }
    Some(decision)
}

/// Why a run gave no actions (the metrics label and the log's reason).
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    #[error("{0}")]
    Runtime(#[from] sieve::RuntimeError),
    #[error("the stored script does not compile: {0}")]
    Compile(#[from] SieveError),
    #[error("the run still asked for store answers after {PASSES_MAX} passes")]
    Passes,
}

impl RunFailure {
    fn kind(&self) -> &'static str {
        match self {
            RunFailure::Runtime(e) => e.kind(),
            RunFailure::Compile(_) => "compile",
            RunFailure::Passes => "passes",
        }
    }
}

type RunResult = Option<Result<(Outcome, HashSet<String>), RunFailure>>;

async fn run_active(
    acceptor: Acceptor<'_>,
    account: AccountId,
    address: &str,
    sender: &str,
    raw: &[u8],
) -> Result<RunResult, StorageError> {
    let db = &acceptor.ctx.db;
    let active = db
        .read("sieve_active", move |txn| async move {
            store::active_ref(&txn, account).await
        })
        .await?;
    let Some(active) = active else {
        return Ok(None);
    };
    let own = address.to_ascii_lowercase();
    let script = match cached(&(account, active.name.clone(), active.version)) {
        // Version 0: an active record older than its version field.
        Some(s) if active.version != 0 => s,
        _ => {
            let name = active.name.clone();
            let stored = db
                .read("sieve_script", move |txn| {
                    let name = name.clone();
                    async move { store::get(&txn, account, &name).await }
                })
                .await?;
            // Deleted since: the active script cannot be, so this is a race
            // with a re-activation; nothing runs this once.
            let Some(stored) = stored else { return Ok(None) };
            match compiled(account, &stored, &own) {
                Ok(s) => s,
                Err(e) => return Ok(Some(Err(e.into()))),
            }
        }
    };
    let mut answers = Answers {
        mailboxes: HashMap::new(),
        seen: HashSet::new(),
        unseen: HashSet::new(),
        scripts: HashMap::new(),
        account,
        own: vec![own],
        now_s: (now_ms() / 1000) as i64,
        asked_ids: RefCell::default(),
        asked_scripts: RefCell::default(),
        asked_mailboxes: RefCell::default(),
    };
    let envelope = || Envelope {
        from: sender.to_string(),
        to: address.to_string(),
    };
    for _ in 0..PASSES_MAX {
        let result = sieve::run(&script, raw, envelope(), &answers);
        let asked = answers.take_asked();
        if !asked.is_empty() {
            fetch(acceptor, &mut answers, asked).await?;
            continue;
        }
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => return Ok(Some(Err(e.into()))),
        };
        let targets: HashSet<String> = outcome
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::FileInto { mailbox, .. } => Some(mailboxes::canonical_name(mailbox)),
                _ => None,
            })
            .filter(|name| !answers.mailboxes.contains_key(name))
            .collect();
        if !targets.is_empty() {
            let asked = Asked {
                mailboxes: targets,
                ..Asked::default()
            };
            fetch(acceptor, &mut answers, asked).await?;
        }
        return Ok(Some(Ok((outcome, answers.existing()))));
    }
    Ok(Some(Err(RunFailure::Passes)))
}

/// Reads the mailboxes, duplicate ids and included scripts a pass asked
/// for, in one read transaction.
async fn fetch(acceptor: Acceptor<'_>, answers: &mut Answers, asked: Asked) -> Result<(), StorageError> {
    let (account, now) = (answers.account, now_ms());
    let Asked {
        ids,
        scripts,
        mailboxes,
    } = asked;
    let (seen, found, exist) = acceptor
        .ctx
        .db
        .read("sieve_answers", move |txn| {
            let (ids, scripts, names) = (ids.clone(), scripts.clone(), mailboxes.clone());
            async move {
                let mut seen = Vec::new();
                for id in ids {
                    let s = store::duplicate_seen(&txn, account, &id, now).await?;
                    seen.push((id, s));
                }
                let mut found = Vec::new();
                for name in scripts {
                    let s = store::get(&txn, account, &name).await?;
                    found.push((name, s));
                }
                let mut exist = Vec::new();
                for name in names {
                    let e = mailboxes::find(&txn, account, &name).await?.is_some();
                    exist.push((name, e));
                }
                Ok::<_, StorageError>((seen, found, exist))
            }
        })
        .await?;
    for (id, s) in seen {
        if s {
            answers.seen.insert(id);
        } else {
            answers.unseen.insert(id);
        }
    }
    answers.scripts.extend(found);
    answers.mailboxes.extend(exist);
    Ok(())
}

/// Records the ids the run's `duplicate` tests saw (RFC 7352 §3), after
/// the copy was stored. Without `:last` an id keeps its first expiry.
pub async fn record_duplicates(
    acceptor: Acceptor<'_>,
    account: AccountId,
    marks: Vec<sieve::DuplicateMark>,
) -> Result<(), StorageError> {
    if marks.is_empty() {
        return Ok(());
    }
    let now = now_ms();
    acceptor
        .ctx
        .db
        .run("sieve_duplicates", move |txn| {
            let marks = marks.clone();
            async move {
                for m in &marks {
                    if !m.last && store::duplicate_seen(&txn, account, &m.id, now).await? {
                        continue;
                    }
                    store::mark_duplicate(&txn, account, &m.id, now + m.expiry_s * 1000)?;
                }
                Ok(())
            }
        })
        .await
}
