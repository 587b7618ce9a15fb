//! Mail listeners: accept loops that hand each connection to a new session
//! actor under the listener's supervisor, with a bound on concurrent
//! connections per listener (past it a client gets one refusal line).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use meshmail_actors::session::{Ended, ListenerMsg, Parked, Session, start_listener};
use meshmail_protocols::imap::session::{ImapSession, ImapShared};
use meshmail_protocols::managesieve::session::{ManageSieveSession, ManageSieveShared};
use meshmail_protocols::pop3::session::{Pop3Session, Pop3Shared};
use meshmail_protocols::smtp::session::{SmtpSession, SmtpShared};
use tokio::net::TcpListener;

use crate::vitals::Vitals;

/// Binds `addr` and serves SMTP/LMTP/submission sessions on it until the
/// process ends. Returns the bound address (the port may have been 0); the
/// accept loop is watched in `vitals`.
pub async fn spawn_smtp(
    name: &'static str,
    addr: SocketAddr,
    max_connections: usize,
    shared: Arc<SmtpShared>,
    vitals: &mut Vitals,
) -> anyhow::Result<SocketAddr> {
    let busy = format!(
        "421 4.7.0 {} Too many connections, try again later\r\n",
        shared.hostname
    );
    spawn(name, addr, max_connections, busy, vitals, move |stream, peer| {
        Box::new(SmtpSession::new(shared.clone(), stream, peer))
    })
    .await
}

/// The same for IMAP sessions.
pub async fn spawn_imap(
    name: &'static str,
    addr: SocketAddr,
    max_connections: usize,
    shared: Arc<ImapShared>,
    vitals: &mut Vitals,
) -> anyhow::Result<SocketAddr> {
    let busy = "* BYE Too many connections, try again later\r\n".to_string();
    spawn(name, addr, max_connections, busy, vitals, move |stream, peer| {
        Box::new(ImapSession::new(shared.clone(), stream, peer))
    })
    .await
}

/// The same for POP3 sessions (`-ERR [SYS/TEMP]`: RFC 3206 §4, a
/// temporary failure the client retries).
pub async fn spawn_pop3(
    name: &'static str,
    addr: SocketAddr,
    max_connections: usize,
    shared: Arc<Pop3Shared>,
    vitals: &mut Vitals,
) -> anyhow::Result<SocketAddr> {
    let busy = "-ERR [SYS/TEMP] Too many connections, try again later\r\n".to_string();
    spawn(name, addr, max_connections, busy, vitals, move |stream, peer| {
        Box::new(Pop3Session::new(shared.clone(), stream, peer))
    })
    .await
}

/// The same for ManageSieve sessions (`BYE (TRYLATER)`: RFC 5804 §1.3,
/// a temporary refusal the client may retry).
pub async fn spawn_managesieve(
    name: &'static str,
    addr: SocketAddr,
    max_connections: usize,
    shared: Arc<ManageSieveShared>,
    vitals: &mut Vitals,
) -> anyhow::Result<SocketAddr> {
    let busy = "BYE (TRYLATER) \"Too many connections, try again later.\"\r\n".to_string();
    spawn(name, addr, max_connections, busy, vitals, move |stream, peer| {
        Box::new(ManageSieveSession::new(shared.clone(), stream, peer))
    })
    .await
}

/// A session that holds its listener's connection permit while it lives,
/// parked or not (a parked connection is still a connection).
struct Limited {
    inner: Box<dyn Session>,
    permit: tokio::sync::OwnedSemaphorePermit,
}

#[async_trait::async_trait]
impl Session for Limited {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn run(self: Box<Self>) -> Ended {
        let Limited { inner, permit } = *self;
        match inner.run().await {
            Ended::Closed => Ended::Closed,
            Ended::Parked(inner) => Ended::Parked(Box::new(LimitedParked { inner, permit })),
        }
    }
}

/// A parked [`Limited`] session: the permit stays with it.
struct LimitedParked {
    inner: Box<dyn Parked>,
    permit: tokio::sync::OwnedSemaphorePermit,
}

#[async_trait::async_trait]
impl Parked for LimitedParked {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn wake(self: Box<Self>) -> Box<dyn Session> {
        let LimitedParked { inner, permit } = *self;
        Box::new(Limited {
            inner: inner.wake().await,
            permit,
        })
    }
}

async fn spawn<F>(
    name: &'static str,
    addr: SocketAddr,
    max_connections: usize,
    busy: String,
    vitals: &mut Vitals,
    make: F,
) -> anyhow::Result<SocketAddr>
where
    F: Fn(tokio::net::TcpStream, SocketAddr) -> Box<dyn Session> + Send + 'static,
{
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {name} listener on {addr}"))?;
    let bound = listener.local_addr()?;
    let supervisor = start_listener(name)
        .await
        .map_err(|e| anyhow::anyhow!("starting the {name} supervisor: {e}"))?;
    let permits = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
    let accept_loop = tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((mut stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        metrics::counter!("meshmail_connections_refused_total", "listener" => name).increment(1);
                        let busy = busy.clone();
                        tokio::spawn(async move {
                            use tokio::io::AsyncWriteExt;
                            let _ = stream.write_all(busy.as_bytes()).await;
                        });
                        continue;
                    };
                    let session = Box::new(Limited {
                        inner: make(stream, peer),
                        permit,
                    });
                    if supervisor.cast(ListenerMsg::Spawn(session)).is_err() {
                        tracing::error!(listener = name, "listener supervisor is gone: stopping the accept loop");
                        return;
                    }
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(listener = name, error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    });
    vitals.watch(format!("{name} accept loop"), accept_loop);
    Ok(bound)
}
