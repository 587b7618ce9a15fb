//! A small async SMTP client for load: hard timeouts on connect and on every
//! reply, and a three-way outcome per message, because the golden check
//! must know whether the server *may* have stored what it did not confirm.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 250 after DATA: the server promised it is durable.
    Acked,
    /// A definite refusal before or after DATA (the code).
    Refused(u16),
    /// The connection failed or timed out after the body was sent: the
    /// server may or may not have stored it.
    Unknown(String),
    /// Failed before the body was sent: it cannot have been stored.
    NotSent(String),
}

pub struct SmtpClient {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    op_timeout: Duration,
}

impl SmtpClient {
    pub async fn connect(addr: &str, connect_timeout: Duration, op_timeout: Duration) -> anyhow::Result<SmtpClient> {
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(addr))
            .await
            .context("connect timed out")??;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        let mut c = SmtpClient {
            r: BufReader::new(r),
            w,
            op_timeout,
        };
        let greeting = c.reply().await?;
        if greeting != 220 {
            bail!("greeting {greeting}");
        }
        c.send("EHLO soak.example\r\n").await?;
        let ehlo = c.reply().await?;
        if ehlo != 250 {
            bail!("EHLO answered {ehlo}");
        }
        Ok(c)
    }

    /// AUTH PLAIN (RFC 4616), for submission.
    pub async fn auth_plain(&mut self, user: &str, password: &str) -> anyhow::Result<()> {
        let token = b64(format!("\0{user}\0{password}").as_bytes());
        self.send(&format!("AUTH PLAIN {token}\r\n")).await?;
        let code = self.reply().await?;
        if code != 235 {
            bail!("AUTH answered {code}");
        }
        Ok(())
    }

    async fn send(&mut self, s: &str) -> anyhow::Result<()> {
        tokio::time::timeout(self.op_timeout, self.w.write_all(s.as_bytes()))
            .await
            .context("write timed out")??;
        Ok(())
    }

    /// Reads one (possibly multi-line) reply; returns its code.
    async fn reply(&mut self) -> anyhow::Result<u16> {
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(self.op_timeout, self.r.read_line(&mut line))
                .await
                .context("reply timed out")??;
            if n == 0 {
                bail!("connection closed");
            }
            if line.len() < 3 {
                bail!("short reply {line:?}");
            }
            if line.as_bytes().get(3) != Some(&b'-') {
                return line[..3].parse().with_context(|| format!("reply {line:?}"));
            }
        }
    }

    /// Sends one message (headers and body already CRLF-terminated, no
    /// leading dots) to one recipient.
    pub async fn send_message(&mut self, from: &str, to: &str, message: &str) -> Outcome {
        let before_data = async {
            self.send(&format!("MAIL FROM:<{from}>\r\n")).await?;
            let c = self.reply().await?;
            if c != 250 {
                return Ok(Err(c));
            }
            self.send(&format!("RCPT TO:<{to}>\r\n")).await?;
            let c = self.reply().await?;
            if c != 250 {
                return Ok(Err(c));
            }
            self.send("DATA\r\n").await?;
            let c = self.reply().await?;
            if c != 354 {
                return Ok(Err(c));
            }
            anyhow::Ok(Ok(()))
        };
        match before_data.await {
            Err(e) => return Outcome::NotSent(format!("{e:#}")),
            Ok(Err(code)) => {
                // Leave the transaction cleanly so the connection stays usable.
                let _ = self.send("RSET\r\n").await;
                let _ = self.reply().await;
                return Outcome::Refused(code);
            }
            Ok(Ok(())) => {}
        }
        let sent = async {
            self.send(message).await?;
            self.send(".\r\n").await?;
            self.reply().await
        };
        match sent.await {
            Ok(250) => Outcome::Acked,
            Ok(code) => Outcome::Refused(code),
            Err(e) => Outcome::Unknown(format!("{e:#}")),
        }
    }

    pub async fn quit(mut self) {
        let _ = self.send("QUIT\r\n").await;
        let _ = self.reply().await;
    }
}

/// Standard base64 with padding (AUTH PLAIN tokens).
pub fn b64(input: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn base64() {
        assert_eq!(super::b64(b"\0u\0p"), "AHUAcA==");
        assert_eq!(super::b64(b"abc"), "YWJj");
    }
}
