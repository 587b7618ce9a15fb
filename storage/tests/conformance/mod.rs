//! The backend conformance suite: one generic set of checks that every KV
//! backend must pass. `conformance_sqlite.rs` runs it on SQLite;
//! `conformance_fdb.rs` runs it on FoundationDB when
//! `MESHMAIL_FDB_CLUSTER_FILE` points at a cluster.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use foundationdb_tuple::pack;
use meshmail_storage::kv::{Faults, Idempotent, RangeOptions, key_after, prefix_range};
use meshmail_storage::{Database, StorageError};
use rand::Rng;

/// A store under test: a handle in this process, and the arguments that make
/// the `kv-probe` child process open the same store.
pub struct Target {
    pub db: Database,
    pub probe_args: Vec<String>,
    /// A prefix unique to this test run, so runs against a shared cluster do
    /// not see each other.
    pub prefix: String,
    /// The backend's fault hooks (an unknown commit outcome, a store that
    /// is down), injected at the backend's own commit.
    pub backend: Arc<dyn FaultHooks>,
}

/// A backend whose commits can be made to fail (see [`Faults`]).
pub trait FaultHooks: Send + Sync {
    fn faults(&self) -> &Faults;
}

impl Target {
    pub fn key(&self, parts: &str) -> Vec<u8> {
        pack(&(self.prefix.as_str(), parts))
    }

    fn probe(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kv-probe"));
        cmd.args(&self.probe_args);
        cmd
    }
}

type R<T = ()> = Result<T, StorageError>;

/// Ranges come back in key order, limited, in both directions, and a cursor
/// streams the whole range in bounded chunks.
pub async fn ordering_and_limits(t: &Target) {
    let keys: Vec<Vec<u8>> = (0..50u32).map(|i| pack(&(t.prefix.as_str(), "ord", i))).collect();
    let ks = keys.clone();
    t.db.run("t_fill", move |txn| {
        let ks = ks.clone();
        async move {
            // Written out of order on purpose.
            for k in ks.iter().rev() {
                txn.set(k, k)?;
            }
            R::Ok(())
        }
    })
    .await
    .unwrap();
    let (b, e) = prefix_range(&pack(&(t.prefix.as_str(), "ord")));
    let (b2, e2) = (b.clone(), e.clone());
    let (fwd, rev, mid) =
        t.db.read("t_read", move |txn| {
            let (b, e) = (b2.clone(), e2.clone());
            async move {
                let fwd = txn.get_range(&b, &e, RangeOptions::limit(7)).await?;
                let rev = txn.get_range(&b, &e, RangeOptions::limit(7).reversed()).await?;
                let mid = txn.get_range(&b, &e, RangeOptions::limit(1000)).await?;
                R::Ok((fwd, rev, mid))
            }
        })
        .await
        .unwrap();
    assert_eq!(
        fwd.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        keys[..7].to_vec()
    );
    let mut last7: Vec<Vec<u8>> = keys[43..].to_vec();
    last7.reverse();
    assert_eq!(rev.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), last7);
    assert_eq!(mid.len(), 50);
    assert!(mid.windows(2).all(|w| w[0].0 < w[1].0), "ascending order");

    // Cursor: chunks of 8, forwards and backwards, cover the range exactly once.
    for reverse in [false, true] {
        let (b, e) = (b.clone(), e.clone());
        let seen =
            t.db.read("t_cursor", move |txn| {
                let (b, e) = (b.clone(), e.clone());
                async move {
                    let mut cur = txn.range_cursor(&b, &e, 8, reverse);
                    let mut seen = Vec::new();
                    while let Some(chunk) = cur.next_chunk().await? {
                        assert!(chunk.len() <= 8);
                        seen.extend(chunk.into_iter().map(|(k, _)| k));
                    }
                    R::Ok(seen)
                }
            })
            .await
            .unwrap();
        let mut want = keys.clone();
        if reverse {
            want.reverse();
        }
        assert_eq!(seen, want, "cursor reverse={reverse}");
    }
    // A limited read starting mid-range.
    let begin = key_after(&keys[10]);
    let rows =
        t.db.read("t_mid", move |txn| {
            let (b, e) = (begin.clone(), e.clone());
            async move { txn.get_range(&b, &e, RangeOptions::limit(3)).await }
        })
        .await
        .unwrap();
    assert_eq!(
        rows.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        keys[11..14].to_vec()
    );
}

/// A transaction reads its own sets, clears and clear-ranges.
pub async fn read_your_writes(t: &Target) {
    let (a, b, c) = (t.key("ryw-a"), t.key("ryw-b"), t.key("ryw-c"));
    t.db.run("t_ryw", move |txn| {
        let (a, b, c) = (a.clone(), b.clone(), c.clone());
        async move {
            txn.set(&a, b"1")?;
            txn.set(&b, b"2")?;
            txn.set(&c, b"3")?;
            assert_eq!(txn.get(&a).await?.as_deref(), Some(&b"1"[..]));
            txn.clear(&a)?;
            assert_eq!(txn.get(&a).await?, None);
            txn.clear_range(&b, &c)?;
            assert_eq!(txn.get(&b).await?, None);
            assert_eq!(txn.get(&c).await?.as_deref(), Some(&b"3"[..]));
            txn.add_i64(&a, 5)?;
            txn.add_i64(&a, 6)?;
            assert_eq!(txn.get_i64(&a).await?, 11);
            R::Ok(())
        }
    })
    .await
    .unwrap();
}

/// `get_prefix` gives the first bytes of a value and its whole length, for
/// small values and large ones (SQLite keeps those apart, in its heap),
/// committed or written by the same transaction; a missing key is None.
pub async fn value_prefixes(t: &Target) {
    let (small, large, own, none) = (t.key("pre-s"), t.key("pre-l"), t.key("pre-o"), t.key("pre-n"));
    let big: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let (s2, l2, b2) = (small.clone(), large.clone(), big.clone());
    t.db.run("t_prefix_put", move |txn| {
        let (small, large, big) = (s2.clone(), l2.clone(), b2.clone());
        async move {
            txn.set(&small, b"hello world")?;
            txn.set(&large, &big)?;
            R::Ok(())
        }
    })
    .await
    .unwrap();
    t.db.run("t_prefix_get", move |txn| {
        let (small, large, own, none, big) = (small.clone(), large.clone(), own.clone(), none.clone(), big.clone());
        async move {
            assert_eq!(txn.get_prefix(&small, 5).await?, Some((b"hello".to_vec(), 11)));
            assert_eq!(txn.get_prefix(&small, 100).await?, Some((b"hello world".to_vec(), 11)));
            assert_eq!(
                txn.get_prefix(&large, 3000).await?,
                Some((big[..3000].to_vec(), 50_000))
            );
            assert_eq!(txn.get_prefix(&large, 60_000).await?, Some((big.clone(), 50_000)));
            assert_eq!(txn.get_prefix(&none, 10).await?, None);
            txn.set(&own, &big[..4000])?;
            assert_eq!(txn.get_prefix(&own, 10).await?, Some((big[..10].to_vec(), 4000)));
            txn.set(&large, b"short now")?;
            assert_eq!(txn.get_prefix(&large, 5).await?, Some((b"short".to_vec(), 9)));
            R::Ok(())
        }
    })
    .await
    .unwrap();
}

/// Two transactions read the same counter and both write it: one commit
/// fails with a conflict, the retry loop reruns it, and the result is what a
/// serial execution gives (2, not 1).
pub async fn conflicting_transactions_serialize(t: &Target) {
    let key = t.key("conflict");
    // Explicit interleaving: both read, first commits, second must conflict.
    let t1 = t.db.begin(false).await.unwrap();
    let t2 = t.db.begin(false).await.unwrap();
    let v1 = t1.get_i64(&key).await.unwrap();
    let v2 = t2.get_i64(&key).await.unwrap();
    t1.set(&key, &(v1 + 1).to_le_bytes()).unwrap();
    t2.set(&key, &(v2 + 1).to_le_bytes()).unwrap();
    commit(&t.db, t1).await.expect("first commit wins");
    let err = commit(&t.db, t2).await.expect_err("second commit must conflict");
    assert!(matches!(err, StorageError::Conflict), "got {err:?}");

    // Through the retry loop: both closures read, then wait for each other
    // before writing, so at least one must retry.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (db, key, barrier, attempts) = (t.db.clone(), key.clone(), barrier.clone(), attempts.clone());
        tasks.push(tokio::spawn(async move {
            db.run("t_conflict", move |txn| {
                let (key, barrier, attempts) = (key.clone(), barrier.clone(), attempts.clone());
                async move {
                    let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let v = txn.get_i64(&key).await?;
                    if n < 2 {
                        barrier.wait().await;
                    }
                    txn.set(&key, &(v + 1).to_le_bytes())?;
                    R::Ok(())
                }
            })
            .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert!(
        attempts.load(std::sync::atomic::Ordering::SeqCst) >= 3,
        "one transaction retried"
    );
    assert_eq!(read_i64(&t.db, &key).await, 3, "serializable: 1 + 2 increments");
}

/// A range read conflicts with an insert into that range (no phantoms), and
/// a snapshot read conflicts with nothing.
pub async fn range_reads_conflict_and_snapshots_do_not(t: &Target) {
    let (b, e) = prefix_range(&pack(&(t.prefix.as_str(), "phantom")));
    let inside = pack(&(t.prefix.as_str(), "phantom", 5));
    let elsewhere = t.key("phantom-out");
    let reader = t.db.begin(false).await.unwrap();
    assert!(
        reader
            .get_range(&b, &e, RangeOptions::limit(10))
            .await
            .unwrap()
            .is_empty()
    );
    let snap_reader = t.db.begin(false).await.unwrap();
    assert!(
        snap_reader
            .get_range(&b, &e, RangeOptions::limit(10).snapshot())
            .await
            .unwrap()
            .is_empty()
    );
    let writer = t.db.begin(false).await.unwrap();
    writer.set(&inside, b"x").unwrap();
    commit(&t.db, writer).await.unwrap();
    reader.set(&elsewhere, b"y").unwrap();
    let err = commit(&t.db, reader).await.expect_err("phantom must conflict");
    assert!(matches!(err, StorageError::Conflict), "got {err:?}");
    snap_reader.set(&elsewhere, b"z").unwrap();
    commit(&t.db, snap_reader)
        .await
        .expect("snapshot reads add no conflict");
}

/// Atomic adds from many concurrent tasks sum exactly (and never conflict).
pub async fn atomic_add_many_tasks(t: &Target) {
    let key = t.key("add-tasks");
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (db, key) = (t.db.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let key = key.clone();
                db.run("t_add", move |txn| {
                    let key = key.clone();
                    async move { txn.add_i64(&key, 1) }
                })
                .await
                .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(read_i64(&t.db, &key).await, 500);
}

/// Atomic adds from several OS processes (and this one) sum exactly.
pub async fn atomic_add_many_processes(t: &Target) {
    // The probe takes the key as a string: use a printable key.
    let key_text = format!("{}-add-procs", t.prefix);
    let mut children = Vec::new();
    for _ in 0..3 {
        children.push(t.probe().args(["add", &key_text, "150"]).spawn().expect("spawn probe"));
    }
    for _ in 0..150 {
        let key = key_text.clone().into_bytes();
        t.db.run("t_add_proc", move |txn| {
            let key = key.clone();
            async move { txn.add_i64(&key, 1) }
        })
        .await
        .unwrap();
    }
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait()).await.unwrap().unwrap();
        assert!(status.success(), "probe failed: {status}");
    }
    assert_eq!(read_i64(&t.db, key_text.as_bytes()).await, 600);
}

/// Every FDB limit is refused with an error that names it.
pub async fn limits_are_enforced(t: &Target) {
    let txn = t.db.begin(false).await.unwrap();
    let err = txn.set(&vec![b'k'; 10_001], b"v").unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::KeyTooLarge {
                size: 10_001,
                limit: 10_000
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("key too large"));
    let err = txn.set(&t.key("big-value"), &vec![0u8; 100_001]).unwrap_err();
    assert!(matches!(err, StorageError::ValueTooLarge { .. }), "{err:?}");
    assert!(txn.set(&t.key("ok-value"), &vec![0u8; 100_000]).is_ok());
    let mut last = Ok(());
    for i in 0..120u32 {
        last = txn.set(&pack(&(t.prefix.as_str(), "bulk", i)), &vec![0u8; 99_000]);
        if last.is_err() {
            break;
        }
    }
    let err = last.unwrap_err();
    assert!(matches!(err, StorageError::TransactionTooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("10000000"));

    let ro = t.db.begin(true).await.unwrap();
    assert!(matches!(ro.set(&t.key("ro"), b"x"), Err(StorageError::ReadOnly)));

    // The 5 s lifetime, for real.
    let old = t.db.begin(false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5_100)).await;
    let err = old.get(&t.key("late")).await.unwrap_err();
    assert!(
        matches!(err, StorageError::TransactionTooOld { limit_ms: 5000 }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

/// A child commits in a loop and reports each commit after it returns; it is
/// SIGKILLed at a random moment. Every reported commit is present, and no
/// transaction is half there.
pub async fn durable_across_sigkill(t: &Target) {
    let run = format!("{}-kill-{}", t.prefix, rand::rng().random::<u32>());
    let mut child = t
        .probe()
        .args(["commit-loop", &run])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn probe");
    let stdout = child.stdout.take().unwrap();
    let delay = Duration::from_millis(rand::rng().random_range(300..1500));
    let reported = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut reported = BTreeSet::new();
        let mut lines = BufReader::new(stdout).lines();
        while started.elapsed() < delay {
            match lines.next() {
                Some(Ok(line)) => {
                    let n: u64 = line.trim_start_matches("committed ").parse().expect("probe output");
                    reported.insert(n);
                }
                _ => break,
            }
        }
        // SIGKILL: no destructor, no flush, mid-transaction more often than not.
        // SAFETY: plain syscall on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        // Lines already written before the kill are promises too.
        for line in lines.map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("committed ").and_then(|n| n.parse().ok()) {
                reported.insert(n);
            }
        }
        child.wait().unwrap();
        reported
    })
    .await
    .unwrap();
    assert!(
        reported.len() > 5,
        "the probe committed only {} times before the kill",
        reported.len()
    );

    let (b, e) = prefix_range(&pack(&("probe", run.as_str())));
    let mut parts_by_txn: std::collections::BTreeMap<u64, u8> = Default::default();
    let mut begin = b;
    loop {
        let (bb, ee) = (begin.clone(), e.clone());
        let rows =
            t.db.read("t_kill_check", move |txn| {
                let (b, e) = (bb.clone(), ee.clone());
                async move { txn.get_range(&b, &e, RangeOptions::limit(5000)).await }
            })
            .await
            .unwrap();
        for (k, _) in &rows {
            let (_, _, n, _part): (String, String, u64, u16) = foundationdb_tuple::unpack(k).unwrap();
            *parts_by_txn.entry(n).or_default() += 1;
        }
        match rows.last() {
            Some((k, _)) if rows.len() == 5000 => begin = key_after(k),
            _ => break,
        }
    }
    for n in &reported {
        assert_eq!(
            parts_by_txn.get(n),
            Some(&9),
            "reported commit {n} is missing or partial"
        );
    }
    for (n, parts) in &parts_by_txn {
        assert_eq!(*parts, 9, "transaction {n} is half there: {parts} of 9 keys");
    }
    let unreported = parts_by_txn.len() - reported.len();
    assert!(
        unreported <= 1,
        "at most the in-flight commit may be present unreported, saw {unreported}"
    );
}

/// Commits a hand-driven transaction (tests that interleave by hand).
async fn commit(_db: &Database, txn: meshmail_storage::Txn) -> R {
    txn.commit().await
}

pub async fn read_i64(db: &Database, key: &[u8]) -> i64 {
    let key = key.to_vec();
    db.read("t_read_i64", move |txn| {
        let key = key.clone();
        async move { txn.get_i64(&key).await }
    })
    .await
    .unwrap()
}

/// A commit whose outcome is unknown (1021 after a real commit) is retried;
/// the idempotency marker makes the retry a no-op instead of a second
/// application.
pub async fn unknown_commit_outcome_is_retried_idempotently(t: &Target) {
    let key = t.key("idem");
    let faults = t.backend.faults();
    faults
        .commit_unknown_after_apply
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let op_id = *uuid::Uuid::now_v7().as_bytes();
    let k = key.clone();
    let out =
        t.db.run_idempotent("t_idem", op_id, move |txn| {
            let k = k.clone();
            async move { txn.add_i64(&k, 1) }
        })
        .await
        .unwrap();
    assert_eq!(
        out,
        Idempotent::AlreadyApplied,
        "the retry saw the first attempt's marker"
    );
    assert_eq!(read_i64(&t.db, &key).await, 1, "applied exactly once");

    // Without the marker, a blind retry would have applied it twice: the
    // check above can fail.
    faults
        .commit_unknown_after_apply
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let k = key.clone();
    t.db.run("t_not_idem", move |txn| {
        let k = k.clone();
        async move { txn.add_i64(&k, 1) }
    })
    .await
    .unwrap();
    assert_eq!(read_i64(&t.db, &key).await, 3);
}

/// A store that is down fails commits with a retryable error, and the retry
/// loop gives up with a clear error instead of hanging.
pub async fn store_down_fails_cleanly(t: &Target) {
    let db = t.db.clone().with_retry_policy(meshmail_storage::kv::RetryPolicy {
        attempts_max: 3,
        ..Default::default()
    });
    let faults = t.backend.faults();
    faults.store_down.store(true, std::sync::atomic::Ordering::SeqCst);
    let key = t.key("down");
    let err = db
        .run("t_down", move |txn| {
            let key = key.clone();
            async move { txn.set(&key, b"x") }
        })
        .await
        .unwrap_err();
    faults.store_down.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(
        matches!(err, StorageError::RetriesExhausted { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(err.is_unavailable(), "{err:?}");
}
