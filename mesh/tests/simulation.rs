//! Deterministic simulation of membership driving shard leases.
//!
//! 3–5 nodes, each with a [`Membership`] and a [`LeaseManager`] on its own
//! handle of ONE SQLite file, go through a random schedule of kills,
//! restarts (a new generation from the store), partitions and heals, in
//! steps of simulated time. One task, a fixed order, one seeded RNG: a seed
//! replays exactly. `MESHMAIL_SIM_SEED=<seed>` runs that one seed,
//! `MESHMAIL_SIM_SEEDS=<n>` seeds 1..=n instead of the default five.
//!
//! Every node decides each step with [`balance::decide`], the very function
//! the runtime's balance round calls, and carries the decision out with the
//! [`LeaseManager`] as the runtime does (batched acquisitions included).
//! Linked peers hear each other every step (the heartbeat); a killed node
//! goes silent at once while its links die only later, as QUIC's do.
//!
//! Checked after every step against the leases in the store:
//! - fencing: every incarnation (running, or killed and kept as a zombie,
//!   like a paused process waking up) writes each shard it believes it
//!   holds through `check_lease`; the write commits if and only if the store
//!   names it, at that epoch, as the unreleased holder, so at most one
//!   incarnation writes a shard per step;
//! - a lease changes hands only with a higher epoch, and never goes back.
//!
//! After the schedule, partitions heal, killed nodes restart (a minority
//! takes nothing over, by the quorum rule), and the nodes must settle with
//! every shard held by the node placement picks among them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meshmail_mesh::backoff::BackoffConfig;
use meshmail_mesh::balance;
use meshmail_mesh::identity::NodeId;
use meshmail_mesh::leases::{Incarnation, LeaseError, LeaseManager};
use meshmail_mesh::membership::{Membership, MembershipConfig, Status};
use meshmail_mesh::placement::{self, NodeKey};
use meshmail_storage::Database;
use meshmail_storage::kv::sqlite::{Durability, SqliteBackend, SqliteOptions};
use meshmail_storage::model::nodes::{self, Lease};
use proptest::prelude::{Rng, RngExt};
use proptest::test_runner::{RngAlgorithm, TestRng};

const SHARDS: u32 = 16;
const STEP: Duration = Duration::from_millis(250);
const STEPS: u64 = 200;
/// Steps allowed after the schedule for everything to settle: dead_after,
/// a few capped backoffs and the bounded acquisitions fit well inside.
const SETTLE_STEPS: u64 = 120;
const MAX_PER_STEP: usize = 4;
const DEFAULT_SEEDS: u64 = 5;

type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn config() -> MembershipConfig {
    MembershipConfig::new(
        Duration::from_secs(1),
        Duration::from_secs(3),
        BackoffConfig::new(Duration::from_millis(200), Duration::from_secs(2)),
    )
}

/// A running incarnation.
struct Running {
    inc: Incarnation,
    db: Database,
    membership: Membership,
    leases: LeaseManager,
}

/// A link's down that `observer` (name index, generation) learns of only
/// at step `due`: a killed peer's link dies by idle timeout, not at once.
struct PendingDown {
    due: u64,
    observer: (usize, u64),
    peer: (usize, u64),
}

struct Sim {
    dir: tempfile::TempDir,
    /// The checker's own handle: reads the truth the nodes act on.
    observer: Database,
    rng: TestRng,
    names: Vec<NodeId>,
    nodes: Vec<Option<Running>>,
    /// Killed incarnations that still believe they hold leases.
    zombies: Vec<(Incarnation, Database, LeaseManager)>,
    /// Up links, by name index pair (low, high).
    links: BTreeSet<(usize, usize)>,
    cuts: BTreeSet<(usize, usize)>,
    pending: Vec<PendingDown>,
    step: u64,
    t0: Instant,
    last: BTreeMap<u32, Lease>,
    /// The latest schedule actions, printed with a failure.
    trace: Vec<String>,
    stats: Stats,
}

/// What a run exercised: a schedule that never fences anyone proves little.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    kills: u32,
    cuts: u32,
    owner_changes: u32,
    refused: u32,
    settle_steps: u64,
}

/// `name#generation`, for messages.
fn tag(inc: &Incarnation) -> String {
    format!("{}#{}", inc.name, inc.generation)
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

fn open(dir: &Path) -> Database {
    // No fsync per commit: the simulation kills incarnations, not the
    // machine, and thousands of synced commits would dominate its runtime.
    let mut options = SqliteOptions::new(dir.join("kv.sqlite"));
    options.durability = Durability::Normal;
    let backend = SqliteBackend::open(options).expect("open sqlite");
    Database::new(Arc::new(backend))
}

impl Sim {
    async fn new(seed: u64) -> Result<Sim, String> {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let count = rng.random_range(3..=5usize);
        let names = (0..count)
            .map(|i| NodeId::new(format!("n{i}")).expect("node id"))
            .collect();
        let dir = tempfile::tempdir().map_err(text)?;
        let mut sim = Sim {
            observer: open(dir.path()),
            dir,
            rng,
            names,
            nodes: (0..count).map(|_| None).collect(),
            zombies: Vec::new(),
            links: BTreeSet::new(),
            cuts: BTreeSet::new(),
            pending: Vec::new(),
            step: 0,
            t0: Instant::now(),
            last: BTreeMap::new(),
            trace: Vec::new(),
            stats: Stats::default(),
        };
        for i in 0..count {
            sim.start(i).await?;
        }
        Ok(sim)
    }

    fn now(&self) -> Instant {
        self.t0 + STEP * self.step as u32
    }

    fn log(&mut self, what: String) {
        self.trace.push(format!("step {}: {what}", self.step));
    }

    /// Starts name `i` with the next generation from the store.
    async fn start(&mut self, i: usize) -> Check {
        let db = open(self.dir.path());
        let name = self.names[i].to_string();
        let generation = nodes::register_start(&db, &name, "sim").await.map_err(text)?;
        let inc = Incarnation::new(name, generation);
        self.log(format!("start {}", tag(&inc)));
        self.nodes[i] = Some(Running {
            membership: Membership::new(inc.clone(), config(), self.now()),
            leases: LeaseManager::new(db.clone(), inc.clone(), SHARDS),
            inc,
            db,
        });
        Ok(())
    }

    fn generation(&self, i: usize) -> Option<u64> {
        self.nodes[i].as_ref().map(|r| r.inc.generation)
    }

    /// Tells `observer` that its link to `peer` (at `gen`) went down.
    fn deliver_down(&mut self, observer: usize, peer: usize, generation: u64) {
        let (now, id) = (self.now(), self.names[peer].clone());
        if let Some(r) = self.nodes[observer].as_mut() {
            r.membership.link_down(&id, generation, now);
        }
    }

    fn kill(&mut self, k: usize) {
        let r = self.nodes[k].take().expect("running");
        self.log(format!("kill {}", tag(&r.inc)));
        self.stats.kills += 1;
        for o in 0..self.names.len() {
            if self.links.remove(&pair(k, o)) {
                let observer = (o, self.generation(o).expect("linked nodes run"));
                let (due, peer) = (self.step + self.rng.random_range(0..=4u64), (k, r.inc.generation));
                self.pending.push(PendingDown { due, observer, peer });
            }
        }
        self.zombies.push((r.inc, r.db, r.leases));
    }

    fn cut(&mut self, a: usize, b: usize) {
        self.log(format!("cut {a}-{b}"));
        self.stats.cuts += 1;
        self.cuts.insert(pair(a, b));
        if self.links.remove(&pair(a, b)) {
            let (ga, gb) = (self.generation(a).expect("up"), self.generation(b).expect("up"));
            self.deliver_down(a, b, gb);
            self.deliver_down(b, a, ga);
        }
    }

    /// One random schedule action (most steps do nothing).
    async fn chaos(&mut self) -> Check {
        let n = self.names.len();
        let running: Vec<usize> = (0..n).filter(|&i| self.nodes[i].is_some()).collect();
        let killed: Vec<usize> = (0..n).filter(|&i| self.nodes[i].is_none()).collect();
        let roll = self.rng.random_range(0..100u32);
        match roll {
            0..4 if running.len() > 1 => {
                let k = running[self.rng.random_range(0..running.len())];
                self.kill(k);
            }
            4..10 if !killed.is_empty() => {
                let k = killed[self.rng.random_range(0..killed.len())];
                self.start(k).await?;
            }
            10..13 => {
                // Isolate one node from all others.
                let a = self.rng.random_range(0..n);
                for b in (0..n).filter(|&b| b != a) {
                    self.cut(a, b);
                }
            }
            13..16 => {
                let a = self.rng.random_range(0..n);
                let b = (a + self.rng.random_range(1..n)) % n;
                self.cut(a, b);
            }
            16..21 if !self.cuts.is_empty() => {
                self.log("heal".into());
                self.cuts.clear();
            }
            _ => {}
        }
        Ok(())
    }

    /// Links, failure detection and lease actions of every running node.
    async fn run_nodes(&mut self) -> Check {
        let now = self.now();
        let due: Vec<PendingDown> = self.pending.extract_if(.., |p| p.due <= self.step).collect();
        for p in due {
            let ((o, og), (k, kg)) = (p.observer, p.peer);
            if self.generation(o) == Some(og) {
                self.deliver_down(o, k, kg);
            }
        }
        let n = self.names.len();
        for i in 0..n {
            let Some(r) = self.nodes[i].as_mut() else { continue };
            let rng = &mut self.rng;
            let plan = r.membership.dial_plan(&self.names, now, &mut || rng.next_u64());
            for id in plan {
                let j = self.names.iter().position(|x| *x == id).expect("a seed");
                let key = pair(i, j);
                let Some(gj) = self.generation(j) else { continue };
                if self.cuts.contains(&key) || self.links.contains(&key) {
                    continue;
                }
                let gi = self.generation(i).expect("running");
                self.links.insert(key);
                for (a, b, gb) in [(i, j, gj), (j, i, gi)] {
                    let peer = self.names[b].clone();
                    let r = self.nodes[a].as_mut().expect("running");
                    r.membership.link_up(&peer, gb, now);
                }
            }
        }
        // The heartbeat: both ends of every up link hear each other.
        let links: Vec<(usize, usize)> = self.links.iter().copied().collect();
        for (a, b) in links {
            for (x, y) in [(a, b), (b, a)] {
                let (Some(gy), id) = (self.generation(y), self.names[y].clone()) else {
                    continue;
                };
                if let Some(r) = self.nodes[x].as_mut() {
                    r.membership.heard(&id, gy, now);
                }
            }
        }
        let names = self.names.clone();
        for r in self.nodes.iter_mut().flatten() {
            r.membership.tick(now);
            act(r, now, &names).await.map_err(|e| format!("{}: {e}", tag(&r.inc)))?;
        }
        Ok(())
    }

    async fn leases(&self) -> Result<BTreeMap<u32, Lease>, String> {
        let all = self
            .observer
            .read("sim_leases", |txn| async move {
                nodes::list_leases(&txn, 0, SHARDS as usize).await
            })
            .await
            .map_err(text)?;
        Ok(all.into_iter().map(|l| (l.shard, l)).collect())
    }

    /// The invariants of one step.
    async fn check(&mut self) -> Check {
        let store = self.leases().await?;
        for (shard, now) in &store {
            if let Some(before) = self.last.get(shard) {
                // The epoch never goes back, and a new holder means a new one.
                let same_owner = (&now.node, now.generation) == (&before.node, before.generation);
                let ok = now.epoch > before.epoch || (same_owner && now.epoch == before.epoch);
                ensure!(ok, "shard {shard}: lease went {before:?} -> {now:?}");
                if !same_owner {
                    self.stats.owner_changes += 1;
                }
            }
        }
        self.last = store.clone();

        let mut writers: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let running = self.nodes.iter().flatten().map(|r| (&r.inc, &r.db, &r.leases));
        let zombies = self.zombies.iter().map(|(i, d, l)| (i, d, l));
        for (inc, db, leases) in running.chain(zombies) {
            for held in leases.held() {
                let s = held.shard;
                let expected = store.get(&s).is_some_and(|l| inc.holds(l) && l.epoch == held.epoch);
                let wrote = fenced_write(db, inc, &held, self.step).await;
                let (who, holder) = (tag(inc), store.get(&s));
                let verdict = if wrote { "committed" } else { "was refused" };
                ensure!(
                    wrote == expected,
                    "shard {s}: write by {who} at epoch {} {verdict}, store has {holder:?}",
                    held.epoch
                );
                if wrote {
                    writers.entry(s).or_default().push(who);
                } else {
                    self.stats.refused += 1;
                    // What a fenced shard actor does: stop, forget the lease.
                    leases.release(s).await.map_err(text)?;
                }
            }
        }
        let crowded = writers.iter().find(|(_, w)| w.len() > 1);
        ensure!(crowded.is_none(), "one step, one shard, writers {crowded:?}");
        // A zombie that forgot every lease is inert: let it go.
        self.zombies.retain(|(_, _, l)| !l.held().is_empty());
        Ok(())
    }

    /// Whether every shard is held, unreleased, by the running incarnation
    /// that placement picks among the running names; the first mismatch.
    async fn converged(&self) -> Result<Option<String>, String> {
        let store = self.leases().await?;
        let live: Vec<NodeKey> = self.nodes.iter().flatten().map(|r| r.inc.key()).collect();
        for shard in 0..SHARDS {
            let owner = placement::owner(shard, &live).expect("a running node");
            let running = self.nodes.iter().flatten().map(|r| &r.inc);
            let inc = running.clone().find(|i| i.name == owner.name).expect("running");
            let lease = store.get(&shard);
            if !lease.is_some_and(|l| inc.holds(l)) {
                return Ok(Some(format!("shard {shard} placed on {}, lease {lease:?}", tag(inc))));
            }
        }
        Ok(None)
    }
}

/// One node's balance round: the runtime's decision, carried out the
/// runtime's way (drains are instant here).
async fn act(r: &mut Running, now: Instant, names: &[NodeId]) -> Result<(), LeaseError> {
    let live = r.membership.live_set();
    // The runtime's `is_settled`: long enough since start, or every known
    // peer linked and heard.
    let all_linked = names
        .iter()
        .filter(|n| n.as_str() != r.inc.name)
        .all(|n| r.membership.linked(n) && matches!(r.membership.status(n), Some((_, Status::Up))));
    let settled = r.membership.settled(now) || all_linked;
    let page =
        r.db.read("sim_scan", |txn| async move {
            nodes::list_leases(&txn, 0, SHARDS as usize).await
        })
        .await?;
    let mut owners: Vec<Option<Lease>> = vec![None; SHARDS as usize];
    for l in page {
        let i = l.shard as usize;
        owners[i] = Some(l);
    }
    let held = r.leases.held();
    let none = BTreeSet::new();
    let excluded = BTreeSet::new();
    let members: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    let decision = balance::decide(&balance::Round {
        me: &r.inc,
        owners: &owners,
        held: &held,
        live: &live,
        excluded: &excluded,
        settled,
        grace_over: r.membership.settled(now),
        members: &members,
        known: names.len(),
        moves_per_round: MAX_PER_STEP,
        handing_off: &none,
    });
    for &shard in decision.lost.iter().chain(&decision.release) {
        r.leases.release(shard).await?;
    }
    for answer in r.leases.acquire_many(&decision.acquire, &live).await? {
        match answer {
            // The scan was a snapshot: someone live got there first.
            Ok(_) | Err(LeaseError::HeldBy { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A shard's write transaction, fenced like every real one.
async fn fenced_write(db: &Database, inc: &Incarnation, held: &Lease, step: u64) -> bool {
    let (shard, epoch) = (held.shard, held.epoch);
    let key = format!("sim/shard/{shard}");
    let value = format!("{}#{}@{epoch} step {step}", inc.name, inc.generation);
    let (key, value) = (&key, &value);
    db.run("sim_write", |txn| async move {
        nodes::check_lease(&txn, shard, &inc.name, inc.generation, epoch).await?;
        txn.set(key.as_bytes(), value.as_bytes())
    })
    .await
    .is_ok()
}

async fn run_seed(seed: u64) -> Result<Stats, String> {
    let mut sim = Sim::new(seed).await?;
    let result = async {
        while sim.step < STEPS {
            sim.step += 1;
            sim.chaos().await?;
            sim.run_nodes().await?;
            sim.check().await?;
        }
        sim.log("heal all, restart the killed, schedule over".into());
        sim.cuts.clear();
        for i in 0..sim.names.len() {
            if sim.nodes[i].is_none() {
                sim.start(i).await?;
            }
        }
        let mut last = None;
        for settle in 1..=SETTLE_STEPS {
            sim.step += 1;
            sim.run_nodes().await?;
            sim.check().await?;
            last = sim.converged().await?;
            if last.is_none() {
                sim.stats.settle_steps = settle;
                return Ok(());
            }
        }
        let why = last.unwrap_or_default();
        Err(format!("not converged after {SETTLE_STEPS} steps: {why}"))
    }
    .await;
    result.map(|()| sim.stats).map_err(|e| {
        let tail = sim.trace.len().saturating_sub(25);
        let trace = sim.trace[tail..].join("\n  ");
        format!("step {}: {e}\nlast actions:\n  {trace}", sim.step)
    })
}

#[tokio::test]
async fn membership_drives_leases_through_kills_and_partitions() {
    let seeds: Vec<u64> = match (std::env::var("MESHMAIL_SIM_SEED"), std::env::var("MESHMAIL_SIM_SEEDS")) {
        (Ok(one), _) => vec![one.parse().expect("MESHMAIL_SIM_SEED is a number")],
        (_, Ok(n)) => (1..=n.parse().expect("MESHMAIL_SIM_SEEDS is a number")).collect(),
        _ => (1..=DEFAULT_SEEDS).collect(),
    };
    let mut runs = Vec::new();
    for seed in seeds {
        let started = Instant::now();
        let stats = run_seed(seed)
            .await
            .unwrap_or_else(|e| panic!("simulation seed {seed} failed (replay: MESHMAIL_SIM_SEED={seed}): {e}"));
        println!("seed {seed} ({:.1?}): {stats:?}", started.elapsed());
        runs.push(stats);
    }
    // The schedule must have exercised failover and fencing at all, or the
    // checks passed vacuously.
    let seen = |f: fn(&Stats) -> u32| runs.iter().map(f).sum::<u32>() > 0;
    let exercised = seen(|s| s.kills) && seen(|s| s.cuts) && seen(|s| s.owner_changes) && seen(|s| s.refused);
    assert!(exercised, "the schedule exercised too little: {runs:?}");
}
