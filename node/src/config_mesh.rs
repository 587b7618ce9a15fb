//! `[mesh]`: the QUIC mesh between nodes (listen and advertised addresses,
//! peers, membership timings, shard moves and drains).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// The QUIC mesh between nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshSection {
    /// UDP address of the mesh listener, or "off" (default: off, the node
    /// runs alone). Production: a routable address, e.g. "10.0.0.5:7400".
    #[serde(default, with = "crate::config::opt_addr")]
    pub listen: Option<SocketAddr>,
    /// Where other nodes reach this one, if not `listen` (NAT, 0.0.0.0).
    #[serde(default)]
    pub advertise: Option<SocketAddr>,
    /// Peers to join: "NAME@HOST:PORT".
    #[serde(default)]
    pub seeds: Vec<String>,
    /// Cluster CA and this node's certificate (default: <data_dir>/cluster).
    #[serde(default)]
    pub cluster_dir: Option<PathBuf>,
    /// QUIC keep-alive: after this much quiet each side PINGs the other,
    /// and the traffic heard on a link is the mesh's heartbeat.
    #[serde(default = "d_keep_alive")]
    pub keep_alive_ms: u64,
    /// A link with nothing heard this long is closed by QUIC (and redialed).
    /// Failure detection does not wait for it: see `dead_after_ms`.
    #[serde(default = "d_idle_timeout")]
    pub idle_timeout_ms: u64,
    /// A peer silent this long (nothing heard on its link, or no link) is
    /// suspect (counted, nothing moves), then dead: its shards are taken
    /// over. Several `keep_alive_ms` each, so a lost ping or two never
    /// kills a peer.
    #[serde(default = "d_suspect")]
    pub suspect_after_ms: u64,
    #[serde(default = "d_dead")]
    pub dead_after_ms: u64,
    /// Redial backoff bounds (jittered, per peer).
    #[serde(default = "d_redial_min")]
    pub redial_min_ms: u64,
    #[serde(default = "d_redial_max")]
    pub redial_max_ms: u64,
    /// Lease acquisitions (and, separately, hand-offs) per control round:
    /// the takeover throttle. Acquisitions are batched (128 per
    /// transaction), so 512 takes a third of 1024 shards in one round.
    #[serde(default = "d_moves")]
    pub moves_per_round: usize,
    /// How long a control round waits for the shard drains it started (all
    /// at once); drains still running then finish in the background.
    #[serde(default = "d_drain_deadline")]
    pub drain_deadline_ms: u64,
}

impl Default for MeshSection {
    fn default() -> Self {
        MeshSection {
            listen: None,
            advertise: None,
            seeds: Vec::new(),
            cluster_dir: None,
            keep_alive_ms: d_keep_alive(),
            idle_timeout_ms: d_idle_timeout(),
            suspect_after_ms: d_suspect(),
            dead_after_ms: d_dead(),
            redial_min_ms: d_redial_min(),
            redial_max_ms: d_redial_max(),
            moves_per_round: d_moves(),
            drain_deadline_ms: d_drain_deadline(),
        }
    }
}

// The mesh's defaults are the mesh crate's own (one truth; the docs and
// ops/config/*.toml state the same numbers, checked in config_validate).
fn d_keep_alive() -> u64 {
    meshmail_mesh::transport::KEEP_ALIVE_DEFAULT.as_millis() as u64
}
fn d_idle_timeout() -> u64 {
    meshmail_mesh::transport::IDLE_TIMEOUT_DEFAULT.as_millis() as u64
}
fn d_suspect() -> u64 {
    meshmail_mesh::membership::MembershipConfig::default()
        .suspect_after
        .as_millis() as u64
}
fn d_dead() -> u64 {
    meshmail_mesh::membership::MembershipConfig::default()
        .dead_after
        .as_millis() as u64
}
fn d_redial_min() -> u64 {
    meshmail_mesh::membership::MembershipConfig::default()
        .backoff
        .min
        .as_millis() as u64
}
fn d_redial_max() -> u64 {
    meshmail_mesh::membership::MembershipConfig::default()
        .backoff
        .max
        .as_millis() as u64
}
fn d_moves() -> usize {
    meshmail_mesh::runtime::RuntimeConfig::default().moves_per_round
}
fn d_drain_deadline() -> u64 {
    meshmail_mesh::runtime::RuntimeConfig::default()
        .drain_deadline
        .as_millis() as u64
}
