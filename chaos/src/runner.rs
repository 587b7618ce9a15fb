//! The chaos run: a local mesh and a load (from meshmail-soak), hard kills
//! and soft faults on their own random schedules, a recovery measurement
//! for each fault, and the shared end checks.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meshmail_soak::checks::Check;
use meshmail_soak::cluster::LocalMesh;
use meshmail_soak::harness::{EndResult, Harness};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::outbound::{OutboundDriver, OutboundFindings, OutboundRig};
use crate::scenario::{Dist, Scenario};

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
    pub actions: Vec<Action>,
    pub recoveries: Vec<Recovery>,
    pub end: EndResult,
    pub checks: Vec<Check>,
    pub plot_notes: Vec<String>,
    /// The outbound checks' findings, when the scenario has `[outbound]`.
    pub outbound: Option<OutboundFindings>,
    /// The merged timeline (written to events.ndjson, not into report.json).
    #[serde(skip)]
    pub events: Vec<meshmail_soak::events::MeshEvent>,
}

/// Which nodes are serving right now (running and not paused), by slot:
/// what the recovery pollers compare against.
type View = Arc<Mutex<Vec<Option<(String, u64, String)>>>>;

/// How long a node must have run before it is picked for a fault.
const MIN_AGE: Duration = Duration::from_secs(1);

struct Run {
    h: Harness,
    view: View,
    rng: StdRng,
    actions: Vec<Action>,
    recoveries: Vec<tokio::task::JoinHandle<Recovery>>,
    isolated_until: Vec<Option<Instant>>,
    restarts: Vec<(Instant, usize, u32)>,
    resumes: Vec<(Instant, usize)>,
    limit: Duration,
    unexpected_exits: u64,
    outbound: Option<(OutboundRig, Option<OutboundDriver>)>,
    outbound_findings: Option<OutboundFindings>,
}

impl Run {
    /// Calls a fault endpoint of node `i`; records the fault (or why the
    /// call failed) and says whether it was injected.
    async fn post_fault(&mut self, i: usize, path: &str, kind: &str, detail: String) -> bool {
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

    fn record(&mut self, kind: &str, i: usize, detail: String) {
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

    fn set_view(&self, i: usize) {
        let s = &self.h.mesh.slots[i];
        self.view.lock().expect("view")[i] = (s.is_running() && !s.paused)
            .then(|| (s.addrs.name.clone(), s.generation.unwrap_or(0), s.addrs.http.clone()));
    }

    /// Nodes killed, paused or partitioned right now.
    fn down(&self, now: Instant) -> usize {
        (0..self.h.mesh.slots.len())
            .filter(|&i| {
                let s = &self.h.mesh.slots[i];
                !s.is_running() || s.paused || self.isolated_until[i].is_some_and(|t| t > now)
            })
            .count()
    }

    /// A random node that is running, not paused and not partitioned, and
    /// has run for at least [`MIN_AGE`]: an incarnation killed within
    /// milliseconds of its start has no event stream anyone could observe.
    fn pick_serving(&mut self, now: Instant) -> Option<usize> {
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
        (!ok.is_empty()).then(|| ok[self.rng.random_range(0..ok.len())])
    }

    fn poll_shards(&mut self, kind: &str, i: usize, from: Instant) {
        let (view, limit, t_s) = (self.view.clone(), self.limit, self.h.elapsed_s());
        let (kind, node) = (kind.to_string(), self.h.mesh.slots[i].addrs.name.clone());
        self.recoveries.push(tokio::spawn(async move {
            let seconds = wait_until(from, limit, || shards_served(view.clone())).await;
            Recovery {
                kind,
                node,
                t_s,
                seconds: seconds.clone().ok().flatten(),
                note: seconds.err().unwrap_or_default(),
            }
        }));
    }

    fn poll_links(&mut self, kind: &str, i: usize, from: Instant) {
        let (view, limit, t_s) = (self.view.clone(), self.limit, self.h.elapsed_s());
        let s = &self.h.mesh.slots[i];
        let (kind, node, http) = (kind.to_string(), s.addrs.name.clone(), s.addrs.http.clone());
        self.recoveries.push(tokio::spawn(async move {
            let seconds = wait_until(from, limit, || links_up(view.clone(), node.clone(), http.clone())).await;
            Recovery {
                kind,
                node,
                t_s,
                seconds: seconds.clone().ok().flatten(),
                note: seconds.err().unwrap_or_default(),
            }
        }));
    }
}

/// Polls `done` every 100 ms from now until it says yes; returns seconds
/// since `from`, `Ok(None)` on timeout, `Err(note)` when unmeasurable.
async fn wait_until<F, Fut>(from: Instant, limit: Duration, mut done: F) -> Result<Option<f64>, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    while from.elapsed() < limit {
        if done().await? {
            return Ok(Some(from.elapsed().as_secs_f64()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(None)
}

async fn status(http: &str) -> Option<serde_json::Value> {
    let body = meshmail_soak::http::get(http, "/status", Duration::from_millis(700))
        .await
        .ok()?;
    serde_json::from_str(&body).ok()
}

/// Every shard is served: the serving nodes' `shards_owned` add up to
/// `shard_count` exactly (more means two owners still overlap).
async fn shards_served(view: View) -> Result<bool, String> {
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
            owned += st["shards_owned"].as_u64().unwrap_or(0);
            count = count.max(st["shard_count"].as_u64().unwrap_or(0));
        }
    }
    Ok(answered > 0 && count > 0 && owned == count)
}

/// The node's `/status` shows every serving peer linked up in its current generation.
async fn links_up(view: View, node: String, http: String) -> Result<bool, String> {
    let peers: Vec<(String, u64)> = view
        .lock()
        .expect("view")
        .iter()
        .flatten()
        .filter(|p| p.0 != node)
        .map(|p| (p.0.clone(), p.1))
        .collect();
    let Some(st) = status(&http).await else {
        return Ok(false);
    };
    let Some(members) = st["members"].as_array() else {
        return Err("no members in /status: link state unmeasurable".into());
    };
    Ok(peers.iter().all(|(name, generation)| {
        members.iter().any(|m| {
            m["node"].as_str() == Some(name)
                && m["link"].as_str() == Some("up")
                && m["generation"].as_u64() == Some(*generation)
        })
    }))
}

fn at(now: Instant, d: &Dist, scale: f64, rng: &mut StdRng) -> Instant {
    now + Duration::from_secs_f64((d.sample(rng) * scale).max(0.05))
}

/// Runs a scenario to the end; the report is written by the caller.
pub async fn run(scn: Scenario, out: &Path, bin: &Path) -> anyhow::Result<RunOutput> {
    let seed = scn.seed.unwrap_or_else(|| rand::rng().random());
    let mut env = Vec::new();
    if scn.needs_fault_hooks() {
        env.push(("MESHMAIL_FAULT_HOOKS".to_string(), "1".to_string()));
    }
    let mut mesh = LocalMesh::setup(
        bin,
        &out.join("data"),
        scn.nodes,
        scn.load.accounts,
        scn.base_port,
        env,
        &out.join("logs"),
    )
    .await?;
    let outbound = if scn.outbound.enabled {
        let rig = OutboundRig::start(&scn.outbound, out)?;
        mesh.extra_args = vec!["--config".into(), rig.config_path.display().to_string()];
        Some((rig, None))
    } else {
        None
    };
    let n = scn.nodes;
    let mut r = Run {
        h: Harness::new(mesh),
        view: Arc::new(Mutex::new(vec![None; n])),
        rng: StdRng::seed_from_u64(seed),
        actions: Vec::new(),
        recoveries: Vec::new(),
        isolated_until: vec![None; n],
        restarts: Vec::new(),
        resumes: Vec::new(),
        limit: Duration::from_secs_f64(scn.recovery_limit_s),
        unexpected_exits: 0,
        outbound,
        outbound_findings: None,
    };
    let result = drive(&scn, &mut r, out).await;
    // Whatever happened, no node outlives the run.
    r.h.mesh.stop_all().await;
    let end = result?;
    let plot_notes = r.h.plots(out);
    let mut recoveries = Vec::new();
    for t in r.recoveries.drain(..) {
        if let Ok(rec) = t.await {
            recoveries.push(rec);
        }
    }
    let count = |k: &str| r.actions.iter().filter(|a| a.kind == k).count() as u64;
    let mut checks = end.checks.clone();
    checks.insert(0, Check::at_least("kills", count("kill"), scn.checks.min_kills));
    checks.insert(
        1,
        Check::at_least("link_drops", count("link_drop"), scn.checks.min_link_drops),
    );
    checks.insert(2, Check::info("partitions", count("partition"), ""));
    checks.insert(3, Check::info("pauses", count("pause"), ""));
    checks.push(Check::at_least("acked", end.golden.acked, scn.checks.min_acked));
    checks.push(Check::zero(
        "recovery_timeouts",
        recoveries
            .iter()
            .filter(|r| r.seconds.is_none() && r.note.is_empty())
            .count() as u64,
        format!("not recovered within {} s", scn.recovery_limit_s),
    ));
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
    Ok(RunOutput {
        scenario: scn,
        seed,
        actions: r.actions,
        recoveries,
        end,
        checks,
        plot_notes,
        outbound: r.outbound_findings.take(),
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

    let scale = scn.time_scale;
    let start = Instant::now();
    let fault_end = start + Duration::from_secs_f64(scn.duration_s);
    let max_down = (scn.nodes.saturating_sub(1) / 2).max(1);
    let rng = &mut r.rng;
    let mut next_kill = scn.kills.enabled.then(|| at(start, &scn.kills.interval, scale, rng));
    let mut next_drop = scn
        .link_drops
        .enabled
        .then(|| at(start, &scn.link_drops.interval, scale, rng));
    let mut next_part = scn
        .partitions
        .enabled
        .then(|| at(start, &scn.partitions.interval, scale, rng));
    let mut next_pause = scn.pauses.enabled.then(|| at(start, &scn.pauses.interval, scale, rng));
    let (mut kills, mut drops, mut parts, mut pauses) = (0u64, 0u64, 0u64, 0u64);
    loop {
        let now = Instant::now();
        if now >= fault_end && r.restarts.is_empty() && r.resumes.is_empty() {
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
        if now < fault_end {
            if next_kill.is_some_and(|t| t <= now) {
                next_kill = Some(at(now, &scn.kills.interval, scale, &mut r.rng));
                if kills < scn.kills.max
                    && r.down(now) < max_down
                    && let Some(i) = r.pick_serving(now)
                {
                    r.h.kill(i).await?;
                    kills += 1;
                    let delay = scn.kills.restart_delay.sample(&mut r.rng);
                    r.record("kill", i, format!("SIGKILL, restart in {delay:.1} s"));
                    r.set_view(i);
                    r.restarts.push((now + Duration::from_secs_f64(delay), i, 0));
                    r.poll_shards("kill", i, now);
                }
            }
            if next_drop.is_some_and(|t| t <= now) {
                next_drop = Some(at(now, &scn.link_drops.interval, scale, &mut r.rng));
                if drops < scn.link_drops.max
                    && let Some(i) = r.pick_serving(now)
                {
                    drops += 1;
                    if r.post_fault(i, "/admin/faults/drop-links", "link_drop", String::new())
                        .await
                    {
                        r.poll_links("link_drop", i, now);
                    }
                }
            }
            if next_part.is_some_and(|t| t <= now) {
                next_part = Some(at(now, &scn.partitions.interval, scale, &mut r.rng));
                if parts < scn.partitions.max
                    && r.down(now) < max_down
                    && let Some(i) = r.pick_serving(now)
                {
                    parts += 1;
                    let ms = (scn.partitions.duration.sample(&mut r.rng) * 1000.0) as u64;
                    let path = format!("/admin/faults/partition?ms={ms}");
                    if r.post_fault(i, &path, "partition", format!("{ms} ms")).await {
                        let heal = now + Duration::from_millis(ms);
                        r.isolated_until[i] = Some(heal);
                        r.poll_links("partition", i, heal);
                    }
                }
            }
            if next_pause.is_some_and(|t| t <= now) {
                next_pause = Some(at(now, &scn.pauses.interval, scale, &mut r.rng));
                if pauses < scn.pauses.max
                    && r.down(now) < max_down
                    && let Some(i) = r.pick_serving(now)
                {
                    pauses += 1;
                    let d = scn.pauses.duration.sample(&mut r.rng);
                    r.h.mesh.pause(i)?;
                    r.record("pause", i, format!("SIGSTOP for {d:.1} s"));
                    r.set_view(i);
                    r.resumes.push((now + Duration::from_secs_f64(d), i));
                }
            }
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
        f.sink_connections = st.connections_total.load(std::sync::atomic::Ordering::Relaxed);
        f.sink_connections_peak = st.connections_peak.load(std::sync::atomic::Ordering::Relaxed);
        f.sink_tempfails = st.tempfails.load(std::sync::atomic::Ordering::Relaxed);
        r.outbound_findings = Some(f);
        // The sink stays up (dropped at the end of the run) for whatever
        // the nodes still send while the end checks run.
        r.outbound = Some((rig, None));
    }
    r.h.finish(Duration::from_secs_f64(scn.settle_s), out).await
}
