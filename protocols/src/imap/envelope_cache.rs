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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use meshmail_storage::Database;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::summary::{AddressList, Envelope, HeaderText};

/// Envelopes read per store transaction while filling (one range read of
/// hot rows and one of summaries each).
const FILL_UIDS_PER_READ: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    account: AccountId,
    mailbox: MailboxId,
    uid_validity: u32,
}

/// What never changes of one message, as held.
#[derive(Debug, Clone, Default)]
pub struct FixedParts {
    pub envelope: Envelope,
    /// RFC822.SIZE.
    pub size: u64,
    pub internal_date_ms: i64,
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

struct Entry {
    data: RwLock<MailboxEnvelopes>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Arc<Entry>>,
    tick: u64,
}

/// Node-wide; one for all IMAP listeners.
pub struct EnvelopeCache {
    budget_bytes: usize,
    inner: Mutex<Inner>,
}

impl EnvelopeCache {
    pub fn new(budget_bytes: usize) -> EnvelopeCache {
        EnvelopeCache {
            budget_bytes,
            inner: Mutex::new(Inner::default()),
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
        let key = Key {
            account,
            mailbox,
            uid_validity,
        };
        let entry = self.entry(key);
        let loaded_to = entry.data.read().expect("envelope cache").loaded_to;
        let missing_from = uids.partition_point(|u| *u <= loaded_to);
        let missing = &uids[missing_from..];
        metrics::counter!("meshmail_imap_envelope_cache_hits_total").increment(missing_from as u64);
        if !missing.is_empty() {
            metrics::counter!("meshmail_imap_envelope_cache_misses_total").increment(missing.len() as u64);
            for chunk in missing.chunks(FILL_UIDS_PER_READ) {
                let read = read_envelopes(db, account, mailbox, chunk).await?;
                let up_to = *chunk.last().expect("chunks are not empty");
                entry.data.write().expect("envelope cache").append(read, up_to);
            }
            if !self.evict_for(key) {
                // Answered from what was just read, then let go: the next
                // search of this mailbox reads the store again.
                metrics::counter!("meshmail_imap_envelope_cache_too_big_total").increment(1);
            }
        }
        let data = entry.data.read().expect("envelope cache");
        Some(f(&data))
    }

    /// The entry of `key`, created when missing, marked as just used.
    fn entry(&self, key: Key) -> Arc<Entry> {
        let mut inner = self.inner.lock().expect("envelope cache");
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner
            .entries
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Entry {
                    data: RwLock::new(MailboxEnvelopes::default()),
                    last_used: AtomicU64::new(tick),
                })
            })
            .clone();
        entry.last_used.store(tick, Ordering::Relaxed);
        entry
    }

    /// Drops least recently used mailboxes until the cache fits its
    /// budget. `key`, just read, stays unless it alone exceeds the budget;
    /// false then.
    fn evict_for(&self, key: Key) -> bool {
        let mut inner = self.inner.lock().expect("envelope cache");
        let mut sizes: Vec<(Key, usize, u64)> = inner
            .entries
            .iter()
            .map(|(k, e)| {
                let bytes = e.data.read().expect("envelope cache").bytes;
                (*k, bytes, e.last_used.load(Ordering::Relaxed))
            })
            .collect();
        let mut total: usize = sizes.iter().map(|s| s.1).sum();
        let own = sizes.iter().find(|s| s.0 == key).map_or(0, |s| s.1);
        let fits = own <= self.budget_bytes;
        if !fits {
            inner.entries.remove(&key);
            total -= own;
        }
        sizes.retain(|s| s.0 != key);
        sizes.sort_by_key(|s| s.2);
        for (k, bytes, _) in sizes {
            if total <= self.budget_bytes {
                break;
            }
            inner.entries.remove(&k);
            total -= bytes;
            metrics::counter!("meshmail_imap_envelope_cache_evictions_total").increment(1);
        }
        metrics::gauge!("meshmail_imap_envelope_cache_bytes").set(total as f64);
        metrics::gauge!("meshmail_imap_envelope_cache_mailboxes").set(inner.entries.len() as f64);
        fits
    }
}

/// The fixed parts of the messages of `uids` that exist, by UID.
async fn read_envelopes(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Option<Vec<(Uid, FixedParts)>> {
    let rows = super::session_view::load_envelopes(db, account, mailbox, uids)
        .await
        .ok()?;
    Some(
        rows.into_iter()
            .map(|(m, envelope)| {
                let fixed = FixedParts {
                    envelope,
                    size: m.body.size,
                    internal_date_ms: m.internal_date_ms,
                };
                (m.uid, fixed)
            })
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

    fn key(mailbox: MailboxId) -> Key {
        Key {
            account: 1,
            mailbox,
            uid_validity: 7,
        }
    }

    /// Fills `mailbox` with `n` envelopes as a read would.
    fn fill(c: &EnvelopeCache, mailbox: MailboxId, n: u32) -> bool {
        let e = c.entry(key(mailbox));
        e.data
            .write()
            .unwrap()
            .append((1..=n).map(|u| (u, env("subject"))).collect(), n);
        c.evict_for(key(mailbox))
    }

    #[test]
    fn the_least_recently_used_mailbox_goes_first_and_a_too_big_one_is_not_kept() {
        let one = approx_bytes(&env("subject").envelope) + std::mem::size_of::<Uid>();
        let c = EnvelopeCache::new(250 * one);
        assert!(fill(&c, 1, 100));
        assert!(fill(&c, 2, 100));
        c.entry(key(1)); // 1 used again: 2 is now the oldest
        assert!(fill(&c, 3, 100));
        let held = |m| c.inner.lock().unwrap().entries.contains_key(&key(m));
        assert!(held(1) && !held(2) && held(3));
        assert!(!fill(&c, 4, 300), "bigger than the whole budget");
        assert!(held(1) && held(3) && !held(4));
    }
}
