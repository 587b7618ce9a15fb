//! Shard leases against the SQLite backend, driven by the runtime's pure
//! balance decision: placement split, fencing of a stale owner, graceful
//! hand-off to a restarted node, racing acquisitions, batched takeover.
//! Each node opens its own handle on one SQLite file, as separate
//! processes on one machine would.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use meshmail_mesh::balance::{self, Decision};
use meshmail_mesh::leases::{Incarnation, LeaseError, LeaseManager, LiveSet};
use meshmail_mesh::placement::{self, NodeKey};
use meshmail_storage::model::nodes;
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::{Database, StorageError};

const SHARDS: u32 = 64;

fn open(dir: &Path) -> Database {
    open_kv(&KvConfig::for_tests(dir)).unwrap()
}

/// Starts `name` the way a node does: its generation from the store.
async fn start(dir: &Path, name: &str) -> LeaseManager {
    let db = open(dir);
    let generation = nodes::register_start(&db, name, "127.0.0.1:0").await.unwrap();
    LeaseManager::new(db, Incarnation::new(name, generation), SHARDS)
}

fn live(managers: &[&LeaseManager]) -> LiveSet {
    LiveSet::new(managers.iter().map(|m| m.incarnation().clone()))
}

/// The shards placement gives `name` among `names`.
fn placed(name: &str, names: &[&str]) -> Vec<u32> {
    let keys: Vec<NodeKey> = names.iter().map(|n| NodeKey::new(*n)).collect();
    (0..SHARDS)
        .filter(|&s| placement::owner(s, &keys).map(|k| k.name.as_str()) == Some(name))
        .collect()
}

async fn lease(db: &Database, shard: u32) -> Option<nodes::Lease> {
    db.read("test_lease", |txn| async move { nodes::lease(&txn, shard).await })
        .await
        .unwrap()
}

/// The runtime's decision for `m` over the leases in the store, settled,
/// with the members of `live` the only ones known.
async fn decide(m: &LeaseManager, live: &LiveSet, moves: usize) -> Decision {
    let db = m.database();
    let page = db
        .read("test_scan", |txn| async move {
            nodes::list_leases(&txn, 0, SHARDS as usize).await
        })
        .await
        .unwrap();
    let mut owners = vec![None; SHARDS as usize];
    for l in page {
        let i = l.shard as usize;
        owners[i] = Some(l);
    }
    let (held, none, excluded) = (m.held(), BTreeSet::new(), BTreeSet::new());
    let members: BTreeSet<String> = live.nodes().into_iter().map(|k| k.name).collect();
    balance::decide(&balance::Round {
        me: m.incarnation(),
        owners: &owners,
        held: &held,
        live,
        excluded: &excluded,
        settled: true,
        grace_over: true,
        members: &members,
        known: live.nodes().len(),
        moves_per_round: moves,
        handing_off: &none,
    })
}

/// Acquires every shard the decision names.
async fn acquire_planned(m: &LeaseManager, live: &LiveSet) -> Vec<u32> {
    let d = decide(m, live, usize::MAX).await;
    for answer in m.acquire_many(&d.acquire, live).await.unwrap() {
        answer.unwrap();
    }
    d.acquire
}

#[tokio::test]
async fn two_nodes_split_the_shards_by_placement() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path(), "a").await;
    let b = start(dir.path(), "b").await;
    assert_eq!((a.incarnation().generation, b.incarnation().generation), (1, 1));
    let live = live(&[&a, &b]);

    let got_a = acquire_planned(&a, &live).await;
    let got_b = acquire_planned(&b, &live).await;
    assert_eq!(got_a, placed("a", &["a", "b"]));
    assert_eq!(got_b, placed("b", &["a", "b"]));
    assert!(!got_a.is_empty() && !got_b.is_empty());
    assert_eq!(got_a.len() + got_b.len(), SHARDS as usize);

    let db = open(dir.path());
    for shard in 0..SHARDS {
        let l = lease(&db, shard).await.expect("every shard leased");
        let expected = if got_a.contains(&shard) { "a" } else { "b" };
        assert_eq!(
            (l.node.as_str(), l.generation, l.epoch, l.released),
            (expected, 1, 1, false)
        );
    }
    // Stable: nothing left to do, and acquiring again changes nothing.
    for m in [&a, &b] {
        assert_eq!(decide(m, &live, usize::MAX).await.changes(), 0);
    }
    let again = a.acquire(got_a[0], &live).await.unwrap();
    assert_eq!(again.epoch, 1, "re-acquiring our own lease must not bump the epoch");
    assert_eq!(a.epoch(got_a[0]), Some(1));
}

#[tokio::test]
async fn a_stale_owner_cannot_commit_after_a_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path(), "a").await;
    let b = start(dir.path(), "b").await;
    let both = live(&[&a, &b]);
    let e = a.acquire(7, &both).await.unwrap().epoch;

    // While "a" is alive, "b" is refused with the holder named.
    match b.acquire(7, &both).await {
        Err(LeaseError::HeldBy {
            shard: 7,
            node,
            generation: 1,
            epoch,
        }) => assert_eq!((node.as_str(), epoch), ("a", e)),
        other => panic!("expected HeldBy, got {other:?}"),
    }

    // "a" (paused, partitioned) is mid-transaction: its fence passes...
    let db_a = open(dir.path());
    let txn = db_a.begin(false).await.unwrap();
    nodes::check_lease(&txn, 7, "a", 1, e).await.unwrap();
    txn.set(b"test/written-by-a", b"stale").unwrap();

    // ...then membership declares it dead and "b" takes the shard over.
    let taken = b.acquire(7, &live(&[&b])).await.unwrap();
    assert_eq!((taken.node.as_str(), taken.epoch), ("b", e + 1));

    // "a"'s commit is rejected: the lease it read has changed.
    let rejected = txn.commit().await.expect_err("a stale owner's commit must fail");
    assert!(matches!(rejected, StorageError::Conflict), "{rejected}");

    // Retried from scratch, the fence itself refuses (not retryable).
    let fenced = db_a
        .run("test_write_a", |txn| async move {
            nodes::check_lease(&txn, 7, "a", 1, e).await?;
            txn.set(b"test/written-by-a", b"stale")
        })
        .await
        .expect_err("the fence must refuse the old epoch");
    assert!(fenced.to_string().contains("fenced"), "{fenced}");

    // The new owner writes.
    let db_b = open(dir.path());
    let epoch_b = taken.epoch;
    db_b.run("test_write_b", |txn| async move {
        nodes::check_lease(&txn, 7, "b", 1, epoch_b).await?;
        txn.set(b"test/written-by-b", b"fresh")
    })
    .await
    .unwrap();
    let (stale, fresh) = db_b
        .read("test_check", |txn| async move {
            Ok::<_, StorageError>((
                txn.get(b"test/written-by-a").await?,
                txn.get(b"test/written-by-b").await?,
            ))
        })
        .await
        .unwrap();
    assert_eq!((stale, fresh.as_deref()), (None, Some(&b"fresh"[..])));
}

#[tokio::test]
async fn a_restarted_node_gets_its_shards_back_by_hand_off() {
    let dir = tempfile::tempdir().unwrap();
    let a1 = start(dir.path(), "a").await;
    let b = start(dir.path(), "b").await;
    let both = live(&[&a1, &b]);
    acquire_planned(&a1, &both).await;
    acquire_planned(&b, &both).await;

    // a#1 dies: b takes everything it held (placement over {b} is all of b).
    let only_b = live(&[&b]);
    let d = decide(&b, &only_b, usize::MAX).await;
    assert_eq!(d.acquire, placed("a", &["a", "b"]));
    assert!(d.takeovers.iter().all(|(_, holder)| holder == a1.incarnation()));
    let taken = b.acquire_many(&d.acquire, &only_b).await.unwrap();
    assert!(taken.iter().all(|l| l.as_ref().unwrap().epoch == 2));
    assert_eq!(b.held().len(), SHARDS as usize);
    drop(a1);

    // a restarts as generation 2: its placement shards are still b's.
    let a2 = start(dir.path(), "a").await;
    assert_eq!(a2.incarnation().generation, 2);
    let now = live(&[&a2, &b]);
    let mine = placed("a", &["a", "b"]);
    // Held by a live b: a#2 waits for the hand-off.
    assert_eq!(decide(&a2, &now, usize::MAX).await.changes(), 0);
    assert!(matches!(
        a2.acquire(mine[0], &now).await,
        Err(LeaseError::HeldBy { ref node, .. }) if node == "b"
    ));

    // b hands them back gracefully (no failure detection involved).
    let d = decide(&b, &now, usize::MAX).await;
    assert_eq!(d.release, mine);
    let db = open(dir.path());
    let mut before = Vec::new();
    for &shard in &d.release {
        before.push(lease(&db, shard).await.unwrap().epoch);
        assert!(b.release(shard).await.unwrap());
        assert!(!b.release(shard).await.unwrap(), "release is idempotent");
    }
    assert_eq!(b.held().len(), SHARDS as usize - mine.len());

    // a#2 acquires them, each with a strictly higher epoch; b is fenced.
    assert_eq!(acquire_planned(&a2, &now).await, mine);
    for (&shard, old) in mine.iter().zip(before) {
        let l = lease(&db, shard).await.unwrap();
        assert_eq!((l.node.as_str(), l.generation), ("a", 2));
        assert!(l.epoch > old, "shard {shard}: epoch {} after {old}", l.epoch);
        let stale = db
            .read("test_fence", |txn| async move {
                nodes::check_lease(&txn, shard, "b", 1, old).await.map(drop)
            })
            .await;
        assert!(stale.is_err(), "b must be fenced off shard {shard}");
    }
    for m in [&a2, &b] {
        assert_eq!(decide(m, &now, usize::MAX).await.changes(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_acquisitions_have_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let a = Arc::new(start(dir.path(), "a").await);
    let b = Arc::new(start(dir.path(), "b").await);
    let both = live(&[&a, &b]);
    for shard in 0..16 {
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let tasks: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|m| {
                let (barrier, both) = (barrier.clone(), both.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    m.acquire(shard, &both).await
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "shard {shard}: {results:?}");
        let winner = winners[0];
        assert_eq!(winner.epoch, 1);
        let loser = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        match loser {
            LeaseError::HeldBy { node, epoch: 1, .. } => assert_eq!(node, &winner.node),
            other => panic!("shard {shard}: the loser should see the winner, got {other}"),
        }
    }
}

#[tokio::test]
async fn a_batched_acquisition_answers_per_shard() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path(), "a").await;
    let b = start(dir.path(), "b").await;
    let both = live(&[&a, &b]);
    let held_by_a = acquire_planned(&a, &both).await;
    // b asks for everything in one call: a's shards are refused one by one
    // (a is live), the rest are taken, and a shard out of range is an error
    // of its own; none of it fails the batch.
    let mut ask: Vec<u32> = (0..SHARDS).collect();
    ask.push(SHARDS + 5);
    let answers = b.acquire_many(&ask, &both).await.unwrap();
    assert_eq!(answers.len(), ask.len());
    for (&shard, answer) in ask.iter().zip(&answers) {
        match answer {
            Ok(l) => assert!(!held_by_a.contains(&shard) && l.node == "b" && l.epoch == 1),
            Err(LeaseError::HeldBy { node, .. }) => assert!(held_by_a.contains(&shard) && node == "a"),
            Err(LeaseError::NoSuchShard { shard, .. }) => assert_eq!(*shard, SHARDS + 5),
            Err(e) => panic!("shard {shard}: {e}"),
        }
    }
    assert_eq!(b.held().len(), SHARDS as usize - held_by_a.len());
    // a dies: one call takes all of its shards, each at the next epoch.
    let only_b = live(&[&b]);
    let d = decide(&b, &only_b, usize::MAX).await;
    assert_eq!(d.acquire, held_by_a);
    let taken = b.acquire_many(&d.acquire, &only_b).await.unwrap();
    assert!(taken.iter().all(|l| l.as_ref().is_ok_and(|l| l.epoch == 2)));
    assert_eq!(decide(&b, &only_b, usize::MAX).await.changes(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn survivors_share_a_dead_nodes_shards_by_placement() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path(), "a").await;
    let b = Arc::new(start(dir.path(), "b").await);
    let c = Arc::new(start(dir.path(), "c").await);
    let all = live(&[&a, &b, &c]);
    let held_by_a = acquire_planned(&a, &all).await;
    acquire_planned(&b, &all).await;
    acquire_planned(&c, &all).await;

    // b and c take over concurrently, in rounds of 3 that interleave.
    let survivors = live(&[&b, &c]);
    let tasks: Vec<_> = [b.clone(), c.clone()]
        .into_iter()
        .map(|m| {
            let survivors = survivors.clone();
            tokio::spawn(async move {
                let mut taken = BTreeSet::new();
                for _round in 0..100 {
                    let d = decide(&m, &survivors, 3).await;
                    if d.acquire.is_empty() {
                        break;
                    }
                    for l in m.acquire_many(&d.acquire, &survivors).await.unwrap() {
                        taken.insert(l.unwrap().shard);
                    }
                }
                taken
            })
        })
        .collect();
    let mut per_node = Vec::new();
    for t in tasks {
        per_node.push(t.await.unwrap());
    }
    let (to_b, to_c) = (&per_node[0], &per_node[1]);
    assert!(to_b.is_disjoint(to_c));
    assert_eq!(to_b.union(to_c).copied().collect::<Vec<_>>(), held_by_a);
    let placed_b: BTreeSet<u32> = placed("b", &["b", "c"]).into_iter().collect();
    assert!(to_b.is_subset(&placed_b) && to_c.is_disjoint(&placed_b));
}
