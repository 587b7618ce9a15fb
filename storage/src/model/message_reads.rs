//! Reading message rows: whole messages (hot row and summary) or hot parts
//! alone, one by one, by UID runs (range reads) or by UID lists (a range
//! read when the list is dense, point reads otherwise), and the unseen
//! index. Rows of every stored form are read (see [`message_codec`]).
//! Re-exported by [`super::messages`], where the writers are.

use super::message_codec::{self, StoredRow};
use super::messages::{Message, MessageMeta};
use super::summary::{Envelope, Summary};
use super::summary_codec;
use crate::error::{Result, StorageError};
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Keys read per range read at most (FoundationDB's limit).
pub const RANGE_KEYS_MAX: usize = 10_000;

/// A whole message (hot row and summary), in any stored form.
pub async fn get(txn: &Txn, account: AccountId, mailbox: MailboxId, uid: Uid) -> Result<Option<Message>> {
    let Some(raw) = txn.get(&keyspace::message(account, mailbox, uid)).await? else {
        return Ok(None);
    };
    match message_codec::decode_row(&raw)? {
        StoredRow::Whole(m) => Ok(Some(*m)),
        StoredRow::Split(meta) => {
            let summary = match txn.get(&keyspace::message_summary(account, mailbox, uid)).await? {
                Some(s) => summary_codec::decode(&s)?,
                None => return Err(missing_summary(uid)),
            };
            Ok(Some(Message::from_parts(meta, summary)))
        }
    }
}

/// The hot part of a message, in any stored form (no summary decoded).
pub async fn get_meta(txn: &Txn, account: AccountId, mailbox: MailboxId, uid: Uid) -> Result<Option<MessageMeta>> {
    match txn.get(&keyspace::message(account, mailbox, uid)).await? {
        Some(raw) => Ok(Some(message_codec::decode_meta(&raw)?)),
        None => Ok(None),
    }
}

pub(super) fn missing_summary(uid: Uid) -> StorageError {
    StorageError::Corrupt {
        what: "message summary".into(),
        detail: format!("no summary for the split row of uid {uid}"),
    }
}

/// The `msg` keys with `from ≤ UID < to` (to the end of the mailbox when
/// `to` is None).
fn uid_range(account: AccountId, mailbox: MailboxId, from: Uid, to: Option<Uid>) -> (Vec<u8>, Vec<u8>) {
    let (_, end) = keyspace::messages(account, mailbox);
    let e = match to {
        Some(t) => keyspace::message(account, mailbox, t),
        None => end,
    };
    (keyspace::message(account, mailbox, from), e)
}

/// Up to `limit` whole messages with UID ≥ `from_uid`, in UID order.
pub async fn list(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    from_uid: Uid,
    limit: usize,
) -> Result<Vec<Message>> {
    list_between(txn, account, mailbox, from_uid, None, limit).await
}

/// The stored rows (undecoded) of up to `limit` (≤ [`RANGE_KEYS_MAX`])
/// messages with `from ≤ UID < to`: one range read.
async fn hot_rows(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    from: Uid,
    to: Option<Uid>,
    limit: usize,
) -> Result<Vec<crate::kv::KeyValue>> {
    let (b, e) = uid_range(account, mailbox, from, to);
    txn.get_range(&b, &e, RangeOptions::limit(limit.min(RANGE_KEYS_MAX)))
        .await
}

/// Up to `limit` (≤ [`RANGE_KEYS_MAX`]) hot parts of the messages with
/// `from ≤ UID < to`, in UID order: one range read, no summary decoded.
pub async fn list_meta(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    from: Uid,
    to: Option<Uid>,
    limit: usize,
) -> Result<Vec<MessageMeta>> {
    let rows = hot_rows(txn, account, mailbox, from, to, limit).await?;
    rows.iter().map(|(_, v)| message_codec::decode_meta(v)).collect()
}

/// Up to `limit` (≤ [`RANGE_KEYS_MAX`]) whole messages with
/// `from ≤ UID < to`, in UID order: a range read of the hot rows and one
/// of the summaries they span.
pub async fn list_between(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    from: Uid,
    to: Option<Uid>,
    limit: usize,
) -> Result<Vec<Message>> {
    let rows = hot_rows(txn, account, mailbox, from, to, limit).await?;
    let decoded = rows
        .iter()
        .map(|(_, v)| message_codec::decode_row(v))
        .collect::<Result<Vec<_>>>()?;
    with_summaries(txn, account, mailbox, decoded, &WHOLE).await
}

/// How a read turns rows into what its caller wants: the summary decoded
/// whole, or its envelope alone.
struct SummaryRead<T> {
    /// From a split row's hot part and its stored summary.
    split: fn(MessageMeta, &[u8]) -> Result<T>,
    /// From a row of an earlier form, summary inside.
    whole: fn(Message) -> T,
}

const WHOLE: SummaryRead<Message> = SummaryRead {
    split: |meta, raw| Ok(Message::from_parts(meta, summary_codec::decode(raw)?)),
    whole: |m| m,
};

const ENVELOPE: SummaryRead<(MessageMeta, Envelope)> = SummaryRead {
    split: |meta, raw| Ok((meta, summary_codec::decode_envelope(raw)?)),
    whole: |m| {
        let (meta, summary): (MessageMeta, Summary) = m.into_parts();
        (meta, summary.envelope)
    },
};

const HEADER_LEN: SummaryRead<(MessageMeta, u64)> = SummaryRead {
    split: |meta, raw| Ok((meta, summary_codec::decode_header_len(raw)?)),
    whole: |m| {
        let (meta, summary): (MessageMeta, Summary) = m.into_parts();
        (meta, summary.header_len)
    },
};

/// Messages from decoded rows (in UID order), through `read`: the
/// summaries of split rows are read as one range over the UIDs they span
/// when dense, else one by one.
async fn with_summaries<T>(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    rows: Vec<StoredRow>,
    read: &SummaryRead<T>,
) -> Result<Vec<T>> {
    let split_uids: Vec<Uid> = rows
        .iter()
        .filter_map(|r| match r {
            StoredRow::Split(m) => Some(m.uid),
            StoredRow::Whole(_) => None,
        })
        .collect();
    let mut summaries = std::collections::HashMap::with_capacity(split_uids.len());
    if dense(&split_uids) {
        let (first, last) = (split_uids[0], split_uids[split_uids.len() - 1]);
        let b = keyspace::message_summary(account, mailbox, first);
        let e = match last.checked_add(1) {
            Some(after) => keyspace::message_summary(account, mailbox, after),
            None => keyspace::message_summaries(account, mailbox).1,
        };
        // `dense` bounds the span by RANGE_KEYS_MAX.
        let span = (last - first) as usize + 1;
        for (k, v) in txn.get_range(&b, &e, RangeOptions::limit(span)).await? {
            summaries.insert(keyspace::message_uid(&k)?, v);
        }
    } else {
        for uid in split_uids {
            if let Some(v) = txn.get(&keyspace::message_summary(account, mailbox, uid)).await? {
                summaries.insert(uid, v);
            }
        }
    }
    rows.into_iter()
        .map(|r| match r {
            StoredRow::Whole(m) => Ok((read.whole)(*m)),
            StoredRow::Split(meta) => {
                let raw = summaries.remove(&meta.uid).ok_or_else(|| missing_summary(meta.uid))?;
                (read.split)(meta, &raw)
            }
        })
        .collect()
}

/// Whether reading `uids` (ascending) as one range beats point reads: the
/// range they span holds few keys that were not asked for.
fn dense(uids: &[Uid]) -> bool {
    match (uids.first(), uids.last()) {
        (Some(&first), Some(&last)) => {
            let span = (last - first) as usize + 1;
            span <= RANGE_KEYS_MAX && span <= 2 * uids.len() + 64
        }
        _ => false,
    }
}

/// The raw hot rows of `uids` (missing ones skipped), in UID order: one
/// range read when they are dense (a run like `1:*`), else point reads.
pub(super) async fn raw_rows(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<(Uid, Vec<u8>)>> {
    let mut want = uids.to_vec();
    want.sort_unstable();
    want.dedup();
    let mut out = Vec::with_capacity(want.len());
    if dense(&want) {
        let (first, last) = (want[0], want[want.len() - 1]);
        let (b, e) = uid_range(account, mailbox, first, last.checked_add(1));
        let span = (last - first) as usize + 1;
        for (k, v) in txn.get_range(&b, &e, RangeOptions::limit(span)).await? {
            let uid = keyspace::message_uid(&k)?;
            if want.binary_search(&uid).is_ok() {
                out.push((uid, v));
            }
        }
    } else {
        for u in want {
            if let Some(v) = txn.get(&keyspace::message(account, mailbox, u)).await? {
                out.push((u, v));
            }
        }
    }
    Ok(out)
}

/// Hot parts of the messages `uids` that exist, in UID order (see
/// [`raw_rows`] for how they are read). At most [`RANGE_KEYS_MAX`] UIDs.
pub async fn get_meta_many(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<MessageMeta>> {
    raw_rows(txn, account, mailbox, uids)
        .await?
        .iter()
        .map(|(_, v)| message_codec::decode_meta(v))
        .collect()
}

/// Whole messages `uids` that exist, in UID order. At most
/// [`RANGE_KEYS_MAX`] UIDs.
pub async fn get_many(txn: &Txn, account: AccountId, mailbox: MailboxId, uids: &[Uid]) -> Result<Vec<Message>> {
    let rows = decoded_rows(txn, account, mailbox, uids).await?;
    with_summaries(txn, account, mailbox, rows, &WHOLE).await
}

/// The hot parts and envelopes of the messages `uids` that exist, in UID
/// order, without decoding their body structures: what SEARCH on envelope
/// fields (SUBJECT, FROM, TO, CC, BCC, SENT*), SORT and THREAD read. The
/// rows and the summaries are each one range read when `uids` are dense
/// (see [`raw_rows`]). At most [`RANGE_KEYS_MAX`] UIDs.
pub async fn get_envelopes_many(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<(MessageMeta, Envelope)>> {
    let rows = decoded_rows(txn, account, mailbox, uids).await?;
    with_summaries(txn, account, mailbox, rows, &ENVELOPE).await
}

/// The hot parts of the messages `uids` that exist, in UID order, each
/// with the length of its header section (nothing else of the summary
/// decoded): what a FETCH of `BODY.PEEK[HEADER]` and the like needs to
/// read each body's header alone. At most [`RANGE_KEYS_MAX`] UIDs.
pub async fn get_header_lens_many(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<(MessageMeta, u64)>> {
    let rows = decoded_rows(txn, account, mailbox, uids).await?;
    with_summaries(txn, account, mailbox, rows, &HEADER_LEN).await
}

async fn decoded_rows(txn: &Txn, account: AccountId, mailbox: MailboxId, uids: &[Uid]) -> Result<Vec<StoredRow>> {
    raw_rows(txn, account, mailbox, uids)
        .await?
        .iter()
        .map(|(_, v)| message_codec::decode_row(v))
        .collect()
}

/// Up to `limit` (≤ [`RANGE_KEYS_MAX`]) UIDs ≥ `from` of messages without
/// `\Seen`, in order, from the unseen index (one key-only range read),
/// then from the unindexed rows. Complete only in mailboxes whose record
/// says `unseen_index`.
pub async fn unseen_uids(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    from: Uid,
    limit: usize,
) -> Result<Vec<Uid>> {
    let (_, e) = keyspace::unseen_all(account, mailbox);
    let b = keyspace::unseen(account, mailbox, from);
    let limit = limit.min(RANGE_KEYS_MAX);
    let keys = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    let mut out: Vec<Uid> = keys
        .iter()
        .map(|(k, _)| keyspace::message_uid(k))
        .collect::<Result<_>>()?;
    if out.len() < limit {
        // Unindexed rows come after every indexed UID.
        let unseen = super::unindexed::rows(txn, account, mailbox, from).await?;
        out.extend(
            unseen
                .iter()
                .filter(|m| !m.is_seen())
                .map(|m| m.uid)
                .take(limit - out.len()),
        );
    }
    Ok(out)
}

/// How many hot rows of each version (their first byte, `message_codec`)
/// a mailbox holds, read in chunks. A store format switch leaves older
/// rows as they are until they are written again; this shows how many.
pub async fn row_versions(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
) -> Result<std::collections::BTreeMap<u8, u64>> {
    let (begin, end) = keyspace::messages(account, mailbox);
    let mut cursor = txn.range_cursor(&begin, &end, 1000, false);
    let mut out = std::collections::BTreeMap::new();
    while let Some(chunk) = cursor.next_chunk().await? {
        for (_, v) in chunk {
            *out.entry(v.first().copied().unwrap_or(0)).or_default() += 1;
        }
    }
    Ok(out)
}
