//! The chaos run: a local mesh and a load (from meshmail-soak), hard kills
//! and soft faults on their own random schedules, a recovery measurement
//! for each fault, and the shared end checks.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meshmail_mesh::status::{LinkState, NodeStatus};
use meshmail_soak::checks::Check;
use meshmail_soak::cluster::LocalMesh;
use meshmail_soak::harness::{EndResult, Harness};
use rand::Rng;
use serde::Serialize;

use crate::netns::Netns;
use crate::outbound::{OutboundDriver, OutboundFindings, OutboundRig};
use crate::prepare::{Prepared, prepare};
use crate::scenario::Scenario;
use crate::schedule::{FaultKind, Planned};

#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub t_s: f64,
    pub unix_ms: u64,
    pub kind: String,
    pub node: String,
    pub generation: u64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    /// kill | pause | link_drop | partition
    pub kind: String,
    pub node: String,
    pub t_s: f64,
    /// None: not recovered within the limit (or not measurable: see `note`).
    pub seconds: Option<f64>,
    pub note: String,
}

#[derive(Debug, Serialize)]
pub struct RunOutput {
    pub scenario: Scenario,
    pub seed: u64,
    /// The planned schedule (what `--seed` reproduces); `actions` say what ran.
    pub schedule: Vec<Planned>,
    pub actions: Vec<Action>,
    pub recoveries: Vec<Recovery>,
    pub end: EndResult,
    pub checks: Vec<Check>,
    pub plot_notes: Vec<String>,
    /// The outbound checks' findings, when the scenario has `[outbound]`.
    pub outbound: Option<OutboundFindings>,
    /// "netns" when network faults ran in namespaces, "transport" otherwise.
    pub network: String,
    /// RSS figures from the sampler (the comparable summary's memory).
    pub memory: crate::summary::Memory,
    /// What the clock jumps showed, when there were any.
    pub skew: Option<crate::clock_skew::SkewFindings>,
    /// The merged timeline (written to events.ndjson, not into report.json).
    #[serde(skip)]
    pub events: Vec<meshmail_soak::events::MeshEvent>,
}

/// Which nodes are serving right now (running and not paused), by slot:
/// what the recovery pollers compare against.
type View = Arc<Mutex<Vec<Option<(String, u64, String)>>>>;

/// How long a node must have run before it is picked for a fault.
const MIN_AGE: Duration = Duration::from_secs(1);
/// A newcomer's start grace (`meshmail_mesh::membership::SETTLE_MIN`).
const START_GRACE: Duration = Duration::from_secs(3);

pub(crate) struct Run {
    pub(crate) h: Harness,
    view: View,
    pub(crate) plan: Vec<Planned>,
    pub(crate) actions: Vec<Action>,
    recoveries: Vec<tokio::task::JoinHandle<Recovery>>,
    pub(crate) isolated_until: Vec<Option<Instant>>,
    pub(crate) restarts: Vec<(Instant, usize, u32)>,
    /// Upgrades that could not be injected when planned (too many nodes
    /// down), tried again at these times.
    pub(crate) deferred: Vec<(Instant, Planned)>,
    /// `[upgrade]`'s end checks (see `upgrade.rs`).
    pub(crate) upgrade_checks: Vec<Check>,
    pub(crate) resumes: Vec<(Instant, usize)>,
    /// Network faults to lift: (when, node, what, recover as).
    pub(crate) heals: Vec<(Instant, usize, FaultKind)>,
    /// CPU starvations to end: (when, node, the starvation).
    pub(crate) starving: Vec<(Instant, usize, crate::starve::Starvation)>,
    /// When each SIGKILL was sent: (instant, node, seconds into the run).
    pub(crate) kill_times: Vec<(Instant, usize, f64)>,
    /// Their write gaps, measured before the load is stopped and dropped.
    gaps: Vec<Recovery>,
    /// Store faults to lift (lock, disk full, read-only blobs).
    pub(crate) store_faults: Vec<crate::inject::StoreOutage>,
    /// The run's FoundationDB cluster (`[store] kind = "fdb"`), for the
    /// `fdb_kill` and `fdb_outage` faults.
    pub(crate) fdb: Option<std::sync::Arc<tokio::sync::Mutex<meshmail_storage::fdb_local::LocalFdb>>>,
    /// SMTP refusals the load saw during store faults, by fault kind.
    pub(crate) outage_refusals: std::collections::BTreeMap<&'static str, u64>,
    /// Clock jumps in progress, and what the finished ones showed.
    pub(crate) clock_jumps: Vec<crate::clock_skew::Jump>,
    pub(crate) skew: crate::clock_skew::SkewFindings,
    limit: Duration,
    unexpected_exits: u64,
    outbound: Option<(OutboundRig, Option<OutboundDriver>)>,
    outbound_findings: Option<OutboundFindings>,
    /// Namespace faults fall back to the transport's partition endpoint.
    pub(crate) transport_fallback: bool,
    /// Restarted nodes not yet linked to every serving peer, when the
    /// scenario counts them as down (`[kills] joining_counts_as_down`).
    joining: Option<Arc<Vec<AtomicBool>>>,
    /// Last, so the nodes (in `h`) are killed before their namespaces go.
    pub(crate) netns: Option<Netns>,
}

impl Run {
    /// The client-observed write gap of every kill (see `write_gap.rs`),
    /// as recoveries of kind `write_gap`.
    fn write_gaps(&self) -> Vec<Recovery> {
        let Some(load) = &self.h.load else { return Vec::new() };
        let acks = crate::write_gap::Acks::new(&load.shared.acked_at.lock().expect("acked_at"));
        self.kill_times
            .iter()
            .map(|(at, i, t_s)| {
                let seconds = acks.gap(*at);
                Recovery {
                    kind: "write_gap".into(),
                    node: self.h.mesh.slots[*i].addrs.name.clone(),
                    t_s: *t_s,
                    seconds,
                    note: if seconds.is_none() {
                        "no account written both before and after the kill".into()
                    } else {
                        String::new()
                    },
                }
            })
            .collect()
    }

    /// Calls a fault endpoint of node `i`; records the fault (or why the
    /// call failed) and says whether it was injected.
    pub(crate) async fn post_fault(&mut self, i: usize, path: &str, kind: &str, detail: String) -> bool {
        let http = self.h.mesh.slots[i].addrs.http.clone();
        match meshmail_soak::http::post(&http, path, Duration::from_secs(3)).await {
            Ok(_) => {
                self.record(kind, i, detail);
                true
            }
            Err(e) => {
                self.record("fault_error", i, format!("{path}: {e}"));
                false
            }
        }
    }

    pub(crate) fn record(&mut self, kind: &str, i: usize, detail: String) {
        let s = &self.h.mesh.slots[i];
        let (node, generation) = (s.addrs.name.clone(), s.generation.unwrap_or(0));
        eprintln!(
            "chaos {:>7.1}s {kind} {node} (gen {generation}) {detail}",
            self.h.elapsed_s()
        );
        self.h.events.note(kind, &node, generation, &detail);
        self.actions.push(Action {
            t_s: self.h.elapsed_s(),
            unix_ms: meshmail_soak::events::unix_ms(),
            kind: kind.into(),
            node,
            generation,
            detail,
        });
    }

    pub(crate) fn set_view(&self, i: usize) {
        let s = &self.h.mesh.slots[i];
        self.view.lock().expect("view")[i] = (s.is_running() && !s.paused)
            .then(|| (s.addrs.name.clone(), s.generation.unwrap_or(0), s.addrs.http.clone()));
    }

    /// Nodes killed, paused or partitioned right now.
    pub(crate) fn down(&self, now: Instant) -> usize {
        (0..self.h.mesh.slots.len())
            .filter(|&i| {
                let s = &self.h.mesh.slots[i];
                !s.is_running() || s.paused || self.isolated_until[i].is_some_and(|t| t > now) || self.is_joining(i)
            })
            .count()
    }

    fn is_joining(&self, i: usize) -> bool {
        self.joining.as_ref().is_some_and(|j| j[i].load(Ordering::Relaxed))
    }

    /// With `joining_counts_as_down`: node `i` was just restarted; it counts
    /// as down until it has joined (see [`joined`]).
    fn watch_join(&self, i: usize) {
        let Some(joining) = self.joining.clone() else { return };
        joining[i].store(true, Ordering::Relaxed);
        let (view, limit) = (self.view.clone(), self.limit);
        let s = &self.h.mesh.slots[i];
        let (node, http) = (s.addrs.name.clone(), s.addrs.http.clone());
        tokio::spawn(async move {
            // The server's start grace (`SETTLE_MIN`, 3 s): until it is over
            // a newcomer takes no lease of a peer that dies meanwhile (it
            // cannot tell a dead peer from one not linked yet), so a kill in
            // it waits for the grace, not for the survivors' detection.
            tokio::time::sleep(START_GRACE).await;
            // Timed out: stop guarding rather than skip every later kill.
            wait_until(Instant::now(), limit, || {
                joined(view.clone(), node.clone(), http.clone())
            })
            .await;
            joining[i].store(false, Ordering::Relaxed);
        });
    }

    /// Node `named`, or else the `pick`-th (modulo) node that is running,
    /// not paused and not partitioned, and has run for at least
    /// [`MIN_AGE`]: an incarnation killed within milliseconds of its start
    /// has no event stream anyone could observe. None: no such node.
    pub(crate) fn pick_serving(&self, now: Instant, named: Option<usize>, pick: u64) -> Option<usize> {
        let ok: Vec<usize> = (0..self.h.mesh.slots.len())
            .filter(|&i| {
                let s = &self.h.mesh.slots[i];
                s.is_running()
                    && !s.paused
                    && self.isolated_until[i].is_none_or(|t| t <= now)
                    && s.started_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= MIN_AGE)
            })
            .collect();
        match named {
            Some(i) => ok.contains(&i).then_some(i),
            None => (!ok.is_empty()).then(|| ok[(pick % ok.len() as u64) as usize]),
        }
    }

    pub(crate) fn poll_shards(&mut self, kind: &str, i: usize, from: Instant) {
        let (view, limit, t_s) = (self.view.clone(), self.limit, self.h.elapsed_s());
        let (kind, node) = (kind.to_string(), self.h.mesh.slots[i].addrs.name.clone());
        self.recoveries.push(tokio::spawn(async move {
            let seconds = wait_until(from, limit, || shards_served(view.clone())).await;
            Recovery {
                kind,
                node,
                t_s,
                seconds,
                note: String::new(),
            }
        }));
    }

    pub(crate) fn poll_links(&mut self, kind: &str, i: usize, from: Instant) {
        let (view, limit, t_s) = (self.view.clone(), self.limit, self.h.elapsed_s());
        let s = &self.h.mesh.slots[i];
        let (kind, node, http) = (kind.to_string(), s.addrs.name.clone(), s.addrs.http.clone());
        self.recoveries.push(tokio::spawn(async move {
            let seconds = wait_until(from, limit, || links_up(view.clone(), node.clone(), http.clone())).await;
            Recovery {
                kind,
                node,
                t_s,
                seconds,
                note: String::new(),
            }
        }));
    }
}

/// Polls `done` every 100 ms from now until it says yes; returns seconds
/// since `from`, None on timeout.
async fn wait_until<F, Fut>(from: Instant, limit: Duration, mut done: F) -> Option<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // A partition's recovery counts from its heal, which may lie ahead:
    // polling before it would find the links not yet dropped and say 0 s.
    if let Some(ahead) = from.checked_duration_since(Instant::now()) {
        tokio::time::sleep(ahead).await;
    }
    while from.elapsed() < limit {
        if done().await {
            return Some(from.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

async fn status(http: &str) -> Option<NodeStatus> {
    let body = meshmail_soak::http::get(http, "/status", Duration::from_millis(700))
        .await
        .ok()?;
    serde_json::from_str(&body).ok()
}

/// Every shard is served: the serving nodes' `shards_owned` add up to
/// `shard_count` exactly (more means two owners still overlap).
async fn shards_served(view: View) -> bool {
    let nodes: Vec<String> = view
        .lock()
        .expect("view")
        .iter()
        .flatten()
        .map(|n| n.2.clone())
        .collect();
    let (mut owned, mut count, mut answered) = (0u64, 0u64, 0);
    for http in nodes {
        if let Some(st) = status(&http).await {
            answered += 1;
            owned += st.shards_owned;
            count = count.max(u64::from(st.shard_count));
        }
    }
    answered > 0 && count > 0 && owned == count
}

/// A restarted node has joined: linked to every serving peer, its view
/// settled (until then it takes no lease of a peer it cannot see, so a peer
/// killed meanwhile waits for the newcomer's settle time), serving shards
/// of its own, and every shard served.
async fn joined(view: View, node: String, http: String) -> bool {
    if !links_up(view.clone(), node, http.clone()).await {
        return false;
    }
    let Some(st) = status(&http).await else {
        return false;
    };
    st.settled && st.shards_owned > 0 && shards_served(view).await
}

/// The node's `/status` shows every serving peer linked up in its current generation.
async fn links_up(view: View, node: String, http: String) -> bool {
    let peers: Vec<(String, u64)> = view
        .lock()
        .expect("view")
        .iter()
        .flatten()
        .filter(|p| p.0 != node)
        .map(|p| (p.0.clone(), p.1))
        .collect();
    let Some(st) = status(&http).await else {
        return false;
    };
    peers.iter().all(|(name, generation)| {
        st.members
            .iter()
            .any(|m| &m.node == name && m.link == LinkState::Up && m.generation == *generation)
    })
}

impl Run {
    fn new(
        scn: &Scenario,
        seed: u64,
        mesh: LocalMesh,
        netns: Option<Netns>,
        outbound: Option<(OutboundRig, Option<OutboundDriver>)>,
    ) -> Run {
        let n = scn.nodes;
        Run {
            h: Harness::new(mesh),
            view: Arc::new(Mutex::new(vec![None; n])),
            plan: crate::schedule::plan(scn, seed),
            actions: Vec::new(),
            recoveries: Vec::new(),
            isolated_until: vec![None; n],
            restarts: Vec::new(),
            upgrade_checks: Vec::new(),
            deferred: Vec::new(),
            resumes: Vec::new(),
            heals: Vec::new(),
            starving: Vec::new(),
            kill_times: Vec::new(),
            gaps: Vec::new(),
            store_faults: Vec::new(),
            fdb: None,
            outage_refusals: Default::default(),
            clock_jumps: Vec::new(),
            skew: Default::default(),
            limit: Duration::from_secs_f64(scn.recovery_limit_s),
            unexpected_exits: 0,
            outbound,
            outbound_findings: None,
            transport_fallback: netns.is_none(),
            joining: scn
                .kills
                .joining_counts_as_down
                .then(|| Arc::new((0..n).map(|_| AtomicBool::new(false)).collect())),
            netns,
        }
    }
}

/// The run's checks: the fault counts against the scenario's minimums,
/// then the harness's end checks, then recovery bounds and findings.
fn end_checks(scn: &Scenario, r: &Run, end: &EndResult, recoveries: &[Recovery]) -> Vec<Check> {
    let count = |k: &str| r.actions.iter().filter(|a| a.kind == k).count() as u64;
    let mut checks = end.checks.clone();
    checks.insert(0, Check::at_least("kills", count("kill"), scn.checks.min_kills));
    checks.insert(
        1,
        Check::at_least("link_drops", count("link_drop"), scn.checks.min_link_drops),
    );
    checks.insert(2, Check::info("partitions", count("partition"), ""));
    checks.insert(3, Check::info("pauses", count("pause"), ""));
    for k in [
        FaultKind::NetnsPartition,
        FaultKind::NetnsOneway,
        FaultKind::NetnsNetem,
        FaultKind::NetnsBandwidth,
        FaultKind::Starve,
    ] {
        if count(k.name()) > 0 || r.plan.iter().any(|p| p.kind == k) {
            let what = if k == FaultKind::Starve {
                "CPU starvations injected"
            } else {
                "namespace faults injected"
            };
            checks.push(Check::info(k.name(), count(k.name()), what));
        }
    }
    // Each store fault must have been answered with refusals (4xx), never
    // ridden out by acknowledging what was not kept (the read-back checks that).
    for (kind, line) in [
        ("store_lock", "store_outage_refusals"),
        ("disk_full", "disk_full_refusals"),
        ("blob_readonly", "blob_readonly_refusals"),
        ("fdb_outage", "fdb_outage_refusals"),
    ] {
        if count(kind) > 0 {
            let refused = r.outage_refusals.get(kind).copied().unwrap_or(0);
            checks.push(Check::at_least(line, refused, 1));
        }
    }
    if count("fdb_kill") > 0 || scn.checks.min_fdb_kills > 0 {
        checks.push(Check::at_least(
            "fdb_kills",
            count("fdb_kill"),
            scn.checks.min_fdb_kills,
        ));
    }
    if count("clock_jump") > 0 {
        checks.extend(crate::clock_skew::checks(&r.skew));
    }
    checks.push(Check::info(
        "skipped",
        count("skipped"),
        "planned faults not injected (too many nodes down, or their node was)",
    ));
    checks.push(Check::at_least("acked", end.golden.acked, scn.checks.min_acked));
    checks.push(Check::zero(
        "recovery_timeouts",
        recoveries
            .iter()
            .filter(|r| r.seconds.is_none() && r.note.is_empty())
            .count() as u64,
        format!("not recovered within {} s", scn.recovery_limit_s),
    ));
    for (class, limit) in &scn.checks.max_p99_s {
        let kinds = crate::summary::RECOVERY_CLASSES
            .iter()
            .find(|(c, _)| c == class)
            .map_or(&[][..], |(_, k)| *k);
        let p = crate::summary::Percentiles::of(recoveries, kinds);
        checks.push(Check {
            name: format!("{class}_p99_s"),
            value: format!("{:.3}", p.p99_s),
            ok: p.n > 0 && p.p99_s <= *limit,
            note: format!(
                "at most {limit} s (p50 {:.3} s, max {:.3} s, n {})",
                p.p50_s, p.max_s, p.n
            ),
        });
    }
    checks.push(Check::zero(
        "unexpected_exits",
        r.unexpected_exits,
        "nodes that died without being killed",
    ));
    checks.push(Check::zero(
        "fault_errors",
        count("fault_error"),
        "fault endpoint calls that failed (404: the node was not built with --features meshmail-node/fault-hooks)",
    ));
    if let Some(f) = &r.outbound_findings {
        checks.extend(crate::outbound::checks(&scn.outbound, f));
    }
    checks.extend(r.upgrade_checks.iter().cloned());
    checks
}

/// Runs a scenario to the end; the report is written by the caller.
/// With `attach`, against that mesh instead of one started here (see `attach.rs`).
pub async fn run(
    mut scn: Scenario,
    out: &Path,
    bin: &Path,
    attach: Option<&meshmail_soak::attached::ClusterFile>,
) -> anyhow::Result<RunOutput> {
    let seed = scn.seed.unwrap_or_else(|| rand::rng().random());
    let Prepared {
        mesh,
        netns,
        network,
        outbound,
        store,
    } = prepare(&mut scn, out, bin, attach).await?;
    let mut r = Run::new(&scn, seed, mesh, netns, outbound);
    r.fdb = store.as_ref().map(|rig| rig.fdb.clone());
    eprintln!("chaos: seed {seed}, {} faults planned", r.plan.len());
    let result = drive(&scn, &mut r, out).await;
    // Whatever happened, no node outlives the run, nor its store.
    r.h.mesh.stop_all().await;
    if let Some(rig) = store {
        rig.stop().await;
    }
    let end = result?;
    let plot_notes = r.h.plots(out);
    let memory = crate::summary::Memory::of(&r.h.samples.lock().expect("samples").procs, &end.memory_trend_pct);
    let mut recoveries = Vec::new();
    for t in r.recoveries.drain(..) {
        if let Ok(rec) = t.await {
            recoveries.push(rec);
        }
    }
    recoveries.append(&mut r.gaps);
    let checks = end_checks(&scn, &r, &end, &recoveries);
    let count = |k: &str| r.actions.iter().filter(|a| a.kind == k).count() as u64;
    let skew = (count("clock_jump") > 0).then(|| r.skew.clone());
    Ok(RunOutput {
        scenario: scn,
        seed,
        schedule: std::mem::take(&mut r.plan),
        actions: r.actions,
        recoveries,
        end,
        checks,
        plot_notes,
        outbound: r.outbound_findings.take(),
        network,
        memory,
        skew,
        events: r.h.events.snapshot(),
    })
}

async fn drive(scn: &Scenario, r: &mut Run, out: &Path) -> anyhow::Result<EndResult> {
    for i in 0..scn.nodes {
        r.h.start(i).await?;
        r.record("start", i, String::new());
        r.set_view(i);
    }
    let run_for = Duration::from_secs_f64(scn.warmup_s + scn.duration_s + scn.recovery_limit_s + 30.0);
    // `fault_at` is a fraction of the fault phase in a scenario, of the whole load run in soak.
    let mut load = scn.load.clone();
    load.fault_at = (scn.warmup_s + scn.load.fault_at * scn.duration_s) / run_for.as_secs_f64();
    r.h.start_load(load, run_for);
    r.h.start_sampler(Duration::from_secs_f64(scn.sample_every_s.max(0.2)));
    if let Some((_, driver)) = &mut r.outbound {
        let targets = r.h.mesh.slots.iter().map(|s| s.addrs.submission.clone()).collect();
        *driver = Some(OutboundDriver::start(&scn.outbound, targets, scn.load.accounts));
    }
    tokio::time::sleep(Duration::from_secs_f64(scn.warmup_s)).await;
    r.h.actors_start = r.h.quiet_point().await;
    eprintln!(
        "chaos: warm-up done, quiet point taken; faults for {} s",
        scn.duration_s
    );

    let start = Instant::now();
    let fault_end = start + Duration::from_secs_f64(scn.duration_s);
    let max_down = (scn.nodes.saturating_sub(1) / 2).max(1);
    let mut next = 0;
    loop {
        let now = Instant::now();
        if now >= fault_end
            && r.restarts.is_empty()
            && r.resumes.is_empty()
            && r.heals.is_empty()
            && r.starving.is_empty()
            && r.store_faults.is_empty()
            && r.clock_jumps.is_empty()
            && r.deferred.is_empty()
        {
            break;
        }
        // A node that dies on its own is a finding; bring it back like a supervisor would.
        for i in 0..scn.nodes {
            if let Some(status) = r.h.mesh.crashed(i) {
                r.unexpected_exits += 1;
                r.record("crashed", i, status);
                r.set_view(i);
                r.restarts.push((now + Duration::from_secs(1), i, 0));
            }
        }
        let due: Vec<_> = r.restarts.iter().copied().filter(|x| x.0 <= now).collect();
        r.restarts.retain(|x| x.0 > now);
        for (_, i, tries) in due {
            match r.h.start(i).await {
                Ok(_) => {
                    r.record("restart", i, String::new());
                    r.set_view(i);
                    r.watch_join(i);
                }
                Err(e) if tries < 10 => {
                    r.record("restart_failed", i, format!("{e:#}"));
                    r.restarts.push((Instant::now() + Duration::from_secs(1), i, tries + 1));
                }
                Err(e) => return Err(e.context("node would not restart")),
            }
        }
        let due: Vec<_> = r.resumes.iter().copied().filter(|x| x.0 <= now).collect();
        r.resumes.retain(|x| x.0 > now);
        for (_, i) in due {
            r.h.mesh.resume(i)?;
            r.record("resume", i, "SIGCONT".into());
            r.set_view(i);
            r.poll_shards("pause", i, Instant::now());
        }
        r.heal_due(now).await;
        while now < fault_end && next < r.plan.len() && start + Duration::from_secs_f64(r.plan[next].t_s) <= now {
            let p = r.plan[next].clone();
            next += 1;
            r.inject(&p, now, max_down).await?;
        }
        let due: Vec<Planned> = r.deferred.iter().filter(|d| d.0 <= now).map(|d| d.1.clone()).collect();
        r.deferred.retain(|d| d.0 > now);
        for p in due {
            r.inject(&p, now, max_down).await?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "chaos: fault phase over; waiting for recoveries, then settling {} s",
        scn.settle_s
    );
    let until = Instant::now() + r.limit;
    while r.recoveries.iter().any(|t| !t.is_finished()) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if let Some((rig, Some(mut driver))) = r.outbound.take() {
        driver.stop().await;
        eprintln!("chaos: outbound load stopped; waiting for the queue to drain to the sink");
        let limit = Duration::from_secs_f64(scn.outbound.drain_limit_s);
        let drain_s = crate::outbound::wait_drained(&driver, &rig.sink, limit).await;
        // Attempts already under way when the last message arrived may
        // still deliver a duplicate: give them a moment to be counted.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let fates = std::mem::take(&mut driver.submitted.lock().expect("submitted").fates);
        let deliveries = rig.sink.deliveries();
        let mut f = crate::outbound::analyse(&fates, &deliveries);
        f.drain_s = drain_s;
        let st = &rig.sink.stats;
        f.sink_connections = st.connections_total.load(Ordering::Relaxed);
        f.sink_connections_peak = st.connections_peak.load(Ordering::Relaxed);
        f.sink_tempfails = st.tempfails.load(Ordering::Relaxed);
        r.outbound_findings = Some(f);
        // The sink stays up (dropped at the end of the run) for whatever
        // the nodes still send while the end checks run.
        r.outbound = Some((rig, None));
    }
    r.gaps = r.write_gaps();
    if scn.upgrade.enabled {
        let upgrades = r.actions.iter().filter(|a| a.kind == "upgrade").count() as u64;
        r.upgrade_checks = crate::upgrade::switched_check(&scn.upgrade, &r.h.mesh, upgrades).await;
    }
    r.h.finish(Duration::from_secs_f64(scn.settle_s), out).await
}
