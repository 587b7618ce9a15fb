//! `meshmail-soak bench mailbox`: a person with a big mailbox (issue 15),
//! one client, measured side by side with Dovecot's IMAP in one run.
//!
//! Per server (meshmail; an earlier meshmail build with
//! `--baseline-meshmail`; Dovecot when installed), in every run:
//!
//! 1. a fresh folder of `--folder-messages` generated varied messages of
//!    about 10 KB ([`crate::mail_gen::folder`]), APPENDed one by one with
//!    synchronizing literals and Nagle on, as Python's imaplib does (msg/s);
//!    then `--literal-plus-messages` APPENDs with LITERAL+, one write each
//!    (ms each);
//! 2. `SELECT` + `FETCH 1:* (UID FLAGS ENVELOPE RFC822.SIZE INTERNALDATE)`;
//! 3. four SEARCHes: SUBJECT, FROM, UNSEEN, LARGER (their sum, and each);
//! 4. `STORE 1:* +FLAGS (\Seen)`;
//! 5. on the INBOX of `--inbox-messages` 1 KiB messages (filled once per
//!    server before the runs — meshmail with pipelined LITERAL+ APPENDs
//!    over several connections, Dovecot by writing its maildir, since its
//!    APPENDs to one big maildir crawl — then read once to warm it): `SELECT INBOX`,
//!    `FETCH 1:* (UID FLAGS)`, `UID SEARCH UNSEEN`;
//! 6. `--search-sessions` sessions on that INBOX, each repeating
//!    `SEARCH SUBJECT invoice` for `--search-seconds` (searches/s, all
//!    sessions together).
//!
//! Every answer is checked (message counts, SEARCH hit counts against what
//! the generator knows), so a server cannot look fast by answering wrong.
//! Servers take turns within each run; the table gives medians over
//! `--runs` and the ratio meshmail / Dovecot (below 1: meshmail faster).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use clap::Args;
use serde::Serialize;

use crate::bench_store::{BenchStore, RunStore};
use crate::dovecot_imap::{self, DovecotImap};
use crate::imap_client::ImapClient;
use crate::mail_gen::{self, GenMessage};
use crate::node_proc::{NodeProc, meshmail_binary, setup_account_on};

#[derive(Debug, Args)]
pub struct MailboxArgs {
    /// Messages of the varied ~10 KB folder.
    #[arg(long, default_value_t = 2000)]
    pub folder_messages: usize,
    /// Messages of the 1 KiB INBOX (0 skips its rows).
    #[arg(long, default_value_t = 30_000)]
    pub inbox_messages: usize,
    /// APPENDs of the LITERAL+ row (into their own folder).
    #[arg(long, default_value_t = 200)]
    pub literal_plus_messages: usize,
    /// Runs (the table gives medians).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the generated mail.
    #[arg(long, default_value_t = 15)]
    pub seed: u64,
    /// Connections filling the INBOX.
    #[arg(long, default_value_t = 4)]
    pub fill_connections: usize,
    /// Sessions of the concurrent-search row: each EXAMINEs the INBOX and
    /// repeats `SEARCH SUBJECT invoice` for `--search-seconds` (0 skips
    /// the row). The figure: 8 sessions over 10,000 messages.
    #[arg(long, default_value_t = 8)]
    pub search_sessions: usize,
    /// How long the concurrent-search row runs, per server and run.
    #[arg(long, default_value_t = 5)]
    pub search_seconds: u64,
    /// Run Dovecot's IMAP as the peer when installed (`auto`), or not (`off`).
    #[arg(long, default_value = "auto")]
    pub peer: String,
    /// The meshmail binary (default: next to this one).
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    /// An earlier meshmail build run in the same invocation as server
    /// `meshmail-base`: before/after figures from one run.
    #[arg(long)]
    pub baseline_meshmail: Option<PathBuf>,
    /// TOML lines for `meshmail-base`'s config, under its `[imap]` table
    /// (a leading `[imap]` line is allowed; another table header starts
    /// that table): an A/B of one setting with the same binary, e.g.
    /// `--baseline-config 'search_cache_mb = 0'` (no envelope cache).
    #[arg(long)]
    pub baseline_config: Option<String>,
    /// Also measure server `meshmail-fdb`: this build with its store on
    /// the FoundationDB cluster of this cluster file, under a key prefix
    /// of its own (needs this bench and meshmail built with `--features
    /// fdb`; `.ci/fdb.sh start` makes a one-process cluster).
    #[arg(long)]
    pub fdb_cluster: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

const USER: &str = "bigmbox@bench.example";
const PASSWORD: &str = "bench";
/// APPENDs written per pipelined batch while filling the INBOX.
const FILL_BATCH: usize = 64;

/// Row names, in table order.
const APPEND_SYNC: &str = "APPEND (synchronizing literals, Nagle on), msg/s";
const APPEND_LP: &str = "APPEND with LITERAL+ in one write, ms each";
const SELECT_FETCH: &str = "SELECT + FETCH 1:* (UID FLAGS ENVELOPE RFC822.SIZE INTERNALDATE)";
const SEARCHES: &str = "4 SEARCHes (SUBJECT, FROM, UNSEEN, LARGER)";
const FETCH_HEADERS: &str = "FETCH 1:* (BODY.PEEK[HEADER])";
const STORE_SEEN: &str = "STORE 1:* +FLAGS (\\Seen)";
const INBOX_SELECT: &str = "INBOX: SELECT";
const INBOX_FETCH: &str = "INBOX: FETCH 1:* (UID FLAGS)";
const INBOX_UNSEEN: &str = "INBOX: UID SEARCH UNSEEN";
const INBOX_SEARCH_CONCURRENT: &str = "INBOX: SEARCH SUBJECT, concurrent sessions, ops/s";
/// The concurrent row's search, and the word the generator's subjects use.
const CONCURRENT_SEARCH: &str = "SEARCH SUBJECT invoice";

/// The four SEARCHes of the folder row: (label, command).
const SEARCH_COMMANDS: [(&str, &str); 4] = [
    ("SUBJECT", "SEARCH SUBJECT invoice"),
    ("FROM", "SEARCH FROM alice"),
    ("UNSEEN", "SEARCH UNSEEN"),
    ("LARGER", "SEARCH LARGER 20000"),
];

#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub folder_messages: usize,
    pub inbox_messages: usize,
    pub runs: usize,
    pub servers: Vec<String>,
    /// Row → server → figure (ms, or msg/s for the APPEND row).
    pub rows: BTreeMap<String, BTreeMap<String, Figure>>,
    /// Seconds each server took to fill the INBOX (not a measurement).
    pub fill_s: BTreeMap<String, f64>,
}

/// A server under test; the guard keeps its process alive.
struct Server {
    name: String,
    addr: String,
    _guard: Guard,
}

enum Guard {
    /// Dropped in this order: the node stops before its keys are cleared.
    Meshmail {
        _node: NodeProc,
        _store: RunStore,
        _dir: tempfile::TempDir,
    },
    Dovecot {
        _server: DovecotImap,
    },
}

pub fn run(args: MailboxArgs) -> anyhow::Result<()> {
    ensure!(args.runs >= 1, "--runs must be at least 1");
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let servers = start_servers(&args, &bin)?;
    let folder = mail_gen::folder(args.folder_messages, args.seed);
    let inbox = mail_gen::inbox(args.inbox_messages, args.seed);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut report = Report {
        folder_messages: args.folder_messages,
        inbox_messages: args.inbox_messages,
        runs: args.runs,
        servers: servers.iter().map(|s| s.name.clone()).collect(),
        rows: BTreeMap::new(),
        fill_s: BTreeMap::new(),
    };
    let mut samples: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    rt.block_on(async {
        if !inbox.is_empty() {
            for s in &servers {
                let secs = fill_and_warm(s, &inbox, args.fill_connections).await?;
                report.fill_s.insert(s.name.clone(), secs);
            }
        }
        for run in 0..args.runs {
            // Servers take turns, starting with a different one each run.
            for k in 0..servers.len() {
                let s = &servers[(run + k) % servers.len()];
                for (row, v) in measured_run(&args, s, run, &folder, &inbox).await? {
                    samples
                        .entry(row)
                        .or_default()
                        .entry(s.name.clone())
                        .or_default()
                        .push(v);
                }
            }
        }
        anyhow::Ok(())
    })?;
    for (row, by_server) in samples {
        let figs = by_server.into_iter().map(|(s, v)| (s, figure(v))).collect();
        report.rows.insert(row, figs);
    }
    print_table(&report);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// The servers under test, in the order of the table's columns: this
/// build, the baseline build, this build on FDB, Dovecot.
fn start_servers(args: &MailboxArgs, bin: &std::path::Path) -> anyhow::Result<Vec<Server>> {
    let mut servers = vec![start_meshmail("meshmail", bin, "", &BenchStore::Sqlite)?];
    if let Some(base) = &args.baseline_meshmail {
        let extra = args.baseline_config.as_deref().unwrap_or_default();
        servers.push(start_meshmail("meshmail-base", base, extra, &BenchStore::Sqlite)?);
    }
    if let Some(cluster) = &args.fdb_cluster {
        let fdb = BenchStore::fdb_or_sqlite(Some(cluster));
        servers.push(start_meshmail("meshmail-fdb", bin, "", &fdb)?);
    }
    match (args.peer.as_str(), dovecot_imap::binary()) {
        ("off", _) => println!("note: peer off: Dovecot not run"),
        (_, None) => println!("note: Dovecot's IMAP (dovecot-imapd) is not installed: no peer figures"),
        (_, Some(bin)) => {
            let d = DovecotImap::start(&bin, USER, PASSWORD)?;
            servers.push(Server {
                name: "dovecot".into(),
                addr: d.addr.clone(),
                _guard: Guard::Dovecot { _server: d },
            });
        }
    }
    Ok(servers)
}

/// Fills `s`'s INBOX (not measured) and reads once what the measured runs
/// read, so every server starts warm; returns the fill's seconds.
async fn fill_and_warm(s: &Server, inbox: &[GenMessage], connections: usize) -> anyhow::Result<f64> {
    let t = Instant::now();
    match &s._guard {
        // Dovecot's maildir is written directly: see
        // `DovecotImap::fill_inbox_maildir` for why.
        Guard::Dovecot { _server: d } => d.fill_inbox_maildir(inbox.iter().map(|m| (m.seen, m.raw.as_slice())))?,
        Guard::Meshmail { .. } => fill_inbox(&s.addr, inbox, connections)
            .await
            .with_context(|| format!("filling {}'s INBOX", s.name))?,
    }
    let secs = t.elapsed().as_secs_f64();
    println!("{}: INBOX filled with {} messages in {secs:.1} s", s.name, inbox.len());
    let mut c = session(&s.addr).await?;
    inbox_rows(&mut c, inbox).await?;
    Ok(secs)
}

/// One run's rows on one server, the concurrent search's included when asked.
async fn measured_run(
    args: &MailboxArgs,
    s: &Server,
    run: usize,
    folder: &[GenMessage],
    inbox: &[GenMessage],
) -> anyhow::Result<Vec<(String, f64)>> {
    let mut figures = one_run(&s.addr, run, folder, inbox, args.literal_plus_messages)
        .await
        .with_context(|| format!("run {run} on {}", s.name))?;
    if !inbox.is_empty() && args.search_sessions > 0 && args.search_seconds > 0 {
        let ops = concurrent_search(&s.addr, inbox, args.search_sessions, args.search_seconds)
            .await
            .with_context(|| format!("concurrent search, run {run} on {}", s.name))?;
        figures.push((INBOX_SEARCH_CONCURRENT.into(), ops));
    }
    Ok(figures)
}

/// `extra`: TOML merged into the `[imap]` table of the node's config (a
/// table header in it starts a table of its own).
fn start_meshmail(name: &str, bin: &std::path::Path, extra: &str, on: &BenchStore) -> anyhow::Result<Server> {
    let dir = tempfile::tempdir()?;
    let store = RunStore::new(on);
    let global = store.global_args();
    setup_account_on(bin, dir.path(), &global, USER, PASSWORD)?;
    let cfg = dir.path().join("bench.toml");
    let extra = extra.trim().strip_prefix("[imap]").unwrap_or(extra);
    std::fs::write(
        &cfg,
        format!("[imap]\nallow_plaintext_auth_on_loopback = true\n{extra}\n"),
    )?;
    let config = ["--config", cfg.to_str().context("utf-8 path")?];
    let node = NodeProc::start_with_global(bin, dir.path(), &global, &config)?;
    Ok(Server {
        name: name.to_string(),
        addr: node.addr("imap")?,
        _guard: Guard::Meshmail {
            _node: node,
            _store: store,
            _dir: dir,
        },
    })
}

/// How long one read may wait while filling: Dovecot serializes APPENDs
/// to one maildir, so a pipelined batch can wait behind the others'.
const FILL_OP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

async fn session(addr: &str) -> anyhow::Result<ImapClient> {
    session_with(addr, crate::imap_client::OP_TIMEOUT).await
}

async fn session_with(addr: &str, op_timeout: std::time::Duration) -> anyhow::Result<ImapClient> {
    let mut c = ImapClient::connect_with(addr, None, crate::imap_client::OP_TIMEOUT, op_timeout).await?;
    c.login(USER, PASSWORD).await?;
    Ok(c)
}

fn flags_of(m: &GenMessage) -> &'static str {
    if m.seen { "\\Seen" } else { "" }
}

/// Fills INBOX over `connections` sessions, each taking every n-th batch.
async fn fill_inbox(addr: &str, inbox: &[GenMessage], connections: usize) -> anyhow::Result<()> {
    let connections = connections.max(1);
    let batches: Vec<&[GenMessage]> = inbox.chunks(FILL_BATCH).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..connections {
        let mine: Vec<Vec<(&'static str, Vec<u8>)>> = batches
            .iter()
            .skip(c)
            .step_by(connections)
            .map(|b| b.iter().map(|m| (flags_of(m), m.raw.clone())).collect())
            .collect();
        let addr = addr.to_string();
        tasks.spawn(async move {
            let mut s = session_with(&addr, FILL_OP_TIMEOUT).await?;
            for batch in mine {
                let refs: Vec<(&str, &[u8])> = batch.iter().map(|(f, r)| (*f, r.as_slice())).collect();
                s.append_pipelined("INBOX", &refs).await?;
            }
            let _ = s.cmd("LOGOUT").await;
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

/// Runs `command` and returns (untagged responses, elapsed ms).
async fn timed(c: &mut ImapClient, command: &str) -> anyhow::Result<(Vec<String>, f64)> {
    let t = Instant::now();
    let (untagged, _) = c.cmd(command).await?;
    Ok((untagged, t.elapsed().as_secs_f64() * 1000.0))
}

/// The number of hits of a `* SEARCH …` answer.
fn hits(untagged: &[String]) -> anyhow::Result<usize> {
    let line = untagged
        .iter()
        .find(|l| l.starts_with("* SEARCH"))
        .context("no * SEARCH response")?;
    Ok(line["* SEARCH".len()..].split_whitespace().count())
}

fn exists(untagged: &[String]) -> Option<usize> {
    untagged.iter().find_map(|l| {
        let rest = l.strip_prefix("* ")?;
        let (n, what) = rest.trim_end().split_once(' ')?;
        (what == "EXISTS").then(|| n.parse().ok()).flatten()
    })
}

fn fetches(untagged: &[String]) -> usize {
    untagged.iter().filter(|l| l.contains(" FETCH (")).count()
}

/// The INBOX rows: (row, ms) each, answers checked.
async fn inbox_rows(c: &mut ImapClient, inbox: &[GenMessage]) -> anyhow::Result<Vec<(String, f64)>> {
    let (sel, select_ms) = timed(c, "SELECT INBOX").await?;
    ensure!(exists(&sel) == Some(inbox.len()), "INBOX EXISTS {:?}", exists(&sel));
    let (f, fetch_ms) = timed(c, "FETCH 1:* (UID FLAGS)").await?;
    ensure!(
        fetches(&f) == inbox.len(),
        "FETCH gave {} of {}",
        fetches(&f),
        inbox.len()
    );
    let (u, unseen_ms) = timed(c, "UID SEARCH UNSEEN").await?;
    let want = inbox.iter().filter(|m| !m.seen).count();
    ensure!(
        hits(&u)? == want,
        "UID SEARCH UNSEEN: {} hits, {want} expected",
        hits(&u)?
    );
    c.cmd("UNSELECT").await?;
    Ok(vec![
        (INBOX_SELECT.into(), select_ms),
        (INBOX_FETCH.into(), fetch_ms),
        (INBOX_UNSEEN.into(), unseen_ms),
    ])
}

/// `sessions` sessions EXAMINE the INBOX, then each repeats
/// [`CONCURRENT_SEARCH`] until `seconds` have passed (bounded by time;
/// every answer's hit count checked): searches per second, all sessions.
async fn concurrent_search(addr: &str, inbox: &[GenMessage], sessions: usize, seconds: u64) -> anyhow::Result<f64> {
    let want = inbox
        .iter()
        .filter(|m| m.subject.to_ascii_lowercase().contains("invoice"))
        .count();
    let mut clients = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let mut c = session(addr).await?;
        c.cmd("EXAMINE INBOX").await?;
        clients.push(c);
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(sessions + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for mut c in clients {
        let barrier = barrier.clone();
        tasks.spawn(async move {
            barrier.wait().await;
            let deadline = Instant::now() + std::time::Duration::from_secs(seconds);
            let mut ops = 0u64;
            while Instant::now() < deadline {
                let (u, _) = c.cmd(CONCURRENT_SEARCH).await?;
                ensure!(
                    hits(&u)? == want,
                    "{CONCURRENT_SEARCH}: {} hits, {want} expected",
                    hits(&u)?
                );
                ops += 1;
            }
            let _ = c.cmd("LOGOUT").await;
            anyhow::Ok(ops)
        });
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut total = 0u64;
    while let Some(r) = tasks.join_next().await {
        total += r??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// What each folder SEARCH must find, from the generator's knowledge.
fn expected_hits(folder: &[GenMessage], label: &str) -> usize {
    folder
        .iter()
        .filter(|m| match label {
            "SUBJECT" => m.subject.to_ascii_lowercase().contains("invoice"),
            "FROM" => m.from.to_ascii_lowercase().contains("alice"),
            "UNSEEN" => !m.seen,
            _ => m.raw.len() > 20_000,
        })
        .count()
}

async fn one_run(
    addr: &str,
    run: usize,
    folder: &[GenMessage],
    inbox: &[GenMessage],
    literal_plus: usize,
) -> anyhow::Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    let mut c = session(addr).await?;
    let name = format!("Bench{run}");
    let lp_name = format!("BenchLp{run}");
    c.cmd(&format!("CREATE {name}")).await?;
    c.cmd(&format!("CREATE {lp_name}")).await?;
    append_rows(&mut c, &name, &lp_name, folder, literal_plus, &mut out).await?;
    folder_rows(&mut c, &name, folder, &mut out).await?;
    if !inbox.is_empty() {
        out.extend(inbox_rows(&mut c, inbox).await?);
    }
    // Not measured: leave the account as it was for the next run.
    c.cmd(&format!("DELETE {name}")).await?;
    c.cmd(&format!("DELETE {lp_name}")).await?;
    let _ = c.cmd("LOGOUT").await;
    Ok(out)
}

/// The APPEND rows: the folder appended as imaplib does, then (when asked)
/// `literal_plus` messages with LITERAL+ into `lp_name`.
async fn append_rows(
    c: &mut ImapClient,
    name: &str,
    lp_name: &str,
    folder: &[GenMessage],
    literal_plus: usize,
    out: &mut Vec<(String, f64)>,
) -> anyhow::Result<()> {
    // APPEND as imaplib does: Nagle on, literal and CRLF in two writes.
    c.set_nodelay(false)?;
    let t = Instant::now();
    for m in folder {
        c.append_sync_literal_flags(name, flags_of(m), &m.raw).await?;
    }
    out.push((APPEND_SYNC.into(), folder.len() as f64 / t.elapsed().as_secs_f64()));
    c.set_nodelay(true)?;
    if literal_plus > 0 {
        let t = Instant::now();
        for m in folder.iter().cycle().take(literal_plus) {
            c.append_literal_plus(lp_name, &m.raw).await?;
        }
        out.push((
            APPEND_LP.into(),
            t.elapsed().as_secs_f64() * 1000.0 / literal_plus as f64,
        ));
    }
    Ok(())
}

/// The rows on the appended folder: SELECT + FETCH, the headers, the
/// SEARCHes (each checked against the generator), STORE \Seen; it ends
/// with the folder unselected.
async fn folder_rows(
    c: &mut ImapClient,
    name: &str,
    folder: &[GenMessage],
    out: &mut Vec<(String, f64)>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let (sel, _) = c.cmd(&format!("SELECT {name}")).await?;
    let (f, _) = c.cmd("FETCH 1:* (UID FLAGS ENVELOPE RFC822.SIZE INTERNALDATE)").await?;
    out.push((SELECT_FETCH.into(), t.elapsed().as_secs_f64() * 1000.0));
    ensure!(exists(&sel) == Some(folder.len()), "folder EXISTS {:?}", exists(&sel));
    ensure!(
        fetches(&f) == folder.len(),
        "FETCH gave {} of {}",
        fetches(&f),
        folder.len()
    );

    // Every header of the folder, as a client rebuilding its cache asks.
    let (f, ms) = timed(c, FETCH_HEADERS).await?;
    ensure!(
        fetches(&f) == folder.len(),
        "FETCH BODY.PEEK[HEADER] gave {} of {}",
        fetches(&f),
        folder.len()
    );
    out.push((FETCH_HEADERS.into(), ms));

    let mut total = 0.0;
    for (label, command) in SEARCH_COMMANDS {
        let (u, ms) = timed(c, command).await?;
        let want = expected_hits(folder, label);
        if hits(&u)? != want {
            bail!("{command}: {} hits, {want} expected", hits(&u)?);
        }
        out.push((format!("  SEARCH {label}"), ms));
        total += ms;
    }
    out.push((SEARCHES.into(), total));

    let (_, ms) = timed(c, "STORE 1:* +FLAGS (\\Seen)").await?;
    out.push((STORE_SEEN.into(), ms));
    let (u, _) = c.cmd("SEARCH UNSEEN").await?;
    ensure!(hits(&u)? == 0, "after STORE \\Seen: {} unseen", hits(&u)?);
    c.cmd("UNSELECT").await?;
    Ok(())
}

/// Median, min and max of samples (shared by the benches that print them).
pub(crate) fn figure(mut v: Vec<f64>) -> Figure {
    v.sort_by(|a, b| a.total_cmp(b));
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    Figure {
        median,
        min: v[0],
        max: v[v.len() - 1],
        samples: v,
    }
}

fn row_order(name: &str) -> usize {
    [
        APPEND_SYNC,
        APPEND_LP,
        SELECT_FETCH,
        FETCH_HEADERS,
        SEARCHES,
        "  SEARCH SUBJECT",
        "  SEARCH FROM",
        "  SEARCH UNSEEN",
        "  SEARCH LARGER",
        STORE_SEEN,
        INBOX_SELECT,
        INBOX_FETCH,
        INBOX_UNSEEN,
        INBOX_SEARCH_CONCURRENT,
    ]
    .iter()
    .position(|r| *r == name)
    .unwrap_or(usize::MAX)
}

fn print_table(r: &Report) {
    println!(
        "\nbench mailbox: folder {} × ~10 KB, INBOX {} × 1 KiB, median (min–max) of {} runs; ms unless said \
         (the ratio of a msg/s row: above 1 is meshmail faster, of a ms row: below 1)\n",
        r.folder_messages, r.inbox_messages, r.runs
    );
    let has_dovecot = r.servers.iter().any(|s| s == "dovecot");
    let mut head = "| operation |".to_string();
    for s in &r.servers {
        head.push_str(&format!(" {s} |"));
    }
    if has_dovecot {
        head.push_str(" meshmail / dovecot |");
    }
    println!("{head}");
    println!("|---|{}", "---:|".repeat(r.servers.len() + usize::from(has_dovecot)));
    let mut rows: Vec<(&String, &BTreeMap<String, Figure>)> = r.rows.iter().collect();
    rows.sort_by_key(|(name, _)| row_order(name));
    for (name, figs) in rows {
        let mut line = format!("| {name} |");
        for s in &r.servers {
            match figs.get(s) {
                Some(f) => line.push_str(&format!(" {} ({}–{}) |", num(f.median), num(f.min), num(f.max))),
                None => line.push_str(" – |"),
            }
        }
        if has_dovecot {
            match (figs.get("meshmail"), figs.get("dovecot")) {
                (Some(m), Some(d)) if d.median > 0.0 => line.push_str(&format!(" {:.2} |", m.median / d.median)),
                _ => line.push_str(" – |"),
            }
        }
        println!("{line}");
    }
    for (s, secs) in &r.fill_s {
        println!("\n{s}: INBOX fill {secs:.1} s (not measured)");
    }
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}
