//! The client-observed write gap of a kill: for each account, the interval
//! between its last acknowledged write (SMTP 250) before the SIGKILL and
//! its first one after; the kill's gap is the longest over the accounts.
//! The accounts the killed node owned are among them, so this bounds their
//! gap from above (the load cannot see shard ownership; the others' gaps
//! are only the load's own spacing). Measured by the load itself, from the
//! times its 250s arrived, so it includes reconnecting and the node's
//! start-up, not only the mesh's takeover. It is meaningful when every
//! account is written often (many messages per second per account).

use std::collections::BTreeMap;
use std::time::Instant;

/// Every account's acknowledgement times, sorted.
pub struct Acks(BTreeMap<u32, Vec<Instant>>);

impl Acks {
    pub fn new(acks: &[(u32, Instant)]) -> Acks {
        let mut by: BTreeMap<u32, Vec<Instant>> = BTreeMap::new();
        for (account, at) in acks {
            by.entry(*account).or_default().push(*at);
        }
        for v in by.values_mut() {
            v.sort();
        }
        Acks(by)
    }

    /// The longest gap spanning `kill` over the accounts written both
    /// before and after it, seconds; `None` when no account was.
    pub fn gap(&self, kill: Instant) -> Option<f64> {
        self.0
            .values()
            .filter_map(|times| {
                let i = times.partition_point(|t| *t <= kill);
                let (before, after) = (times.get(i.checked_sub(1)?)?, times.get(i)?);
                Some(after.duration_since(*before).as_secs_f64())
            })
            .max_by(|a, b| a.total_cmp(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_longest_gap_spanning_the_kill_counts() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let acks = Acks::new(&[
            (1, at(0)),
            (1, at(900)),
            (1, at(100)),
            (2, at(450)),
            (2, at(2_450)),
            (2, at(2_500)),
            (3, at(600)), // never written after the kill: not counted
        ]);
        // Account 2: 450 ms → 2,450 ms spans the kill at 1 s.
        assert_eq!(acks.gap(at(1_000)), Some(2.0));
        // At 500 ms: account 1 (100 → 900) and account 2 (450 → 2,450).
        assert_eq!(acks.gap(at(500)), Some(2.0));
        // At 50 ms only account 1 (0 → 100) spans it.
        assert!((acks.gap(at(50)).unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(acks.gap(at(3_000)), None);
    }
}
