//! IMAP CREATE subscribes nothing (RFC 3501 §6.3.3), but a subscription
//! outlives its mailbox (§6.3.6): `create_unsubscribed` of a name whose
//! subscription was kept makes a subscribed mailbox, and the record's flag
//! (JMAP's `isSubscribed`) agrees with the subscription list.

mod common;
use common::fixture;

use meshmail_storage::StorageError;
use meshmail_storage::model::{accounts, domains, mailboxes};
use meshmail_storage::open::{KvConfig, open_kv};

#[tokio::test]
async fn create_unsubscribed_keeps_a_surviving_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (fresh, again, subs) = db
        .run("subscriptions", |txn| async move {
            domains::add(&txn, "example.org").await?;
            let a = accounts::add(&txn, "s@example.org", "$argon2id$x").await?;
            let fresh = mailboxes::create_unsubscribed(&fixture(&txn), a.id, "Fresh", None).await?;
            let kept = mailboxes::create_unsubscribed(&fixture(&txn), a.id, "Kept", None).await?;
            mailboxes::set_subscribed(&fixture(&txn), a.id, "Kept", true).await?;
            let kept = mailboxes::find(&txn, a.id, "Kept").await?.unwrap_or(kept);
            mailboxes::remove_empty(&fixture(&txn), a.id, &kept).await?;
            let again = mailboxes::create_unsubscribed(&fixture(&txn), a.id, "Kept", None).await?;
            let subs = mailboxes::subscriptions(&txn, a.id).await?;
            Ok::<_, StorageError>((fresh, again, subs))
        })
        .await
        .unwrap();
    assert!(!fresh.subscribed, "a new name is not subscribed");
    assert!(!subs.contains(&"Fresh".to_string()), "{subs:?}");
    assert!(again.subscribed, "the kept subscription holds for the new mailbox");
    assert!(subs.contains(&"Kept".to_string()), "{subs:?}");
}
