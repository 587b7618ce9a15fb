//! FoundationDB's limits, enforced in shared code on every backend so that
//! whatever works on the embedded SQLite default also works in production.

use std::time::Duration;

use crate::error::StorageError;

/// Largest key FoundationDB accepts.
pub const KEY_SIZE_MAX_BYTES: usize = 10_000;
/// Largest value FoundationDB accepts.
pub const VALUE_SIZE_MAX_BYTES: usize = 100_000;
/// Largest amount of mutation bytes one transaction may write.
pub const TXN_WRITE_MAX_BYTES: usize = 10_000_000;
/// Longest a transaction may live (FDB's MVCC window).
pub const TXN_LIFETIME_MAX: Duration = Duration::from_secs(5);

/// The limits one database enforces. Tests shrink the lifetime; nothing else
/// should change them (FDB would not honour larger ones).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub key_size_max_bytes: usize,
    pub value_size_max_bytes: usize,
    pub txn_write_max_bytes: usize,
    pub txn_lifetime_max: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            key_size_max_bytes: KEY_SIZE_MAX_BYTES,
            value_size_max_bytes: VALUE_SIZE_MAX_BYTES,
            txn_write_max_bytes: TXN_WRITE_MAX_BYTES,
            txn_lifetime_max: TXN_LIFETIME_MAX,
        }
    }
}

impl Limits {
    pub fn check_key(&self, key: &[u8]) -> Result<(), StorageError> {
        if key.len() > self.key_size_max_bytes {
            return Err(StorageError::KeyTooLarge {
                size: key.len(),
                limit: self.key_size_max_bytes,
            });
        }
        Ok(())
    }

    pub fn check_value(&self, value: &[u8]) -> Result<(), StorageError> {
        if value.len() > self.value_size_max_bytes {
            return Err(StorageError::ValueTooLarge {
                size: value.len(),
                limit: self.value_size_max_bytes,
            });
        }
        Ok(())
    }
}
