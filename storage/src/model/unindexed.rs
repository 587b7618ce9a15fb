//! Deferred indexing: a delivery writes its message's row and summary, and
//! the mailbox's indexes catch up in batches.
//!
//! Why: a delivery used to write five per-mailbox keys (`msg`, `msum`,
//! `unsn`, `mdat`, `chg`) besides its thread, ledger and body keys. With
//! sixteen sessions delivering to sixteen mailboxes a commit holds ~8
//! deliveries, almost never two to one mailbox, so each delivery dirtied
//! the last B-tree page of five regions by itself: ~5.4 of the ~11 pages of
//! 8 KiB that one delivery wrote (`soak/reports/ingest-2026-12-05d`).
//! Now a delivery writes its row and summary, and the mailbox record notes
//! the first UID whose unseen, receivedAt, thread-membership and
//! change-log keys are not written yet (`unindexed_from`). The delivery
//! that brings [`INDEX_AFTER`] such rows writes their keys in its own
//! transaction, where they share each index's tail pages.
//!
//! Rows are never rewritten for this: a first version stored the summary
//! inside the row until indexing and then split it, and the rows shrinking
//! in place left the `msg` pages part empty (+12 % on disk per message,
//! `soak/reports/ingest-2026-12-05g`).
//!
//! What keeps every read exact:
//! - The rows from `unindexed_from` on are exactly the messages delivered
//!   since the mailbox was last indexed, as they were delivered: every
//!   other write to a mailbox's messages (STORE, EXPUNGE, COPY into it,
//!   MOVE out of it, the change-log trim) indexes it first, in its own
//!   transaction.
//! - So their UIDs and MODSEQs are above those of every indexed message
//!   and every logged change: readers of the indexes (unseen UIDs, changes
//!   since a MODSEQ, receivedAt order) take what the indexes hold, then
//!   what these rows say ([`rows`]).
//! - A thread spans mailboxes: its members are its `thrx` keys and the
//!   unindexed rows of any of the account's mailboxes that name it
//!   ([`thread_members`]). Deferring `thrx` too took ~1.1 of ~8.4 pages
//!   off a delivery (`soak/reports/ingest-2026-12-06e`).
//! - Readers of rows and summaries need nothing.
//!
//! The counters are still changed at delivery (atomic adds). On
//! FoundationDB, indexing [`INDEX_AFTER`] rows writes ≤ ~25 KB in one
//! transaction, far inside its 10 MB.

use super::fenced::FencedTxn;
use super::mailboxes::{self, Mailbox};
use super::message_reads::{self, RANGE_KEYS_MAX};
use super::messages::{self, ChangeKind, MessageMeta};
use super::summary::Summary;
use super::threads;
use crate::error::Result;
use crate::ids::{AccountId, MailboxId, Uid};
use crate::kv::Txn;

/// Unindexed rows a mailbox holds at most: the delivery that makes this
/// many indexes them. Each region's tail page then takes ~100 entries at
/// once instead of one, and a reader merges at most this many rows.
pub const INDEX_AFTER: u32 = 128;

/// Writes a delivered message's row and summary and notes it in `mb`, the
/// mailbox record the caller writes; indexes the mailbox when
/// [`INDEX_AFTER`] rows wait.
pub(super) async fn put(
    txn: &Txn,
    account: AccountId,
    mb: &mut Mailbox,
    row: &MessageMeta,
    summary: &Summary,
) -> Result<()> {
    messages::put_split(txn, account, mb.id, row, summary)?;
    let from = *mb.unindexed_from.get_or_insert(row.uid);
    if mb.uid_next.saturating_sub(from) >= INDEX_AFTER {
        index_all(txn, account, mb, Trigger::Deliveries).await?;
    }
    Ok(())
}

/// Why a mailbox was indexed (the `trigger` label of the metrics).
#[derive(Debug, Clone, Copy)]
pub(super) enum Trigger {
    /// [`INDEX_AFTER`] deliveries waited.
    Deliveries,
    /// Another write to the mailbox's messages came first.
    Write,
}

impl Trigger {
    fn label(self) -> &'static str {
        match self {
            Trigger::Deliveries => "deliveries",
            Trigger::Write => "write",
        }
    }
}

/// Indexes every unindexed row of the mailbox `mb` (in `txn`): each gets
/// its unseen and receivedAt keys, its thread membership and its `Added`
/// change at its own MODSEQ. Clears `mb.unindexed_from`; the caller writes
/// `mb`.
/// Counted per attempt of the transaction (a retried one counts again):
/// `meshmail_store_rows_indexed_total` and
/// `meshmail_store_index_seconds` (the pass inside the transaction, not
/// its commit), by `trigger`.
pub(super) async fn index_all(txn: &Txn, account: AccountId, mb: &mut Mailbox, trigger: Trigger) -> Result<()> {
    let Some(from) = mb.unindexed_from.take() else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    let mut indexed = 0u64;
    let mut next = from;
    loop {
        let rows = message_reads::list_meta(txn, account, mb.id, next, None, RANGE_KEYS_MAX).await?;
        for meta in &rows {
            messages::index_date(txn, account, mb.id, meta)?;
            messages::index_unseen(txn, account, mb.id, meta)?;
            messages::log_change(txn, account, mb.id, &messages::Change::of(meta, ChangeKind::Added))?;
            if let Some(thread) = &meta.thread_id {
                // Rows delivered by builds that wrote it at delivery have
                // it already: writing it again changes nothing.
                threads::add_member(txn, account, thread, mb.id, meta.uid)?;
            }
            indexed += 1;
        }
        match rows.last().and_then(|m| m.uid.checked_add(1)) {
            Some(after) if rows.len() == RANGE_KEYS_MAX => next = after,
            _ => break,
        }
    }
    let trigger = trigger.label();
    metrics::counter!("meshmail_store_rows_indexed_total", "trigger" => trigger).increment(indexed);
    metrics::histogram!("meshmail_store_index_seconds", "trigger" => trigger).record(started.elapsed().as_secs_f64());
    Ok(())
}

/// The mailbox's record with every row indexed, written if that took
/// indexing (None: no such mailbox). What every write to a mailbox's
/// messages other than a delivery calls before it changes anything.
pub async fn index_first(txn: &FencedTxn<'_>, account: AccountId, mailbox: MailboxId) -> Result<Option<Mailbox>> {
    let Some(before) = mailboxes::get(txn, account, mailbox).await? else {
        return Ok(None);
    };
    if before.unindexed_from.is_none() {
        return Ok(Some(before));
    }
    let mut mb = before.clone();
    index_all(txn, account, &mut mb, Trigger::Write).await?;
    mailboxes::put(txn, account, &before, &mb)?;
    Ok(Some(mb))
}

/// The hot parts of the mailbox's unindexed rows with UID ≥ `from`, in
/// UID order (so in MODSEQ order too): at most [`INDEX_AFTER`] of them.
pub(super) async fn rows(txn: &Txn, account: AccountId, mailbox: MailboxId, from: Uid) -> Result<Vec<MessageMeta>> {
    match mailboxes::get(txn, account, mailbox).await? {
        Some(mb) => rows_of(txn, account, &mb, from).await,
        None => Ok(Vec::new()),
    }
}

/// [`rows`] of a mailbox record already read.
async fn rows_of(txn: &Txn, account: AccountId, mb: &Mailbox, from: Uid) -> Result<Vec<MessageMeta>> {
    match mb.unindexed_from {
        Some(first) => message_reads::list_meta(txn, account, mb.id, first.max(from), None, RANGE_KEYS_MAX).await,
        None => Ok(Vec::new()),
    }
}

/// The (mailbox, uid) of the account's unindexed rows in `thread`: the
/// members its `thrx` keys do not list yet. Reads the account's mailbox
/// records and, of those with unindexed rows, at most [`INDEX_AFTER`]
/// rows each.
pub(super) async fn thread_members(txn: &Txn, account: AccountId, thread: &str) -> Result<Vec<(MailboxId, Uid)>> {
    let mut out = Vec::new();
    for mb in mailboxes::list(txn, account).await? {
        for row in rows_of(txn, account, &mb, 0).await? {
            if row.thread_id.as_deref() == Some(thread) {
                out.push((mb.id, row.uid));
            }
        }
    }
    Ok(out)
}
