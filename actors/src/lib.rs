//! Every supervised actor of a meshmail node (built on `ractor`): the node
//! supervisor, one session actor per client connection, the mailbox shard
//! actors (the single writer of their accounts' mailboxes), the commit
//! batchers that fold many deliveries into one KV transaction, the
//! compactor and the quarantine actor.
//!
//! Architecture invariant: depends only on `meshmail-storage`. Supervisors
//! override ractor's default of stopping when a child exits; a panic in a
//! handler is contained. Not built yet: see docs/ARCHITECTURE.md.
