//! The write path tested where it lives: the commit batcher, the delivery
//! path (routing and the ledger check after a lost answer) and the shard
//! actor (fencing, poison), each on a node of this process over a temporary
//! SQLite store, without the mesh or any protocol.
//!
//! One test binary (not one per file) so the actors crate's dependencies are
//! linked once.

mod batcher;
mod common;
mod delivery;
mod shard;
