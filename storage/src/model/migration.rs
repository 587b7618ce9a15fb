//! Checkpoints of `meshmail migrate` (issue 42 item 4): per account, per
//! source server and folder, the source folder's UIDVALIDITY and the
//! highest UID copied, so a run after a kill (on any machine that reaches
//! the store) resumes where the last one stopped. In the store rather than
//! a state file: the account's data lives here, on SQLite or FoundationDB,
//! and goes with the account when it is deleted. One small record per
//! folder, written in one transaction after each copied batch.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{get_record, put_record};
use crate::error::{Result, StorageError};
use crate::ids::AccountId;
use crate::keyspace;
use crate::kv::Txn;

/// Longest source URL or folder name kept (the record stays small).
pub const NAME_BYTES_MAX: usize = 1024;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Checkpoint {
    /// `imap://user@host:port`, as the operator gave it.
    pub source: String,
    /// The folder's name on the source server (its own separator).
    pub folder: String,
    pub uidvalidity: u32,
    /// Every source message with a UID up to this one is copied (or was
    /// refused and reported): the next run asks for the ones above.
    pub last_uid: u32,
    /// The highest UID this migration stored in the target folder when
    /// the checkpoint was written: a resumed run compares content hashes
    /// only with messages above it (those of the interrupted batch), so a
    /// folder holding two identical messages still gets both.
    pub target_uid: u32,
}

/// The record's key: hashed, so a long URL or name never makes a long key.
fn key(account: AccountId, source: &str, folder: &str) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update([0]);
    h.update(folder.as_bytes());
    keyspace::migration_checkpoint(account, &hex::encode(h.finalize()))
}

pub async fn get(txn: &Txn, account: AccountId, source: &str, folder: &str) -> Result<Option<Checkpoint>> {
    let found: Option<Checkpoint> = get_record(txn, &key(account, source, folder), "migration checkpoint").await?;
    // A hash collision would be astronomically rare; checking costs nothing.
    Ok(found.filter(|c| c.source == source && c.folder == folder))
}

/// Writes (or replaces) a folder's checkpoint.
pub fn put(txn: &Txn, account: AccountId, c: &Checkpoint) -> Result<()> {
    if c.source.len() > NAME_BYTES_MAX || c.folder.len() > NAME_BYTES_MAX {
        return Err(StorageError::Model(format!(
            "migration source or folder longer than {NAME_BYTES_MAX} bytes"
        )));
    }
    put_record(txn, &key(account, &c.source, &c.folder), c)
}
