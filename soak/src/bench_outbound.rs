//! `meshmail-soak bench outbound`: outbound delivery throughput and
//! queue-to-remote latency. One node relays (`[outbound] relay`) to a sink
//! MX this process runs on loopback; C submission connections (AUTH PLAIN)
//! submit N messages, each stamped with the time its submission began; the
//! sink records, per message, when it arrived. msg/s is N over the time from
//! the first submission to the last arrival; latency is arrival minus the
//! stamp (so it includes the submission itself, a few ms).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::node_proc::{NodeProc, meshmail_binary, setup_account};

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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn b64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in input.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What the sink saw: arrivals and their latencies.
struct Sink {
    delivered: AtomicU64,
    latencies: Mutex<Histogram<u64>>,
    last_arrival: Mutex<Option<Instant>>,
}

/// The sink MX: accepts everything, as fast as it can, on its own threads.
fn start_sink(sink: Arc<Sink>) -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let sink = sink.clone();
            std::thread::spawn(move || {
                let _ = serve_sink(stream, &sink);
            });
        }
    });
    Ok(port)
}

fn serve_sink(stream: TcpStream, sink: &Sink) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    w.write_all(b"220 sink.bench ESMTP\r\n")?;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
        match verb.as_str() {
            "EHLO" => w.write_all(b"250-sink.bench\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SIZE 100000000\r\n")?,
            "DATA" => {
                w.write_all(b"354 go\r\n")?;
                let mut sent_ms = None;
                let mut body_line = String::new();
                loop {
                    body_line.clear();
                    if r.read_line(&mut body_line)? == 0 {
                        return Ok(());
                    }
                    if body_line == ".\r\n" {
                        break;
                    }
                    if let Some(v) = body_line.strip_prefix("X-Bench-Sent-Ms: ") {
                        sent_ms = v.trim().parse::<u64>().ok();
                    }
                }
                if let Some(sent) = sent_ms {
                    let lat = now_ms().saturating_sub(sent);
                    let _ = sink.latencies.lock().expect("hist").record(lat.max(1));
                }
                sink.delivered.fetch_add(1, Ordering::Relaxed);
                *sink.last_arrival.lock().expect("last") = Some(Instant::now());
                w.write_all(b"250 ok\r\n")?;
            }
            "QUIT" => {
                w.write_all(b"221 bye\r\n")?;
                return Ok(());
            }
            _ => w.write_all(b"250 ok\r\n")?,
        }
    }
}

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
    let sink = Arc::new(Sink {
        delivered: AtomicU64::new(0),
        latencies: Mutex::new(Histogram::new(3)?),
        last_arrival: Mutex::new(None),
    });
    let port = start_sink(sink.clone())?;
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
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.max_secs);
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
    while sink.delivered.load(Ordering::Relaxed) < args.messages && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let delivered = sink.delivered.load(Ordering::Relaxed);
    let end = sink.last_arrival.lock().expect("last").unwrap_or_else(Instant::now);
    let h = sink.latencies.lock().expect("hist").clone();
    drop(node);
    Ok(OutboundFigures {
        messages: args.messages,
        delivered,
        msg_per_s: delivered as f64 / end.duration_since(started).as_secs_f64().max(1e-9),
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

#[cfg(test)]
mod tests {
    #[test]
    fn base64() {
        assert_eq!(super::b64(b"\0u\0p"), "AHUAcA==");
        assert_eq!(super::b64(b"abc"), "YWJj");
    }
}
