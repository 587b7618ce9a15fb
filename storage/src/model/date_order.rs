//! Messages in receivedAt order (JMAP Email/query's default sort): the
//! `mdat` index merged with the rows not indexed yet ([`super::unindexed`]).
//! Re-exported by [`super::messages`].

use super::placement::{self, Place};
use super::unindexed;
use crate::error::Result;
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// A message of a mailbox in receivedAt order: its UID and, if it was
/// moved, its origin (from the index value: no row read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dated {
    pub uid: Uid,
    pub origin: Option<Place>,
}

impl Dated {
    /// The first place of the message (what its JMAP id names).
    pub fn first_place(&self, mailbox: MailboxId) -> Place {
        self.origin.unwrap_or((mailbox, self.uid))
    }
}

/// UIDs in receivedAt order: [`by_date`] without the origins.
pub async fn uids_by_date(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    newest_first: bool,
    skip: usize,
    limit: usize,
) -> Result<Vec<Uid>> {
    let page = by_date(txn, account, mailbox, newest_first, skip, limit).await?;
    Ok(page.into_iter().map(|d| d.uid).collect())
}

/// Messages in receivedAt order (newest first when `newest_first`; ties by
/// UID in the same direction), skipping `skip` and taking at most `limit`,
/// from the receivedAt index (only complete for mailboxes with
/// `date_index`) merged with the unindexed rows. Reads at most `skip +
/// limit` index keys, in range reads of ≤ 10,000 keys.
pub async fn by_date(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    newest_first: bool,
    skip: usize,
    limit: usize,
) -> Result<Vec<Dated>> {
    const PAGE: usize = 10_000;
    let mut pending = dated_unindexed(txn, account, mailbox, newest_first)
        .await?
        .into_iter()
        .peekable();
    let (mut b, mut e) = keyspace::messages_by_date(account, mailbox);
    let mut page = Page {
        skip,
        limit,
        seen: 0,
        out: Vec::with_capacity(limit.min(PAGE)),
    };
    'index: while !page.full() {
        let want = (skip + limit).saturating_sub(page.seen).clamp(1, PAGE);
        let opts = if newest_first {
            RangeOptions::limit(want).reversed()
        } else {
            RangeOptions::limit(want)
        };
        let rows = txn.get_range(&b, &e, opts).await?;
        for (k, v) in &rows {
            let at = keyspace::message_date_uid(k)?;
            while let Some(&(p, origin)) = pending.peek().filter(|&&(p, _)| in_order(p, at, newest_first)) {
                page.take(p.1, origin);
                pending.next();
            }
            if page.full() {
                break 'index;
            }
            page.take(at.1, placement::date_value_origin(v)?);
            if newest_first {
                e = k.clone();
            } else {
                // The first key after `k`.
                b = [k.as_slice(), &[0]].concat();
            }
        }
        if rows.len() < want {
            break;
        }
    }
    for ((_, uid), origin) in pending {
        if page.full() {
            break;
        }
        page.take(uid, origin);
    }
    Ok(page.out)
}

/// A window of `limit` items after `skip`, filled in order.
struct Page {
    skip: usize,
    limit: usize,
    seen: usize,
    out: Vec<Dated>,
}

impl Page {
    fn take(&mut self, uid: Uid, origin: Option<Place>) {
        if self.seen >= self.skip && !self.full() {
            self.out.push(Dated { uid, origin });
        }
        self.seen += 1;
    }

    fn full(&self) -> bool {
        self.out.len() >= self.limit
    }
}

/// Whether (date, uid) `a` comes before `b` in receivedAt order.
fn in_order(a: (i64, Uid), b: (i64, Uid), newest_first: bool) -> bool {
    if newest_first { a > b } else { a < b }
}

/// The unindexed rows as ((receivedAt, UID), origin), in receivedAt order
/// (deliveries, so never an origin; carried all the same).
async fn dated_unindexed(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    newest_first: bool,
) -> Result<Vec<((i64, Uid), Option<Place>)>> {
    let mut rows: Vec<((i64, Uid), Option<Place>)> = unindexed::rows(txn, account, mailbox, 0)
        .await?
        .iter()
        .map(|m| ((m.internal_date_ms, m.uid), m.origin))
        .collect();
    rows.sort_unstable_by(|a, b| if newest_first { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) });
    Ok(rows)
}

/// How many messages come before (`date_ms`, `uid`) in receivedAt order
/// (newest first when `newest_first`), if fewer than `max`: the index of a
/// message in a sorted mailbox, read as at most `max` index keys and the
/// unindexed rows.
pub async fn date_rank(
    txn: &Txn,
    account: AccountId,
    mailbox: MailboxId,
    date_ms: i64,
    uid: Uid,
    newest_first: bool,
    max: usize,
) -> Result<Option<usize>> {
    let (b, e) = keyspace::messages_by_date(account, mailbox);
    let at = keyspace::message_by_date(account, mailbox, date_ms, uid);
    let (from, to) = if newest_first {
        ([at.as_slice(), &[0]].concat(), e)
    } else {
        (b, at)
    };
    let rows = txn.get_range(&from, &to, RangeOptions::limit(max)).await?;
    if rows.len() >= max {
        return Ok(None);
    }
    let pending = dated_unindexed(txn, account, mailbox, newest_first)
        .await?
        .into_iter()
        .filter(|&(p, _)| in_order(p, (date_ms, uid), newest_first))
        .count();
    let rank = rows.len() + pending;
    Ok((rank < max).then_some(rank))
}
