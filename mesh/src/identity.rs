//! Generation-numbered identity: node ids, the hello frame, the close codes
//! a refusal carries, and the table of the highest generation seen per id.
//!
//! Everything here is pure (no sockets, no clock) so that a deterministic
//! simulator can drive the same admission rules as the real transport.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{MeshError, Result};

/// Version of the mesh wire protocol carried in the hello; a peer speaking
/// another version is refused rather than misread.
pub const MESH_VERSION: u32 = 1;

/// Largest hello frame accepted. A hello is ~100 bytes; the cap keeps a
/// hostile peer from making us buffer anything big before it is identified.
pub const MAX_HELLO_BYTES: usize = 1024;

/// A node's name in the mesh: 1 to 63 of `[a-z0-9-]`, so that it is a valid
/// DNS label and can be the certificate's SAN, a file name and a metric label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(String);

impl NodeId {
    pub fn new(id: impl Into<String>) -> Result<NodeId> {
        let id = id.into();
        let valid = (1..=63).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if valid {
            Ok(NodeId(id))
        } else {
            Err(MeshError::InvalidNodeId(id))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NodeId {
    type Error = MeshError;
    fn try_from(s: String) -> Result<NodeId> {
        NodeId::new(s)
    }
}

impl From<NodeId> for String {
    fn from(id: NodeId) -> String {
        id.0
    }
}

impl std::str::FromStr for NodeId {
    type Err = MeshError;
    fn from_str(s: &str) -> Result<NodeId> {
        NodeId::new(s)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The first frame on a link, sent by both sides. Its `node_id` is a claim
/// that must match the certificate; its `generation` is what the certificate
/// cannot say (a restarted node keeps its certificate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub node_id: NodeId,
    pub generation: u64,
    pub mesh_version: u32,
}

impl Hello {
    /// The frame: a big-endian u32 length, then the JSON body.
    pub fn encode(&self) -> Vec<u8> {
        let body = serde_json::to_vec(self).expect("a hello always serializes");
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&body);
        frame
    }

    /// Parses a frame body (without its length prefix).
    pub fn decode(body: &[u8]) -> Result<Hello> {
        serde_json::from_slice(body).map_err(|e| MeshError::Hello(format!("malformed hello: {e}")))
    }
}

/// Application close codes of the mesh. A refusal closes the whole QUIC
/// connection with one of these and a human-readable reason, so the refused
/// side can tell why without a further round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// Orderly shutdown of an endpoint or a link.
    Normal,
    /// The hello claimed another node id than the certificate's.
    IdMismatch,
    /// The hello carried a generation lower than one already seen for that id.
    StaleGeneration,
    /// A higher generation of the same id connected: this (older) link is closed.
    Superseded,
    /// The same incarnation already has a live link.
    Duplicate,
    /// The hello was missing, malformed or late.
    BadHello,
    /// Another mesh protocol version.
    Version,
    /// The certificate passed the chain check but names no valid node id.
    BadCert,
    /// The peer is this very node.
    SelfConnect,
}

impl CloseCode {
    pub const ALL: [CloseCode; 9] = [
        CloseCode::Normal,
        CloseCode::IdMismatch,
        CloseCode::StaleGeneration,
        CloseCode::Superseded,
        CloseCode::Duplicate,
        CloseCode::BadHello,
        CloseCode::Version,
        CloseCode::BadCert,
        CloseCode::SelfConnect,
    ];

    /// The QUIC application error code on the wire.
    pub fn code(self) -> u32 {
        match self {
            CloseCode::Normal => 0,
            CloseCode::IdMismatch => 0x4d01,
            CloseCode::StaleGeneration => 0x4d02,
            CloseCode::Superseded => 0x4d03,
            CloseCode::Duplicate => 0x4d04,
            CloseCode::BadHello => 0x4d05,
            CloseCode::Version => 0x4d06,
            CloseCode::BadCert => 0x4d07,
            CloseCode::SelfConnect => 0x4d08,
        }
    }

    pub fn from_code(code: u64) -> Option<CloseCode> {
        CloseCode::ALL.into_iter().find(|c| u64::from(c.code()) == code)
    }

    /// The `reason` label of `meshmail_mesh_refused_total`.
    pub fn label(self) -> &'static str {
        match self {
            CloseCode::Normal => "normal",
            CloseCode::IdMismatch => "id_mismatch",
            CloseCode::StaleGeneration => "stale_generation",
            CloseCode::Superseded => "superseded",
            CloseCode::Duplicate => "duplicate",
            CloseCode::BadHello => "bad_hello",
            CloseCode::Version => "version",
            CloseCode::BadCert => "bad_cert",
            CloseCode::SelfConnect => "self",
        }
    }
}

/// A refusal decided by the rules below: what to close the connection with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: CloseCode,
    pub reason: String,
}

impl Refusal {
    pub fn new(code: CloseCode, reason: impl Into<String>) -> Refusal {
        Refusal {
            code,
            reason: reason.into(),
        }
    }
}

/// Checks a received hello against what the TLS layer proved: `cert_id` is
/// the node id read from the peer certificate, the only identity we trust.
pub fn check_hello(local: &NodeId, cert_id: &NodeId, hello: &Hello) -> Result<(), Refusal> {
    if hello.mesh_version != MESH_VERSION {
        return Err(Refusal::new(
            CloseCode::Version,
            format!("mesh version {} (we speak {MESH_VERSION})", hello.mesh_version),
        ));
    }
    if &hello.node_id != cert_id {
        return Err(Refusal::new(
            CloseCode::IdMismatch,
            format!(
                "hello claims {:?} but the certificate is {:?}",
                hello.node_id.as_str(),
                cert_id.as_str()
            ),
        ));
    }
    if cert_id == local {
        return Err(Refusal::new(CloseCode::SelfConnect, "connected to itself"));
    }
    Ok(())
}

/// The highest generation seen per node id. It only grows, and it outlives
/// links: an incarnation that was superseded stays refused after the newer
/// one disconnects, so a stale process can never come back in between.
#[derive(Debug, Default, Clone)]
pub struct GenerationTable {
    highest: HashMap<NodeId, u64>,
}

impl GenerationTable {
    pub fn new() -> GenerationTable {
        GenerationTable::default()
    }

    pub fn highest(&self, id: &NodeId) -> Option<u64> {
        self.highest.get(id).copied()
    }

    /// Records `generation` for `id` unless it is lower than the highest seen.
    /// Equal is accepted: a link of the same incarnation may come back.
    pub fn observe(&mut self, id: &NodeId, generation: u64) -> Result<(), Refusal> {
        match self.highest.get(id) {
            Some(&seen) if generation < seen => Err(Refusal::new(
                CloseCode::StaleGeneration,
                format!("generation {generation} of {id} is older than {seen}"),
            )),
            _ => {
                self.highest.insert(id.clone(), generation);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    #[test]
    fn node_ids_are_dns_labels() {
        for ok in ["a", "node-1", "0", &"x".repeat(63)] {
            assert!(NodeId::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "a.b", "a_b", "é", "a b", "../x", &"x".repeat(64)] {
            assert!(NodeId::new(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<NodeId>("\"UPPER\"").is_err());
    }

    #[test]
    fn hello_round_trips_and_rejects_junk() {
        let hello = Hello {
            node_id: id("b"),
            generation: 7,
            mesh_version: MESH_VERSION,
        };
        let frame = hello.encode();
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        assert_eq!(Hello::decode(&frame[4..]).unwrap(), hello);
        assert!(Hello::decode(b"{\"node_id\":\"B\",\"generation\":1,\"mesh_version\":1}").is_err());
        assert!(Hello::decode(b"\xff").is_err());
    }

    #[test]
    fn hello_must_match_certificate_and_version() {
        let (me, b) = (id("a"), id("b"));
        let mut hello = Hello {
            node_id: b.clone(),
            generation: 1,
            mesh_version: MESH_VERSION,
        };
        assert!(check_hello(&me, &b, &hello).is_ok());
        assert_eq!(
            check_hello(&me, &id("c"), &hello).unwrap_err().code,
            CloseCode::IdMismatch
        );
        hello.node_id = me.clone();
        assert_eq!(check_hello(&me, &me, &hello).unwrap_err().code, CloseCode::SelfConnect);
        hello.mesh_version = MESH_VERSION + 1;
        assert_eq!(check_hello(&me, &me, &hello).unwrap_err().code, CloseCode::Version);
    }

    #[test]
    fn generations_never_go_back() {
        let mut table = GenerationTable::new();
        let b = id("b");
        table.observe(&b, 2).unwrap();
        table.observe(&b, 2).unwrap();
        assert_eq!(table.observe(&b, 1).unwrap_err().code, CloseCode::StaleGeneration);
        table.observe(&b, 5).unwrap();
        assert_eq!(table.highest(&b), Some(5));
        table.observe(&id("c"), 0).unwrap();
    }

    #[test]
    fn close_codes_round_trip() {
        for c in CloseCode::ALL {
            assert_eq!(CloseCode::from_code(u64::from(c.code())), Some(c));
        }
        assert_eq!(CloseCode::from_code(12345), None);
    }
}
