//! Messages: rows keyed by UID, allocated in the same transaction as the row,
//! with the counters, the change log and the accept ledger.

use serde::{Deserialize, Serialize};

pub use super::date_order::{Dated, by_date, date_rank, uids_by_date};
#[cfg(feature = "fault-hooks")]
use super::fenced::AdminWrite;
use super::fenced::FencedTxn;
use super::ledger::{self, LedgerState};
use super::mailboxes::{self, Counts};
use super::message_codec::{self, StoredRow};
use super::message_reads::raw_rows;
pub use super::message_reads::{
    RANGE_KEYS_MAX, get, get_envelopes_many, get_header_lens_many, get_many, get_meta, get_meta_many, list,
    list_between, list_meta, unseen_uids,
};
use super::placement;
pub use super::placement::{find, find_meta};
use super::summary::Summary;
use super::summary_codec;
use super::threads;
use super::unindexed;
use super::{decode, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Where a message body lives: content hash and size. Bodies are
/// content-addressed in the blob store (or inline in the KV store when small).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BodyRef {
    /// Hex SHA-256 of the raw message bytes.
    pub hash: String,
    pub size: u64,
    /// True when the body is stored inline in the KV store.
    #[serde(default)]
    pub inline: bool,
}

/// A whole message: its hot part and its summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub uid: Uid,
    pub modseq: u64,
    pub flags: Vec<String>,
    pub internal_date_ms: i64,
    pub body: BodyRef,
    /// Pre-computed at delivery so FETCH never re-parses: IMAP ENVELOPE,
    /// BODYSTRUCTURE and part offsets, filled in by the protocols crate.
    pub summary: Summary,
    /// The acceptance this message came from (None for IMAP COPY results
    /// of messages older than the ledger).
    pub acceptance_id: Option<[u8; 16]>,
    /// The conversation this message belongs to (see [`super::threads`]);
    /// None for rows stored before threads were computed.
    pub thread_id: Option<String>,
    /// Where a moved message was first stored (see [`MessageMeta::origin`]).
    pub origin: Option<(MailboxId, Uid)>,
}

impl Message {
    pub fn is_seen(&self) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case("\\Seen"))
    }

    /// The hot part (everything but the summary).
    pub fn meta(&self) -> MessageMeta {
        MessageMeta {
            uid: self.uid,
            modseq: self.modseq,
            flags: self.flags.clone(),
            internal_date_ms: self.internal_date_ms,
            body: self.body.clone(),
            acceptance_id: self.acceptance_id,
            thread_id: self.thread_id.clone(),
            origin: self.origin,
        }
    }

    /// The (mailbox, UID) this message was first stored at, given the
    /// mailbox it is in now: what its JMAP id and IMAP EMAILID name.
    pub fn first_place(&self, mailbox: MailboxId) -> (MailboxId, Uid) {
        self.origin.unwrap_or((mailbox, self.uid))
    }

    /// The hot part and the summary, moved out.
    pub fn into_parts(self) -> (MessageMeta, Summary) {
        let meta = MessageMeta {
            uid: self.uid,
            modseq: self.modseq,
            flags: self.flags,
            internal_date_ms: self.internal_date_ms,
            body: self.body,
            acceptance_id: self.acceptance_id,
            thread_id: self.thread_id,
            origin: self.origin,
        };
        (meta, self.summary)
    }

    pub fn from_parts(meta: MessageMeta, summary: Summary) -> Message {
        Message {
            uid: meta.uid,
            modseq: meta.modseq,
            flags: meta.flags,
            internal_date_ms: meta.internal_date_ms,
            body: meta.body,
            summary,
            acceptance_id: meta.acceptance_id,
            thread_id: meta.thread_id,
            origin: meta.origin,
        }
    }
}

/// The hot part of a message: what changes (flags, MODSEQ) and what a scan
/// of a mailbox reads (SELECT, FETCH FLAGS, SEARCH UNSEEN/LARGER, STORE),
/// stored apart from the write-once summary (see [`message_codec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageMeta {
    pub uid: Uid,
    pub modseq: u64,
    pub flags: Vec<String>,
    pub internal_date_ms: i64,
    pub body: BodyRef,
    pub acceptance_id: Option<[u8; 16]>,
    pub thread_id: Option<String>,
    /// Where the message was first stored (delivery, import, create or
    /// COPY), if it has been moved since; None for a message still where it
    /// was first stored, and for rows of builds before origins. Its JMAP id
    /// and IMAP EMAILID name that first place, so they survive moves. Relies
    /// on mailbox ids (a per-account sequence) and UIDs (`uid_next` never
    /// decreases) never being reused within an account.
    pub origin: Option<(MailboxId, Uid)>,
}

impl MessageMeta {
    /// A message known by its UID alone (every other field empty): what a
    /// search that reads no hot-row field runs on.
    pub fn bare(uid: Uid) -> MessageMeta {
        MessageMeta {
            uid,
            modseq: 0,
            flags: Vec::new(),
            internal_date_ms: 0,
            body: BodyRef {
                hash: String::new(),
                size: 0,
                inline: false,
            },
            acceptance_id: None,
            thread_id: None,
            origin: None,
        }
    }

    /// The (mailbox, UID) this message was first stored at, given the
    /// mailbox it is in now: what its JMAP id and IMAP EMAILID name.
    pub fn first_place(&self, mailbox: MailboxId) -> (MailboxId, Uid) {
        self.origin.unwrap_or((mailbox, self.uid))
    }

    pub fn is_seen(&self) -> bool {
        self.has_flag("\\Seen")
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }
}

/// What changed at one MODSEQ.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Flags,
    Expunged,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Change {
    pub modseq: u64,
    pub uid: Uid,
    pub kind: ChangeKind,
    /// For an expunge: the thread the message was in (JMAP Thread/changes
    /// cannot read it from the row, which is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The first place of a moved message (see [`MessageMeta::origin`]):
    /// JMAP `/changes` names the email by it. Absent for a message never
    /// moved, and in entries of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<(MailboxId, Uid)>,
    /// On the `Expunged` entry of a move's source: the message lives on
    /// elsewhere, so JMAP reports an update, not a destroy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved: bool,
}

impl Change {
    /// The entry for `kind` of the stored row `row` at its own MODSEQ.
    pub fn of(row: &MessageMeta, kind: ChangeKind) -> Change {
        Change {
            modseq: row.modseq,
            uid: row.uid,
            kind,
            thread_id: None,
            origin: row.origin,
            moved: false,
        }
    }

    /// The first place of the message this entry is about (its JMAP id).
    pub fn first_place(&self, mailbox: MailboxId) -> (MailboxId, Uid) {
        self.origin.unwrap_or((mailbox, self.uid))
    }
}

/// A message to append.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub body: BodyRef,
    pub flags: Vec<String>,
    pub internal_date_ms: i64,
    pub summary: Summary,
    /// Unique per acceptance (UUIDv7), never derived from the content.
    pub acceptance_id: [u8; 16],
}

/// Appends a message: allocates its UID and MODSEQ, assigns its thread,
/// writes the row (not yet indexed, see [`unindexed`]: its thread
/// membership comes with its other index keys), the counters and the
/// ledger entry, all in `txn`. The caller must have taken a blob reference
/// for `body` in the same transaction.
pub async fn append(
    txn: &FencedTxn<'_>,
    account: AccountId,
    mailbox: MailboxId,
    msg: &NewMessage,
) -> Result<(Uid, u64)> {
    let before = mailboxes::get(txn, account, mailbox)
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("mailbox {mailbox} of account {account}")))?;
    let mut mb = before.clone();
    let uid = mb.uid_next;
    let modseq = mb.highest_modseq + 1;
    mb.uid_next = uid
        .checked_add(1)
        .ok_or_else(|| StorageError::Model("UID space exhausted".into()))?;
    mb.highest_modseq = modseq;
    mb.note_keywords(&msg.flags);

    let thread_id = threads::assign(txn, account, &msg.summary.envelope, &msg.acceptance_id).await?;
    let row = MessageMeta {
        uid,
        modseq,
        flags: msg.flags.clone(),
        internal_date_ms: msg.internal_date_ms,
        body: msg.body.clone(),
        acceptance_id: Some(msg.acceptance_id),
        thread_id: Some(thread_id),
        origin: None,
    };
    // One row; the unseen, receivedAt and change-log keys come later.
    unindexed::put(txn, account, &mut mb, &row, &msg.summary).await?;
    mailboxes::put(txn, account, &before, &mb)?;
    let unseen = if row.is_seen() { 0 } else { 1 };
    mailboxes::add_counts(
        txn,
        account,
        mailbox,
        Counts {
            messages: 1,
            unseen,
            bytes: msg.body.size as i64,
        },
    )?;
    ledger::record(
        txn,
        &msg.acceptance_id,
        &LedgerState::Delivered {
            account,
            mailbox,
            uid,
            uid_validity: mb.uid_validity,
        },
    )?;
    Ok((uid, modseq))
}

/// Writes a message in the current form: the hot row and its summary.
pub(super) fn put_split(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    row: &MessageMeta,
    summary: &Summary,
) -> Result<()> {
    put_meta(txn, account, mailbox, row)?;
    txn.set(
        &keyspace::message_summary(account, mailbox, row.uid),
        &summary_codec::encode(summary),
    )
}

/// Rewrites only the hot row (the summary, if split, is untouched).
fn put_meta(txn: &Txn, account: AccountId, mailbox: MailboxId, row: &MessageMeta) -> Result<()> {
    txn.set(
        &keyspace::message(account, mailbox, row.uid),
        &message_codec::encode_meta_as(row, txn.write_format()),
    )
}

/// The unseen index entry of a stored row, if it has no `\Seen`.
pub(super) fn index_unseen(txn: &Txn, account: AccountId, mailbox: MailboxId, row: &MessageMeta) -> Result<()> {
    if row.is_seen() {
        return Ok(());
    }
    txn.set(&keyspace::unseen(account, mailbox, row.uid), b"")
}

/// The receivedAt index entry of a stored row; its value carries the
/// origin of a moved row, so an Email/query answered from the index names
/// emails by their ids without reading rows (see [`super::placement`]).
pub(super) fn index_date(txn: &Txn, account: AccountId, mailbox: MailboxId, row: &MessageMeta) -> Result<()> {
    txn.set(
        &keyspace::message_by_date(account, mailbox, row.internal_date_ms, row.uid),
        &placement::encode_date_value(row),
    )
}

/// Every UID of a mailbox in order, read in bounded pages (one short
/// snapshot transaction each, never one long one).
pub async fn all_uids(db: &crate::Database, account: AccountId, mailbox: MailboxId) -> Result<Vec<Uid>> {
    let mut uids = Vec::new();
    let mut from = 1;
    loop {
        // Hot rows only: a page of 10,000 is ~1 MB read, no summary decoded.
        let page = db
            .read("all_uids", move |txn| async move {
                list_meta(&txn, account, mailbox, from, None, RANGE_KEYS_MAX).await
            })
            .await?;
        let Some(last) = page.last() else { return Ok(uids) };
        from = last.uid + 1;
        uids.extend(page.iter().map(|m| m.uid));
    }
}

/// Changes with MODSEQ greater than `since`, oldest first: the change log,
/// then the deliveries not indexed yet.
pub async fn changes_since(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    since: u64,
    limit: usize,
) -> Result<Vec<Change>> {
    let (b, e) = keyspace::changes_since(account, mailbox, since);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    let mut out: Vec<Change> = rows.iter().map(|(_, v)| decode("change", v)).collect::<Result<_>>()?;
    if out.len() < limit {
        // Unindexed rows are deliveries after every logged change.
        let added = unindexed::rows(txn, account, mailbox, 0).await?;
        out.extend(
            added
                .iter()
                .filter(|m| m.modseq > since)
                .take(limit - out.len())
                .map(|m| Change::of(m, ChangeKind::Added)),
        );
    }
    Ok(out)
}

/// The highest MODSEQ trimmed from the mailbox's change log (0: nothing
/// trimmed): changes above it are all in [`changes_since`].
pub async fn change_floor(txn: &Txn, account: AccountId, mailbox: MailboxId) -> Result<u64> {
    Ok(txn.get_i64(&keyspace::change_floor(account, mailbox)).await?.max(0) as u64)
}

/// Removes a message (IMAP EXPUNGE): the row, the counters, a change-log
/// entry, and the placement key of a moved one. Returns the body
/// reference the caller must release.
pub async fn expunge(txn: &FencedTxn<'_>, account: AccountId, mailbox: MailboxId, uid: Uid) -> Result<Option<BodyRef>> {
    expunge_as(txn, account, mailbox, uid, false).await
}

/// [`expunge`], `moved` when the message lives on elsewhere (the source
/// of a move: its change entry says so, and the placement key, now the
/// destination's, stays).
async fn expunge_as(
    txn: &FencedTxn<'_>,
    account: AccountId,
    mailbox: MailboxId,
    uid: Uid,
    moved: bool,
) -> Result<Option<BodyRef>> {
    let Some(msg) = get_meta(txn, account, mailbox, uid).await? else {
        return Ok(None);
    };
    let before = mailboxes::get(txn, account, mailbox)
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("mailbox {mailbox}")))?;
    let mut mb = before.clone();
    // The Expunged change must come after every Added one.
    unindexed::index_all(txn, account, &mut mb, unindexed::Trigger::Write).await?;
    mb.highest_modseq += 1;
    mailboxes::put(txn, account, &before, &mb)?;
    txn.clear(&keyspace::message(account, mailbox, uid))?;
    // Absent for rows of the earlier whole form (and the unseen key for a
    // seen message): a blind clear costs nothing.
    txn.clear(&keyspace::message_summary(account, mailbox, uid))?;
    txn.clear(&keyspace::unseen(account, mailbox, uid))?;
    txn.clear(&keyspace::message_by_date(account, mailbox, msg.internal_date_ms, uid))?;
    if let Some(t) = &msg.thread_id {
        threads::remove_member(txn, account, t, mailbox, uid)?;
    }
    if let (Some((m, u)), false) = (msg.origin, moved) {
        txn.clear(&keyspace::email_placement(account, m, u))?;
    }
    mailboxes::add_counts(
        txn,
        account,
        mailbox,
        Counts {
            messages: -1,
            unseen: if msg.is_seen() { 0 } else { -1 },
            bytes: -(msg.body.size as i64),
        },
    )?;
    log_change(
        txn,
        account,
        mailbox,
        &Change {
            modseq: mb.highest_modseq,
            uid,
            kind: ChangeKind::Expunged,
            thread_id: msg.thread_id.clone(),
            origin: msg.origin,
            moved,
        },
    )?;
    if let Some(aid) = msg.acceptance_id {
        ledger::record(
            txn,
            &aid,
            &LedgerState::Expunged {
                account,
                mailbox,
                uid,
                expunged_ms: now_ms(),
            },
        )?;
    }
    Ok(Some(msg.body))
}

/// How STORE changes flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlagOp {
    Replace,
    Add,
    Remove,
}

/// What STORE did to one message: its flags and MODSEQ afterwards, or
/// `Err(modseq)` when UNCHANGEDSINCE failed (it changed after that).
pub type StoreResult = std::result::Result<(Vec<String>, u64), u64>;

/// Changes one message's flags (IMAP STORE). `None` if the message is gone;
/// otherwise as [`store_flags_many`].
pub async fn store_flags(
    txn: &FencedTxn<'_>,
    account: AccountId,
    mailbox: MailboxId,
    uid: Uid,
    op: FlagOp,
    flags: &[String],
    unchanged_since: Option<u64>,
) -> Result<Option<StoreResult>> {
    let mut done = store_flags_many(txn, account, mailbox, &[uid], op, flags, unchanged_since).await?;
    Ok(done.pop().map(|(_, r)| r))
}

/// Changes the flags of messages of one mailbox (IMAP STORE), all in
/// `txn`: their hot rows are read together (one range read for a run such
/// as `1:*`), the mailbox record once, and only the rows whose flags
/// change are written — the hot part alone, ~80 bytes; a whole row of an
/// earlier form is split on the way (that is its migration). Returns, for
/// each message still present, in UID order, the new flags and MODSEQ
/// (unchanged flags keep their MODSEQ), or `Err(modseq)` when
/// UNCHANGEDSINCE failed. At most [`RANGE_KEYS_MAX`] UIDs.
pub async fn store_flags_many(
    txn: &FencedTxn<'_>,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
    op: FlagOp,
    flags: &[String],
    unchanged_since: Option<u64>,
) -> Result<Vec<(Uid, StoreResult)>> {
    let rows = raw_rows(txn, account, mailbox, uids).await?;
    let mut out = Vec::with_capacity(rows.len());
    // (before, after) of the mailbox record, read at the first change.
    let mut record: Option<(mailboxes::Mailbox, mailboxes::Mailbox)> = None;
    let mut unseen_delta = 0i64;
    for (uid, raw) in rows {
        let row = message_codec::decode_row(&raw)?;
        let mut meta = match &row {
            StoredRow::Split(m) => m.clone(),
            StoredRow::Whole(m) => m.meta(),
        };
        if let Some(since) = unchanged_since
            && meta.modseq > since
        {
            out.push((uid, Err(meta.modseq)));
            continue;
        }
        let next = next_flags(op, &meta.flags, flags);
        if same_flags(&next, &meta.flags) {
            out.push((uid, Ok((meta.flags, meta.modseq))));
            continue;
        }
        if record.is_none() {
            // Indexed first, so this change comes after every Added one
            // (the row read above is the same either way).
            let before = unindexed::index_first(txn, account, mailbox)
                .await?
                .ok_or_else(|| StorageError::NotFound(format!("mailbox {mailbox}")))?;
            record = Some((before.clone(), before));
        }
        let (_, mb) = record.as_mut().expect("read above");
        mb.highest_modseq += 1;
        mb.note_keywords(&next);
        let was_seen = meta.is_seen();
        meta.flags = next;
        meta.modseq = mb.highest_modseq;
        unseen_delta += match (was_seen, meta.is_seen()) {
            (false, true) => {
                txn.clear(&keyspace::unseen(account, mailbox, uid))?;
                -1
            }
            (true, false) => {
                txn.set(&keyspace::unseen(account, mailbox, uid), b"")?;
                1
            }
            _ => 0,
        };
        match &row {
            StoredRow::Split(_) => put_meta(txn, account, mailbox, &meta)?,
            StoredRow::Whole(m) => put_split(txn, account, mailbox, &meta, &m.summary)?,
        }
        log_change(txn, account, mailbox, &Change::of(&meta, ChangeKind::Flags))?;
        out.push((uid, Ok((meta.flags, meta.modseq))));
    }
    if let Some((before, after)) = record {
        mailboxes::put(txn, account, &before, &after)?;
    }
    if unseen_delta != 0 {
        mailboxes::add_counts(
            txn,
            account,
            mailbox,
            Counts {
                unseen: unseen_delta,
                ..Counts::default()
            },
        )?;
    }
    Ok(out)
}

/// The flags after a STORE of `flags` with `op` on `current` (names
/// compared case-insensitively, no duplicates).
fn next_flags(op: FlagOp, current: &[String], flags: &[String]) -> Vec<String> {
    let mut next: Vec<String> = match op {
        FlagOp::Replace => flags.to_vec(),
        FlagOp::Add => {
            let mut f = current.to_vec();
            for x in flags {
                if !f.iter().any(|y| y.eq_ignore_ascii_case(x)) {
                    f.push(x.clone());
                }
            }
            f
        }
        FlagOp::Remove => current
            .iter()
            .filter(|y| !flags.iter().any(|x| x.eq_ignore_ascii_case(y)))
            .cloned()
            .collect(),
    };
    next.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    next
}

fn same_flags(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.iter().any(|y| y.eq_ignore_ascii_case(x)))
}

/// Copies a message into another mailbox of the same account (IMAP COPY;
/// MOVE is COPY + EXPUNGE in one transaction). The copy shares the body
/// (the caller takes a blob reference) and, for a MOVE, the acceptance id,
/// whose ledger entry follows it, and the message's identity: the new row
/// keeps the source's origin (or takes the source's place as its origin)
/// and the placement key points at it, so its JMAP id / EMAILID stay. A
/// plain COPY is another message: no origin, an id of its own. Returns
/// the new UID.
pub async fn copy_to(
    txn: &FencedTxn<'_>,
    account: AccountId,
    from: MailboxId,
    uid: Uid,
    to: MailboxId,
    moving: bool,
) -> Result<Option<(Uid, BodyRef)>> {
    if moving {
        unindexed::index_first(txn, account, from).await?;
    }
    let Some(msg) = get(txn, account, from, uid).await? else {
        return Ok(None);
    };
    let before = unindexed::index_first(txn, account, to)
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("mailbox {to}")))?;
    let mut mb = before.clone();
    let new_uid = mb.uid_next;
    mb.uid_next = new_uid
        .checked_add(1)
        .ok_or_else(|| StorageError::Model("UID space exhausted".into()))?;
    mb.highest_modseq += 1;
    mb.note_keywords(&msg.flags);
    mailboxes::put(txn, account, &before, &mb)?;
    let row = MessageMeta {
        uid: new_uid,
        modseq: mb.highest_modseq,
        acceptance_id: if moving { msg.acceptance_id } else { None },
        origin: moving.then(|| msg.first_place(from)),
        ..msg.meta()
    };
    if let Some((m, u)) = row.origin {
        placement::put(txn, account, (m, u), (to, new_uid))?;
    }
    put_split(txn, account, to, &row, &msg.summary)?;
    index_date(txn, account, to, &row)?;
    index_unseen(txn, account, to, &row)?;
    if let Some(t) = &row.thread_id {
        threads::add_member(txn, account, t, to, new_uid)?;
    }
    mailboxes::add_counts(
        txn,
        account,
        to,
        Counts {
            messages: 1,
            unseen: if row.is_seen() { 0 } else { 1 },
            bytes: row.body.size as i64,
        },
    )?;
    log_change(txn, account, to, &Change::of(&row, ChangeKind::Added))?;
    if moving {
        // The source row goes without an "expunged" ledger entry: the
        // acceptance now lives at its new place.
        let mut unlinked = msg.meta();
        unlinked.acceptance_id = None;
        put_meta(txn, account, from, &unlinked)?;
        expunge_as(txn, account, from, uid, true).await?;
        if let Some(aid) = msg.acceptance_id {
            ledger::record(
                txn,
                &aid,
                &LedgerState::Delivered {
                    account,
                    mailbox: to,
                    uid: new_uid,
                    uid_validity: mb.uid_validity,
                },
            )?;
        }
    }
    Ok(Some((new_uid, msg.body)))
}

/// One change-log entry (CONDSTORE/QRESYNC, JMAP /changes), written in the
/// same transaction as the change it records.
pub(super) fn log_change(txn: &Txn, account: AccountId, mailbox: MailboxId, change: &Change) -> Result<()> {
    put_record(txn, &keyspace::change(account, mailbox, change.modseq), change)
}

/// The forms earlier builds stored a message row in (for tests that build
/// such stores; feature `fault-hooks`).
#[cfg(feature = "fault-hooks")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlierForm {
    /// Version 1: the hot fields and the summary in one row.
    V1,
    /// The JSON rows of the first builds.
    Json,
    /// A split row (version 2) whose summary is the JSON of summary
    /// version 1, as the build before binary summaries wrote it.
    SummaryV1,
}

/// TESTS ONLY (feature `fault-hooks`): rewrites a message as an earlier
/// build stored it — in `form`, with no unseen index key — so tests above this crate can prove such stores still read and
/// migrate. False if the message does not exist.
#[cfg(feature = "fault-hooks")]
pub async fn rewrite_in_earlier_form(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    uid: Uid,
    form: EarlierForm,
) -> Result<bool> {
    let txn = &FencedTxn::admin(txn, AdminWrite::Fixture);
    unindexed::index_first(txn, account, mailbox).await?;
    let Some(m) = get(txn, account, mailbox, uid).await? else {
        return Ok(false);
    };
    let summary_key = keyspace::message_summary(account, mailbox, uid);
    match form {
        EarlierForm::V1 | EarlierForm::Json => {
            let raw = match form {
                EarlierForm::V1 => message_codec::encode_v1(&m)?,
                _ => message_codec::encode_json(&m)?,
            };
            txn.set(&keyspace::message(account, mailbox, uid), &raw)?;
            txn.clear(&summary_key)?;
        }
        EarlierForm::SummaryV1 => {
            put_meta(txn, account, mailbox, &m.meta())?;
            txn.set(&summary_key, &summary_codec::encode_v1(&m.summary)?)?;
        }
    }
    txn.clear(&keyspace::unseen(account, mailbox, uid))?;
    Ok(true)
}

/// TESTS ONLY (feature `fault-hooks`): the first byte of a stored row
/// (its form: `message_codec::VERSION_2`, `VERSION_1`, or `{` for JSON).
#[cfg(feature = "fault-hooks")]
pub async fn stored_form(txn: &Txn, account: AccountId, mailbox: MailboxId, uid: Uid) -> Result<Option<u8>> {
    Ok(txn
        .get(&keyspace::message(account, mailbox, uid))
        .await?
        .and_then(|raw| raw.first().copied()))
}
