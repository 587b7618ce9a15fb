//! What `soak run` and the chaos runner share: a local mesh with an event
//! stream per node incarnation, a load, a sampler (RSS, fds, actors, queue
//! depths, acked rate), the quiet points for actor accounting, and the end
//! checks. The chaos crate adds faults on top; the arrow points one way
//! (chaos → soak).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::checks::{self, ActorSample, Check, GoldenFindings, ProcSample};
use crate::cluster::{LocalMesh, fd_count, rss_kib};
use crate::events::{EventLog, ParityFindings};
use crate::history::HistoryFindings;
use crate::load::{Load, LoadConfig, LoadSummary};

/// A periodic sample of everything that is not per process.
#[derive(Debug, Clone, Serialize)]
pub struct RateSample {
    pub t_s: f64,
    pub acked_per_s: f64,
    pub smtp_p99_ms: f64,
    /// Sum over live nodes of every `*_queue_depth` gauge.
    pub queue_depth: f64,
    /// Sum over live nodes of `meshmail_actors_live`.
    pub actors: f64,
}

#[derive(Debug, Default)]
pub struct Samples {
    pub procs: Vec<ProcSample>,
    pub rates: Vec<RateSample>,
}

/// The live processes the sampler looks at: (name, pid, generation, http).
type Live = Arc<Mutex<Vec<Option<(String, u32, u64, String)>>>>;

pub struct Harness {
    pub mesh: LocalMesh,
    pub events: Arc<EventLog>,
    streams: HashMap<usize, tokio::task::JoinHandle<()>>,
    live: Live,
    pub samples: Arc<Mutex<Samples>>,
    sampler: Option<tokio::task::JoinHandle<()>>,
    pub t0: Instant,
    pub load: Option<Load>,
    pub actors_start: Vec<ActorSample>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EndResult {
    pub checks: Vec<Check>,
    pub golden: GoldenFindings,
    pub history: HistoryFindings,
    pub parity: ParityFindings,
    pub actors_start: Vec<ActorSample>,
    pub actors_end: Vec<ActorSample>,
    pub actor_notes: Vec<String>,
    pub ledger_exit: i32,
    pub ledger_output: String,
    pub memory_trend_pct: Vec<(String, Option<f64>)>,
    pub load: Option<LoadSummary>,
}

impl Harness {
    pub fn new(mesh: LocalMesh) -> Harness {
        let n = mesh.slots.len();
        Harness {
            mesh,
            events: Arc::new(EventLog::default()),
            streams: HashMap::new(),
            live: Arc::new(Mutex::new(vec![None; n])),
            samples: Arc::new(Mutex::new(Samples::default())),
            sampler: None,
            t0: Instant::now(),
            load: None,
            actors_start: Vec::new(),
        }
    }

    pub fn elapsed_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Starts node `i`, follows its events and tells the sampler.
    pub async fn start(&mut self, i: usize) -> anyhow::Result<u64> {
        let generation = self.mesh.start(i).await?;
        let slot = &self.mesh.slots[i];
        let (name, http) = (slot.addrs.name.clone(), slot.addrs.http.clone());
        self.events.note("started", &name, generation, "");
        if self.mesh.mesh_flags {
            let h = self.events.follow(http.clone(), name.clone(), generation);
            if let Some(old) = self.streams.insert(i, h) {
                old.abort();
            }
        }
        self.live.lock().expect("live")[i] = slot.pid.map(|pid| (name, pid, generation, http));
        Ok(generation)
    }

    /// SIGKILLs node `i`.
    pub async fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        let generation = self.mesh.slots[i].generation.unwrap_or(0);
        let name = self.mesh.slots[i].addrs.name.clone();
        self.mesh.kill(i).await?;
        self.events.note("killed", &name, generation, "SIGKILL");
        self.live.lock().expect("live")[i] = None;
        if let Some(h) = self.streams.remove(&i) {
            // Its socket is gone; the task would end by itself, but not before a read error.
            h.abort();
        }
        Ok(())
    }

    /// Starts sampling every `every`.
    pub fn start_sampler(&mut self, every: Duration) {
        let (live, samples, t0) = (self.live.clone(), self.samples.clone(), self.t0);
        let shared = self.load.as_ref().map(|l| l.shared.clone());
        self.sampler = Some(tokio::spawn(async move {
            let mut last_acked = (0u64, Instant::now());
            loop {
                tokio::time::sleep(every).await;
                let t_s = t0.elapsed().as_secs_f64();
                let nodes: Vec<_> = live.lock().expect("live").iter().flatten().cloned().collect();
                let (mut queue_depth, mut actors) = (0.0, 0.0);
                for (name, pid, generation, http) in &nodes {
                    if let (Some(rss), Some(fds)) = (rss_kib(*pid), fd_count(*pid)) {
                        samples.lock().expect("samples").procs.push(ProcSample {
                            t_s,
                            node: name.clone(),
                            generation: *generation,
                            rss_kib: rss,
                            fds,
                        });
                    }
                    // A paused node does not answer: the short timeout keeps the cadence.
                    if let Ok(m) = crate::http::get(http, "/metrics", Duration::from_millis(800)).await {
                        for line in m.lines().filter(|l| !l.starts_with('#')) {
                            let name = line.split(['{', ' ']).next().unwrap_or("");
                            let v: f64 = line
                                .split_whitespace()
                                .last()
                                .and_then(|v| v.parse().ok())
                                .unwrap_or(0.0);
                            if name.ends_with("_queue_depth") {
                                queue_depth += v;
                            } else if name == "meshmail_actors_live" {
                                actors += v;
                            }
                        }
                    }
                }
                if let Some(s) = &shared {
                    let acked = s.counters.lock().expect("counters").acked;
                    let dt = last_acked.1.elapsed().as_secs_f64().max(1e-3);
                    let rate = (acked - last_acked.0) as f64 / dt;
                    last_acked = (acked, Instant::now());
                    let p99 = s.smtp_latency.lock().expect("hist").value_at_quantile(0.99) as f64 / 1000.0;
                    samples.lock().expect("samples").rates.push(RateSample {
                        t_s,
                        acked_per_s: rate,
                        smtp_p99_ms: p99,
                        queue_depth,
                        actors,
                    });
                }
            }
        }));
    }

    /// Starts the load against every node.
    pub fn start_load(&mut self, cfg: LoadConfig, run_for: Duration) {
        self.load = Some(Load::start(cfg, self.mesh.addrs(), run_for));
    }

    /// Actor samples of every running, unpaused node at a quiet point: the
    /// load paused, in-flight operations drained.
    pub async fn quiet_point(&mut self) -> Vec<ActorSample> {
        if let Some(l) = &self.load {
            l.pause(Duration::from_secs(30)).await;
        }
        // Let sessions that just closed finish stopping.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut out = Vec::new();
        for s in &self.mesh.slots {
            if !s.is_running() || s.paused {
                continue;
            }
            let g = s.generation.unwrap_or(0);
            if let Ok(a) = checks::settled_actor_sample(&s.addrs.name, g, &s.addrs.http, Duration::from_secs(10)).await
            {
                out.push(a);
            }
        }
        if let Some(l) = &self.load {
            l.resume();
        }
        out
    }

    /// Stops the load, takes the end quiet point, reads every mailbox back,
    /// stops the nodes, verifies the ledger and runs every end check.
    /// `settle` is waited first (with every node up) so views converge.
    pub async fn finish(&mut self, settle: Duration, out_dir: &Path) -> anyhow::Result<EndResult> {
        let mut load = self.load.take();
        if let Some(l) = &mut load {
            l.stop().await;
        }
        tokio::time::sleep(settle).await;
        let actors_end = self.quiet_point().await;
        let accounts = load.as_ref().map(|l| l.shared.cfg.accounts).unwrap_or(0);
        let read = checks::read_back(&self.mesh.addrs(), accounts, Duration::from_secs(120)).await?;
        let parity = self.end_parity().await;
        self.mesh.stop_all().await;
        let (ledger_exit, ledger_output) = self.mesh.verify_ledger().await?;
        std::fs::write(out_dir.join("verify-ledger.txt"), &ledger_output)?;

        let mut observations = load
            .as_ref()
            .map(|l| l.shared.observations.lock().expect("obs").clone())
            .unwrap_or_default();
        observations.extend(read.iter().cloned());
        let history = crate::history::check(&observations);
        let golden = load
            .as_ref()
            .map(|l| checks::golden(&l.shared.ids.lock().expect("ids"), &read))
            .unwrap_or_default();
        let (leaked, actor_notes) = checks::leaked_actors(&self.actors_start, &actors_end);
        let memory_trend_pct = self.memory_trends();

        let mut c = data_checks(&golden, ledger_exit, &history);
        if self.mesh.mesh_flags {
            c.extend(event_checks(&parity, self.unavailable_streams()));
        }
        c.extend(jmap_check(load.as_ref()));
        c.push(leaked_actors_check(leaked, &self.actors_start, &actors_end));
        c.extend(memory_trend_checks(&memory_trend_pct));
        Ok(EndResult {
            checks: c,
            golden,
            history,
            parity,
            actors_start: self.actors_start.clone(),
            actors_end,
            actor_notes,
            ledger_exit,
            ledger_output,
            memory_trend_pct,
            load: load.as_ref().map(Load::summary),
        })
    }

    /// Stops the sampler and the event streams and judges the events seen
    /// against the nodes still running; done before the nodes stop so their
    /// shutdown is not read as a failure.
    async fn end_parity(&mut self) -> ParityFindings {
        let alive: HashMap<String, u64> = self
            .mesh
            .slots
            .iter()
            .filter(|s| s.is_running())
            .map(|s| (s.addrs.name.clone(), s.generation.unwrap_or(0)))
            .collect();
        if let Some(s) = self.sampler.take() {
            s.abort();
        }
        // Streams get a moment to deliver the last events before the nodes go.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let events = self.events.snapshot();
        let parity = crate::events::parity(&events, &alive);
        for (_, h) in self.streams.drain() {
            h.abort();
        }
        parity
    }

    /// Per node, the memory trend over the second half of the run.
    fn memory_trends(&self) -> Vec<(String, Option<f64>)> {
        let run_s = self.elapsed_s();
        let samples = self.samples.lock().expect("samples");
        self.mesh
            .slots
            .iter()
            .map(|s| {
                let name = s.addrs.name.clone();
                let t = checks::memory_trend_pct(&samples.procs, &name, run_s).map(|(p, _)| p);
                (name, t)
            })
            .collect()
    }

    /// Node incarnations whose event stream never connected or answered.
    fn unavailable_streams(&self) -> u64 {
        let streams = self.events.streams.lock().expect("streams").clone();
        streams.iter().filter(|s| s.unavailable || !s.connected).count() as u64
    }

    /// Memory and fd plots plus the rate plot, into `dir`; returns notes on failures.
    pub fn plots(&self, dir: &Path) -> Vec<String> {
        let samples = self.samples.lock().expect("samples");
        let mut notes = Vec::new();
        let per_node = |f: fn(&ProcSample) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
            self.mesh
                .slots
                .iter()
                .map(|s| {
                    let n = &s.addrs.name;
                    (
                        n.clone(),
                        samples
                            .procs
                            .iter()
                            .filter(|p| &p.node == n)
                            .map(|p| (p.t_s, f(p)))
                            .collect(),
                    )
                })
                .collect()
        };
        let rss = per_node(|p| p.rss_kib as f64 / 1024.0);
        let fds = per_node(|p| p.fds as f64);
        let rates = vec![(
            "acked msg/s".to_string(),
            samples.rates.iter().map(|r| (r.t_s, r.acked_per_s)).collect(),
        )];
        notes.extend(crate::plot::try_plot("memory", || {
            crate::plot::lines(&dir.join("memory.png"), "RSS per node", "seconds", "MiB", &rss)
        }));
        notes.extend(crate::plot::try_plot("fds", || {
            crate::plot::lines(&dir.join("fds.png"), "open fds per node", "seconds", "fds", &fds)
        }));
        notes.extend(crate::plot::try_plot("rate", || {
            crate::plot::lines(
                &dir.join("rate.png"),
                "acknowledged messages per second",
                "seconds",
                "msg/s",
                &rates,
            )
        }));
        notes
    }
}

/// What was stored against what was acked, the ledger, and the IMAP histories.
fn data_checks(golden: &GoldenFindings, ledger_exit: i32, history: &HistoryFindings) -> Vec<Check> {
    vec![
        Check::zero("lost", golden.lost, format!("of {} acked", golden.acked)),
        Check::zero("duplicated", golden.duplicated, ""),
        Check::zero("extra_unexplained", golden.extra_unexplained, "stored but never sent"),
        Check::info(
            "extra_after_error",
            golden.extra_after_error,
            "stored although the client saw an error: allowed",
        ),
        Check::zero("misdelivered", golden.misdelivered, ""),
        Check {
            name: "verify_ledger".into(),
            value: format!("exit {ledger_exit}"),
            ok: ledger_exit == 0,
            note: String::new(),
        },
        Check::zero(
            "uid_reused",
            history.uid_reused,
            format!("{} observations", history.observations),
        ),
        Check::zero("modseq_regressions", history.modseq_regressions, ""),
        Check::zero("uid_order_violations", history.uid_order_violations, ""),
    ]
}

/// Membership events: only meaningful when the nodes run as a mesh.
fn event_checks(parity: &ParityFindings, unavailable: u64) -> Vec<Check> {
    vec![
        Check::zero(
            "event_streams_missing",
            unavailable,
            "node incarnations whose /mesh/events never answered",
        ),
        Check::info("node_up_events", parity.ups, ""),
        Check::info("node_down_events", parity.downs, ""),
        Check::zero("orphaned_down", parity.orphaned_down, ""),
        Check::zero("duplicate_down", parity.duplicate_down, ""),
        Check::zero("up_before_predecessor_down", parity.up_before_predecessor_down, ""),
        Check::zero(
            "stale_view_at_end",
            parity.stale_at_end,
            "live peer not seen up in its current generation",
        ),
    ]
}

/// The JMAP readers' rounds, when the load had readers.
fn jmap_check(load: Option<&Load>) -> Option<Check> {
    let l = load.filter(|l| l.shared.cfg.jmap_readers > 0)?;
    let counters = l.shared.counters.lock().expect("counters").clone();
    // Readers that never got an answer read nothing: a failure.
    Some(Check {
        name: "jmap_rounds".into(),
        value: counters.jmap_rounds.to_string(),
        ok: counters.jmap_rounds > 0,
        note: format!("{} failed rounds (faults allow some)", counters.jmap_errors),
    })
}

/// Leaked actors; a run where no node was sampled at both quiet points
/// proves nothing and fails.
fn leaked_actors_check(leaked: i64, start: &[ActorSample], end: &[ActorSample]) -> Check {
    let compared = end.iter().filter(|e| start.iter().any(|s| s.node == e.node)).count();
    Check {
        name: "leaked_actors".into(),
        value: leaked.to_string(),
        ok: leaked == 0 && compared > 0,
        note: if compared == 0 {
            "no node sampled at both quiet points".into()
        } else {
            format!("{compared} nodes compared")
        },
    }
}

fn memory_trend_checks(trends: &[(String, Option<f64>)]) -> impl Iterator<Item = Check> + '_ {
    trends.iter().map(|(n, t)| {
        Check::info(
            &format!("memory_trend_{n}"),
            t.map(|t| format!("{t:+.1}%")).unwrap_or_else(|| "n/a".into()),
            "second half, of the mean",
        )
    })
}
