//! Mesh links over real sockets on 127.0.0.1: mutual TLS, identity from the
//! certificate, generation ordering, and failure detection. Every wait is
//! on an event with a deadline, never a sleep.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meshmail_mesh::{
    CloseCode, ClusterCa, DownReason, Hello, MeshConfig, MeshEndpoint, MeshError, NodeCredentials, NodeEvent, NodeId,
};
use quinn::ConnectionError;
use quinn::crypto::rustls::QuicClientConfig;
use tokio::sync::broadcast;

const WAIT: Duration = Duration::from_secs(10);

/// A cluster CA in a temp dir, issuing node credentials on demand.
struct Cluster {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ca: ClusterCa,
}

impl Cluster {
    fn new() -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let ca = ClusterCa::init(&dir).unwrap();
        Cluster { _tmp: tmp, dir, ca }
    }

    fn creds(&self, node: &str) -> NodeCredentials {
        let id = NodeId::new(node).unwrap();
        if !self.dir.join(format!("{node}.pem")).exists() {
            self.ca.issue_node_cert(&id, &self.dir).unwrap();
        }
        NodeCredentials::load(&self.dir, &id).unwrap()
    }

    fn endpoint(&self, node: &str, generation: u64) -> MeshEndpoint {
        MeshEndpoint::bind(&self.creds(node), config(generation)).unwrap()
    }
}

fn config(generation: u64) -> MeshConfig {
    MeshConfig::new("127.0.0.1:0".parse().unwrap(), generation)
}

fn id(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

async fn next_event(rx: &mut broadcast::Receiver<NodeEvent>) -> NodeEvent {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("no node event in time")
        .unwrap()
}

fn assert_no_event(rx: &mut broadcast::Receiver<NodeEvent>) {
    match rx.try_recv() {
        Err(broadcast::error::TryRecvError::Empty) => {}
        other => panic!("unexpected event: {other:?}"),
    }
}

/// Dials with a hand-made rustls client (optionally without a certificate)
/// and sends `hello` if given; returns how the connection ended.
async fn raw_dial(
    ca_and_cert: (&NodeCredentials, bool),
    addr: SocketAddr,
    server_name: &str,
    hello: Option<Hello>,
) -> ConnectionError {
    let (creds, present_cert) = ca_and_cert;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(creds.ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots);
    let mut tls = if present_cert {
        builder
            .with_client_auth_cert(creds.chain.clone(), creds.key.clone_key())
            .unwrap()
    } else {
        builder.with_no_client_auth()
    };
    tls.alpn_protocols = vec![meshmail_mesh::tls::ALPN.to_vec()];
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(tls).unwrap(),
    )));
    let conn = match endpoint.connect(addr, server_name).unwrap().await {
        Ok(conn) => conn,
        Err(e) => return e,
    };
    if let Some(hello) = hello {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let _ = send.write_all(&hello.encode()).await;
        let _ = recv.read_to_end(4096).await;
    }
    tokio::time::timeout(WAIT, conn.closed())
        .await
        .expect("the server never closed")
}

fn app_code(err: &ConnectionError) -> Option<CloseCode> {
    match err {
        ConnectionError::ApplicationClosed(close) => CloseCode::from_code(close.error_code.into_inner()),
        _ => None,
    }
}

#[tokio::test]
async fn two_nodes_link_and_both_see_node_up() {
    let cluster = Cluster::new();
    let a = cluster.endpoint("a", 7);
    let b = cluster.endpoint("b", 3);
    let (mut a_events, mut b_events) = (a.subscribe(), b.subscribe());
    a.spawn_acceptor();

    let link = b.connect(a.local_addr().unwrap(), &id("a")).await.unwrap();
    assert_eq!((link.id.as_str(), link.generation), ("a", 7));

    assert_eq!(
        next_event(&mut a_events).await,
        NodeEvent::NodeUp {
            id: id("b"),
            generation: 3,
            addr: b.local_addr().unwrap(),
        }
    );
    assert_eq!(
        next_event(&mut b_events).await,
        NodeEvent::NodeUp {
            id: id("a"),
            generation: 7,
            addr: a.local_addr().unwrap(),
        }
    );
    assert_eq!(a.live(), vec![(id("b"), 3)]);
    assert_eq!(b.live(), vec![(id("a"), 7)]);

    // An orderly close is one NodeDown on each side.
    link.close();
    let NodeEvent::NodeDown {
        id: down,
        generation: 3,
        reason,
    } = next_event(&mut a_events).await
    else {
        panic!("expected NodeDown(b, 3)");
    };
    assert_eq!(down, id("b"));
    assert!(matches!(reason, DownReason::ClosedByPeer { code: 0, .. }), "{reason:?}");
    assert!(matches!(
        next_event(&mut b_events).await,
        NodeEvent::NodeDown {
            generation: 7,
            reason: DownReason::ClosedLocally,
            ..
        }
    ));
}

#[tokio::test]
async fn hello_claiming_another_node_is_refused() {
    let cluster = Cluster::new();
    let a = cluster.endpoint("a", 1);
    let mut a_events = a.subscribe();
    // Holds c's certificate but claims to be b.
    let c = cluster.creds("c");
    let lie = Hello {
        node_id: id("b"),
        generation: 1,
        mesh_version: meshmail_mesh::identity::MESH_VERSION,
    };
    let (client, server) = tokio::join!(
        raw_dial((&c, true), a.local_addr().unwrap(), "a", Some(lie)),
        a.accept()
    );
    assert_eq!(app_code(&client), Some(CloseCode::IdMismatch), "{client:?}");
    assert!(
        matches!(
            &server,
            Err(MeshError::Refused {
                code: CloseCode::IdMismatch,
                ..
            })
        ),
        "{server:?}"
    );
    assert_no_event(&mut a_events);

    // The same certificate with a truthful hello is admitted.
    let truth = Hello {
        node_id: id("c"),
        generation: 1,
        mesh_version: meshmail_mesh::identity::MESH_VERSION,
    };
    let (_, server) = tokio::join!(raw_dial((&c, true), a.local_addr().unwrap(), "a", Some(truth)), async {
        let link = a.accept().await;
        // Let the raw client finish: it waits for the connection to close.
        if let Ok(link) = &link {
            link.close();
        }
        link
    });
    assert_eq!(server.unwrap().id, id("c"));
}

#[tokio::test]
async fn client_without_certificate_is_refused_by_tls() {
    let cluster = Cluster::new();
    let a = cluster.endpoint("a", 1);
    let mut a_events = a.subscribe();
    let b = cluster.creds("b");
    let hello = Hello {
        node_id: id("b"),
        generation: 1,
        mesh_version: meshmail_mesh::identity::MESH_VERSION,
    };
    let (client, server) = tokio::join!(
        raw_dial((&b, false), a.local_addr().unwrap(), "a", Some(hello)),
        a.accept()
    );
    // Refused during the handshake: a TLS alert, not one of the mesh's codes.
    assert_eq!(app_code(&client), None, "{client:?}");
    assert!(matches!(&server, Err(MeshError::Connection(_))), "{server:?}");
    assert!(server.unwrap_err().to_string().contains("certificate"));
    assert_no_event(&mut a_events);
}

#[tokio::test]
async fn certificate_from_another_ca_is_refused() {
    let ours = Cluster::new();
    let theirs = Cluster::new();
    let a = ours.endpoint("a", 1);
    let mut a_events = a.subscribe();

    // A client that trusts our CA but holds a certificate from another one.
    let foreign = theirs.creds("b");
    let mixed = NodeCredentials {
        ca: ours.creds("a").ca,
        ..foreign
    };
    let dialer = MeshEndpoint::bind(&mixed, config(1)).unwrap();
    let a_id = id("a");
    let (client, server) = tokio::join!(dialer.connect(a.local_addr().unwrap(), &a_id), a.accept());
    assert!(client.is_err());
    assert!(matches!(&server, Err(MeshError::Connection(_))), "{server:?}");
    assert_no_event(&mut a_events);

    // And a node of the other cluster serving: our dialer rejects it.
    let d = theirs.endpoint("d", 1);
    d.spawn_acceptor();
    let err = a.connect(d.local_addr().unwrap(), &id("d")).await.unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
    assert_no_event(&mut a_events);

    // A node of our cluster dialed under the wrong name fails TLS too.
    let b = ours.endpoint("b", 1);
    b.spawn_acceptor();
    let err = a.connect(b.local_addr().unwrap(), &id("c")).await.unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
    assert_no_event(&mut a_events);
}

#[tokio::test]
async fn higher_generation_supersedes_and_lower_is_refused() {
    let cluster = Cluster::new();
    let a = cluster.endpoint("a", 1);
    let mut events = a.subscribe();
    a.spawn_acceptor();
    let a_addr = a.local_addr().unwrap();

    let b1 = cluster.endpoint("b", 1);
    let mut b1_events = b1.subscribe();
    b1.connect(a_addr, &id("a")).await.unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        NodeEvent::NodeUp { generation: 1, .. }
    ));
    let mon1 = a.monitor(&id("b"), 1);
    assert!(matches!(next_event(&mut b1_events).await, NodeEvent::NodeUp { .. }));

    // b restarts as generation 2 while generation 1's link is still up.
    let b2 = cluster.endpoint("b", 2);
    b2.connect(a_addr, &id("a")).await.unwrap();
    assert_eq!(
        next_event(&mut events).await,
        NodeEvent::NodeDown {
            id: id("b"),
            generation: 1,
            reason: DownReason::Superseded { by: 2 },
        }
    );
    assert_eq!(
        next_event(&mut events).await,
        NodeEvent::NodeUp {
            id: id("b"),
            generation: 2,
            addr: b2.local_addr().unwrap(),
        }
    );
    assert_eq!(
        tokio::time::timeout(WAIT, mon1).await.unwrap(),
        DownReason::Superseded { by: 2 }
    );
    let mut mon2 = Box::pin(a.monitor(&id("b"), 2));

    // The old incarnation is told why, by close code.
    let NodeEvent::NodeDown { reason, .. } = next_event(&mut b1_events).await else {
        panic!("b1 expected NodeDown");
    };
    let superseded = u64::from(CloseCode::Superseded.code());
    assert!(
        matches!(reason, DownReason::ClosedByPeer { code, .. } if code == superseded),
        "{reason:?}"
    );

    // Generation 1 comes back: refused, and a's view does not move.
    let err = b1.connect(a_addr, &id("a")).await.unwrap_err();
    assert!(
        matches!(
            &err,
            MeshError::RefusedByPeer {
                code: CloseCode::StaleGeneration,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(a.live(), vec![(id("b"), 2)]);
    assert_eq!(a.monitor(&id("b"), 1).await, DownReason::NotConnected);

    // No second NodeDown for generation 1 (its connection's own close came
    // and went above), and generation 2's monitor has not fired.
    assert!(futures::poll!(mon2.as_mut()).is_pending());
    assert_no_event(&mut events);

    // Generation 2 going down fires its monitor and emits its one NodeDown.
    b2.close();
    assert!(matches!(
        tokio::time::timeout(WAIT, mon2).await.unwrap(),
        DownReason::ClosedByPeer { code: 0, .. }
    ));
    assert!(matches!(
        next_event(&mut events).await,
        NodeEvent::NodeDown { generation: 2, .. }
    ));
    assert!(a.live().is_empty());
}

#[tokio::test]
async fn killed_peer_is_down_within_the_idle_timeout() {
    let cluster = Cluster::new();
    // Short, but with room for a loaded CI machine to miss a keep-alive or two.
    let idle = Duration::from_millis(1500);
    let short = move |generation| MeshConfig {
        keep_alive: Duration::from_millis(250),
        idle_timeout: idle,
        ..config(generation)
    };
    let a = MeshEndpoint::bind(&cluster.creds("a"), short(1)).unwrap();
    let mut events = a.subscribe();
    a.spawn_acceptor();
    let a_addr = a.local_addr().unwrap();

    // The peer runs on its own runtime in its own thread; "killing" it drops
    // that runtime, so its QUIC tasks stop without a word (no CONNECTION_CLOSE),
    // and its socket stays bound but unread: a black hole, as after SIGKILL
    // or a partition.
    let b_creds = cluster.creds("b");
    let (up_tx, up_rx) = tokio::sync::oneshot::channel();
    let (kill_tx, kill_rx) = tokio::sync::oneshot::channel::<()>();
    let peer = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let b = MeshEndpoint::bind(&b_creds, short(5)).unwrap();
            b.connect(a_addr, &id("a")).await.unwrap();
            up_tx.send(()).unwrap();
            kill_rx.await.unwrap();
            // Skip the endpoint's Drop, which would close links politely.
            std::mem::forget(b);
        });
        drop(rt);
    });
    up_rx.await.unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        NodeEvent::NodeUp { generation: 5, .. }
    ));
    let monitor = a.monitor(&id("b"), 5);

    // Links stay up across several idle periods while the peer lives:
    // keep-alives do their job.
    let quiet = tokio::time::timeout(idle * 2, events.recv()).await;
    assert!(quiet.is_err(), "link went down while the peer lived: {quiet:?}");

    let killed = Instant::now();
    kill_tx.send(()).unwrap();
    peer.join().unwrap();
    assert_eq!(
        next_event(&mut events).await,
        NodeEvent::NodeDown {
            id: id("b"),
            generation: 5,
            reason: DownReason::TimedOut,
        }
    );
    let detected = killed.elapsed();
    assert_eq!(tokio::time::timeout(WAIT, monitor).await.unwrap(), DownReason::TimedOut);
    // QUIC's idle timeout counts from the last packet heard (at most one
    // keep-alive interval before the kill), plus timer slack.
    assert!(detected < idle * 3, "detected after {detected:?}");
    assert!(a.live().is_empty());
}
