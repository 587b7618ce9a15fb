//! A small async IMAP client for load: tagged commands, literal-aware
//! response reading, hard timeouts on every operation.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Every network operation gives up after this.
pub const OP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct ImapClient {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    next_tag: u64,
}

impl ImapClient {
    pub async fn connect(addr: &str, local_ip: Option<std::net::IpAddr>) -> anyhow::Result<ImapClient> {
        let target: std::net::SocketAddr = addr.parse()?;
        let stream = match local_ip {
            Some(ip) => {
                let sock = tokio::net::TcpSocket::new_v4()?;
                sock.bind(std::net::SocketAddr::new(ip, 0))?;
                tokio::time::timeout(OP_TIMEOUT, sock.connect(target)).await??
            }
            None => tokio::time::timeout(OP_TIMEOUT, TcpStream::connect(target)).await??,
        };
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        let mut c = ImapClient {
            r: BufReader::new(r),
            w,
            next_tag: 1,
        };
        let greeting = c.line().await?;
        if !greeting.starts_with("* OK") {
            bail!("unexpected greeting {greeting:?}");
        }
        Ok(c)
    }

    async fn line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(OP_TIMEOUT, self.r.read_line(&mut line)).await??;
        if n == 0 {
            bail!("connection closed");
        }
        Ok(line)
    }

    /// Runs one command; returns the untagged lines and the tagged status line.
    pub async fn cmd(&mut self, command: &str) -> anyhow::Result<(Vec<String>, String)> {
        let tag = format!("t{}", self.next_tag);
        self.next_tag += 1;
        tokio::time::timeout(OP_TIMEOUT, self.w.write_all(format!("{tag} {command}\r\n").as_bytes())).await??;
        let mut untagged = Vec::new();
        loop {
            let line = self.line().await?;
            // Skip literal payloads announced as {n}.
            if let Some(n) = literal_len(&line) {
                let mut buf = vec![0u8; n];
                tokio::time::timeout(OP_TIMEOUT, self.r.read_exact(&mut buf)).await??;
            }
            if line.starts_with(&format!("{tag} ")) {
                if !line[tag.len() + 1..].starts_with("OK") {
                    bail!("{command:?} failed: {}", line.trim_end());
                }
                return Ok((untagged, line));
            }
            untagged.push(line);
        }
    }

    pub async fn login(&mut self, user: &str, password: &str) -> anyhow::Result<()> {
        self.cmd(&format!("LOGIN \"{user}\" \"{password}\""))
            .await
            .context("login")
            .map(drop)
    }

    /// Enters IDLE and waits for the continuation.
    pub async fn idle(&mut self) -> anyhow::Result<()> {
        tokio::time::timeout(OP_TIMEOUT, self.w.write_all(b"idle IDLE\r\n")).await??;
        loop {
            let line = self.line().await?;
            if line.starts_with('+') {
                return Ok(());
            }
        }
    }
}

fn literal_len(line: &str) -> Option<usize> {
    let t = line.trim_end();
    let inner = t.strip_suffix('}')?;
    let open = inner.rfind('{')?;
    inner[open + 1..].trim_end_matches('+').parse().ok()
}
