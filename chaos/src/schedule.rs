//! The fault schedule of a run, planned in full before the first fault:
//! the random, quantile-fitted schedules of `[kills]`, `[link_drops]`,
//! `[partitions]`, `[pauses]` and the explicit `[[schedule]]` entries
//! ("kill node-1 every 90 s", a list of times, a burst of N kills). Planning
//! is a pure function of the scenario and the seed, so `--seed` reproduces
//! a run's schedule exactly (for the same build: `StdRng`'s stream is only
//! stable within one `rand` version); report.json records it.
//!
//! What the plan cannot fix in advance is which node is serving when a
//! fault is due: a random target is a number drawn now and reduced modulo
//! the nodes eligible at that moment; a fault due while too many nodes are
//! down (or its named node is) is skipped and recorded as skipped.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::scenario::{Dist, Scenario, ScenarioError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL, restart after `duration_s`.
    Kill,
    /// The transport's fault endpoint: drop every link (peers redial).
    LinkDrop,
    /// The transport's fault endpoint: no links for `duration_s`.
    Partition,
    /// SIGSTOP, SIGCONT after `duration_s`.
    Pause,
    /// Namespaces: drop everything between the node and its peers, both ways.
    NetnsPartition,
    /// Namespaces: drop what the node sends to its peers; what they send arrives.
    NetnsOneway,
    /// Namespaces: `tc netem` delay/jitter/loss/reorder on the node's link.
    NetnsNetem,
    /// Namespaces: a rate limit on the node's link.
    NetnsBandwidth,
    /// Every thread of the node pinned to one busy CPU at nice 19 (see `starve.rs`).
    Starve,
    /// The SQLite store's write lock held by another process (see `store_outage.rs`).
    StoreLock,
    /// The node's wall clock `offset_s` off, and the node cut off from the
    /// mesh for `duration_s` so its shards move on (see `clock_skew.rs`).
    ClockJump,
    /// The store slow: its write lock held `delay_ms` and released as long,
    /// in turns (see `store_outage.rs`).
    StoreSlow,
    /// The data directory's tmpfs filled to the last byte (see `disk.rs`).
    DiskFull,
    /// The blob directory mounted read-only (see `disk.rs`).
    BlobReadonly,
    /// One `fdbserver` process of the run's cluster SIGKILLed, restarted
    /// after `duration_s` (see `store_rig.rs`).
    FdbKill,
    /// Every `fdbserver` process SIGKILLed, all restarted after `duration_s`.
    FdbOutage,
    /// SIGKILL, restart after `duration_s` on this build (see `upgrade.rs`).
    Upgrade,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::LinkDrop => "link_drop",
            FaultKind::Partition => "partition",
            FaultKind::Pause => "pause",
            FaultKind::NetnsPartition => "netns_partition",
            FaultKind::NetnsOneway => "netns_oneway",
            FaultKind::NetnsNetem => "netns_netem",
            FaultKind::NetnsBandwidth => "netns_bandwidth",
            FaultKind::Starve => "starve",
            FaultKind::StoreLock => "store_lock",
            FaultKind::ClockJump => "clock_jump",
            FaultKind::StoreSlow => "store_slow",
            FaultKind::DiskFull => "disk_full",
            FaultKind::BlobReadonly => "blob_readonly",
            FaultKind::FdbKill => "fdb_kill",
            FaultKind::FdbOutage => "fdb_outage",
            FaultKind::Upgrade => "upgrade",
        }
    }

    /// Faults on the run's data directory (they need `[disk] tmpfs_mib`).
    pub fn needs_disk(self) -> bool {
        matches!(self, FaultKind::DiskFull | FaultKind::BlobReadonly)
    }

    pub fn needs_netns(self) -> bool {
        matches!(
            self,
            FaultKind::NetnsPartition | FaultKind::NetnsOneway | FaultKind::NetnsNetem | FaultKind::NetnsBandwidth
        )
    }

    /// Whether the node counts as down while the fault lasts (the quorum guard).
    pub fn isolates(self) -> bool {
        !matches!(
            self,
            FaultKind::LinkDrop
                | FaultKind::NetnsNetem
                | FaultKind::NetnsBandwidth
                | FaultKind::StoreSlow
                | FaultKind::DiskFull
                | FaultKind::BlobReadonly
                | FaultKind::FdbKill
                | FaultKind::FdbOutage
        )
    }
}

/// `tc netem` / rate parameters of a network fault (all optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Netem {
    pub delay_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
    pub loss_pct: Option<f64>,
    pub reorder_pct: Option<f64>,
    /// Bandwidth limit, kbit/s (`netns_bandwidth`).
    pub rate_kbit: Option<u64>,
}

/// One `[[schedule]]` entry of a scenario: when (every `every_s` from
/// `start_s` until `until_s`, and/or at each of `at_s`), what, to whom, how
/// many at once (`burst` faults `burst_gap_s` apart), for how long.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explicit {
    pub fault: FaultKind,
    /// "node-1"; absent: a random serving node each time.
    pub node: Option<String>,
    pub every_s: Option<f64>,
    /// First time of an `every_s` series (default: `every_s`), seconds into the fault phase.
    pub start_s: Option<f64>,
    /// End of an `every_s` series (default: the end of the fault phase).
    pub until_s: Option<f64>,
    #[serde(default)]
    pub at_s: Vec<f64>,
    #[serde(default = "d_burst")]
    pub burst: u32,
    #[serde(default = "d_burst_gap")]
    pub burst_gap_s: f64,
    /// Pause/partition/netns fault length, or a kill's restart delay (default 2 s).
    pub duration_s: Option<f64>,
    // The network fault's parameters (see [`Netem`]); not flattened,
    // because serde cannot deny unknown keys through a flatten.
    pub delay_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
    pub loss_pct: Option<f64>,
    pub reorder_pct: Option<f64>,
    pub rate_kbit: Option<u64>,
    /// `clock_jump`: the node's clock offset, seconds (negative: behind).
    pub offset_s: Option<f64>,
}

fn d_burst() -> u32 {
    1
}
fn d_burst_gap() -> f64 {
    0.5
}

impl Explicit {
    pub fn netem(&self) -> Netem {
        Netem {
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            loss_pct: self.loss_pct,
            reorder_pct: self.reorder_pct,
            rate_kbit: self.rate_kbit,
        }
    }

    pub fn validate(&self, i: usize, nodes: usize, duration_s: f64) -> Result<(), ScenarioError> {
        let bad = |m: String| Err(ScenarioError::Invalid(format!("schedule[{i}]: {m}")));
        if let Some(n) = &self.node
            && node_index(n).is_none_or(|k| k >= nodes)
        {
            return bad(format!("node {n:?} is not one of node-0..node-{}", nodes - 1));
        }
        if self.every_s.is_none() && self.at_s.is_empty() {
            return bad("needs every_s or at_s".into());
        }
        if self.every_s.is_some_and(|e| e.is_nan() || e < 0.05) {
            return bad("every_s must be >= 0.05".into());
        }
        if self.at_s.iter().any(|t| !(*t >= 0.0 && *t <= duration_s)) {
            return bad(format!("at_s must lie in [0, duration_s = {duration_s}]"));
        }
        if !(1..=1000).contains(&self.burst) || self.burst_gap_s.is_nan() || self.burst_gap_s < 0.0 {
            return bad("burst must be 1..=1000, burst_gap_s >= 0".into());
        }
        if self.duration_s.is_some_and(|d| !(d > 0.0 && d <= 3600.0)) {
            return bad("duration_s must be in (0, 3600]".into());
        }
        if self.fault == FaultKind::StoreSlow && !self.delay_ms.is_some_and(|d| (10.0..=4_000.0).contains(&d)) {
            return bad("store_slow needs delay_ms (how long each lock holds) in [10, 4000]".into());
        }
        match (self.fault, self.offset_s) {
            (FaultKind::ClockJump, Some(o)) if o.is_finite() && o.abs() <= 864_000.0 && o != 0.0 => {}
            (FaultKind::ClockJump, _) => return bad("clock_jump needs offset_s, non-zero, within ±864000 s".into()),
            (_, Some(_)) => return bad("offset_s applies to clock_jump only".into()),
            _ => {}
        }
        Ok(())
    }
}

/// "node-3" → 3.
pub fn node_index(name: &str) -> Option<usize> {
    name.strip_prefix("node-")?.parse().ok()
}

/// One fault of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Planned {
    /// Seconds into the fault phase.
    pub t_s: f64,
    pub kind: FaultKind,
    /// A named node (explicit entries), else None.
    pub node: Option<usize>,
    /// Reduced modulo the eligible nodes when `node` is None.
    pub pick: u64,
    /// Fault length (restart delay for kills), seconds.
    pub duration_s: f64,
    #[serde(skip_serializing_if = "is_default")]
    pub netem: Netem,
    /// `clock_jump`: the clock offset, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_s: Option<f64>,
    /// "kills", "pauses", ... or "schedule[i]".
    pub source: String,
}

fn is_default(n: &Netem) -> bool {
    *n == Netem::default()
}

/// The random schedule of one fault kind: interval draws from the fault
/// phase's start until its end (at most `max`), each with its duration.
fn random_series(
    out: &mut Vec<Planned>,
    rng: &mut StdRng,
    (kind, source): (FaultKind, &str),
    interval: &Dist,
    duration: &Dist,
    max: u64,
    scn: &Scenario,
) {
    let mut t = 0.0;
    let mut n = 0;
    while n < max {
        t += (interval.sample(rng) * scn.time_scale).max(0.05);
        if t >= scn.duration_s {
            break;
        }
        out.push(Planned {
            t_s: t,
            kind,
            node: None,
            pick: rng.random(),
            duration_s: duration.sample(rng),
            netem: Netem::default(),
            offset_s: None,
            source: source.into(),
        });
        n += 1;
    }
}

/// The whole schedule, sorted by time (ties: in scenario order).
pub fn plan(scn: &Scenario, seed: u64) -> Vec<Planned> {
    let mut out = Vec::new();
    // One stream per kind: turning one kind on or off leaves the others' times alone.
    let stream = |k: u64| StdRng::seed_from_u64(seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    if scn.kills.enabled {
        let k = &scn.kills;
        let kind = (FaultKind::Kill, "kills");
        random_series(
            &mut out,
            &mut stream(1),
            kind,
            &k.interval,
            &k.restart_delay,
            k.max,
            scn,
        );
    }
    for (i, (kind, source, f)) in [
        (FaultKind::LinkDrop, "link_drops", &scn.link_drops),
        (FaultKind::Partition, "partitions", &scn.partitions),
        (FaultKind::Pause, "pauses", &scn.pauses),
    ]
    .into_iter()
    .enumerate()
    {
        if f.enabled {
            let mut rng = stream(2 + i as u64);
            random_series(&mut out, &mut rng, (kind, source), &f.interval, &f.duration, f.max, scn);
        }
    }
    for (i, e) in scn.schedule.iter().enumerate() {
        let mut rng = stream(100 + i as u64);
        let mut times = e.at_s.clone();
        if let Some(every) = e.every_s {
            let until = e.until_s.unwrap_or(scn.duration_s).min(scn.duration_s);
            let mut t = e.start_s.unwrap_or(every);
            while t < until {
                times.push(t);
                t += every;
            }
        }
        for t in times {
            for b in 0..e.burst {
                out.push(Planned {
                    t_s: t + b as f64 * e.burst_gap_s,
                    kind: e.fault,
                    node: e.node.as_deref().and_then(node_index),
                    pick: rng.random(),
                    duration_s: e.duration_s.unwrap_or(2.0),
                    netem: e.netem(),
                    offset_s: e.offset_s,
                    source: format!("schedule[{i}]"),
                });
            }
        }
    }
    out.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCN: &str = r#"
name = "s"
nodes = 3
duration_s = 100
time_scale = 0.1
[pauses]
enabled = true
[[schedule]]
fault = "kill"
node = "node-1"
every_s = 30
duration_s = 1
[[schedule]]
fault = "kill"
at_s = [5, 50]
burst = 3
burst_gap_s = 2
[[schedule]]
fault = "netns_netem"
node = "node-2"
at_s = [10]
duration_s = 4
delay_ms = 50
loss_pct = 5
"#;

    #[test]
    fn same_seed_same_schedule() {
        let s = Scenario::parse(SCN).unwrap();
        let a = plan(&s, 42);
        assert_eq!(a, plan(&s, 42));
        assert_ne!(a, plan(&s, 43), "another seed, another schedule");
        // Serialized the same too (what report.json records).
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&plan(&s, 42)).unwrap()
        );
    }

    #[test]
    fn explicit_entries_are_exact() {
        let s = Scenario::parse(SCN).unwrap();
        let p = plan(&s, 1);
        let every: Vec<f64> = p.iter().filter(|x| x.source == "schedule[0]").map(|x| x.t_s).collect();
        assert_eq!(every, vec![30.0, 60.0, 90.0]);
        assert!(
            p.iter()
                .filter(|x| x.source == "schedule[0]")
                .all(|x| x.node == Some(1))
        );
        let burst: Vec<f64> = p.iter().filter(|x| x.source == "schedule[1]").map(|x| x.t_s).collect();
        assert_eq!(burst, vec![5.0, 7.0, 9.0, 50.0, 52.0, 54.0]);
        let netem = p.iter().find(|x| x.kind == FaultKind::NetnsNetem).unwrap();
        assert_eq!(netem.netem.delay_ms, Some(50.0));
        assert_eq!(netem.node, Some(2));
        // The random kinds are there too, sorted in with the rest.
        assert!(p.iter().any(|x| x.kind == FaultKind::Pause));
        assert!(p.iter().any(|x| x.source == "kills"));
        assert!(p.windows(2).all(|w| w[0].t_s <= w[1].t_s));
    }

    #[test]
    fn bad_entries_are_refused() {
        let base = "name = \"s\"\nnodes = 3\nduration_s = 10\n[[schedule]]\nfault = \"kill\"\n";
        assert!(Scenario::parse(&format!("{base}node = \"node-3\"\nat_s = [1]\n")).is_err());
        assert!(Scenario::parse(&format!("{base}at_s = [11]\n")).is_err());
        assert!(Scenario::parse(base).is_err(), "no time at all");
        assert!(Scenario::parse(&format!("{base}every_s = 2\nbogus = 1\n")).is_err());
    }
}
