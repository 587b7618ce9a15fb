//! The failed-login limiter the [`crate::auth::Authenticator`] consults:
//! failures are counted per client address and per (account, client
//! address); each failure is answered after a delay that doubles with the
//! failures before it, and past a limit the address, or the account from
//! that address, is refused until its window ends. An account is never
//! refused as a whole: whoever knows an address could otherwise lock its
//! owner out of IMAP, SMTP AUTH and JMAP by guessing wrong (issue 40 item
//! 5). Failures for an account from anywhere only slow down that account's
//! failure answers.
//!
//! Only failure answers wait: a right password is answered at once, so a
//! user behind the address of someone who mistyped (a NAT) is not slowed,
//! and whoever guesses waits for every "no" (more connections do not help
//! for long: the counts refuse them all past the limit).
//!
//! IPv6 clients are counted per /64, the smallest block an end site
//! usually gets: counting single addresses would give one host 2^64 fresh
//! budgets. Counts are per node.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The delay after the first failure; each further failure doubles it.
pub const FAILURE_DELAY_FIRST: Duration = Duration::from_millis(250);
/// No attempt waits longer than this, however many failures came before.
pub const FAILURE_DELAY_MAX: Duration = Duration::from_secs(5);
/// Keys tracked before expired ones are dropped (each is ~100 bytes).
const TRACKED_KEYS_MAX: usize = 100_000;

/// How many failed logins are allowed in a window that starts at the first
/// failure (`[auth]` in the config): from one client address, and for one
/// account from one client address. Past a limit, attempts of that
/// address (or of that account from that address) are refused without
/// hashing until the window ends; the refusal says when (Retry-After).
#[derive(Debug, Clone, Copy)]
pub struct AuthLimits {
    /// `[auth] failures_per_ip_max`: every account, one client address.
    pub failures_per_ip_max: u32,
    /// `[auth] failures_per_account_max`: one account from one client
    /// address (the key kept its name; it used to count an account's
    /// failures from anywhere, which let anyone lock the account out).
    pub failures_per_account_max: u32,
    pub failure_window: Duration,
}

impl Default for AuthLimits {
    fn default() -> Self {
        AuthLimits {
            failures_per_ip_max: 10,
            // Below the address's limit, or it would never be reached:
            // the failures of one account from an address are some of
            // that address's failures.
            failures_per_account_max: 5,
            failure_window: Duration::from_secs(300),
        }
    }
}

/// What a failure count is kept for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FailureKey {
    /// Every failure from one client (address, or IPv6 /64).
    Client(IpAddr),
    /// Failures for one account from one client.
    AccountClient(String, IpAddr),
    /// Failures for one account from anywhere: slows its failure answers,
    /// never refuses.
    Account(String),
}

/// Which count refused an attempt or set a failure's delay (the `by`
/// label of `meshmail_auth_rate_limited_total` and
/// `meshmail_auth_delayed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitedBy {
    /// The client address, whatever the account.
    Ip,
    /// The account from that address.
    AccountIp,
    /// The account from anywhere (delays only).
    Account,
}

impl LimitedBy {
    pub fn label(self) -> &'static str {
        match self {
            LimitedBy::Ip => "ip",
            LimitedBy::AccountIp => "account_ip",
            LimitedBy::Account => "account",
        }
    }
}

/// What the limiter says before a password is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Check,
    /// Refuse it; the window ends in `retry_after`.
    Refused {
        by: LimitedBy,
        retry_after: Duration,
    },
}

/// Failure counts: (failures in the window, start of the window).
pub struct FailureLimiter {
    limits: AuthLimits,
    failures: Mutex<HashMap<FailureKey, (u32, Instant)>>,
}

impl FailureLimiter {
    pub fn new(limits: AuthLimits) -> Self {
        FailureLimiter {
            limits,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `user` may try from `ip` now.
    pub fn admit(&self, user: &str, ip: IpAddr) -> Admission {
        let client = client_of(ip);
        let failures = self.failures.lock().expect("failures");
        [
            (
                LimitedBy::Ip,
                FailureKey::Client(client),
                self.limits.failures_per_ip_max,
            ),
            (
                LimitedBy::AccountIp,
                FailureKey::AccountClient(user.to_string(), client),
                self.limits.failures_per_account_max,
            ),
        ]
        .into_iter()
        .filter_map(|(by, key, max)| Some((by, self.count(&failures, &key)?, max)))
        .filter(|(_, (n, _), max)| n >= max)
        .max_by_key(|(_, (_, left), _)| *left)
        .map_or(Admission::Check, |(by, (_, left), _)| Admission::Refused {
            by,
            retry_after: left.max(Duration::from_secs(1)),
        })
    }

    /// How long the answer to a failed attempt of `user` from `ip` waits,
    /// and which count set it: the most failures before this one, of the
    /// address, of the account from it, or of the account from anywhere
    /// (so a guess spread over many addresses is slowed too). Zero for a
    /// first failure.
    pub fn failure_delay(&self, user: &str, ip: IpAddr) -> (Duration, LimitedBy) {
        let client = client_of(ip);
        let failures = self.failures.lock().expect("failures");
        let (n, by) = [
            (
                LimitedBy::AccountIp,
                FailureKey::AccountClient(user.to_string(), client),
            ),
            (LimitedBy::Ip, FailureKey::Client(client)),
            (LimitedBy::Account, FailureKey::Account(user.to_string())),
        ]
        .into_iter()
        .map(|(by, key)| (self.count(&failures, &key).map_or(0, |(n, _)| n), by))
        // The first of equal counts: the most specific.
        .reduce(|best, next| if next.0 > best.0 { next } else { best })
        .expect("three counts");
        (failure_delay(n), by)
    }

    /// Counts a failed attempt of `user` from `ip`.
    pub fn record_failure(&self, user: &str, ip: IpAddr) {
        let client = client_of(ip);
        let mut failures = self.failures.lock().expect("failures");
        if failures.len() >= TRACKED_KEYS_MAX {
            let window = self.limits.failure_window;
            failures.retain(|_, (_, since)| since.elapsed() < window);
        }
        for key in [
            FailureKey::Client(client),
            FailureKey::AccountClient(user.to_string(), client),
            FailureKey::Account(user.to_string()),
        ] {
            let entry = failures.entry(key).or_insert((0, Instant::now()));
            if entry.1.elapsed() >= self.limits.failure_window {
                *entry = (0, Instant::now());
            }
            entry.0 = entry.0.saturating_add(1);
        }
    }

    /// A right password from `ip` clears that account's count there (its
    /// owner got in; the address's own count stays, or one account an
    /// attacker holds would reset the budget of a password spray).
    pub fn record_success(&self, user: &str, ip: IpAddr) {
        let key = FailureKey::AccountClient(user.to_string(), client_of(ip));
        self.failures.lock().expect("failures").remove(&key);
    }

    /// The failures of `key` in its window and the time the window has
    /// left; None once the window has ended.
    fn count(&self, failures: &HashMap<FailureKey, (u32, Instant)>, key: &FailureKey) -> Option<(u32, Duration)> {
        let (n, since) = failures.get(key)?;
        let left = self.limits.failure_window.checked_sub(since.elapsed())?;
        Some((*n, left))
    }
}

/// The delay after `failures` failures: none, then 250 ms doubling up to
/// [`FAILURE_DELAY_MAX`].
pub fn failure_delay(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = (failures - 1).min(16);
    FAILURE_DELAY_FIRST
        .saturating_mul(1 << doublings)
        .min(FAILURE_DELAY_MAX)
}

/// The client a failure is counted for: an IPv4 address (also when
/// written as IPv4-mapped IPv6), or an IPv6 /64.
fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> FailureLimiter {
        FailureLimiter::new(AuthLimits {
            failures_per_ip_max: 5,
            failures_per_account_max: 3,
            failure_window: Duration::from_secs(60),
        })
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn delays_grow_then_the_pair_is_refused_and_other_addresses_are_not() {
        let l = limiter();
        let (attacker, owner) = (ip("127.0.0.2"), ip("127.0.0.1"));
        let mut delays = Vec::new();
        for _ in 0..3 {
            assert_eq!(l.admit("u@x", attacker), Admission::Check);
            delays.push(l.failure_delay("u@x", attacker));
            l.record_failure("u@x", attacker);
        }
        let ms = Duration::from_millis;
        assert_eq!(
            delays,
            [
                (Duration::ZERO, LimitedBy::AccountIp),
                (ms(250), LimitedBy::AccountIp),
                (ms(500), LimitedBy::AccountIp)
            ]
        );
        assert!(matches!(
            l.admit("u@x", attacker),
            Admission::Refused {
                by: LimitedBy::AccountIp,
                ..
            }
        ));
        // The owner's address has no failures: checked, and a failure
        // there waits by the account's failures from anywhere.
        assert_eq!(l.admit("u@x", owner), Admission::Check);
        assert_eq!(l.failure_delay("u@x", owner), (ms(1000), LimitedBy::Account));
        // Another account from the attacker's address: its failures wait.
        assert_eq!(l.admit("v@x", attacker), Admission::Check);
        assert_eq!(l.failure_delay("v@x", attacker), (ms(1000), LimitedBy::Ip));
        assert_eq!(l.failure_delay("v@x", owner), (Duration::ZERO, LimitedBy::AccountIp));
    }

    #[test]
    fn an_address_is_refused_across_accounts() {
        let l = limiter();
        let a = ip("10.0.0.1");
        for user in ["a@x", "b@x", "c@x", "d@x", "e@x"] {
            assert_eq!(l.admit(user, a), Admission::Check);
            l.record_failure(user, a);
        }
        assert!(matches!(
            l.admit("f@x", a),
            Admission::Refused { by: LimitedBy::Ip, .. }
        ));
        assert_eq!(l.admit("f@x", ip("10.0.0.2")), Admission::Check);
    }

    #[test]
    fn success_clears_the_pair_but_not_the_address() {
        let l = limiter();
        let a = ip("10.0.0.1");
        for _ in 0..2 {
            l.record_failure("u@x", a);
        }
        l.record_success("u@x", a);
        // The address keeps its two failures, the pair has none.
        assert_eq!(l.failure_delay("w@x", a), (Duration::from_millis(500), LimitedBy::Ip));
        for _ in 0..3 {
            l.record_failure("v@x", a);
        }
        l.record_success("v@x", a);
        // Five failures from the address: refused, whatever succeeded.
        assert!(matches!(
            l.admit("u@x", a),
            Admission::Refused { by: LimitedBy::Ip, .. }
        ));
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(client_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(client_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(failure_delay(40), FAILURE_DELAY_MAX);
        assert_eq!(failure_delay(u32::MAX), FAILURE_DELAY_MAX);
    }
}
