//! Node events and the registry of live links (one per peer incarnation).
//!
//! The registry is where generation ordering is enforced and where every
//! NodeUp/NodeDown is emitted, under one lock, so that all observers see the
//! same order: a superseded incarnation's NodeDown is sent before the new
//! one's NodeUp, and each link emits exactly one NodeDown (whoever removes
//! it from the registry first emits it; later attempts find it gone). It is
//! generic over the link handle so a simulator can drive it without QUIC.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Mutex;

use tokio::sync::{broadcast, watch};

use crate::identity::{CloseCode, GenerationTable, NodeId, Refusal};

/// Events a subscriber can miss only by lagging more than this many behind
/// (it then gets `RecvError::Lagged`); monitors never depend on it.
const EVENT_BUFFER: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    NodeUp {
        id: NodeId,
        generation: u64,
        addr: SocketAddr,
    },
    NodeDown {
        id: NodeId,
        generation: u64,
        reason: DownReason,
    },
}

/// Why an incarnation's link went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    /// A higher generation of the same node connected.
    Superseded { by: u64 },
    /// QUIC idle timeout: nothing heard from the peer (crash, partition).
    TimedOut,
    /// The peer closed the connection (application close code and reason).
    ClosedByPeer { code: u64, reason: String },
    /// This side closed it (endpoint shutdown, or `PeerLink::close`).
    ClosedLocally,
    /// Any other transport failure (reset, protocol violation).
    Lost(String),
    /// Returned by a monitor set on an incarnation that had no live link at
    /// that moment (already down, superseded, or never connected).
    NotConnected,
}

impl DownReason {
    /// Maps how quinn reports a connection's end.
    pub fn from_connection_error(err: &quinn::ConnectionError) -> DownReason {
        use quinn::ConnectionError as E;
        match err {
            E::TimedOut => DownReason::TimedOut,
            E::ApplicationClosed(close) => DownReason::ClosedByPeer {
                code: close.error_code.into_inner(),
                reason: String::from_utf8_lossy(&close.reason).into_owned(),
            },
            E::LocallyClosed => DownReason::ClosedLocally,
            other => DownReason::Lost(other.to_string()),
        }
    }
}

struct Live<C> {
    generation: u64,
    serial: u64,
    handle: C,
    down: watch::Sender<Option<DownReason>>,
}

struct Inner<C> {
    table: GenerationTable,
    live: HashMap<NodeId, Live<C>>,
    next_serial: u64,
}

/// A link that `admit` accepted.
#[derive(Debug)]
pub struct Admitted<C> {
    /// Identifies this link in `remove` (an id alone could name its successor).
    pub serial: u64,
    /// The older incarnation's handle, already removed and reported down:
    /// the caller closes it with `CloseCode::Superseded`.
    pub superseded: Option<C>,
}

pub struct LinkRegistry<C> {
    inner: Mutex<Inner<C>>,
    events: broadcast::Sender<NodeEvent>,
}

impl<C> Default for LinkRegistry<C> {
    fn default() -> Self {
        LinkRegistry {
            inner: Mutex::new(Inner {
                table: GenerationTable::new(),
                live: HashMap::new(),
                next_serial: 0,
            }),
            events: broadcast::channel(EVENT_BUFFER).0,
        }
    }
}

impl<C> LinkRegistry<C> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<NodeEvent> {
        self.events.subscribe()
    }

    /// Admits a link of incarnation (`id`, `generation`) whose identity is
    /// already verified, or says why it must be refused: a generation lower
    /// than one seen before, or a second link of a live incarnation.
    pub fn admit(&self, id: &NodeId, generation: u64, addr: SocketAddr, handle: C) -> Result<Admitted<C>, Refusal> {
        let mut inner = self.lock();
        inner.table.observe(id, generation)?;
        if let Some(live) = inner.live.get(id)
            && live.generation == generation
        {
            // Kept simple until membership decides who dials whom: the first
            // link wins and a stale one ends by idle timeout.
            return Err(Refusal::new(
                CloseCode::Duplicate,
                format!("{id} generation {generation} already has a live link"),
            ));
        }
        let superseded = inner.live.remove(id).map(|old| {
            self.emit_down(id, old.generation, &old.down, DownReason::Superseded { by: generation });
            old.handle
        });
        let serial = inner.next_serial;
        inner.next_serial += 1;
        let (down, _) = watch::channel(None);
        inner.live.insert(
            id.clone(),
            Live {
                generation,
                serial,
                handle,
                down,
            },
        );
        metrics::gauge!("meshmail_mesh_links_up").increment(1.0);
        metrics::counter!("meshmail_mesh_node_events_total", "kind" => "up").increment(1);
        let _ = self.events.send(NodeEvent::NodeUp {
            id: id.clone(),
            generation,
            addr,
        });
        Ok(Admitted { serial, superseded })
    }

    /// Reports link `serial` of `id` down, unless it is no longer the live
    /// one (then its NodeDown was already emitted). Returns whether it was.
    pub fn remove(&self, id: &NodeId, serial: u64, reason: DownReason) -> bool {
        let mut inner = self.lock();
        if inner.live.get(id).is_none_or(|live| live.serial != serial) {
            return false;
        }
        let old = inner.live.remove(id).expect("checked above");
        self.emit_down(id, old.generation, &old.down, reason);
        true
    }

    /// Removes every link (endpoint shutdown), reporting each down; returns
    /// the handles for the caller to close.
    pub fn remove_all(&self, reason: DownReason) -> Vec<C> {
        let mut inner = self.lock();
        let drained: Vec<_> = inner.live.drain().collect();
        drained
            .into_iter()
            .map(|(id, old)| {
                self.emit_down(&id, old.generation, &old.down, reason.clone());
                old.handle
            })
            .collect()
    }

    /// Resolves when incarnation (`id`, `generation`) goes down, with the
    /// reason; never for another incarnation of `id`. The link is looked up
    /// now, not when the future is first polled, so a monitor set while the
    /// incarnation is live cannot miss its end.
    pub fn monitor(&self, id: &NodeId, generation: u64) -> impl Future<Output = DownReason> + Send + 'static {
        let rx = self
            .lock()
            .live
            .get(id)
            .filter(|live| live.generation == generation)
            .map(|live| live.down.subscribe());
        async move {
            let Some(mut rx) = rx else {
                return DownReason::NotConnected;
            };
            match rx.wait_for(Option::is_some).await {
                Ok(reason) => reason.clone().expect("waited for Some"),
                // The registry itself is gone: so is every link it held.
                Err(_) => DownReason::ClosedLocally,
            }
        }
    }

    /// The live incarnations, sorted by id.
    pub fn live(&self) -> Vec<(NodeId, u64)> {
        let mut live: Vec<_> = self
            .lock()
            .live
            .iter()
            .map(|(id, l)| (id.clone(), l.generation))
            .collect();
        live.sort();
        live
    }

    /// The handle of incarnation (`id`, `generation`)'s live link.
    pub fn handle(&self, id: &NodeId, generation: u64) -> Option<C>
    where
        C: Clone,
    {
        self.lock()
            .live
            .get(id)
            .filter(|l| l.generation == generation)
            .map(|l| l.handle.clone())
    }

    /// The highest generation ever seen for `id`.
    pub fn highest_generation(&self, id: &NodeId) -> Option<u64> {
        self.lock().table.highest(id)
    }

    fn emit_down(&self, id: &NodeId, generation: u64, down: &watch::Sender<Option<DownReason>>, reason: DownReason) {
        metrics::gauge!("meshmail_mesh_links_up").decrement(1.0);
        metrics::counter!("meshmail_mesh_node_events_total", "kind" => "down").increment(1);
        down.send_replace(Some(reason.clone()));
        let _ = self.events.send(NodeEvent::NodeDown {
            id: id.clone(),
            generation,
            reason,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<C>> {
        // Nothing panics while holding the lock; recover the data anyway
        // rather than poisoning every later link.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a refused peer in `meshmail_mesh_refused_total{reason}`.
pub fn record_refused(reason: &'static str) {
    metrics::counter!("meshmail_mesh_refused_total", "reason" => reason).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn id(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }
    const ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 1);

    #[test]
    fn supersede_orders_down_before_up_and_monitors_stay_with_their_incarnation() {
        let reg = LinkRegistry::<&str>::new();
        let mut events = reg.subscribe();
        let b = id("b");
        let first = reg.admit(&b, 1, ADDR, "b1").unwrap();
        let m1 = reg.monitor(&b, 1);
        let second = reg.admit(&b, 2, ADDR, "b2").unwrap();
        assert_eq!(second.superseded, Some("b1"));
        let m2 = reg.monitor(&b, 2);
        let seen: Vec<_> = std::iter::from_fn(|| events.try_recv().ok()).collect();
        assert!(matches!(
            &seen[..],
            [
                NodeEvent::NodeUp { generation: 1, .. },
                NodeEvent::NodeDown {
                    generation: 1,
                    reason: DownReason::Superseded { by: 2 },
                    ..
                },
                NodeEvent::NodeUp { generation: 2, .. },
            ]
        ));
        assert_eq!(m1.now_or_never(), Some(DownReason::Superseded { by: 2 }));
        let mut m2 = Box::pin(m2);
        assert_eq!(m2.as_mut().now_or_never(), None);
        // The old link's own close arrives late: no second NodeDown.
        assert!(!reg.remove(&b, first.serial, DownReason::TimedOut));
        assert!(events.try_recv().is_err());
        assert_eq!(
            reg.admit(&b, 1, ADDR, "b1 again").unwrap_err().code,
            CloseCode::StaleGeneration
        );
        assert_eq!(
            reg.admit(&b, 2, ADDR, "b2 twice").unwrap_err().code,
            CloseCode::Duplicate
        );
        assert!(reg.remove(&b, second.serial, DownReason::TimedOut));
        assert_eq!(m2.now_or_never(), Some(DownReason::TimedOut));
        assert_eq!(reg.monitor(&b, 2).now_or_never(), Some(DownReason::NotConnected));
        // Generations outlive links: 1 stays refused after 2 went down.
        assert_eq!(
            reg.admit(&b, 1, ADDR, "b1").unwrap_err().code,
            CloseCode::StaleGeneration
        );
        assert!(reg.live().is_empty());
    }
}
