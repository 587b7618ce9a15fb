//! The scenario file (TOML; documented in chaos/README.md) and the
//! interval distributions the fault schedules draw from.

use std::path::{Path, PathBuf};

use meshmail_soak::load::LoadConfig;
use rand::Rng;

use crate::schedule::FaultKind;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("reading {0}: {1}")]
    Read(String, std::io::Error),
    #[error("parsing {0}: {1}")]
    Parse(String, toml::de::Error),
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default = "d_nodes")]
    pub nodes: usize,
    /// Length of the fault phase, seconds (load runs through it).
    pub duration_s: f64,
    /// Load before the first fault and before the first quiet point.
    #[serde(default = "d_warmup")]
    pub warmup_s: f64,
    /// After the last fault, every node up, before the end checks.
    #[serde(default = "d_settle")]
    pub settle_s: f64,
    /// Multiplies every fault *interval* (not restart delays or fault
    /// durations): 0.1 turns the 80 s median between kills into 8 s.
    #[serde(default = "d_one")]
    pub time_scale: f64,
    #[serde(default = "d_base_port")]
    pub base_port: u16,
    #[serde(default = "d_sample")]
    pub sample_every_s: f64,
    /// Longest wait for a recovery before it counts as a timeout.
    #[serde(default = "d_recovery_limit")]
    pub recovery_limit_s: f64,
    /// Random seed for the schedules (random when absent; the report says which).
    pub seed: Option<u64>,
    #[serde(default)]
    pub load: LoadConfig,
    #[serde(default = "Kills::default")]
    pub kills: Kills,
    #[serde(default = "SoftFault::link_drops")]
    pub link_drops: SoftFault,
    #[serde(default = "SoftFault::partitions")]
    pub partitions: SoftFault,
    #[serde(default = "SoftFault::pauses")]
    pub pauses: SoftFault,
    #[serde(default)]
    pub faults: MessageFaults,
    #[serde(default)]
    pub checks: Minimums,
    /// Mail to remote recipients through a sink MX (see `outbound.rs`).
    #[serde(default)]
    pub outbound: crate::outbound::OutboundLoad,
    /// Explicit fault times besides the random schedules (see `schedule.rs`).
    #[serde(default)]
    pub schedule: Vec<crate::schedule::Explicit>,
    /// Run the nodes in network namespaces (see `netns.rs`).
    #[serde(default)]
    pub netns: NetnsConfig,
    /// The data directory on a small tmpfs, for disk faults (see `disk.rs`).
    #[serde(default)]
    pub disk: DiskConfig,
    /// Where the nodes keep their data (see `store_rig.rs`).
    #[serde(default)]
    pub store: StoreConfig,
    /// A rolling upgrade from the previous release (see `upgrade.rs`).
    #[serde(default)]
    pub upgrade: crate::upgrade::UpgradeConfig,
}

/// `[store]`: by default the nodes share one data directory (one SQLite
/// file, one blob directory), as `meshmail up` runs them. With `kind =
/// "fdb"` they are separate hosts: each node has a data directory of its
/// own (only its cluster certificate in it) and shares nothing on the
/// filesystem with the others; the store is a FoundationDB cluster the
/// runner starts, and bodies go to an S3 server, both reached over the
/// network (the namespaces' bridge with `[netns] enabled`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    #[serde(default)]
    pub kind: StoreKind,
    /// Where `fdbserver` and `fdbcli` are (default: `MESHMAIL_FDB_BIN`,
    /// which `.ci/fdb.sh start` exports, else `PATH`).
    pub fdb_bin: Option<PathBuf>,
    /// The S3 server the bodies go to, as the runner reaches it (default:
    /// `MESHMAIL_TEST_S3_ENDPOINT`, which `.ci/s3-emulator.sh start`
    /// exports); relayed onto the bridge for the namespaced nodes.
    pub s3_endpoint: Option<String>,
    /// The bucket (default: `meshmail-chaos-<runner pid>`, created by the
    /// runner): a bucket of the run's own, since the nodes' blob sweeper
    /// deletes what their store does not name.
    pub s3_bucket: Option<String>,
    /// `fdbserver` processes of the cluster (default 1, `single`); three
    /// or more make it `double`, each process a zone and a coordinator, so
    /// it lives through the loss of one (the `fdb_kill` fault).
    pub fdb_processes: Option<usize>,
    /// The nodes' `[smtp] delivery_timeout_s`: how long a delivery waits
    /// for the store before SMTP answers 4xx (default 30 s, longer than a
    /// short `fdb_outage`, which the client would then just wait out).
    pub smtp_delivery_timeout_s: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// One shared data directory: SQLite and local blobs.
    #[default]
    Shared,
    /// FoundationDB + S3, a data directory per node.
    Fdb,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskConfig {
    /// Mount a tmpfs of this many MiB on `OUT/data` (needs root); the
    /// `disk_full` and `blob_readonly` faults need it.
    pub tmpfs_mib: Option<u64>,
    /// Every body goes to the blob directory (the nodes' `inline_max_bytes
    /// = 0`), so `blob_readonly` meets every delivery, not only large ones.
    #[serde(default)]
    pub blob_bodies: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetnsConfig {
    #[serde(default)]
    pub enabled: bool,
    /// Fail the run when namespaces are unavailable (else namespace
    /// partitions fall back to the transport's fault endpoint).
    #[serde(default)]
    pub require: bool,
}

fn d_nodes() -> usize {
    3
}
fn d_warmup() -> f64 {
    10.0
}
fn d_settle() -> f64 {
    10.0
}
fn d_one() -> f64 {
    1.0
}
fn d_base_port() -> u16 {
    20000
}
fn d_sample() -> f64 {
    2.0
}
fn d_recovery_limit() -> f64 {
    60.0
}

/// A positive random duration given by three quantiles, in seconds.
/// Sampled through a piecewise-linear inverse CDF through (0, lo),
/// (0.1, p10), (0.5, p50), (0.9, p90), (1, hi): it hits the quantiles
/// exactly, is continuous (so kills never phase-lock with periodic timers)
/// and bounded (so a run's length stays predictable).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dist {
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
}

impl Dist {
    pub const fn new(p10: f64, p50: f64, p90: f64) -> Dist {
        Dist { p10, p50, p90 }
    }

    fn validate(&self, what: &str) -> Result<(), ScenarioError> {
        if !(self.p10 >= 0.0 && self.p10 <= self.p50 && self.p50 <= self.p90 && self.p90 > 0.0) {
            return Err(ScenarioError::Invalid(format!(
                "{what}: need 0 <= p10 <= p50 <= p90, 0 < p90"
            )));
        }
        Ok(())
    }

    pub fn quantile(&self, q: f64) -> f64 {
        let lo = (self.p10 - (self.p50 - self.p10) * 0.25).max(self.p10 * 0.25);
        let hi = self.p90 + (self.p90 - self.p50) * 0.5;
        let pts = [(0.0, lo), (0.1, self.p10), (0.5, self.p50), (0.9, self.p90), (1.0, hi)];
        let q = q.clamp(0.0, 1.0);
        for w in pts.windows(2) {
            let ((q0, v0), (q1, v1)) = (w[0], w[1]);
            if q <= q1 {
                return v0 + (v1 - v0) * (q - q0) / (q1 - q0);
            }
        }
        hi
    }

    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        self.quantile(rng.random::<f64>())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kills {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// Seconds between kills (× time_scale).
    #[serde(default = "Kills::d_interval")]
    pub interval: Dist,
    /// Seconds from the kill to the restart (not scaled).
    #[serde(default = "Kills::d_restart")]
    pub restart_delay: Dist,
    #[serde(default = "d_max")]
    pub max: u64,
    /// A restarted node counts as down (for the guard that keeps a
    /// majority up) until it has joined: linked to every serving peer, its
    /// view settled, its start grace (3 s) over, shards of its own, every
    /// shard served. Without it a
    /// kill 0.3 s after another node's restart leaves one member and one
    /// newcomer that takes no dead peer's lease before its settle time:
    /// two of three out, which is not a survivor takeover.
    #[serde(default)]
    pub joining_counts_as_down: bool,
}

impl Kills {
    fn d_interval() -> Dist {
        Dist::new(30.0, 80.0, 130.0)
    }
    fn d_restart() -> Dist {
        Dist::new(1.0, 3.0, 6.0)
    }
}

impl Default for Kills {
    fn default() -> Self {
        Kills {
            enabled: true,
            interval: Kills::d_interval(),
            restart_delay: Kills::d_restart(),
            max: d_max(),
            joining_counts_as_down: false,
        }
    }
}

fn d_true() -> bool {
    true
}
fn d_max() -> u64 {
    10_000
}

/// Link drops, partitions and pauses: each on its own schedule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftFault {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// Seconds between faults of this kind (× time_scale).
    #[serde(default = "SoftFault::d_interval")]
    pub interval: Dist,
    /// How long a partition or pause lasts, seconds (not scaled; unused for link drops).
    #[serde(default = "SoftFault::d_duration")]
    pub duration: Dist,
    #[serde(default = "d_max")]
    pub max: u64,
}

impl SoftFault {
    fn d_duration() -> Dist {
        Dist::new(1.0, 3.0, 6.0)
    }
    fn d_interval() -> Dist {
        Dist::new(20.0, 60.0, 100.0)
    }
    fn link_drops() -> SoftFault {
        SoftFault {
            enabled: true,
            interval: SoftFault::d_interval(),
            duration: SoftFault::d_duration(),
            max: d_max(),
        }
    }
    fn partitions() -> SoftFault {
        SoftFault {
            enabled: false,
            interval: Dist::new(60.0, 150.0, 240.0),
            duration: SoftFault::d_duration(),
            max: d_max(),
        }
    }
    fn pauses() -> SoftFault {
        SoftFault {
            enabled: false,
            interval: Dist::new(60.0, 150.0, 240.0),
            duration: Dist::new(0.5, 2.0, 5.0),
            max: d_max(),
        }
    }
}

/// Server-side fault hooks (need `MESHMAIL_FAULT_HOOKS=1`, which the
/// runner sets whenever any of these is non-zero or a soft fault is on).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageFaults {
    /// Messages the server answers 250 but does not store.
    #[serde(default)]
    pub drop_ack_messages: u32,
    /// Messages the server stores under a UID the mailbox already used.
    #[serde(default)]
    pub reuse_uid_messages: u32,
}

/// Counts a run must reach to pass (so a too-gentle run cannot look green).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Minimums {
    #[serde(default)]
    pub min_kills: u64,
    #[serde(default)]
    pub min_link_drops: u64,
    #[serde(default)]
    pub min_acked: u64,
    /// `fdb_kill` faults (one `fdbserver` SIGKILLed) the run must inject.
    #[serde(default)]
    pub min_fdb_kills: u64,
    /// Upper bounds on recovery p99 by class, seconds (`kill = 2.0`,
    /// `write_gap = 1.5`, any class of `summary::RECOVERY_CLASSES`): a
    /// class with a bound and no measurement fails too.
    #[serde(default)]
    pub max_p99_s: std::collections::BTreeMap<String, f64>,
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read(name.clone(), e))?;
        Scenario::parse(&text).map_err(|e| match e {
            ScenarioError::Parse(_, t) => ScenarioError::Parse(name, t),
            other => other,
        })
    }

    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse(String::new(), e))?;
        s.load.drop_ack_messages = s.faults.drop_ack_messages;
        s.load.reuse_uid_messages = s.faults.reuse_uid_messages;
        s.validate()?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: &str| Err(ScenarioError::Invalid(m.to_string()));
        if self.nodes == 0 || self.nodes > 16 {
            return bad("nodes must be 1..=16");
        }
        // Bounded in time, always: a day is the longest run this accepts.
        if !(self.duration_s > 0.0 && self.duration_s <= 86_400.0) {
            return bad("duration_s must be in (0, 86400]");
        }
        if self.time_scale.is_nan() || self.time_scale <= 0.0 {
            return bad("time_scale must be > 0");
        }
        if self.outbound.enabled && !(self.outbound.rate > 0.0 && self.outbound.drain_limit_s > 0.0) {
            return bad("outbound.rate and outbound.drain_limit_s must be > 0");
        }
        if self.load.accounts == 0 {
            return bad("load.accounts must be > 0");
        }
        let upgrades = self
            .schedule
            .iter()
            .filter(|e| e.fault == crate::schedule::FaultKind::Upgrade);
        if upgrades.clone().next().is_some() && !self.upgrade.enabled {
            return bad("an `upgrade` fault needs [upgrade] enabled = true");
        }
        if upgrades.clone().any(|e| e.node.is_none()) {
            return bad("an `upgrade` fault names its node");
        }
        self.kills.interval.validate("kills.interval")?;
        self.kills.restart_delay.validate("kills.restart_delay")?;
        for (n, f) in [
            ("link_drops", &self.link_drops),
            ("partitions", &self.partitions),
            ("pauses", &self.pauses),
        ] {
            f.interval.validate(&format!("{n}.interval"))?;
            f.duration.validate(&format!("{n}.duration"))?;
        }
        for (i, e) in self.schedule.iter().enumerate() {
            e.validate(i, self.nodes, self.duration_s)?;
            if e.fault.needs_disk() && self.disk.tmpfs_mib.is_none() {
                return Err(ScenarioError::Invalid(format!(
                    "schedule[{i}]: {} needs [disk] tmpfs_mib (the data directory on a small tmpfs; the runner never fills a real disk)",
                    e.fault.name()
                )));
            }
        }
        for (class, limit) in &self.checks.max_p99_s {
            if !crate::summary::RECOVERY_CLASSES.iter().any(|(c, _)| c == class) || limit.is_nan() || *limit <= 0.0 {
                return Err(ScenarioError::Invalid(format!(
                    "checks.max_p99_s: {class:?} = {limit}: a recovery class ({}) and a bound > 0",
                    crate::summary::RECOVERY_CLASSES
                        .iter()
                        .map(|(c, _)| *c)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let fdb_faults = self
            .schedule
            .iter()
            .filter(|e| matches!(e.fault, FaultKind::FdbKill | FaultKind::FdbOutage));
        for e in fdb_faults {
            if self.store.kind != StoreKind::Fdb {
                return bad("fdb_kill and fdb_outage act on the run's cluster: they need [store] kind = \"fdb\"");
            }
            if e.fault == FaultKind::FdbKill && self.store.fdb_processes.unwrap_or(1) < 3 {
                return bad("fdb_kill needs [store] fdb_processes >= 3 (double: one process may go)");
            }
        }
        if self.store.kind == StoreKind::Fdb {
            // Those faults act on the shared SQLite file and data directory.
            if self.disk.tmpfs_mib.is_some()
                || self
                    .schedule
                    .iter()
                    .any(|e| e.fault.needs_disk() || matches!(e.fault, FaultKind::StoreLock | FaultKind::StoreSlow))
            {
                return bad(
                    "[store] kind = \"fdb\" has no shared data directory: no disk or store_lock/store_slow faults",
                );
            }
        }
        if self.disk.tmpfs_mib.is_some_and(|m| !(8..=65_536).contains(&m)) {
            return bad("disk.tmpfs_mib must be 8..=65536");
        }
        Ok(())
    }

    /// Whether the nodes need `MESHMAIL_FAULT_HOOKS=1`.
    pub fn needs_fault_hooks(&self) -> bool {
        self.faults.drop_ack_messages > 0
            || self.faults.reuse_uid_messages > 0
            || self.link_drops.enabled
            || self.partitions.enabled
            || self.schedule.iter().any(|e| {
                e.fault.needs_netns()
                    || matches!(
                        e.fault,
                        FaultKind::LinkDrop | FaultKind::Partition | FaultKind::ClockJump
                    )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_hits_its_quantiles() {
        let d = Dist::new(30.0, 80.0, 130.0);
        assert_eq!(d.quantile(0.1), 30.0);
        assert_eq!(d.quantile(0.5), 80.0);
        assert_eq!(d.quantile(0.9), 130.0);
        let mut rng = rand::rng();
        let mut v: Vec<f64> = (0..20_000).map(|_| d.sample(&mut rng)).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        assert!((v[10_000] - 80.0).abs() < 3.0, "median {}", v[10_000]);
        assert!((v[2_000] - 30.0).abs() < 3.0, "p10 {}", v[2_000]);
        assert!(v[0] > 0.0);
    }

    #[test]
    fn shipped_scenarios_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                Scenario::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 2);
    }

    #[test]
    fn rejects_unbounded() {
        assert!(Scenario::parse("name = \"x\"\nduration_s = 0\n").is_err());
        assert!(Scenario::parse("name = \"x\"\nduration_s = 10\nbogus = 1\n").is_err());
        let s = Scenario::parse("name = \"x\"\nduration_s = 10\n[faults]\ndrop_ack_messages = 1\n").unwrap();
        assert_eq!(s.load.drop_ack_messages, 1);
    }

    #[test]
    fn disk_faults_need_a_tmpfs_and_bounds_need_a_class() {
        let disk = "name = \"x\"\nduration_s = 10\n[[schedule]]\nfault = \"disk_full\"\nat_s = [1]\n";
        let e = Scenario::parse(disk).unwrap_err().to_string();
        assert!(e.contains("tmpfs_mib"), "{e}");
        assert!(Scenario::parse(&format!("{disk}[disk]\ntmpfs_mib = 32\n")).is_ok());
        let bound = |b: &str| {
            Scenario::parse(&format!(
                "name = \"x\"\nduration_s = 10\n[checks]\nmax_p99_s = {{ {b} }}\n"
            ))
        };
        assert!(bound("kill = 2.0").is_ok());
        assert!(bound("write_gap = 1.5").is_ok());
        assert!(bound("kil = 2.0").is_err());
        assert!(bound("kill = 0").is_err());
    }
}
