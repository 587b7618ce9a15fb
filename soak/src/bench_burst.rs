//! `meshmail-soak bench burst`: where a node's memory goes after an
//! imaptest-like burst, and whether it comes back.
//!
//! N clients (20 by default) hammer one node's IMAP for S seconds with a
//! mix like imaptest's (FETCH flags, envelopes and bodies, SEARCH, STORE,
//! APPEND with a synchronizing literal, EXPUNGE, and a reconnect every few
//! dozen commands), then every client leaves and the node idles. The bench
//! samples the node's RSS before, through and after the burst and while it
//! idles, with SQLite's heap (`meshmail_kv_sqlite_heap_bytes`) and the
//! thread count beside it, so growth can be told apart: caches with a bound,
//! or memory that never returns. `--max-rss-after-mib` turns the idle figure
//! into a check (exit 1 when over).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::imap_client::ImapClient;
use crate::node_proc::{NodeProc, meshmail_binary, setup_account};

#[derive(Debug, Args)]
pub struct BurstArgs {
    /// Concurrent IMAP clients in the burst.
    #[arg(long, default_value_t = 20)]
    pub clients: usize,
    /// Length of the burst, seconds.
    #[arg(long, default_value_t = 30)]
    pub secs: u64,
    /// Messages delivered to INBOX before the burst.
    #[arg(long, default_value_t = 2_000)]
    pub messages: u64,
    /// How long the node idles after the burst, seconds (RSS sampled each second).
    #[arg(long, default_value_t = 30)]
    pub idle_secs: u64,
    /// Fail (exit 1) when the RSS at the end of the idle phase is above this, MiB.
    #[arg(long)]
    pub max_rss_after_mib: Option<f64>,
    /// Random seed of the command mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    /// TOML lines added to the node's `[imap]` table, to compare a setting
    /// with one binary, e.g. `--imap-config 'hot_cache_mb = 0'`.
    #[arg(long, default_value = "")]
    pub imap_config: String,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One reading of the node.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the burst began (negative: before it).
    pub t_s: f64,
    pub rss_mib: f64,
    pub sqlite_heap_mib: f64,
    pub threads: u64,
}

#[derive(Debug, Serialize)]
pub struct BurstFigures {
    pub clients: usize,
    pub secs: u64,
    pub commands: u64,
    pub reconnects: u64,
    pub before: Sample,
    pub peak_rss_mib: f64,
    pub end_of_burst: Sample,
    pub end_of_idle: Sample,
    pub samples: Vec<Sample>,
}

const USER: &str = "burst@bench.example";
const PASSWORD: &str = "bench";
/// Commands a client sends before it logs out and connects again.
const COMMANDS_PER_SESSION: u32 = 40;

pub fn run(args: BurstArgs) -> anyhow::Result<()> {
    crate::bench_imap::raise_fd_limit();
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let dir = tempfile::tempdir()?;
    setup_account(&bin, dir.path(), USER, PASSWORD)?;
    let cfg = dir.path().join("bench.toml");
    std::fs::write(
        &cfg,
        format!(
            "[imap]\nallow_plaintext_auth_on_loopback = true\nmax_sessions_per_account = 100000\n{}\n",
            args.imap_config
        ),
    )?;
    let node = NodeProc::start(&bin, dir.path(), &["--config", cfg.to_str().expect("utf-8 path")])?;
    crate::bench_imap::preload_to(&node, USER, args.messages)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let figures = rt.block_on(burst(&node, &args))?;
    print_figures(&figures);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&figures)?)?;
    }
    if let Some(max) = args.max_rss_after_mib
        && figures.end_of_idle.rss_mib > max
    {
        eprintln!(
            "bench burst: FAILED: RSS after {} s idle is {:.1} MiB (at most {max} MiB)",
            args.idle_secs, figures.end_of_idle.rss_mib
        );
        std::process::exit(1);
    }
    Ok(())
}

fn sample(node: &NodeProc, t0: Instant) -> anyhow::Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", node.pid()))?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let metrics = node.metrics().unwrap_or_default();
    let sqlite = metrics
        .lines()
        .find_map(|l| l.strip_prefix("meshmail_kv_sqlite_heap_bytes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    let now = Instant::now();
    let t_s = if now >= t0 {
        now.duration_since(t0).as_secs_f64()
    } else {
        -t0.duration_since(now).as_secs_f64()
    };
    Ok(Sample {
        t_s,
        rss_mib: field("VmRSS:") as f64 / 1024.0,
        sqlite_heap_mib: sqlite / (1024.0 * 1024.0),
        threads: field("Threads:"),
    })
}

async fn burst(node: &NodeProc, args: &BurstArgs) -> anyhow::Result<BurstFigures> {
    let addr = node.addr("imap")?;
    // The gauge is set every 5 s: let it catch up with the preload.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let t0 = Instant::now() + Duration::from_millis(1);
    let before = sample(node, t0)?;
    let deadline = t0 + Duration::from_secs(args.secs);
    let (commands, reconnects) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for c in 0..args.clients {
        let (addr, commands, reconnects) = (addr.clone(), commands.clone(), reconnects.clone());
        let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
        let messages = args.messages.max(1);
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            while Instant::now() < deadline {
                client_session(&addr, &mut rng, messages, deadline, &commands).await?;
                reconnects.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let mut samples = vec![before.clone()];
    let mut peak = before.rss_mib;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let s = sample(node, t0)?;
        peak = peak.max(s.rss_mib);
        samples.push(s);
    }
    for t in tasks {
        t.await?.context("a burst client failed")?;
    }
    let end_of_burst = sample(node, t0)?;
    peak = peak.max(end_of_burst.rss_mib);
    samples.push(end_of_burst.clone());
    for _ in 0..args.idle_secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        samples.push(sample(node, t0)?);
    }
    let end_of_idle = samples.last().cloned().expect("samples taken");
    Ok(BurstFigures {
        clients: args.clients,
        secs: args.secs,
        commands: commands.load(Ordering::Relaxed),
        reconnects: reconnects.load(Ordering::Relaxed),
        before,
        peak_rss_mib: peak,
        end_of_burst,
        end_of_idle,
        samples,
    })
}

/// A 4 KiB message for APPEND.
fn appended(n: u64) -> Vec<u8> {
    let mut m =
        format!("From: burst@example.test\r\nTo: burst@example.test\r\nSubject: burst {n}\r\n\r\n").into_bytes();
    while m.len() < 4 * 1024 {
        m.extend_from_slice(b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\r\n");
    }
    m
}

/// One login: SELECT INBOX, then a weighted mix of commands, then LOGOUT.
async fn client_session(
    addr: &str,
    rng: &mut rand::rngs::StdRng,
    messages: u64,
    deadline: Instant,
    commands: &AtomicU64,
) -> anyhow::Result<()> {
    let mut c = ImapClient::connect(addr, None).await?;
    c.login(USER, PASSWORD).await?;
    c.cmd("SELECT INBOX").await?;
    for _ in 0..COMMANDS_PER_SESSION {
        if Instant::now() >= deadline {
            break;
        }
        let lo = rng.random_range(1..=messages);
        let hi = (lo + rng.random_range(0..50)).min(messages);
        let word = ["apple", "banana", "cherry", "damson"][rng.random_range(0..4)];
        match rng.random_range(0..100) {
            0..=19 => c.cmd("FETCH 1:* (FLAGS)").await.map(drop)?,
            20..=39 => c
                .cmd(&format!("FETCH {lo}:{hi} (UID ENVELOPE RFC822.SIZE INTERNALDATE)"))
                .await
                .map(drop)?,
            40..=54 => c
                .cmd(&format!("FETCH {lo}:{} (BODY.PEEK[])", (lo + 4).min(messages)))
                .await
                .map(drop)?,
            55..=64 => c.cmd(&format!("SEARCH SUBJECT {word}")).await.map(drop)?,
            65..=79 => {
                let op = if rng.random_bool(0.5) { '+' } else { '-' };
                c.cmd(&format!("STORE {lo}:{hi} {op}FLAGS (\\Seen)")).await.map(drop)?
            }
            80..=94 => {
                let answer = c.append_sync_literal("INBOX", &appended(lo)).await?;
                anyhow::ensure!(answer.contains("OK"), "APPEND refused: {answer}");
            }
            // Remove what the APPENDs added (subject "burst …"; the preload's
            // subjects are fruit), so the mailbox stays about its size.
            _ => {
                let (untagged, _) = c.cmd("UID SEARCH SUBJECT burst").await?;
                let uids: Vec<&str> = untagged
                    .iter()
                    .filter_map(|l| l.trim_end().strip_prefix("* SEARCH"))
                    .flat_map(str::split_whitespace)
                    .collect();
                if !uids.is_empty() {
                    c.cmd(&format!("UID STORE {} +FLAGS.SILENT (\\Deleted)", uids.join(",")))
                        .await?;
                    c.cmd("EXPUNGE").await?;
                }
            }
        }
        commands.fetch_add(1, Ordering::Relaxed);
    }
    let _ = c.cmd("LOGOUT").await;
    Ok(())
}

fn print_figures(f: &BurstFigures) {
    println!(
        "bench burst: {} clients for {} s: {} commands, {} logins",
        f.clients, f.secs, f.commands, f.reconnects
    );
    println!("\n| when | RSS MiB | SQLite heap MiB | threads |\n|---|---:|---:|---:|");
    for (when, s) in [
        ("before", &f.before),
        ("end of burst", &f.end_of_burst),
        ("end of idle", &f.end_of_idle),
    ] {
        println!(
            "| {when} (t = {:.0} s) | {:.1} | {:.1} | {} |",
            s.t_s, s.rss_mib, s.sqlite_heap_mib, s.threads
        );
    }
    println!("\npeak RSS during the burst: {:.1} MiB", f.peak_rss_mib);
}
