//! The commit batcher: a failed batch retried one by one, deadlines that
//! pass, the ledger check that keeps a retry from storing twice, and the
//! batch limits.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use meshmail_actors::batcher::{BATCH_DELIVERIES_MAX, BATCH_INLINE_BYTES_MAX};
use meshmail_actors::delivery::{DEADLINE_PASSED, DeliveryError, deliver};
use meshmail_storage::model::ledger::LedgerState;

use crate::common::{
    commit_together, ledger_state, messages_in, node, request, request_with, store, uid_of, with_batch_sizes,
};

const PATIENCE: Duration = Duration::from_secs(30);

/// A delivery that fails its batch for a reason of its own (a keyword past
/// the store's 100 KB value limit: the store is fine, the item is not)
/// makes the batcher retry the batch's deliveries one by one: the others
/// commit once each, only it fails, and nothing of it is stored.
#[test]
fn a_failed_batch_is_retried_one_by_one_and_the_others_commit_once() {
    let ((answers, stored, bad_ledger), sizes) = with_batch_sizes(|| async {
        let s = store(0).await;
        let ctx = node(&s, "n1", 1, true).await;
        let good1 = request(&s, b"first", PATIENCE).await;
        let mut bad = request(&s, b"second", PATIENCE).await;
        bad.flags = vec!["k".repeat(150_000)];
        let good2 = request(&s, b"third", PATIENCE).await;
        let bad_id = bad.acceptance_id;
        let answers = commit_together(&ctx, vec![good1, bad, good2]).await;
        let stored = messages_in(&s.db, s.account, s.inbox).await;
        (answers, stored, ledger_state(&s.db, bad_id).await)
    });
    assert_eq!(sizes, vec![3, 1, 1, 1], "the batch of 3, then each alone");
    assert_eq!((uid_of(&answers[0]), uid_of(&answers[2])), (1, 2));
    assert!(
        matches!(&answers[1], Err(DeliveryError::Temporary(e)) if e.contains("value too large")),
        "{:?}",
        answers[1]
    );
    assert_eq!(stored, 2, "each good delivery once");
    assert_eq!(bad_ledger, None, "nothing of the bad one");
}

/// A delivery whose deadline passes while the store cannot commit is
/// answered "not stored in time" and is left out of every later attempt:
/// its sender was told to try again, so a copy stored later would be a
/// duplicate.
#[tokio::test]
async fn a_delivery_whose_deadline_passed_is_answered_and_never_stored() {
    let s = store(0).await;
    let ctx = node(&s, "n1", 1, true).await;
    let faults = s.db.faults().expect("SQLite has commit faults");
    faults.store_down.store(true, Ordering::SeqCst);
    let late = request(&s, b"late", Duration::from_millis(300)).await;
    let late_id = late.acceptance_id;
    let waiting = tokio::spawn({
        let ctx = ctx.clone();
        async move { deliver(&ctx, late).await }
    });
    // Every attempt before the deadline fails at commit; the store comes
    // back after it, while the batcher's retry loop is still running.
    tokio::time::sleep(Duration::from_millis(800)).await;
    faults.store_down.store(false, Ordering::SeqCst);
    let answer = waiting.await.unwrap();
    assert_eq!(answer, Err(DeliveryError::Temporary(DEADLINE_PASSED.into())));
    // A delivery after it commits (the store works), and is the only one.
    let next = deliver(&ctx, request(&s, b"next", PATIENCE).await).await;
    assert_eq!(uid_of(&next), 1, "the late delivery took no UID");
    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 1);
    assert_eq!(ledger_state(&s.db, late_id).await, None);
}

/// The same acceptance delivered twice (a sender's retry that reached the
/// owner again) is stored once, and the second answer is the first one's.
#[tokio::test]
async fn the_same_acceptance_twice_is_stored_once() {
    let s = store(0).await;
    let ctx = node(&s, "n1", 1, true).await;
    let req = request(&s, b"once", PATIENCE).await;
    let first = deliver(&ctx, req.clone()).await;
    let second = deliver(&ctx, req.clone()).await;
    assert_eq!(first, second);
    assert_eq!(uid_of(&first), 1);
    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 1);
    assert!(matches!(
        ledger_state(&s.db, req.acceptance_id).await,
        Some(LedgerState::Delivered { uid: 1, .. })
    ));
}

/// A batch whose commit was applied but reported unknown is run again by
/// the store's retry loop: the ledger check finds every delivery of it
/// stored, so each is stored once and answered with its first UID.
#[test]
fn a_batch_whose_commit_outcome_was_unknown_is_stored_once() {
    let ((answers, stored), sizes) = with_batch_sizes(|| async {
        let s = store(0).await;
        let ctx = node(&s, "n1", 1, true).await;
        let mut reqs = Vec::new();
        for body in [&b"a"[..], b"b", b"c"] {
            reqs.push(request(&s, body, PATIENCE).await);
        }
        let faults = s.db.faults().expect("SQLite has commit faults");
        faults.commit_unknown_after_apply.store(1, Ordering::SeqCst);
        let answers = commit_together(&ctx, reqs).await;
        assert_eq!(
            faults.commit_unknown_after_apply.load(Ordering::SeqCst),
            0,
            "the fault fired"
        );
        (answers, messages_in(&s.db, s.account, s.inbox).await)
    });
    assert_eq!(sizes, vec![3], "one batch, its transaction run twice");
    let uids: Vec<u32> = answers.iter().map(uid_of).collect();
    assert_eq!(uids, vec![1, 2, 3]);
    assert_eq!(stored, 3);
}

/// More deliveries than one batch holds go in several transactions: the
/// count limit ([`BATCH_DELIVERIES_MAX`]) and the inline-bytes limit
/// ([`BATCH_INLINE_BYTES_MAX`]) each split them, and every delivery is
/// stored once.
#[test]
fn more_than_a_batch_is_split_into_several_transactions() {
    let extra = 88;
    let ((count_answers, stored), sizes) = with_batch_sizes(|| async {
        let s = store(0).await;
        let ctx = node(&s, "n1", 1, true).await;
        let body = s.blobs.prepare(&s.db, Bytes::from_static(b"shared")).await.unwrap();
        let reqs = (0..BATCH_DELIVERIES_MAX + extra)
            .map(|_| request_with(&s, body.clone(), PATIENCE))
            .collect();
        let answers = commit_together(&ctx, reqs).await;
        (answers, messages_in(&s.db, s.account, s.inbox).await)
    });
    assert_eq!(sizes, vec![BATCH_DELIVERIES_MAX, extra]);
    assert!(count_answers.iter().all(|a| a.is_ok()));
    assert_eq!(stored, (BATCH_DELIVERIES_MAX + extra) as i64);

    // Inline bodies of 90,000 bytes: 46 fit in 4 MiB, the 47th does not.
    let body_bytes = 90_000;
    let per_batch = BATCH_INLINE_BYTES_MAX / body_bytes;
    let ((inline_answers, stored), sizes) = with_batch_sizes(|| async {
        let s = store(100_000).await;
        let ctx = node(&s, "n1", 1, true).await;
        let body = s
            .blobs
            .prepare(&s.db, Bytes::from(vec![b'x'; body_bytes]))
            .await
            .unwrap();
        assert!(body.inline_bytes.is_some(), "kept inline");
        let reqs = (0..50).map(|_| request_with(&s, body.clone(), PATIENCE)).collect();
        let answers = commit_together(&ctx, reqs).await;
        (answers, messages_in(&s.db, s.account, s.inbox).await)
    });
    assert_eq!(sizes, vec![per_batch, 50 - per_batch]);
    assert!(inline_answers.iter().all(|a| a.is_ok()));
    assert_eq!(stored, 50);
}
