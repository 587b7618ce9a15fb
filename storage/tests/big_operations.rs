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
use common::fixture;

use meshmail_storage::StorageError;
use meshmail_storage::ids::{AccountId, MailboxId};
use meshmail_storage::kv::RangeOptions;
use meshmail_storage::model::verify::verify_ledger;
use meshmail_storage::model::{account_removal, accounts, compaction, jmap, mailboxes, messages};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys as keyspace;

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
                messages::append(&fixture(&txn), account, inbox, &msg).await?;
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

/// Stores `count` placeholder deliveries in `mailbox`, [`FILL_BATCH`] per
/// transaction.
async fn fill(db: &meshmail_storage::Database, account: AccountId, mailbox: MailboxId, count: usize) {
    for _ in 0..count.div_ceil(FILL_BATCH) {
        db.run("deliver", move |txn| async move {
            for _ in 0..FILL_BATCH.min(count) {
                messages::append(&fixture(&txn), account, mailbox, &common::placeholder_message()).await?;
            }
            Ok::<(), StorageError>(())
        })
        .await
        .unwrap();
    }
}

/// Deleting an account of 100,000 messages (10,000 unless full) in two
/// mailboxes: every transaction bounded, nothing of it left in any
/// per-account subspace, its token revoked, every acceptance's ledger
/// entry expunged (the verifier clean), and a neighbour untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_account_of_100000_messages_goes_in_bounded_steps() {
    let total: usize = if full_size() { 100_000 } else { 10_000 };
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox) = common::account_with_inbox(&db, "leaving@example.org").await;
    let (neighbour, neighbour_inbox) = common::account_with_inbox(&db, "staying@example.net").await;
    let archive = db
        .run("setup", move |txn| async move {
            jmap::put_token(&txn, "leaving-token", "leaving@example.org")?;
            jmap::put_token(&txn, "staying-token", "staying@example.net")?;
            Ok::<_, StorageError>(mailboxes::find(&txn, account, "Archive").await?.expect("Archive").id)
        })
        .await
        .unwrap();
    fill(&db, account, inbox, total / 2).await;
    fill(&db, account, archive, total / 2).await;
    fill(&db, neighbour, neighbour_inbox, FILL_BATCH).await;

    let started = std::time::Instant::now();
    let removal = db
        .run("begin", |txn| async move {
            account_removal::begin(&txn, "leaving@example.org").await
        })
        .await
        .unwrap();
    let (mut steps, mut expunged) = (0, 0);
    loop {
        let step = db
            .run(
                "step",
                move |txn| async move { account_removal::step(&txn, account).await },
            )
            .await
            .unwrap();
        steps += 1;
        match step {
            account_removal::Step::Expunged { messages, .. } => expunged += messages,
            account_removal::Step::Done => break,
            _ => {}
        }
    }
    eprintln!(
        "big operations: an account of {total} messages deleted in {:.1} s, {steps} transactions ({})",
        started.elapsed().as_secs_f64(),
        db.backend_name()
    );
    assert_eq!(removal.account, account);
    assert_eq!(expunged, total);
    assert!(steps > total / account_removal::MESSAGES_PER_STEP, "{steps} steps");

    let left = db
        .read("left", move |txn| async move {
            let mut keys = 0;
            for (b, e) in keyspace::account_ranges(account) {
                keys += txn.get_range(&b, &e, RangeOptions::limit(10)).await?.len();
            }
            let gone = accounts::get(&txn, "leaving@example.org").await?.is_none()
                && jmap::get_token(&txn, "leaving-token").await?.is_none()
                && account_removal::pending(&txn).await?.is_empty();
            let kept = jmap::get_token(&txn, "staying-token").await?.is_some()
                && mailboxes::counts(&txn, neighbour, neighbour_inbox).await?.messages == FILL_BATCH as i64;
            Ok::<_, StorageError>((keys, gone, kept))
        })
        .await
        .unwrap();
    assert_eq!(left, (0, true, true), "(keys left, account gone, neighbour kept)");
    let report = verify_ledger(&db, 1_000, |_| {}).await.unwrap();
    assert_eq!(report.expunged, total as u64);
    assert_eq!(report.delivered, FILL_BATCH as u64);
    assert!(
        report.is_clean(),
        "{:?}",
        &report.problems[..report.problems.len().min(5)]
    );
}

/// A compaction pass, as the compactor runs it (one bounded step per
/// transaction: a page of the mailbox walk, the change-log trim of each
/// mailbox, the expiry of idempotency markers), over a mailbox of 30,000
/// deliveries (5,000 unless full): the trim leaves the newest 100 changes
/// and raises the floor, and no step breaks a limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_pass_over_a_big_mailbox_stays_bounded() {
    let total: usize = if full_size() { 30_000 } else { 5_000 };
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox) = common::account_with_inbox(&db, "busy@example.org").await;
    fill(&db, account, inbox, total).await;
    let started = std::time::Instant::now();
    let mut trimmed = 0;
    loop {
        let (page_trimmed, wrapped) = db
            .run("compact", move |txn| async move {
                let page = compaction::mailbox_page(&txn, 2).await?;
                let mut n = 0;
                for (a, mb) in &page.mailboxes {
                    let cutoff = mb.highest_modseq.saturating_sub(100);
                    if compaction::trim_change_log(&fixture(&txn), *a, mb.id, cutoff).await? {
                        n += 1;
                    }
                }
                compaction::expire_idempotency_markers(&txn, u64::MAX, 1_000).await?;
                compaction::save_mailbox_walk(&txn, &page.next)?;
                Ok::<_, StorageError>((n, page.rows_read < 2))
            })
            .await
            .unwrap();
        trimmed += page_trimmed;
        if wrapped {
            break;
        }
    }
    eprintln!(
        "big operations: compaction pass over {total} deliveries in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        db.backend_name()
    );
    assert!(trimmed >= 1, "the INBOX's change log was trimmed");
    let (floor, left, highest) = db
        .read("after", move |txn| async move {
            let mb = mailboxes::get(&txn, account, inbox).await?.expect("INBOX");
            let floor = messages::change_floor(&txn, account, inbox).await?;
            let left = messages::changes_since(&txn, account, inbox, 0, 10_000).await?.len();
            Ok::<_, StorageError>((floor, left, mb.highest_modseq))
        })
        .await
        .unwrap();
    assert!(highest >= total as u64, "{highest}");
    assert_eq!(floor, highest - 100);
    assert_eq!(left, 100, "the newest 100 changes are kept");
}
