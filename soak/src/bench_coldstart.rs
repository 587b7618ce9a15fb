//! `meshmail-soak bench coldstart`: how long a node takes from `exec` to
//! serving, on a store that already holds `--messages` messages (issue 15:
//! ≤ 1 s at 1,000,000 stored messages).
//!
//! The store is filled once over SMTP (16 connections, 1 KiB messages,
//! spread over `--mailboxes` accounts; progress printed per step), or an
//! earlier fill is reused with `--data-dir` (a fill of a million messages
//! takes a quarter of an hour here). Then, `--runs` times, a node process
//! is started on it and timed to two points:
//!
//! - **ready**: the node printed its ready line (listeners bound, shard
//!   leases held, generation taken);
//! - **first SELECT**: a client that connected right then has LOGIN
//!   (argon2 included), `SELECT INBOX` of one account (its messages
//!   counted: the answer is checked) and `FETCH 1:* (UID FLAGS)` answered.
//!
//! The OS page cache is left as it is (a process restart, not a machine
//! boot). The temporary store is deleted at the end unless `--data-dir`
//! names one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, ensure};
use clap::Args;
use serde::Serialize;

use crate::bench_mailbox::figure;
use crate::bench_smtp::{recipients, setup_accounts};
use crate::bench_store::{BenchStore, RunStore};
use crate::imap_client::ImapClient;
use crate::node_proc::{NodeProc, meshmail_binary};
use crate::smtp_load::{self, LoadSpec};

#[derive(Debug, Args)]
pub struct ColdstartArgs {
    /// Messages in the store before the node is restarted.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Accounts the messages are spread over (each its INBOX).
    #[arg(long, default_value_t = 1000)]
    pub mailboxes: usize,
    /// Restarts timed (the report gives medians).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Keep (or reuse) the store here instead of a temporary directory:
    /// when it already holds `meshmail.sqlite`, the fill is skipped.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Hard cap on the fill, seconds.
    #[arg(long, default_value_t = 3600)]
    pub max_fill_secs: u64,
    /// The meshmail binary (default: next to this one).
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Messages sent per fill step (one progress line each).
const FILL_STEP: u64 = 50_000;
const PASSWORD: &str = "bench";

#[derive(Debug, Serialize)]
struct Report {
    messages: u64,
    mailboxes: usize,
    sqlite_bytes: u64,
    fill_s: Option<f64>,
    ready_s: Vec<f64>,
    first_select_s: Vec<f64>,
}

pub fn run(args: ColdstartArgs) -> anyhow::Result<()> {
    ensure!(args.runs >= 1, "--runs must be at least 1");
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let temp = tempfile::tempdir()?;
    let dir = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let rcpts = recipients(args.mailboxes);
    let fill_s = if dir.join("meshmail.sqlite").exists() {
        println!("reusing the store in {} (no fill)", dir.display());
        None
    } else {
        Some(fill(&bin, &dir, &rcpts, &args)?)
    };
    let sqlite_bytes = std::fs::metadata(dir.join("meshmail.sqlite"))?.len();
    // Messages per account: what the checked SELECT must show.
    let per_account = args.messages.div_ceil(args.mailboxes.max(1) as u64);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (mut ready_s, mut first_select_s) = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        let started = Instant::now();
        let node = NodeProc::start(&bin, &dir, &["--allow-plaintext-auth-on-loopback"])?;
        let ready = started.elapsed().as_secs_f64();
        let imap = node.addr("imap")?;
        let exists = rt.block_on(first_select(&imap, &rcpts[0]))?;
        let first = started.elapsed().as_secs_f64();
        ensure!(
            exists.abs_diff(per_account) <= 1,
            "SELECT INBOX showed {exists} messages, {per_account} expected"
        );
        drop(node);
        println!(
            "run {}/{}: ready {ready:.3} s, first SELECT {first:.3} s",
            run + 1,
            args.runs
        );
        ready_s.push(ready);
        first_select_s.push(first);
    }
    let report = Report {
        messages: args.messages,
        mailboxes: args.mailboxes,
        sqlite_bytes,
        fill_s,
        ready_s,
        first_select_s,
    };
    println!(
        "\nbench coldstart: {} stored messages over {} accounts, SQLite file {:.0} MiB, median (min–max) of {} restarts\n",
        report.messages,
        report.mailboxes,
        report.sqlite_bytes as f64 / 1048576.0,
        args.runs
    );
    println!("| from exec to | seconds |\n|---|---:|");
    println!("| ready line | {} |", spread(&report.ready_s));
    println!(
        "| first client served (LOGIN, SELECT INBOX, FETCH 1:* FLAGS) | {} |",
        spread(&report.first_select_s)
    );
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// Fills the store over SMTP in steps of [`FILL_STEP`], printing progress.
fn fill(bin: &Path, dir: &Path, rcpts: &[String], args: &ColdstartArgs) -> anyhow::Result<f64> {
    let kv = RunStore::new(&BenchStore::Sqlite).kv_config(dir, 8192);
    setup_accounts(&kv, rcpts)?;
    let node = NodeProc::start(bin, dir, &[])?;
    let started = Instant::now();
    let mut sent = 0;
    while sent < args.messages {
        let step = FILL_STEP.min(args.messages - sent);
        let left = args.max_fill_secs.saturating_sub(started.elapsed().as_secs());
        ensure!(left > 0, "the fill took longer than --max-fill-secs");
        let spec = LoadSpec {
            addr: node.addr("smtp")?,
            hello: "EHLO",
            recipients: rcpts.to_vec(),
            messages: step,
            connections: 16,
            size: 1024,
            max_secs: left,
            first: sent,
        };
        let load = smtp_load::run(&spec).context("filling the store")?;
        ensure!(load.sent == step, "the fill sent {} of {step}", load.sent);
        sent += step;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "fill: {sent} / {} messages ({:.0} %), {secs:.0} s, {:.0} msg/s",
            args.messages,
            100.0 * sent as f64 / args.messages as f64,
            sent as f64 / secs
        );
    }
    Ok(started.elapsed().as_secs_f64())
}

/// LOGIN, SELECT INBOX (its EXISTS returned), FETCH 1:* (UID FLAGS).
async fn first_select(addr: &str, user: &str) -> anyhow::Result<u64> {
    let mut c = ImapClient::connect(addr, None).await?;
    c.login(user, PASSWORD).await?;
    let (untagged, _) = c.cmd("SELECT INBOX").await?;
    let exists = untagged
        .iter()
        .find_map(|l| l.trim_end().strip_prefix("* ")?.strip_suffix(" EXISTS")?.parse().ok())
        .context("no EXISTS in the SELECT answer")?;
    c.cmd("FETCH 1:* (UID FLAGS)").await?;
    let _ = c.cmd("LOGOUT").await;
    Ok(exists)
}

fn spread(v: &[f64]) -> String {
    let f = figure(v.to_vec());
    format!("{:.3} ({:.3}–{:.3})", f.median, f.min, f.max)
}
