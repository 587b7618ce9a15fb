//! Cached answers of the per-recipient lookups of SMTP acceptance: the
//! RCPT route of an address, whether an account has no quota, whether an
//! account's vacation response is off. Without it every message paid three
//! read transactions for answers that change a few times a day.
//!
//! Invalidation: every answer is stored with the store's directory version
//! ([`meshmail_storage::model::directory`]) read in the same transaction;
//! a lookup that finds a newer version drops everything. Entries are only
//! served while the version was confirmed within [`ROUTE_CACHE_CHECK_MS`]:
//! the first lookup after that reads the store (and the version) again, so
//! a change made anywhere (another node, an admin command) is seen within
//! that bound. Unknown addresses are never cached, so a new account is
//! reachable at once; a removed one may still pass RCPT for that long and
//! then fails at delivery with a permanent error (nothing is lost).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use meshmail_storage::keyspace::AccountId;

use super::routing::Route;

/// Longest time a cached answer is served without the directory version
/// being read again, milliseconds.
pub const ROUTE_CACHE_CHECK_MS: u64 = 250;
/// Most entries of each kind; the cache starts over when full.
pub const ROUTE_CACHE_ENTRIES_MAX: usize = 10_000;

#[derive(Default)]
pub struct RouteCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    version: i64,
    confirmed_at: Option<Instant>,
    routes: HashMap<String, Route>,
    unlimited: HashSet<AccountId>,
    vacation_off: HashSet<AccountId>,
}

/// One kind of cached answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact {
    /// The account has no quota: the RCPT quota check has nothing to read.
    Unlimited,
    /// The account's vacation response is off.
    VacationOff,
}

impl RouteCache {
    fn fresh(inner: &Inner) -> bool {
        inner
            .confirmed_at
            .is_some_and(|t| t.elapsed() < Duration::from_millis(ROUTE_CACHE_CHECK_MS))
    }

    /// The cached route of `address`, if any and fresh.
    pub fn route(&self, address: &str) -> Option<Route> {
        let inner = self.inner.lock().expect("route cache");
        let hit = Self::fresh(&inner)
            .then(|| inner.routes.get(address).cloned())
            .flatten();
        metrics::counter!("meshmail_smtp_route_cache_total", "kind" => "route", "result" => if hit.is_some() { "hit" } else { "miss" })
            .increment(1);
        hit
    }

    /// Whether `fact` is known (and fresh) for `account`.
    pub fn knows(&self, fact: Fact, account: AccountId) -> bool {
        let inner = self.inner.lock().expect("route cache");
        let set = match fact {
            Fact::Unlimited => &inner.unlimited,
            Fact::VacationOff => &inner.vacation_off,
        };
        let hit = Self::fresh(&inner) && set.contains(&account);
        let kind = match fact {
            Fact::Unlimited => "unlimited",
            Fact::VacationOff => "vacation_off",
        };
        metrics::counter!("meshmail_smtp_route_cache_total", "kind" => kind, "result" => if hit { "hit" } else { "miss" })
            .increment(1);
        hit
    }

    /// Adopts the directory `version` read in the transaction that produced
    /// an answer: a newer one drops everything cached; an older one (a slow
    /// reader) means the answer must not be cached.
    fn adopt(inner: &mut Inner, version: i64) -> bool {
        if version < inner.version {
            return false;
        }
        if version > inner.version {
            inner.routes.clear();
            inner.unlimited.clear();
            inner.vacation_off.clear();
            inner.version = version;
        }
        inner.confirmed_at = Some(Instant::now());
        true
    }

    /// Records the route of `address` read at directory `version`. Only
    /// found addresses are kept (see the module comment).
    pub fn put_route(&self, address: &str, version: i64, route: &Route) {
        let mut inner = self.inner.lock().expect("route cache");
        if !Self::adopt(&mut inner, version) || !matches!(route, Route::Targets { .. } | Route::Foreign) {
            return;
        }
        if inner.routes.len() >= ROUTE_CACHE_ENTRIES_MAX {
            inner.routes.clear();
        }
        inner.routes.insert(address.to_string(), route.clone());
    }

    /// Records `fact` for `account` as read at directory `version`.
    pub fn put_fact(&self, fact: Fact, account: AccountId, version: i64) {
        let mut inner = self.inner.lock().expect("route cache");
        if !Self::adopt(&mut inner, version) {
            return;
        }
        let set = match fact {
            Fact::Unlimited => &mut inner.unlimited,
            Fact::VacationOff => &mut inner.vacation_off,
        };
        if set.len() >= ROUTE_CACHE_ENTRIES_MAX {
            set.clear();
        }
        set.insert(account);
    }

    /// Forgets that the version was confirmed (tests: the next lookup reads).
    pub fn expire(&self) {
        self.inner.lock().expect("route cache").confirmed_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(account: AccountId) -> Route {
        Route::Targets {
            targets: vec![super::super::routing::Target::Local {
                account,
                address: "a@example.org".into(),
            }],
            via_alias: false,
            via_catch_all: false,
        }
    }

    #[test]
    fn a_newer_directory_version_drops_every_answer() {
        let c = RouteCache::default();
        c.put_route("a@example.org", 3, &local(1));
        c.put_fact(Fact::Unlimited, 1, 3);
        assert_eq!(c.route("a@example.org"), Some(local(1)));
        assert!(c.knows(Fact::Unlimited, 1));
        // An answer read at version 4 (something changed) empties the rest.
        c.put_route("b@example.org", 4, &local(2));
        assert_eq!(c.route("a@example.org"), None);
        assert!(!c.knows(Fact::Unlimited, 1));
        assert_eq!(c.route("b@example.org"), Some(local(2)));
        // A slow reader's answer from before the change is not kept.
        c.put_route("a@example.org", 3, &local(1));
        assert_eq!(c.route("a@example.org"), None);
    }

    #[test]
    fn unknown_addresses_are_not_cached_and_stale_answers_not_served() {
        let c = RouteCache::default();
        c.put_route("nobody@example.org", 1, &Route::Unknown);
        assert_eq!(c.route("nobody@example.org"), None);
        c.put_route("a@example.org", 1, &local(1));
        c.expire();
        assert_eq!(c.route("a@example.org"), None);
    }
}
