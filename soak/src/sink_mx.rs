//! A remote MX for loopback tests: accepts every message (or answers 451
//! to every `tempfail_every`-th recipient), as fast as it can, one thread
//! per connection, and records per accepted transaction when it answered
//! 250, to whom, and the `X-` header lines of the message (trace headers,
//! the load's ids). It counts connections (total, open, peak) and
//! transactions, so a test can tell connection reuse and the
//! per-destination cap from the outside. Used by `bench outbound` and the
//! chaos runner's outbound scenario.
//!
//! Bounded: a session ends after `IDLE_TIMEOUT` of silence, a header block
//! is captured up to `HEADER_LINES_MAX` lines, a line up to `LINE_MAX`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
const HEADER_LINES_MAX: usize = 200;
const LINE_MAX: u64 = 64 * 1024;

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One accepted transaction.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// When the sink sent its 250 to the end of data (Unix ms).
    pub at_ms: u64,
    pub mail_from: String,
    /// The recipients the sink accepted.
    pub rcpts: Vec<String>,
    /// `X-` header lines of the message, name lower-cased, value trimmed.
    pub x_headers: Vec<(String, String)>,
    /// Which connection (1-based, in accept order) carried it.
    pub connection: u64,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.x_headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
pub struct SinkStats {
    pub connections_total: AtomicU64,
    pub connections_open: AtomicU64,
    pub connections_peak: AtomicU64,
    pub transactions: AtomicU64,
    pub tempfails: AtomicU64,
    rcpts_seen: AtomicU64,
}

#[derive(Debug, Clone, Default)]
pub struct SinkOptions {
    /// Answer `451 4.3.0` to every n-th RCPT (counted over the sink's life);
    /// 0: never. Exercises the retry path.
    pub tempfail_every: u64,
}

/// A running sink; it serves until the process ends or [`Sink::stop`].
pub struct Sink {
    pub port: u16,
    pub stats: Arc<SinkStats>,
    deliveries: Arc<Mutex<Vec<Delivery>>>,
    stopped: Arc<AtomicBool>,
}

impl Sink {
    pub fn start(options: SinkOptions) -> std::io::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stats = Arc::new(SinkStats::default());
        let deliveries = Arc::new(Mutex::new(Vec::new()));
        let stopped = Arc::new(AtomicBool::new(false));
        let (st, dl, stop) = (stats.clone(), deliveries.clone(), stopped.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let n = st.connections_total.fetch_add(1, Ordering::Relaxed) + 1;
                let open = st.connections_open.fetch_add(1, Ordering::Relaxed) + 1;
                st.connections_peak.fetch_max(open, Ordering::Relaxed);
                let (st, dl, options) = (st.clone(), dl.clone(), options.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, n, &st, &dl, &options);
                    st.connections_open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Ok(Sink {
            port,
            stats,
            deliveries,
            stopped,
        })
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Every transaction accepted so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.lock().expect("deliveries").clone()
    }

    pub fn delivered(&self) -> usize {
        self.deliveries.lock().expect("deliveries").len()
    }

    /// Stops accepting connections (sessions already open run out).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop();
    }
}

fn read_line(r: &mut BufReader<TcpStream>, line: &mut String) -> std::io::Result<usize> {
    line.clear();
    let mut limited = std::io::Read::take(r, LINE_MAX);
    limited.read_line(line)
}

fn serve(
    stream: TcpStream,
    connection: u64,
    stats: &SinkStats,
    deliveries: &Mutex<Vec<Delivery>>,
    options: &SinkOptions,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    w.write_all(b"220 sink.test ESMTP\r\n")?;
    let (mut mail_from, mut rcpts) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        if read_line(&mut r, &mut line)? == 0 {
            return Ok(());
        }
        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
        match verb.as_str() {
            "EHLO" => w.write_all(b"250-sink.test\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SIZE 100000000\r\n")?,
            "MAIL" => {
                mail_from = angle(&line);
                rcpts.clear();
                w.write_all(b"250 2.1.0 ok\r\n")?;
            }
            "RCPT" => w.write_all(rcpt(&line, &mut rcpts, stats, options))?,
            "DATA" => {
                if rcpts.is_empty() {
                    w.write_all(b"554 5.5.1 no valid recipients\r\n")?;
                    continue;
                }
                w.write_all(b"354 go\r\n")?;
                let Some(x_headers) = read_data(&mut r, &mut line)? else {
                    // Cut off before the end of data: nothing was accepted.
                    return Ok(());
                };
                w.write_all(b"250 2.0.0 queued\r\n")?;
                stats.transactions.fetch_add(1, Ordering::Relaxed);
                deliveries.lock().expect("deliveries").push(Delivery {
                    at_ms: unix_ms(),
                    mail_from: std::mem::take(&mut mail_from),
                    rcpts: std::mem::take(&mut rcpts),
                    x_headers,
                    connection,
                });
            }
            "RSET" => {
                mail_from.clear();
                rcpts.clear();
                w.write_all(b"250 2.0.0 ok\r\n")?;
            }
            "QUIT" => {
                w.write_all(b"221 2.0.0 bye\r\n")?;
                return Ok(());
            }
            _ => w.write_all(b"250 ok\r\n")?,
        }
    }
}

/// RCPT: every `tempfail_every`th recipient seen is refused for now (the
/// sender's retry path); the others are taken. Returns the reply.
fn rcpt(line: &str, rcpts: &mut Vec<String>, stats: &SinkStats, options: &SinkOptions) -> &'static [u8] {
    let n = stats.rcpts_seen.fetch_add(1, Ordering::Relaxed) + 1;
    if options.tempfail_every > 0 && n.is_multiple_of(options.tempfail_every) {
        stats.tempfails.fetch_add(1, Ordering::Relaxed);
        b"451 4.3.0 try again later\r\n"
    } else {
        rcpts.push(angle(line));
        b"250 2.1.5 ok\r\n"
    }
}

/// Reads the content up to the lone dot, keeping the first
/// `HEADER_LINES_MAX` `X-` header fields (name lowercased); `None` when
/// the connection ends first.
fn read_data(r: &mut BufReader<TcpStream>, line: &mut String) -> std::io::Result<Option<Vec<(String, String)>>> {
    let mut x_headers = Vec::new();
    let mut in_header = true;
    loop {
        if read_line(r, line)? == 0 {
            return Ok(None);
        }
        if line == ".\r\n" {
            return Ok(Some(x_headers));
        }
        if in_header {
            if line == "\r\n" {
                in_header = false;
            } else if x_headers.len() < HEADER_LINES_MAX
                && line.len() > 2
                && line[..2].eq_ignore_ascii_case("x-")
                && let Some((n, v)) = line.split_once(':')
            {
                x_headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
            }
        }
    }
}

/// The address between `<` and `>` of a MAIL or RCPT line.
fn angle(line: &str) -> String {
    let start = line.find('<').map_or(0, |i| i + 1);
    let end = line[start..].find('>').map_or(line.len(), |i| start + i);
    line[start..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_a_transaction_and_tempfails() {
        let sink = Sink::start(SinkOptions { tempfail_every: 2 }).unwrap();
        let s = TcpStream::connect(sink.addr()).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        let mut expect = |code: &str, r: &mut BufReader<TcpStream>| loop {
            read_line(r, &mut line).unwrap();
            assert!(line.starts_with(code), "{line}");
            if line.as_bytes().get(3) != Some(&b'-') {
                break;
            }
        };
        expect("220", &mut r);
        w.write_all(b"EHLO t\r\n").unwrap();
        expect("250", &mut r);
        w.write_all(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nRCPT TO:<c@y>\r\nDATA\r\n")
            .unwrap();
        expect("250", &mut r);
        expect("250", &mut r);
        expect("451", &mut r);
        expect("354", &mut r);
        w.write_all(b"X-Id: 7\r\nSubject: s\r\n\r\nX-Not: body\r\n.\r\nQUIT\r\n")
            .unwrap();
        expect("250", &mut r);
        expect("221", &mut r);
        let d = sink.deliveries();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].rcpts, vec!["b@y".to_string()]);
        assert_eq!(d[0].header("X-Id"), Some("7"));
        assert_eq!(d[0].header("x-not"), None);
        assert_eq!(sink.stats.tempfails.load(Ordering::Relaxed), 1);
    }
}
