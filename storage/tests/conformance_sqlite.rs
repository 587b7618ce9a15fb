//! The conformance suite on the embedded SQLite backend, plus the checks
//! only SQLite can make (fault injection).

mod conformance;

use std::sync::Arc;

use conformance::{FaultHooks, Target};
use meshmail_storage::kv::Faults;
use meshmail_storage::kv::sqlite::{SqliteBackend, SqliteOptions};
use meshmail_storage::{Database, StorageError};

struct Sqlite(SqliteBackend);

impl FaultHooks for Sqlite {
    fn faults(&self) -> &Faults {
        self.0.faults()
    }
}

fn target() -> (tempfile::TempDir, SqliteBackend, Target) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meshmail.sqlite");
    let backend = SqliteBackend::open(SqliteOptions::new(&path)).unwrap();
    let db = Database::new(Arc::new(backend.clone()));
    let target = Target {
        db,
        probe_args: vec!["--sqlite".into(), path.to_string_lossy().into_owned()],
        prefix: "t".into(),
        backend: Arc::new(Sqlite(backend.clone())),
    };
    (dir, backend, target)
}

#[tokio::test]
async fn ordering_and_limits() {
    let (_d, _b, t) = target();
    conformance::ordering_and_limits(&t).await;
}

#[tokio::test]
async fn read_your_writes() {
    let (_d, _b, t) = target();
    conformance::read_your_writes(&t).await;
}

#[tokio::test]
async fn value_prefixes() {
    let (_d, _b, t) = target();
    conformance::value_prefixes(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_transactions_serialize() {
    let (_d, _b, t) = target();
    conformance::conflicting_transactions_serialize(&t).await;
}

#[tokio::test]
async fn range_reads_conflict_and_snapshots_do_not() {
    let (_d, _b, t) = target();
    conformance::range_reads_conflict_and_snapshots_do_not(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_add_many_tasks() {
    let (_d, _b, t) = target();
    conformance::atomic_add_many_tasks(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_add_many_processes() {
    let (_d, _b, t) = target();
    conformance::atomic_add_many_processes(&t).await;
}

#[tokio::test]
async fn limits_are_enforced() {
    let (_d, _b, t) = target();
    conformance::limits_are_enforced(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_across_sigkill() {
    let (_d, _b, t) = target();
    // Several kills at random moments, each on top of what the last left.
    for _ in 0..3 {
        conformance::durable_across_sigkill(&t).await;
    }
}

#[tokio::test]
async fn unknown_commit_outcome_is_retried_idempotently() {
    let (_d, _b, t) = target();
    conformance::unknown_commit_outcome_is_retried_idempotently(&t).await;
}

#[tokio::test]
async fn store_down_fails_cleanly() {
    let (_d, _b, t) = target();
    conformance::store_down_fails_cleanly(&t).await;
}

/// A store file whose write lock another process holds (each attempt waits
/// out SQLite's 5 s busy timeout) gives up once the retry budget is spent,
/// not after `attempts_max` slow attempts (40 × 5 s): callers answer "try
/// again later" in bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_store_gives_up_within_the_retry_budget() {
    let (dir, _b, t) = target();
    let db = t.db.clone().with_retry_policy(meshmail_storage::kv::RetryPolicy {
        give_up_after: std::time::Duration::from_secs(1),
        ..Default::default()
    });
    let path = dir.path().join("meshmail.sqlite");
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("BEGIN EXCLUSIVE").unwrap();
        locked_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(std::time::Duration::from_secs(60));
        c.execute_batch("ROLLBACK").unwrap();
    });
    locked_rx.recv().unwrap();
    let key = t.key("locked");
    let started = std::time::Instant::now();
    let run = db.run("t_locked", move |txn| {
        let key = key.clone();
        async move { txn.set(&key, b"x") }
    });
    let err = tokio::time::timeout(std::time::Duration::from_secs(30), run)
        .await
        .expect("the retry loop kept trying past its budget")
        .unwrap_err();
    let took = started.elapsed();
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    assert!(matches!(err, StorageError::RetriesExhausted { .. }), "{err:?}");
    assert!(err.is_unavailable(), "{err:?}");
    // One attempt (the busy timeout) plus at most one more started in budget.
    assert!(took < std::time::Duration::from_secs(12), "gave up after {took:?}");
}

/// Three processes group-commit (64 keys per transaction) to one file for
/// 30 s: none starves. Without the fair hand-off SQLite's busy handler let
/// one process take nearly every commit (see storage-facts.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_fairness_three_processes() {
    let (_d, _b, t) = target();
    let secs = std::env::var("MESHMAIL_FAIRNESS_SECS").unwrap_or_else(|_| "30".into());
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_kv-probe"))
                .args(&t.probe_args)
                .args(["group-commit", &secs, "64"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn probe")
        })
        .collect();
    let mut reports = Vec::new();
    for c in children {
        let out = tokio::task::spawn_blocking(move || c.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(out.status.success());
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe JSON");
        reports.push(report);
    }
    let total: u64 = reports.iter().map(|r| r["commits"].as_u64().unwrap()).sum();
    for r in &reports {
        eprintln!("fairness: {r}");
        let share = r["commits"].as_u64().unwrap() as f64 / total as f64;
        assert!(share >= 0.20, "a writer starved: {share:.2} of {total} commits ({r})");
    }
    let p99_max = reports.iter().map(|r| r["p99_us"].as_u64().unwrap()).max().unwrap();
    eprintln!("fairness: {total} commits in {secs}s by 3 processes, worst per-process commit p99 {p99_max} us");
}
