//! A kept-alive HTTP/1.1 connection for JMAP requests, as the benches and
//! the load's JMAP readers use it: Basic auth, JSON bodies with
//! Content-Length, every request bounded by [`REQUEST_TIMEOUT`].

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Every request and connect has this deadline.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A kept-alive HTTP/1.1 connection (JSON bodies with Content-Length).
pub struct Conn {
    r: BufReader<tokio::net::tcp::OwnedReadHalf>,
    w: tokio::net::tcp::OwnedWriteHalf,
    host: String,
}

impl Conn {
    pub async fn open(addr: &str) -> anyhow::Result<Conn> {
        let s = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr)).await??;
        s.set_nodelay(true)?;
        let (r, w) = s.into_split();
        Ok(Conn {
            r: BufReader::new(r),
            w,
            host: addr.to_string(),
        })
    }

    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        auth: &str,
        body: &str,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.request_inner(method, path, auth, body))
            .await
            .context("request timed out")?
    }

    async fn request_inner(
        &mut self,
        method: &str,
        path: &str,
        auth: &str,
        body: &str,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        self.w.write_all(head.as_bytes()).await?;
        self.w.write_all(body.as_bytes()).await?;
        let mut status_line = String::new();
        if self.r.read_line(&mut status_line).await? == 0 {
            bail!("connection closed before an answer");
        }
        let status: u16 = status_line
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .context("bad status line")?;
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).await? == 0 {
                bail!("connection closed in headers");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse()?;
            }
        }
        let mut out = vec![0; length];
        self.r.read_exact(&mut out).await?;
        Ok((status, out))
    }
}

/// A Basic `Authorization` header value.
pub fn basic(user: &str, password: &str) -> String {
    use base64_lite::encode;
    format!("Basic {}", encode(format!("{user}:{password}").as_bytes()))
}

/// Standard base64, enough for one header.
mod base64_lite {
    pub fn encode(b: &[u8]) -> String {
        const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in b.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for i in 0..4 {
                out.push(if i <= c.len() {
                    T[((n >> (18 - 6 * i)) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        out
    }
}

/// An error unless the answer is 2xx and holds no method error.
pub fn check_ok(status: u16, body: &[u8], what: &str) -> anyhow::Result<()> {
    if status != 200 && status != 201 {
        bail!("{what}: HTTP {status}: {}", String::from_utf8_lossy(body));
    }
    if body.windows(9).any(|w| w == b"\"error\",{") {
        bail!("{what}: {}", String::from_utf8_lossy(body));
    }
    Ok(())
}
