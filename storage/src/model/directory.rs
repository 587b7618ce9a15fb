//! The directory's version: one counter that every change to what an SMTP
//! RCPT reads raises (accounts, aliases, domains, quota limits, vacation
//! responses, which Sieve script is active), so a node that caches RCPT
//! answers can tell with one read that they still hold
//! (`protocols::accept::rcpt_cache`).
//!
//! An atomic add: changes never conflict on it, and they are rare (admin
//! commands, JMAP VacationResponse/set), so it is no hot key on
//! FoundationDB either; nodes only read it, each at most a few times a
//! second.

use crate::error::Result;
use crate::keyspace;
use crate::kv::Txn;

/// Records that this transaction changes the directory.
pub fn changed(txn: &Txn) -> Result<()> {
    txn.add_i64(&keyspace::directory_version(), 1)
}

/// The directory's version (0 in a store that never changed it).
pub async fn version(txn: &Txn) -> Result<i64> {
    txn.get_i64(&keyspace::directory_version()).await
}
