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
    let started = Instant::now();
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        hist: Mutex::new(Histogram::<u64>::new(3)?),
        quarter: (spec.messages / 4).max(1),
        marks: Mutex::new(Vec::new()),
        body: "x".repeat(spec.size.saturating_sub(120).max(1)),
        deadline: Instant::now() + Duration::from_secs(spec.max_secs),
        recipients: spec.recipients.clone(),
        addr: spec.addr.clone(),
        hello: spec.hello,
        total: spec.messages,
        first: spec.first,
    });
    let workers: Vec<_> = (0..spec.connections)
        .map(|_| {
            let shared = shared.clone();
            std::thread::spawn(move || worker(&shared))
        })
        .collect();
    let mut sent = 0;
    for w in workers {
        sent += w.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let quarter = shared.quarter;
    let h = shared.hist.lock().expect("hist");
    let mut marks = shared.marks.lock().expect("marks").clone();
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

/// What the connections share: the next message number to send, the count
/// done (and when each quarter of it was reached), the latencies.
struct Shared {
    next: AtomicU64,
    done: AtomicU64,
    hist: Mutex<Histogram<u64>>,
    quarter: u64,
    marks: Mutex<Vec<(u64, Instant)>>,
    body: String,
    deadline: Instant,
    recipients: Vec<String>,
    addr: String,
    hello: &'static str,
    total: u64,
    first: u64,
}

/// One connection: takes message numbers until they or the time run out;
/// returns how many it sent.
fn worker(s: &Shared) -> anyhow::Result<u64> {
    let mut conn = Conn::open(&s.addr)?;
    conn.reply()?;
    conn.w.write_all(format!("{} bench\r\n", s.hello).as_bytes())?;
    conn.reply()?;
    let mut sent = 0;
    while Instant::now() < s.deadline {
        let n = s.next.fetch_add(1, Ordering::Relaxed);
        if n >= s.total {
            break;
        }
        let rcpt = &s.recipients[(n % s.recipients.len() as u64) as usize];
        let t = Instant::now();
        conn.transaction(rcpt, s.first + n, &s.body)?;
        s.hist.lock().expect("hist").record(t.elapsed().as_micros() as u64).ok();
        let k = s.done.fetch_add(1, Ordering::Relaxed) + 1;
        if k.is_multiple_of(s.quarter) {
            s.marks.lock().expect("marks").push((k, Instant::now()));
        }
        sent += 1;
    }
    conn.w.write_all(b"QUIT\r\n")?;
    Ok(sent)
}

struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(REPLY_TIMEOUT_S)))?;
        stream.set_nodelay(true)?;
        let w = stream.try_clone()?;
        Ok(Conn {
            w,
            r: BufReader::new(stream),
        })
    }

    /// The code of the next reply, its continuation lines skipped.
    fn reply(&mut self) -> anyhow::Result<u16> {
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                bail!("connection closed");
            }
            if line.as_bytes().get(3) != Some(&b'-') {
                return Ok(line.get(..3).unwrap_or("0").parse()?);
            }
        }
    }

    /// One message: the envelope pipelined up to DATA, the content after
    /// the 354.
    fn transaction(&mut self, rcpt: &str, id: u64, body: &str) -> anyhow::Result<()> {
        self.w
            .write_all(format!("MAIL FROM:<load@remote.example>\r\nRCPT TO:<{rcpt}>\r\nDATA\r\n").as_bytes())?;
        let codes = [self.reply()?, self.reply()?, self.reply()?];
        if codes != [250, 250, 354] {
            bail!("unexpected replies {codes:?} to {rcpt}");
        }
        self.w.write_all(
            format!("Subject: bench {id}\r\nMessage-ID: <bench{id}@remote.example>\r\n\r\n{body}\r\n.\r\n").as_bytes(),
        )?;
        let code = self.reply()?;
        if code != 250 {
            bail!("unexpected reply {code} after the content");
        }
        Ok(())
    }
}
