//! A cap on the HTTP and HTTPS listeners' open connections (`[jmap]
//! max_connections`): each accepted connection holds a permit until it
//! closes; beyond the cap a connection is answered `503 Service
//! Unavailable` (with `Retry-After`) and closed, so a flood of idle or
//! slow clients cannot take every file descriptor or task of the node.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Writing the 503 to a refused client takes at most this.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);
const REFUSAL: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// A listener whose connections are capped.
pub struct Capped<L> {
    inner: L,
    permits: Arc<Semaphore>,
    name: &'static str,
}

impl<L> Capped<L> {
    pub fn new(inner: L, max_connections: usize, name: &'static str) -> Capped<L> {
        Capped {
            inner,
            permits: Arc::new(Semaphore::new(max_connections.max(1))),
            name,
        }
    }
}

/// A connection with its permit (released when the connection drops).
pub struct CappedIo<T> {
    inner: T,
    _permit: OwnedSemaphorePermit,
    name: &'static str,
}

impl<T> Drop for CappedIo<T> {
    fn drop(&mut self) {
        metrics::gauge!("meshmail_http_connections", "listener" => self.name).decrement(1.0);
    }
}

impl<L> Listener for Capped<L>
where
    L: Listener,
    L::Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = CappedIo<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (io, addr) = self.inner.accept().await;
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    metrics::gauge!("meshmail_http_connections", "listener" => self.name).increment(1.0);
                    return (
                        CappedIo {
                            inner: io,
                            _permit: permit,
                            name: self.name,
                        },
                        addr,
                    );
                }
                Err(_) => {
                    metrics::counter!("meshmail_http_connections_refused_total", "listener" => self.name).increment(1);
                    let mut io = io;
                    tokio::spawn(async move {
                        // Answer, then read what the client sent until it
                        // closes: closing with unread input would reset the
                        // connection and could lose the 503 on the way.
                        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, async {
                            io.write_all(REFUSAL).await?;
                            io.shutdown().await?;
                            let mut sink = [0u8; 1024];
                            while io.read(&mut sink).await? > 0 {}
                            Ok::<_, io::Error>(())
                        })
                        .await;
                    });
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CappedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CappedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
