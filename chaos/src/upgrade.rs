//! `[upgrade]`: a rolling upgrade as a chaos run. Every node starts as the
//! previous release (`old_binary`, or this build pinned to `from_format`
//! with `MESHMAIL_PIN_STORE_FORMAT`), and the admin commands that create
//! the store run pinned too, so it starts at `from_format`. An `upgrade`
//! fault (`[[schedule]] fault = "upgrade"`, one per node) SIGKILLs a node
//! and restarts it on this build, unpinned; kills and the other faults go
//! on meanwhile. At the end every node must write `to_format`: the store
//! switched once the last node ran the new build (the switch itself is
//! `storage::model::format_switch`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use meshmail_soak::cluster::LocalMesh;
use serde::{Deserialize, Serialize};

use meshmail_soak::checks::Check;

/// The environment variable that pins a node's store format.
const PIN_ENV: &str = "MESHMAIL_PIN_STORE_FORMAT";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeConfig {
    #[serde(default)]
    pub enabled: bool,
    /// The previous release's store format.
    #[serde(default = "d_from")]
    pub from_format: u32,
    /// The format every node must write at the end.
    #[serde(default = "d_to")]
    pub to_format: u32,
    /// A build of the previous release; absent: this build, pinned.
    #[serde(default)]
    pub old_binary: Option<PathBuf>,
    /// Seconds the end waits for the switch after the fault phase.
    #[serde(default = "d_wait")]
    pub switch_wait_s: f64,
}

impl Default for UpgradeConfig {
    fn default() -> Self {
        UpgradeConfig {
            enabled: false,
            from_format: d_from(),
            to_format: d_to(),
            old_binary: None,
            switch_wait_s: d_wait(),
        }
    }
}

fn d_from() -> u32 {
    3
}
fn d_to() -> u32 {
    4
}
fn d_wait() -> f64 {
    20.0
}

impl UpgradeConfig {
    /// The environment of the admin commands that set the store up.
    pub fn setup_env(&self) -> Option<(String, String)> {
        self.enabled
            .then(|| (PIN_ENV.to_string(), self.from_format.to_string()))
    }

    /// After setup: the admin commands run unpinned from now on (the
    /// end's `verify ledger` reads the switched store), and every node
    /// starts as the previous release.
    pub fn make_nodes_old(&self, mesh: &mut LocalMesh) {
        if !self.enabled {
            return;
        }
        mesh.remove_env(PIN_ENV);
        for slot in &mut mesh.slots {
            match &self.old_binary {
                Some(bin) => slot.bin = Some(bin.clone()),
                None => slot.env = vec![(PIN_ENV.to_string(), self.from_format.to_string())],
            }
        }
    }
}

/// Makes node `i` start on this build, unpinned, from its next start.
pub fn upgrade_slot(mesh: &mut LocalMesh, i: usize) {
    let slot = &mut mesh.slots[i];
    slot.bin = None;
    slot.env.clear();
}

/// Waits (at most `switch_wait_s`) until every node's `/status` says it
/// writes `to_format`; the check says how long that took, or what each
/// node wrote when time ran out.
pub async fn switched_check(cfg: &UpgradeConfig, mesh: &LocalMesh, upgrades: u64) -> Vec<Check> {
    let nodes = mesh.slots.len() as u64;
    let mut checks = vec![Check::at_least("upgrades", upgrades, nodes)];
    let from = Instant::now();
    let limit = Duration::from_secs_f64(cfg.switch_wait_s);
    let https: Vec<String> = mesh.slots.iter().map(|s| s.addrs.http.clone()).collect();
    loop {
        let mut formats = Vec::new();
        for http in &https {
            formats.push(store_format(http).await);
        }
        let done = formats.iter().all(|f| *f == Some(cfg.to_format));
        if done || from.elapsed() >= limit {
            checks.push(Check {
                name: "store_format_switched".into(),
                value: format!("{formats:?}"),
                ok: done,
                note: format!(
                    "every node writes format {} ({:.1} s after the fault phase; at most {} s)",
                    cfg.to_format,
                    from.elapsed().as_secs_f64(),
                    cfg.switch_wait_s
                ),
            });
            return checks;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn store_format(http: &str) -> Option<u32> {
    let body = meshmail_soak::http::get(http, "/status", Duration::from_millis(700))
        .await
        .ok()?;
    let st: meshmail_mesh::status::NodeStatus = serde_json::from_str(&body).ok()?;
    st.store_format
}
