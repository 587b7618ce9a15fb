//! The mesh between nodes: QUIC transport (quinn + rustls, mutual TLS),
//! generation-numbered node identity, membership and failure detection,
//! shard ownership by leases with fencing, shard migration, and remote actor
//! messaging with `ractor_cluster` over QUIC streams.
//!
//! Architecture invariant: depends only on `meshmail-storage` (generations
//! and leases live in the store). Membership, placement and lease logic stay
//! apart from the transport so a deterministic simulator can drive them.
//! Not built yet: see docs/ARCHITECTURE.md.
