//! The decision of one balance round, as a pure function: what a node
//! should hand back, take, and stop serving, given the leases it read, what
//! it believes it holds, and its membership view.
//!
//! Both the runtime ([`crate::runtime`]) and the seeded simulation
//! (`tests/simulation.rs`) call [`decide`] and carry out its [`Decision`]
//! with the [`crate::leases::LeaseManager`], so the policy the simulation
//! checks is the policy production runs. Nothing here reads a clock, a
//! socket or the store.
//!
//! The rules (see also the runtime's module doc):
//! - *lost*: a lease we believe we hold that the store gives to another (or
//!   marks released) — stop serving at once; our writes are fenced anyway;
//! - *release*: a lease we hold that placement (over the live members not
//!   draining) gives to another member: drain, then hand back — at most
//!   `moves_per_round`, and never a shard whose hand-off is under way;
//! - *acquire*: a shard placed on us whose lease is free, released, held by
//!   one of our own older generations, or held by an incarnation not in the
//!   live set (dead) — at most `moves_per_round`. Before the view is
//!   *settled* only the first three, and a stranger's (a name this node
//!   does not know yet: at start it has only learnt its seeds) only after
//!   the start grace; and a node that sees at most half the
//!   known members alive (the minority side of a partition) takes nothing
//!   from a member it believes dead. Neither rule is needed for safety (the
//!   lease epoch fences every write) but they keep shards from ping-ponging.

use std::collections::BTreeSet;

use meshmail_storage::model::nodes::Lease;

use crate::leases::{Incarnation, LiveSet};
use crate::placement::{self, NodeKey};

/// What one round knows.
#[derive(Debug, Clone, Copy)]
pub struct Round<'a> {
    pub me: &'a Incarnation,
    /// Every lease as read this round (index = shard).
    pub owners: &'a [Option<Lease>],
    /// The leases this incarnation believes it holds.
    pub held: &'a [Lease],
    /// The incarnations membership considers alive (us included).
    pub live: &'a LiveSet,
    /// Names placement leaves out: peers that announced they are draining,
    /// and our own name while we drain.
    pub excluded: &'a BTreeSet<String>,
    /// Whether the membership view can be trusted to name every live peer
    /// it knows of (every known peer linked, or the start grace over).
    pub settled: bool,
    /// Whether the start grace is over, so an incarnation not even known
    /// by name (a stranger) is gone rather than not linked yet.
    pub grace_over: bool,
    /// The names this node knows of (its directory, itself included).
    pub members: &'a BTreeSet<String>,
    /// Members known, us included (the quorum's denominator).
    pub known: usize,
    /// Acquisitions, and separately releases, per round.
    pub moves_per_round: usize,
    /// Shards whose drain and hand-off is already running.
    pub handing_off: &'a BTreeSet<u32>,
}

/// What the round should do, each list ascending by shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Believed held, but the store names another holder: revoke now.
    pub lost: Vec<u32>,
    /// Held, placed elsewhere: drain, then release.
    pub release: Vec<u32>,
    /// Placed here and takeable.
    pub acquire: Vec<u32>,
    /// The part of `acquire` held by a dead incarnation (a takeover).
    pub takeovers: Vec<(u32, Incarnation)>,
    /// Whether this node sees a majority of the known members alive.
    pub quorum: bool,
}

impl Decision {
    /// Lease changes this decision asks for.
    pub fn changes(&self) -> usize {
        self.lost.len() + self.release.len() + self.acquire.len()
    }
}

/// The decision of one round; see the module doc.
pub fn decide(r: &Round<'_>) -> Decision {
    let alive = r.live.nodes().len();
    let quorum = alive * 2 > r.known;
    let mut d = Decision {
        quorum,
        ..Decision::default()
    };
    for lease in r.held {
        let current = r.owners.get(lease.shard as usize).and_then(Option::as_ref);
        if !current.is_some_and(|c| r.me.holds(c)) {
            d.lost.push(lease.shard);
        }
    }
    d.lost.sort_unstable();
    d.lost.dedup();

    let nodes: Vec<NodeKey> = r
        .live
        .nodes()
        .into_iter()
        .filter(|k| !r.excluded.contains(&k.name))
        .collect();
    let me_key = r.me.key();
    let max = r.moves_per_round.max(1);
    for (shard, lease) in r.owners.iter().enumerate() {
        let shard = shard as u32;
        let placed_here = placement::owner(shard, &nodes) == Some(&me_key);
        let ours = lease.as_ref().is_some_and(|l| r.me.holds(l));
        if ours && !placed_here {
            if d.release.len() < max && !r.handing_off.contains(&shard) {
                d.release.push(shard);
            }
            continue;
        }
        if ours || !placed_here || d.acquire.len() >= max {
            continue;
        }
        match lease {
            None => d.acquire.push(shard),
            Some(l) if l.released => d.acquire.push(shard),
            Some(l) if l.node == r.me.name => {
                if l.generation < r.me.generation {
                    d.acquire.push(shard);
                }
            }
            Some(l)
                if quorum
                    && !r.live.contains(&l.node, l.generation)
                    && (r.grace_over || (r.settled && r.members.contains(&l.node))) =>
            {
                d.acquire.push(shard);
                d.takeovers
                    .push((shard, Incarnation::new(l.node.clone(), l.generation)));
            }
            Some(_) => {}
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(shard: u32, node: &str, generation: u64) -> Option<Lease> {
        Some(Lease {
            shard,
            node: node.into(),
            generation,
            epoch: 1,
            acquired_ms: 0,
            released: false,
        })
    }

    struct Fixture {
        me: Incarnation,
        owners: Vec<Option<Lease>>,
        held: Vec<Lease>,
        live: LiveSet,
        excluded: BTreeSet<String>,
        members: BTreeSet<String>,
        handing_off: BTreeSet<u32>,
    }

    impl Fixture {
        /// `a#1` and `b#1` alive, 64 shards; `owners` per shard.
        fn new(owners: impl Fn(u32) -> Option<Lease>) -> Fixture {
            let me = Incarnation::new("a", 1);
            let owners: Vec<_> = (0..64).map(owners).collect();
            let held = owners.iter().flatten().filter(|l| me.holds(l)).cloned().collect();
            Fixture {
                live: LiveSet::new([me.clone(), Incarnation::new("b", 1)]),
                me,
                owners,
                held,
                excluded: BTreeSet::new(),
                members: ["a", "b", "c"].into_iter().map(String::from).collect(),
                handing_off: BTreeSet::new(),
            }
        }

        fn decide(&self, settled: bool, known: usize, moves: usize) -> Decision {
            self.decide_graced(settled, settled, known, moves)
        }

        fn decide_graced(&self, settled: bool, grace_over: bool, known: usize, moves: usize) -> Decision {
            decide(&Round {
                me: &self.me,
                owners: &self.owners,
                held: &self.held,
                live: &self.live,
                excluded: &self.excluded,
                settled,
                grace_over,
                members: &self.members,
                known,
                moves_per_round: moves,
                handing_off: &self.handing_off,
            })
        }
    }

    fn placed_on(shard: u32, name: &str) -> bool {
        let nodes = [NodeKey::new("a"), NodeKey::new("b")];
        placement::owner(shard, &nodes).is_some_and(|k| k.name == name)
    }

    #[test]
    fn a_dead_holders_shards_are_taken_only_settled_and_with_quorum() {
        // c#1 (not in the live set) holds everything.
        let f = Fixture::new(|s| lease(s, "c", 1));
        let mine: Vec<u32> = (0..64).filter(|&s| placed_on(s, "a")).collect();
        let d = f.decide(true, 3, 1000);
        assert_eq!(d.acquire, mine);
        assert_eq!(d.takeovers.len(), mine.len());
        assert!(d.quorum && d.release.is_empty() && d.lost.is_empty());
        assert!(f.decide(false, 3, 1000).acquire.is_empty(), "unsettled: no takeover");
        let minority = f.decide(true, 4, 1000);
        assert!(
            !minority.quorum && minority.acquire.is_empty(),
            "2 of 4 alive: no quorum"
        );
        assert_eq!(f.decide(true, 3, 5).acquire, mine[..5], "bounded by moves_per_round");
        // A holder this node has not heard of yet may just not have linked:
        // its leases wait for the start grace, even when every known peer
        // is linked.
        let mut f = f;
        f.members.remove("c");
        assert!(f.decide_graced(true, false, 3, 1000).acquire.is_empty());
        assert_eq!(f.decide_graced(true, true, 3, 1000).acquire, mine);
    }

    #[test]
    fn free_released_and_own_older_leases_are_taken_even_unsettled() {
        let f = Fixture::new(|s| match s % 4 {
            0 => None,
            1 => lease(s, "a", 0).map(|l| Lease { released: true, ..l }),
            2 => lease(s, "a", 0),
            _ => lease(s, "b", 1),
        });
        let want: Vec<u32> = (0..64).filter(|&s| placed_on(s, "a") && s % 4 != 3).collect();
        let d = f.decide(false, 2, 1000);
        assert_eq!(d.acquire, want);
        assert!(d.takeovers.is_empty(), "none of them is a dead stranger's");
    }

    #[test]
    fn a_lease_placed_elsewhere_is_released_and_a_taken_one_is_lost() {
        let mut f = Fixture::new(|s| lease(s, "a", 1));
        let theirs: Vec<u32> = (0..64).filter(|&s| placed_on(s, "b")).collect();
        assert_eq!(f.decide(true, 2, 1000).release, theirs);
        f.handing_off.insert(theirs[0]);
        assert_eq!(
            f.decide(true, 2, 1000).release,
            theirs[1..],
            "a hand-off under way is not repeated"
        );
        // The store now gives shard 0 to b#1 at a higher epoch.
        f.owners[0] = lease(0, "b", 1);
        let d = f.decide(true, 2, 1000);
        assert_eq!(d.lost, [0]);
        assert!(!d.release.contains(&0) && !d.acquire.contains(&0));
        // Draining: placement leaves us out, so everything goes.
        f.excluded.insert("a".into());
        f.handing_off.clear();
        assert_eq!(f.decide(true, 2, 1000).release.len(), 63);
    }
}
