//! The compactor's reads and writes, so that the actor that schedules them
//! (`meshmail_actors::compactor`) builds no key: a resumable walk over every
//! mailbox record of every account, the change-log trim, and the expiry of
//! idempotency markers. Each is one bounded step inside the caller's
//! transaction.

use super::decode;
use super::fenced::FencedTxn;
use super::mailboxes::Mailbox;
use super::messages::change_floor;
use crate::error::Result;
use crate::ids::{AccountId, MailboxId};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn, decode_i64, key_after};

/// The name of the stored cursor of the walk over every mailbox.
const MAILBOX_WALK_CURSOR: &str = "compact_mailboxes";

/// Where the walk over every mailbox resumes: a key, opaque above storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailboxWalkPosition(Vec<u8>);

/// One page of the walk over every mailbox.
#[derive(Debug)]
pub struct MailboxPage {
    /// The records read, with their account.
    pub mailboxes: Vec<(AccountId, Mailbox)>,
    /// How many records were read, counting any whose key does not parse
    /// (those are left out of `mailboxes`).
    pub rows_read: usize,
    /// Where the next page starts: after this one, or back at the first
    /// mailbox when this page reached the end.
    pub next: MailboxWalkPosition,
}

/// Up to `limit` mailbox records of any account, from where the stored
/// cursor points (the first mailbox when there is none). Store `next` with
/// [`save_mailbox_walk`] once the page is handled.
pub async fn mailbox_page(txn: &Txn, limit: usize) -> Result<MailboxPage> {
    let (all_begin, all_end) = keyspace::all_mailboxes();
    let stored = txn.get(&keyspace::cursor(MAILBOX_WALK_CURSOR)).await?;
    let from = stored.unwrap_or_else(|| all_begin.clone());
    let rows = txn.get_range(&from, &all_end, RangeOptions::limit(limit)).await?;
    let mut mailboxes = Vec::with_capacity(rows.len());
    for (key, value) in &rows {
        // The walk also meets the counters behind each record.
        if !keyspace::is_mailbox_record(key) {
            continue;
        }
        let mailbox: Mailbox = decode("mailbox", value)?;
        let Ok(account) = keyspace::mailbox_account(key) else {
            continue;
        };
        mailboxes.push((account, mailbox));
    }
    // Resume after the last row next time; wrap to the start at the end.
    let next = match rows.last() {
        Some((key, _)) if rows.len() == limit => key_after(key),
        _ => all_begin,
    };
    Ok(MailboxPage {
        mailboxes,
        rows_read: rows.len(),
        next: MailboxWalkPosition(next),
    })
}

/// Stores where the next [`mailbox_page`] starts.
pub fn save_mailbox_walk(txn: &Txn, next: &MailboxWalkPosition) -> Result<()> {
    txn.set(&keyspace::cursor(MAILBOX_WALK_CURSOR), &next.0)
}

/// Drops a mailbox's change-log entries with MODSEQ up to `cutoff` and
/// raises its change floor to `cutoff` (a QRESYNC from below it needs a full
/// resync). False, with nothing written, when the floor is already there.
pub async fn trim_change_log(txn: &FencedTxn<'_>, account: AccountId, mailbox: MailboxId, cutoff: u64) -> Result<bool> {
    if change_floor(txn, account, mailbox).await? >= cutoff {
        return Ok(false);
    }
    // Deliveries not indexed yet have their changes written first, so
    // the trim takes those at or below the cutoff too.
    super::unindexed::index_first(txn, account, mailbox).await?;
    txn.clear_range(
        &keyspace::change(account, mailbox, 0),
        &keyspace::change(account, mailbox, cutoff + 1),
    )?;
    txn.set(
        &keyspace::change_floor(account, mailbox),
        &(cutoff as i64).to_le_bytes(),
    )?;
    Ok(true)
}

/// Deletes up to `limit` idempotency markers of
/// [`Database::run_idempotent`](crate::Database::run_idempotent) written
/// before `cutoff_ms`, oldest first; returns how many went.
pub async fn expire_idempotency_markers(txn: &Txn, cutoff_ms: u64, limit: usize) -> Result<u64> {
    let (begin, end) = keyspace::idempotency_all();
    let rows = txn.get_range(&begin, &end, RangeOptions::limit(limit)).await?;
    let mut deleted = 0;
    for (key, written_ms) in rows {
        if decode_i64(Some(&written_ms)) as u64 >= cutoff_ms {
            break; // UUIDv7 keys are time-ordered: the rest are newer.
        }
        txn.clear(&key)?;
        deleted += 1;
    }
    Ok(deleted)
}
