//! The mail load: SMTP injection (open loop at a target rate, or closed
//! loop over N connections), IMAP IDLE populations, and IMAP reader
//! sessions that mix reads and flag changes and record the UID/MODSEQ
//! history. Every message carries `X-Meshmail-Load-Id: <uuid>`, and every
//! outcome is kept, so the end checks can tell lost from duplicated from
//! "stored although the client saw an error".
//!
//! Bounds: one [`TokenBucket`] for every dial and retry of every worker,
//! backoff with jitter after failures, timeouts on connect and every
//! operation, a message cap and a deadline after which everything stops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::budget::{Backoff, TokenBucket};
use crate::cluster::{NodeAddrs, PASSWORD, account};
use crate::history::Observation;
use crate::imap_client::{ImapClient, header_value, number_after};
use crate::smtp_client::{Outcome, SmtpClient};

pub const LOAD_ID_HEADER: &str = "X-Meshmail-Load-Id";

/// How mailboxes are chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Skew {
    /// Every mailbox equally likely: the control.
    #[default]
    #[serde(rename = "uniform")]
    Uniform,
    /// 80 % of operations hit 20 % of the mailboxes: the realistic case.
    #[serde(rename = "80/20")]
    Hot80_20,
}

impl Skew {
    pub fn pick(self, n: u32, rng: &mut impl Rng) -> u32 {
        let n = n.max(1);
        match self {
            Skew::Uniform => rng.random_range(0..n),
            Skew::Hot80_20 => {
                let hot = n.div_ceil(5);
                if hot >= n || rng.random_bool(0.8) {
                    rng.random_range(0..hot)
                } else {
                    rng.random_range(hot..n)
                }
            }
        }
    }
}

/// The load's settings (the `[load]` table of a chaos scenario).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadConfig {
    /// Accounts (one INBOX each) the load spreads over.
    pub accounts: u32,
    pub skew: Skew,
    /// Messages per second in total (open loop); 0 = closed loop, each
    /// connection sending as fast as it is answered.
    pub smtp_rate: f64,
    pub smtp_connections: usize,
    pub message_bytes: usize,
    /// Stop sending after this many acknowledged messages.
    pub max_messages: u64,
    pub idle_sessions: usize,
    /// Reader sessions recording the UID/MODSEQ history (round-robin over every mailbox).
    pub imap_readers: usize,
    pub reader_interval_ms: u64,
    /// Newest messages a reader round fetches (UIDNEXT − N to the end);
    /// 0 = the whole mailbox. A soak meant to find leaks wants a bounded
    /// window: a whole-mailbox FETCH every round grows with the mailbox,
    /// and so does the node's working set, with no leak at all.
    pub reader_window: u64,
    /// Share of reader rounds that also change a flag (STORE), so MODSEQs move.
    pub flag_ratio: f64,
    /// The global budget for dials and retries: tokens/s and burst.
    pub dial_rate: f64,
    pub dial_burst: f64,
    pub connect_timeout_ms: u64,
    pub op_timeout_ms: u64,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Messages carrying `X-Meshmail-Fault: drop-ack` / `reuse-uid`, sent
    /// at `fault_at` (a fraction of the run) to the first account.
    pub drop_ack_messages: u32,
    pub reuse_uid_messages: u32,
    pub fault_at: f64,
    /// Sessions that read over JMAP (Email/query + Email/get of the newest
    /// 20, round-robin over the accounts, every `reader_interval_ms`).
    pub jmap_readers: usize,
    /// Send SMTP only to this node (its index; default: any node).
    pub smtp_node: Option<usize>,
    /// Run the IMAP readers, IDLE sessions and JMAP readers only on this
    /// node (default: spread over every node): with `smtp_node`, mail
    /// written through one node is read through another.
    pub read_node: Option<usize>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            accounts: 20,
            skew: Skew::Hot80_20,
            smtp_rate: 0.0,
            smtp_connections: 4,
            message_bytes: 1024,
            max_messages: 1_000_000,
            idle_sessions: 4,
            imap_readers: 2,
            reader_interval_ms: 1000,
            reader_window: 0,
            flag_ratio: 0.3,
            dial_rate: 50.0,
            dial_burst: 20.0,
            connect_timeout_ms: 2000,
            op_timeout_ms: 15000,
            backoff_base_ms: 50,
            backoff_max_ms: 2000,
            drop_ack_messages: 0,
            reuse_uid_messages: 0,
            fault_at: 0.5,
            jmap_readers: 0,
            smtp_node: None,
            read_node: None,
        }
    }
}

/// The client-side fate of one load id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fate {
    Acked,
    Refused,
    Unknown,
}

#[derive(Debug, Default, Serialize, Clone)]
pub struct Counters {
    pub attempted: u64,
    pub acked: u64,
    pub refused: u64,
    pub unknown: u64,
    pub not_sent: u64,
    pub dials: u64,
    pub dial_failures: u64,
    pub idle_exists: u64,
    pub idle_reconnects: u64,
    pub reader_rounds: u64,
    pub reader_errors: u64,
    pub flag_stores: u64,
    pub fault_messages_acked: u64,
    pub jmap_rounds: u64,
    pub jmap_errors: u64,
}

pub struct Shared {
    pub cfg: LoadConfig,
    targets: Vec<NodeAddrs>,
    bucket: TokenBucket,
    started: Instant,
    pub(crate) deadline: Instant,
    stop: AtomicBool,
    paused: AtomicBool,
    pub(crate) inflight: AtomicU64,
    acked_total: AtomicU64,
    next_seq: AtomicU64,
    /// load id → (account index, fate).
    pub ids: Mutex<HashMap<String, (u32, Fate)>>,
    /// (account index, when its 250 arrived) of every acknowledged message:
    /// the client-observed write gaps around faults (chaos `write_gap`).
    pub acked_at: Mutex<Vec<(u32, Instant)>>,
    pub counters: Mutex<Counters>,
    pub smtp_latency: Mutex<Histogram<u64>>,
    pub imap_latency: Mutex<Histogram<u64>>,
    pub observations: Mutex<Vec<Observation>>,
    faults: Mutex<Vec<&'static str>>,
    /// After a reuse-uid message: (account, its load id, until when) no
    /// other message goes to that mailbox until a reader has seen it there,
    /// so the reused UID is one a reader saw holding another message.
    hold: Mutex<Option<(u32, String, Instant)>>,
}

/// A running load. Dropping it does not stop it: call [`Load::stop`].
pub struct Load {
    pub shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

impl Shared {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }

    fn op_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.op_timeout_ms)
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.connect_timeout_ms)
    }

    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(
            Duration::from_millis(self.cfg.backoff_base_ms),
            Duration::from_millis(self.cfg.backoff_max_ms),
        )
    }

    fn target(&self) -> &NodeAddrs {
        &self.targets[rand::rng().random_range(0..self.targets.len())]
    }

    /// Where SMTP goes: `smtp_node`, else any node.
    fn smtp_target(&self) -> &NodeAddrs {
        match self.cfg.smtp_node {
            Some(n) => &self.targets[n % self.targets.len()],
            None => self.target(),
        }
    }

    /// Where IDLE session `i` waits: `read_node`, else spread over the
    /// nodes by index.
    fn idle_target(&self, i: usize) -> &NodeAddrs {
        &self.targets[self.cfg.read_node.unwrap_or(i) % self.targets.len()]
    }

    /// Where a reader's round (IMAP or JMAP) goes: `read_node`, else any
    /// node.
    pub(crate) fn read_target(&self) -> &NodeAddrs {
        match self.cfg.read_node {
            Some(n) => &self.targets[n % self.targets.len()],
            None => self.target(),
        }
    }

    /// Waits while paused; false once the load should end.
    pub(crate) async fn gate(&self) -> bool {
        while self.paused.load(Ordering::Relaxed) && self.running() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.running()
    }

    /// Takes a dial token from the global budget, counting the dial.
    pub(crate) async fn dial_token(&self) -> bool {
        let ok = self.bucket.take(self.deadline).await && self.running();
        if ok {
            self.counters.lock().expect("counters").dials += 1;
        }
        ok
    }

    fn held(&self, account_ix: u32) -> bool {
        let mut h = self.hold.lock().expect("hold");
        if h.as_ref().is_some_and(|x| x.2 <= Instant::now()) {
            *h = None;
        }
        h.as_ref().is_some_and(|x| x.0 == account_ix)
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut Counters)) {
        f(&mut self.counters.lock().expect("counters"));
    }
}

impl Load {
    /// Starts every worker against `targets`; it stops by itself after `run_for`.
    pub fn start(cfg: LoadConfig, targets: Vec<NodeAddrs>, run_for: Duration) -> Load {
        assert!(!targets.is_empty(), "a load needs at least one node");
        let now = Instant::now();
        let shared = Arc::new(Shared {
            bucket: TokenBucket::new(cfg.dial_rate, cfg.dial_burst),
            targets,
            started: now,
            deadline: now + run_for,
            stop: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            inflight: AtomicU64::new(0),
            acked_total: AtomicU64::new(0),
            acked_at: Mutex::new(Vec::new()),
            next_seq: AtomicU64::new(0),
            ids: Mutex::new(HashMap::new()),
            counters: Mutex::new(Counters::default()),
            smtp_latency: Mutex::new(hist()),
            imap_latency: Mutex::new(hist()),
            observations: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            hold: Mutex::new(None),
            cfg,
        });
        let mut tasks = Vec::new();
        let tickets = if shared.cfg.smtp_rate > 0.0 {
            let (tx, rx) = tokio::sync::mpsc::channel::<()>(shared.cfg.smtp_connections.max(1) * 2);
            tasks.push(tokio::spawn(pacer(shared.clone(), tx)));
            Some(Arc::new(tokio::sync::Mutex::new(rx)))
        } else {
            None
        };
        for _ in 0..shared.cfg.smtp_connections {
            tasks.push(tokio::spawn(smtp_worker(shared.clone(), tickets.clone())));
        }
        for i in 0..shared.cfg.idle_sessions {
            tasks.push(tokio::spawn(idle_worker(shared.clone(), i)));
        }
        for i in 0..shared.cfg.imap_readers {
            tasks.push(tokio::spawn(reader_worker(shared.clone(), i)));
        }
        for i in 0..shared.cfg.jmap_readers {
            tasks.push(tokio::spawn(crate::load_jmap::reader(shared.clone(), i)));
        }
        if shared.cfg.drop_ack_messages + shared.cfg.reuse_uid_messages > 0 {
            tasks.push(tokio::spawn(fault_scheduler(shared.clone(), run_for)));
        }
        Load { shared, tasks }
    }

    /// Stops starting new operations and waits until none is in flight
    /// (bounded by `max_wait`): a quiet point for actor accounting.
    pub async fn pause(&self, max_wait: Duration) {
        self.shared.paused.store(true, Ordering::Relaxed);
        let until = Instant::now() + max_wait;
        while self.shared.inflight.load(Ordering::Relaxed) > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::Relaxed);
    }

    /// Stops every worker and waits for them (each is bounded by its timeouts).
    pub async fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(60), t).await;
        }
    }

    pub fn acked(&self) -> u64 {
        self.shared.acked_total.load(Ordering::Relaxed)
    }

    pub fn summary(&self) -> LoadSummary {
        let s = &self.shared;
        let c = s.counters.lock().expect("counters").clone();
        let q = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let sl = s.smtp_latency.lock().expect("hist");
        let il = s.imap_latency.lock().expect("hist");
        let elapsed = s.started.elapsed().as_secs_f64();
        LoadSummary {
            elapsed_s: elapsed,
            acked_per_s: c.acked as f64 / elapsed.max(1e-9),
            smtp_ms: [q(&sl, 0.5), q(&sl, 0.9), q(&sl, 0.99), sl.max() as f64 / 1000.0],
            imap_ms: [q(&il, 0.5), q(&il, 0.9), q(&il, 0.99), il.max() as f64 / 1000.0],
            counters: c,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    pub elapsed_s: f64,
    pub acked_per_s: f64,
    /// p50, p90, p99, max in milliseconds.
    pub smtp_ms: [f64; 4],
    pub imap_ms: [f64; 4],
    pub counters: Counters,
}

impl LoadSummary {
    pub fn markdown(&self) -> String {
        let c = &self.counters;
        let mut s = String::from("| load | value |\n|---|---:|\n");
        for (k, v) in [
            ("elapsed s", format!("{:.1}", self.elapsed_s)),
            ("acked msg/s", format!("{:.1}", self.acked_per_s)),
            ("attempted", c.attempted.to_string()),
            ("acked (250)", c.acked.to_string()),
            ("refused (4xx/5xx)", c.refused.to_string()),
            ("unknown outcome (timeout/drop after DATA)", c.unknown.to_string()),
            ("not sent (failed before DATA)", c.not_sent.to_string()),
            ("dials / failed", format!("{} / {}", c.dials, c.dial_failures)),
            ("SMTP accept ms p50/p90/p99/max", fmt4(&self.smtp_ms)),
            ("IMAP op ms p50/p90/p99/max", fmt4(&self.imap_ms)),
            (
                "IDLE EXISTS seen / reconnects",
                format!("{} / {}", c.idle_exists, c.idle_reconnects),
            ),
            (
                "reader rounds / errors / flag stores",
                format!("{} / {} / {}", c.reader_rounds, c.reader_errors, c.flag_stores),
            ),
        ] {
            s.push_str(&format!("| {k} | {v} |\n"));
        }
        s
    }
}

fn fmt4(v: &[f64; 4]) -> String {
    format!("{:.1} / {:.1} / {:.1} / {:.1}", v[0], v[1], v[2], v[3])
}

/// Releases tickets at the target rate; a full channel means the workers
/// are behind, and the ticket is dropped rather than queued without bound.
async fn pacer(s: Arc<Shared>, tx: tokio::sync::mpsc::Sender<()>) {
    let period = Duration::from_secs_f64(1.0 / s.cfg.smtp_rate);
    let mut next = Instant::now();
    while s.running() {
        next += period;
        tokio::time::sleep_until(next.into()).await;
        if !s.paused.load(Ordering::Relaxed) {
            let _ = tx.try_send(());
        }
    }
}

fn message(s: &Shared, id: &str, to: &str, fault: Option<&str>) -> String {
    let seq = s.next_seq.fetch_add(1, Ordering::Relaxed);
    let mut m = format!(
        "From: Soak <load@soak.example>\r\nTo: <{to}>\r\nSubject: load {seq}\r\n\
         Message-ID: <{id}@soak.example>\r\n{LOAD_ID_HEADER}: {id}\r\n"
    );
    if let Some(f) = fault {
        m.push_str(&format!("X-Meshmail-Fault: {f}\r\n"));
    }
    m.push_str("\r\n");
    while m.len() < s.cfg.message_bytes {
        m.push_str("the quick brown fox jumps over the lazy dog, again and again and again.\r\n");
    }
    m
}

async fn smtp_worker(s: Arc<Shared>, tickets: Option<Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<()>>>>) {
    let mut backoff = s.backoff();
    let mut conn: Option<SmtpClient> = None;
    while s.gate().await {
        if s.acked_total.load(Ordering::Relaxed) >= s.cfg.max_messages {
            break;
        }
        if let Some(t) = &tickets {
            let got = tokio::time::timeout(Duration::from_millis(200), async { t.lock().await.recv().await }).await;
            if !matches!(got, Ok(Some(()))) {
                continue;
            }
        }
        if conn.is_none() {
            if !s.dial_token().await {
                break;
            }
            match SmtpClient::connect(&s.smtp_target().smtp, s.connect_timeout(), s.op_timeout()).await {
                Ok(c) => conn = Some(c),
                Err(_) => {
                    s.count(|c| c.dial_failures += 1);
                    backoff.wait(s.deadline).await;
                    continue;
                }
            }
        }
        let fault = s.faults.lock().expect("faults").pop();
        let account_ix = pick_account(&s, fault);
        let to = account(account_ix);
        let id = uuid::Uuid::new_v4().to_string();
        let msg = message(&s, &id, &to, fault);
        s.inflight.fetch_add(1, Ordering::Relaxed);
        let t = Instant::now();
        let outcome = conn
            .as_mut()
            .expect("connected")
            .send_message("load@soak.example", &to, &msg)
            .await;
        s.inflight.fetch_sub(1, Ordering::Relaxed);
        tally(&s, account_ix, id, fault, &outcome);
        if outcome == Outcome::Acked {
            s.acked_at.lock().expect("acked_at").push((account_ix, Instant::now()));
            s.acked_total.fetch_add(1, Ordering::Relaxed);
            s.smtp_latency
                .lock()
                .expect("hist")
                .record(t.elapsed().as_micros() as u64)
                .ok();
            backoff.reset();
        } else {
            if let Some(f) = fault {
                // The fault must be acknowledged exactly as often as asked: try again.
                s.faults.lock().expect("faults").push(f);
            }
            // Any failure may have left the connection mid-reply: start afresh.
            conn = None;
            backoff.wait(s.deadline).await;
        }
    }
    if let Some(c) = conn {
        let _ = tokio::time::timeout(Duration::from_secs(2), c.quit()).await;
    }
}

/// The account a message goes to: a fault message to the first; otherwise
/// by the skew, but a held mailbox (see `fault_scheduler`) gets nothing new.
fn pick_account(s: &Shared, fault: Option<&str>) -> u32 {
    if fault.is_some() {
        return 0;
    }
    let ix = s.cfg.skew.pick(s.cfg.accounts, &mut rand::rng());
    if s.held(ix) {
        (ix + 1) % s.cfg.accounts.max(1)
    } else {
        ix
    }
}

/// Records what became of message `id`: its fate for the golden check
/// (none when it cannot have been stored), the hold a reuse-uid fault
/// starts, and the counters.
fn tally(s: &Shared, account_ix: u32, id: String, fault: Option<&str>, outcome: &Outcome) {
    let fate = match outcome {
        Outcome::Acked => Some(Fate::Acked),
        Outcome::Refused(_) => Some(Fate::Refused),
        Outcome::Unknown(_) => Some(Fate::Unknown),
        Outcome::NotSent(_) => None,
    };
    if fault == Some("reuse-uid") && *outcome == Outcome::Acked {
        *s.hold.lock().expect("hold") = Some((account_ix, id.clone(), Instant::now() + Duration::from_secs(10)));
    }
    if let Some(f) = fate {
        s.ids.lock().expect("ids").insert(id, (account_ix, f));
    }
    s.count(|c| {
        c.attempted += 1;
        match outcome {
            Outcome::Acked => c.acked += 1,
            Outcome::Refused(_) => c.refused += 1,
            Outcome::Unknown(_) => c.unknown += 1,
            Outcome::NotSent(_) => c.not_sent += 1,
        }
        if fault.is_some() && fate == Some(Fate::Acked) {
            c.fault_messages_acked += 1;
        }
    });
}

/// Queues the fault messages once the run reaches `fault_at`.
async fn fault_scheduler(s: Arc<Shared>, run_for: Duration) {
    let at = s.started + run_for.mul_f64(s.cfg.fault_at.clamp(0.0, 0.95));
    tokio::time::sleep_until(at.into()).await;
    // Hold the first mailbox (no other message goes there) until a reader
    // has observed it completely, so the UID a reuse-uid message takes
    // again is one a reader already saw holding another message.
    let first = account(0);
    let held_at = Instant::now();
    *s.hold.lock().expect("hold") = Some((0, String::new(), held_at + Duration::from_secs(20)));
    while s.running() && s.held(0) {
        let seen = s
            .observations
            .lock()
            .expect("obs")
            .iter()
            // Deliveries in flight when the hold began have landed by then.
            .any(|o| o.mailbox == first && !o.messages.is_empty() && o.start > held_at + Duration::from_millis(500));
        if seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut f = s.faults.lock().expect("faults");
    f.extend(std::iter::repeat_n("drop-ack", s.cfg.drop_ack_messages as usize));
    f.extend(std::iter::repeat_n("reuse-uid", s.cfg.reuse_uid_messages as usize));
}

async fn imap_session(s: &Shared, addr: &str, user: &str) -> anyhow::Result<ImapClient> {
    let mut c = ImapClient::connect_with(addr, None, s.connect_timeout(), s.op_timeout()).await?;
    c.login(user, PASSWORD).await?;
    Ok(c)
}

async fn idle_worker(s: Arc<Shared>, i: usize) {
    let mut backoff = s.backoff();
    let user = account(s.cfg.skew.pick(s.cfg.accounts, &mut rand::rng()));
    'session: while s.running() {
        if !s.dial_token().await {
            break;
        }
        let addr = s.idle_target(i).imap.clone();
        let mut c = match imap_session(&s, &addr, &user).await {
            Ok(c) => c,
            Err(_) => {
                s.count(|c| c.dial_failures += 1);
                backoff.wait(s.deadline).await;
                continue;
            }
        };
        if c.cmd("SELECT INBOX").await.is_err() || c.idle().await.is_err() {
            backoff.wait(s.deadline).await;
            continue;
        }
        backoff.reset();
        let renew = Instant::now() + Duration::from_secs(300);
        while s.running() && Instant::now() < renew {
            match c.idle_wait(Duration::from_millis(500)).await {
                Ok(Some(l)) if l.contains("EXISTS") => s.count(|c| c.idle_exists += 1),
                Ok(_) => {}
                Err(_) => {
                    s.count(|c| c.idle_reconnects += 1);
                    backoff.wait(s.deadline).await;
                    continue 'session;
                }
            }
        }
        // Leave IDLE before the RFC's 30-minute limit, or at the end.
        let _ = c.idle_done().await;
        let _ = c.cmd("LOGOUT").await;
    }
}

/// One reader round: observe a mailbox (SELECT with CONDSTORE, then every
/// UID with its MODSEQ and load id, or only the newest `window` UIDs), then
/// maybe change one flag. UIDNEXT only grows, so a window's start does too,
/// and the history checks stay sound: a UID below the highest seen is one
/// an earlier window covered.
pub async fn observe(
    c: &mut ImapClient,
    mailbox_owner: &str,
    window: u64,
    imap_latency: Option<&Mutex<Histogram<u64>>>,
) -> anyhow::Result<Observation> {
    let start = Instant::now();
    let (sel, _) = c.cmd("SELECT INBOX (CONDSTORE)").await?;
    let uidvalidity = sel.iter().find_map(|l| number_after(l, "UIDVALIDITY")).unwrap_or(0);
    let highest_modseq = sel.iter().find_map(|l| number_after(l, "HIGHESTMODSEQ")).unwrap_or(0);
    let uidnext = sel.iter().find_map(|l| number_after(l, "UIDNEXT")).unwrap_or(1);
    let first = if window == 0 {
        1
    } else {
        uidnext.saturating_sub(window).max(1)
    };
    let t = Instant::now();
    let (fetch, _) = c
        .cmd(&format!(
            "UID FETCH {first}:* (UID MODSEQ BODY.PEEK[HEADER.FIELDS (X-MESHMAIL-LOAD-ID)])"
        ))
        .await?;
    if let Some(h) = imap_latency {
        h.lock().expect("hist").record(t.elapsed().as_micros() as u64).ok();
    }
    let messages = fetch
        .iter()
        .filter(|r| r.contains(" FETCH "))
        .filter_map(|r| Some((number_after(r, "UID")?, header_value(r, LOAD_ID_HEADER))))
        .collect();
    Ok(Observation {
        mailbox: mailbox_owner.to_string(),
        uidvalidity,
        highest_modseq,
        start,
        end: Instant::now(),
        messages,
    })
}

async fn reader_worker(s: Arc<Shared>, i: usize) {
    let mut backoff = s.backoff();
    let mut next_box = i as u32;
    while s.gate().await {
        let user = account(next_box % s.cfg.accounts.max(1));
        if !s.dial_token().await {
            break;
        }
        s.inflight.fetch_add(1, Ordering::Relaxed);
        let round = async {
            let mut c = imap_session(&s, &s.read_target().imap, &user).await?;
            let o = observe(&mut c, &user, s.cfg.reader_window, Some(&s.imap_latency)).await?;
            let uids: Vec<u64> = o.messages.iter().map(|(u, _)| *u).collect();
            {
                let mut hold = s.hold.lock().expect("hold");
                let seen = hold
                    .as_ref()
                    .is_some_and(|(_, id, _)| o.messages.iter().any(|(_, m)| m.as_deref() == Some(id.as_str())));
                if seen {
                    *hold = None;
                }
            }
            s.observations.lock().expect("obs").push(o);
            let store = !uids.is_empty() && rand::rng().random_bool(s.cfg.flag_ratio.clamp(0.0, 1.0));
            if store {
                let (uid, flag) = {
                    let mut rng = rand::rng();
                    let uid = uids[rng.random_range(0..uids.len())];
                    (uid, ["\\Seen", "\\Flagged", "$Soak"][rng.random_range(0..3)])
                };
                let op = if rand::rng().random_bool(0.5) { "+" } else { "-" };
                let t = Instant::now();
                c.cmd(&format!("UID STORE {uid} {op}FLAGS ({flag})")).await?;
                s.imap_latency
                    .lock()
                    .expect("hist")
                    .record(t.elapsed().as_micros() as u64)
                    .ok();
                s.count(|c| c.flag_stores += 1);
            } else if let Some(&uid) = uids.last() {
                // The read half of the mix: one whole body.
                c.cmd(&format!("UID FETCH {uid} (BODY.PEEK[])")).await?;
            }
            let _ = c.cmd("LOGOUT").await;
            anyhow::Ok(())
        };
        let r = round.await;
        s.inflight.fetch_sub(1, Ordering::Relaxed);
        s.count(|c| {
            c.reader_rounds += 1;
            if r.is_err() {
                c.reader_errors += 1;
            }
        });
        if r.is_err() {
            backoff.wait(s.deadline).await;
            continue;
        }
        backoff.reset();
        next_box = next_box.wrapping_add(s.cfg.imap_readers.max(1) as u32);
        let jitter = rand::rng().random_range(0..=s.cfg.reader_interval_ms / 2);
        tokio::time::sleep(Duration::from_millis(s.cfg.reader_interval_ms / 2 + jitter)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_80_20_hits_the_hot_fifth() {
        let mut rng = rand::rng();
        let hot = (0..10_000).filter(|_| Skew::Hot80_20.pick(10, &mut rng) < 2).count();
        assert!((7_500..8_500).contains(&hot), "{hot}");
        let uni = (0..10_000).filter(|_| Skew::Uniform.pick(10, &mut rng) < 2).count();
        assert!((1_500..2_500).contains(&uni), "{uni}");
    }

    #[test]
    fn skew_parses_from_toml() {
        #[derive(Deserialize)]
        struct T {
            skew: Skew,
        }
        let t: T = toml::from_str("skew = \"80/20\"").unwrap();
        assert_eq!(t.skew, Skew::Hot80_20);
    }
}
