//! Shard leases of one node incarnation: the store-backed half of shard
//! ownership (placement, in [`crate::placement`], is the wish; the lease is
//! the fact).
//!
//! A lease names (node, generation, epoch). Every write transaction of a shard
//! reads its lease key with `check_lease`, so the moment another incarnation
//! takes a lease with a higher epoch, the old owner's writes stop committing,
//! whatever it believes. This manager only decides *when* a lease may change
//! hands:
//! - [`LeaseManager::acquire`] takes a shard that is free, released, already
//!   ours, or held by an incarnation membership says is dead;
//! - [`LeaseManager::release`] hands a shard back gracefully;
//! - [`LeaseManager::takeover`] collects a dead incarnation's shards in
//!   bounded, resumable steps;
//! - [`LeaseManager::rebalance`] says what to hand back and what to ask for
//!   when membership changes.
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

use crate::placement::{self, NodeKey};

/// Leases read per transaction by a takeover step or a rebalance walk: keeps
/// every transaction far inside the store's 5 s and range limits.
pub const SCAN_PAGE: usize = 1024;

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

    /// The same set without `dead`.
    pub fn without(&self, dead: &Incarnation) -> LiveSet {
        LiveSet {
            incarnations: self.incarnations.iter().filter(|i| *i != dead).cloned().collect(),
        }
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

/// One bounded step of a takeover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeoverStep {
    /// The shard this step's walk started at (the resumed cursor).
    pub from: u32,
    /// The leases this step took, ascending by shard.
    pub taken: Vec<Lease>,
    /// True once the walk reached the last shard: further calls take nothing.
    pub done: bool,
}

/// What a membership change asks of this node. The caller drives it in
/// bounded steps: release first (others are waiting), then acquire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebalancePlan {
    /// Held by us, placed on another live node: hand back.
    pub release: Vec<u32>,
    /// Placed on us and free, released or held by a dead incarnation.
    pub acquire: Vec<u32>,
    /// Placed on us but still held by a live incarnation: acquirable once it
    /// releases.
    pub awaiting: Vec<(u32, Incarnation)>,
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
    /// `check_lease` meanwhile.
    held: Mutex<BTreeMap<u32, Lease>>,
    /// Per dead incarnation: where its takeover resumes (`None` = finished).
    cursors: Mutex<BTreeMap<Incarnation, Option<u32>>>,
}

impl LeaseManager {
    pub fn new(db: Database, me: Incarnation, shard_count: u32) -> Self {
        assert!(shard_count > 0, "shard_count must be positive");
        LeaseManager {
            db,
            me,
            shard_count,
            held: Mutex::new(BTreeMap::new()),
            cursors: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn incarnation(&self) -> &Incarnation {
        &self.me
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

    /// Where the takeover of `dead` resumes: `Some(Some(shard))` mid-walk,
    /// `Some(None)` when finished, `None` if never started.
    pub fn takeover_cursor(&self, dead: &Incarnation) -> Option<Option<u32>> {
        self.cursors.lock().expect("cursors").get(dead).copied()
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

    /// One bounded step of taking over what `dead` held: the shards that
    /// placement over `live` (without `dead`, with us) gives to this node,
    /// at most `max_per_step` per call, so survivors of a failover do not
    /// stampede the store. Resumes where the previous step stopped; a
    /// failed step is retried from the same place, never from shard 0.
    pub async fn takeover(
        &self,
        dead: &Incarnation,
        live: &LiveSet,
        max_per_step: usize,
    ) -> Result<TakeoverStep, LeaseError> {
        let from = match self.takeover_cursor(dead) {
            Some(None) => {
                return Ok(TakeoverStep {
                    from: self.shard_count,
                    taken: vec![],
                    done: true,
                });
            }
            Some(Some(shard)) => shard,
            None => 0,
        };
        // 0 would make no progress at all; one is the slowest useful pace.
        let max = max_per_step.max(1);
        let mut nodes = live.without(dead).nodes();
        let me_key = self.me.key();
        if !nodes.contains(&me_key) {
            // Whoever runs this is alive, whatever the caller's view says.
            nodes.push(me_key.clone());
        }
        let (me, shard_count, nodes, me_key) = (&self.me, self.shard_count, &nodes, &me_key);
        let (taken, next) = self
            .db
            .run("lease_takeover", |txn| async move {
                let mut taken = Vec::new();
                // The scan is a snapshot read; each lease acted on is re-read
                // below with a conflict, so racing survivors conflict on the
                // shards they both touch, not on the whole range.
                let page = nodes::list_leases(&txn, from, SCAN_PAGE).await?;
                for l in &page {
                    let mine = l.shard < shard_count && placement::owner(l.shard, nodes) == Some(me_key);
                    if !mine || !dead.holds(l) {
                        continue;
                    }
                    if taken.len() == max {
                        // Resume exactly here: counting steps is then
                        // ceil(n / max), and nothing is skipped.
                        return Ok::<_, StorageError>((taken, Some(l.shard)));
                    }
                    if let Some(current) = nodes::lease(&txn, l.shard).await?
                        && dead.holds(&current)
                    {
                        taken.push(nodes::acquire_lease(&txn, l.shard, &me.name, me.generation).await?);
                    }
                }
                let next = match page.last() {
                    Some(last) if page.len() == SCAN_PAGE => last.shard.checked_add(1),
                    _ => None,
                };
                Ok((taken, next))
            })
            .await?;
        metrics::counter!("meshmail_lease_changes_total", "kind" => "taken_over").increment(taken.len() as u64);
        {
            let mut held = self.held.lock().expect("held");
            for l in &taken {
                held.insert(l.shard, l.clone());
            }
        }
        self.cursors.lock().expect("cursors").insert(dead.clone(), next);
        Ok(TakeoverStep {
            from,
            taken,
            done: next.is_none(),
        })
    }

    /// Compares placement over `live` (plus us) with the leases in the
    /// store. Read-only, one snapshot transaction per [`SCAN_PAGE`] leases;
    /// the plan may be stale by the time it is carried out, which is safe:
    /// `acquire` and `release` re-check each lease in their own transaction.
    pub async fn rebalance(&self, live: &LiveSet) -> Result<RebalancePlan, LeaseError> {
        let mut nodes = live.nodes();
        let me_key = self.me.key();
        if !nodes.contains(&me_key) {
            nodes.push(me_key.clone());
        }
        let mut leases: BTreeMap<u32, Lease> = BTreeMap::new();
        let mut from = 0u32;
        while from < self.shard_count {
            let page = self
                .db
                .read("lease_rebalance_scan", |txn| async move {
                    nodes::list_leases(&txn, from, SCAN_PAGE).await
                })
                .await?;
            let full = page.len() == SCAN_PAGE;
            let Some(next) = page.last().and_then(|l| l.shard.checked_add(1)) else {
                break;
            };
            leases.extend(page.into_iter().map(|l| (l.shard, l)));
            if !full {
                break;
            }
            from = next;
        }
        let mut plan = RebalancePlan::default();
        for shard in 0..self.shard_count {
            let placed_here = placement::owner(shard, &nodes) == Some(&me_key);
            let lease = leases.get(&shard);
            let ours = lease.is_some_and(|l| self.me.holds(l));
            match (placed_here, ours, lease) {
                (false, true, _) => plan.release.push(shard),
                (true, false, Some(l)) if !l.released && live.contains(&l.node, l.generation) => {
                    plan.awaiting
                        .push((shard, Incarnation::new(l.node.clone(), l.generation)));
                }
                (true, false, _) => plan.acquire.push(shard),
                // Ours and placed here, or neither: nothing to do.
                _ => {}
            }
        }
        Ok(plan)
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
