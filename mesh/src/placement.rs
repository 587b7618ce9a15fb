//! Which live node should own each virtual shard: rendezvous
//! (highest-random-weight) hashing.
//!
//! Every node computes the same answer from the same live set, with no
//! coordination: each (node, shard) pair gets a pseudo-random weight and the
//! heaviest live node owns the shard. Removing a node moves only the shards it
//! owned (every other pair keeps its weight and its winner); adding one takes
//! about 1/n of the shards, from every node evenly.
//!
//! Placement is only a wish. The lease in the store decides who actually owns
//! a shard (see [`crate::leases`]); placement tells a node which leases to
//! ask for and which to hand back.
//!
//! Only the node's name enters the hash, never its generation: a restarted
//! node gets the same shards back, so a crash-restart moves nothing for long.

use std::collections::BTreeMap;

/// A node as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeKey {
    pub name: String,
}

impl NodeKey {
    pub fn new(name: impl Into<String>) -> Self {
        NodeKey { name: name.into() }
    }
}

/// The weight of `name` for `shard`. Stable across versions, platforms and
/// processes (std's `DefaultHasher` is not): two nodes of different builds
/// must agree on placement.
pub fn weight(shard: u32, name: &str) -> u64 {
    // FNV-1a over (name, separator, shard). 0xff never occurs in UTF-8, so
    // ("ab", shard) and ("a", shard') cannot collide by concatenation.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain([0xff]).chain(shard.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // FNV-1a mixes its last bytes poorly (the shard number would mostly move
    // the low bits), which skews who wins; the splitmix64 finalizer spreads
    // every input bit over the whole word.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The node that should own `shard` among `live`, or `None` if none is live.
/// Independent of the order of `live`: equal weights (astronomically rare)
/// are broken by name.
pub fn owner(shard: u32, live: &[NodeKey]) -> Option<&NodeKey> {
    live.iter().max_by(|a, b| {
        weight(shard, &a.name)
            .cmp(&weight(shard, &b.name))
            .then_with(|| a.name.cmp(&b.name))
    })
}

/// The owner of every shard `0..shard_count`, indexed by shard.
pub fn plan(shard_count: u32, live: &[NodeKey]) -> Vec<Option<&NodeKey>> {
    (0..shard_count).map(|shard| owner(shard, live)).collect()
}

/// The shards each live node should own, by node name (for status pages and
/// metrics; a node with nothing placed on it is absent).
pub fn shards_by_node(shard_count: u32, live: &[NodeKey]) -> BTreeMap<&str, Vec<u32>> {
    let mut by_node: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (shard, node) in plan(shard_count, live).into_iter().enumerate() {
        if let Some(node) = node {
            by_node.entry(node.name.as_str()).or_default().push(shard as u32);
        }
    }
    by_node
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SHARDS: u32 = 1024;

    fn keys(names: &[String]) -> Vec<NodeKey> {
        names.iter().map(NodeKey::new).collect()
    }

    /// 1..8 distinct node names.
    fn names() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::btree_set("[a-z][a-z0-9-]{0,11}", 1..8).prop_map(|s| s.into_iter().collect())
    }

    #[test]
    fn no_live_node_no_owner() {
        assert_eq!(owner(3, &[]), None);
        assert!(plan(4, &[]).iter().all(Option::is_none));
    }

    #[test]
    fn weights_are_pinned() {
        // Placement must not change between builds: a changed hash would move
        // shards at a rolling upgrade. If this fails, the hash changed.
        assert_eq!(weight(0, "a"), weight(0, "a"));
        assert_ne!(weight(0, "a"), weight(1, "a"));
        assert_ne!(weight(0, "a"), weight(0, "b"));
        let pinned: Vec<u64> = [(0, "a"), (7, "node-1"), (1023, "b")]
            .iter()
            .map(|&(s, n)| weight(s, n))
            .collect();
        assert_eq!(pinned, PINNED);
    }

    const PINNED: [u64; 3] = [2186853713910684703, 3092301440070759861, 5222460118726874104];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_shard_has_one_live_owner(names in names(), shard in 0u32..SHARDS) {
            let live = keys(&names);
            let o = owner(shard, &live).expect("an owner");
            prop_assert!(live.contains(o));
        }

        #[test]
        fn deterministic_and_order_independent(names in names()) {
            let live = keys(&names);
            let mut reversed = live.clone();
            reversed.reverse();
            let a = plan(SHARDS, &live);
            prop_assert_eq!(&a, &plan(SHARDS, &live));
            prop_assert_eq!(a, plan(SHARDS, &reversed));
        }

        #[test]
        fn removing_a_node_moves_only_its_shards(names in names(), victim in any::<prop::sample::Index>()) {
            prop_assume!(names.len() >= 2);
            let live = keys(&names);
            let gone = &live[victim.index(live.len())];
            let rest: Vec<NodeKey> = live.iter().filter(|n| *n != gone).cloned().collect();
            for (before, after) in plan(SHARDS, &live).into_iter().zip(plan(SHARDS, &rest)) {
                let (before, after) = (before.unwrap(), after.unwrap());
                if before == gone {
                    prop_assert_ne!(after, gone);
                } else {
                    prop_assert_eq!(before, after, "a shard of a surviving node moved");
                }
            }
        }

        #[test]
        fn adding_a_node_takes_about_one_nth(names in names(), newcomer in "[A-Z][a-z]{0,6}") {
            // Upper-case first letter: never one of the existing names.
            let live = keys(&names);
            let mut grown = live.clone();
            grown.push(NodeKey::new(newcomer.clone()));
            let n = grown.len() as f64;
            let mut taken = 0;
            for (before, after) in plan(SHARDS, &live).into_iter().zip(plan(SHARDS, &grown)) {
                let after = after.unwrap();
                if after.name == newcomer {
                    taken += 1;
                } else {
                    prop_assert_eq!(before.unwrap(), after, "a shard moved between old nodes");
                }
            }
            let share = f64::from(taken) / f64::from(SHARDS);
            prop_assert!(share > 0.5 / n && share < 1.5 / n, "newcomer took {taken} of {SHARDS} with n = {n}");
        }
    }
}
