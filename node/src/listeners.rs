//! Mail listeners: accept loops that hand each connection to a new session
//! actor under the listener's supervisor.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use meshmail_actors::session::start_listener;
use meshmail_actors::session::{ListenerMsg as LM, Session};
use meshmail_protocols::imap::session::{ImapSession, ImapShared};
use meshmail_protocols::smtp::session::{SmtpSession, SmtpShared};
use tokio::net::TcpListener;

/// Binds `addr` and serves SMTP/LMTP/submission sessions on it until the
/// process ends. Returns the bound address (the port may have been 0).
pub async fn spawn_smtp(name: &'static str, addr: SocketAddr, shared: Arc<SmtpShared>) -> anyhow::Result<SocketAddr> {
    spawn(name, addr, move |stream, peer| {
        Box::new(SmtpSession::new(shared.clone(), stream, peer))
    })
    .await
}

/// The same for IMAP sessions.
pub async fn spawn_imap(name: &'static str, addr: SocketAddr, shared: Arc<ImapShared>) -> anyhow::Result<SocketAddr> {
    spawn(name, addr, move |stream, peer| {
        Box::new(ImapSession::new(shared.clone(), stream, peer))
    })
    .await
}

async fn spawn<F>(name: &'static str, addr: SocketAddr, make: F) -> anyhow::Result<SocketAddr>
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
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    if supervisor.cast(LM::Spawn(make(stream, peer))).is_err() {
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
    Ok(bound)
}
