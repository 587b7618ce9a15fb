//! The node's shared context and its supervisor.
//!
//! [`NodeCtx`] is what every actor of the node shares: the store, the blob
//! store, the node's identity, the shard leases it holds, and the current
//! refs of its shard actors and batchers (the supervisor replaces a ref when
//! it restarts an actor, so callers always look refs up here, never keep
//! them), and which shard leases it holds — granted, drained and revoked
//! by the mesh. [`NodeSupervisor`] starts the batchers and shard actors, restarts
//! them within a [`RestartBudget`], and escalates past it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use meshmail_storage::Database;
use meshmail_storage::blob::BlobStore;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::shard_of;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::batcher::{BatchQueue, BatcherArgs, BatcherMsg, CommitBatcher};
use crate::compactor::{Compactor, CompactorArgs, CompactorConfig};
use crate::delivery::PoisonBoard;
use crate::live::LiveGuard;
use crate::remote::{HintHub, ShardRouter};
use crate::restart::RestartBudget;
use crate::shard::{ShardActor, ShardArgs, ShardMsg};

/// Virtual shards, unless configured otherwise.
pub const SHARD_COUNT_DEFAULT: u32 = 1024;

/// (name, generation): a node incarnation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub name: String,
    pub generation: u64,
}

pub struct NodeCtx {
    pub db: Database,
    pub blobs: BlobStore,
    pub identity: NodeIdentity,
    pub shard_count: u32,
    pub poison: PoisonBoard,
    pub queues: Vec<Arc<BatchQueue>>,
    pub compactor: CompactorConfig,
    shards: RwLock<Vec<Option<ActorRef<ShardMsg>>>>,
    batchers: RwLock<Vec<Option<ActorRef<BatcherMsg>>>>,
    /// The lease of every shard this node holds, granted by the mesh.
    leases: RwLock<HashMap<u32, ShardLease>>,
    in_flight: std::sync::Mutex<HashMap<u32, usize>>,
    router: RwLock<Option<Arc<dyn ShardRouter>>>,
    /// Push subscriptions, local and remote.
    pub hints: HintHub,
}

impl NodeCtx {
    pub fn new(db: Database, blobs: BlobStore, identity: NodeIdentity, shard_count: u32, batchers: usize) -> Arc<Self> {
        Self::with_compactor(db, blobs, identity, shard_count, batchers, CompactorConfig::default())
    }

    pub fn with_compactor(
        db: Database,
        blobs: BlobStore,
        identity: NodeIdentity,
        shard_count: u32,
        batchers: usize,
        compactor: CompactorConfig,
    ) -> Arc<Self> {
        assert!(shard_count > 0 && batchers > 0);
        Arc::new(NodeCtx {
            compactor,
            db,
            blobs,
            identity,
            shard_count,
            poison: PoisonBoard::default(),
            queues: (0..batchers).map(|_| Arc::new(BatchQueue::default())).collect(),
            shards: RwLock::new(vec![None; shard_count as usize]),
            batchers: RwLock::new(vec![None; batchers]),
            leases: RwLock::new(HashMap::new()),
            in_flight: std::sync::Mutex::new(HashMap::new()),
            router: RwLock::new(None),
            hints: HintHub::default(),
        })
    }

    pub fn shard_of(&self, account: AccountId) -> u32 {
        shard_of(account, self.shard_count)
    }

    pub fn shard_actor(&self, shard: u32) -> Option<ActorRef<ShardMsg>> {
        self.shards
            .read()
            .expect("shards")
            .get(shard as usize)
            .cloned()
            .flatten()
    }

    /// Every shard's commits go to one batcher, so two transactions never
    /// race for the same mailbox record.
    pub fn batcher_index(&self, shard: u32) -> usize {
        shard as usize % self.queues.len()
    }

    pub fn batcher(&self, idx: usize) -> Option<ActorRef<BatcherMsg>> {
        self.batchers.read().expect("batchers").get(idx).cloned().flatten()
    }

    /// The epoch `shard`'s writes are fenced with, while this node holds
    /// its lease (draining included: what was accepted still commits).
    pub fn lease_epoch(&self, shard: u32) -> Option<u64> {
        self.leases.read().expect("leases").get(&shard).map(|l| l.epoch)
    }

    /// Whether this node accepts new work for `shard`.
    pub fn serves(&self, shard: u32) -> bool {
        self.leases
            .read()
            .expect("leases")
            .get(&shard)
            .is_some_and(|l| l.accepting)
    }

    /// Shards this node serves.
    pub fn owned_shards(&self) -> usize {
        self.leases
            .read()
            .expect("leases")
            .values()
            .filter(|l| l.accepting)
            .count()
    }

    /// Starts serving `shard` with the lease `epoch` the mesh acquired.
    pub fn grant(&self, shard: u32, epoch: u64) {
        self.leases
            .write()
            .expect("leases")
            .insert(shard, ShardLease { epoch, accepting: true });
        metrics::gauge!("meshmail_shards_served").set(self.owned_shards() as f64);
    }

    /// The lease is gone (taken over): stop at once. Work in flight fails
    /// its fence and is retried through the new owner.
    pub fn revoke(&self, shard: u32) {
        self.leases.write().expect("leases").remove(&shard);
        metrics::gauge!("meshmail_shards_served").set(self.owned_shards() as f64);
    }

    /// Graceful hand-off, first half: stop accepting work for `shard`, then
    /// wait (at most `DRAIN_MAX`) until every accepted request has committed
    /// or failed. The caller releases the lease after.
    pub async fn drain(&self, shard: u32) {
        let started = std::time::Instant::now();
        if let Some(l) = self.leases.write().expect("leases").get_mut(&shard) {
            l.accepting = false;
        }
        while self.in_flight(shard) > 0 && started.elapsed() < DRAIN_MAX {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        self.leases.write().expect("leases").remove(&shard);
        metrics::histogram!("meshmail_shard_drain_seconds").record(started.elapsed().as_secs_f64());
        metrics::gauge!("meshmail_shards_served").set(self.owned_shards() as f64);
    }

    /// Registers one request for `shard` as in flight here, if this node
    /// serves it; the guard ends it. A drain waits for these.
    pub fn enter(self: &Arc<Self>, shard: u32) -> Option<InFlightShard> {
        // Under the read lock: a drain that flips `accepting` holds the
        // write lock, so it either sees this request counted or refuses it.
        let leases = self.leases.read().expect("leases");
        if !leases.get(&shard).is_some_and(|l| l.accepting) {
            return None;
        }
        *self.in_flight.lock().expect("in_flight").entry(shard).or_default() += 1;
        Some(InFlightShard {
            ctx: self.clone(),
            shard,
        })
    }

    fn in_flight(&self, shard: u32) -> usize {
        self.in_flight
            .lock()
            .expect("in_flight")
            .get(&shard)
            .copied()
            .unwrap_or(0)
    }

    /// Installs the way to other nodes' shards (the mesh).
    pub fn set_router(&self, router: Arc<dyn ShardRouter>) {
        *self.router.write().expect("router") = Some(router);
    }

    pub fn router(&self) -> Option<Arc<dyn ShardRouter>> {
        self.router.read().expect("router").clone()
    }

    /// After a commit: wakes local sessions and the nodes watching the account.
    pub fn publish_hint(&self, hint: crate::shard::ChangeHint) {
        self.hints.publish_local(hint);
        let watchers = self.hints.remote_watchers(hint.account);
        if watchers.is_empty() {
            return;
        }
        if let Some(router) = self.router() {
            let wire = crate::remote::WireHint {
                account: hint.account,
                mailbox: hint.mailbox,
                uid: hint.uid,
                modseq: hint.modseq,
            };
            for (node, generation) in watchers {
                router.push_hint(&node, generation, wire);
            }
        }
    }
}

impl NodeCtx {
    /// Takes the lease of every shard at once, for a node that is alone and
    /// runs without the mesh's control loop (tests, tools). Bounded
    /// transactions of 128 leases each.
    pub async fn acquire_all_leases(&self) -> Result<(), meshmail_storage::StorageError> {
        use meshmail_storage::model::nodes;
        let all: Vec<u32> = (0..self.shard_count).collect();
        for chunk in all.chunks(128) {
            let (chunk, name, generation) = (chunk.to_vec(), self.identity.name.clone(), self.identity.generation);
            let got = self
                .db
                .run("lease_acquire", move |txn| {
                    let (chunk, name) = (chunk.clone(), name.clone());
                    async move {
                        let mut got = Vec::with_capacity(chunk.len());
                        for shard in chunk {
                            got.push(nodes::acquire_lease(&txn, shard, &name, generation).await?);
                        }
                        Ok::<_, meshmail_storage::StorageError>(got)
                    }
                })
                .await?;
            for l in got {
                self.grant(l.shard, l.epoch);
            }
        }
        Ok(())
    }
}

/// How long a graceful hand-off waits for accepted work to commit.
pub const DRAIN_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// A shard lease as the node's actors see it.
#[derive(Debug, Clone, Copy)]
struct ShardLease {
    epoch: u64,
    /// False while draining: accepted work commits, new work goes elsewhere.
    accepting: bool,
}

/// One request in flight for a shard (see [`NodeCtx::enter`]).
pub struct InFlightShard {
    ctx: Arc<NodeCtx>,
    shard: u32,
}

impl Drop for InFlightShard {
    fn drop(&mut self) {
        let mut map = self.ctx.in_flight.lock().expect("in_flight");
        if let Some(n) = map.get_mut(&self.shard) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.shard);
            }
        }
    }
}

/// Which child a supervision event is about.
#[derive(Debug, Clone, Copy)]
enum Child {
    Shard(u32),
    Batcher(usize),
    Compactor,
}

pub struct NodeSupervisor;

pub struct SupervisorState {
    ctx: Arc<NodeCtx>,
    children: HashMap<ractor::ActorId, Child>,
    budget: RestartBudget,
    _live: LiveGuard,
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum SupervisorMsg {}

impl NodeSupervisor {
    async fn spawn_child(me: &ActorCell, st: &mut SupervisorState, child: Child) -> Result<(), ActorProcessingErr> {
        let ctx = st.ctx.clone();
        match child {
            Child::Shard(shard) => {
                let (actor, _) = Actor::spawn_linked(
                    None,
                    ShardActor,
                    ShardArgs {
                        ctx: ctx.clone(),
                        shard,
                    },
                    me.clone(),
                )
                .await?;
                st.children.insert(actor.get_id(), child);
                ctx.shards.write().expect("shards")[shard as usize] = Some(actor);
            }
            Child::Batcher(idx) => {
                let queue = ctx.queues[idx].clone();
                let (actor, _) = Actor::spawn_linked(
                    None,
                    CommitBatcher,
                    BatcherArgs {
                        ctx: ctx.clone(),
                        queue: queue.clone(),
                    },
                    me.clone(),
                )
                .await?;
                st.children.insert(actor.get_id(), child);
                // Published first, so that a delivery queued from here on
                // kicks this actor; then whatever waited while it was down
                // (its Kick lost with the old actor) gets committed now.
                ctx.batchers.write().expect("batchers")[idx] = Some(actor.clone());
                if queue.rearm() {
                    let _ = actor.cast(BatcherMsg::Kick);
                }
            }
            Child::Compactor => {
                let args = CompactorArgs {
                    ctx: ctx.clone(),
                    config: ctx.compactor,
                };
                let (actor, _) = Actor::spawn_linked(None, Compactor, args, me.clone()).await?;
                st.children.insert(actor.get_id(), child);
            }
        }
        Ok(())
    }
}

impl Actor for NodeSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<NodeCtx>;

    async fn pre_start(
        &self,
        me: ActorRef<SupervisorMsg>,
        ctx: Arc<NodeCtx>,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let mut st = SupervisorState {
            ctx: ctx.clone(),
            children: HashMap::new(),
            budget: RestartBudget::default(),
            _live: LiveGuard::new("node_supervisor"),
        };
        for idx in 0..ctx.queues.len() {
            Self::spawn_child(&me.get_cell(), &mut st, Child::Batcher(idx)).await?;
        }
        for shard in 0..ctx.shard_count {
            Self::spawn_child(&me.get_cell(), &mut st, Child::Shard(shard)).await?;
        }
        Self::spawn_child(&me.get_cell(), &mut st, Child::Compactor).await?;
        Ok(st)
    }

    /// Overrides ractor's default (stop the supervisor when a child exits):
    /// restart the child, within the restart budget; past it, escalate.
    async fn handle_supervisor_evt(
        &self,
        me: ActorRef<SupervisorMsg>,
        evt: SupervisionEvent,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, reason) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, format!("failed: {err}")),
            SupervisionEvent::ActorTerminated(cell, _, reason) => (cell, format!("stopped: {reason:?}")),
            _ => return Ok(()),
        };
        let Some(child) = st.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        metrics::counter!("meshmail_actor_restarts_total", "kind" => child_kind(child)).increment(1);
        tracing::error!(?child, %reason, "child actor died: restarting");
        if !st.budget.allow() {
            tracing::error!("restart budget spent: escalating");
            return Err(From::from(format!("restart budget spent ({child:?} {reason})")));
        }
        Self::spawn_child(&me.get_cell(), st, child).await
    }
}

fn child_kind(c: Child) -> &'static str {
    match c {
        Child::Shard(_) => "shard",
        Child::Batcher(_) => "commit_batcher",
        Child::Compactor => "compactor",
    }
}

/// Starts the node's actors; the returned supervisor lives until stopped.
pub async fn start(
    ctx: Arc<NodeCtx>,
) -> Result<(ActorRef<SupervisorMsg>, tokio::task::JoinHandle<()>), ActorProcessingErr> {
    let (sup, handle) = Actor::spawn(None, NodeSupervisor, ctx).await?;
    Ok((sup, handle))
}
