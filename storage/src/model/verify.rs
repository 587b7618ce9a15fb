//! The accept-ledger verifier: every acceptance must have reached exactly
//! one final state, and that state must be backed by what it names — a
//! stored message with this acceptance id, a queued outbound item (or, once
//! relayed to a remote MX, its absence), or a quarantine record. It walks the ledger in bounded chunks, each checked in
//! its own short snapshot transaction, so it never holds one long
//! transaction and can run on a live system.

use super::ledger::{LedgerEntry, LedgerState};
use super::{id_to_string, messages, quarantine};
use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{Database, RANGE_CHUNK_MAX, RangeOptions, key_after};

/// One acceptance whose final state is not backed by the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub acceptance_id: [u8; 16],
    pub detail: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerReport {
    pub entries: u64,
    pub delivered: u64,
    pub queued: u64,
    pub bounced: u64,
    /// Handed to a remote MX.
    pub relayed: u64,
    pub quarantined: u64,
    /// Delivered, then deleted by the mailbox owner.
    pub expunged: u64,
    pub problems: Vec<Problem>,
}

impl LedgerReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies the whole ledger, `chunk` entries per transaction; `progress`
/// is called with the number of entries checked so far.
pub async fn verify_ledger(db: &Database, chunk: usize, mut progress: impl FnMut(u64)) -> Result<LedgerReport> {
    let chunk = chunk.clamp(1, RANGE_CHUNK_MAX);
    let (mut begin, end) = keyspace::ledger_all();
    let mut report = LedgerReport::default();
    loop {
        let (b, e) = (begin.clone(), end.clone());
        let (entries, problems, next) = db
            .read("verify_ledger", move |txn| {
                let (b, e) = (b.clone(), e.clone());
                async move {
                    let rows = txn.get_range(&b, &e, RangeOptions::limit(chunk)).await?;
                    let next = if rows.len() == chunk {
                        rows.last().map(|(k, _)| key_after(k))
                    } else {
                        None
                    };
                    let mut entries = Vec::with_capacity(rows.len());
                    let mut problems = Vec::new();
                    for (_, v) in &rows {
                        let entry: LedgerEntry = super::ledger_codec::decode(v)?;
                        if let Some(detail) = check(&txn, &entry).await? {
                            problems.push(Problem {
                                acceptance_id: entry.acceptance_id,
                                detail,
                            });
                        }
                        entries.push(entry.state);
                    }
                    Ok::<_, StorageError>((entries, problems, next))
                }
            })
            .await?;
        for state in entries {
            report.entries += 1;
            match state {
                LedgerState::Delivered { .. } => report.delivered += 1,
                LedgerState::Queued { .. } => report.queued += 1,
                LedgerState::Bounced { .. } => report.bounced += 1,
                LedgerState::Relayed { .. } => report.relayed += 1,
                LedgerState::Quarantined { .. } => report.quarantined += 1,
                LedgerState::Expunged { .. } => report.expunged += 1,
            }
        }
        report.problems.extend(problems);
        progress(report.entries);
        match next {
            Some(n) => begin = n,
            None => return Ok(report),
        }
    }
}

/// Checks one entry; `Some(why)` when its state is not backed by the store.
async fn check(txn: &crate::Txn, entry: &LedgerEntry) -> Result<Option<String>> {
    Ok(match &entry.state {
        LedgerState::Delivered {
            account,
            mailbox,
            uid,
            uid_validity,
        } => match messages::get_meta(txn, *account, *mailbox, *uid).await? {
            Some(m) if m.acceptance_id == Some(entry.acceptance_id) => None,
            Some(_) => Some(format!(
                "delivered as uid {uid} in mailbox {mailbox} (uidvalidity {uid_validity}) of account {account}, but that uid holds another message"
            )),
            None => Some(format!(
                "delivered as uid {uid} in mailbox {mailbox} (uidvalidity {uid_validity}) of account {account}, but no such message is stored"
            )),
        },
        LedgerState::Queued { outbound_id } => match txn.get(&keyspace::outbound(outbound_id)).await? {
            Some(_) => None,
            None => Some(format!(
                "queued as {} but the outbound item is gone",
                id_to_string(outbound_id)
            )),
        },
        LedgerState::Quarantined { quarantine_id } => match quarantine::get(txn, quarantine_id).await? {
            Some(_) => None,
            None => Some(format!(
                "quarantined as {} but the record is gone",
                id_to_string(quarantine_id)
            )),
        },
        LedgerState::Bounced { .. } => None,
        LedgerState::Relayed { outbound_id, .. } => txn.get(&keyspace::outbound(outbound_id)).await?.map(|_| {
            format!(
                "recorded as relayed but outbound item {} is still queued",
                id_to_string(outbound_id)
            )
        }),
        LedgerState::Expunged {
            account, mailbox, uid, ..
        } => match messages::get_meta(txn, *account, *mailbox, *uid).await? {
            Some(m) if m.acceptance_id == Some(entry.acceptance_id) => Some(format!(
                "recorded as expunged but uid {uid} of mailbox {mailbox} is still stored"
            )),
            _ => None,
        },
    })
}
