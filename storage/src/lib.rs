//! meshmail's durable truth: a transactional ordered key-value store shaped
//! like FoundationDB's model ([`kv`]), its backends (embedded SQLite by
//! default, FoundationDB behind the `fdb` feature), the keyspace layout
//! ([`keyspace`], documented in `docs/KEYSPACE.md`), the mail data model as
//! typed functions over a transaction ([`model`]), and the content-addressed
//! blob store for message bodies ([`blob`]).
//!
//! Architecture invariant: this crate depends on nothing else of meshmail,
//! and nothing above it sees raw keys. FoundationDB's limits (10 KB keys,
//! 100 KB values, 10 MB and 5 s per transaction) are enforced here on every
//! backend.

pub mod blob;
pub mod clock;
pub mod error;
pub mod keyspace;
pub mod kv;
pub mod model;
pub mod open;

pub use error::{Result, StorageError, TxError};
pub use kv::{Database, Txn};
