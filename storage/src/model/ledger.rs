//! The accept ledger: one entry per acceptance (SMTP/LMTP 250, IMAP APPEND
//! OK, JMAP 200), keyed by a unique acceptance id and written in the same
//! transaction as the delivery. Every entry ends in exactly one final state.

use serde::{Deserialize, Serialize};

use super::{ledger_codec, now_ms};
use crate::error::Result;
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{Database, KeyValue, RangeOptions, Txn, key_after};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum LedgerState {
    Delivered {
        account: AccountId,
        mailbox: MailboxId,
        uid: Uid,
        uid_validity: u32,
    },
    Queued {
        outbound_id: [u8; 16],
    },
    /// Handed to a remote MX (or the relay) for a remote recipient, which
    /// answered 250: the end of an outbound item.
    Relayed {
        outbound_id: [u8; 16],
        host: String,
        tls: bool,
    },
    Bounced {
        reason: String,
    },
    Quarantined {
        quarantine_id: [u8; 16],
    },
    /// Delivered, then deleted by its owner (IMAP EXPUNGE, mailbox DELETE).
    Expunged {
        account: AccountId,
        mailbox: MailboxId,
        uid: Uid,
        expunged_ms: u64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerEntry {
    pub acceptance_id: [u8; 16],
    pub recorded_ms: u64,
    pub state: LedgerState,
}

pub fn record(txn: &Txn, acceptance_id: &[u8; 16], state: &LedgerState) -> Result<()> {
    let entry = LedgerEntry {
        acceptance_id: *acceptance_id,
        recorded_ms: now_ms(),
        state: state.clone(),
    };
    txn.set(&keyspace::ledger(acceptance_id), &ledger_codec::encode(&entry))
}

pub async fn get(txn: &Txn, acceptance_id: &[u8; 16]) -> Result<Option<LedgerEntry>> {
    match txn.get(&keyspace::ledger(acceptance_id)).await? {
        Some(raw) => Ok(Some(ledger_codec::decode(&raw)?)),
        None => Ok(None),
    }
}

/// Walks the whole ledger in bounded chunks, one short snapshot transaction
/// per chunk (never one long transaction), calling `visit` for every entry.
/// `chunk` bounds both memory and each transaction's duration.
pub async fn walk<F>(db: &Database, chunk: usize, mut visit: F) -> Result<u64>
where
    F: FnMut(LedgerEntry) -> Result<()>,
{
    let chunk = chunk.clamp(1, crate::kv::RANGE_CHUNK_MAX);
    let (mut begin, end) = keyspace::ledger_all();
    let mut seen = 0u64;
    loop {
        let (b, e) = (begin.clone(), end.clone());
        let rows: Vec<KeyValue> = db
            .read("ledger_walk", move |txn| {
                let (b, e) = (b.clone(), e.clone());
                async move { txn.get_range(&b, &e, RangeOptions::limit(chunk)).await }
            })
            .await?;
        let Some((last, _)) = rows.last() else {
            return Ok(seen);
        };
        begin = key_after(last);
        let full = rows.len() == chunk;
        for (_, v) in rows {
            visit(ledger_codec::decode(&v)?)?;
            seen += 1;
        }
        if !full {
            return Ok(seen);
        }
    }
}
