//! The ledger pass: each ledger entry with the keys it names, read in one
//! transaction, so that restore can make every message's ledger entry, row
//! and body agree as of one instant (see [`super`]).
//!
//! A group is the entry's `Set` followed by `Set`s of what exists and
//! `Clear`s of what must not (an expunged message's row, a relayed
//! item's queue entry): the key copy may hold an older state of either.

use std::sync::Arc;

use super::create::{InlineSeen, Pace};
use super::format::{ChunkWriter, Record};
use super::{BackupError, Phase, Progress};
use crate::error::Result;
use crate::keyspace;
use crate::kv::{Database, RangeOptions, Txn, key_after};
use crate::model::ledger::{LedgerEntry, LedgerState};
use crate::model::{ledger_codec, message_codec};

/// Ledger entries per read transaction. Each may bring an inline body
/// (≤ 90 KB) and takes ~4 point reads: 100 stay under ~10 MB and far
/// under 5 s.
pub const ENTRIES_PER_READ: usize = 100;

/// Walks the ledger after the key copy and writes every entry's group.
/// Returns (entries, keys in groups besides the entries).
pub async fn copy_ledger(
    db: &Database,
    w: &mut ChunkWriter,
    written_before: u64,
    pace: Pace,
    seen: InlineSeen,
    progress: Progress<'_>,
) -> std::result::Result<(u64, u64), BackupError> {
    let seen = Arc::new(seen);
    let limit = pace.keys_per_read_max.clamp(1, ENTRIES_PER_READ);
    let (mut begin, end) = keyspace::ledger_all();
    let (mut entries, mut group_keys) = (0u64, 0u64);
    loop {
        let (b, e, s) = (begin.clone(), end.clone(), seen.clone());
        let (groups, next) = db
            .read("backup_ledger", move |txn| {
                let (b, e, s) = (b.clone(), e.clone(), s.clone());
                async move { read_groups(&txn, &b, &e, limit, &s).await }
            })
            .await?;
        for group in &groups {
            entries += 1;
            group_keys += group.len() as u64 - 1;
            for r in group {
                w.push(r, written_before)?;
            }
        }
        progress(Phase::Ledger, entries, w.written_bytes);
        pace.pause().await;
        match next {
            Some(n) => begin = n,
            None => break,
        }
    }
    w.close(written_before)?;
    Ok((entries, group_keys))
}

type Groups = (Vec<Vec<Record>>, Option<Vec<u8>>);

async fn read_groups(txn: &Txn, begin: &[u8], end: &[u8], limit: usize, seen: &InlineSeen) -> Result<Groups> {
    let rows = txn.get_range(begin, end, RangeOptions::limit(limit)).await?;
    let next = match rows.last() {
        Some((k, _)) if rows.len() == limit => Some(key_after(k)),
        _ => None,
    };
    // The entries' reads are issued together: on FDB each point read is a
    // round trip, and one after another they made the pass ~4 round trips
    // per message.
    let groups = rows.into_iter().map(|(k, v)| async move {
        let entry = ledger_codec::decode(&v)?;
        let mut group = vec![Record::Set(k, v)];
        named_keys(txn, &entry, seen, &mut group).await?;
        Ok::<_, crate::StorageError>(group)
    });
    let out = futures::future::try_join_all(groups).await?;
    Ok((out, next))
}

/// Appends the records of what `entry` names, as this transaction sees it.
async fn named_keys(txn: &Txn, entry: &LedgerEntry, seen: &InlineSeen, group: &mut Vec<Record>) -> Result<()> {
    match &entry.state {
        LedgerState::Delivered {
            account, mailbox, uid, ..
        } => {
            let row_key = keyspace::message(*account, *mailbox, *uid);
            let Some(row) = txn.get(&row_key).await? else {
                // Already a discrepancy in the source: `verify ledger`
                // reports it there and will here.
                return Ok(());
            };
            let meta = message_codec::decode_meta(&row)?;
            group.push(Record::Set(row_key, row));
            let summary_key = keyspace::message_summary(*account, *mailbox, *uid);
            if let Some(s) = txn.get(&summary_key).await? {
                group.push(Record::Set(summary_key, s));
            }
            let inline = meta.body.inline && !seen.contains(&meta.body.hash);
            body_keys(txn, &meta.body.hash, inline, group).await?;
        }
        LedgerState::Expunged {
            account, mailbox, uid, ..
        } => {
            let row_key = keyspace::message(*account, *mailbox, *uid);
            if txn.get(&row_key).await?.is_none() {
                group.push(Record::Clear(row_key));
                group.push(Record::Clear(keyspace::message_summary(*account, *mailbox, *uid)));
            }
        }
        LedgerState::Queued { outbound_id } => copy_or_clear(txn, keyspace::outbound(outbound_id), group).await?,
        LedgerState::Relayed { outbound_id, .. } => copy_or_clear(txn, keyspace::outbound(outbound_id), group).await?,
        LedgerState::Quarantined { quarantine_id } => {
            copy_or_clear(txn, keyspace::quarantine(quarantine_id), group).await?
        }
        LedgerState::Bounced { .. } => {}
    }
    Ok(())
}

/// The body's reference count and, for an inline body the key copy did
/// not hold, its bytes.
async fn body_keys(txn: &Txn, hash: &str, inline: bool, group: &mut Vec<Record>) -> Result<()> {
    let refs = keyspace::blob_refs(hash);
    if let Some(v) = txn.get(&refs).await? {
        group.push(Record::Set(refs, v));
    }
    if inline {
        for key in [keyspace::blob_inline(hash), keyspace::blob_inline_v1(hash)] {
            if let Some(v) = txn.get(&key).await? {
                group.push(Record::Set(key, v));
                return Ok(());
            }
        }
        // Missing in the source already: the restored row reads as the
        // source's does (an error for that message alone).
    }
    Ok(())
}

async fn copy_or_clear(txn: &Txn, key: Vec<u8>, group: &mut Vec<Record>) -> Result<()> {
    match txn.get(&key).await? {
        Some(v) => group.push(Record::Set(key, v)),
        None => group.push(Record::Clear(key)),
    }
    Ok(())
}
