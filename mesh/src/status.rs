//! The typed contract of a node's `GET /status`: the server serializes a
//! [`NodeStatus`], and `meshmail status --node` / `meshmail node drain`
//! deserialize the same struct, so a renamed or retyped field breaks the
//! build (or fails loudly at parse time) instead of reading as 0.
//!
//! It lives in `mesh` because almost all of it is the mesh's view (members,
//! links, leases); the few node-level fields (backend, actor counts) are
//! plain numbers and strings, so this crate still depends only on storage.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One node's view of itself and the mesh, as `/status` answers it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NodeStatus {
    /// This node's name and its generation (incarnation number).
    pub node: String,
    pub generation: u64,
    /// "sqlite" or "fdb".
    pub backend: String,
    pub uptime_s: u64,
    /// Shards whose actors this node runs now.
    pub shards_owned: u64,
    /// Shards this incarnation holds a lease for in the store (a drain is
    /// done only when this is 0, not just `shards_owned`).
    pub leases_held: u64,
    pub shard_count: u32,
    /// The last round saw every member it knows in a decided state.
    pub settled: bool,
    pub draining: bool,
    pub members: Vec<MemberView>,
    /// Live (unreleased) leases per owning node name.
    pub owners: BTreeMap<String, u64>,
    /// Shards with no live lease.
    pub unowned: u64,
    pub leases: Vec<LeaseView>,
    /// Live actors by kind.
    pub actors_live: BTreeMap<String, i64>,
}

/// One member as this node sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberView {
    pub node: String,
    pub generation: u64,
    pub addr: Option<String>,
    /// The QUIC link (and its ractor session) right now.
    pub link: LinkState,
    /// The failure detector's verdict.
    pub status: MemberStatus,
    pub draining: bool,
}

/// A member's link as this node sees it; serialized lowercase
/// (`"up"`, `"down"`, `"self"`), the strings `/status` always had.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    Up,
    Down,
    /// The row of the node answering.
    #[serde(rename = "self")]
    Local,
}

/// The failure detector's verdict on a member (`"alive"`, `"suspect"`,
/// `"dead"`, or `"self"` for the node answering).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MemberStatus {
    Alive,
    Suspect,
    Dead,
    #[serde(rename = "self")]
    Local,
}

impl std::fmt::Display for LinkState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkState::Up => "up",
            LinkState::Down => "down",
            LinkState::Local => "self",
        })
    }
}

impl std::fmt::Display for MemberStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MemberStatus::Alive => "alive",
            MemberStatus::Suspect => "suspect",
            MemberStatus::Dead => "dead",
            MemberStatus::Local => "self",
        })
    }
}

/// One live lease: who writes the shard, fenced by which epoch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaseView {
    pub shard: u32,
    pub node: String,
    pub generation: u64,
    pub epoch: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_strings_are_the_documented_ones() {
        let m = MemberView {
            node: "a".into(),
            generation: 3,
            addr: None,
            link: LinkState::Local,
            status: MemberStatus::Local,
            draining: false,
        };
        let s = serde_json::to_string(&m).expect("serialize");
        assert!(
            s.contains(r#""link":"self""#) && s.contains(r#""status":"self""#),
            "{s}"
        );
        let up: LinkState = serde_json::from_str(r#""up""#).expect("up");
        assert_eq!(up, LinkState::Up);
        assert!(serde_json::from_str::<LinkState>(r#""sideways""#).is_err());
    }
}
