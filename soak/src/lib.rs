//! Load generation, benchmarks and long-run verifiers. Today: `bench kv`,
//! the storage benchmark; SMTP and IMAP loads come with the protocols.
//!
//! Architecture invariant: talks to meshmail as a client, or (for `bench
//! kv`) through the storage crate's public API; every load loop is bounded
//! in count and in time and stops by itself.

pub mod bench_imap;
pub mod bench_kv;
pub mod bench_smtp;
pub mod imap_client;
pub mod node_proc;
