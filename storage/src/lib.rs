//! meshmail's durable truth: a transactional ordered key-value store shaped
//! like FoundationDB's model ([`kv`]), its backends (embedded SQLite by
//! default, FoundationDB behind the `fdb` feature), the keyspace layout
//! (`keyspace`, private to this crate, documented in `docs/KEYSPACE.md`),
//! the mail data model as typed functions over a transaction ([`model`], its
//! ids in [`ids`]), and the content-addressed blob store for message bodies
//! ([`blob`]).
//!
//! Architecture invariant: this crate depends on nothing else of meshmail,
//! and nothing above it sees raw keys: `keyspace` is `pub(crate)`, so a
//! caller that needs a key read or written gets a typed function here.
//! FoundationDB's limits (10 KB keys, 100 KB values, 10 MB and 5 s per
//! transaction) are enforced here on every backend.

pub mod backup;
pub mod blob;
pub mod clock;
pub mod error;
pub mod fdb_local;
pub mod ids;
pub(crate) mod keyspace;
pub mod kv;
pub mod model;
pub mod open;

/// Raw keys for this crate's own integration tests (`storage/tests/`),
/// which corrupt and inspect rows behind the model's back (feature
/// `test-support`, which only storage's dev-dependency on itself turns on:
/// a crate above `storage` that used it would not build on its own).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod test_keys {
    pub use crate::keyspace::{
        account_ranges, blob_deleting, blob_inline, blob_inline_v1, blob_refs, counter, mailbox, message,
        message_by_date, message_summary, thread_member, unseen,
    };
}

pub use error::{Result, StorageError, TxError};
pub use kv::{Database, Txn};
