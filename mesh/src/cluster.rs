//! Remote actor messaging: `ractor_cluster` over the mesh's QUIC links.
//!
//! Every admitted link carries one ractor node session on its second
//! bidirectional stream: the dialer opens it and hands it to
//! `client_connect_external`, the acceptor hands the stream it accepts to
//! its `NodeServer` as a server connection. No TCP between nodes: the
//! `NodeServer`'s own listener is bound to 127.0.0.1 port 0 and never
//! advertised, and the connection mode is `Isolated` (no transitive dials).
//! The cookie is derived from the cluster CA; identity and confidentiality
//! come from QUIC's mutual TLS, checked before ractor sees a byte.
//!
//! The ractor node name is `name#generation`, so each incarnation is a
//! distinct ractor peer. The two lifetimes are tied: when the ractor session
//! of a peer ends (say, after an oversized frame) its QUIC link is closed,
//! and when the link closes the stream errors and the session ends.
//!
//! Each node runs one [`Gateway`] actor, joined to the process group
//! `meshmail/gw/<name>/<generation>`; callers look it up there at every
//! call (remote `ActorRef`s change at every reconnect). Requests are opaque
//! bytes: the node decides what they mean ([`GatewayHandler`]).
//!
//! Flow control (ractor_cluster's outbound queue is unbounded): at most
//! [`CALLS_IN_FLIGHT_MAX`] calls in flight per peer, a caller waits for a
//! slot within its own timeout; casts beyond [`CASTS_PENDING_MAX`] pending
//! per peer are dropped and counted (casts carry hints, which are
//! droppable by design). Inbound, the gateway runs at most
//! [`INBOUND_CALLS_MAX`] calls at once and answers the rest "busy" at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServer, NodeServerMessage};
use sha2::{Digest, Sha256};
use tokio::sync::{Semaphore, mpsc};

use crate::error::{MeshError, Result};
use crate::identity::NodeId;
use crate::transport::{LinkSide, MeshEndpoint, PeerLink};

/// Calls in flight to one peer before callers wait.
pub const CALLS_IN_FLIGHT_MAX: usize = 512;
/// Casts queued to one peer before further ones are dropped.
pub const CASTS_PENDING_MAX: usize = 4096;
/// Calls the gateway serves at once; beyond, it answers busy at once.
pub const INBOUND_CALLS_MAX: usize = 2048;
/// The reply body that means "busy, retry": never a valid JSON reply.
pub const BUSY: &[u8] = b"\0busy";

/// What a node does with requests from peers.
#[async_trait]
pub trait GatewayHandler: Send + Sync + 'static {
    /// Answers one request. Runs on its own task.
    async fn call(&self, request: Vec<u8>) -> Vec<u8>;
    /// Takes a one-way message (no answer, may be dropped).
    fn cast(&self, message: Vec<u8>);
}

#[derive(ractor_cluster_derive::RactorClusterMessage)]
pub enum GatewayMsg {
    #[rpc]
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
    Cast(Vec<u8>),
}

pub struct Gateway;

pub struct GatewayState {
    handler: Arc<dyn GatewayHandler>,
    inbound: Arc<Semaphore>,
}

impl Actor for Gateway {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = Arc<dyn GatewayHandler>;

    async fn pre_start(
        &self,
        _me: ActorRef<GatewayMsg>,
        handler: Arc<dyn GatewayHandler>,
    ) -> std::result::Result<GatewayState, ActorProcessingErr> {
        Ok(GatewayState {
            handler,
            inbound: Arc::new(Semaphore::new(INBOUND_CALLS_MAX)),
        })
    }

    async fn handle(
        &self,
        _me: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        st: &mut GatewayState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Call(request, reply) => {
                let Ok(permit) = st.inbound.clone().try_acquire_owned() else {
                    metrics::counter!("meshmail_mesh_rpc_busy_total").increment(1);
                    let _ = reply.send(BUSY.to_vec());
                    return Ok(());
                };
                let handler = st.handler.clone();
                // A call may wait on a commit: the gateway must not.
                tokio::spawn(async move {
                    let answer = handler.call(request).await;
                    let _ = reply.send(answer);
                    drop(permit);
                });
            }
            GatewayMsg::Cast(message) => st.handler.cast(message),
        }
        Ok(())
    }
}

fn gateway_group(name: &str, generation: u64) -> String {
    format!("meshmail/gw/{name}/{generation}")
}

fn ractor_name(name: &str, generation: u64) -> String {
    format!("{name}#{generation}")
}

/// Parses `name#generation` (ractor appends `@hostname`), the ractor node
/// name of an incarnation.
fn parse_ractor_name(s: &str) -> Option<(String, u64)> {
    let s = s.split_once('@').map_or(s, |(n, _)| n);
    let (name, generation) = s.rsplit_once('#')?;
    Some((name.to_string(), generation.parse().ok()?))
}

/// The QUIC stream a ractor session runs on.
struct QuicStream {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    peer: String,
}

impl ractor_cluster::ClusterBidiStream for QuicStream {
    fn split(self: Box<Self>) -> (ractor_cluster::BoxRead, ractor_cluster::BoxWrite) {
        (Box::new(self.recv), Box::new(self.send))
    }

    fn peer_label(&self) -> Option<String> {
        Some(self.peer.clone())
    }
}

/// Per-peer outbound flow control.
struct PeerBudget {
    calls: Arc<Semaphore>,
    casts: Arc<Semaphore>,
}

/// The remote-messaging side of a node: its ractor `NodeServer`, its gateway
/// and the per-peer budgets. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    endpoint: MeshEndpoint,
    node_server: ActorRef<NodeServerMessage>,
    budgets: Mutex<HashMap<String, Arc<PeerBudget>>>,
    /// Ready ractor sessions by peer name (for the gauge).
    ready: Mutex<std::collections::HashSet<String>>,
}

/// Forwards the NodeServer's synchronous callbacks to a task.
struct SessionEvents(mpsc::UnboundedSender<(String, bool)>);

impl NodeEventSubscription for SessionEvents {
    fn node_session_opened(&self, _ses: NodeServerSessionInformation) {}

    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        if let Some(peer) = ses.peer_name {
            let _ = self.0.send((peer.name, false));
        }
    }

    fn node_session_authenticated(&self, _ses: NodeServerSessionInformation) {}

    fn node_session_ready(&self, ses: NodeServerSessionInformation) {
        if let Some(peer) = ses.peer_name {
            let _ = self.0.send((peer.name, true));
        }
    }
}

impl Cluster {
    /// Starts the node server and the gateway, and hooks every link the
    /// endpoint admits from now on. `cookie_secret` is shared by the cluster
    /// (the CA certificate's PEM does: only members hold it).
    pub async fn start(
        endpoint: &MeshEndpoint,
        cookie_secret: &[u8],
        handler: Arc<dyn GatewayHandler>,
    ) -> Result<Cluster> {
        let cookie = hex_digest(cookie_secret);
        let name = ractor_name(endpoint.node_id().as_str(), endpoint.generation());
        let server = NodeServer::new(
            0,
            cookie,
            name,
            "meshmail".into(),
            None,
            Some(ractor_cluster::node::NodeConnectionMode::Isolated),
        )
        .with_listen_addr(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        let (node_server, _) = Actor::spawn(None, server, ())
            .await
            .map_err(|e| MeshError::Cluster(format!("starting the node server: {e}")))?;
        let (gateway, _) = Actor::spawn(None, Gateway, handler)
            .await
            .map_err(|e| MeshError::Cluster(format!("starting the gateway: {e}")))?;
        ractor::pg::join(
            gateway_group(endpoint.node_id().as_str(), endpoint.generation()),
            vec![gateway.get_cell()],
        );
        let cluster = Cluster {
            inner: Arc::new(Inner {
                endpoint: endpoint.clone(),
                node_server: node_server.clone(),
                budgets: Mutex::new(HashMap::new()),
                ready: Mutex::new(std::collections::HashSet::new()),
            }),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        node_server
            .cast(NodeServerMessage::SubscribeToEvents {
                id: "meshmail-links".into(),
                subscription: Box::new(SessionEvents(tx)),
            })
            .map_err(|e| MeshError::Cluster(e.to_string()))?;
        tokio::spawn(tie_lifetimes(Arc::downgrade(&cluster.inner), rx));
        let weak = Arc::downgrade(&cluster.inner);
        endpoint.on_link(Arc::new(move |link: PeerLink, side: LinkSide| {
            if let Some(inner) = weak.upgrade() {
                tokio::spawn(open_session(inner.node_server.clone(), link, side));
            }
        }));
        Ok(cluster)
    }

    /// Whether this incarnation's gateway is reachable now (its ractor
    /// session is up and its process groups were exchanged).
    pub fn reachable(&self, name: &str, generation: u64) -> bool {
        Self::gateway_of(name, generation).is_some()
    }

    fn budget(&self, peer: &str) -> Arc<PeerBudget> {
        lock(&self.inner.budgets)
            .entry(peer.to_string())
            .or_insert_with(|| {
                Arc::new(PeerBudget {
                    calls: Arc::new(Semaphore::new(CALLS_IN_FLIGHT_MAX)),
                    casts: Arc::new(Semaphore::new(CASTS_PENDING_MAX)),
                })
            })
            .clone()
    }

    fn gateway_of(name: &str, generation: u64) -> Option<ActorRef<GatewayMsg>> {
        ractor::pg::get_members(&gateway_group(name, generation))
            .into_iter()
            .next()
            .map(ActorRef::from)
    }

    /// Calls incarnation (`name`, `generation`)'s gateway and waits for its
    /// answer at most `timeout` (the wait for a flow-control slot included).
    pub async fn call(&self, name: &str, generation: u64, request: Vec<u8>, timeout: Duration) -> Result<Vec<u8>> {
        let started = Instant::now();
        let gateway = Self::gateway_of(name, generation)
            .ok_or_else(|| MeshError::Cluster(format!("no session with {name}#{generation}")))?;
        let budget = self.budget(name);
        let permit = tokio::time::timeout(timeout, budget.calls.clone().acquire_owned())
            .await
            .map_err(|_| MeshError::Cluster(format!("flow control: no call slot for {name} in time")))?
            .map_err(|e| MeshError::Cluster(e.to_string()))?;
        let remaining = timeout.saturating_sub(started.elapsed());
        let answer = gateway
            .call(|port| GatewayMsg::Call(request, port), Some(remaining))
            .await
            .map_err(|e| MeshError::Cluster(format!("call to {name}#{generation}: {e}")))?;
        drop(permit);
        metrics::histogram!("meshmail_mesh_rpc_seconds").record(started.elapsed().as_secs_f64());
        match answer {
            ractor::rpc::CallResult::Success(body) if body == BUSY => {
                Err(MeshError::Cluster(format!("{name}#{generation} is busy")))
            }
            ractor::rpc::CallResult::Success(body) => Ok(body),
            ractor::rpc::CallResult::Timeout => {
                Err(MeshError::Cluster(format!("call to {name}#{generation} timed out")))
            }
            ractor::rpc::CallResult::SenderError => {
                Err(MeshError::Cluster(format!("{name}#{generation} dropped the call")))
            }
        }
    }

    /// Sends a one-way message; dropped (and counted) when the peer has no
    /// session or too many casts are pending to it.
    pub fn cast(&self, name: &str, generation: u64, message: Vec<u8>) -> bool {
        let Some(gateway) = Self::gateway_of(name, generation) else {
            metrics::counter!("meshmail_mesh_casts_dropped_total", "reason" => "no_session").increment(1);
            return false;
        };
        let budget = self.budget(name);
        let Ok(permit) = budget.casts.clone().try_acquire_owned() else {
            metrics::counter!("meshmail_mesh_casts_dropped_total", "reason" => "flow_control").increment(1);
            return false;
        };
        let sent = gateway.cast(GatewayMsg::Cast(message)).is_ok();
        // The cast is queued in ractor's writer once `cast` returns; the
        // permit bounds how many this node pushes per scheduling round.
        drop(permit);
        sent
    }
}

/// Opens (dialer) or accepts (acceptor) the link's ractor stream.
async fn open_session(node_server: ActorRef<NodeServerMessage>, link: PeerLink, side: LinkSide) {
    let conn = link.connection().clone();
    let stream = match side {
        LinkSide::Dialer => conn.open_bi().await,
        LinkSide::Acceptor => conn.accept_bi().await,
    };
    let (send, recv) = match stream {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(peer = %link.id, error = %e, "mesh: link closed before its ractor stream opened");
            return;
        }
    };
    let stream = Box::new(QuicStream {
        send,
        recv,
        peer: format!("{}#{}@{}", link.id, link.generation, link.addr),
    });
    let sent = match side {
        LinkSide::Dialer => ractor_cluster::client_connect_external(&node_server, stream)
            .await
            .map_err(|e| e.to_string()),
        LinkSide::Acceptor => node_server
            .cast(NodeServerMessage::ConnectionOpenedExternal {
                stream,
                is_server: true,
            })
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = sent {
        tracing::warn!(peer = %link.id, error = %e, "mesh: could not start the ractor session; closing the link");
        link.close();
    }
}

/// Closes a peer's QUIC link when its ractor session ends: otherwise a
/// session torn down by ractor (an oversized frame, say) would leave a link
/// that looks up but carries nothing.
async fn tie_lifetimes(inner: std::sync::Weak<Inner>, mut rx: mpsc::UnboundedReceiver<(String, bool)>) {
    while let Some((peer, ready)) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        if ready {
            tracing::info!(peer = %peer, "mesh: ractor session ready");
            lock(&inner.ready).insert(peer);
            metrics::gauge!("meshmail_mesh_sessions_ready").set(lock(&inner.ready).len() as f64);
            continue;
        }
        lock(&inner.ready).retain(|k| parse_ractor_name(k) != parse_ractor_name(&peer));
        metrics::gauge!("meshmail_mesh_sessions_ready").set(lock(&inner.ready).len() as f64);
        let Some((name, generation)) = parse_ractor_name(&peer) else {
            continue;
        };
        let Ok(id) = NodeId::new(name) else { continue };
        if inner.endpoint.close_link(&id, generation) {
            tracing::info!(peer = %peer, "mesh: ractor session ended; closed its link");
        }
    }
}

fn hex_digest(secret: &[u8]) -> String {
    let digest = Sha256::digest(secret);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ractor_names_round_trip() {
        assert_eq!(parse_ractor_name(&ractor_name("node-1", 7)), Some(("node-1".into(), 7)));
        assert_eq!(parse_ractor_name("node-1#7@meshmail"), Some(("node-1".into(), 7)));
        assert_eq!(parse_ractor_name("node-1"), None);
        assert_eq!(parse_ractor_name("node-1#x"), None);
    }
}
