//! `meshmail-soak bench imap`: FETCH/SEARCH/STORE throughput with N
//! concurrent sessions on one mailbox, and the resident memory per idle
//! authenticated session with many IDLE sessions on one node.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::sync::Mutex;

use crate::imap_client::ImapClient;
use crate::node_proc::{NodeProc, meshmail_binary, setup_account};

#[derive(Debug, Args)]
pub struct ImapArgs {
    /// Messages preloaded into the mailbox.
    #[arg(long, default_value_t = 500)]
    pub messages: u64,
    /// Concurrent sessions for the throughput part.
    #[arg(long, default_value_t = 8)]
    pub sessions: usize,
    /// Seconds per command mix.
    #[arg(long, default_value_t = 10)]
    pub secs: u64,
    /// IDLE sessions for the memory part (0 skips it).
    #[arg(long, default_value_t = 10_000)]
    pub idle_sessions: usize,
    /// `[imap] park_idle_after_secs` for the node: IDLE sessions park after
    /// this much quiet, and the memory figure is taken once all have
    /// parked; 0 keeps every session in its actor.
    #[arg(long, default_value_t = 2)]
    pub park_idle_after_secs: u64,
    /// Local source addresses 127.0.0.1.. 127.0.0.N to spread connections over.
    #[arg(long, default_value_t = 4)]
    pub source_ips: u8,
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct CommandFigures {
    pub command: String,
    pub ops_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct IdleFigures {
    pub sessions: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    pub kib_per_session: f64,
    /// The heap alone (jemalloc's `allocated`), bytes per session.
    pub heap_bytes_per_session: f64,
    /// Sessions parked when measured (0 with parking off).
    pub parked: u64,
    pub setup_s: f64,
}

const USER: &str = "imapbench@bench.example";
const PASSWORD: &str = "bench";

pub fn run(args: ImapArgs) -> anyhow::Result<()> {
    raise_fd_limit();
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let dir = tempfile::tempdir()?;
    setup_account(&bin, dir.path(), USER, PASSWORD)?;
    let cfg = dir.path().join("bench.toml");
    std::fs::write(
        &cfg,
        format!(
            "[imap]\nallow_plaintext_auth_on_loopback = true\nmax_sessions_per_account = 100000\npark_idle_after_secs = {}\n",
            args.park_idle_after_secs
        ),
    )?;
    let node = NodeProc::start(&bin, dir.path(), &["--config", cfg.to_str().expect("utf-8 path")])?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (commands, idle) = rt.block_on(async {
        preload(&node, args.messages)?;
        let commands = throughput(&node, &args).await?;
        let idle = if args.idle_sessions > 0 {
            Some(idle_memory(&node, &args).await?)
        } else {
            None
        };
        anyhow::Ok((commands, idle))
    })?;
    println!(
        "bench imap: {} messages, {} sessions, {} s per command\n",
        args.messages, args.sessions, args.secs
    );
    println!("| command | ops/s | p50 ms | p99 ms |\n|---|---:|---:|---:|");
    for c in &commands {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} |",
            c.command, c.ops_per_s, c.p50_ms, c.p99_ms
        );
    }
    if let Some(i) = &idle {
        println!(
            "\nIDLE sessions: {} authenticated + selected + idling, {} of them parked; node RSS {} KiB -> {} KiB: {:.1} KiB per session, heap {:.0} bytes per session (setup {:.1} s)",
            i.sessions,
            i.parked,
            i.rss_before_kib,
            i.rss_after_kib,
            i.kib_per_session,
            i.heap_bytes_per_session,
            i.setup_s
        );
    }
    if let Some(p) = &args.json {
        std::fs::write(
            p,
            serde_json::to_vec_pretty(&serde_json::json!({"commands": commands, "idle": idle}))?,
        )?;
    }
    Ok(())
}

fn preload(node: &NodeProc, n: u64) -> anyhow::Result<()> {
    preload_to(node, USER, n)
}

/// Delivers `n` small messages to `user` over one SMTP connection, their
/// subjects "apple|banana|cherry|damson N".
pub(crate) fn preload_to(node: &NodeProc, user: &str, n: u64) -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let stream = std::net::TcpStream::connect(node.addr("smtp")?)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let mut reply = || -> anyhow::Result<String> {
        loop {
            let mut l = String::new();
            r.read_line(&mut l)?;
            if l.as_bytes().get(3) != Some(&b'-') {
                return Ok(l);
            }
        }
    };
    reply()?;
    w.write_all(b"EHLO bench\r\n")?;
    reply()?;
    for i in 0..n {
        let word = ["apple", "banana", "cherry", "damson"][i as usize % 4];
        w.write_all(
            format!(
                "MAIL FROM:<a@remote.example>\r\nRCPT TO:<{user}>\r\nDATA\r\nFrom: A <a@remote.example>\r\n\
                 Subject: {word} {i}\r\n\r\nbody {i} {word}\r\n.\r\n"
            )
            .as_bytes(),
        )?;
        for _ in 0..4 {
            let l = reply()?;
            anyhow::ensure!(l.starts_with('2') || l.starts_with('3'), "preload refused: {l}");
        }
    }
    Ok(())
}

/// What each session of a throughput row runs.
#[derive(Debug, Clone, Copy)]
enum Op {
    Cmd(&'static str),
    AppendSyncLiteral,
}

/// A 10 KiB message for the APPEND row (into its own mailbox, so the other
/// rows see the same INBOX in every run).
fn append_message() -> Vec<u8> {
    let mut m = b"From: bench@example.test\r\nTo: bench@example.test\r\nSubject: append bench\r\n\r\n".to_vec();
    while m.len() < 10 * 1024 {
        m.extend_from_slice(b"The quick brown fox jumps over the lazy dog, again and again and again.\r\n");
    }
    m
}

async fn throughput(node: &NodeProc, args: &ImapArgs) -> anyhow::Result<Vec<CommandFigures>> {
    let addr = node.addr("imap")?;
    let mixes = [
        (
            "FETCH 1:50 (FLAGS ENVELOPE)",
            Op::Cmd("UID FETCH 1:50 (FLAGS ENVELOPE)"),
        ),
        ("FETCH BODY[]", Op::Cmd("UID FETCH 1:10 (BODY.PEEK[])")),
        ("SEARCH SUBJECT", Op::Cmd("UID SEARCH SUBJECT cherry")),
        ("STORE +FLAGS", Op::Cmd("UID STORE 1:20 +FLAGS (\\Flagged)")),
        // Nagle on and the literal's CRLF in its own write, as imaplib does:
        // the server must acknowledge the literal at once (a delayed ACK
        // cost 40 ms per message).
        ("APPEND 10 KiB (synchronizing literal)", Op::AppendSyncLiteral),
    ];
    let mut setup = ImapClient::connect(&addr, None).await?;
    setup.login(USER, PASSWORD).await?;
    setup.cmd("CREATE Bench").await?;
    let _ = setup.cmd("LOGOUT").await;
    let mut out = Vec::new();
    for (name, op) in mixes {
        let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
        let deadline = Instant::now() + Duration::from_secs(args.secs);
        let mut tasks = Vec::new();
        for _ in 0..args.sessions {
            let (addr, hist) = (addr.clone(), hist.clone());
            tasks.push(tokio::spawn(async move {
                let mut c = ImapClient::connect(&addr, None).await?;
                c.login(USER, PASSWORD).await?;
                c.cmd("SELECT INBOX").await?;
                let message = append_message();
                if let Op::AppendSyncLiteral = op {
                    c.set_nodelay(false)?;
                }
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match op {
                        Op::Cmd(command) => {
                            c.cmd(command).await?;
                        }
                        Op::AppendSyncLiteral => {
                            c.append_sync_literal("Bench", &message).await?;
                        }
                    }
                    hist.lock().await.record(t.elapsed().as_micros() as u64).ok();
                    n += 1;
                }
                let _ = c.cmd("LOGOUT").await;
                anyhow::Ok(n)
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await??;
        }
        let h = hist.lock().await;
        out.push(CommandFigures {
            command: name.to_string(),
            ops_per_s: total as f64 / args.secs as f64,
            p50_ms: h.value_at_quantile(0.5) as f64 / 1000.0,
            p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
        });
    }
    Ok(out)
}

async fn idle_memory(node: &NodeProc, args: &ImapArgs) -> anyhow::Result<IdleFigures> {
    let addr = node.addr("imap")?;
    // The node publishes jemalloc's figures every 5 s: wait for a fresh one.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let before = node.rss_kib()?;
    let heap_before = gauge(&node.metrics()?, "meshmail_allocator_allocated_bytes");
    let started = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(256));
    let mut tasks = Vec::with_capacity(args.idle_sessions);
    for i in 0..args.idle_sessions {
        let (addr, sem) = (addr.clone(), sem.clone());
        let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::new(
            127,
            0,
            0,
            1 + (i % args.source_ips.max(1) as usize) as u8,
        ));
        tasks.push(tokio::spawn(async move {
            let permit = sem.acquire_owned().await?;
            let mut c = ImapClient::connect(&addr, Some(ip)).await?;
            c.login(USER, PASSWORD).await?;
            c.cmd("SELECT INBOX").await?;
            c.idle().await?;
            drop(permit);
            anyhow::Ok(c)
        }));
    }
    let mut clients = Vec::with_capacity(args.idle_sessions);
    for t in tasks {
        clients.push(t.await?.context("an IDLE session failed to start")?);
    }
    let setup_s = started.elapsed().as_secs_f64();
    let mut parked = 0.0;
    if args.park_idle_after_secs > 0 {
        // Every session parks once it has been quiet long enough.
        let limit = Instant::now() + Duration::from_secs(args.park_idle_after_secs + 60);
        loop {
            parked = gauge(&node.metrics()?, "meshmail_sessions_parked");
            if parked as usize >= args.idle_sessions || Instant::now() > limit {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // jemalloc returns freed pages after ~1 s (the node's dirty_decay_ms),
    // and its figures are published every 5 s.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let after = node.rss_kib()?;
    let heap_after = gauge(&node.metrics()?, "meshmail_allocator_allocated_bytes");
    drop(clients);
    Ok(IdleFigures {
        sessions: args.idle_sessions,
        rss_before_kib: before,
        rss_after_kib: after,
        kib_per_session: after.saturating_sub(before) as f64 / args.idle_sessions as f64,
        heap_bytes_per_session: (heap_after - heap_before) / args.idle_sessions as f64,
        parked: parked as u64,
        setup_s,
    })
}

/// The sum of a metric's samples over all its labels (0 if absent).
fn gauge(metrics: &str, name: &str) -> f64 {
    crate::http::prom_values(metrics, name).iter().map(|(_, v)| v).sum()
}

pub(crate) fn raise_fd_limit() {
    // SAFETY: plain getrlimit/setrlimit on our own process.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
