//! The QUIC endpoint of a node: dial and accept mesh links.
//!
//! A link is established in three steps: the QUIC handshake with mutual TLS
//! against the cluster CA; reading the peer's node id from its certificate
//! (the only identity we trust); then the hello exchange on the first
//! bidirectional stream, which adds the generation and is checked against
//! the certificate and the generation table before the link is admitted.
//! The dialer writes its hello first; the acceptor answers with its own only
//! after admitting the dialer, so a refused dialer learns nothing but the
//! close code and reason. The dialer checks that answer in turn; if it
//! refuses the acceptor (say, a generation it has seen surpassed), the
//! acceptor sees a NodeUp promptly followed by that link's NodeDown.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Connection, ConnectionError, IdleTimeout, RecvStream, SendStream, TransportConfig, VarInt};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::ca::NodeCredentials;
use crate::error::{MeshError, Result};
use crate::events::{DownReason, LinkRegistry, NodeEvent, record_refused};
use crate::identity::{CloseCode, Hello, MAX_HELLO_BYTES, MESH_VERSION, NodeId, Refusal, check_hello};
use crate::tls;

/// Settings of one endpoint.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    /// UDP address to bind (port 0 picks a free port; see `local_addr`).
    pub bind: SocketAddr,
    /// This incarnation's generation (from the store's counter at start).
    pub generation: u64,
    /// QUIC keep-alive: keeps an idle link from timing out, and gives the
    /// idle timeout something to miss when the peer dies.
    pub keep_alive: Duration,
    /// A link with nothing heard for this long is closed (and redialed).
    /// Failure detection does not wait for it: the runtime judges silence
    /// itself (`dead_after`), from the traffic keep-alive makes.
    pub idle_timeout: Duration,
    /// How long a new link may take to deliver its hello.
    pub hello_timeout: Duration,
}

/// The defaults of [`MeshConfig`], also the node's `[mesh] keep_alive_ms`
/// and `idle_timeout_ms` defaults (one truth).
pub const KEEP_ALIVE_DEFAULT: Duration = Duration::from_millis(200);
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(4);

impl MeshConfig {
    pub fn new(bind: SocketAddr, generation: u64) -> MeshConfig {
        MeshConfig {
            bind,
            generation,
            keep_alive: KEEP_ALIVE_DEFAULT,
            idle_timeout: IDLE_TIMEOUT_DEFAULT,
            hello_timeout: Duration::from_secs(5),
        }
    }
}

/// An admitted link to one peer incarnation. Dropping it does not close the
/// link: the endpoint keeps every live link until it goes down.
#[derive(Debug, Clone)]
pub struct PeerLink {
    pub id: NodeId,
    pub generation: u64,
    pub addr: SocketAddr,
    connection: Connection,
}

impl PeerLink {
    /// The QUIC connection, for opening further streams (remote messaging).
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Closes this link; observers see NodeDown with `ClosedLocally`.
    pub fn close(&self) {
        close(&self.connection, CloseCode::Normal, "closed");
    }
}

/// Which side of a link this node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSide {
    Dialer,
    Acceptor,
}

/// Called once for every admitted link (see [`MeshEndpoint::on_link`]).
pub type LinkHook = Arc<dyn Fn(PeerLink, LinkSide) + Send + Sync>;

struct Shared {
    endpoint: quinn::Endpoint,
    local: NodeId,
    generation: u64,
    hello_timeout: Duration,
    registry: LinkRegistry<Connection>,
    on_link: std::sync::RwLock<Option<LinkHook>>,
    /// Fault injection: until this instant every link is refused both ways.
    partitioned_until: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Shared {
    fn partitioned(&self) -> bool {
        let mut until = self.partitioned_until.lock().unwrap_or_else(|e| e.into_inner());
        match *until {
            Some(t) if t > std::time::Instant::now() => true,
            Some(_) => {
                *until = None;
                false
            }
            None => false,
        }
    }

    fn link_admitted(&self, link: &PeerLink, side: LinkSide) {
        let hook = self.on_link.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(hook) = hook {
            hook(link.clone(), side);
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle is gone: end every link rather than leave them to
        // time out on the peers.
        self.endpoint
            .close(VarInt::from_u32(CloseCode::Normal.code()), b"endpoint dropped");
    }
}

/// A node's mesh endpoint. Cheap to clone; the links live as long as any
/// clone (or an admitted link's watcher) does.
#[derive(Clone)]
pub struct MeshEndpoint {
    shared: Arc<Shared>,
}

impl MeshEndpoint {
    /// Binds a UDP socket and builds the TLS and QUIC configurations. The
    /// node id is the one in `creds`' certificate.
    pub fn bind(creds: &NodeCredentials, config: MeshConfig) -> Result<MeshEndpoint> {
        let mut transport = TransportConfig::default();
        transport.keep_alive_interval(Some(config.keep_alive));
        transport.max_idle_timeout(Some(
            IdleTimeout::try_from(config.idle_timeout).map_err(|e| MeshError::IdleTimeout(e.to_string()))?,
        ));
        let transport = Arc::new(transport);

        let server_crypto =
            QuicServerConfig::try_from(tls::server_config(creds)?).map_err(|e| MeshError::QuicCrypto(e.to_string()))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(server_crypto));
        server.transport_config(transport.clone());
        let client_crypto =
            QuicClientConfig::try_from(tls::client_config(creds)?).map_err(|e| MeshError::QuicCrypto(e.to_string()))?;
        let mut client = quinn::ClientConfig::new(Arc::new(client_crypto));
        client.transport_config(transport);

        let mut endpoint = quinn::Endpoint::server(server, config.bind).map_err(MeshError::Bind)?;
        endpoint.set_default_client_config(client);
        Ok(MeshEndpoint {
            shared: Arc::new(Shared {
                endpoint,
                local: creds.node_id.clone(),
                generation: config.generation,
                hello_timeout: config.hello_timeout,
                registry: LinkRegistry::new(),
                on_link: std::sync::RwLock::new(None),
                partitioned_until: std::sync::Mutex::new(None),
            }),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.shared.endpoint.local_addr().map_err(MeshError::Bind)
    }

    pub fn node_id(&self) -> &NodeId {
        &self.shared.local
    }

    pub fn generation(&self) -> u64 {
        self.shared.generation
    }

    /// NodeUp/NodeDown of every link of this endpoint, in the order they happened.
    pub fn subscribe(&self) -> broadcast::Receiver<NodeEvent> {
        self.shared.registry.subscribe()
    }

    /// Resolves when incarnation (`id`, `generation`) goes down; never for
    /// another incarnation. `DownReason::NotConnected` at once if it has no
    /// live link now. Set it before awaiting anything else: it is armed at
    /// the call, not at the first poll.
    pub fn monitor(
        &self,
        id: &NodeId,
        generation: u64,
    ) -> impl std::future::Future<Output = DownReason> + Send + 'static {
        self.shared.registry.monitor(id, generation)
    }

    /// Runs `hook` for every link admitted from now on, on the task that
    /// admitted it (keep it short: spawn anything that waits).
    pub fn on_link(&self, hook: LinkHook) {
        *self.shared.on_link.write().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Closes the live link of incarnation (`id`, `generation`), if any.
    pub fn close_link(&self, id: &NodeId, generation: u64) -> bool {
        match self.shared.registry.handle(id, generation) {
            Some(conn) => {
                close(&conn, CloseCode::Normal, "link closed");
                true
            }
            None => false,
        }
    }

    /// Fault injection: closes every live link now (peers see them go down
    /// and redial). Returns how many were closed.
    pub fn drop_links(&self) -> usize {
        let conns = self.shared.registry.remove_all(DownReason::ClosedLocally);
        for conn in &conns {
            close(conn, CloseCode::Normal, "link dropped (fault injection)");
        }
        conns.len()
    }

    /// Fault injection: drops every link and refuses new ones, both ways,
    /// for `duration` — a partition of this node from all others.
    pub fn partition(&self, duration: Duration) -> usize {
        *self.shared.partitioned_until.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(std::time::Instant::now() + duration);
        self.drop_links()
    }

    /// Whether a fault-injected partition is in force.
    pub fn is_partitioned(&self) -> bool {
        self.shared.partitioned()
    }

    /// The live peer incarnations, sorted by id.
    pub fn live(&self) -> Vec<(NodeId, u64)> {
        self.shared.registry.live()
    }

    /// Every live link with the number of UDP datagrams received on it so
    /// far: the mesh's heartbeat. Both sides send a QUIC PING after
    /// `keep_alive` of quiet and the other acknowledges it, so a peer whose
    /// count stops growing for several keep-alive intervals is silent — long
    /// before the idle timeout closes the link.
    pub fn link_traffic(&self) -> Vec<(NodeId, u64, u64)> {
        let registry = &self.shared.registry;
        registry
            .live()
            .into_iter()
            .filter_map(|(id, generation)| {
                let conn = registry.handle(&id, generation)?;
                Some((id, generation, conn.stats().udp_rx.datagrams))
            })
            .collect()
    }

    /// Dials `addr`, which must present a certificate for `expected`.
    pub async fn connect(&self, addr: SocketAddr, expected: &NodeId) -> Result<PeerLink> {
        let shared = &self.shared;
        if shared.partitioned() {
            return Err(MeshError::Partitioned);
        }
        // The server name is the expected node id: rustls checks it against
        // the certificate's SAN, so a wrong node fails the TLS handshake.
        let conn = shared.endpoint.connect(addr, expected.as_str())?.await?;
        let cert_id = tls::peer_node_id(&conn).map_err(|e| refuse(&conn, CloseCode::BadCert, e.to_string()))?;
        if &cert_id != expected {
            // Unreachable while rustls checks the name; kept as a second lock.
            return Err(refuse(
                &conn,
                CloseCode::IdMismatch,
                format!("dialed {expected}, got {cert_id}"),
            ));
        }
        let exchange = async {
            let (mut send, mut recv) = conn.open_bi().await.map_err(lost)?;
            write_hello(&mut send, &shared.local, shared.generation).await?;
            let hello = read_hello(&mut recv).await?;
            Ok::<_, MeshError>((send, hello))
        };
        let (mut send, hello) = within_hello_timeout(shared, &conn, exchange).await?;
        let link = admit(shared, &conn, cert_id, &hello)?;
        let _ = send.finish();
        shared.link_admitted(&link, LinkSide::Dialer);
        Ok(link)
    }

    /// Waits for the next incoming connection and runs its handshake.
    /// A failed handshake returns its error (the peer was refused); only
    /// `EndpointClosed` means there will be no more.
    pub async fn accept(&self) -> Result<PeerLink> {
        let incoming = self.shared.endpoint.accept().await.ok_or(MeshError::EndpointClosed)?;
        accept_incoming(&self.shared, incoming).await
    }

    /// Accepts in the background, each handshake on its own task so a slow
    /// peer cannot hold up others. Refusals are logged and counted. Ends when
    /// the endpoint closes; it does not keep the endpoint alive.
    pub fn spawn_acceptor(&self) -> JoinHandle<()> {
        let endpoint = self.shared.endpoint.clone();
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let Some(shared) = weak.upgrade() else { break };
                tokio::spawn(async move {
                    if let Err(e) = accept_incoming(&shared, incoming).await {
                        tracing::warn!(node = %shared.local, error = %e, "mesh: incoming link refused");
                    }
                });
            }
        })
    }

    /// Closes every link and the endpoint. Observers see NodeDown
    /// (`ClosedLocally`) for each live link.
    pub fn close(&self) {
        for conn in self.shared.registry.remove_all(DownReason::ClosedLocally) {
            close(&conn, CloseCode::Normal, "endpoint closed");
        }
        self.shared
            .endpoint
            .close(VarInt::from_u32(CloseCode::Normal.code()), b"endpoint closed");
    }
}

async fn accept_incoming(shared: &Arc<Shared>, incoming: quinn::Incoming) -> Result<PeerLink> {
    let conn = match incoming.await {
        Ok(conn) => conn,
        Err(e) => {
            // Certificate missing or not from our CA, wrong ALPN, or a
            // handshake that never finished: refused by TLS/QUIC itself.
            record_refused("tls");
            return Err(e.into());
        }
    };
    if shared.partitioned() {
        return Err(refuse(&conn, CloseCode::Normal, "partitioned (fault injection)".into()));
    }
    let cert_id = tls::peer_node_id(&conn).map_err(|e| refuse(&conn, CloseCode::BadCert, e.to_string()))?;
    let exchange = async {
        let (send, mut recv) = conn.accept_bi().await.map_err(lost)?;
        let hello = read_hello(&mut recv).await?;
        Ok::<_, MeshError>((send, hello))
    };
    let (mut send, hello) = within_hello_timeout(shared, &conn, exchange).await?;
    let link = admit(shared, &conn, cert_id, &hello)?;
    // If this write fails the link is already down and its watcher reports it.
    let _ = write_hello(&mut send, &shared.local, shared.generation).await;
    let _ = send.finish();
    shared.link_admitted(&link, LinkSide::Acceptor);
    Ok(link)
}

/// Runs one side's hello exchange under the hello timeout; a malformed or
/// late hello refuses the peer with `BadHello`.
async fn within_hello_timeout(
    shared: &Shared,
    conn: &Connection,
    exchange: impl std::future::Future<Output = Result<(SendStream, Hello)>>,
) -> Result<(SendStream, Hello)> {
    match tokio::time::timeout(shared.hello_timeout, exchange).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(MeshError::Hello(why))) => Err(refuse(conn, CloseCode::BadHello, why)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(refuse(conn, CloseCode::BadHello, "no hello in time".into())),
    }
}

/// Checks the peer's hello against its certificate and the generation
/// table; on success registers the link (NodeUp) and starts its watcher.
fn admit(shared: &Arc<Shared>, conn: &Connection, cert_id: NodeId, hello: &Hello) -> Result<PeerLink> {
    let checked = check_hello(&shared.local, &cert_id, hello).and_then(|()| {
        shared
            .registry
            .admit(&cert_id, hello.generation, conn.remote_address(), conn.clone())
    });
    let admitted = checked.map_err(|Refusal { code, reason }| refuse(conn, code, reason))?;
    if let Some(old) = admitted.superseded {
        close(
            &old,
            CloseCode::Superseded,
            &format!("superseded by generation {}", hello.generation),
        );
    }
    let link = PeerLink {
        id: cert_id,
        generation: hello.generation,
        addr: conn.remote_address(),
        connection: conn.clone(),
    };
    // The watcher holds only a weak reference, so live links do not keep a
    // dropped endpoint alive; the endpoint's Drop closes them instead.
    let (weak, watched, id, serial) = (Arc::downgrade(shared), conn.clone(), link.id.clone(), admitted.serial);
    tokio::spawn(async move {
        let err = watched.closed().await;
        if let Some(shared) = weak.upgrade() {
            shared
                .registry
                .remove(&id, serial, DownReason::from_connection_error(&err));
        }
    });
    Ok(link)
}

async fn write_hello(send: &mut SendStream, node_id: &NodeId, generation: u64) -> Result<()> {
    let hello = Hello {
        node_id: node_id.clone(),
        generation,
        mesh_version: MESH_VERSION,
    };
    send.write_all(&hello.encode()).await.map_err(|e| match e {
        quinn::WriteError::ConnectionLost(e) => lost(e),
        other => MeshError::Hello(other.to_string()),
    })
}

async fn read_hello(recv: &mut RecvStream) -> Result<Hello> {
    let mut len = [0u8; 4];
    recv.read_exact(&mut len).await.map_err(read_failed)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_HELLO_BYTES {
        return Err(MeshError::Hello(format!(
            "hello of {len} bytes (max {MAX_HELLO_BYTES})"
        )));
    }
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body).await.map_err(read_failed)?;
    Hello::decode(&body)
}

fn read_failed(e: quinn::ReadExactError) -> MeshError {
    match e {
        quinn::ReadExactError::ReadError(quinn::ReadError::ConnectionLost(e)) => lost(e),
        other => MeshError::Hello(other.to_string()),
    }
}

/// A connection lost during the handshake: a close with one of our codes
/// is the peer refusing us, anything else a plain connection error.
fn lost(e: ConnectionError) -> MeshError {
    if let ConnectionError::ApplicationClosed(close) = &e
        && let Some(code) = CloseCode::from_code(close.error_code.into_inner())
        && code != CloseCode::Normal
    {
        return MeshError::RefusedByPeer {
            code,
            reason: String::from_utf8_lossy(&close.reason).into_owned(),
        };
    }
    MeshError::Connection(e)
}

fn refuse(conn: &Connection, code: CloseCode, reason: String) -> MeshError {
    record_refused(code.label());
    tracing::debug!(peer = %conn.remote_address(), ?code, %reason, "mesh: refusing peer");
    close(conn, code, &reason);
    MeshError::Refused { code, reason }
}

fn close(conn: &Connection, code: CloseCode, reason: &str) {
    conn.close(VarInt::from_u32(code.code()), reason.as_bytes());
}
