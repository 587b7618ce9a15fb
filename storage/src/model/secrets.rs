//! Cluster-wide secrets kept in the store: every node of the mesh, on any
//! machine, must compute the same keyed hashes (SRS), so the key cannot be
//! a per-node file. Created on first use; the read-then-write makes two
//! nodes that race conflict, and the loser's retry reads the winner's key.

use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::Txn;

pub const SECRET_BYTES: usize = 32;

/// The secret called `name`, created (random) if it does not exist yet.
pub async fn get_or_create(txn: &Txn, name: &str) -> Result<[u8; SECRET_BYTES]> {
    let key = keyspace::secret(name);
    if let Some(v) = txn.get(&key).await? {
        return v.as_slice().try_into().map_err(|_| StorageError::Corrupt {
            what: format!("secret {name}"),
            detail: format!("{} bytes, expected {SECRET_BYTES}", v.len()),
        });
    }
    let secret: [u8; SECRET_BYTES] = rand::random();
    txn.set(&key, &secret)?;
    Ok(secret)
}

/// The secret called `name`, if some node created it.
pub async fn get(txn: &Txn, name: &str) -> Result<Option<[u8; SECRET_BYTES]>> {
    match txn.get(&keyspace::secret(name)).await? {
        None => Ok(None),
        Some(v) => v.as_slice().try_into().map(Some).map_err(|_| StorageError::Corrupt {
            what: format!("secret {name}"),
            detail: format!("{} bytes, expected {SECRET_BYTES}", v.len()),
        }),
    }
}
