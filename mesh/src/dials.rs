//! The mesh runtime's outgoing dials: at most one in flight per peer, each
//! in a task of its own so a slow peer never holds up the membership loop.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Mutex;

use crate::identity::NodeId;
use crate::transport::MeshEndpoint;

/// The dials in flight: at most one per peer; each reports its end on
/// `done` so the peer may be dialled again.
pub(crate) struct Dials {
    dialing: BTreeSet<NodeId>,
    done_tx: tokio::sync::mpsc::UnboundedSender<NodeId>,
    done: tokio::sync::mpsc::UnboundedReceiver<NodeId>,
}

impl Default for Dials {
    fn default() -> Self {
        let (done_tx, done) = tokio::sync::mpsc::unbounded_channel::<NodeId>();
        Dials {
            dialing: BTreeSet::new(),
            done_tx,
            done,
        }
    }
}

impl Dials {
    /// Forgets the dials that ended.
    pub(crate) fn reap(&mut self) {
        while let Ok(id) = self.done.try_recv() {
            self.dialing.remove(&id);
        }
    }

    /// Dials `id` in the background at its address in `directory`, unless
    /// a dial to it is already in flight.
    pub(crate) fn dial(
        &mut self,
        endpoint: &MeshEndpoint,
        id: NodeId,
        directory: &Mutex<BTreeMap<NodeId, SocketAddr>>,
    ) {
        if !self.dialing.insert(id.clone()) {
            return;
        }
        let addr = directory.lock().expect("directory").get(&id).copied();
        let (endpoint, done) = (endpoint.clone(), self.done_tx.clone());
        tokio::spawn(async move {
            if let Some(addr) = addr
                && let Err(e) = endpoint.connect(addr, &id).await
            {
                tracing::debug!(peer = %id, %addr, error = %e, "mesh: dial failed");
            }
            let _ = done.send(id);
        });
    }
}
