//! Attach mode (`meshmail-chaos run SCENARIO --attach CLUSTER.toml`): the
//! scenario runs against a mesh the runner did not start, described by a
//! cluster file (`meshmail_soak::attached::ClusterFile`, documented in
//! chaos/README.md). Before anything is injected, the scenario is checked
//! against what the target offers, and refused with the reason when it
//! asks for more: faults on the node's process or files (pauses, CPU
//! starvation, the store lock), namespaces and the outbound rig need a
//! mesh the runner started; kills need a kill command for the nodes they
//! may hit; link drops, partitions, clock jumps and `[faults]` messages
//! need every node's fault endpoint answering.

use meshmail_soak::attached::ClusterFile;

use crate::scenario::Scenario;
use crate::schedule::FaultKind;

#[derive(Debug, thiserror::Error)]
pub enum AttachRefused {
    #[error("attach mode cannot {0}: it needs a mesh the runner starts itself")]
    NeedsLocalMesh(String),
    #[error("attach mode: kills may hit {node}, but the cluster file gives it no `kill` command")]
    NoKillCommand { node: String },
    #[error("attach mode: schedule[{entry}] names node-{index}, but the cluster file lists {nodes} nodes")]
    NoSuchNode { entry: usize, index: usize, nodes: usize },
    #[error(
        "attach mode: the scenario needs fault endpoints (link drops, partitions, clock jumps or [faults] messages), but {node} ({http}) has none usable: {why}"
    )]
    NoFaultEndpoint {
        node: String,
        http: String,
        why: meshmail_soak::attached::FaultEndpointError,
    },
}

/// The scenario's fault kinds that touch a node's process or files directly.
fn local_only(scn: &Scenario) -> Option<String> {
    if scn.netns.enabled {
        return Some("run nodes in network namespaces ([netns])".into());
    }
    if scn.outbound.enabled {
        return Some("run the outbound rig ([outbound] configures the nodes)".into());
    }
    if scn.store.kind == crate::scenario::StoreKind::Fdb {
        return Some("start its own store ([store] kind = \"fdb\" starts a FoundationDB cluster)".into());
    }
    if scn.disk.tmpfs_mib.is_some() {
        return Some("put the data directory on a tmpfs ([disk]: disk faults need the store's files)".into());
    }
    if scn.pauses.enabled {
        return Some("pause nodes ([pauses]: SIGSTOP needs the node's pid)".into());
    }
    scn.schedule.iter().find_map(|e| match e.fault {
        FaultKind::Pause => Some("pause nodes (SIGSTOP needs the node's pid)".into()),
        FaultKind::Starve => Some("starve nodes (needs the node's threads)".into()),
        FaultKind::StoreLock | FaultKind::StoreSlow => Some("lock the store (needs the store file)".into()),
        FaultKind::DiskFull | FaultKind::BlobReadonly => {
            Some(format!("inject {} (needs the data directory)", e.fault.name()))
        }
        k if k.needs_netns() => Some(format!("inject {} (needs namespaces)", k.name())),
        _ => None,
    })
}

/// Fits the scenario to the cluster (`nodes` becomes the cluster's node
/// count: node-i is the i-th `[[node]]`) and refuses what the target
/// cannot take; probes the fault endpoints when the scenario needs them.
pub async fn check(scn: &mut Scenario, cluster: &ClusterFile) -> Result<(), AttachRefused> {
    if let Some(what) = local_only(scn) {
        return Err(AttachRefused::NeedsLocalMesh(what));
    }
    scn.nodes = cluster.node.len();
    for (entry, e) in scn.schedule.iter().enumerate() {
        if let Some(index) = e.node.as_deref().and_then(crate::schedule::node_index)
            && index >= cluster.node.len()
        {
            return Err(AttachRefused::NoSuchNode {
                entry,
                index,
                nodes: cluster.node.len(),
            });
        }
    }
    let random_kills = scn.kills.enabled
        || scn
            .schedule
            .iter()
            .any(|e| e.fault == FaultKind::Kill && e.node.is_none());
    for (i, n) in cluster.node.iter().enumerate() {
        let named = scn
            .schedule
            .iter()
            .any(|e| e.fault == FaultKind::Kill && e.node.as_deref().and_then(crate::schedule::node_index) == Some(i));
        if (random_kills || named) && n.kill.is_none() {
            return Err(AttachRefused::NoKillCommand { node: n.name.clone() });
        }
    }
    if scn.needs_fault_hooks() {
        for n in &cluster.node {
            if let Err(why) = meshmail_soak::attached::fault_endpoint(&n.http).await {
                return Err(AttachRefused::NoFaultEndpoint {
                    node: n.name.clone(),
                    http: n.http.clone(),
                    why,
                });
            }
        }
    }
    Ok(())
}
