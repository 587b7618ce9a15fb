//! A small IMAP4rev1 client, enough to read every folder of another
//! server: LOGIN, LIST, EXAMINE and UID FETCH, over implicit TLS, STARTTLS
//! or (loopback only, see `url`) plaintext. Hand-written rather than
//! `async-imap`: that crate is not among the workspace's dependencies nor
//! in the local registry cache, and the few responses read here (LIST,
//! status codes, FETCH of four items) fit in `wire` behind a reader whose
//! memory is bounded, which is the part that matters for a migration.
//!
//! Memory is bounded: a line is at most [`LINE_BYTES_MAX`], and a literal
//! over the caller's limit is read and dropped in chunks (the message is
//! then reported as too big, not held).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::url::{Security, SourceUrl};
use super::wire::{self, Token};

/// A physical line (literals excluded); LIST and FETCH lines are short.
const LINE_BYTES_MAX: usize = 1 << 20;
/// How long one read or write may wait for the source server.
const IO_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum ImapError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS with {host}: {reason}")]
    Tls { host: String, reason: String },
    #[error(
        "the source server does not offer STARTTLS: use imaps:// (TLS from the start), or \
         --plaintext-on-loopback for a server on this host"
    )]
    NoStartTls,
    #[error("talking to the source server: {0}")]
    Io(#[from] std::io::Error),
    #[error("the source server closed the connection")]
    Closed,
    #[error("the source server sent nothing for {} s", IO_TIMEOUT.as_secs())]
    Timeout,
    #[error("a line from the source server is longer than {LINE_BYTES_MAX} bytes")]
    LineTooLong,
    #[error("the source server refused {command}: {answer}")]
    Refused { command: String, answer: String },
    #[error("the password holds a line break or NUL, which IMAP LOGIN cannot carry")]
    BadPassword,
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub struct Client {
    io: BufReader<Box<dyn Stream>>,
    next_tag: u32,
}

async fn timed<T>(f: impl std::future::Future<Output = std::io::Result<T>>) -> Result<T, ImapError> {
    match tokio::time::timeout(IO_TIMEOUT, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(ImapError::Timeout),
    }
}

/// A rustls client config trusting the system's roots and `extra_ca`.
fn tls_config(extra_ca: Option<&[u8]>, host: &str) -> Result<rustls::ClientConfig, ImapError> {
    let tls = |reason: String| ImapError::Tls {
        host: host.to_string(),
        reason,
    };
    let roots = meshmail_protocols::outbound::client::TlsRoots::load(extra_ca).map_err(|e| tls(e.to_string()))?;
    roots.verifying_config().map_err(|e| tls(e.to_string()))
}

impl Client {
    /// Connects and reads the greeting; upgrades with STARTTLS when the
    /// URL asks for it (refusing a server that does not offer it).
    pub async fn connect(
        url: &SourceUrl,
        addr: std::net::SocketAddr,
        extra_ca: Option<&[u8]>,
    ) -> Result<Client, ImapError> {
        let tcp = timed(TcpStream::connect(addr)).await.map_err(|e| match e {
            ImapError::Io(source) => ImapError::Connect {
                addr: addr.to_string(),
                source,
            },
            other => other,
        })?;
        let stream: Box<dyn Stream> = match url.security {
            Security::Implicit => handshake_over(Box::new(tcp), url, extra_ca).await?,
            Security::Plaintext | Security::StartTls => Box::new(tcp),
        };
        let mut c = Client {
            io: BufReader::new(stream),
            next_tag: 1,
        };
        c.read_response(0).await?;
        if url.security == Security::StartTls {
            c = c.starttls(url, extra_ca).await?;
        }
        Ok(c)
    }

    async fn starttls(mut self, url: &SourceUrl, extra_ca: Option<&[u8]>) -> Result<Client, ImapError> {
        let mut offered = false;
        self.command("CAPABILITY", 0, |t| {
            offered |= t.iter().any(|x| x.is_atom("STARTTLS"));
        })
        .await?;
        if !offered {
            return Err(ImapError::NoStartTls);
        }
        self.command("STARTTLS", 0, |_| {}).await?;
        // Nothing may follow the tagged OK before the handshake; bytes
        // already buffered would be a plaintext injection (CVE-2011-0411).
        if !self.io.buffer().is_empty() {
            return Err(ImapError::Tls {
                host: url.host.clone(),
                reason: "the server sent data after its STARTTLS answer".into(),
            });
        }
        let stream = self.io.into_inner();
        let tls = handshake_over(stream, url, extra_ca).await?;
        Ok(Client {
            io: BufReader::new(tls),
            next_tag: self.next_tag,
        })
    }

    pub async fn login(&mut self, user: &str, password: &str) -> Result<(), ImapError> {
        if password.contains(['\r', '\n', '\0']) || user.contains(['\r', '\n', '\0']) {
            return Err(ImapError::BadPassword);
        }
        let cmd = format!("LOGIN {} {}", quote(user), quote(password));
        // The refusal must not echo the command (it holds the password).
        self.run(&cmd, "LOGIN", 0, &mut |_| {}).await
    }

    /// Sends `cmd`; every untagged response goes to `on_untagged`. A tagged
    /// NO or BAD is an error naming the command.
    pub async fn command(
        &mut self,
        cmd: &str,
        literal_max: u64,
        mut on_untagged: impl FnMut(Vec<Token>),
    ) -> Result<(), ImapError> {
        self.run(cmd, cmd, literal_max, &mut on_untagged).await
    }

    async fn run(
        &mut self,
        cmd: &str,
        shown: &str,
        literal_max: u64,
        on_untagged: &mut dyn FnMut(Vec<Token>),
    ) -> Result<(), ImapError> {
        let tag = format!("m{}", self.next_tag);
        self.next_tag += 1;
        timed(self.io.get_mut().write_all(format!("{tag} {cmd}\r\n").as_bytes())).await?;
        timed(self.io.get_mut().flush()).await?;
        // Bounded by the server's answer: each turn reads one response,
        // and the server ends the command with its tagged line.
        loop {
            let t = self.read_response(literal_max).await?;
            if t.first().is_some_and(|x| x.is_atom(&tag)) {
                if t.get(1).is_some_and(|x| x.is_atom("OK")) {
                    return Ok(());
                }
                let answer = t.iter().skip(1).filter_map(Token::text).collect::<Vec<_>>().join(" ");
                return Err(ImapError::Refused {
                    command: shown.split(' ').take(3).collect::<Vec<_>>().join(" "),
                    answer,
                });
            }
            on_untagged(t);
        }
    }

    /// One response: its lines and literals, as tokens.
    async fn read_response(&mut self, literal_max: u64) -> Result<Vec<Token>, ImapError> {
        let mut out = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = timed(
                (&mut self.io)
                    .take(LINE_BYTES_MAX as u64 + 1)
                    .read_until(b'\n', &mut line),
            )
            .await?;
            if n == 0 {
                return Err(ImapError::Closed);
            }
            if !line.ends_with(b"\n") {
                return Err(if n > LINE_BYTES_MAX {
                    ImapError::LineTooLong
                } else {
                    ImapError::Closed
                });
            }
            let line = line.strip_suffix(b"\r\n").or(line.strip_suffix(b"\n")).unwrap_or(&line);
            let Some((at, size)) = wire::literal_at_end(line) else {
                wire::tokenize(line, &mut out);
                return Ok(out);
            };
            wire::tokenize(&line[..at], &mut out);
            out.push(self.read_literal(size, literal_max).await?);
        }
    }

    async fn read_literal(&mut self, size: u64, literal_max: u64) -> Result<Token, ImapError> {
        if size > literal_max {
            let copied = timed(tokio::io::copy(&mut (&mut self.io).take(size), &mut tokio::io::sink())).await?;
            if copied < size {
                return Err(ImapError::Closed);
            }
            return Ok(Token::Skipped(size));
        }
        let mut buf = vec![0; size as usize];
        timed(self.io.read_exact(&mut buf)).await?;
        Ok(Token::Literal(buf))
    }

    /// LOGOUT, best effort: the copy is done whatever the server says.
    pub async fn logout(mut self) {
        let _ = self.command("LOGOUT", 0, |_| {}).await;
    }
}

async fn handshake_over(
    stream: Box<dyn Stream>,
    url: &SourceUrl,
    extra_ca: Option<&[u8]>,
) -> Result<Box<dyn Stream>, ImapError> {
    let tls = |reason: String| ImapError::Tls {
        host: url.host.clone(),
        reason,
    };
    let config = tls_config(extra_ca, &url.host)?;
    let name = rustls::pki_types::ServerName::try_from(url.host.clone()).map_err(|e| tls(e.to_string()))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    match tokio::time::timeout(IO_TIMEOUT, connector.connect(name, stream)).await {
        Ok(Ok(s)) => Ok(Box::new(s)),
        Ok(Err(e)) => Err(tls(e.to_string())),
        Err(_) => Err(ImapError::Timeout),
    }
}

/// An IMAP quoted string (`"` and `\` escaped).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}
