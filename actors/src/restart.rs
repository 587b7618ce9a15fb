//! Bounded restart intensity: a supervisor restarts a failed child at most
//! `max_restarts` times within `window`; past that it escalates (fails
//! itself) instead of restarting a child that keeps dying.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RestartBudget {
    max_restarts: usize,
    window: Duration,
    recent: VecDeque<Instant>,
}

impl RestartBudget {
    pub fn new(max_restarts: usize, window: Duration) -> Self {
        RestartBudget {
            max_restarts,
            window,
            recent: VecDeque::new(),
        }
    }

    /// Records a restart now; false when the budget is spent (escalate).
    pub fn allow(&mut self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&mut self, now: Instant) -> bool {
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.window)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.max_restarts {
            return false;
        }
        self.recent.push_back(now);
        true
    }
}

impl Default for RestartBudget {
    /// 10 restarts per 10 s per supervisor: enough to ride out poison
    /// messages (each costs one restart), few enough to notice a crash loop.
    fn default() -> Self {
        RestartBudget::new(10, Duration::from_secs(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_refills_after_the_window() {
        let mut b = RestartBudget::new(2, Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(b.allow_at(t0));
        assert!(b.allow_at(t0));
        assert!(!b.allow_at(t0 + Duration::from_millis(500)));
        assert!(b.allow_at(t0 + Duration::from_millis(1600)));
    }
}
