//! Test hooks shared by the backends: make commits fail the ways a real
//! store sometimes does, so the shared retry and idempotency logic is tested
//! against each backend's own commit path.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::error::{Result, StorageError};

#[derive(Debug, Default)]
pub struct Faults {
    /// The next N commits are applied, then reported as `CommitUnknown`
    /// (FDB's `commit_unknown_result`, 1021, after a real commit).
    pub commit_unknown_after_apply: AtomicU32,
    /// While set, every commit fails with `Unavailable` (a store that is down).
    pub store_down: AtomicBool,
}

impl Faults {
    /// Before a commit: fails it while the store is "down".
    pub(crate) fn before_commit(&self) -> Result<()> {
        if self.store_down.load(Ordering::Relaxed) {
            return Err(StorageError::Unavailable("store is down (injected fault)".into()));
        }
        Ok(())
    }

    /// After a commit that applied: the next N report an unknown outcome.
    pub(crate) fn after_commit(&self) -> Result<()> {
        let injected = self
            .commit_unknown_after_apply
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match injected {
            Ok(_) => Err(StorageError::CommitUnknown),
            Err(_) => Ok(()),
        }
    }
}
