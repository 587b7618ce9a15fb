//! The SMTP client of outbound delivery (RFC 5321 as a client): greeting,
//! EHLO (HELO fallback), opportunistic STARTTLS (RFC 3207, RFC 7435), AUTH
//! PLAIN to a smarthost (RFC 4954), and mail transactions with PIPELINING
//! (RFC 2920), SIZE (RFC 1870), 8BITMIME (RFC 6152), SMTPUTF8 (RFC 6531),
//! DSN (RFC 3461) and REQUIRETLS (RFC 8689). Every stage has its own
//! timeout; a peer's reply is read with bounds on line length and count,
//! so no peer can make the client buffer without limit.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use meshmail_storage::model::outbound::{DsnNotify, DsnRet};

/// A reply line longer than this ends the session (RFC 5321 allows 512).
const REPLY_LINE_MAX: usize = 4096;
/// Lines of one multi-line reply (an EHLO answer is ~15).
const REPLY_LINES_MAX: usize = 100;
/// Body bytes written per write call (each under the command timeout).
const BODY_CHUNK: usize = 64 * 1024;

/// Per-stage timeouts (RFC 5321 §4.5.3.2 gives the minimums).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    /// The 220 greeting and the EHLO answer.
    pub greeting: Duration,
    /// MAIL, RCPT, DATA's 354, RSET, STARTTLS, AUTH, each body write.
    pub command: Duration,
    /// The reply to the end of data.
    pub data_end: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(30),
            greeting: Duration::from_secs(300),
            command: Duration::from_secs(300),
            data_end: Duration::from_secs(600),
        }
    }
}

/// One reply of the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpReply {
    pub code: u16,
    pub lines: Vec<String>,
}

impl SmtpReply {
    pub fn is_positive(&self) -> bool {
        (200..400).contains(&self.code)
    }
    pub fn is_permanent(&self) -> bool {
        self.code >= 500
    }
    /// The enhanced status code (RFC 3463) of the first line, if any.
    pub fn enhanced(&self) -> Option<String> {
        let first = self.lines.first()?.split_whitespace().next()?;
        let parts: Vec<&str> = first.split('.').collect();
        let ok = parts.len() == 3
            && matches!(parts[0], "2" | "4" | "5")
            && parts[1..]
                .iter()
                .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()));
        ok.then(|| first.to_string())
    }
}

impl std::fmt::Display for SmtpReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.lines.join(" / "))
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}: {detail}")]
    Connect { addr: SocketAddr, detail: String },
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("connection: {0}")]
    Io(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("{stage} refused: {reply}")]
    Rejected { stage: &'static str, reply: SmtpReply },
    #[error("TLS: {0}")]
    Tls(String),
}

impl ClientError {
    /// A 5xx at a stage that concerns the whole message.
    pub fn is_permanent(&self) -> bool {
        matches!(self, ClientError::Rejected { reply, .. } if reply.is_permanent())
    }
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e.to_string())
    }
}

/// What the peer's EHLO answer offered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caps {
    pub esmtp: bool,
    pub pipelining: bool,
    pub size: Option<u64>,
    pub eight_bit_mime: bool,
    pub smtputf8: bool,
    pub dsn: bool,
    pub starttls: bool,
    pub requiretls: bool,
    pub auth: Vec<String>,
}

impl Caps {
    pub fn parse(reply: &SmtpReply) -> Caps {
        let mut caps = Caps {
            esmtp: true,
            ..Caps::default()
        };
        for line in reply.lines.iter().skip(1) {
            let mut words = line.split_whitespace();
            let Some(kw) = words.next() else { continue };
            match kw.to_ascii_uppercase().as_str() {
                "PIPELINING" => caps.pipelining = true,
                "SIZE" => caps.size = Some(words.next().and_then(|n| n.parse().ok()).unwrap_or(0)),
                "8BITMIME" => caps.eight_bit_mime = true,
                "SMTPUTF8" => caps.smtputf8 = true,
                "DSN" => caps.dsn = true,
                "STARTTLS" => caps.starttls = true,
                "REQUIRETLS" => caps.requiretls = true,
                "AUTH" => caps.auth = words.map(|w| w.to_ascii_uppercase()).collect(),
                _ => {}
            }
        }
        caps
    }
}

/// Whether and how the session is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsState {
    None,
    /// Encrypted, but the certificate did not verify (RFC 7435: still
    /// better than plaintext against a passive attacker).
    Unverified,
    /// Encrypted to a certificate that chains to a trusted root and names
    /// the host.
    Verified,
}

impl TlsState {
    pub fn label(self) -> &'static str {
        match self {
            TlsState::None => "none",
            TlsState::Unverified => "unverified",
            TlsState::Verified => "verified",
        }
    }
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Upgrading,
}

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Io::Upgrading => Poll::Ready(Err(io::Error::other("stream is being upgraded"))),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Io::Upgrading => Poll::Ready(Err(io::Error::other("stream is being upgraded"))),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Io::Upgrading => Poll::Ready(Ok(())),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Io::Upgrading => Poll::Ready(Ok(())),
        }
    }
}

/// Verifies like the web PKI, but lets an unverifiable certificate through
/// and says so: opportunistic TLS (RFC 7435) encrypts anyway and the caller
/// decides from the policy (MTA-STS `enforce`, REQUIRETLS) whether that is
/// enough. Handshake signatures are always checked.
#[derive(Debug)]
struct RecordingVerifier {
    /// `None` when the machine has no trusted roots: nothing verifies.
    inner: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    verified: Arc<AtomicBool>,
}

impl rustls::client::danger::ServerCertVerifier for RecordingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let ok = self.inner.as_ref().is_some_and(|v| {
            v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .is_ok()
        });
        self.verified.store(ok, Ordering::Relaxed);
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The trust anchors and crypto provider every outbound TLS session uses.
#[derive(Clone)]
pub struct TlsRoots {
    verifier: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl std::fmt::Debug for TlsRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsRoots")
    }
}

impl TlsRoots {
    /// The system's roots (`rustls-native-certs`) plus `extra_pem`
    /// certificates (a private CA; tests).
    pub fn load(extra_pem: Option<&[u8]>) -> Result<TlsRoots, ClientError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A malformed system certificate is skipped, not fatal.
            let _ = roots.add(cert);
        }
        if let Some(pem) = extra_pem {
            for cert in rustls_pemfile::certs(&mut &pem[..]) {
                roots
                    .add(cert.map_err(|e| ClientError::Tls(format!("CA file: {e}")))?)
                    .map_err(|e| ClientError::Tls(format!("CA file: {e}")))?;
            }
        }
        // Passed explicitly: two crypto providers are compiled in.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = if roots.is_empty() {
            tracing::warn!("no trusted root certificates: outbound TLS will never count as verified");
            None
        } else {
            Some(
                rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| ClientError::Tls(e.to_string()))?,
            )
        };
        Ok(TlsRoots { verifier, provider })
    }

    /// A configuration that refuses any certificate that does not verify
    /// (the MTA-STS policy fetch, RFC 8461 §3.3).
    pub fn verifying_config(&self) -> Result<rustls::ClientConfig, ClientError> {
        let verifier = self
            .verifier
            .clone()
            .ok_or_else(|| ClientError::Tls("no trusted root certificates".into()))?;
        Ok(rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::Tls(e.to_string()))?
            .with_webpki_verifier(verifier)
            .with_no_client_auth())
    }

    fn client_config(&self, verified: Arc<AtomicBool>) -> Result<rustls::ClientConfig, ClientError> {
        let verifier = Arc::new(RecordingVerifier {
            inner: self.verifier.clone(),
            provider: self.provider.clone(),
            verified,
        });
        Ok(rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::Tls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth())
    }
}

/// One recipient of a transaction with its DSN parameters.
#[derive(Debug, Clone, Default)]
pub struct RcptSpec {
    pub address: String,
    pub notify: Option<DsnNotify>,
    pub orcpt: Option<String>,
}

/// The envelope of one transaction.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    pub from: String,
    pub rcpts: Vec<RcptSpec>,
    pub size: u64,
    pub eight_bit: bool,
    pub smtputf8: bool,
    pub require_tls: bool,
    pub ret: Option<DsnRet>,
    pub envid: Option<String>,
}

/// What a transaction did: a reply per recipient (RCPT's if it refused,
/// else the reply to the end of data).
#[derive(Debug, Clone)]
pub struct TxnOutcome {
    pub rcpts: Vec<SmtpReply>,
}

/// An open SMTP session with one peer.
pub struct SmtpClient {
    io: Io,
    rbuf: Vec<u8>,
    pub host: String,
    pub addr: SocketAddr,
    pub caps: Caps,
    pub tls: TlsState,
    timeouts: Timeouts,
    helo_name: String,
    /// Transactions completed on this connection (reuse).
    pub transactions: u32,
}

impl SmtpClient {
    /// Connects, reads the greeting, says EHLO and, when offered and
    /// `starttls` allows, upgrades to TLS and says EHLO again.
    pub async fn connect(
        addr: SocketAddr,
        host: &str,
        helo_name: &str,
        timeouts: Timeouts,
        tls: Option<&TlsRoots>,
    ) -> Result<SmtpClient, ClientError> {
        let tcp = tokio::time::timeout(timeouts.connect, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout("connect"))?
            .map_err(|e| ClientError::Connect {
                addr,
                detail: e.to_string(),
            })?;
        let _ = tcp.set_nodelay(true);
        let mut c = SmtpClient {
            io: Io::Plain(tcp),
            rbuf: Vec::with_capacity(1024),
            host: host.to_string(),
            addr,
            caps: Caps::default(),
            tls: TlsState::None,
            timeouts,
            helo_name: helo_name.to_string(),
            transactions: 0,
        };
        let greeting = c.read_reply(timeouts.greeting, "greeting").await?;
        if greeting.code != 220 {
            return Err(ClientError::Rejected {
                stage: "greeting",
                reply: greeting,
            });
        }
        c.ehlo().await?;
        if let Some(roots) = tls
            && c.caps.starttls
        {
            c.starttls(roots).await?;
            c.ehlo().await?;
        }
        Ok(c)
    }

    async fn ehlo(&mut self) -> Result<(), ClientError> {
        let t = self.timeouts.greeting;
        self.send(format!("EHLO {}\r\n", self.helo_name).as_bytes()).await?;
        let reply = self.read_reply(t, "EHLO").await?;
        if reply.code == 250 {
            self.caps = Caps::parse(&reply);
            return Ok(());
        }
        // RFC 5321 §3.2: a server that does not know EHLO gets HELO.
        self.send(format!("HELO {}\r\n", self.helo_name).as_bytes()).await?;
        let reply = self.read_reply(t, "HELO").await?;
        if reply.code != 250 {
            return Err(ClientError::Rejected { stage: "HELO", reply });
        }
        self.caps = Caps::default();
        Ok(())
    }

    async fn starttls(&mut self, roots: &TlsRoots) -> Result<(), ClientError> {
        self.send(b"STARTTLS\r\n").await?;
        let reply = self.read_reply(self.timeouts.command, "STARTTLS").await?;
        if reply.code != 220 {
            return Err(ClientError::Rejected {
                stage: "STARTTLS",
                reply,
            });
        }
        if !self.rbuf.is_empty() {
            // RFC 3207 §5: nothing may follow 220 before the handshake
            // (a STARTTLS command-injection attempt, or a peer whose TLS is
            // broken and sends garbage right behind its 220). A failed TLS
            // setup either way: `TLS-Required: No` may then retry in
            // plaintext on a fresh connection, where nothing injected
            // survives. Whether the garbage arrives in the 220's segment
            // or later (a handshake error) is up to the network, so both
            // must be the same kind of error.
            return Err(ClientError::Tls("data after the STARTTLS reply".into()));
        }
        let verified = Arc::new(AtomicBool::new(false));
        let config = roots.client_config(verified.clone())?;
        let name = rustls::pki_types::ServerName::try_from(self.host.clone())
            .map_err(|e| ClientError::Tls(format!("{}: {e}", self.host)))?;
        let Io::Plain(tcp) = std::mem::replace(&mut self.io, Io::Upgrading) else {
            return Err(ClientError::Protocol("STARTTLS on a TLS session".into()));
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tls = tokio::time::timeout(self.timeouts.command, connector.connect(name, tcp))
            .await
            .map_err(|_| ClientError::Timeout("TLS handshake"))?
            .map_err(|e| ClientError::Tls(e.to_string()))?;
        self.io = Io::Tls(Box::new(tls));
        self.tls = if verified.load(Ordering::Relaxed) {
            TlsState::Verified
        } else {
            TlsState::Unverified
        };
        Ok(())
    }

    /// AUTH PLAIN (RFC 4616) to a smarthost.
    pub async fn auth_plain(&mut self, user: &str, password: &str) -> Result<(), ClientError> {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        self.send(format!("AUTH PLAIN {token}\r\n").as_bytes()).await?;
        let reply = self.read_reply(self.timeouts.command, "AUTH").await?;
        if reply.code != 235 {
            return Err(ClientError::Rejected { stage: "AUTH", reply });
        }
        Ok(())
    }

    /// RSET before the next transaction on a reused connection (as Postfix
    /// does with its cached connections): a peer that dropped or broke the
    /// session is found here, before a message is at stake on it.
    pub async fn rset(&mut self) -> Result<(), ClientError> {
        self.send(b"RSET\r\n").await?;
        let reply = self.read_reply(self.timeouts.command, "RSET").await?;
        if reply.code != 250 {
            return Err(ClientError::Rejected { stage: "RSET", reply });
        }
        Ok(())
    }

    /// RSET after a failed transaction, so the connection can be reused;
    /// a failure here only means the connection is not reused.
    async fn reset(&mut self) {
        if self.send(b"RSET\r\n").await.is_ok() {
            let _ = self.read_reply(self.timeouts.command, "RSET").await;
        }
    }

    pub async fn quit(mut self) {
        if self.send(b"QUIT\r\n").await.is_ok() {
            let _ = self.read_reply(Duration::from_secs(5), "QUIT").await;
        }
        let _ = self.io.shutdown().await;
    }

    async fn send_body(&mut self, body: &[u8]) -> Result<(), ClientError> {
        let mut out = Vec::with_capacity(BODY_CHUNK + 1024);
        let mut at_line_start = true;
        let mut prev = 0u8;
        for &b in body {
            if at_line_start && b == b'.' {
                out.push(b'.');
            }
            if b == b'\n' && prev != b'\r' {
                out.push(b'\r');
            }
            out.push(b);
            at_line_start = b == b'\n';
            prev = b;
            if out.len() >= BODY_CHUNK {
                self.send(&out).await?;
                out.clear();
            }
        }
        if !at_line_start {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b".\r\n");
        self.send(&out).await
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let t = self.timeouts.command;
        tokio::time::timeout(t, async {
            self.io.write_all(bytes).await?;
            self.io.flush().await
        })
        .await
        .map_err(|_| ClientError::Timeout("a write to the peer"))?
        .map_err(ClientError::from)
    }

    /// Reads one (possibly multi-line) reply within `timeout`.
    async fn read_reply(&mut self, timeout: Duration, stage: &'static str) -> Result<SmtpReply, ClientError> {
        tokio::time::timeout(timeout, self.read_reply_inner())
            .await
            .map_err(|_| ClientError::Timeout(stage))?
    }

    async fn read_reply_inner(&mut self) -> Result<SmtpReply, ClientError> {
        let mut lines = Vec::new();
        let mut code = 0u16;
        loop {
            let line = self.read_line().await?;
            let (c, more, text) = parse_reply_line(&line)?;
            if !lines.is_empty() && c != code {
                return Err(ClientError::Protocol("reply code changed within a reply".into()));
            }
            code = c;
            lines.push(text);
            if !more {
                return Ok(SmtpReply { code, lines });
            }
            if lines.len() >= REPLY_LINES_MAX {
                return Err(ClientError::Protocol("reply has too many lines".into()));
            }
        }
    }

    async fn read_line(&mut self) -> Result<String, ClientError> {
        loop {
            if let Some(pos) = self.rbuf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.rbuf.drain(..pos + 2).take(pos).collect();
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            if self.rbuf.len() > REPLY_LINE_MAX {
                return Err(ClientError::Protocol("reply line too long".into()));
            }
            let mut chunk = [0u8; 2048];
            let n = self.io.read(&mut chunk).await?;
            if n == 0 {
                return Err(ClientError::Io("the peer closed the connection".into()));
            }
            self.rbuf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// `250-text` / `250 text` / `250` → (code, continues, text).
fn parse_reply_line(line: &str) -> Result<(u16, bool, String), ClientError> {
    let bytes = line.as_bytes();
    if bytes.len() < 3 || !bytes[..3].iter().all(|b| b.is_ascii_digit()) || !(b'2'..=b'5').contains(&bytes[0]) {
        return Err(ClientError::Protocol(format!(
            "not an SMTP reply: {:?}",
            line.chars().take(80).collect::<String>()
        )));
    }
    let code: u16 = line[..3].parse().expect("three digits");
    let more = bytes.get(3) == Some(&b'-');
    let text = line.get(4..).unwrap_or("").to_string();
    Ok((code, more, text))
}

/// RFC 3461 §4 xtext: `+`, `=`, controls and non-ASCII as `+XX`.
pub fn xtext(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (b'!'..=b'~').contains(&b) && b != b'+' && b != b'=' {
            out.push(b as char);
        } else {
            out.push_str(&format!("+{b:02X}"));
        }
    }
    out
}

#[path = "client_txn.rs"]
mod txn;

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
