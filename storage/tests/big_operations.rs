//! Big operations against FoundationDB's limits (5 s and 10 MB per
//! transaction), on whichever backend the test run is on (see
//! `KvConfig::for_tests`; `.ci/fdb-tests.sh` runs it on FDB): the shared
//! `Txn` enforces both limits on every backend, so an operation that
//! passes here neither fails with `transaction_too_old` (1007) or
//! `transaction_too_large` (2101) nor holds a transaction past 5 s.
//!
//! Sizes: the figures (200,000 acceptances) with
//! `MESHMAIL_BIG_OPS=full`; a tenth of them otherwise, enough for the walk
//! to take many chunks.

mod common;

use meshmail_storage::StorageError;
use meshmail_storage::model::messages;
use meshmail_storage::model::verify::verify_ledger;
use meshmail_storage::open::{KvConfig, open_kv};

/// Deliveries per transaction: ~1,000 keys and ~300 KB written each,
/// far below FDB's 10 MB, as the commit batcher's batches are.
const FILL_BATCH: usize = 500;

fn full_size() -> bool {
    std::env::var("MESHMAIL_BIG_OPS").as_deref() == Ok("full")
}

/// The ledger verifier walks 200,000 acceptances (20,000 unless full) in
/// bounded chunks: every acceptance reconciled, none reported missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_verifier_walks_200000_acceptances_in_bounded_transactions() {
    let acceptances: usize = if full_size() { 200_000 } else { 20_000 };
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox) = common::account_with_inbox(&db, "big@example.org").await;
    let started = std::time::Instant::now();
    for _ in 0..acceptances / FILL_BATCH {
        db.run("deliver", move |txn| async move {
            for _ in 0..FILL_BATCH {
                let msg = common::placeholder_message();
                messages::append(&txn, account, inbox, &msg).await?;
            }
            Ok::<(), StorageError>(())
        })
        .await
        .unwrap();
    }
    eprintln!(
        "big operations: {acceptances} acceptances stored in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        db.backend_name()
    );
    let started = std::time::Instant::now();
    let mut chunks = 0;
    let report = verify_ledger(&db, 1_000, |_| chunks += 1).await.unwrap();
    eprintln!(
        "big operations: ledger verified in {:.1} s, {chunks} progress calls",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(report.entries, acceptances as u64);
    assert_eq!(report.delivered, acceptances as u64);
    assert!(
        report.is_clean(),
        "{:?}",
        &report.problems[..report.problems.len().min(5)]
    );
    assert!(
        chunks >= acceptances / 1_000,
        "walked in bounded chunks ({chunks} progress calls)"
    );
}
