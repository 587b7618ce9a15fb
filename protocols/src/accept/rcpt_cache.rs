//! A node's cache of what RCPT learned from the store (where an address
//! goes, and which of its accounts have no vacation response), so a busy
//! MX or LMTP listener does not open a read transaction per recipient.
//!
//! Invalidated by the store's change: every write to what RCPT reads
//! raises the directory version (`model::directory`), and the cache reads
//! that one key at most every [`VALIDATE_EVERY`]; when it moved, every
//! entry goes. An entry is kept only if it was read at the version the
//! cache holds, so a lookup that raced a change never stores the old
//! answer under the new version. A change made on another node or by an
//! admin command is seen within [`VALIDATE_EVERY`] (plus one read); one
//! made by this process (ManageSieve, JMAP) calls [`local_change`], and the
//! next RCPT reads the version again: a script activated over ManageSieve
//! filters the very next delivery through the same node.
//!
//! Not cached:
//! - refusals (unknown, relay denied, misconfigured): an address added a
//!   moment ago is accepted at once, and a refusal costs the sender more
//!   than it costs us;
//! - routes with a local target that has quota limits: its usage moves
//!   with every delivery, so the RCPT-time check reads it each time;
//! - SRS addresses: their validity depends on the date, not the store.
//!
//! The answer is what RCPT replies; the delivery transaction reads the
//! mailbox and checks the quota itself, so a stale entry can at worst
//! answer RCPT as the store did [`VALIDATE_EVERY`] ago.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use meshmail_storage::model::directory;
use meshmail_storage::{Database, StorageError};

use super::recipient::LearnedAtRcpt;
use super::routing::Route;

/// How long the cache trusts the directory version it last read.
pub const VALIDATE_EVERY: Duration = Duration::from_millis(250);
/// An entry's longest life whatever the version says (a bound on anything
/// that changes without the store: the clock, a bug).
const ENTRY_MAX_AGE: Duration = Duration::from_secs(60);

/// Directory changes committed by this process, counted: a cache that
/// confirmed its version before the last one is not fresh.
static LOCAL_CHANGES: AtomicU64 = AtomicU64::new(0);

/// Records that this process has just committed a change to the directory
/// (after the commit: the version read that follows must see it).
pub fn local_change() {
    LOCAL_CHANGES.fetch_add(1, Ordering::SeqCst);
}

/// What RCPT reads for one address, when it may be kept.
#[derive(Debug, Clone)]
pub struct Cached {
    pub route: Route,
    pub learned: LearnedAtRcpt,
}

struct Entry {
    cached: Cached,
    stored: Instant,
}

#[derive(Default)]
struct State {
    /// The directory version the entries were read at.
    version: Option<i64>,
    /// When the read that confirmed `version` began.
    confirmed: Option<Instant>,
    /// [`LOCAL_CHANGES`] when that read began.
    local_changes: u64,
    entries: HashMap<String, Entry>,
}

impl State {
    fn fresh(&self) -> bool {
        self.confirmed.is_some_and(|t| t.elapsed() < VALIDATE_EVERY)
            && self.local_changes == LOCAL_CHANGES.load(Ordering::SeqCst)
    }
}

/// Shared by a node's SMTP, submission and LMTP listeners.
pub struct RcptCache {
    capacity: usize,
    state: Mutex<State>,
    /// One version read at a time; the others wait for its answer.
    confirming: tokio::sync::Mutex<()>,
}

impl RcptCache {
    /// At most `capacity` addresses (a full cache starts over: simple, and
    /// a busy MX refills its hot addresses in a fraction of a second).
    pub fn new(capacity: usize) -> Self {
        RcptCache {
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
            confirming: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads the directory version if the last read is older than
    /// [`VALIDATE_EVERY`], dropping every entry if it moved.
    pub async fn confirm(&self, db: &Database) -> Result<(), StorageError> {
        if self.state().fresh() {
            return Ok(());
        }
        let _one = self.confirming.lock().await;
        if self.state().fresh() {
            return Ok(());
        }
        let began = Instant::now();
        let local_changes = LOCAL_CHANGES.load(Ordering::SeqCst);
        let version = db
            .read("smtp_rcpt_cache", |txn| async move { directory::version(&txn).await })
            .await?;
        let mut state = self.state();
        if state.version != Some(version) {
            if !state.entries.is_empty() {
                metrics::counter!("meshmail_smtp_rcpt_cache_invalidations_total").increment(1);
            }
            state.entries.clear();
            state.version = Some(version);
        }
        state.confirmed = Some(began);
        state.local_changes = local_changes;
        metrics::gauge!("meshmail_smtp_rcpt_cache_entries").set(state.entries.len() as f64);
        Ok(())
    }

    /// The entry for `address`, if the version was confirmed within
    /// [`VALIDATE_EVERY`] (call [`RcptCache::confirm`] first).
    pub fn get(&self, address: &str) -> Option<Cached> {
        let state = self.state();
        let hit = state
            .fresh()
            .then(|| state.entries.get(address))
            .flatten()
            .filter(|e| e.stored.elapsed() < ENTRY_MAX_AGE)
            .map(|e| e.cached.clone());
        let result = if hit.is_some() { "hit" } else { "miss" };
        metrics::counter!("meshmail_smtp_rcpt_cache_total", "result" => result).increment(1);
        hit
    }

    /// Keeps what a read transaction at directory `version` found, unless
    /// the cache has moved past that version (or not reached it yet).
    pub fn put(&self, address: &str, version: i64, cached: Cached) {
        if super::srs::is_srs0(address) {
            return;
        }
        let mut state = self.state();
        if state.version != Some(version) {
            return;
        }
        if state.entries.len() >= self.capacity && !state.entries.contains_key(address) {
            state.entries.clear();
        }
        let entry = Entry {
            cached,
            stored: Instant::now(),
        };
        state.entries.insert(address.to_string(), entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> Cached {
        Cached {
            route: Route::Unknown,
            learned: LearnedAtRcpt::default(),
        }
    }

    fn confirmed_at(cache: &RcptCache, version: i64) {
        let mut s = cache.state();
        s.version = Some(version);
        s.confirmed = Some(Instant::now());
        s.local_changes = LOCAL_CHANGES.load(Ordering::SeqCst);
    }

    #[test]
    fn an_answer_read_at_another_version_is_not_kept() {
        let cache = RcptCache::new(10);
        confirmed_at(&cache, 7);
        cache.put("a@x", 6, route());
        assert!(cache.get("a@x").is_none(), "kept an answer older than the version");
        cache.put("a@x", 7, route());
        assert!(cache.get("a@x").is_some());
    }

    #[test]
    fn nothing_is_answered_once_the_version_is_old() {
        let cache = RcptCache::new(10);
        confirmed_at(&cache, 1);
        cache.put("a@x", 1, route());
        cache.state().confirmed = Some(Instant::now() - VALIDATE_EVERY);
        assert!(cache.get("a@x").is_none(), "answered without a recent version");
    }

    #[test]
    fn a_change_made_by_this_process_ends_freshness_at_once() {
        let cache = RcptCache::new(10);
        confirmed_at(&cache, 1);
        cache.put("a@x", 1, route());
        assert!(cache.get("a@x").is_some());
        local_change();
        assert!(cache.get("a@x").is_none(), "answered past a local change");
    }

    #[test]
    fn a_full_cache_starts_over_and_srs_addresses_are_never_kept() {
        let cache = RcptCache::new(2);
        confirmed_at(&cache, 1);
        cache.put("a@x", 1, route());
        cache.put("b@x", 1, route());
        cache.put("c@x", 1, route());
        assert_eq!(cache.state().entries.len(), 1);
        assert!(cache.get("c@x").is_some());
        cache.put("SRS0=abcd=xy=remote.test=bob@x", 1, route());
        assert!(cache.get("SRS0=abcd=xy=remote.test=bob@x").is_none());
    }
}
