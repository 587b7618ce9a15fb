//! `meshmail-soak bench smtp`: N messages of a fixed size over C connections
//! against one node, then the same load against the same server in its
//! no-storage sink mode, so the durable rate is also given as a fraction of
//! the protocol-only ceiling measured in the same run.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::node_proc::{NodeProc, histogram, meshmail_binary, setup_account};

#[derive(Debug, Args)]
pub struct SmtpArgs {
    /// Messages per run.
    #[arg(long, default_value_t = 5000)]
    pub messages: u64,
    /// Concurrent SMTP connections.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Runs per mode (the report gives medians).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Hard cap on each run's duration, seconds.
    #[arg(long, default_value_t = 300)]
    pub max_secs: u64,
    /// The meshmail binary (default: next to this one).
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    pub mode: &'static str,
    pub messages: u64,
    pub msg_per_s: f64,
    pub accept_p50_ms: f64,
    pub accept_p99_ms: f64,
    pub mean_batch: f64,
    pub batch_buckets: Vec<(String, f64)>,
}

const USER: &str = "bench@bench.example";

pub fn run(args: SmtpArgs) -> anyhow::Result<()> {
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let mut all = Vec::new();
    for run in 0..args.runs {
        for (mode, extra) in [("durable", &[][..]), ("sink", &["--bench-sink"][..])] {
            let dir = tempfile::tempdir()?;
            setup_account(&bin, dir.path(), USER, "bench")?;
            let node = NodeProc::start(&bin, dir.path(), extra)?;
            let figures = load(&node, &args, mode)?;
            eprintln!(
                "run {}/{} {mode}: {:.0} msg/s, p50 {:.2} ms, p99 {:.2} ms, mean batch {:.1}",
                run + 1,
                args.runs,
                figures.msg_per_s,
                figures.accept_p50_ms,
                figures.accept_p99_ms,
                figures.mean_batch
            );
            all.push(figures);
        }
    }
    let median = |mode: &str, f: fn(&RunFigures) -> f64| {
        let mut v: Vec<f64> = all.iter().filter(|r| r.mode == mode).map(f).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let durable = median("durable", |r| r.msg_per_s);
    let sink = median("sink", |r| r.msg_per_s);
    println!(
        "bench smtp: {} messages of {} B over {} connections, median of {} runs\n",
        args.messages, args.size, args.connections, args.runs
    );
    println!("| mode | msg/s | accept p50 ms | accept p99 ms | mean batch |");
    println!("|---|---:|---:|---:|---:|");
    for mode in ["durable", "sink"] {
        println!(
            "| {mode} | {:.0} | {:.2} | {:.2} | {:.1} |",
            median(mode, |r| r.msg_per_s),
            median(mode, |r| r.accept_p50_ms),
            median(mode, |r| r.accept_p99_ms),
            median(mode, |r| r.mean_batch)
        );
    }
    println!("\ndurable / sink = {:.2}", durable / sink.max(1e-9));
    if let Some(last) = all.iter().rev().find(|r| r.mode == "durable") {
        println!(
            "batch-size distribution (last durable run, cumulative): {:?}",
            last.batch_buckets
        );
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&all)?)?;
    }
    Ok(())
}

fn load(node: &NodeProc, args: &SmtpArgs, mode: &'static str) -> anyhow::Result<RunFigures> {
    let addr = node.addr("smtp")?;
    let next = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let body = "x".repeat(args.size.saturating_sub(120).max(1));
    let deadline = Instant::now() + Duration::from_secs(args.max_secs);
    let started = Instant::now();
    let workers: Vec<_> = (0..args.connections)
        .map(|_| {
            let (addr, next, hist, body, total) = (addr.clone(), next.clone(), hist.clone(), body.clone(), args.messages);
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let stream = TcpStream::connect(&addr)?;
                stream.set_read_timeout(Some(Duration::from_secs(30)))?;
                stream.set_nodelay(true)?;
                let mut w = stream.try_clone()?;
                let mut r = BufReader::new(stream);
                let mut reply = || -> anyhow::Result<u16> {
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line)? == 0 {
                            bail!("connection closed");
                        }
                        if line.as_bytes().get(3) != Some(&b'-') {
                            return Ok(line[..3].parse()?);
                        }
                    }
                };
                reply()?;
                w.write_all(b"EHLO bench\r\n")?;
                reply()?;
                let mut sent = 0;
                while Instant::now() < deadline {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        break;
                    }
                    let t = Instant::now();
                    let msg = format!(
                        "MAIL FROM:<load@remote.example>\r\nRCPT TO:<{USER}>\r\nDATA\r\nSubject: bench {n}\r\n\r\n{body}\r\n.\r\n"
                    );
                    w.write_all(msg.as_bytes())?;
                    let codes = [reply()?, reply()?, reply()?, reply()?];
                    if codes != [250, 250, 354, 250] {
                        bail!("unexpected replies {codes:?}");
                    }
                    hist.lock().expect("hist").record(t.elapsed().as_micros() as u64).ok();
                    sent += 1;
                }
                w.write_all(b"QUIT\r\n")?;
                Ok(sent)
            })
        })
        .collect();
    let mut sent = 0;
    for w in workers {
        sent += w.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let metrics = node.metrics()?;
    let (bsum, bcount, buckets) = histogram(&metrics, "meshmail_batch_deliveries");
    let h = hist.lock().expect("hist");
    Ok(RunFigures {
        mode,
        messages: sent,
        msg_per_s: sent as f64 / elapsed,
        accept_p50_ms: h.value_at_quantile(0.5) as f64 / 1000.0,
        accept_p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
        mean_batch: if bcount > 0.0 { bsum / bcount } else { 0.0 },
        batch_buckets: buckets,
    })
}
