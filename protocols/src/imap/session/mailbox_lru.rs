//! What the node-wide IMAP caches share: whole mailboxes as entries, keyed
//! by (account, mailbox, UIDVALIDITY), kept under a byte budget with the
//! least recently used mailbox dropped first. The envelope cache
//! (`envelope_cache.rs`) and the hot-row cache (`hot_row_cache.rs`) each
//! hold one; what an entry holds, and how it stays right, is theirs.
//!
//! A mailbox that alone exceeds the budget is not kept: the caller answers
//! from what it read and lets it go. Each cache publishes
//! `<metric>_bytes`, `<metric>_mailboxes` and `<metric>_evictions_total`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use meshmail_storage::ids::{AccountId, MailboxId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct MailboxKey {
    pub account: AccountId,
    pub mailbox: MailboxId,
    pub uid_validity: u32,
}

impl MailboxKey {
    pub fn new(account: AccountId, mailbox: MailboxId, uid_validity: u32) -> MailboxKey {
        MailboxKey {
            account,
            mailbox,
            uid_validity,
        }
    }
}

/// One mailbox's entry: the cache's data, the bytes it was last said to
/// take, and when it was last used.
pub(super) struct Entry<T> {
    pub data: T,
    bytes: AtomicUsize,
    last_used: AtomicU64,
}

impl<T> Entry<T> {
    /// Records what the entry now takes (its data's estimate).
    pub fn set_bytes(&self, bytes: usize) {
        self.bytes.store(bytes, Ordering::Relaxed);
    }
}

struct Inner<T> {
    entries: HashMap<MailboxKey, Arc<Entry<T>>>,
    tick: u64,
}

pub(super) struct MailboxLru<T> {
    budget_bytes: usize,
    /// The metric names' stem, e.g. `meshmail_imap_envelope_cache`.
    metric: &'static str,
    inner: Mutex<Inner<T>>,
}

impl<T: Default> MailboxLru<T> {
    pub fn new(budget_bytes: usize, metric: &'static str) -> MailboxLru<T> {
        MailboxLru {
            budget_bytes,
            metric,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                tick: 0,
            }),
        }
    }

    /// The entry of `key`, created empty when missing, marked as just used.
    pub fn entry(&self, key: MailboxKey) -> Arc<Entry<T>> {
        let mut inner = self.inner.lock().expect("mailbox cache");
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner
            .entries
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Entry {
                    data: T::default(),
                    bytes: AtomicUsize::new(0),
                    last_used: AtomicU64::new(tick),
                })
            })
            .clone();
        entry.last_used.store(tick, Ordering::Relaxed);
        entry
    }

    /// Drops least recently used mailboxes until the cache fits its
    /// budget. `key`, just used, stays unless it alone exceeds the budget;
    /// false then.
    pub fn evict_for(&self, key: MailboxKey) -> bool {
        let mut inner = self.inner.lock().expect("mailbox cache");
        let mut sizes: Vec<(MailboxKey, usize, u64)> = inner
            .entries
            .iter()
            .map(|(k, e)| {
                let bytes = e.bytes.load(Ordering::Relaxed);
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
            metrics::counter!(format!("{}_evictions_total", self.metric)).increment(1);
        }
        metrics::gauge!(format!("{}_bytes", self.metric)).set(total as f64);
        metrics::gauge!(format!("{}_mailboxes", self.metric)).set(inner.entries.len() as f64);
        fits
    }

    #[cfg(test)]
    pub fn holds(&self, key: MailboxKey) -> bool {
        self.inner.lock().unwrap().entries.contains_key(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(mailbox: MailboxId) -> MailboxKey {
        MailboxKey::new(1, mailbox, 7)
    }

    fn fill(c: &MailboxLru<()>, mailbox: MailboxId, bytes: usize) -> bool {
        c.entry(key(mailbox)).set_bytes(bytes);
        c.evict_for(key(mailbox))
    }

    #[test]
    fn the_least_recently_used_mailbox_goes_first_and_a_too_big_one_is_not_kept() {
        let c: MailboxLru<()> = MailboxLru::new(250, "test_cache");
        assert!(fill(&c, 1, 100));
        assert!(fill(&c, 2, 100));
        c.entry(key(1)); // 1 used again: 2 is now the oldest
        assert!(fill(&c, 3, 100));
        assert!(c.holds(key(1)) && !c.holds(key(2)) && c.holds(key(3)));
        assert!(!fill(&c, 4, 300), "bigger than the whole budget");
        assert!(c.holds(key(1)) && c.holds(key(3)) && !c.holds(key(4)));
    }
}
