//! The envelopes of recently searched mailboxes, with each message's size
//! and internal date, held node-wide, so that a SEARCH on SUBJECT, FROM,
//! TO, CC, BCC, SENT*, LARGER, SMALLER, BEFORE, ON or SINCE (and SORT and
//! THREAD) over a big mailbox is a walk in memory instead of a read and
//! decode of every envelope or hot row (issue 15: `SEARCH SUBJECT` over
//! 10,000 messages at ≥ 200 ops/s with 8 sessions; SEARCH LARGER at
//! Dovecot's speed).
//!
//! Why it needs no invalidation: an envelope, a size and an internal date
//! are written once, with their message, under a UID that is never reused
//! within a UIDVALIDITY (the key holds it); only flags and MODSEQs change,
//! and they are not held here. Appends only add higher UIDs, which a session's view names
//! and the cache reads on first use; expunges leave an entry that no view
//! names any more (each lookup starts from the session's own UIDs). So the
//! cache is right on every node, whichever node's shard wrote the mailbox;
//! no hint from the writer is needed.
//!
//! Bounded: entries are whole mailboxes, their size estimated from their
//! strings; past `budget_bytes` the least recently used mailboxes go, and
//! a mailbox that alone exceeds the budget is answered from what was read
//! and not kept. A node configured with a budget of 0 holds no cache
//! (SEARCH reads the store every time, as before).

use std::sync::RwLock;

use meshmail_storage::Database;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::messages::MessageMeta;
use meshmail_storage::model::summary::{AddressList, Envelope, HeaderText};

use super::mailbox_lru::{MailboxKey, MailboxLru};

/// Envelopes read per store transaction while filling (one range read of
/// hot rows and one of summaries each).
const FILL_UIDS_PER_READ: usize = 2000;

/// What never changes of one message, as held.
#[derive(Debug, Clone, Default)]
pub struct FixedParts {
    /// Without `sender` and `reply_to` (see [`FixedParts::new`]).
    pub envelope: Envelope,
    /// RFC822.SIZE.
    pub size: u64,
    pub internal_date_ms: i64,
}

impl FixedParts {
    /// What is held of a message (`meta` gives its size and date). The
    /// envelope's `sender` and `reply_to` are left out: no SEARCH key, SORT
    /// criterion or THREAD algorithm reads them, and being copies of
    /// `from` when the headers are absent they were about a third of the
    /// cache (a 30,000-message INBOX of 1 KiB mail did not fit 32 MiB).
    pub fn new(mut envelope: Envelope, meta: &MessageMeta) -> FixedParts {
        envelope.sender = AddressList::default();
        envelope.reply_to = AddressList::default();
        FixedParts {
            envelope,
            size: meta.body.size,
            internal_date_ms: meta.internal_date_ms,
        }
    }
}

/// The cached messages of one mailbox, in UID order.
#[derive(Default)]
pub struct MailboxEnvelopes {
    uids: Vec<Uid>,
    messages: Vec<FixedParts>,
    /// Every message with a UID up to this one that existed when it was
    /// read is held (later ones may have been expunged since).
    loaded_to: Uid,
    bytes: usize,
}

impl MailboxEnvelopes {
    /// What is held of `uid`; None for a message that was gone when read.
    pub fn get(&self, uid: Uid) -> Option<&FixedParts> {
        self.uids.binary_search(&uid).ok().map(|i| &self.messages[i])
    }

    fn append(&mut self, read: Vec<(Uid, FixedParts)>, up_to: Uid) {
        for (uid, fixed) in read {
            // Two sessions may fill at once: the later one keeps only
            // what the first did not add.
            if uid > self.loaded_to && self.uids.last().is_none_or(|last| uid > *last) {
                self.bytes += approx_bytes(&fixed.envelope);
                self.uids.push(uid);
                self.messages.push(fixed);
            }
        }
        self.loaded_to = self.loaded_to.max(up_to);
    }
}

/// Node-wide; one for all IMAP listeners.
pub struct EnvelopeCache {
    lru: MailboxLru<RwLock<MailboxEnvelopes>>,
}

impl EnvelopeCache {
    pub fn new(budget_bytes: usize) -> EnvelopeCache {
        EnvelopeCache {
            lru: MailboxLru::new(budget_bytes, "meshmail_imap_envelope_cache"),
        }
    }

    /// Runs `f` over the envelopes of the mailbox once every UID of `uids`
    /// (ascending: a session's view) has been read, from the store when not
    /// held yet. None when the store cannot be read.
    /// A mailbox too big for the budget is answered from what was read,
    /// and not kept.
    pub async fn with_envelopes<R>(
        &self,
        db: &Database,
        account: AccountId,
        mailbox: MailboxId,
        uid_validity: u32,
        uids: &[Uid],
        f: impl FnOnce(&MailboxEnvelopes) -> R,
    ) -> Option<R> {
        let key = MailboxKey::new(account, mailbox, uid_validity);
        let entry = self.lru.entry(key);
        let loaded_to = entry.data.read().expect("envelope cache").loaded_to;
        let missing_from = uids.partition_point(|u| *u <= loaded_to);
        let missing = &uids[missing_from..];
        metrics::counter!("meshmail_imap_envelope_cache_hits_total").increment(missing_from as u64);
        if !missing.is_empty() {
            metrics::counter!("meshmail_imap_envelope_cache_misses_total").increment(missing.len() as u64);
            for chunk in missing.chunks(FILL_UIDS_PER_READ) {
                let read = read_envelopes(db, account, mailbox, chunk).await?;
                let up_to = *chunk.last().expect("chunks are not empty");
                let mut data = entry.data.write().expect("envelope cache");
                data.append(read, up_to);
                entry.set_bytes(data.bytes);
            }
            if !self.lru.evict_for(key) {
                // Answered from what was just read, then let go: the next
                // search of this mailbox reads the store again.
                metrics::counter!("meshmail_imap_envelope_cache_too_big_total").increment(1);
            }
        }
        let data = entry.data.read().expect("envelope cache");
        Some(f(&data))
    }

    /// Takes what a FETCH of envelopes read anyway for `chunk`, a run of
    /// UIDs of a session's `view`, so that a SEARCH, SORT or THREAD after
    /// FETCH ENVELOPE finds the mailbox held (as Dovecot's cache file
    /// keeps fetched fields). `read` (called only when wanted) gives every
    /// stored message of the chunk. It is kept only when the chunk goes on
    /// from what is held: no UID of the view between the last one held and
    /// the chunk's first, and the chunk contiguous in the view; then no
    /// message up to the chunk's last UID is missed (UIDs ascend, and a
    /// view names every message up to its highest UID, or its expunge).
    pub fn offer(
        &self,
        account: AccountId,
        mailbox: MailboxId,
        uid_validity: u32,
        view: &[Uid],
        chunk: &[Uid],
        read: impl FnOnce() -> Vec<(Uid, FixedParts)>,
    ) {
        let (Some(first), Some(last)) = (chunk.first(), chunk.last()) else {
            return;
        };
        let (Ok(from), Ok(to)) = (view.binary_search(first), view.binary_search(last)) else {
            return;
        };
        if to - from + 1 != chunk.len() {
            return; // not a run of the view (FETCH 1,5,9 …)
        }
        let key = MailboxKey::new(account, mailbox, uid_validity);
        let entry = self.lru.entry(key);
        {
            let mut data = entry.data.write().expect("envelope cache");
            if view.partition_point(|u| *u <= data.loaded_to) != from {
                return; // held already, or a gap before the chunk
            }
            data.append(read(), *last);
            entry.set_bytes(data.bytes);
        }
        metrics::counter!("meshmail_imap_envelope_cache_fetch_fills_total").increment(chunk.len() as u64);
        self.lru.evict_for(key);
    }
}

/// The fixed parts of the messages of `uids` that exist, by UID.
async fn read_envelopes(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Option<Vec<(Uid, FixedParts)>> {
    let rows = super::view::load_envelopes(db, account, mailbox, uids).await.ok()?;
    Some(
        rows.into_iter()
            .map(|(m, envelope)| (m.uid, FixedParts::new(envelope, &m)))
            .collect(),
    )
}

/// Heap bytes of a held message, roughly: its envelope's strings and
/// vectors, plus the structs and the UID beside it.
fn approx_bytes(e: &Envelope) -> usize {
    fn text(t: &Option<HeaderText>) -> usize {
        t.as_ref().map_or(0, |t| t.raw.len() + t.decoded.len())
    }
    fn s(v: &Option<String>) -> usize {
        v.as_ref().map_or(0, String::len)
    }
    fn list(l: &AddressList) -> usize {
        s(&l.raw)
            + l.addresses
                .iter()
                .map(|a| std::mem::size_of_val(a) + s(&a.name) + s(&a.raw_name) + s(&a.mailbox) + s(&a.host))
                .sum::<usize>()
    }
    std::mem::size_of::<FixedParts>()
        + std::mem::size_of::<Uid>()
        + s(&e.date)
        + text(&e.subject)
        + e.other_subjects
            .iter()
            .map(|t| std::mem::size_of_val(t) + t.raw.len() + t.decoded.len())
            .sum::<usize>()
        + [&e.from, &e.sender, &e.reply_to, &e.to, &e.cc, &e.bcc]
            .into_iter()
            .map(list)
            .sum::<usize>()
        + s(&e.in_reply_to)
        + s(&e.message_id)
        + s(&e.references)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(subject: &str) -> FixedParts {
        FixedParts {
            envelope: Envelope {
                subject: Some(HeaderText {
                    raw: subject.into(),
                    decoded: subject.into(),
                }),
                ..Envelope::default()
            },
            size: 1,
            internal_date_ms: 2,
        }
    }

    fn held(c: &EnvelopeCache, view: &[Uid]) -> Vec<Uid> {
        c.lru
            .entry(key())
            .data
            .read()
            .unwrap()
            .uids
            .iter()
            .copied()
            .filter(|u| view.contains(u))
            .collect()
    }

    fn key() -> MailboxKey {
        MailboxKey::new(1, 2, 3)
    }

    /// A FETCH's chunks are kept only where they go on from what is held.
    #[test]
    fn a_fetch_fills_only_runs_that_continue_what_is_held() {
        let c = EnvelopeCache::new(1 << 20);
        let view: Vec<Uid> = vec![1, 2, 4, 5, 7, 8, 9];
        let offer = |chunk: &[Uid], stored: &[Uid]| {
            c.offer(1, 2, 3, &view, chunk, || {
                stored.iter().map(|u| (*u, env("s"))).collect()
            });
        };
        // Not from the start of the view: a gap before it.
        offer(&[4, 5], &[4, 5]);
        assert!(held(&c, &view).is_empty());
        // Not a run of the view.
        offer(&[1, 4], &[1, 4]);
        assert!(held(&c, &view).is_empty());
        // From the start (2 expunged meanwhile: not stored), then on.
        offer(&[1, 2, 4], &[1, 4]);
        offer(&[5, 7], &[5, 7]);
        assert_eq!(held(&c, &view), vec![1, 4, 5, 7]);
        // Again, or overlapping: nothing new.
        offer(&[1, 2, 4], &[1, 4]);
        offer(&[9], &[9]); // 8 missing before it: not kept
        assert_eq!(held(&c, &view), vec![1, 4, 5, 7]);
        offer(&[8, 9], &[8, 9]);
        assert_eq!(
            held(&c, &view),
            view.iter().copied().filter(|u| *u != 2).collect::<Vec<_>>()
        );
    }

    #[test]
    fn appends_keep_uid_order_and_skip_what_is_held() {
        let mut m = MailboxEnvelopes::default();
        m.append(vec![(1, env("a")), (3, env("c"))], 4);
        // A second filler that read 3..=5 concurrently: 3 is held already.
        m.append(vec![(3, env("c")), (5, env("e"))], 5);
        assert_eq!(m.uids, vec![1, 3, 5]);
        assert_eq!(m.loaded_to, 5);
        assert!(m.get(2).is_none() && m.get(4).is_none());
        assert_eq!(m.get(5).unwrap().envelope.subject.as_ref().unwrap().raw, "e");
        assert!(m.bytes >= 3 * std::mem::size_of::<FixedParts>());
    }
}
