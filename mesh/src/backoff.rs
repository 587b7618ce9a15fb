//! Exponential backoff with full jitter, for redialing peers.
//!
//! Every delay is drawn uniformly from `[min, ceiling]`, where the ceiling
//! doubles at every failed attempt up to `max` ("full jitter"). Drawing over
//! the whole range, rather than adding a little noise to a fixed schedule,
//! is what keeps nodes that lost a peer at the same moment from redialing it
//! in lockstep: their schedules diverge from the first attempt.
//!
//! No clock and no RNG of its own: the caller passes the randomness in (a
//! simulator passes a seeded one, so a failing seed replays exactly) and
//! adds the delay to its own notion of now.

use std::time::Duration;

/// Where the jitter comes from: 64 uniformly random bits per call.
///
/// A closure is one (`&mut || rng.next_u64()` over any `rand` RNG). This
/// crate does not depend on `rand`, so the trait is ours; a simulator wraps
/// its seeded RNG the same way.
pub trait RandomSource {
    fn next_u64(&mut self) -> u64;
}

impl<F: FnMut() -> u64> RandomSource for F {
    fn next_u64(&mut self) -> u64 {
        self()
    }
}

/// Bounds of a backoff schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// The shortest delay, also the first ceiling's half.
    pub min: Duration,
    /// No delay is ever longer.
    pub max: Duration,
}

impl BackoffConfig {
    /// `min` is raised to 1 ms (a zero delay would spin) and `max` to `min`.
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        BackoffConfig { min, max: max.max(min) }
    }
}

impl Default for BackoffConfig {
    /// 200 ms up to 30 s: a restarted peer is found within a fraction of a
    /// second, a long-dead one costs one dial per ~15 s on average.
    fn default() -> Self {
        BackoffConfig::new(Duration::from_millis(200), Duration::from_secs(30))
    }
}

/// The backoff state of one dial target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    config: BackoffConfig,
    /// Failed attempts since the last success.
    attempts: u32,
}

impl Backoff {
    pub fn new(config: BackoffConfig) -> Self {
        Backoff { config, attempts: 0 }
    }

    pub fn config(&self) -> BackoffConfig {
        self.config
    }

    /// Failed attempts since the last [`Backoff::reset`].
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The ceiling of the next draw: `2 * min * 2^attempts`, capped at
    /// `max`. Starting at twice `min` (not at `min`) leaves even the first
    /// retry a range to jitter over.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempts.saturating_add(1)).unwrap_or(u32::MAX);
        self.config
            .min
            .checked_mul(factor)
            .unwrap_or(self.config.max)
            .min(self.config.max)
    }

    /// Draws the delay before the next attempt and counts this failure.
    pub fn next_delay(&mut self, rng: &mut impl RandomSource) -> Duration {
        let (lo, hi) = (self.config.min.as_nanos(), self.ceiling().as_nanos());
        // Uniform over whole nanoseconds: two nodes land on the same delay
        // with negligible probability. The modulo bias (span / 2^64, about
        // 2^-29 for a 30 s span) is irrelevant for jitter; a span beyond
        // u64 nanoseconds (584 years) is cut to that.
        let span = u64::try_from(hi - lo).unwrap_or(u64::MAX);
        let offset = match span.checked_add(1) {
            Some(n) => rng.next_u64() % n,
            None => rng.next_u64(),
        };
        self.attempts = self.attempts.saturating_add(1);
        self.config.min + Duration::from_nanos(offset)
    }

    /// A success: the next failure starts over from the smallest ceiling.
    pub fn reset(&mut self) {
        self.attempts = 0;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::Rng;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    use super::*;

    fn rng(seed: u8) -> TestRng {
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32])
    }

    fn config() -> BackoffConfig {
        BackoffConfig::new(Duration::from_millis(100), Duration::from_secs(10))
    }

    #[test]
    fn delays_stay_within_bounds_and_ceilings_double() {
        let mut r = rng(1);
        let mut b = Backoff::new(config());
        let mut last_ceiling = Duration::ZERO;
        for _ in 0..1000 {
            let ceiling = b.ceiling();
            assert!(ceiling >= last_ceiling && ceiling <= config().max);
            let d = b.next_delay(&mut || r.next_u64());
            assert!(d >= config().min && d <= ceiling, "{d:?} outside [min, {ceiling:?}]");
            last_ceiling = ceiling;
        }
        assert_eq!(b.ceiling(), config().max, "the ceiling saturates at max");
        assert_eq!(Backoff::new(config()).ceiling(), Duration::from_millis(200));
    }

    #[test]
    fn reset_starts_over() {
        let mut r = rng(2);
        let mut b = Backoff::new(config());
        for _ in 0..20 {
            b.next_delay(&mut || r.next_u64());
        }
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert!(b.next_delay(&mut || r.next_u64()) <= Duration::from_millis(200));
    }

    #[test]
    fn extreme_configs_neither_panic_nor_spin() {
        let mut r = rng(3);
        let mut zero = Backoff::new(BackoffConfig::new(Duration::ZERO, Duration::ZERO));
        assert_eq!(zero.next_delay(&mut || r.next_u64()), Duration::from_millis(1));
        let huge = BackoffConfig::new(Duration::from_secs(1), Duration::MAX);
        let mut b = Backoff::new(huge);
        for _ in 0..200 {
            assert!(b.next_delay(&mut || r.next_u64()) >= Duration::from_secs(1));
        }
    }

    /// Two nodes that lost the same peer at the same instant and keep failing:
    /// their redial instants must not coincide, and their per-attempt delays
    /// must not repeat each other.
    #[test]
    fn two_seeds_never_redial_in_lockstep() {
        let (mut ra, mut rb) = (rng(10), rng(11));
        let (mut a, mut b) = (Backoff::new(config()), Backoff::new(config()));
        let (mut at, mut bt) = (Duration::ZERO, Duration::ZERO);
        let mut same_delay = 0;
        for attempt in 0..1000 {
            let (da, db) = (a.next_delay(&mut || ra.next_u64()), b.next_delay(&mut || rb.next_u64()));
            for d in [da, db] {
                assert!(d >= config().min && d <= config().max);
            }
            at += da;
            bt += db;
            // 1 ms: closer than that, two dials would hit the peer together.
            let gap = at.abs_diff(bt);
            assert!(
                gap >= Duration::from_millis(1),
                "attempt {attempt}: redial instants {at:?} and {bt:?} coincide"
            );
            if da.abs_diff(db) < Duration::from_millis(1) {
                same_delay += 1;
            }
        }
        assert!(same_delay <= 5, "{same_delay} of 1000 delays within 1 ms of each other");
    }
}
