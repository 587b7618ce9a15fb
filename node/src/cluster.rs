//! `meshmail cluster`: the cluster CA and node certificates of the mesh.
//! Both work offline, on files only (no store, no running node).

use std::path::{Path, PathBuf};

use anyhow::Context;
use meshmail_mesh::{ClusterCa, NodeId};

use crate::config::Config;

fn cluster_dir(cfg: &Config, dir: Option<&Path>) -> PathBuf {
    dir.map(Path::to_path_buf)
        .unwrap_or_else(|| cfg.data_dir.join("cluster"))
}

pub fn init(cfg: &Config, dir: Option<&Path>) -> anyhow::Result<()> {
    let dir = cluster_dir(cfg, dir);
    ClusterCa::init(&dir).with_context(|| format!("creating the cluster CA in {}", dir.display()))?;
    println!("cluster CA created in {}", dir.display());
    println!(
        "  {}  (give to every node)",
        dir.join(meshmail_mesh::ca::CA_CERT_FILE).display()
    );
    println!(
        "  {}  (secret: keep it off the nodes once their certificates are issued)",
        dir.join(meshmail_mesh::ca::CA_KEY_FILE).display()
    );
    println!("next: meshmail cluster cert NODE --dir {}", dir.display());
    Ok(())
}

pub fn cert(cfg: &Config, node: &str, dir: Option<&Path>) -> anyhow::Result<()> {
    let dir = cluster_dir(cfg, dir);
    let node_id = NodeId::new(node)?;
    let ca = ClusterCa::load(&dir).with_context(|| {
        format!(
            "loading the cluster CA from {} (run `meshmail cluster init` first)",
            dir.display()
        )
    })?;
    let files = ca
        .issue_node_cert(&node_id, &dir)
        .with_context(|| format!("issuing a certificate for {node_id}"))?;
    println!("certificate for node {node_id}:");
    println!("  {}", files.cert.display());
    println!("  {}  (secret, mode 0600)", files.key.display());
    Ok(())
}
