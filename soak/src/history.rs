//! The Jepsen-style UID/MODSEQ history: every observation an IMAP reader
//! made of a mailbox (its UIDVALIDITY, HIGHESTMODSEQ and the UID → load-id
//! pairs it saw, with the real-time interval it took), checked at the end.
//!
//! Two observations are only compared when one finished before the other
//! started: concurrent ones may legitimately see the store at different
//! points, so a "regression" between them proves nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use serde::Serialize;

#[derive(Debug, Clone)]
pub struct Observation {
    pub mailbox: String,
    pub uidvalidity: u64,
    pub highest_modseq: u64,
    pub start: Instant,
    pub end: Instant,
    /// (uid, load id if the message had one).
    pub messages: Vec<(u64, Option<String>)>,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct HistoryFindings {
    pub observations: usize,
    /// Distinct (mailbox, uidvalidity, uid) seen with two different load ids.
    pub uid_reused: u64,
    /// Observations whose HIGHESTMODSEQ was below one already completed before they started.
    pub modseq_regressions: u64,
    /// UIDs that first appeared below the highest UID of a mailbox already
    /// completed before the observation started (UIDs must only grow).
    pub uid_order_violations: u64,
    pub examples: Vec<String>,
}

const MAX_EXAMPLES: usize = 20;

/// Checks a set of observations.
pub fn check(observations: &[Observation]) -> HistoryFindings {
    let mut f = HistoryFindings {
        observations: observations.len(),
        ..Default::default()
    };
    let mut by_box: BTreeMap<(&str, u64), Vec<&Observation>> = BTreeMap::new();
    for o in observations {
        by_box.entry((&o.mailbox, o.uidvalidity)).or_default().push(o);
    }
    for ((mailbox, uidvalidity), obs) in by_box {
        // UID → load id, first seen wins; every later different id is a reuse.
        let mut ids: HashMap<u64, &str> = HashMap::new();
        let mut reused: HashSet<u64> = HashSet::new();
        for o in &obs {
            for (uid, id) in &o.messages {
                let Some(id) = id.as_deref() else { continue };
                match ids.get(uid) {
                    None => {
                        ids.insert(*uid, id);
                    }
                    Some(prev) if *prev != id => {
                        if reused.insert(*uid) && f.examples.len() < MAX_EXAMPLES {
                            f.examples.push(format!(
                                "{mailbox} uidvalidity {uidvalidity}: UID {uid} held {prev} and later {id}"
                            ));
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        f.uid_reused += reused.len() as u64;
        // Sweep in start order, folding in every observation that ended
        // before the current one started.
        let mut by_start = obs.clone();
        by_start.sort_by_key(|o| o.start);
        let mut by_end = obs.clone();
        by_end.sort_by_key(|o| o.end);
        let (mut done, mut max_modseq, mut max_uid) = (0usize, 0u64, 0u64);
        let mut seen: HashSet<u64> = HashSet::new();
        for o in by_start {
            while done < by_end.len() && by_end[done].end < o.start {
                let p = by_end[done];
                max_modseq = max_modseq.max(p.highest_modseq);
                for (uid, _) in &p.messages {
                    max_uid = max_uid.max(*uid);
                    seen.insert(*uid);
                }
                done += 1;
            }
            if o.highest_modseq < max_modseq {
                f.modseq_regressions += 1;
                if f.examples.len() < MAX_EXAMPLES {
                    f.examples.push(format!(
                        "{mailbox} uidvalidity {uidvalidity}: HIGHESTMODSEQ {} after {max_modseq}",
                        o.highest_modseq
                    ));
                }
            }
            for (uid, _) in &o.messages {
                if *uid < max_uid && !seen.contains(uid) {
                    f.uid_order_violations += 1;
                    if f.examples.len() < MAX_EXAMPLES {
                        f.examples.push(format!(
                            "{mailbox} uidvalidity {uidvalidity}: new UID {uid} appeared after UID {max_uid} was seen"
                        ));
                    }
                }
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn obs(t0: Instant, a: u64, b: u64, hms: u64, msgs: &[(u64, &str)]) -> Observation {
        Observation {
            mailbox: "user1".into(),
            uidvalidity: 1,
            highest_modseq: hms,
            start: t0 + Duration::from_millis(a),
            end: t0 + Duration::from_millis(b),
            messages: msgs.iter().map(|(u, id)| (*u, Some(id.to_string()))).collect(),
        }
    }

    #[test]
    fn clean_history_passes() {
        let t = Instant::now();
        let h = vec![
            obs(t, 0, 10, 3, &[(1, "a"), (2, "b")]),
            obs(t, 5, 15, 2, &[(1, "a")]), // concurrent with the first: not compared
            obs(t, 20, 30, 4, &[(1, "a"), (2, "b"), (3, "c")]),
        ];
        let f = check(&h);
        assert_eq!((f.uid_reused, f.modseq_regressions, f.uid_order_violations), (0, 0, 0));
    }

    #[test]
    fn finds_reuse_regression_and_order() {
        let t = Instant::now();
        let h = vec![
            obs(t, 0, 10, 5, &[(1, "a"), (3, "c")]),
            obs(t, 20, 30, 4, &[(1, "x"), (2, "b"), (3, "c")]),
        ];
        let f = check(&h);
        assert_eq!(f.uid_reused, 1);
        assert_eq!(f.modseq_regressions, 1);
        assert_eq!(f.uid_order_violations, 1);
    }
}
