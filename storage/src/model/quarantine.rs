//! Poison quarantine: deliveries (or commands) that failed three times, kept
//! durably with the reason until an operator redelivers or drops them.

use serde::{Deserialize, Serialize};

use super::{decode, get_record, put_record};
use crate::error::Result;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Failures before a delivery is quarantined.
pub const ATTEMPTS_MAX: i64 = 3;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct QuarantineRecord {
    pub id: [u8; 16],
    /// The acceptance this item came from, if it was acknowledged.
    pub acceptance_id: Option<[u8; 16]>,
    pub reason: String,
    pub attempts: i64,
    pub quarantined_ms: u64,
    /// What is needed to redeliver: recipient and body reference.
    pub recipient: String,
    pub body_hash: String,
    pub body_size: u64,
    /// What a redelivery needs besides the body (account, mailbox, flags,
    /// summaries), as the actors crate serialized it.
    #[serde(default)]
    pub request: serde_json::Value,
}

pub fn put(txn: &Txn, record: &QuarantineRecord) -> Result<()> {
    put_record(txn, &keyspace::quarantine(&record.id), record)
}

pub async fn get(txn: &Txn, id: &[u8; 16]) -> Result<Option<QuarantineRecord>> {
    get_record(txn, &keyspace::quarantine(id), "quarantine record").await
}

pub fn remove(txn: &Txn, id: &[u8; 16]) -> Result<()> {
    txn.clear(&keyspace::quarantine(id))
}

pub async fn list(txn: &Txn, limit: usize) -> Result<Vec<QuarantineRecord>> {
    let (b, e) = keyspace::quarantine_all();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    rows.iter().map(|(_, v)| decode("quarantine record", v)).collect()
}

/// Counts one failed attempt of a delivery durably; returns the new count.
/// Written in its own small transaction *before* the retry, so the count
/// survives a crash of the node (and a move of the shard to another node).
pub async fn count_failure(txn: &Txn, delivery_id: &[u8; 16]) -> Result<i64> {
    let key = keyspace::delivery_attempts(delivery_id);
    let n = txn.get_i64(&key).await? + 1;
    txn.set(&key, &n.to_le_bytes())?;
    Ok(n)
}

pub fn clear_failures(txn: &Txn, delivery_id: &[u8; 16]) -> Result<()> {
    txn.clear(&keyspace::delivery_attempts(delivery_id))
}
