//! The node's shared context and its supervisor.
//!
//! [`NodeCtx`] is what every actor of the node shares: the store, the blob
//! store, the node's identity, the shard leases it holds, and the current
//! refs of its shard actors and batchers (the supervisor replaces a ref when
//! it restarts an actor, so callers always look refs up here, never keep
//! them). [`NodeSupervisor`] starts the batchers and shard actors, restarts
//! them within a [`RestartBudget`], and escalates past it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use meshmail_storage::Database;
use meshmail_storage::blob::BlobStore;
use meshmail_storage::keyspace::AccountId;
use meshmail_storage::model::{nodes, shard_of};
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::batcher::{BatchQueue, BatcherArgs, BatcherMsg, CommitBatcher};
use crate::compactor::{Compactor, CompactorArgs, CompactorConfig};
use crate::delivery::PoisonBoard;
use crate::live::LiveGuard;
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
    /// Lease epoch of every shard this node owns.
    leases: RwLock<HashMap<u32, u64>>,
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

    pub fn lease_epoch(&self, shard: u32) -> Option<u64> {
        self.leases.read().expect("leases").get(&shard).copied()
    }

    pub fn owned_shards(&self) -> usize {
        self.leases.read().expect("leases").len()
    }

    /// Takes the lease of every shard (single-node placement: until the mesh
    /// places shards across nodes, the running node owns them all). Bounded
    /// transactions of 128 leases each.
    pub async fn acquire_all_leases(&self) -> Result<(), meshmail_storage::StorageError> {
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
            let mut leases = self.leases.write().expect("leases");
            for l in got {
                leases.insert(l.shard, l.epoch);
            }
        }
        metrics::gauge!("meshmail_shards_owned").set(self.owned_shards() as f64);
        Ok(())
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
                // Whatever waited while it was down gets committed now.
                if !queue.is_empty() {
                    let _ = actor.cast(BatcherMsg::Kick);
                }
                ctx.batchers.write().expect("batchers")[idx] = Some(actor);
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
