//! The mesh as it runs in a node: one control task that turns link events
//! into membership, membership into placement, and placement into lease
//! changes, which it hands to the node through [`ShardHost`].
//!
//! Each round (every [`RuntimeConfig::tick`], 100 ms by default):
//! 1. link events from the endpoint update [`Membership`], and so does what
//!    was heard on each link since the last round (the UDP datagram count
//!    of the QUIC connection: keep-alive pings and their acks are the
//!    heartbeat, see [`MeshEndpoint::link_traffic`]); a peer silent for
//!    `suspect_after` is suspect, for `dead_after` dead, even while QUIC
//!    still holds its link. A round that comes much later than due means
//!    this process stalled: the peers' silence is forgiven
//!    ([`Membership::forgive`]), so our own stall never kills a peer;
//! 2. peers whose link is down are dialed on their jittered backoff (each
//!    peer has its own schedule, so redials never phase-lock with a kill
//!    schedule); any link coming up, and the end of an injected partition,
//!    bring every backed-off redial forward to `backoff.min`, so a healed
//!    network relinks in well under a second; peers are learned from the
//!    seeds and then from every peer's announcements (a full mesh);
//! 3. the leases are read (one snapshot read per 1024 shards) and
//!    [`balance::decide`] — a pure function, also driven by the seeded
//!    simulation — says what to revoke, hand back and take (see there for
//!    the rules and the two anti-ping-pong rules). Hand-offs run
//!    concurrently, each drain on its own task, and the round waits for
//!    them at most `drain_deadline`; acquisitions (a takeover included) go
//!    in batches of [`crate::leases::ACQUIRE_BATCH`] per transaction.
//!
//! Metrics: `meshmail_mesh_detection_seconds` (silence at a death verdict),
//! `meshmail_mesh_takeover_seconds` (death verdict to the takeover's
//! commit), `meshmail_mesh_member_events_total{kind}` (suspicions included),
//! `meshmail_mesh_false_suspicions_total` and `meshmail_mesh_false_deaths_total`
//! (a suspect or dead incarnation heard again), `meshmail_mesh_stalls_total`,
//! `meshmail_mesh_handoff_round_seconds`, `meshmail_mesh_drain_deadline_missed_total`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use meshmail_storage::Database;
use meshmail_storage::model::nodes::{self, Lease};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast};

use crate::balance;
use crate::cluster::Cluster;
use crate::dials::Dials;
use crate::events::NodeEvent;
use crate::identity::NodeId;
use crate::leases::{Incarnation, LeaseManager, SCAN_PAGE};
use crate::membership::{MemberEvent, Membership, MembershipConfig, Status};
use crate::placement;
use crate::registry::Registry;
use crate::transport::MeshEndpoint;

/// What the node does when the runtime changes its shards.
#[async_trait]
pub trait ShardHost: Send + Sync + 'static {
    /// Serve `lease.shard`, fencing its writes with `lease.epoch`.
    async fn grant(&self, lease: &Lease);
    /// Stop accepting work for `shard` and wait until what was accepted has
    /// committed (bounded by the host). The lease is released after.
    async fn drain(&self, shard: u32);
    /// The lease was lost (taken over): stop serving at once.
    fn revoke(&self, shard: u32);
}

/// A seed: `name@host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seed {
    pub id: NodeId,
    pub addr: SocketAddr,
}

/// A `--seed` that is not `NAME@HOST:PORT`.
#[derive(Debug, thiserror::Error)]
pub enum SeedParseError {
    #[error("seed {0:?}: expected NAME@HOST:PORT (e.g. node-1@127.0.0.1:7410)")]
    Form(String),
    #[error(transparent)]
    Name(#[from] crate::MeshError),
    #[error("seed {seed:?}: {source}")]
    Addr {
        seed: String,
        source: std::net::AddrParseError,
    },
}

impl std::str::FromStr for Seed {
    type Err = SeedParseError;
    fn from_str(s: &str) -> Result<Seed, SeedParseError> {
        let (name, addr) = s.split_once('@').ok_or_else(|| SeedParseError::Form(s.into()))?;
        Ok(Seed {
            id: NodeId::new(name)?,
            addr: addr
                .parse()
                .map_err(|source| SeedParseError::Addr { seed: s.into(), source })?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub seeds: Vec<Seed>,
    /// The mesh address other nodes should dial to reach this one.
    pub advertise: Option<SocketAddr>,
    pub membership: MembershipConfig,
    /// The round's period: also the resolution of heartbeat hearing.
    pub tick: Duration,
    /// Lease changes (acquisitions, and separately releases) per round.
    pub moves_per_round: usize,
    /// How long a round waits for the drains it started (they run
    /// concurrently); a drain still running then finishes, and releases its
    /// lease, in the background, so a slow shard never stalls membership.
    pub drain_deadline: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            seeds: Vec::new(),
            advertise: None,
            membership: MembershipConfig::default(),
            tick: Duration::from_millis(100),
            moves_per_round: 512,
            drain_deadline: Duration::from_millis(500),
        }
    }
}

pub use crate::status::{LinkState, MemberStatus, MemberView};

/// What peers announce to each other every round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Announce {
    pub node: String,
    pub generation: u64,
    pub draining: bool,
    /// Every member the sender knows, itself included.
    pub directory: Vec<Seed>,
}

#[derive(Default)]
struct View {
    /// The lease of every shard as last read (index = shard).
    owners: Vec<Option<Lease>>,
    members: Vec<MemberView>,
    settled: bool,
    /// A settled round found nothing to change.
    converged: bool,
}

struct Shared {
    me: Incarnation,
    db: Database,
    config: RuntimeConfig,
    endpoint: Option<MeshEndpoint>,
    cluster: RwLock<Option<Cluster>>,
    leases: LeaseManager,
    host: Arc<dyn ShardHost>,
    view: RwLock<View>,
    directory: Mutex<BTreeMap<NodeId, SocketAddr>>,
    /// Peers that announced they are draining (name → generation).
    peers_draining: Mutex<BTreeMap<String, u64>>,
    draining: std::sync::atomic::AtomicBool,
    /// Shards whose drain and hand-off task is running.
    handing_off: Arc<Mutex<BTreeSet<u32>>>,
    /// When each dead incarnation was declared dead (for the takeover time).
    dead_at: Mutex<BTreeMap<Incarnation, Instant>>,
    wake: Notify,
    /// What to do when superseded (the node exits; tests may record it).
    on_superseded: Box<dyn Fn() + Send + Sync>,
    superseded: std::sync::atomic::AtomicBool,
    /// Forgotten names and this node's sign of life.
    registry: Registry,
}

/// The running mesh of a node. Cheap to clone.
#[derive(Clone)]
pub struct MeshRuntime {
    shared: Arc<Shared>,
}

impl MeshRuntime {
    /// `endpoint` is `None` for a node running alone (no mesh configured):
    /// it then owns every shard, through the same lease rules.
    pub fn new(
        db: Database,
        me: Incarnation,
        shard_count: u32,
        endpoint: Option<MeshEndpoint>,
        host: Arc<dyn ShardHost>,
        config: RuntimeConfig,
    ) -> MeshRuntime {
        let directory = config.seeds.iter().map(|s| (s.id.clone(), s.addr)).collect();
        MeshRuntime {
            shared: Arc::new(Shared {
                leases: LeaseManager::new(db.clone(), me.clone(), shard_count),
                me,
                db,
                config,
                endpoint,
                cluster: RwLock::new(None),
                host,
                view: RwLock::new(View {
                    owners: vec![None; shard_count as usize],
                    ..View::default()
                }),
                directory: Mutex::new(directory),
                peers_draining: Mutex::new(BTreeMap::new()),
                draining: std::sync::atomic::AtomicBool::new(false),
                handing_off: Arc::new(Mutex::new(BTreeSet::new())),
                dead_at: Mutex::new(BTreeMap::new()),
                registry: Registry::default(),
                wake: Notify::new(),
                on_superseded: Box::new(|| {
                    // A short grace so sessions get their 4xx answers and the
                    // operator's log shows why; nothing is served meanwhile.
                    tokio::spawn(async {
                        tokio::time::sleep(SUPERSEDED_GRACE).await;
                        std::process::exit(EXIT_SUPERSEDED);
                    });
                }),
                superseded: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The remote-messaging layer, once started (announcements use it).
    pub fn set_cluster(&self, cluster: Cluster) {
        *self.shared.cluster.write().expect("cluster") = Some(cluster);
    }

    pub fn cluster(&self) -> Option<Cluster> {
        self.shared.cluster.read().expect("cluster").clone()
    }

    pub fn endpoint(&self) -> Option<&MeshEndpoint> {
        self.shared.endpoint.as_ref()
    }

    pub fn me(&self) -> &Incarnation {
        &self.shared.me
    }

    /// The incarnation holding `shard`'s lease as last read (released
    /// leases count as unowned).
    pub fn owner(&self, shard: u32) -> Option<Lease> {
        let view = self.shared.view.read().expect("view");
        view.owners
            .get(shard as usize)
            .cloned()
            .flatten()
            .filter(|l| !l.released)
    }

    /// Every lease as last read (index = shard).
    pub fn owners(&self) -> Vec<Option<Lease>> {
        self.shared.view.read().expect("view").owners.clone()
    }

    pub fn members(&self) -> Vec<MemberView> {
        self.shared.view.read().expect("view").members.clone()
    }

    pub fn settled(&self) -> bool {
        self.shared.view.read().expect("view").settled
    }

    /// Whether incarnation (`node`, `generation`) is gone as far as this
    /// node can tell: the failure detector declared it dead, or a newer
    /// generation of it is known. Its QUIC connection may linger until the
    /// idle timeout (4 s); a request waiting on it should not.
    pub fn peer_gone(&self, node: &str, generation: u64) -> bool {
        let view = self.shared.view.read().expect("view");
        view.members.iter().any(|m| {
            m.node == node
                && (m.generation > generation || (m.generation == generation && m.status == MemberStatus::Dead))
        })
    }

    /// Whether the last round was settled and changed no lease: the node
    /// holds what placement gives it (or waits on a peer's hand-off).
    pub fn converged(&self) -> bool {
        self.shared.view.read().expect("view").converged
    }

    /// Asks for a round now (after a remote node said "not owner").
    pub fn refresh_soon(&self) {
        self.shared.wake.notify_one();
    }

    /// Starts (or stops) evacuating this node: placement leaves it out, so
    /// its shards are handed over gracefully, and peers are told.
    pub fn set_draining(&self, on: bool) {
        self.shared.draining.store(on, std::sync::atomic::Ordering::SeqCst);
        self.refresh_soon();
    }

    pub fn draining(&self) -> bool {
        self.shared.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Shards this incarnation holds leases for.
    pub fn held(&self) -> usize {
        self.shared.leases.held().len()
    }

    /// What this node announces to its peers.
    pub fn announcement(&self) -> Announce {
        let mut directory: Vec<Seed> = self
            .shared
            .directory
            .lock()
            .expect("directory")
            .iter()
            .map(|(id, addr)| Seed {
                id: id.clone(),
                addr: *addr,
            })
            .collect();
        if let (Some(addr), Ok(id)) = (self.shared.config.advertise, NodeId::new(self.shared.me.name.clone())) {
            directory.push(Seed { id, addr });
        }
        Announce {
            node: self.shared.me.name.clone(),
            generation: self.shared.me.generation,
            draining: self.draining(),
            directory,
        }
    }

    /// Takes a peer's announcement: learns the members it knows, and
    /// whether it is draining.
    pub fn receive_announce(&self, a: Announce) {
        let mut learned = false;
        {
            let mut dir = self.shared.directory.lock().expect("directory");
            for s in a.directory {
                // A forgotten node is not learnt back from a peer that has
                // not read the registry yet.
                if s.id.as_str() == self.shared.me.name || self.shared.registry.is_forgotten(s.id.as_str()) {
                    continue;
                }
                if dir.insert(s.id.clone(), s.addr) != Some(s.addr) {
                    learned = true;
                }
            }
        }
        let mut draining = self.shared.peers_draining.lock().expect("draining");
        let changed = if a.draining {
            draining.insert(a.node, a.generation) != Some(a.generation)
        } else {
            draining.remove(&a.node).is_some()
        };
        if learned || changed {
            self.refresh_soon();
        }
    }

    /// Runs the control loop until the process ends.
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        let rt = self.clone();
        tokio::spawn(async move { rt.run().await })
    }

    async fn run(self) {
        let shared = &self.shared;
        let started = Instant::now();
        let mut membership = Membership::new(shared.me.clone(), shared.config.membership, started);
        let mut events = shared.endpoint.as_ref().map(|e| e.subscribe());
        let mut rng = seeded_rng(&shared.me);
        let mut dials = Dials::default();
        let mut hearing = Hearing::default();
        let mut was_partitioned = false;
        // A sleep that overran by more than this means this process (not
        // the peers) stood still: half the suspicion time, at least 3 ticks.
        let stall = (shared.config.membership.suspect_after / 2).max(shared.config.tick * 3);
        loop {
            let now = Instant::now();
            if let Some(rx) = events.as_mut() {
                self.drain_events(rx, &mut membership, now);
            }
            if let Some(endpoint) = &shared.endpoint {
                for e in hearing.poll(endpoint, &mut membership, now) {
                    self.member_event(&membership, &e, now);
                }
            }
            for e in membership.tick(now) {
                self.member_event(&membership, &e, now);
            }
            self.count_false_suspicions(&membership);
            dials.reap();
            if let Some(endpoint) = &shared.endpoint {
                let partitioned = endpoint.is_partitioned();
                if was_partitioned && !partitioned {
                    // The partition healed: redial everyone now, not when
                    // the backoff grown during it would.
                    membership.heal(now);
                }
                was_partitioned = partitioned;
            }
            if let Some(endpoint) = &shared.endpoint
                && !was_partitioned
            {
                let targets: Vec<NodeId> = shared.directory.lock().expect("directory").keys().cloned().collect();
                for id in membership.dial_plan(&targets, now, &mut rng) {
                    dials.dial(endpoint, id, &shared.directory);
                }
            }
            self.announce(&membership);
            let settled = self.is_settled(&membership, now);
            let converged = self.lease_round(&membership, settled).await;
            self.publish_members(&membership, settled, converged);
            let slept = Instant::now();
            tokio::select! {
                _ = tokio::time::sleep(shared.config.tick) => {
                    let late = slept.elapsed().saturating_sub(shared.config.tick);
                    if late > stall {
                        tracing::warn!(late_ms = late.as_millis() as u64, "mesh: this process stalled; peers' silence forgiven");
                        metrics::counter!("meshmail_mesh_stalls_total").increment(1);
                        membership.forgive(Instant::now());
                    }
                }
                _ = shared.wake.notified() => {}
            }
        }
    }

    /// One balancing round; whether the mesh has converged (settled, and
    /// the round changed nothing). A failed round is retried next tick.
    async fn lease_round(&self, membership: &Membership, settled: bool) -> bool {
        match self.balance(membership, settled).await {
            Ok(changes) => settled && changes == 0,
            Err(e) => {
                tracing::warn!(error = %e, "mesh: lease round failed; retrying next round");
                metrics::counter!("meshmail_mesh_lease_round_errors_total").increment(1);
                false
            }
        }
    }

    fn drain_events(&self, rx: &mut broadcast::Receiver<NodeEvent>, membership: &mut Membership, now: Instant) {
        loop {
            let events = match rx.try_recv() {
                Ok(NodeEvent::NodeUp { id, generation, .. }) => membership.link_up(&id, generation, now),
                Ok(NodeEvent::NodeDown { id, generation, .. }) => membership.link_down(&id, generation, now),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "mesh: membership lagged behind link events");
                    continue;
                }
                Err(_) => return,
            };
            for e in events {
                self.member_event(membership, &e, now);
            }
        }
    }

    /// Logs and counts a membership verdict; remembers deaths for the
    /// takeover time.
    fn member_event(&self, membership: &Membership, e: &MemberEvent, now: Instant) {
        let kind = match e {
            MemberEvent::Alive(id, g) => {
                tracing::info!(peer = %id, generation = g, "mesh: member alive");
                "alive"
            }
            MemberEvent::Suspect(id, g) => {
                tracing::warn!(peer = %id, generation = g, "mesh: member suspect");
                "suspect"
            }
            MemberEvent::Dead(id, g) => {
                // A death by silence (not by a successor's link: then the
                // current generation is the newer one, and nothing was
                // detected, the restart said so).
                let by_silence = membership.status(id).is_some_and(|(current, _)| current == *g);
                let silent = membership.silence(id, now).filter(|_| by_silence);
                tracing::warn!(peer = %id, generation = g, silent_ms = silent.map(|s| s.as_millis() as u64), "mesh: member dead");
                if let Some(silent) = silent {
                    metrics::histogram!("meshmail_mesh_detection_seconds").record(silent.as_secs_f64());
                }
                let mut dead = self.shared.dead_at.lock().expect("dead_at");
                dead.insert(Incarnation::new(id.to_string(), *g), now);
                // Bounded: only recent deaths matter for the takeover time.
                while dead.len() > 64 {
                    let oldest = dead.iter().min_by_key(|(_, t)| **t).map(|(k, _)| k.clone());
                    if let Some(k) = oldest {
                        dead.remove(&k);
                    }
                }
                "dead"
            }
        };
        metrics::counter!("meshmail_mesh_member_events_total", "kind" => kind).increment(1);
    }

    fn count_false_suspicions(&self, membership: &Membership) {
        metrics::counter!("meshmail_mesh_false_suspicions_total").absolute(membership.false_suspicions());
        metrics::counter!("meshmail_mesh_false_deaths_total").absolute(membership.false_deaths());
    }

    fn is_settled(&self, membership: &Membership, now: Instant) -> bool {
        if membership.settled(now) {
            return true;
        }
        let dir = self.shared.directory.lock().expect("directory");
        dir.keys()
            .all(|id| matches!(membership.status(id), Some((_, Status::Up))) && membership.linked(id))
    }

    fn announce(&self, membership: &Membership) {
        let Some(cluster) = self.cluster() else { return };
        let body = match serde_json::to_vec(&self.announcement()) {
            Ok(b) => b,
            Err(_) => return,
        };
        for inc in membership.live_set().nodes() {
            if inc.name == self.shared.me.name {
                continue;
            }
            if let Ok(id) = NodeId::new(inc.name.clone())
                && membership.linked(&id)
                && let Some((generation, _)) = membership.status(&id)
            {
                let mut msg = ANNOUNCE_TAG.to_vec();
                msg.extend_from_slice(&body);
                cluster.cast(&inc.name, generation, msg);
            }
        }
    }

    /// One round of lease changes: [`balance::decide`], carried out.
    /// Returns how many leases it changed (or started to hand back).
    async fn balance(&self, membership: &Membership, settled: bool) -> Result<usize, meshmail_storage::StorageError> {
        let shared = &self.shared;
        self.check_superseded().await?;
        let owners = self.scan().await?;
        let live = membership.live_set();
        let mut excluded: BTreeSet<String> = shared
            .peers_draining
            .lock()
            .expect("draining")
            .keys()
            .cloned()
            .collect();
        if self.draining() {
            excluded.insert(shared.me.name.clone());
        }
        let mut members: BTreeSet<String> = shared
            .directory
            .lock()
            .expect("directory")
            .keys()
            .map(|id| id.to_string())
            .collect();
        members.insert(shared.me.name.clone());
        let known = members.len();
        let held = shared.leases.held();
        let handing_off = shared.handing_off.lock().expect("handing_off").clone();
        let decision = balance::decide(&balance::Round {
            me: &shared.me,
            owners: &owners,
            held: &held,
            live: &live,
            excluded: &excluded,
            settled,
            grace_over: membership.settled(Instant::now()),
            members: &members,
            known,
            moves_per_round: shared.config.moves_per_round,
            handing_off: &handing_off,
        });
        metrics::gauge!("meshmail_mesh_members_alive").set(live.nodes().len() as f64);
        metrics::gauge!("meshmail_mesh_members_known").set(known as f64);

        if let Some(first) = decision.lost.first() {
            let current = owners.get(*first as usize).cloned().flatten();
            tracing::warn!(
                shards = decision.lost.len(),
                first,
                ?current,
                "mesh: leases lost; no longer serving those shards"
            );
        }
        for &shard in &decision.lost {
            shared.host.revoke(shard);
            let _ = shared.leases.release(shard).await;
            metrics::counter!("meshmail_lease_changes_total", "kind" => "lost").increment(1);
        }
        self.hand_off(&decision.release).await;
        let acquired = self.acquire(&decision, &live).await?;
        let changes = decision.lost.len() + decision.release.len() + acquired;
        if acquired > 0 || !decision.release.is_empty() {
            tracing::info!(
                acquired,
                released = decision.release.len(),
                held = shared.leases.held().len(),
                "mesh: shard leases changed"
            );
            // More may be due: do not wait a whole tick.
            shared.wake.notify_one();
        }
        metrics::gauge!("meshmail_shards_owned").set(shared.leases.held().len() as f64);
        Ok(changes)
    }

    /// Drains and releases `shards`, all at once, each on its own task;
    /// waits for them up to `drain_deadline`. Those still draining then go
    /// on in the background (the host bounds a drain) and wake a round when
    /// done; until then they are not chosen again.
    async fn hand_off(&self, shards: &[u32]) {
        if shards.is_empty() {
            return;
        }
        let shared = &self.shared;
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for &shard in shards {
            shared.handing_off.lock().expect("handing_off").insert(shard);
            let rt = self.clone();
            tasks.spawn(async move {
                let shared = &rt.shared;
                shared.host.drain(shard).await;
                if let Err(e) = shared.leases.release(shard).await {
                    tracing::warn!(shard, error = %e, "mesh: release after drain failed; retried next round");
                }
                shared.handing_off.lock().expect("handing_off").remove(&shard);
                tracing::debug!(shard, "mesh: lease handed over");
                shared.wake.notify_one();
            });
        }
        let all = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(shared.config.drain_deadline, all).await.is_err() {
            metrics::counter!("meshmail_mesh_drain_deadline_missed_total").increment(1);
            tracing::info!(
                running = tasks.len(),
                "mesh: drains still running after the round's deadline; they finish in the background"
            );
            tasks.detach_all();
        }
        metrics::histogram!("meshmail_mesh_handoff_round_seconds").record(started.elapsed().as_secs_f64());
    }

    /// Takes the shards `decision` names, [`crate::leases::ACQUIRE_BATCH`] per transaction,
    /// and grants them to the host. Returns how many were taken.
    async fn acquire(
        &self,
        decision: &balance::Decision,
        live: &crate::leases::LiveSet,
    ) -> Result<usize, meshmail_storage::StorageError> {
        let shared = &self.shared;
        if decision.acquire.is_empty() {
            return Ok(0);
        }
        let answers = shared
            .leases
            .acquire_many(&decision.acquire, live)
            .await
            .map_err(into_storage)?;
        let mut taken = 0;
        for (shard, answer) in decision.acquire.iter().zip(answers) {
            match answer {
                Ok(l) => {
                    taken += 1;
                    shared.host.grant(&l).await;
                    let mut view = shared.view.write().expect("view");
                    view.owners[*shard as usize] = Some(l);
                }
                Err(e) => tracing::debug!(shard, error = %e, "mesh: lease not taken"),
            }
        }
        // The takeover time: from the death verdict to the commit.
        let now = Instant::now();
        let dead_at = shared.dead_at.lock().expect("dead_at");
        let holders: BTreeSet<&Incarnation> = decision.takeovers.iter().map(|(_, i)| i).collect();
        for holder in holders {
            if let Some(at) = dead_at.get(holder) {
                metrics::histogram!("meshmail_mesh_takeover_seconds").record(now.duration_since(*at).as_secs_f64());
            }
        }
        Ok(taken)
    }

    /// A newer incarnation of this node's name started (this process was
    /// paused, or partitioned, while a supervisor started a successor): stop
    /// serving and end the process. Its writes are fenced anyway; exiting
    /// makes that visible and frees its sockets.
    async fn check_superseded(&self) -> Result<(), meshmail_storage::StorageError> {
        let shared = &self.shared;
        let records = shared
            .db
            .read("node_generation", |txn| async move { nodes::list(&txn).await })
            .await?;
        self.forget_left(&records);
        let newest = records
            .iter()
            .find(|n| n.name == shared.me.name)
            .map_or(0, |n| n.generation);
        if newest > shared.me.generation {
            tracing::error!(
                generation = shared.me.generation,
                newest,
                "mesh: a newer incarnation of this node is running; this one is superseded and exits"
            );
            for lease in shared.leases.held() {
                shared.host.revoke(lease.shard);
            }
            if !shared.superseded.swap(true, std::sync::atomic::Ordering::SeqCst) {
                (shared.on_superseded)();
            }
            return Err(meshmail_storage::StorageError::Model(format!(
                "superseded by generation {newest}"
            )));
        }
        shared
            .registry
            .heartbeat(&shared.db, &shared.me.name, shared.me.generation, Instant::now());
        Ok(())
    }

    /// Drops the names an operator forgot from the directory (so they are
    /// neither dialed nor counted in the quorum's denominator) and from the
    /// draining set.
    fn forget_left(&self, records: &[nodes::NodeRecord]) {
        let shared = &self.shared;
        for name in shared.registry.observe(records, &shared.me.name) {
            shared
                .directory
                .lock()
                .expect("directory")
                .retain(|id, _| id.as_str() != name);
            shared.peers_draining.lock().expect("draining").remove(&name);
            tracing::warn!(peer = %name, "mesh: node forgotten by the operator; it no longer counts against quorum");
            metrics::counter!("meshmail_mesh_nodes_forgotten_total").increment(1);
        }
    }

    /// Reads every lease, in pages, and publishes them as the routing view.
    async fn scan(&self) -> Result<Vec<Option<Lease>>, meshmail_storage::StorageError> {
        let count = self.shared.leases.shard_count();
        let mut owners: Vec<Option<Lease>> = vec![None; count as usize];
        let mut from = 0u32;
        while from < count {
            let page = self
                .shared
                .db
                .read("lease_scan", |txn| async move {
                    nodes::list_leases(&txn, from, SCAN_PAGE).await
                })
                .await?;
            let full = page.len() == SCAN_PAGE;
            let next = page.last().and_then(|l| l.shard.checked_add(1));
            for l in page {
                if l.shard < count {
                    let i = l.shard as usize;
                    owners[i] = Some(l);
                }
            }
            match next {
                Some(n) if full => from = n,
                _ => break,
            }
        }
        let mut view = self.shared.view.write().expect("view");
        view.owners = owners.clone();
        Ok(owners)
    }

    fn publish_members(&self, membership: &Membership, settled: bool, converged: bool) {
        let shared = &self.shared;
        let draining = shared.peers_draining.lock().expect("draining").clone();
        let dir = shared.directory.lock().expect("directory").clone();
        let mut members = vec![MemberView {
            node: shared.me.name.clone(),
            generation: shared.me.generation,
            addr: shared.config.advertise.map(|a| a.to_string()),
            link: LinkState::Local,
            status: MemberStatus::Local,
            draining: self.draining(),
        }];
        for (id, addr) in &dir {
            let (generation, status) = membership.status(id).unwrap_or((0, Status::Down));
            members.push(MemberView {
                node: id.to_string(),
                generation,
                addr: Some(addr.to_string()),
                link: if membership.linked(id) {
                    LinkState::Up
                } else {
                    LinkState::Down
                },
                status: match status {
                    Status::Up | Status::Down => MemberStatus::Alive,
                    Status::Suspect => MemberStatus::Suspect,
                    Status::Dead => MemberStatus::Dead,
                },
                draining: draining.contains_key(id.as_str()),
            });
        }
        let mut view = shared.view.write().expect("view");
        view.members = members;
        view.settled = settled;
        view.converged = converged;
    }
}

/// Exit status of a node that found a newer incarnation of itself (EX_TEMPFAIL).
pub const EXIT_SUPERSEDED: i32 = 75;
/// How long a superseded node lingers (serving nothing) before it exits.
pub const SUPERSEDED_GRACE: Duration = Duration::from_secs(2);

/// Prefix of an announcement cast (other casts are the node's own).
pub const ANNOUNCE_TAG: &[u8] = b"A:";

/// What the runtime heard on each link: the UDP datagram counts of the
/// last poll, so growth since then is the peer's heartbeat.
#[derive(Default)]
struct Hearing {
    last: BTreeMap<(NodeId, u64), u64>,
}

impl Hearing {
    fn poll(&mut self, endpoint: &MeshEndpoint, membership: &mut Membership, now: Instant) -> Vec<MemberEvent> {
        let mut events = Vec::new();
        let mut seen = BTreeMap::new();
        for (id, generation, count) in endpoint.link_traffic() {
            let grew = self
                .last
                .get(&(id.clone(), generation))
                .is_none_or(|&before| count > before);
            if grew {
                events.extend(membership.heard(&id, generation, now));
            }
            seen.insert((id, generation), count);
        }
        // Links gone are forgotten: the map stays as big as the mesh.
        self.last = seen;
        events
    }
}

fn into_storage(e: crate::leases::LeaseError) -> meshmail_storage::StorageError {
    match e {
        crate::leases::LeaseError::Storage(s) => s,
        other => meshmail_storage::StorageError::Model(other.to_string()),
    }
}

/// A per-incarnation xorshift RNG for redial jitter: seeded from the clock
/// and the identity, so two nodes (or two starts) never share a schedule.
fn seeded_rng(me: &Incarnation) -> impl FnMut() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let mut state = nanos ^ me.generation.rotate_left(32) ^ placement::weight(0, &me.name) | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
