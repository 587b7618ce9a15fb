//! The comparable part of a run's `report.json`: a versioned, typed
//! summary (recovery percentiles, lost, duplicates, throughput, memory)
//! that `meshmail-chaos compare` reads back. Everything else in
//! report.json (actions, every recovery, the end checks' findings) is for
//! people and ad-hoc tools; only this part is a contract.

use std::collections::BTreeMap;

use meshmail_soak::checks::{ProcSample, quantiles};
use serde::{Deserialize, Serialize};

use crate::runner::{Recovery, RunOutput};

/// Bumped whenever a field of [`Summary`] changes meaning or goes away
/// (adding a field with a default does not need a bump).
pub const SCHEMA_VERSION: u32 = 1;

/// Recovery classes and the recovery kinds each one pools.
pub const RECOVERY_CLASSES: &[(&str, &[&str])] = &[
    ("kill", &["kill"]),
    ("link", &["link_drop", "partition"]),
    ("pause", &["pause"]),
    (
        "netns",
        &["netns_partition", "netns_oneway", "netns_netem", "netns_bandwidth"],
    ),
    ("starve", &["starve"]),
    ("store", &["store_lock", "store_slow", "fdb_kill", "fdb_outage"]),
    ("disk", &["disk_full", "blob_readonly"]),
    ("clock", &["clock_jump"]),
    // Not a recovery of the mesh: the load's longest interval between two
    // 250s to one account across a kill (see `write_gap.rs`).
    ("write_gap", &["write_gap"]),
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Recoveries measured.
    pub n: u64,
    pub p50_s: f64,
    pub p90_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    /// Faults not recovered within `recovery_limit_s`.
    pub not_recovered: u64,
}

impl Percentiles {
    pub fn of(recoveries: &[Recovery], kinds: &[&str]) -> Percentiles {
        let mine: Vec<&Recovery> = recoveries.iter().filter(|r| kinds.contains(&r.kind.as_str())).collect();
        let v: Vec<f64> = mine.iter().filter_map(|r| r.seconds).collect();
        let q = quantiles(&v);
        Percentiles {
            n: v.len() as u64,
            p50_s: q[0],
            p90_s: q[1],
            p99_s: q[2],
            max_s: q[3],
            not_recovered: mine.iter().filter(|r| r.seconds.is_none() && r.note.is_empty()).count() as u64,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Acknowledged messages per second over the whole load run.
    pub acked_per_s: f64,
    pub smtp_p50_ms: f64,
    pub smtp_p99_ms: f64,
    pub imap_p99_ms: f64,
    /// Refusals (4xx/5xx) the load saw.
    pub refused: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Highest RSS any node incarnation reached, MiB.
    pub peak_rss_mib: f64,
    /// Mean of every RSS sample, MiB.
    pub mean_rss_mib: f64,
    /// Peak RSS per node name, MiB.
    pub peak_rss_mib_by_node: BTreeMap<String, f64>,
    /// The largest |second-half RSS trend| of any node, % of its mean.
    pub worst_trend_pct: Option<f64>,
    /// Node incarnations (node, generation) sampled at least once.
    #[serde(default)]
    pub incarnations: u64,
    /// Each incarnation's peak RSS, MiB: median and largest over them
    /// (a leak that survives restarts, in the store or the shared data,
    /// shows as later incarnations starting ever larger).
    #[serde(default)]
    pub incarnation_peak_rss_mib_p50: f64,
    #[serde(default)]
    pub incarnation_peak_rss_mib_max: f64,
}

impl Memory {
    pub fn of(procs: &[ProcSample], trends: &[(String, Option<f64>)]) -> Memory {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let mut by_node: BTreeMap<String, f64> = BTreeMap::new();
        for p in procs {
            let e = by_node.entry(p.node.clone()).or_default();
            *e = e.max(mib(p.rss_kib));
        }
        let sum: f64 = procs.iter().map(|p| mib(p.rss_kib)).sum();
        let mut by_incarnation: BTreeMap<(&str, u64), f64> = BTreeMap::new();
        for p in procs {
            let e = by_incarnation.entry((p.node.as_str(), p.generation)).or_default();
            *e = e.max(mib(p.rss_kib));
        }
        let peaks: Vec<f64> = by_incarnation.values().copied().collect();
        let q = quantiles(&peaks);
        Memory {
            peak_rss_mib: by_node.values().copied().fold(0.0, f64::max),
            mean_rss_mib: if procs.is_empty() {
                0.0
            } else {
                sum / procs.len() as f64
            },
            peak_rss_mib_by_node: by_node,
            worst_trend_pct: trends
                .iter()
                .filter_map(|(_, t)| *t)
                .max_by(|a, b| a.abs().total_cmp(&b.abs())),
            incarnations: peaks.len() as u64,
            incarnation_peak_rss_mib_p50: q[0],
            incarnation_peak_rss_mib_max: q[3],
        }
    }
}

/// The typed, comparable summary of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub nodes: usize,
    pub fault_phase_s: f64,
    /// `git rev-parse --short HEAD` where the runner ran, when it could tell.
    #[serde(default)]
    pub commit: Option<String>,
    /// Whether the network faults ran in namespaces (else the transport's fault endpoint).
    #[serde(default)]
    pub network: String,
    pub passed: bool,
    pub failed_checks: Vec<String>,
    /// Faults injected, by action kind (kill, link_drop, pause, netns_partition, ...).
    pub faults: BTreeMap<String, u64>,
    /// Recovery percentiles per class (see [`RECOVERY_CLASSES`]).
    pub recovery: BTreeMap<String, Percentiles>,
    pub acked: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub misdelivered: u64,
    pub extra_unexplained: u64,
    pub throughput: Throughput,
    pub memory: Memory,
}

/// What report.json holds at its top; `run` is the full record.
#[derive(Debug, Serialize)]
pub struct ReportFile<'a> {
    pub schema_version: u32,
    pub summary: &'a Summary,
    pub run: &'a RunOutput,
}

/// The part of report.json `compare` reads (the rest is ignored).
#[derive(Debug, Deserialize)]
pub struct ReportHead {
    pub schema_version: u32,
    pub summary: Summary,
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

impl Summary {
    pub fn of(o: &RunOutput) -> Summary {
        let mut faults = BTreeMap::new();
        for a in &o.actions {
            if !matches!(a.kind.as_str(), "start" | "restart" | "resume" | "heal" | "skipped") {
                *faults.entry(a.kind.clone()).or_insert(0) += 1;
            }
        }
        let recovery = RECOVERY_CLASSES
            .iter()
            .map(|(class, kinds)| (class.to_string(), Percentiles::of(&o.recoveries, kinds)))
            .filter(|(_, p)| p.n > 0 || p.not_recovered > 0)
            .collect();
        let g = &o.end.golden;
        let throughput = o
            .end
            .load
            .as_ref()
            .map(|l| Throughput {
                acked_per_s: l.acked_per_s,
                smtp_p50_ms: l.smtp_ms[0],
                smtp_p99_ms: l.smtp_ms[2],
                imap_p99_ms: l.imap_ms[2],
                refused: l.counters.refused,
            })
            .unwrap_or_default();
        Summary {
            scenario: o.scenario.name.clone(),
            seed: o.seed,
            nodes: o.scenario.nodes,
            fault_phase_s: o.scenario.duration_s,
            commit: git_commit(),
            network: o.network.clone(),
            passed: o.checks.iter().all(|c| c.ok),
            failed_checks: o.checks.iter().filter(|c| !c.ok).map(|c| c.name.clone()).collect(),
            faults,
            recovery,
            acked: g.acked,
            lost: g.lost,
            duplicated: g.duplicated,
            misdelivered: g.misdelivered,
            extra_unexplained: g.extra_unexplained,
            throughput,
            memory: o.memory.clone(),
        }
    }
}
