//! A small async IMAP client for load: tagged commands, literal-aware
//! response reading (literals are kept, inlined into their response, so
//! FETCH results can be parsed), hard timeouts on every operation.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Every network operation gives up after this unless told otherwise.
pub const OP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct ImapClient {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    next_tag: u64,
    op_timeout: Duration,
}

impl ImapClient {
    pub async fn connect(addr: &str, local_ip: Option<std::net::IpAddr>) -> anyhow::Result<ImapClient> {
        Self::connect_with(addr, local_ip, OP_TIMEOUT, OP_TIMEOUT).await
    }

    pub async fn connect_with(
        addr: &str,
        local_ip: Option<std::net::IpAddr>,
        connect_timeout: Duration,
        op_timeout: Duration,
    ) -> anyhow::Result<ImapClient> {
        let target: std::net::SocketAddr = addr.parse()?;
        let stream = match local_ip {
            Some(ip) => {
                let sock = tokio::net::TcpSocket::new_v4()?;
                sock.bind(std::net::SocketAddr::new(ip, 0))?;
                tokio::time::timeout(connect_timeout, sock.connect(target))
                    .await
                    .context("connect timed out")??
            }
            None => tokio::time::timeout(connect_timeout, TcpStream::connect(target))
                .await
                .context("connect timed out")??,
        };
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        let mut c = ImapClient {
            r: BufReader::new(r),
            w,
            next_tag: 1,
            op_timeout,
        };
        let greeting = c.line().await?;
        if !greeting.starts_with("* OK") {
            bail!("unexpected greeting {greeting:?}");
        }
        Ok(c)
    }

    async fn line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(self.op_timeout, self.r.read_line(&mut line))
            .await
            .context("read timed out")??;
        if n == 0 {
            bail!("connection closed");
        }
        Ok(line)
    }

    /// One whole response: a line, plus for every literal it announces the
    /// literal's bytes and the line that continues it.
    async fn response(&mut self) -> anyhow::Result<String> {
        let mut resp = self.line().await?;
        while let Some(n) = literal_len(&resp) {
            let mut buf = vec![0u8; n];
            tokio::time::timeout(self.op_timeout, self.r.read_exact(&mut buf))
                .await
                .context("literal timed out")??;
            resp.push_str(&String::from_utf8_lossy(&buf));
            resp.push_str(&self.line().await?);
        }
        Ok(resp)
    }

    /// Runs one command; returns the untagged responses (literals inlined)
    /// and the tagged status line. A NO or BAD is an error.
    pub async fn cmd(&mut self, command: &str) -> anyhow::Result<(Vec<String>, String)> {
        let tag = format!("t{}", self.next_tag);
        self.next_tag += 1;
        tokio::time::timeout(
            self.op_timeout,
            self.w.write_all(format!("{tag} {command}\r\n").as_bytes()),
        )
        .await
        .context("write timed out")??;
        self.until_tagged(&tag, command).await
    }

    /// Reads responses up to the tagged one of `tag`: the untagged ones
    /// (literals inlined) and the tagged line. A NO or BAD is an error.
    async fn until_tagged(&mut self, tag: &str, what: &str) -> anyhow::Result<(Vec<String>, String)> {
        let mut untagged = Vec::new();
        loop {
            let resp = self.response().await?;
            if resp.starts_with(&format!("{tag} ")) {
                if !resp[tag.len() + 1..].starts_with("OK") {
                    bail!("{what:?} failed: {}", resp.trim_end());
                }
                return Ok((untagged, resp));
            }
            untagged.push(resp);
        }
    }

    /// Nagle's algorithm on this connection: most clients leave it on
    /// (the sessions of this crate turn it off by default).
    pub fn set_nodelay(&self, on: bool) -> anyhow::Result<()> {
        Ok(self.w.as_ref().set_nodelay(on)?)
    }

    /// `APPEND mailbox {n}` with a synchronizing literal, written as
    /// Python's imaplib and many clients do: the command line, then after
    /// the continuation the literal and its CRLF in two writes.
    pub async fn append_sync_literal(&mut self, mailbox: &str, message: &[u8]) -> anyhow::Result<String> {
        self.append_sync_literal_flags(mailbox, "", message).await
    }

    /// [`ImapClient::append_sync_literal`] with a flag list (`"\\Seen"`, or
    /// `""` for none).
    pub async fn append_sync_literal_flags(
        &mut self,
        mailbox: &str,
        flags: &str,
        message: &[u8],
    ) -> anyhow::Result<String> {
        let tag = format!("t{}", self.next_tag);
        self.next_tag += 1;
        let flags = if flags.is_empty() {
            String::new()
        } else {
            format!("({flags}) ")
        };
        let line = format!("{tag} APPEND {mailbox} {flags}{{{}}}\r\n", message.len());
        tokio::time::timeout(self.op_timeout, self.w.write_all(line.as_bytes()))
            .await
            .context("write timed out")??;
        let cont = self.line().await?;
        if !cont.starts_with('+') {
            bail!("APPEND refused: {}", cont.trim_end());
        }
        tokio::time::timeout(self.op_timeout, async {
            self.w.write_all(message).await?;
            self.w.write_all(b"\r\n").await
        })
        .await
        .context("write timed out")??;
        Ok(self.until_tagged(&tag, "APPEND").await?.1)
    }

    /// APPENDs with non-synchronizing literals (LITERAL+, RFC 7888), all
    /// written at once and then their completions read in order: a fast
    /// fill, not a measurement. `messages` are (flags, raw message).
    pub async fn append_pipelined(&mut self, mailbox: &str, messages: &[(&str, &[u8])]) -> anyhow::Result<()> {
        let mut buf = Vec::new();
        let mut tags = Vec::with_capacity(messages.len());
        for (flags, raw) in messages {
            let tag = format!("t{}", self.next_tag);
            self.next_tag += 1;
            let flags = if flags.is_empty() {
                String::new()
            } else {
                format!("({flags}) ")
            };
            buf.extend_from_slice(format!("{tag} APPEND {mailbox} {flags}{{{}+}}\r\n", raw.len()).as_bytes());
            buf.extend_from_slice(raw);
            buf.extend_from_slice(b"\r\n");
            tags.push(tag);
        }
        tokio::time::timeout(self.op_timeout, self.w.write_all(&buf))
            .await
            .context("write timed out")??;
        for tag in tags {
            self.until_tagged(&tag, "APPEND").await?;
        }
        Ok(())
    }

    /// APPEND with one non-synchronizing literal, command and message in
    /// one write; returns the tagged line.
    pub async fn append_literal_plus(&mut self, mailbox: &str, message: &[u8]) -> anyhow::Result<String> {
        let tag = format!("t{}", self.next_tag);
        self.next_tag += 1;
        let mut buf = format!("{tag} APPEND {mailbox} {{{}+}}\r\n", message.len()).into_bytes();
        buf.extend_from_slice(message);
        buf.extend_from_slice(b"\r\n");
        tokio::time::timeout(self.op_timeout, self.w.write_all(&buf))
            .await
            .context("write timed out")??;
        Ok(self.until_tagged(&tag, "APPEND").await?.1)
    }

    pub async fn login(&mut self, user: &str, password: &str) -> anyhow::Result<()> {
        self.cmd(&format!("LOGIN \"{user}\" \"{password}\""))
            .await
            .context("login")
            .map(drop)
    }

    /// Enters IDLE and waits for the continuation.
    pub async fn idle(&mut self) -> anyhow::Result<()> {
        tokio::time::timeout(self.op_timeout, self.w.write_all(b"idle IDLE\r\n"))
            .await
            .context("write timed out")??;
        loop {
            let line = self.line().await?;
            if line.starts_with('+') {
                return Ok(());
            }
        }
    }

    /// While in IDLE: waits up to `wait` for one untagged response
    /// (`Ok(None)` when nothing came).
    pub async fn idle_wait(&mut self, wait: Duration) -> anyhow::Result<Option<String>> {
        let mut line = String::new();
        match tokio::time::timeout(wait, self.r.read_line(&mut line)).await {
            Err(_) => Ok(None),
            Ok(Ok(0)) => bail!("connection closed"),
            Ok(Ok(_)) => Ok(Some(line)),
            Ok(Err(e)) => Err(e.into()),
        }
    }

    /// Leaves IDLE (DONE) and reads up to its tagged completion.
    pub async fn idle_done(&mut self) -> anyhow::Result<()> {
        tokio::time::timeout(self.op_timeout, self.w.write_all(b"DONE\r\n"))
            .await
            .context("write timed out")??;
        loop {
            let line = self.response().await?;
            if line.starts_with("idle ") {
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

/// The number after `key ` in a response (`UID 7`, `[UIDVALIDITY 3]`,
/// `MODSEQ (12)`), searched case-insensitively.
pub fn number_after(resp: &str, key: &str) -> Option<u64> {
    let upper = resp.to_ascii_uppercase();
    let mut from = 0;
    while let Some(pos) = upper[from..].find(key) {
        let at = from + pos;
        from = at + key.len();
        // Only a whole word: `UID` must not match inside `UIDNEXT`.
        let before_ok = at == 0 || !upper.as_bytes()[at - 1].is_ascii_alphanumeric();
        let rest = &upper[from..];
        if !before_ok || !rest.starts_with([' ', '(']) {
            continue;
        }
        let digits: String = rest
            .trim_start_matches([' ', '('])
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if let Ok(n) = digits.parse() {
            return Some(n);
        }
    }
    None
}

/// The value of a header line `name: value` inside a response.
pub fn header_value(resp: &str, name: &str) -> Option<String> {
    let lname = name.to_ascii_lowercase();
    resp.split(['\r', '\n']).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim().to_ascii_lowercase() == lname).then(|| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fetch_items() {
        let r = "* 3 FETCH (UID 7 MODSEQ (12) BODY[HEADER.FIELDS (X-MESHMAIL-LOAD-ID)] {50}\r\n\
                 X-Meshmail-Load-Id: 0190aaaa-bbbb\r\n\r\n)\r\n";
        assert_eq!(number_after(r, "UID"), Some(7));
        assert_eq!(number_after(r, "MODSEQ"), Some(12));
        assert_eq!(header_value(r, "x-meshmail-load-id").as_deref(), Some("0190aaaa-bbbb"));
        assert_eq!(number_after("* OK [UIDNEXT 9] x", "UID"), None);
        assert_eq!(number_after("* OK [UIDVALIDITY 42] x", "UIDVALIDITY"), Some(42));
        assert_eq!(literal_len("a {12}\r\n"), Some(12));
    }
}
