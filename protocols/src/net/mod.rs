//! Connection plumbing shared by the line-based protocols (SMTP, LMTP, and
//! later IMAP): a stream that can switch to TLS in place, line reads with a
//! length cap and an idle timeout, and reply buffering that makes
//! pipelining cheap (replies are flushed only before the next blocking read).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Buffer room per read while reading command lines: small, because a
/// TLS or COMPRESS session keeps its buffer while idle (10,000 IDLE
/// sessions × 64 KiB would be 640 MiB; see `wait_without_buffers`).
const LINE_READ_CHUNK: usize = 2 * 1024;
/// Buffer room per read while streaming a message body or literal.
const BULK_READ_CHUNK: usize = 64 * 1024;
/// Buffers larger than this are shrunk back once drained.
const BUFFER_KEEP_MAX: usize = 16 * 1024;

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// Only during a TLS upgrade.
    Upgrading,
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Upgrading => Poll::Ready(Err(io::Error::other("stream is being upgraded"))),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Upgrading => Poll::Ready(Err(io::Error::other("stream is being upgraded"))),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Upgrading => Poll::Ready(Ok(())),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Upgrading => Poll::Ready(Ok(())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("client closed the connection")]
    Closed,
    #[error("client idle for longer than the timeout")]
    TimedOut,
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
}

/// A line read from the client.
pub enum Line {
    /// Without its CRLF.
    Complete(Vec<u8>),
    /// Longer than allowed; everything up to the next CRLF was discarded.
    TooLong,
}

/// A deflate layer over the stream (IMAP COMPRESS=DEFLATE, RFC 4978):
/// raw deflate (no zlib header) both ways, each flush a sync flush so the
/// client can decode every reply at once.
struct Deflate {
    compress: Compress,
    decompress: Decompress,
    /// Compressed bytes read and not yet inflated.
    raw_in: Vec<u8>,
}

pub struct Conn {
    stream: Stream,
    /// Set once COMPRESS DEFLATE took effect; never unset (RFC 4978 §3).
    deflate: Option<Box<Deflate>>,
    inbuf: Vec<u8>,
    /// Where the next CRLF search starts: bytes before it hold no LF.
    scanned: usize,
    out: Vec<u8>,
    idle: Duration,
    tls: bool,
}

impl Conn {
    pub fn new(stream: Stream, idle: Duration) -> Self {
        let tls = matches!(stream, Stream::Tls(_));
        Conn {
            stream,
            deflate: None,
            inbuf: Vec::new(),
            scanned: 0,
            out: Vec::new(),
            idle,
            tls,
        }
    }

    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// Acknowledges what was received now, not after the delayed-ACK timer.
    /// Clients that write a literal and its closing CRLF separately
    /// (Python's imaplib, and others) have Nagle's algorithm hold the CRLF
    /// until the literal is acknowledged, so without this every
    /// synchronizing literal stalls for Linux's 40 ms delayed ACK.
    pub fn ack_now(&self) {
        let tcp = match &self.stream {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref().0,
            Stream::Upgrading => return,
        };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Err(e) = socket2::SockRef::from(tcp).set_tcp_quickack(true) {
            tracing::debug!(error = %e, "TCP_QUICKACK failed");
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = tcp;
    }

    /// Queues bytes for the client (sent at the next flush or read).
    pub fn send(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    pub fn is_compressed(&self) -> bool {
        self.deflate.is_some()
    }

    /// Starts COMPRESS DEFLATE: everything queued so far (the tagged OK) is
    /// sent as is, everything after is deflated; bytes the client already
    /// sent after the command are compressed ones.
    pub async fn start_deflate(&mut self) -> Result<(), ConnError> {
        self.flush().await?;
        let raw_in = std::mem::take(&mut self.inbuf);
        self.scanned = 0;
        self.deflate = Some(Box::new(Deflate {
            compress: Compress::new(Compression::default(), false),
            decompress: Decompress::new(false),
            raw_in,
        }));
        Ok(())
    }

    /// Deflates `out` with a sync flush.
    fn deflate_out(d: &mut Deflate, out: &[u8]) -> io::Result<Vec<u8>> {
        let mut z = Vec::with_capacity(out.len() / 2 + 64);
        let mut pos = 0;
        loop {
            z.reserve((out.len() - pos).max(1024));
            let before = d.compress.total_in();
            d.compress
                .compress_vec(&out[pos..], &mut z, FlushCompress::Sync)
                .map_err(io::Error::other)?;
            pos += (d.compress.total_in() - before) as usize;
            // Done when all input is in and the flush did not fill the room.
            if pos == out.len() && z.len() < z.capacity() {
                return Ok(z);
            }
        }
    }

    /// Inflates buffered compressed bytes into `inbuf`, at most `chunk`
    /// bytes of output per call (a small input cannot blow up memory).
    fn inflate_in(&mut self, chunk: usize) -> io::Result<usize> {
        let Some(d) = self.deflate.as_mut() else { return Ok(0) };
        let mut tmp = vec![0u8; chunk];
        let (in_before, out_before) = (d.decompress.total_in(), d.decompress.total_out());
        d.decompress
            .decompress(&d.raw_in, &mut tmp, FlushDecompress::Sync)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let consumed = (d.decompress.total_in() - in_before) as usize;
        let produced = (d.decompress.total_out() - out_before) as usize;
        d.raw_in.drain(..consumed);
        self.inbuf.extend_from_slice(&tmp[..produced]);
        Ok(produced)
    }

    pub async fn flush(&mut self) -> Result<(), ConnError> {
        if !self.out.is_empty() {
            let mut out = std::mem::take(&mut self.out);
            if let Some(d) = self.deflate.as_mut() {
                let z = Self::deflate_out(d, &out)?;
                tokio::time::timeout(self.idle, self.stream.write_all(&z))
                    .await
                    .map_err(|_| ConnError::TimedOut)??;
                out.clear();
            }
            tokio::time::timeout(self.idle, self.stream.write_all(&out))
                .await
                .map_err(|_| ConnError::TimedOut)??;
            tokio::time::timeout(self.idle, self.stream.flush())
                .await
                .map_err(|_| ConnError::TimedOut)??;
            // Reuse the buffer unless a big response grew it.
            out.clear();
            if out.capacity() <= BUFFER_KEEP_MAX {
                self.out = out;
            }
        }
        Ok(())
    }

    /// Reads more bytes into the buffer, flushing queued replies first (so
    /// pipelined commands get their replies in one write).
    async fn fill(&mut self, chunk: usize) -> Result<usize, ConnError> {
        self.flush().await?;
        if self.inbuf.is_empty() {
            self.wait_without_buffers().await?;
        }
        if self.deflate.is_some() {
            return self.fill_deflated(chunk).await;
        }
        self.inbuf.reserve(chunk);
        // `read_buf` appends only what was read, so a read cancelled by a
        // `select!` (IDLE waits on the socket and on change hints) loses nothing.
        let n = tokio::time::timeout(self.idle, self.stream.read_buf(&mut self.inbuf))
            .await
            .map_err(|_| ConnError::TimedOut)??;
        if n == 0 {
            return Err(ConnError::Closed);
        }
        Ok(n)
    }

    /// With nothing buffered the client is between commands, often for
    /// minutes (IDLE): the read and reply buffers are given back and the
    /// wait is for readiness alone, so an idle connection holds no buffer
    /// (issue 15: <= 8 KB per idle IMAP session). Plain TCP only: a TLS or
    /// COMPRESS layer may hold bytes of its own that readiness would not
    /// show, and keeps its buffers. Cancel-safe (readiness loses nothing).
    async fn wait_without_buffers(&mut self) -> Result<(), ConnError> {
        let Stream::Plain(tcp) = &self.stream else {
            return Ok(());
        };
        if self.deflate.is_some() {
            return Ok(());
        }
        self.inbuf = Vec::new();
        self.out = Vec::new();
        self.scanned = 0;
        tokio::time::timeout(self.idle, tcp.readable())
            .await
            .map_err(|_| ConnError::TimedOut)??;
        Ok(())
    }

    /// Readies the connection to wait as a bare socket with no task reading
    /// it (a parked IMAP IDLE session): true when nothing is buffered either
    /// way and no layer holds bytes that socket readiness would not show,
    /// and then its buffers are given back. A TLS session qualifies when
    /// rustls holds no decrypted bytes (`wants_read`); COMPRESS never does
    /// (the inflater may hold output the socket will not announce).
    pub fn try_park(&mut self) -> bool {
        if !self.inbuf.is_empty() || !self.out.is_empty() || self.deflate.is_some() {
            return false;
        }
        let quiet = match &self.stream {
            Stream::Plain(_) => true,
            Stream::Tls(tls) => tls.get_ref().1.wants_read(),
            Stream::Upgrading => false,
        };
        if quiet {
            self.inbuf = Vec::new();
            self.out = Vec::new();
            self.scanned = 0;
        }
        quiet
    }

    /// Waits until the socket under any TLS layer is readable, or the idle
    /// timeout passes (`Err(TimedOut)`). Reads nothing; for parked
    /// connections ([`Conn::try_park`]).
    pub async fn socket_readable(&self) -> Result<(), ConnError> {
        let tcp = match &self.stream {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref().0,
            Stream::Upgrading => return Err(ConnError::Closed),
        };
        tokio::time::timeout(self.idle, tcp.readable())
            .await
            .map_err(|_| ConnError::TimedOut)??;
        Ok(())
    }

    /// `fill` under COMPRESS: reads until at least one byte inflates.
    /// Cancel-safe like `fill`: read bytes are kept in `raw_in` and
    /// inflated bytes in `inbuf` before the next await.
    async fn fill_deflated(&mut self, chunk: usize) -> Result<usize, ConnError> {
        loop {
            let n = self.inflate_in(chunk)?;
            if n > 0 {
                return Ok(n);
            }
            let d = self.deflate.as_mut().expect("deflate on");
            d.raw_in.reserve(chunk);
            let read = tokio::time::timeout(self.idle, self.stream.read_buf(&mut d.raw_in))
                .await
                .map_err(|_| ConnError::TimedOut)??;
            if read == 0 {
                return Err(ConnError::Closed);
            }
        }
    }

    /// Waits until at least one more byte is buffered (cancel-safe).
    pub async fn wait_readable(&mut self) -> Result<(), ConnError> {
        if self.inbuf.is_empty() {
            self.fill(LINE_READ_CHUNK).await?;
        }
        Ok(())
    }

    /// A complete line already in the buffer, if any (no I/O).
    pub fn buffered_line(&mut self) -> Option<Vec<u8>> {
        let pos = self.inbuf.iter().position(|&b| b == b'\n')?;
        let mut line: Vec<u8> = self.inbuf.drain(..=pos).collect();
        self.scanned = 0;
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Some(line)
    }

    /// Changes the idle timeout (IMAP: 30 min autologout, refreshed by IDLE).
    pub fn set_idle_timeout(&mut self, idle: Duration) {
        self.idle = idle;
    }

    /// Reads exactly `n` bytes (a literal), at most `cap` kept: the rest is
    /// read and dropped so the protocol stays in step.
    pub async fn read_exact_capped(&mut self, n: u64, cap: u64) -> Result<Option<Vec<u8>>, ConnError> {
        let mut out = Vec::with_capacity(n.min(cap).min(1 << 20) as usize);
        let mut remaining = n;
        let keep = n <= cap;
        while remaining > 0 {
            if self.inbuf.is_empty() {
                self.fill(BULK_READ_CHUNK).await?;
            }
            let take = (remaining as usize).min(self.inbuf.len());
            if keep {
                out.extend_from_slice(&self.inbuf[..take]);
            }
            self.inbuf.drain(..take);
            remaining -= take as u64;
        }
        self.scanned = 0;
        Ok(keep.then_some(out))
    }

    /// One CRLF-terminated line of at most `max` bytes (CRLF excluded).
    pub async fn read_line(&mut self, max: usize) -> Result<Line, ConnError> {
        let mut too_long = false;
        loop {
            if let Some(pos) = self.inbuf[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + pos;
                let line: Vec<u8> = self.inbuf.drain(..=end).collect();
                self.scanned = 0;
                if too_long {
                    return Ok(Line::TooLong);
                }
                let mut line = line;
                line.pop(); // LF
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > max {
                    return Ok(Line::TooLong);
                }
                return Ok(Line::Complete(line));
            }
            self.scanned = self.inbuf.len();
            if self.inbuf.len() > max + 2 {
                // Keep no more than the cap: drop what we have, remember it.
                too_long = true;
                self.inbuf.clear();
                self.scanned = 0;
            }
            self.fill(LINE_READ_CHUNK).await?;
        }
    }

    /// Bytes already buffered (e.g. the start of a message body after DATA),
    /// taken out of the buffer.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        self.scanned = 0;
        std::mem::take(&mut self.inbuf)
    }

    /// Puts back bytes read past the end of a message (pipelined commands).
    pub fn unread(&mut self, bytes: &[u8]) {
        let mut v = bytes.to_vec();
        v.extend_from_slice(&self.inbuf);
        self.inbuf = v;
        self.scanned = 0;
    }

    /// Reads whatever arrives next (at least one byte).
    pub async fn read_some(&mut self) -> Result<Vec<u8>, ConnError> {
        if self.inbuf.is_empty() {
            self.fill(BULK_READ_CHUNK).await?;
        }
        Ok(self.take_buffered())
    }

    /// Switches to TLS in place. Anything the client sent after STARTTLS in
    /// plaintext is discarded (RFC 3207 §4.2: it could be an injection).
    pub async fn start_tls(&mut self, acceptor: &TlsAcceptor) -> Result<(), ConnError> {
        self.flush().await?;
        self.inbuf.clear();
        self.scanned = 0;
        let Stream::Plain(tcp) = std::mem::replace(&mut self.stream, Stream::Upgrading) else {
            return Err(ConnError::Io(io::Error::other("TLS is already active")));
        };
        let tls = tokio::time::timeout(self.idle, acceptor.accept(tcp))
            .await
            .map_err(|_| ConnError::TimedOut)??;
        self.stream = Stream::Tls(Box::new(tls));
        self.tls = true;
        Ok(())
    }

    pub async fn shutdown(&mut self) {
        let _ = self.flush().await;
        let _ = self.stream.shutdown().await;
    }
}
