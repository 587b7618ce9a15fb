//! The tasks a node cannot live without: the root supervisor, the mesh
//! runtime and its acceptor, every accept loop, the outbound runner. None of
//! them ends while the node is healthy, so the first one that ends (a
//! return, a panic, a stopped actor) makes the node exit non-zero:
//! crash-only, and the process supervisor (`meshmail up`, systemd) starts a
//! fresh incarnation. Meanwhile `/health` answers 503 from the moment one
//! has ended, so a load balancer never sees 200 from a node whose actors
//! are gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::task::JoinHandle;

/// Whether every vital task still runs; read by `/health`.
#[derive(Debug, Default)]
pub struct Liveness {
    dead: AtomicBool,
}

impl Liveness {
    pub fn alive(&self) -> bool {
        !self.dead.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
pub struct Vitals {
    tasks: Vec<(String, JoinHandle<()>)>,
    liveness: Arc<Liveness>,
}

impl Vitals {
    pub fn watch(&mut self, name: impl Into<String>, task: JoinHandle<()>) {
        self.tasks.push((name.into(), task));
    }

    pub fn liveness(&self) -> Arc<Liveness> {
        self.liveness.clone()
    }

    /// Resolves when the first vital task ends, with its name and how it
    /// ended; never resolves if nothing is watched.
    pub async fn first_death(self) -> String {
        let liveness = self.liveness;
        let mut pending: FuturesUnordered<_> = self
            .tasks
            .into_iter()
            .map(|(name, task)| async move { (name, task.await) })
            .collect();
        let Some((name, result)) = pending.next().await else {
            return std::future::pending().await;
        };
        liveness.dead.store(true, Ordering::Relaxed);
        metrics::counter!("meshmail_node_vital_task_ended_total", "task" => name.clone()).increment(1);
        match result {
            Ok(()) => format!("{name} ended"),
            Err(e) if e.is_panic() => format!("{name} panicked"),
            Err(e) => format!("{name} was cancelled: {e}"),
        }
    }
}
