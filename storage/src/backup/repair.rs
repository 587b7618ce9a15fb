//! After a restore: what the fuzzy key copy cannot keep exact, derived
//! again from the rows (which the ledger groups made exact).
//!
//! Per mailbox, in bounded steps (a page of rows per read, one short write
//! per mailbox):
//! - the counters (messages, unseen, bytes) are set to what the rows say;
//! - UIDNEXT and HIGHESTMODSEQ are raised above every row: a row brought
//!   by a ledger group (delivered or moved in while the copy ran) may sit
//!   above a mailbox record copied before it, and a UID must never be
//!   given twice. Such rows are marked unindexed (`unindexed_from`);
//! - the unseen and receivedAt indexes are marked as not to be trusted
//!   (`unseen_index`, `date_index` false: readers use the rows, as for
//!   mailboxes older than the indexes), and the change log is floored at
//!   HIGHESTMODSEQ (`chgf`): CONDSTORE/QRESYNC and JMAP clients
//!   resynchronise instead of trusting a log copied at another instant.
//!
//! Then every body's reference count is raised to at least the number of
//! rows that name it (never lowered: outbound items and uploads hold
//! references the rows do not show, and a count too low would let the
//! orphan sweep delete a body a restored message needs).

use std::collections::{HashMap, HashSet};

use super::{BackupError, Phase, Progress};
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{Database, RangeOptions, key_after};
use crate::model::fenced::{AdminWrite, FencedTxn};
use crate::model::mailboxes::{self, Counts};
use crate::model::{message_reads, unindexed};

/// Rows read per transaction while counting a mailbox.
const ROWS_PER_READ: usize = 1_000;
/// Reference counts checked per transaction.
const REFS_PER_TXN: usize = 500;

#[derive(Debug, Clone, Default)]
pub struct RepairReport {
    pub mailboxes: u64,
    pub messages: u64,
    /// Mailboxes whose counters did not match their rows.
    pub counters_fixed: u64,
    /// Mailboxes whose UIDNEXT was below a row.
    pub uid_next_raised: u64,
    /// Bodies whose reference count was below their rows.
    pub refs_raised: u64,
    /// Rows naming an object body the backup does not hold.
    pub bodies_missing: u64,
}

/// What the rows of one mailbox add up to.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    uid_max: Uid,
    modseq_max: u64,
}

pub async fn run(
    db: &Database,
    objects: &HashSet<String>,
    progress: Progress<'_>,
) -> Result<RepairReport, BackupError> {
    let mut report = RepairReport::default();
    let mut refs: HashMap<String, i64> = HashMap::new();
    for (account, mailbox) in all_mailboxes(db).await? {
        let tally = tally(db, account, mailbox, objects, &mut refs, &mut report).await?;
        fix_mailbox(db, account, mailbox, &tally, &mut report).await?;
        report.mailboxes += 1;
        progress(Phase::Repair, report.mailboxes, 0);
    }
    raise_refs(db, refs, &mut report).await?;
    Ok(report)
}

/// Every mailbox of every account, a page of keys per read.
async fn all_mailboxes(db: &Database) -> Result<Vec<(AccountId, MailboxId)>, BackupError> {
    let (mut begin, end) = keyspace::subspace("mbox");
    let mut out = Vec::new();
    loop {
        let (b, e) = (begin.clone(), end.clone());
        let rows = db
            .read("restore_mailboxes", move |txn| {
                let (b, e) = (b.clone(), e.clone());
                async move { txn.get_range(&b, &e, RangeOptions::limit(5_000)).await }
            })
            .await?;
        for (k, _) in &rows {
            if let Ok((_, account, mailbox)) = foundationdb_tuple::unpack::<(String, AccountId, MailboxId)>(k) {
                out.push((account, mailbox));
            }
        }
        match rows.last() {
            Some((k, _)) if rows.len() == 5_000 => begin = key_after(k),
            _ => return Ok(out),
        }
    }
}

async fn tally(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    objects: &HashSet<String>,
    refs: &mut HashMap<String, i64>,
    report: &mut RepairReport,
) -> Result<Tally, BackupError> {
    let mut t = Tally::default();
    let mut from: Uid = 1;
    loop {
        let page = db
            .read("restore_rows", move |txn| async move {
                message_reads::list_meta(&txn, account, mailbox, from, None, ROWS_PER_READ).await
            })
            .await?;
        for m in &page {
            t.counts.messages += 1;
            t.counts.unseen += i64::from(!m.is_seen());
            t.counts.bytes += m.body.size as i64;
            t.uid_max = t.uid_max.max(m.uid);
            t.modseq_max = t.modseq_max.max(m.modseq);
            *refs.entry(m.body.hash.clone()).or_default() += 1;
            if !m.body.inline && !objects.contains(&m.body.hash) {
                report.bodies_missing += 1;
            }
        }
        report.messages += page.len() as u64;
        match page.last().and_then(|m| m.uid.checked_add(1)) {
            Some(next) if page.len() == ROWS_PER_READ => from = next,
            _ => return Ok(t),
        }
    }
}

async fn fix_mailbox(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    t: &Tally,
    report: &mut RepairReport,
) -> Result<(), BackupError> {
    let (counts, uid_max, modseq_max) = (t.counts, t.uid_max, t.modseq_max);
    let (counted_wrong, raised) = db
        .run("restore_fix_mailbox", move |txn| async move {
            // A store being restored: no node serves it (see `AdminWrite`).
            let admin = FencedTxn::admin(&txn, AdminWrite::Restore);
            let Some(before) = mailboxes::get(&txn, account, mailbox).await? else {
                return Ok::<_, crate::StorageError>((false, false));
            };
            let mut mb = before.clone();
            let raised = uid_max >= mb.uid_next;
            if raised {
                mb.unindexed_from = Some(mb.unindexed_from.unwrap_or(mb.uid_next));
                mb.uid_next = uid_max + 1;
            }
            mb.highest_modseq = mb.highest_modseq.max(modseq_max);
            mb.unseen_index = false;
            mb.date_index = false;
            mailboxes::put(&admin, account, &before, &mb)?;
            txn.set(
                &keyspace::change_floor(account, mailbox),
                &(mb.highest_modseq as i64).to_le_bytes(),
            )?;
            let now = mailboxes::counts(&txn, account, mailbox).await?;
            let delta = Counts {
                messages: counts.messages - now.messages,
                unseen: counts.unseen - now.unseen,
                bytes: counts.bytes - now.bytes,
            };
            mailboxes::add_counts(&admin, account, mailbox, delta)?;
            Ok((delta != Counts::default(), raised))
        })
        .await?;
    report.counters_fixed += u64::from(counted_wrong);
    report.uid_next_raised += u64::from(raised);
    if raised {
        // Readers merge at most `INDEX_AFTER` unindexed rows; the copy may
        // have brought more: index them now (one transaction: they are the
        // rows delivered while the backup ran, a bounded number).
        db.run("restore_index", move |txn| async move {
            unindexed::index_first(&FencedTxn::admin(&txn, AdminWrite::Restore), account, mailbox).await
        })
        .await?;
    }
    Ok(())
}

async fn raise_refs(db: &Database, refs: HashMap<String, i64>, report: &mut RepairReport) -> Result<(), BackupError> {
    let all: Vec<(String, i64)> = refs.into_iter().collect();
    for batch in all.chunks(REFS_PER_TXN) {
        let batch = batch.to_vec();
        let raised = db
            .run("restore_refs", move |txn| {
                let batch = batch.clone();
                async move {
                    // Read together: one round trip per batch on FDB, not per body.
                    let keys: Vec<_> = batch.iter().map(|(h, _)| keyspace::blob_refs(h)).collect();
                    let now = futures::future::try_join_all(keys.iter().map(|k| txn.get_i64(k))).await?;
                    let mut raised = 0u64;
                    for ((key, (_, rows)), now) in keys.iter().zip(&batch).zip(now) {
                        if now < *rows {
                            txn.add_i64(key, rows - now)?;
                            raised += 1;
                        }
                    }
                    Ok::<_, crate::StorageError>(raised)
                }
            })
            .await?;
        report.refs_raised += raised;
    }
    Ok(())
}
