//! A TCP relay that lives in another network namespace: a thread enters
//! the namespace (`setns`), and every socket it creates from then on
//! belongs there. It listens on the namespace's address and forwards each
//! connection to 127.0.0.1 in the same namespace (see `netns.rs` for why).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// How long one relayed connect to the node may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// A relayed connection idle this long in both directions is closed (the
/// load's own timeouts are shorter; this only bounds leaks).
const IDLE_LIMIT: Duration = Duration::from_secs(600);

fn enter(ns_path: &str) -> anyhow::Result<()> {
    let f = std::fs::File::open(ns_path).with_context(|| format!("opening {ns_path}"))?;
    // SAFETY: setns(2) on an open namespace fd; it affects only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns {ns_path}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

async fn serve(listener: TcpListener, to: SocketAddr) {
    while let Ok((mut down, _)) = listener.accept().await {
        tokio::spawn(async move {
            let Ok(Ok(mut up)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await else {
                return; // node down: the client sees the connection close
            };
            let _ = tokio::time::timeout(IDLE_LIMIT, tokio::io::copy_bidirectional(&mut down, &mut up)).await;
        });
    }
}

/// Starts the relay thread; listening is set up before this returns.
/// Sending on (or dropping) the returned sender stops it.
pub fn spawn_in_netns(ns_path: &str, pairs: Vec<(SocketAddr, SocketAddr)>) -> anyhow::Result<oneshot::Sender<()>> {
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    let path = ns_path.to_string();
    std::thread::Builder::new().name("netns-relay".into()).spawn(move || {
        let setup = || -> anyhow::Result<(tokio::runtime::Runtime, Vec<(TcpListener, SocketAddr)>)> {
            enter(&path)?;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let mut ls = Vec::new();
            for (from, to) in &pairs {
                let l = rt
                    .block_on(TcpListener::bind(from))
                    .with_context(|| format!("relay bind {from}"))?;
                ls.push((l, *to));
            }
            Ok((rt, ls))
        };
        match setup() {
            Ok((rt, ls)) => {
                let _ = ready_tx.send(Ok(()));
                rt.block_on(async move {
                    for (l, to) in ls {
                        tokio::spawn(serve(l, to));
                    }
                    let _ = stop_rx.await;
                });
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        }
    })?;
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => Ok(stop_tx),
        Ok(Err(e)) => Err(e),
        Err(_) => bail!("relay thread did not start"),
    }
}
