//! The directory version: one counter that every change to what RCPT
//! routing, the RCPT quota check and the vacation check read (domains,
//! accounts, aliases, quotas, vacation responses) bumps with an atomic add,
//! in the transaction of the change. Caches of those answers (the SMTP
//! route cache) compare it to drop what may have changed, whichever process
//! made the change (a node, or an admin command with no node running).

use crate::error::Result;
use crate::keyspace;
use crate::kv::Txn;

/// Inside the changing transaction: the directory changed. An atomic add,
/// so concurrent changes never conflict on it.
pub fn bump(txn: &Txn) -> Result<()> {
    txn.add_i64(&keyspace::directory_version(), 1)
}

/// The current version (0 for a store that never changed its directory).
pub async fn version(txn: &Txn) -> Result<i64> {
    txn.get_i64(&keyspace::directory_version()).await
}
