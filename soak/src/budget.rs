//! One global rate budget for every dial and retry of a load, and
//! exponential backoff with full jitter. A single bucket (not one per
//! worker) is what keeps a fleet of clients from stampeding a node that
//! just restarted: however many workers fail at once, the redial rate is
//! bounded by the bucket, and the jitter spreads them so they never retry
//! in lockstep.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::Rng;

/// A token bucket shared by every worker (wrap it in an `Arc`).
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// `rate` tokens per second, at most `burst` banked.
    pub fn new(rate: f64, burst: f64) -> TokenBucket {
        let burst = burst.max(1.0);
        TokenBucket {
            rate: rate.max(0.001),
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes one token, or says how long until one is available.
    fn try_take(&self) -> Result<(), Duration> {
        let mut st = self.state.lock().expect("bucket poisoned");
        let now = Instant::now();
        let refill = now.duration_since(st.1).as_secs_f64() * self.rate;
        st.0 = (st.0 + refill).min(self.burst);
        st.1 = now;
        if st.0 >= 1.0 {
            st.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - st.0) / self.rate))
        }
    }

    /// Waits for a token; `false` if `deadline` comes first.
    pub async fn take(&self, deadline: Instant) -> bool {
        loop {
            match self.try_take() {
                Ok(()) => return true,
                Err(wait) => {
                    let now = Instant::now();
                    if now + wait > deadline {
                        tokio::time::sleep(deadline.saturating_duration_since(now)).await;
                        return false;
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// Exponential backoff with full jitter: the n-th wait is uniform in
/// [0, min(max, base·2ⁿ)], so retries of many clients decorrelate.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff { base, max, attempt: 0 }
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    pub fn next_delay(&mut self) -> Duration {
        let cap = self.base.saturating_mul(1u32 << self.attempt.min(20)).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let ms = cap.as_millis().max(1) as u64;
        Duration::from_millis(rand::rng().random_range(0..=ms))
    }

    /// Sleeps the next delay, never past `deadline`.
    pub async fn wait(&mut self, deadline: Instant) {
        let d = self.next_delay();
        let until = (Instant::now() + d).min(deadline);
        tokio::time::sleep_until(until.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_grows() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
        for _ in 0..50 {
            assert!(b.next_delay() <= Duration::from_millis(100));
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(10));
    }

    #[tokio::test]
    async fn bucket_limits_rate() {
        let b = TokenBucket::new(100.0, 5.0);
        let start = Instant::now();
        let deadline = start + Duration::from_secs(5);
        for _ in 0..25 {
            assert!(b.take(deadline).await);
        }
        // 5 banked + 20 at 100/s ≈ 200 ms.
        assert!(start.elapsed() >= Duration::from_millis(150));
        let b = TokenBucket::new(0.01, 1.0);
        assert!(b.take(Instant::now()).await);
        assert!(!b.take(Instant::now() + Duration::from_millis(20)).await);
    }
}
