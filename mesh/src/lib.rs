//! The mesh between nodes: QUIC transport (quinn + rustls, mutual TLS),
//! generation-numbered node identity, membership and failure detection,
//! shard ownership by leases with fencing, shard migration, and remote actor
//! messaging with `ractor_cluster` over QUIC streams.
//!
//! Architecture invariant: depends only on `meshmail-storage` (generations
//! and leases live in the store). Membership, placement and lease logic stay
//! apart from the transport so a deterministic simulator can drive them.
//!
//! # What is here
//! - [`ca`]: the cluster CA and node certificates (rcgen). The node id is a
//!   certificate's only DNS SAN (and its CN); keys are written 0600 and an
//!   existing CA is never overwritten.
//! - [`tls`]: rustls configs, ring provider passed explicitly, TLS 1.3 only,
//!   both sides must present a certificate chained to the cluster CA, ALPN
//!   `meshmail/1`; the peer's node id is read from its certificate.
//! - [`identity`]: node ids, the hello frame `{node_id, generation,
//!   mesh_version}` exchanged on a link's first stream, the close codes of
//!   refusals, and the [`identity::GenerationTable`] (highest generation seen
//!   per id; lower is refused).
//! - [`events`]: NodeUp/NodeDown by subscription and per-incarnation monitors,
//!   from a registry that closes a superseded incarnation and reports it down
//!   strictly before the newer one up; one NodeDown per link.
//! - [`transport`]: [`MeshEndpoint`] over quinn (connect, accept, keep-alive
//!   200 ms and idle timeout 4 s by default; the keep-alive traffic is the
//!   heartbeat the runtime judges silence by, see [`membership`]),
//!   a hook per admitted link, and fault injection (drop links, partition).
//! - [`cluster`]: `ractor_cluster` sessions over QUIC streams of those links,
//!   one gateway actor per node found through process groups, and per-peer
//!   flow control.
//! - [`placement`], [`leases`], [`membership`], [`backoff`]: rendezvous
//!   placement, the store-backed lease manager, the failure detector and
//!   jittered redial schedules — socket-free and clock-free, driven by the
//!   seeded simulation in `tests/simulation.rs`.
//! - [`runtime`]: the control loop that runs them in a node and hands lease
//!   changes to the node through [`runtime::ShardHost`].
//! - [`registry`]: forgotten nodes (`meshmail node forget`) leave the
//!   directory and the quorum; this node's sign of life every second.
//! - [`status`]: the typed `/status` contract ([`status::NodeStatus`]) the
//!   node serves and its admin commands parse.
//!
//! Metrics: `meshmail_mesh_links_up`, `meshmail_mesh_node_events_total{kind}`,
//! `meshmail_mesh_refused_total{reason}`, `meshmail_mesh_member_events_total`,
//! `meshmail_mesh_members_alive|known`, `meshmail_mesh_rpc_seconds`,
//! `meshmail_mesh_casts_dropped_total{reason}`, `meshmail_mesh_rpc_busy_total`,
//! `meshmail_lease_changes_total{kind}`, `meshmail_shards_owned`,
//! `meshmail_mesh_nodes_forgotten_total`.

pub mod backoff;
pub mod balance;
pub mod ca;
pub mod cluster;
mod dials;
pub mod error;
pub mod events;
pub mod identity;
pub mod leases;
pub mod membership;
pub mod placement;
pub mod registry;
pub mod runtime;
pub mod status;
pub mod tls;
pub mod transport;

pub use ca::{ClusterCa, NodeCredentials};
pub use error::{MeshError, Result};
pub use events::{DownReason, NodeEvent};
pub use identity::{CloseCode, Hello, NodeId};
pub use transport::{MeshConfig, MeshEndpoint, PeerLink};
