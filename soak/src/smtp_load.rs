//! The client side of `bench smtp`: N messages of a fixed size over C
//! connections (SMTP `EHLO` or LMTP `LHLO`), message n to recipient
//! n mod R, each transaction pipelined up to DATA (RFC 2920), the content
//! sent after the 354. Bounded in count and in time.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;

/// How long one reply may take before the run fails.
const REPLY_TIMEOUT_S: u64 = 30;

#[derive(Clone)]
pub struct LoadSpec {
    pub addr: String,
    /// `EHLO` (SMTP) or `LHLO` (LMTP).
    pub hello: &'static str,
    pub recipients: Vec<String>,
    pub messages: u64,
    pub connections: usize,
    pub size: usize,
    pub max_secs: u64,
    /// Number of the first message (a prefill and the measured run that
    /// follows it get distinct subjects).
    pub first: u64,
}

pub struct LoadResult {
    pub sent: u64,
    pub elapsed_s: f64,
    pub accept_p50_ms: f64,
    pub accept_p99_ms: f64,
    /// msg/s over the first and the last quarter of the messages: flat
    /// means the store's growth during the run did not slow it.
    pub first_quarter_msg_per_s: f64,
    pub last_quarter_msg_per_s: f64,
}

pub fn run(spec: &LoadSpec) -> anyhow::Result<LoadResult> {
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let quarter = (spec.messages / 4).max(1);
    let marks = Arc::new(Mutex::new(Vec::<(u64, Instant)>::new()));
    let body = "x".repeat(spec.size.saturating_sub(120).max(1));
    let deadline = Instant::now() + Duration::from_secs(spec.max_secs);
    let started = Instant::now();
    let recipients = Arc::new(spec.recipients.clone());
    let workers: Vec<_> = (0..spec.connections)
        .map(|_| {
            let (next, done, hist, marks, body, recipients) = (
                next.clone(),
                done.clone(),
                hist.clone(),
                marks.clone(),
                body.clone(),
                recipients.clone(),
            );
            let (addr, hello, total, first) = (spec.addr.clone(), spec.hello, spec.messages, spec.first);
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let stream = TcpStream::connect(&addr)?;
                stream.set_read_timeout(Some(Duration::from_secs(REPLY_TIMEOUT_S)))?;
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
                w.write_all(format!("{hello} bench\r\n").as_bytes())?;
                reply()?;
                let mut sent = 0;
                while Instant::now() < deadline {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        break;
                    }
                    let rcpt = &recipients[(n % recipients.len() as u64) as usize];
                    let t = Instant::now();
                    w.write_all(format!("MAIL FROM:<load@remote.example>\r\nRCPT TO:<{rcpt}>\r\nDATA\r\n").as_bytes())?;
                    let codes = [reply()?, reply()?, reply()?];
                    if codes != [250, 250, 354] {
                        bail!("unexpected replies {codes:?} to {rcpt}");
                    }
                    let id = first + n;
                    w.write_all(
                        format!("Subject: bench {id}\r\nMessage-ID: <bench{id}@remote.example>\r\n\r\n{body}\r\n.\r\n")
                            .as_bytes(),
                    )?;
                    let code = reply()?;
                    if code != 250 {
                        bail!("unexpected reply {code} after the content");
                    }
                    hist.lock().expect("hist").record(t.elapsed().as_micros() as u64).ok();
                    let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if k % quarter == 0 {
                        marks.lock().expect("marks").push((k, Instant::now()));
                    }
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
    let elapsed_s = started.elapsed().as_secs_f64();
    let h = hist.lock().expect("hist");
    let mut marks = marks.lock().expect("marks").clone();
    marks.sort_by_key(|(k, _)| *k);
    let at = |k: u64| marks.iter().find(|(m, _)| *m == k).map(|(_, t)| *t);
    let rate = |from: Option<Instant>, to: Option<Instant>| match (from, to) {
        (Some(a), Some(b)) if b > a => quarter as f64 / (b - a).as_secs_f64(),
        _ => 0.0,
    };
    Ok(LoadResult {
        sent,
        elapsed_s,
        accept_p50_ms: h.value_at_quantile(0.5) as f64 / 1000.0,
        accept_p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
        first_quarter_msg_per_s: rate(Some(started), at(quarter)),
        last_quarter_msg_per_s: rate(at(3 * quarter), at(4 * quarter)),
    })
}
