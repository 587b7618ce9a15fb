//! Shard leases of one node incarnation: the store-backed half of shard
//! ownership (placement, in [`crate::placement`], is the wish; the lease is
//! the fact).
//!
//! A lease names (node, generation, epoch). Every write transaction of a shard
//! reads its lease key with `check_lease` (`model::fenced::fence`), so the
//! moment another incarnation takes a lease with a higher epoch, the old
//! owner's writes stop committing, whatever it believes. That every write
//! does is a type, not a convention: the shard's mailbox writes take the
//! `FencedTxn` that only the lease check returns. This manager only decides
//! *when* a lease may change hands:
//! - [`LeaseManager::acquire`] takes a shard that is free, released, already
//!   ours, or held by an incarnation membership says is dead;
//!   [`LeaseManager::acquire_many`] does the same for many shards in a few
//!   transactions (a takeover);
//! - [`LeaseManager::release`] hands a shard back gracefully.
//!
//! *Which* shards to take or hand back is decided by
//! [`crate::balance::decide`], a pure function.
//!
//! Every change runs in `Database::run` and reads the lease key it changes
//! (a conflicting read), so two nodes racing for one shard conflict and the
//! loser retries, then sees the winner. Membership is passed in as a
//! [`LiveSet`]: nothing here holds a socket or a clock, so a simulator can
//! drive it.
//!
//! Metrics: `meshmail_lease_changes_total{kind}` with kind `acquired`,
//! `released`, `taken_over`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use meshmail_storage::model::nodes::{self, Lease};
use meshmail_storage::{Database, StorageError, TxError, Txn};
use thiserror::Error;

use crate::placement::NodeKey;

/// Leases read per transaction by a scan: keeps every transaction far
/// inside the store's 5 s and range limits.
pub const SCAN_PAGE: usize = 1024;

/// Leases taken per transaction by [`LeaseManager::acquire_many`]: 128
/// reads and writes of ~150-byte records, far inside the store's 10 MB
/// and 5 s limits, and a whole 3-node failover of 1024 shards in three
/// commits.
pub const ACQUIRE_BATCH: usize = 128;

/// One start of a node: its name and the generation the store gave it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Incarnation {
    pub name: String,
    pub generation: u64,
}

impl Incarnation {
    pub fn new(name: impl Into<String>, generation: u64) -> Self {
        Incarnation {
            name: name.into(),
            generation,
        }
    }

    /// True if this incarnation holds `lease` right now (not handed back).
    pub fn holds(&self, lease: &Lease) -> bool {
        !lease.released && lease.node == self.name && lease.generation == self.generation
    }

    pub fn key(&self) -> NodeKey {
        NodeKey::new(self.name.clone())
    }
}

/// The incarnations membership currently considers alive. Anything else
/// holding a lease is dead and may be taken over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveSet {
    incarnations: BTreeSet<Incarnation>,
}

impl LiveSet {
    pub fn new(incarnations: impl IntoIterator<Item = Incarnation>) -> Self {
        LiveSet {
            incarnations: incarnations.into_iter().collect(),
        }
    }

    pub fn contains(&self, name: &str, generation: u64) -> bool {
        self.incarnations
            .iter()
            .any(|i| i.name == name && i.generation == generation)
    }

    /// The distinct node names, as placement sees them.
    pub fn nodes(&self) -> Vec<NodeKey> {
        let names: BTreeSet<&str> = self.incarnations.iter().map(|i| i.name.as_str()).collect();
        names.into_iter().map(NodeKey::new).collect()
    }
}

#[derive(Debug, Error)]
pub enum LeaseError {
    /// A live incarnation holds the shard: wait for its hand-off.
    #[error("shard {shard} is held by live {node}#{generation} at epoch {epoch}")]
    HeldBy {
        shard: u32,
        node: String,
        generation: u64,
        epoch: u64,
    },
    /// A newer incarnation of our own name holds the shard: we are the stale
    /// one, and must not take anything back from our successor.
    #[error("shard {shard} is held by {node}#{generation}, a newer incarnation of this node")]
    Superseded { shard: u32, node: String, generation: u64 },
    #[error("shard {shard} does not exist (shard count {shard_count})")]
    NoSuchShard { shard: u32, shard_count: u32 },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl TxError for LeaseError {
    fn as_storage(&self) -> Option<&StorageError> {
        match self {
            LeaseError::Storage(e) => Some(e),
            _ => None,
        }
    }
}

/// What an acquisition did to the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Acquired,
    TakenOver,
    AlreadyHeld,
}

/// The leases of one node incarnation.
#[derive(Debug)]
pub struct LeaseManager {
    db: Database,
    me: Incarnation,
    shard_count: u32,
    /// The leases this manager took and has not released: where a shard's
    /// writer finds the epoch it fences with. A cache, never the truth — a
    /// lease taken from us stays here until released, and our writes fail
    /// `check_lease` meanwhile (no `FencedTxn`, so nothing is written).
    held: Mutex<BTreeMap<u32, Lease>>,
}

impl LeaseManager {
    pub fn new(db: Database, me: Incarnation, shard_count: u32) -> Self {
        assert!(shard_count > 0, "shard_count must be positive");
        LeaseManager {
            db,
            me,
            shard_count,
            held: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn incarnation(&self) -> &Incarnation {
        &self.me
    }

    /// The store this manager's leases live in.
    pub fn database(&self) -> &Database {
        &self.db
    }

    pub fn shard_count(&self) -> u32 {
        self.shard_count
    }

    /// The epoch to fence `shard`'s writes with, if this manager holds it.
    pub fn epoch(&self, shard: u32) -> Option<u64> {
        self.held.lock().expect("held").get(&shard).map(|l| l.epoch)
    }

    /// The leases this manager took and still believes it holds.
    pub fn held(&self) -> Vec<Lease> {
        self.held.lock().expect("held").values().cloned().collect()
    }

    /// Takes `shard` with the next epoch if it is free, released, or held by
    /// an incarnation not in `live`; returns the current lease unchanged if
    /// we hold it already (a retry after an unknown commit outcome lands
    /// here, and must not fence our own writes with a new epoch).
    pub async fn acquire(&self, shard: u32, live: &LiveSet) -> Result<Lease, LeaseError> {
        if shard >= self.shard_count {
            return Err(LeaseError::NoSuchShard {
                shard,
                shard_count: self.shard_count,
            });
        }
        let me = &self.me;
        let (lease, change) = self
            .db
            .run(
                "lease_acquire",
                |txn| async move { acquire_in(&txn, me, shard, live).await },
            )
            .await?;
        count_change(change);
        self.held.lock().expect("held").insert(shard, lease.clone());
        Ok(lease)
    }

    /// [`LeaseManager::acquire`] for many shards in one transaction per
    /// [`ACQUIRE_BATCH`] shards: a failover of hundreds of shards costs a
    /// few commits, not hundreds. One answer per shard, in order; a shard
    /// that may not be taken (held by a live incarnation, by a newer one of
    /// ours, or out of range) gets its error without failing the others.
    /// Only a store error fails the call (the batches before it committed).
    pub async fn acquire_many(
        &self,
        shards: &[u32],
        live: &LiveSet,
    ) -> Result<Vec<Result<Lease, LeaseError>>, LeaseError> {
        let mut answers = Vec::with_capacity(shards.len());
        let me = &self.me;
        let shard_count = self.shard_count;
        for batch in shards.chunks(ACQUIRE_BATCH) {
            let outcomes = self
                .db
                .run("lease_acquire_batch", |txn| async move {
                    let mut outcomes = Vec::with_capacity(batch.len());
                    for &shard in batch {
                        if shard >= shard_count {
                            outcomes.push(Err(LeaseError::NoSuchShard { shard, shard_count }));
                            continue;
                        }
                        match acquire_in(&txn, me, shard, live).await {
                            Err(LeaseError::Storage(e)) => return Err(LeaseError::Storage(e)),
                            other => outcomes.push(other),
                        }
                    }
                    Ok::<_, LeaseError>(outcomes)
                })
                .await?;
            let mut held = self.held.lock().expect("held");
            for outcome in outcomes {
                answers.push(outcome.map(|(lease, change)| {
                    count_change(change);
                    held.insert(lease.shard, lease.clone());
                    lease
                }));
            }
        }
        Ok(answers)
    }

    /// Hands `shard` back (graceful: its next owner needs no failure
    /// detection). Returns whether this call released it; releasing a lease
    /// we do not hold (any more) does nothing.
    pub async fn release(&self, shard: u32) -> Result<bool, LeaseError> {
        let me = &self.me;
        let released = self
            .db
            .run("lease_release", |txn| async move {
                match nodes::lease(&txn, shard).await? {
                    Some(l) if me.holds(&l) => {
                        nodes::release_lease(&txn, shard, &me.name, me.generation, l.epoch).await
                    }
                    _ => Ok::<_, StorageError>(false),
                }
            })
            .await?;
        if released {
            metrics::counter!("meshmail_lease_changes_total", "kind" => "released").increment(1);
        }
        self.held.lock().expect("held").remove(&shard);
        Ok(released)
    }
}

/// The acquisition rule, inside the caller's transaction. Reads the lease
/// with a conflict, so a concurrent change of it makes one side retry.
async fn acquire_in(txn: &Txn, me: &Incarnation, shard: u32, live: &LiveSet) -> Result<(Lease, Change), LeaseError> {
    let change = match nodes::lease(txn, shard).await? {
        None => Change::Acquired,
        Some(l) if l.released => Change::Acquired,
        Some(l) if me.holds(&l) => return Ok((l, Change::AlreadyHeld)),
        Some(l) if l.node == me.name && l.generation > me.generation => {
            return Err(LeaseError::Superseded {
                shard,
                node: l.node,
                generation: l.generation,
            });
        }
        Some(l) if live.contains(&l.node, l.generation) => {
            return Err(LeaseError::HeldBy {
                shard,
                node: l.node,
                generation: l.generation,
                epoch: l.epoch,
            });
        }
        Some(_) => Change::TakenOver,
    };
    let lease = nodes::acquire_lease(txn, shard, &me.name, me.generation).await?;
    Ok((lease, change))
}

fn count_change(change: Change) {
    let kind = match change {
        Change::Acquired => "acquired",
        Change::TakenOver => "taken_over",
        Change::AlreadyHeld => return,
    };
    metrics::counter!("meshmail_lease_changes_total", "kind" => kind).increment(1);
}
