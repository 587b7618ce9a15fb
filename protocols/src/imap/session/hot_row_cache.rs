//! The hot rows (UID, flags, MODSEQ, size, dates) of recently read
//! mailboxes, held node-wide and brought up to date from the mailbox's
//! change log at every use, so that `FETCH 1:* (UID FLAGS)` over a big
//! mailbox renders from memory instead of reading and decoding every row
//! again (issue 15: a 30,000-message INBOX at least as fast as Dovecot).
//!
//! Why it is right on every node without hints: every use first reads, in
//! one store transaction, the mailbox's HIGHESTMODSEQ and, when it moved
//! past what is held, the change log since then and the rows it names (an
//! append or a flag change re-reads the row, an expunge drops it). Whoever
//! wrote the change, on whichever node, wrote it through the store, so the
//! rows answered are the store's as of that transaction, as a fresh read
//! would have been. A log trimmed beyond what is held (the compactor's
//! floor), more changes than [`CHANGES_PER_REFRESH_MAX`], or another
//! UIDVALIDITY reload the mailbox instead. A first load reads in chunks
//! (several transactions, like an uncached FETCH) and records the
//! HIGHESTMODSEQ seen before the first chunk: whatever changed during the
//! load is in the log after it and is applied at the next use.
//!
//! Bounded like the envelope cache (`mailbox_lru.rs`): `[imap]
//! hot_cache_mb`, whole mailboxes, least recently used first out; 0 turns
//! it off.

use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::mailboxes;
use meshmail_storage::model::messages::{self, ChangeKind, MessageMeta};
use meshmail_storage::{Database, StorageError};

use super::mailbox_lru::{MailboxKey, MailboxLru};
use super::view::META_ROWS_PER_READ;

/// Changes applied in one refresh at most; beyond, the mailbox is read
/// again (and the refresh stays one modest transaction, inside FDB's
/// limits: one range read of the log and point reads of the rows).
const CHANGES_PER_REFRESH_MAX: usize = 2000;

/// One mailbox's hot rows, in UID order, as of `as_of`.
#[derive(Default)]
pub struct HotRows {
    rows: Vec<MessageMeta>,
    /// The HIGHESTMODSEQ the rows reflect; None before the first load.
    as_of: Option<u64>,
    bytes: usize,
}

impl HotRows {
    /// The row of `uid`; None for a message expunged (or never there).
    pub fn get(&self, uid: Uid) -> Option<&MessageMeta> {
        self.rows
            .binary_search_by_key(&uid, |m| m.uid)
            .ok()
            .map(|i| &self.rows[i])
    }

    /// Puts `fresh` rows in place (new UIDs added, known ones replaced)
    /// and drops `gone` UIDs. Linear in the mailbox, whatever the number
    /// of changes: an expunge of thousands from a big mailbox must not
    /// shift the vector once per message.
    fn apply(&mut self, fresh: Vec<MessageMeta>, gone: &[Uid]) {
        // Replacements first, while the rows are sorted; then the new
        // rows, which appends give higher UIDs than any held (sorted once
        // when one is not).
        let mut new = Vec::new();
        for m in fresh {
            match self.rows.binary_search_by_key(&m.uid, |r| r.uid) {
                Ok(i) => {
                    self.bytes = self.bytes - approx_bytes(&self.rows[i]) + approx_bytes(&m);
                    self.rows[i] = m;
                }
                Err(_) => new.push(m),
            }
        }
        let last = self.rows.last().map(|r| r.uid);
        let in_order = new.first().is_none_or(|m| last.is_none_or(|l| m.uid > l)) && new.is_sorted_by_key(|m| m.uid);
        self.bytes += new.iter().map(approx_bytes).sum::<usize>();
        self.rows.extend(new);
        if !in_order {
            self.rows.sort_unstable_by_key(|r| r.uid);
        }
        if !gone.is_empty() {
            let mut gone = gone.to_vec();
            gone.sort_unstable();
            let mut freed = 0;
            self.rows.retain(|r| {
                let keep = gone.binary_search(&r.uid).is_err();
                if !keep {
                    freed += approx_bytes(r);
                }
                keep
            });
            self.bytes -= freed;
        }
    }

    fn clear(&mut self) {
        *self = HotRows::default();
    }
}

/// What a refresh found in the store.
enum Delta {
    /// Nothing changed since the rows were read.
    None,
    /// Read the mailbox again, from this HIGHESTMODSEQ on.
    Reload(u64),
    /// Rows to put in place and UIDs expunged, up to this HIGHESTMODSEQ.
    Changes(Vec<MessageMeta>, Vec<Uid>, u64),
    /// The mailbox is gone or has another UIDVALIDITY.
    Gone,
}

/// Node-wide; one for all IMAP listeners.
pub struct HotRowCache {
    lru: MailboxLru<tokio::sync::Mutex<HotRows>>,
}

impl HotRowCache {
    pub fn new(budget_bytes: usize) -> HotRowCache {
        HotRowCache {
            lru: MailboxLru::new(budget_bytes, "meshmail_imap_hot_cache"),
        }
    }

    /// Runs `f` over the mailbox's hot rows as the store has them now
    /// (see the module's notes). None when the store cannot be read or
    /// the mailbox is gone or has another UIDVALIDITY: the caller reads
    /// the store itself. Sessions using one mailbox take turns here.
    pub async fn with_rows<R>(
        &self,
        db: &Database,
        account: AccountId,
        mailbox: MailboxId,
        uid_validity: u32,
        f: impl FnOnce(&HotRows) -> R,
    ) -> Option<R> {
        let key = MailboxKey::new(account, mailbox, uid_validity);
        let entry = self.lru.entry(key);
        let mut rows = entry.data.lock().await;
        let started = std::time::Instant::now();
        let refreshed = refresh(&mut rows, db, key).await;
        metrics::histogram!("meshmail_imap_hot_cache_refresh_seconds").record(started.elapsed().as_secs_f64());
        if let Err(e) = &refreshed {
            tracing::debug!(error = %e, "hot-row cache: store unreadable, or mailbox gone");
            rows.clear();
        }
        entry.set_bytes(rows.bytes);
        let answer = refreshed.ok().map(|()| f(&rows));
        drop(rows);
        if !self.lru.evict_for(key) {
            metrics::counter!("meshmail_imap_hot_cache_too_big_total").increment(1);
        }
        answer
    }
}

/// Why a refresh gave no rows.
#[derive(Debug, thiserror::Error)]
enum RefreshError {
    #[error(transparent)]
    Store(#[from] StorageError),
    #[error("the mailbox is gone or has another UIDVALIDITY")]
    Gone,
}

/// Brings `h` to the store's state (see the module's notes).
async fn refresh(h: &mut HotRows, db: &Database, key: MailboxKey) -> Result<(), RefreshError> {
    let as_of = h.as_of;
    let MailboxKey {
        account,
        mailbox,
        uid_validity,
    } = key;
    let delta = db
        .read("imap_hot_rows_refresh", move |txn| async move {
            let Some(mb) = mailboxes::get(&txn, account, mailbox).await? else {
                return Ok(Delta::Gone);
            };
            if mb.uid_validity != uid_validity {
                return Ok(Delta::Gone);
            }
            let Some(as_of) = as_of else {
                return Ok(Delta::Reload(mb.highest_modseq));
            };
            if mb.highest_modseq == as_of {
                return Ok(Delta::None);
            }
            if messages::change_floor(&txn, account, mailbox).await? > as_of {
                return Ok(Delta::Reload(mb.highest_modseq));
            }
            let changes = messages::changes_since(&txn, account, mailbox, as_of, CHANGES_PER_REFRESH_MAX).await?;
            if changes.len() >= CHANGES_PER_REFRESH_MAX {
                return Ok(Delta::Reload(mb.highest_modseq));
            }
            let mut reread: Vec<Uid> = Vec::new();
            let mut gone: Vec<Uid> = Vec::new();
            for c in &changes {
                match c.kind {
                    ChangeKind::Added | ChangeKind::Flags => reread.push(c.uid),
                    ChangeKind::Expunged => gone.push(c.uid),
                }
            }
            reread.sort_unstable();
            reread.dedup();
            // A row re-read and gone in the same log is simply absent.
            let fresh = messages::get_meta_many(&txn, account, mailbox, &reread).await?;
            Ok::<_, StorageError>(Delta::Changes(fresh, gone, mb.highest_modseq))
        })
        .await?;
    match delta {
        Delta::None => {
            metrics::counter!("meshmail_imap_hot_cache_refreshes_total", "kind" => "none").increment(1);
        }
        Delta::Changes(fresh, gone, modseq) => {
            metrics::counter!("meshmail_imap_hot_cache_refreshes_total", "kind" => "changes").increment(1);
            metrics::counter!("meshmail_imap_hot_cache_rows_read_total").increment(fresh.len() as u64);
            h.apply(fresh, &gone);
            h.as_of = Some(modseq);
        }
        Delta::Reload(modseq) => {
            metrics::counter!("meshmail_imap_hot_cache_refreshes_total", "kind" => "reload").increment(1);
            h.clear();
            let mut from: Uid = 1;
            loop {
                let chunk = db
                    .read("imap_hot_rows_load", move |txn| async move {
                        messages::list_meta(&txn, account, mailbox, from, None, META_ROWS_PER_READ).await
                    })
                    .await?;
                metrics::counter!("meshmail_imap_hot_cache_rows_read_total").increment(chunk.len() as u64);
                let full = chunk.len() == META_ROWS_PER_READ;
                let Some(last) = chunk.last().map(|m| m.uid) else { break };
                h.bytes += chunk.iter().map(approx_bytes).sum::<usize>();
                h.rows.extend(chunk);
                if !full || last == Uid::MAX {
                    break;
                }
                from = last + 1;
            }
            h.rows.shrink_to_fit();
            h.as_of = Some(modseq);
        }
        Delta::Gone => return Err(RefreshError::Gone),
    }
    Ok(())
}

/// Heap and inline bytes of a held row, roughly.
fn approx_bytes(m: &MessageMeta) -> usize {
    std::mem::size_of::<MessageMeta>()
        + m.flags
            .iter()
            .map(|f| std::mem::size_of::<String>() + f.len())
            .sum::<usize>()
        + m.body.hash.len()
        + m.thread_id.as_ref().map_or(0, String::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(uid: Uid, flag: &str) -> MessageMeta {
        let mut m = MessageMeta::bare(uid);
        m.flags = vec![flag.to_string()];
        m
    }

    #[test]
    fn changes_replace_insert_and_drop_rows_in_uid_order() {
        let mut h = HotRows::default();
        h.apply(vec![row(1, "a"), row(2, "a"), row(4, "a")], &[]);
        let before = h.bytes;
        // A flag change on 2, an append of 5, a late-found 3, 4 expunged.
        h.apply(vec![row(2, "\\Seen"), row(5, "b"), row(3, "c")], &[4]);
        let uids: Vec<Uid> = h.rows.iter().map(|m| m.uid).collect();
        assert_eq!(uids, vec![1, 2, 3, 5]);
        assert_eq!(h.get(2).unwrap().flags, vec!["\\Seen".to_string()]);
        assert!(h.get(4).is_none());
        assert_eq!(h.bytes, h.rows.iter().map(approx_bytes).sum::<usize>());
        assert!(h.bytes > before);
        // An expunge of a row not held is nothing.
        h.apply(Vec::new(), &[9]);
        assert_eq!(h.rows.len(), 4);
        // Rows found late among replacements and appends, then most
        // expunged at once in any order.
        h.apply(vec![row(1, "x"), row(4, "d"), row(7, "e"), row(6, "f")], &[]);
        let uids: Vec<Uid> = h.rows.iter().map(|m| m.uid).collect();
        assert_eq!(uids, vec![1, 2, 3, 4, 5, 6, 7]);
        h.apply(Vec::new(), &[6, 1, 3, 7, 2]);
        let uids: Vec<Uid> = h.rows.iter().map(|m| m.uid).collect();
        assert_eq!(uids, vec![4, 5]);
        assert_eq!(h.bytes, h.rows.iter().map(approx_bytes).sum::<usize>());
    }
}
