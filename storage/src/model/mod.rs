//! The mail data model as typed functions over a [`Txn`]: callers never see
//! raw keys or bytes. The writes of a shard's mailboxes take a
//! [`fenced::FencedTxn`] instead, which only the lease check builds. Records are JSON (self-describing, so adding a field
//! with `#[serde(default)]` needs no migration), except the two records
//! written per delivery, the message row and its summary, which have
//! compact versioned binary forms ([`message_codec`], [`summary_codec`],
//! over the primitives of `wire`); counters are little-endian integers so they can
//! be changed with atomic adds.

pub mod account_removal;
pub mod accounts;
pub mod aliases;
pub mod cluster;
pub mod compaction;
pub mod date_order;
pub mod directory;
pub mod dkim;
pub mod domains;
pub mod fenced;
pub mod format_switch;
pub mod jmap;
pub mod ledger;
pub mod ledger_codec;
pub mod mailboxes;
pub mod message_codec;
pub mod message_reads;
pub mod messages;
pub mod migration;
pub mod mta_sts;
pub mod nodes;
pub mod outbound;
pub mod placement;
pub mod quarantine;
pub mod quota;
pub mod secrets;
pub mod sieve;
pub mod summary;
pub mod summary_codec;
pub mod threads;
pub mod unindexed;
pub mod verify;
mod wire;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, StorageError};
use crate::kv::Txn;

/// Milliseconds since the Unix epoch, by the node's one wall clock
/// ([`crate::clock`], which a fault can skew).
pub fn now_ms() -> u64 {
    crate::clock::now_ms()
}

/// One point read that shows the store answers (readiness): the account id
/// counter, a small key that is rarely written.
pub async fn probe_read(txn: &Txn) -> Result<()> {
    txn.get(&crate::keyspace::sequence("account_id")).await.map(drop)
}

/// A new time-ordered unique id (UUIDv7): acceptance ids, quarantine ids.
pub fn new_id() -> [u8; 16] {
    *uuid::Uuid::now_v7().as_bytes()
}

pub fn id_to_string(id: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*id).to_string()
}

pub fn id_from_str(s: &str) -> Result<[u8; 16]> {
    uuid::Uuid::parse_str(s)
        .map(|u| *u.as_bytes())
        .map_err(|e| StorageError::Model(format!("bad id {s:?}: {e}")))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| StorageError::Model(format!("encode: {e}")))
}

pub(crate) fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| StorageError::Corrupt {
        what: what.to_string(),
        detail: e.to_string(),
    })
}

/// Reads and decodes one record.
pub(crate) async fn get_record<T: DeserializeOwned>(txn: &Txn, key: &[u8], what: &str) -> Result<Option<T>> {
    match txn.get(key).await? {
        Some(bytes) => Ok(Some(decode(what, &bytes)?)),
        None => Ok(None),
    }
}

pub(crate) fn put_record<T: Serialize>(txn: &Txn, key: &[u8], value: &T) -> Result<()> {
    txn.set(key, &encode(value)?)
}

/// Allocates the next value of a named counter. It reads the counter, so two
/// concurrent allocations conflict and one retries: use it for rare events
/// (accounts, mailboxes), never on a hot path.
pub(crate) async fn next_sequence(txn: &Txn, key: &[u8]) -> Result<i64> {
    let next = txn.get_i64(key).await? + 1;
    txn.set(key, &next.to_le_bytes())?;
    Ok(next)
}

/// The virtual shard an account lives in: a stable hash of its id, so every
/// node computes the same placement without asking anyone.
pub fn shard_of(account: crate::ids::AccountId, shard_count: u32) -> u32 {
    assert!(shard_count > 0, "shard_count must be positive");
    // FNV-1a: stable across versions and platforms (std's hasher is not).
    let mut h: u64 = 0xcbf29ce484222325;
    for b in account.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    (h % shard_count as u64) as u32
}
