//! What the runtime takes from the store's node registry besides its own
//! generation: which names an operator forgot (`meshmail node forget`), so
//! they leave the directory and stop counting against quorum, and the
//! node's own sign of life ([`nodes::record_seen`]) that makes `forget`
//! refuse a node still running.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use meshmail_storage::Database;
use meshmail_storage::model::nodes::{self, NodeRecord};

/// How often this node records that it is alive.
pub const SEEN_INTERVAL: Duration = Duration::from_millis(nodes::SEEN_INTERVAL_MS);

#[derive(Default)]
pub struct Registry {
    forgotten: std::sync::Mutex<BTreeSet<String>>,
    /// At most one sign-of-life write in flight: a slow store must not pile
    /// them up (the next one is due a second later anyway).
    seen_in_flight: Arc<AtomicBool>,
    last_seen: std::sync::Mutex<Option<Instant>>,
}

impl Registry {
    /// Takes this round's registry read; returns the names forgotten since
    /// the last one (never `me`: a running node is not forgotten).
    pub fn observe(&self, records: &[NodeRecord], me: &str) -> BTreeSet<String> {
        let now: BTreeSet<String> = records
            .iter()
            .filter(|r| r.forgotten_ms.is_some() && r.name != me)
            .map(|r| r.name.clone())
            .collect();
        let mut forgotten = self.forgotten.lock().expect("forgotten");
        let new = now.difference(&forgotten).cloned().collect();
        *forgotten = now;
        new
    }

    pub fn is_forgotten(&self, name: &str) -> bool {
        self.forgotten.lock().expect("forgotten").contains(name)
    }

    /// Writes (name, generation) as alive if [`SEEN_INTERVAL`] has passed,
    /// on its own task so the control loop never waits on the store.
    pub fn heartbeat(&self, db: &Database, name: &str, generation: u64, now: Instant) {
        {
            let mut last = self.last_seen.lock().expect("last_seen");
            if last.is_some_and(|t| now.duration_since(t) < SEEN_INTERVAL) {
                return;
            }
            if self.seen_in_flight.swap(true, Ordering::SeqCst) {
                return;
            }
            *last = Some(now);
        }
        let (db, name, flag) = (db.clone(), name.to_string(), self.seen_in_flight.clone());
        tokio::spawn(async move {
            if let Err(e) = nodes::record_seen(&db, &name, generation).await {
                tracing::debug!(error = %e, "mesh: could not record this node's sign of life");
            }
            flag.store(false, Ordering::SeqCst);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, forgotten: bool) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            generation: 1,
            mesh_addr: String::new(),
            started_ms: 0,
            forgotten_ms: forgotten.then_some(5),
            build: None,
            formats: None,
        }
    }

    #[test]
    fn forgotten_names_are_reported_once_and_never_self() {
        let r = Registry::default();
        let new = r.observe(&[rec("a", false), rec("b", true), rec("me", true)], "me");
        assert_eq!(new.into_iter().collect::<Vec<_>>(), vec!["b".to_string()]);
        assert!(r.is_forgotten("b") && !r.is_forgotten("me") && !r.is_forgotten("a"));
        assert!(r.observe(&[rec("b", true)], "me").is_empty(), "reported once");
        // b started again: its fresh record has no mark.
        assert!(r.observe(&[rec("b", false)], "me").is_empty());
        assert!(!r.is_forgotten("b"));
    }
}
