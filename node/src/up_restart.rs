//! Crash-loop backoff for `meshmail up`: a node that dies right after it
//! started (a port taken, a bad config, a store it cannot open) is
//! restarted after a delay that doubles at every quick death, up to a cap,
//! instead of every `restart_delay_ms` forever; a node that stayed up for
//! `stable_after` before dying starts over at the base delay. Pure: the
//! caller measures how long the node ran and sleeps the answer.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// The delay after a death that ends a stable run (and the first one).
    pub base: Duration,
    /// No delay is longer.
    pub max: Duration,
    /// A run at least this long was not a crash loop.
    pub stable_after: Duration,
}

/// One node's restart schedule.
#[derive(Debug, Clone)]
pub struct CrashLoop {
    policy: RestartPolicy,
    /// Deaths in a row, each after a run shorter than `stable_after`.
    quick_deaths: u32,
}

/// What to do after a death.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    pub delay: Duration,
    /// Quick deaths in a row, this one included (0: it had run stably).
    pub quick_deaths: u32,
}

impl CrashLoop {
    pub fn new(policy: RestartPolicy) -> Self {
        CrashLoop {
            policy: RestartPolicy {
                max: policy.max.max(policy.base),
                ..policy
            },
            quick_deaths: 0,
        }
    }

    /// The node died after running for `ran`.
    pub fn on_exit(&mut self, ran: Duration) -> Restart {
        if ran >= self.policy.stable_after {
            self.quick_deaths = 0;
            return Restart {
                delay: self.policy.base,
                quick_deaths: 0,
            };
        }
        self.quick_deaths = self.quick_deaths.saturating_add(1);
        // base · 2^(n-1), capped; the shift is bounded so it cannot overflow.
        let factor = 1u32 << (self.quick_deaths - 1).min(20);
        Restart {
            delay: self.policy.base.saturating_mul(factor).min(self.policy.max),
            quick_deaths: self.quick_deaths,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn quick_deaths_double_the_delay_up_to_the_cap_and_a_stable_run_resets_it() {
        let mut c = CrashLoop::new(RestartPolicy {
            base: MS(500),
            max: MS(3000),
            stable_after: Duration::from_secs(10),
        });
        let delays: Vec<u64> = (0..6).map(|_| c.on_exit(MS(100)).delay.as_millis() as u64).collect();
        assert_eq!(delays, vec![500, 1000, 2000, 3000, 3000, 3000]);
        let stable = c.on_exit(Duration::from_secs(10));
        assert_eq!((stable.delay, stable.quick_deaths), (MS(500), 0));
        assert_eq!(c.on_exit(MS(1)).delay, MS(500), "the streak starts over");
        assert_eq!(c.on_exit(MS(1)).delay, MS(1000));
    }

    #[test]
    fn a_very_long_streak_stays_bounded() {
        let mut c = CrashLoop::new(RestartPolicy {
            base: MS(1),
            max: Duration::from_secs(60),
            stable_after: Duration::from_secs(1),
        });
        for _ in 0..100 {
            assert!(c.on_exit(Duration::ZERO).delay <= Duration::from_secs(60));
        }
    }
}
