//! `[store] kind = "fdb"`: the nodes as separate hosts. The runner starts a
//! one-process FoundationDB cluster of its own (`meshmail_storage::
//! fdb_local`, `configure new single ssd`) listening on the namespaces'
//! bridge address (127.0.0.1 without namespaces), gives the run an S3
//! bucket of its own on the S3 server the scenario names, relayed onto the
//! bridge, and writes the `[store]` and `[blobs]` tables every node and
//! every admin command is given. Each node then runs with a data directory
//! of its own holding only its cluster certificate (see
//! `LocalMesh::separate_data_dirs`): what the nodes share goes over the
//! network, as between machines.
//!
//! Partitions cut nodes off from each other, not from the store: the
//! cluster's address is the bridge's, which no namespace fault names.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use meshmail_storage::fdb_local::{self, LocalFdb};

use crate::scenario::StoreConfig;

/// A running rig; [`StoreRig::stop`] stops the cluster and the relay.
pub struct StoreRig {
    /// Shared with the run, which kills and restarts its processes.
    pub fdb: Arc<tokio::sync::Mutex<LocalFdb>>,
    _relay: Option<tokio::sync::oneshot::Sender<()>>,
    /// The `[store]` and `[blobs]` tables of the nodes' config file.
    pub config_toml: String,
    /// What the report says about the store.
    pub describe: String,
}

impl StoreRig {
    /// `bridge`: the address the namespaced nodes reach the runner on.
    pub async fn start(cfg: &StoreConfig, out: &Path, bridge: Option<IpAddr>) -> anyhow::Result<StoreRig> {
        let env_bin = std::env::var_os("MESHMAIL_FDB_BIN").map(PathBuf::from);
        let Some(bin) = fdb_local::find_bin(cfg.fdb_bin.as_deref().or(env_bin.as_deref())) else {
            bail!(
                "[store] kind = \"fdb\" needs fdbserver and fdbcli: give [store] fdb_bin, or MESHMAIL_FDB_BIN \
                 (eval \"$(.ci/fdb.sh start)\" exports it), or put them on PATH"
            );
        };
        let ip = bridge.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        // Under OUT/data: deleted with the nodes' data after the report
        // (unless --keep-data).
        let processes = cfg.fdb_processes.unwrap_or(1).max(1);
        let listens = (0..processes)
            .map(|_| Ok(SocketAddr::new(ip, free_port(ip)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let fdb = LocalFdb::start_processes(&bin, &out.join("data").join("fdb"), &listens).await?;
        let endpoint = match &cfg.s3_endpoint {
            Some(e) => e.clone(),
            None => std::env::var("MESHMAIL_TEST_S3_ENDPOINT").context(
                "[store] kind = \"fdb\" needs an S3 server: give [store] s3_endpoint, or MESHMAIL_TEST_S3_ENDPOINT \
                 (eval \"$(.ci/s3-emulator.sh start)\" exports it)",
            )?,
        };
        let bucket = cfg
            .s3_bucket
            .clone()
            .unwrap_or_else(|| format!("meshmail-chaos-{}", std::process::id()));
        create_bucket(&endpoint, &bucket)?;
        let (node_endpoint, relay) = match bridge {
            Some(ip) => {
                let upstream = endpoint_addr(&endpoint)?;
                let on_bridge = SocketAddr::new(ip, free_port(ip)?);
                // The runner's own namespace: setns to it changes nothing,
                // and the relay's listener sits on the bridge's leg.
                let stop = crate::relay::spawn_in_netns("/proc/self/ns/net", vec![(on_bridge, upstream)])?;
                (format!("http://{on_bridge}"), Some(stop))
            }
            None => (endpoint.clone(), None),
        };
        let mut config_toml = format!(
            "[store]\nkind = \"fdb\"\ncluster_file = {cluster:?}\n\n\
             [blobs]\nkind = \"s3\"\nendpoint = {node_endpoint:?}\nbucket = {bucket:?}\nregion = \"us-east-1\"\n\
             access_key_id = \"testing\"\nsecret_access_key = \"testing\"\nallow_http = true\n",
            cluster = fdb.cluster_file.display().to_string(),
        );
        if let Some(t) = cfg.smtp_delivery_timeout_s {
            config_toml.push_str(&format!("\n[smtp]\ndelivery_timeout_s = {t}\n"));
        }
        let shape = if processes == 1 {
            "one process, ssd".to_string()
        } else {
            format!("{processes} processes, double ssd")
        };
        let describe = format!(
            "FoundationDB on {ip} ({shape}), bodies in S3 bucket {bucket} at {node_endpoint}, \
             a data directory per node"
        );
        eprintln!("chaos: {describe}");
        Ok(StoreRig {
            fdb: Arc::new(tokio::sync::Mutex::new(fdb)),
            _relay: relay,
            config_toml,
            describe,
        })
    }

    pub async fn stop(self) {
        self.fdb.lock().await.stop().await;
    }
}

/// A port free on `ip` now (the cluster or relay binds it right after).
fn free_port(ip: IpAddr) -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind(SocketAddr::new(ip, 0)).with_context(|| format!("binding {ip}:0"))?;
    Ok(l.local_addr()?.port())
}

/// `http://host:port` → the socket address (the S3 server is local).
fn endpoint_addr(endpoint: &str) -> anyhow::Result<SocketAddr> {
    let hostport = endpoint
        .strip_prefix("http://")
        .context("the S3 endpoint must be http://HOST:PORT")?
        .trim_end_matches('/');
    use std::net::ToSocketAddrs;
    hostport
        .to_socket_addrs()?
        .next()
        .with_context(|| format!("resolving {hostport}"))
}

/// Creates the bucket (S3 CreateBucket, a PUT; the emulator takes it
/// unsigned). One that exists already is fine.
fn create_bucket(endpoint: &str, bucket: &str) -> anyhow::Result<()> {
    let url = format!("{}/{bucket}", endpoint.trim_end_matches('/'));
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "PUT",
            "--max-time",
            "10",
            &url,
        ])
        .output()
        .context("running curl to create the S3 bucket")?;
    let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match code.as_str() {
        "200" | "409" => Ok(()),
        _ => bail!("creating S3 bucket {url}: HTTP {code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_addresses() {
        assert_eq!(
            endpoint_addr("http://127.0.0.1:9000/").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert!(endpoint_addr("https://s3.example:443").is_err());
    }
}
