//! What a chaos run sets up before its nodes start: the network
//! namespaces (`[netns]`), the store rig (`[store] kind = "fdb"`), the
//! outbound rig (`[outbound]`), the nodes' config file, and the mesh's
//! data, accounts and certificates; then each node moved into its
//! namespace. Or, with `--attach`, the mesh described by a cluster file.

use std::path::Path;

use meshmail_soak::cluster::LocalMesh;

use crate::netns::Netns;
use crate::outbound::{OutboundDriver, OutboundRig};
use crate::scenario::{Scenario, StoreKind};
use crate::store_rig::StoreRig;

/// With `[netns] enabled`: creates the namespaces (after removing stale
/// ones). Returns them (None: transport faults only) and what the report
/// calls the network.
fn create_namespaces(scn: &Scenario) -> anyhow::Result<(Option<Netns>, String)> {
    if !scn.netns.enabled {
        return Ok((None, "transport".into()));
    }
    if let Some(why) = crate::netns::unavailable() {
        if scn.netns.require {
            anyhow::bail!("[netns] require = true, but namespaces are unavailable: {why}");
        }
        eprintln!("chaos: network namespaces unavailable ({why}); namespace faults use the transport's fault endpoint");
        return Ok((None, format!("transport (namespaces unavailable: {why})")));
    }
    for gone in crate::netns::remove_stale() {
        eprintln!("chaos: removed {gone} (left by a runner that is gone)");
    }
    let net = Netns::create(scn.nodes)?;
    let netem = if net.netem { "netem" } else { "no netem in this kernel" };
    Ok((Some(net), format!("netns ({netem})")))
}

/// Moves every node into its own namespace, behind relays for its client
/// ports.
fn place_in_namespaces(net: &mut Netns, mesh: &mut LocalMesh) -> anyhow::Result<()> {
    for (i, slot) in mesh.slots.iter_mut().enumerate() {
        let port = |a: &str| a.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).unwrap_or(0);
        let a = slot.addrs.clone();
        let ip = net.node_ip(i);
        let mut bind = a.clone();
        bind.mesh = format!("{ip}:{}", port(&a.mesh));
        let reach = |x: &str| format!("{ip}:{}", port(x));
        slot.addrs.smtp = reach(&a.smtp);
        slot.addrs.submission = reach(&a.submission);
        slot.addrs.imap = reach(&a.imap);
        slot.addrs.http = reach(&a.http);
        slot.addrs.mesh = bind.mesh.clone();
        slot.bind = Some(bind);
        slot.launch_prefix = net.launch_prefix(i);
        net.relay(i, &[port(&a.smtp), port(&a.submission), port(&a.imap), port(&a.http)])?;
    }
    eprintln!(
        "chaos: nodes in namespaces {}..{} on 10.213.x.0/24",
        net.ns(0),
        net.ns(mesh.slots.len() - 1)
    );
    Ok(())
}

/// What a run starts before its nodes: the mesh's data and processes'
/// settings, the namespaces, the outbound rig and the store rig.
pub(crate) struct Prepared {
    pub mesh: LocalMesh,
    pub netns: Option<Netns>,
    pub network: String,
    pub outbound: Option<(OutboundRig, Option<OutboundDriver>)>,
    pub store: Option<StoreRig>,
}

/// Sets up everything [`Prepared`] holds. The namespaces come first: a
/// `[store] kind = "fdb"` rig listens on their bridge, and the admin
/// commands that create the accounts need that store.
pub(crate) async fn prepare(
    scn: &mut Scenario,
    out: &Path,
    bin: &Path,
    attach: Option<&meshmail_soak::attached::ClusterFile>,
) -> anyhow::Result<Prepared> {
    if let Some(cluster) = attach {
        crate::attach::check(scn, cluster).await?;
        let mesh = LocalMesh::attach(bin, cluster, scn.load.accounts, &out.join("logs")).await?;
        let (netns, network) = create_namespaces(scn)?;
        return finish_prepare(mesh, netns, network, None, None);
    }
    let (netns, mut network) = create_namespaces(scn)?;
    let store = match scn.store.kind {
        StoreKind::Shared => None,
        StoreKind::Fdb => {
            let bridge = netns.as_ref().map(|n| n.host_ip().parse()).transpose()?;
            Some(StoreRig::start(&scn.store, out, bridge).await?)
        }
    };
    // The nodes' config file, when the scenario needs one: top-level keys
    // first, then the outbound rig's tables, then the store's.
    let mut node_config = String::new();
    if scn.disk.blob_bodies {
        node_config.push_str("inline_max_bytes = 0\n\n");
    }
    let outbound = if scn.outbound.enabled {
        let rig = OutboundRig::start(&scn.outbound, out)?;
        node_config.push_str(&std::fs::read_to_string(&rig.config_path)?);
        Some((rig, None))
    } else {
        None
    };
    let mut env: Vec<(String, String)> = scn.upgrade.setup_env().into_iter().collect();
    if scn.needs_fault_hooks() {
        env.push(("MESHMAIL_FAULT_HOOKS".to_string(), "1".to_string()));
    }
    let config_path = out.join("node.toml");
    if let Some(rig) = &store {
        node_config.push('\n');
        node_config.push_str(&rig.config_toml);
        // Through the environment, the admin commands (accounts, verify
        // ledger) find the store too, not only `serve`.
        env.push(("MESHMAIL_CONFIG".into(), config_path.display().to_string()));
        network = format!("{network}; store: {}", rig.describe);
    }
    if !node_config.is_empty() {
        std::fs::write(&config_path, node_config)?;
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
    mesh.separate_data_dirs = store.is_some();
    scn.upgrade.make_nodes_old(&mut mesh);
    if config_path.exists() {
        mesh.extra_args = vec!["--config".into(), config_path.display().to_string()];
    }
    finish_prepare(mesh, netns, network, outbound, store)
}

fn finish_prepare(
    mut mesh: LocalMesh,
    mut netns: Option<Netns>,
    network: String,
    outbound: Option<(OutboundRig, Option<OutboundDriver>)>,
    store: Option<StoreRig>,
) -> anyhow::Result<Prepared> {
    if let Some(net) = &mut netns {
        place_in_namespaces(net, &mut mesh)?;
    }
    Ok(Prepared {
        mesh,
        netns,
        network,
        outbound,
        store,
    })
}
