//! `meshmail-soak bench outbound`: outbound delivery throughput and
//! queue-to-remote latency. One node relays (`[outbound] relay`) to a sink
//! MX this process runs on loopback; C submission connections (AUTH PLAIN)
//! submit N messages, each stamped with the time its submission began; the
//! sink records, per message, when it arrived. msg/s is N over the time from
//! the first submission to the last arrival; latency is arrival minus the
//! stamp (so it includes the submission itself, a few ms).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::node_proc::{NodeProc, meshmail_binary, setup_account};
use crate::sink_mx::{Sink, SinkOptions, unix_ms as now_ms};
use crate::smtp_client::b64;

#[derive(Debug, Args)]
pub struct OutboundArgs {
    /// Messages per run.
    #[arg(long, default_value_t = 2000)]
    pub messages: u64,
    /// Concurrent submission connections.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Runs (the report gives medians).
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
pub struct OutboundFigures {
    pub messages: u64,
    pub delivered: u64,
    pub msg_per_s: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,
}

const USER: &str = "bench@bench.example";
const PASSWORD: &str = "bench";

pub fn run(args: OutboundArgs) -> anyhow::Result<()> {
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let mut all = Vec::new();
    for run in 0..args.runs {
        let f = one_run(&bin, &args)?;
        eprintln!(
            "run {}/{}: {} of {} delivered, {:.0} msg/s, latency p50 {:.0} ms, p99 {:.0} ms",
            run + 1,
            args.runs,
            f.delivered,
            f.messages,
            f.msg_per_s,
            f.latency_p50_ms,
            f.latency_p99_ms
        );
        all.push(f);
    }
    let median = |f: fn(&OutboundFigures) -> f64| {
        let mut v: Vec<f64> = all.iter().map(f).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!(
        "bench outbound: {} messages of {} B over {} submission connections, relayed to a local sink MX, median of {} runs\n",
        args.messages, args.size, args.connections, args.runs
    );
    println!("| msg/s | queue-to-remote p50 ms | p99 ms | max ms |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {:.0} | {:.0} | {:.0} | {:.0} |",
        median(|r| r.msg_per_s),
        median(|r| r.latency_p50_ms),
        median(|r| r.latency_p99_ms),
        median(|r| r.latency_max_ms)
    );
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&all)?)?;
    }
    Ok(())
}

fn one_run(bin: &std::path::Path, args: &OutboundArgs) -> anyhow::Result<OutboundFigures> {
    let sink = Sink::start(SinkOptions::default())?;
    let port = sink.port;
    let dir = tempfile::tempdir()?;
    setup_account(bin, dir.path(), USER, PASSWORD)?;
    let cfg = dir.path().join("bench.toml");
    std::fs::write(
        &cfg,
        format!(
            "[smtp]\nallow_plaintext_auth_on_loopback = true\n\
             [dns]\nresolver = \"127.0.0.1:9\"\n\
             [outbound]\nrelay = \"127.0.0.1:{port}\"\nscan_interval_ms = 100\ndelay_warning_s = 0\n"
        ),
    )?;
    let node = NodeProc::start_with_submission(
        bin,
        dir.path(),
        "127.0.0.1:0",
        &["--config", cfg.to_str().context("utf-8 path")?],
    )?;
    let addr = node.addr("submission")?;
    let next = Arc::new(AtomicU64::new(0));
    let body = "x".repeat(args.size.saturating_sub(200).max(1));
    let started_ms = now_ms();
    let deadline = Instant::now() + Duration::from_secs(args.max_secs);
    let workers: Vec<_> = (0..args.connections)
        .map(|_| {
            let (addr, next, body, total) = (addr.clone(), next.clone(), body.clone(), args.messages);
            std::thread::spawn(move || submit_worker(&addr, &next, &body, total, deadline))
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a submission worker panicked"))??;
    }
    // Wait (bounded) until the sink has every message.
    while (sink.delivered() as u64) < args.messages && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let deliveries = sink.deliveries();
    let delivered = deliveries.len() as u64;
    let mut h = Histogram::<u64>::new(3)?;
    for d in &deliveries {
        if let Some(sent) = d.header("X-Bench-Sent-Ms").and_then(|v| v.parse::<u64>().ok()) {
            let _ = h.record(d.at_ms.saturating_sub(sent).max(1));
        }
    }
    let last_ms = deliveries.iter().map(|d| d.at_ms).max().unwrap_or_else(now_ms);
    drop(node);
    Ok(OutboundFigures {
        messages: args.messages,
        delivered,
        msg_per_s: delivered as f64 / (last_ms.saturating_sub(started_ms) as f64 / 1000.0).max(1e-9),
        latency_p50_ms: h.value_at_quantile(0.5) as f64,
        latency_p99_ms: h.value_at_quantile(0.99) as f64,
        latency_max_ms: h.max() as f64,
    })
}

fn submit_worker(addr: &str, next: &AtomicU64, body: &str, total: u64, deadline: Instant) -> anyhow::Result<()> {
    let stream = TcpStream::connect(addr)?;
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
                return Ok(line.get(..3).unwrap_or("0").parse()?);
            }
        }
    };
    reply()?;
    w.write_all(b"EHLO bench.client\r\n")?;
    reply()?;
    let token = b64(format!("\0{USER}\0{PASSWORD}").as_bytes());
    w.write_all(format!("AUTH PLAIN {token}\r\n").as_bytes())?;
    if reply()? != 235 {
        bail!("AUTH refused");
    }
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= total || Instant::now() > deadline {
            break;
        }
        let msg = format!(
            "MAIL FROM:<{USER}>\r\nRCPT TO:<rcpt{}@remote.bench>\r\nDATA\r\n",
            n % 50
        );
        w.write_all(msg.as_bytes())?;
        for want in [250, 250, 354] {
            let got = reply()?;
            if got != want {
                bail!("submission answered {got}, expected {want}");
            }
        }
        w.write_all(
            format!(
                "X-Bench-Sent-Ms: {}\r\nFrom: {USER}\r\nSubject: bench {n}\r\n\r\n{body}\r\n.\r\n",
                now_ms()
            )
            .as_bytes(),
        )?;
        if reply()? != 250 {
            bail!("submission refused a message");
        }
    }
    let _ = w.write_all(b"QUIT\r\n");
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    Ok(())
}
