//! The mesh as it runs in a node: one control task that turns link events
//! into membership, membership into placement, and placement into lease
//! changes, which it hands to the node through [`ShardHost`].
//!
//! Each round (every [`RuntimeConfig::tick`]):
//! 1. link events from the endpoint update [`Membership`]; time passing may
//!    make a silent peer suspect, then dead;
//! 2. peers whose link is down are dialed on their jittered backoff (each
//!    peer has its own schedule, so redials never phase-lock with a kill
//!    schedule); peers are learned from the seeds and then from every
//!    peer's announcements (a full mesh);
//! 3. the leases are read (one snapshot read per 1024 shards) and compared
//!    with rendezvous placement over the live, non-draining members:
//!    - a lease we hold that placement gives to another member is drained
//!      (the node stops accepting for the shard and finishes what it has
//!      queued) and released, at most `moves_per_round` per round;
//!    - a shard placed on us is acquired when its lease is free, released,
//!      held by one of our own older generations, or held by a member
//!      declared dead — at most `moves_per_round` per round, so a failover
//!      does not stampede the survivors;
//!    - a lease we thought we held but the store gives to another is
//!      revoked at once (our writes are fenced anyway).
//!
//! Two safety rules keep a confused node from stealing: before the view is
//! *settled* (every known peer linked, or `dead_after` since start) only
//! free, released or own-older leases are taken; and a node that sees at
//! most half of the known members alive (the minority side of a partition)
//! takes nothing from a member it believes dead. Neither rule is needed for
//! safety — the lease epoch in the store fences every write — but they keep
//! shards from ping-ponging.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use meshmail_storage::Database;
use meshmail_storage::model::nodes::{self, Lease};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast};

use crate::backoff::BackoffConfig;
use crate::cluster::Cluster;
use crate::events::NodeEvent;
use crate::identity::NodeId;
use crate::leases::{Incarnation, LeaseManager, SCAN_PAGE};
use crate::membership::{MemberEvent, Membership, MembershipConfig, Status};
use crate::placement::{self, NodeKey};
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

impl std::str::FromStr for Seed {
    type Err = String;
    fn from_str(s: &str) -> Result<Seed, String> {
        let (name, addr) = s
            .split_once('@')
            .ok_or_else(|| format!("seed {s:?}: expected NAME@HOST:PORT (e.g. node-1@127.0.0.1:7410)"))?;
        Ok(Seed {
            id: NodeId::new(name).map_err(|e| e.to_string())?,
            addr: addr.parse().map_err(|e| format!("seed {s:?}: {e}"))?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub seeds: Vec<Seed>,
    /// The mesh address other nodes should dial to reach this one.
    pub advertise: Option<SocketAddr>,
    pub membership: MembershipConfig,
    pub tick: Duration,
    /// Lease changes (acquisitions, and separately releases) per round.
    pub moves_per_round: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            seeds: Vec::new(),
            advertise: None,
            membership: MembershipConfig::new(
                Duration::from_secs(1),
                Duration::from_secs(6),
                BackoffConfig::new(Duration::from_millis(200), Duration::from_secs(5)),
            ),
            tick: Duration::from_millis(250),
            moves_per_round: 128,
        }
    }
}

/// One member as this node sees it (for `/status`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberView {
    pub node: String,
    pub generation: u64,
    pub addr: Option<String>,
    /// "up" or "down": the QUIC link (and its ractor session) right now.
    pub link: String,
    /// "alive", "suspect" or "dead", or "self".
    pub status: String,
    pub draining: bool,
}

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
    wake: Notify,
    /// What to do when superseded (the node exits; tests may record it).
    on_superseded: Box<dyn Fn() + Send + Sync>,
    superseded: std::sync::atomic::AtomicBool,
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
                if s.id.as_str() == self.shared.me.name {
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
        let mut dialing: BTreeSet<NodeId> = BTreeSet::new();
        let (dial_done_tx, mut dial_done) = tokio::sync::mpsc::unbounded_channel::<NodeId>();
        loop {
            let now = Instant::now();
            if let Some(rx) = events.as_mut() {
                drain_events(rx, &mut membership, now);
            }
            for e in membership.tick(now) {
                log_member_event(&e);
            }
            while let Ok(id) = dial_done.try_recv() {
                dialing.remove(&id);
            }
            if let Some(endpoint) = &shared.endpoint
                && !endpoint.is_partitioned()
            {
                let targets: Vec<NodeId> = shared.directory.lock().expect("directory").keys().cloned().collect();
                for id in membership.dial_plan(&targets, now, &mut rng) {
                    if !dialing.insert(id.clone()) {
                        continue;
                    }
                    let addr = shared.directory.lock().expect("directory").get(&id).copied();
                    let (endpoint, done) = (endpoint.clone(), dial_done_tx.clone());
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
            self.announce(&membership);
            let settled = self.is_settled(&membership, now);
            let converged = match self.balance(&membership, settled).await {
                Ok(changes) => settled && changes == 0,
                Err(e) => {
                    tracing::warn!(error = %e, "mesh: lease round failed; retrying next round");
                    metrics::counter!("meshmail_mesh_lease_round_errors_total").increment(1);
                    false
                }
            };
            self.publish_members(&membership, settled, converged);
            tokio::select! {
                _ = tokio::time::sleep(shared.config.tick) => {}
                _ = shared.wake.notified() => {}
            }
        }
    }

    fn is_settled(&self, membership: &Membership, now: Instant) -> bool {
        if membership.settled(now) {
            return true;
        }
        let dir = self.shared.directory.lock().expect("directory");
        dir.keys()
            .all(|id| matches!(membership.status(id), Some((_, Status::Up))))
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
                && let Some((generation, Status::Up)) = membership.status(&id)
            {
                let mut msg = ANNOUNCE_TAG.to_vec();
                msg.extend_from_slice(&body);
                cluster.cast(&inc.name, generation, msg);
            }
        }
    }

    /// One round of lease changes; see the module doc. Returns how many
    /// leases it changed.
    async fn balance(&self, membership: &Membership, settled: bool) -> Result<usize, meshmail_storage::StorageError> {
        let shared = &self.shared;
        self.check_superseded().await?;
        let owners = self.scan().await?;
        let live = membership.live_set();
        let draining = shared.peers_draining.lock().expect("draining").clone();
        let me_draining = self.draining();
        let mut nodes: Vec<NodeKey> = live
            .nodes()
            .into_iter()
            .filter(|k| !draining.contains_key(&k.name))
            .filter(|k| !(me_draining && k.name == shared.me.name))
            .collect();
        nodes.sort();
        let known = shared.directory.lock().expect("directory").len() + 1;
        let alive = live.nodes().len();
        let quorum = alive * 2 > known;
        metrics::gauge!("meshmail_mesh_members_alive").set(alive as f64);
        metrics::gauge!("meshmail_mesh_members_known").set(known as f64);

        // Lost: the store names another holder than us.
        for lease in shared.leases.held() {
            let current = owners.get(lease.shard as usize).cloned().flatten();
            if !current.as_ref().is_some_and(|c| shared.me.holds(c)) {
                tracing::warn!(
                    shard = lease.shard,
                    ?current,
                    "mesh: lease lost; no longer serving the shard"
                );
                shared.host.revoke(lease.shard);
                let _ = shared.leases.release(lease.shard).await;
                metrics::counter!("meshmail_lease_changes_total", "kind" => "lost").increment(1);
            }
        }

        let me_key = shared.me.key();
        let mut releases = 0;
        let mut acquires = 0;
        for (shard, lease) in owners.iter().enumerate() {
            let shard = shard as u32;
            let placed_here = placement::owner(shard, &nodes) == Some(&me_key);
            let ours = lease.as_ref().is_some_and(|l| shared.me.holds(l));
            if ours && !placed_here {
                if releases >= shared.config.moves_per_round {
                    continue;
                }
                releases += 1;
                shared.host.drain(shard).await;
                shared.leases.release(shard).await.map_err(into_storage)?;
                tracing::debug!(shard, "mesh: lease handed over");
                continue;
            }
            if ours || !placed_here || acquires >= shared.config.moves_per_round {
                continue;
            }
            let takeable = match lease {
                None => true,
                Some(l) if l.released => true,
                Some(l) if l.node == shared.me.name => l.generation < shared.me.generation,
                Some(l) => settled && quorum && !live.contains(&l.node, l.generation),
            };
            if !takeable {
                continue;
            }
            match shared.leases.acquire(shard, &live).await {
                Ok(l) => {
                    acquires += 1;
                    shared.host.grant(&l).await;
                    let mut view = shared.view.write().expect("view");
                    view.owners[shard as usize] = Some(l);
                }
                Err(e) => tracing::debug!(shard, error = %e, "mesh: lease not taken"),
            }
        }
        if acquires > 0 || releases > 0 {
            tracing::info!(
                acquired = acquires,
                released = releases,
                held = shared.leases.held().len(),
                "mesh: shard leases changed"
            );
            // More may be due: do not wait a whole tick.
            shared.wake.notify_one();
        }
        metrics::gauge!("meshmail_shards_owned").set(shared.leases.held().len() as f64);
        Ok(acquires + releases)
    }

    /// A newer incarnation of this node's name started (this process was
    /// paused, or partitioned, while a supervisor started a successor): stop
    /// serving and end the process. Its writes are fenced anyway; exiting
    /// makes that visible and frees its sockets.
    async fn check_superseded(&self) -> Result<(), meshmail_storage::StorageError> {
        let shared = &self.shared;
        let newest = shared
            .db
            .read("node_generation", |txn| async move { nodes::list(&txn).await })
            .await?
            .into_iter()
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
        Ok(())
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
            link: "self".into(),
            status: "self".into(),
            draining: self.draining(),
        }];
        for (id, addr) in &dir {
            let (generation, status) = membership.status(id).unwrap_or((0, Status::Down));
            members.push(MemberView {
                node: id.to_string(),
                generation,
                addr: Some(addr.to_string()),
                link: if status == Status::Up { "up" } else { "down" }.into(),
                status: match status {
                    Status::Up | Status::Down => "alive",
                    Status::Suspect => "suspect",
                    Status::Dead => "dead",
                }
                .into(),
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

fn drain_events(rx: &mut broadcast::Receiver<NodeEvent>, membership: &mut Membership, now: Instant) {
    loop {
        match rx.try_recv() {
            Ok(NodeEvent::NodeUp { id, generation, .. }) => {
                for e in membership.link_up(&id, generation, now) {
                    log_member_event(&e);
                }
            }
            Ok(NodeEvent::NodeDown { id, generation, .. }) => {
                for e in membership.link_down(&id, generation, now) {
                    log_member_event(&e);
                }
            }
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "mesh: membership lagged behind link events");
            }
            Err(_) => return,
        }
    }
}

fn log_member_event(e: &MemberEvent) {
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
            tracing::warn!(peer = %id, generation = g, "mesh: member dead");
            "dead"
        }
    };
    metrics::counter!("meshmail_mesh_member_events_total", "kind" => kind).increment(1);
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
