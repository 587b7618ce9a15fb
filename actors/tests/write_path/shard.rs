//! The shard actor and the writers behind it: a superseded owner is fenced
//! off (its writes are refused and nothing is written), and a delivery that
//! crashes its handler is counted and quarantined at the third crash.

use std::time::Duration;

use meshmail_actors::delivery::{DeliveryError, Outcome, deliver};
use meshmail_actors::faults::Fault;
use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::op_error::OpError;
use meshmail_storage::model::ledger::LedgerState;
use meshmail_storage::model::{mailboxes, nodes, quarantine};

use crate::common::{ledger_state, messages_in, node, request, store, uid_of};

const PATIENCE: Duration = Duration::from_secs(30);

/// Another incarnation of the node takes the shard's lease while this one
/// still believes it owns it (paused, partitioned): the store refuses this
/// one's writes — a delivery and a mailbox operation — and nothing of them
/// is written. Before the takeover the same writes pass the same fence.
#[tokio::test]
async fn a_superseded_owner_is_fenced_and_writes_nothing() {
    let s = store(0).await;
    let stale = node(&s, "n1", 1, true).await;
    let shard = stale.shard_of(s.account);
    let before = deliver(&stale, request(&s, b"while it owns", PATIENCE).await).await;
    assert_eq!(uid_of(&before), 1, "the owner writes");

    // n1#2 (a restart) takes the shard with the next epoch.
    let taken =
        s.db.run("takeover", move |txn| async move {
            nodes::acquire_lease(&txn, shard, "n1", 2).await
        })
        .await
        .unwrap();
    assert!(stale.serves(shard), "the stale incarnation still believes it owns it");
    assert!(taken.epoch > stale.lease_epoch(shard).unwrap());

    let refused = request(&s, b"after the takeover", PATIENCE).await;
    let refused_id = refused.acceptance_id;
    let answer = deliver(&stale, refused).await;
    assert!(
        matches!(&answer, Err(DeliveryError::Temporary(e)) if e.contains("fenced")),
        "{answer:?}"
    );
    let op = MailboxOp::Create {
        name: "Projects".into(),
        special_use: None,
    };
    let op_answer = mailbox_ops::request(&stale, s.account, op).await;
    assert!(matches!(op_answer, Err(OpError::Unavailable(_))), "{op_answer:?}");

    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 1, "only the owner's");
    assert_eq!(ledger_state(&s.db, refused_id).await, None);
    let account = s.account;
    let projects =
        s.db.read("test_find", move |txn| async move {
            mailboxes::find(&txn, account, "Projects").await
        })
        .await
        .unwrap();
    assert!(projects.is_none(), "the refused CREATE wrote nothing");
}

/// A delivery that makes the batcher panic is counted durably at each
/// crash and quarantined at the third ([`quarantine::ATTEMPTS_MAX`]): its
/// ledger says so, it is not stored, and the node keeps delivering.
#[tokio::test]
async fn a_delivery_that_crashes_its_batcher_is_quarantined_at_the_third_crash() {
    let s = store(0).await;
    let ctx = node(&s, "n1", 1, true).await;
    let mut poison = request(&s, b"poison", PATIENCE).await;
    poison.fault = Some(Fault::PanicInBatcher);
    let poison_id = poison.acceptance_id;
    let answer = deliver(&ctx, poison).await;
    let Ok(Outcome::Quarantined { quarantine_id }) = answer else {
        panic!("expected quarantine, got {answer:?}");
    };
    let record =
        s.db.read("test_quarantine", move |txn| async move {
            quarantine::get(&txn, &quarantine_id).await
        })
        .await
        .unwrap()
        .expect("a quarantine record");
    assert_eq!(record.acceptance_id, Some(poison_id));
    assert_eq!(record.attempts, quarantine::ATTEMPTS_MAX);
    assert_eq!(
        record.reason,
        format!("handler crashed {} times", quarantine::ATTEMPTS_MAX),
        "the durable count reached the threshold"
    );
    assert_eq!(
        ledger_state(&s.db, poison_id).await,
        Some(LedgerState::Quarantined { quarantine_id })
    );
    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 0);

    // The restarted batcher serves the next delivery.
    let next = deliver(&ctx, request(&s, b"next", PATIENCE).await).await;
    assert_eq!(uid_of(&next), 1);
}
