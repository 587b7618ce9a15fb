//! A minimal HTTP/1.1 client for the node's loopback HTTP listener:
//! `/status`, `/metrics`, the fault endpoints and the `/mesh/events`
//! NDJSON stream. Hand-rolled because it needs only GET/POST with
//! `Connection: close`, both body framings, and a hard timeout on every
//! step — a paused (SIGSTOPped) node must never hang the runner.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}: timed out")]
    Timeout(&'static str),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed response: {0}")]
    Malformed(String),
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
}

async fn timed<T>(
    what: &'static str,
    limit: Duration,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, HttpError> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(HttpError::Timeout(what)),
    }
}

/// Sends a request and returns the reader positioned at the body, with the
/// status code and whether the body is chunked / its length.
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    limit: Duration,
) -> Result<(u16, Framing, BufReader<TcpStream>), HttpError> {
    let mut s = timed("connect", limit, TcpStream::connect(addr)).await?;
    let req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    timed("write", limit, s.write_all(req.as_bytes())).await?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    timed("status line", limit, r.read_line(&mut line)).await?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| HttpError::Malformed(format!("status line {line:?}")))?;
    let mut framing = Framing::UntilClose;
    loop {
        line.clear();
        if timed("headers", limit, r.read_line(&mut line)).await? == 0 {
            return Err(HttpError::Malformed("headers cut short".into()));
        }
        let h = line.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                framing = Framing::Chunked;
            } else if k == "content-length" && framing != Framing::Chunked {
                framing = Framing::Length(v.parse().map_err(|_| HttpError::Malformed(h.to_string()))?);
            }
        }
    }
    Ok((status, framing, r))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Chunked,
    Length(usize),
    UntilClose,
}

/// Reads the next chunk of a chunked body; `None` at the terminating chunk.
async fn next_chunk(r: &mut BufReader<TcpStream>, limit: Duration) -> Result<Option<Vec<u8>>, HttpError> {
    let mut size_line = String::new();
    if timed("chunk size", limit, r.read_line(&mut size_line)).await? == 0 {
        return Err(HttpError::Malformed("stream closed".into()));
    }
    let hex = size_line.trim().split(';').next().unwrap_or("");
    let n = usize::from_str_radix(hex, 16).map_err(|_| HttpError::Malformed(format!("chunk size {hex:?}")))?;
    let mut buf = vec![0u8; n + 2];
    timed("chunk", limit, r.read_exact(&mut buf)).await?;
    buf.truncate(n);
    Ok(if n == 0 { None } else { Some(buf) })
}

async fn read_body(framing: Framing, r: &mut BufReader<TcpStream>, limit: Duration) -> Result<String, HttpError> {
    let mut body = Vec::new();
    match framing {
        Framing::Length(n) => {
            body.resize(n, 0);
            timed("body", limit, r.read_exact(&mut body)).await?;
        }
        Framing::UntilClose => {
            timed("body", limit, r.read_to_end(&mut body)).await?;
        }
        Framing::Chunked => {
            while let Some(c) = next_chunk(r, limit).await? {
                body.extend_from_slice(&c);
            }
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

async fn call(addr: &str, method: &str, path: &str, limit: Duration) -> Result<String, HttpError> {
    // One deadline for the whole exchange, on top of the per-step ones.
    let fut = async {
        let (status, framing, mut r) = request(addr, method, path, limit).await?;
        let body = read_body(framing, &mut r, limit).await?;
        if !(200..300).contains(&status) {
            return Err(HttpError::Status { status, body });
        }
        Ok(body)
    };
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout("request")),
    }
}

pub async fn get(addr: &str, path: &str, limit: Duration) -> Result<String, HttpError> {
    call(addr, "GET", path, limit).await
}

pub async fn post(addr: &str, path: &str, limit: Duration) -> Result<String, HttpError> {
    call(addr, "POST", path, limit).await
}

/// Streams an NDJSON endpoint: every complete line goes to `tx` until the
/// server closes, the receiver goes away or nothing arrives for `idle`
/// (the node was killed or paused; the caller reconnects if it wants).
pub async fn stream_lines(
    addr: &str,
    path: &str,
    idle: Duration,
    tx: mpsc::UnboundedSender<String>,
) -> Result<(), HttpError> {
    let (status, framing, mut r) = request(addr, "GET", path, Duration::from_secs(5)).await?;
    if !(200..300).contains(&status) {
        let body = read_body(framing, &mut r, Duration::from_secs(5))
            .await
            .unwrap_or_default();
        return Err(HttpError::Status { status, body });
    }
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let data = match framing {
            Framing::Chunked => match next_chunk(&mut r, idle).await? {
                Some(c) => c,
                None => return Ok(()),
            },
            _ => {
                let mut buf = vec![0u8; 4096];
                let n = timed("stream", idle, r.read(&mut buf)).await?;
                if n == 0 {
                    return Ok(());
                }
                buf.truncate(n);
                buf
            }
        };
        pending.extend_from_slice(&data);
        // A JSON line may span chunks: emit only complete lines.
        while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if !text.is_empty() && tx.send(text).is_err() {
                return Ok(());
            }
        }
    }
}

/// Values of one Prometheus metric family, by its label set text
/// (`kind="session"`), summed when a label set repeats.
pub fn prom_values(metrics: &str, name: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for line in metrics.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else { continue };
        let (labels, value) = if let Some(r) = rest.strip_prefix('{') {
            match r.split_once('}') {
                Some((l, v)) => (l.to_string(), v),
                None => continue,
            }
        } else if rest.starts_with(' ') {
            (String::new(), rest)
        } else {
            continue; // a longer name sharing the prefix
        };
        let Some(v) = value.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        match out.iter_mut().find(|(l, _)| *l == labels) {
            Some((_, acc)) => *acc += v,
            None => out.push((labels, v)),
        }
    }
    out
}

/// The value of `label` in a Prometheus label set text.
pub fn label<'a>(labels: &'a str, label: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == label).then(|| v.trim().trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prom_values_by_label() {
        let text = "# TYPE meshmail_actors_live gauge\n\
                    meshmail_actors_live{kind=\"session\"} 3\n\
                    meshmail_actors_live{kind=\"shard\"} 1024\n\
                    meshmail_actors_live_total 9\n\
                    meshmail_queue 2\n";
        let v = prom_values(text, "meshmail_actors_live");
        assert_eq!(v.len(), 2);
        assert_eq!(label(&v[1].0, "kind"), Some("shard"));
        assert_eq!(v[1].1, 1024.0);
        assert_eq!(prom_values(text, "meshmail_queue"), vec![(String::new(), 2.0)]);
    }
}
