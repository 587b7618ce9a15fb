//! The typed contracts of a node's `GET /status` and `GET /mesh/events`:
//! the server serializes a [`NodeStatus`] (a [`MeshEvent`] per line), and
//! `meshmail status --node`, `meshmail node drain`, the chaos runner and
//! the soak harness deserialize the same structs, so a renamed or retyped
//! field breaks the build (or fails loudly at parse time) instead of
//! reading as 0.
//!
//! It lives in `mesh` because almost all of it is the mesh's view (members,
//! links, leases); the few node-level fields (backend, actor counts) are
//! plain numbers and strings, so this crate still depends only on storage.

use std::collections::BTreeMap;

use meshmail_storage::model::format_switch::FormatRange;
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
    /// The build this node runs (None from builds before the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The store formats this node supports (its pin applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formats: Option<FormatRange>,
    /// The store format this node writes now: the store's, as last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_format: Option<u32>,
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

/// The `kind` of a `/mesh/events` line the node writes. The chaos runner
/// records actions of its own (kills, restarts) in the same timeline with
/// other kinds, so the field stays a string.
pub mod event_kind {
    /// The stream's first line: who is observing.
    pub const HELLO: &str = "hello";
    /// A link to `node` in `generation` came up (or was up when the stream
    /// began: `reason` "snapshot").
    pub const UP: &str = "up";
    /// A link went down; `reason` says why.
    pub const DOWN: &str = "down";
    /// The stream fell behind and `missed` events were dropped.
    pub const LAGGED: &str = "lagged";
}

/// One line of `GET /mesh/events` (NDJSON): a link up or down as the
/// observer saw it, in wall-clock milliseconds so the streams of several
/// nodes merge into one timeline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MeshEvent {
    pub ts_ms: u64,
    pub observer: String,
    #[serde(default)]
    pub observer_generation: u64,
    /// One of [`event_kind`] on a node's stream.
    pub kind: String,
    /// The peer; empty on `hello` and `lagged` lines.
    #[serde(default)]
    pub node: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub reason: String,
    /// Events dropped, on a `lagged` line only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
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

    #[test]
    fn event_lines_keep_their_documented_shape() {
        // A hello line names no peer; the reader must still take it.
        let hello: MeshEvent =
            serde_json::from_str(r#"{"ts_ms":5,"observer":"a","observer_generation":2,"kind":"hello"}"#)
                .expect("hello");
        assert_eq!(
            (hello.kind.as_str(), hello.node.as_str(), hello.missed),
            (event_kind::HELLO, "", None)
        );
        // `missed` is written on lagged lines only.
        let up = MeshEvent {
            kind: event_kind::UP.into(),
            node: "b".into(),
            generation: 3,
            ..MeshEvent::default()
        };
        let line = serde_json::to_string(&up).expect("up");
        assert!(!line.contains("missed") && line.contains(r#""kind":"up""#), "{line}");
        let lagged = MeshEvent {
            kind: event_kind::LAGGED.into(),
            missed: Some(7),
            ..MeshEvent::default()
        };
        let back: MeshEvent = serde_json::from_str(&serde_json::to_string(&lagged).expect("lagged")).expect("parse");
        assert_eq!(back, lagged);
        // A line without a timestamp is not an event.
        assert!(serde_json::from_str::<MeshEvent>(r#"{"observer":"a","kind":"up"}"#).is_err());
    }
}
