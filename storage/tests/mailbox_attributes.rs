//! A mailbox's JMAP sortOrder and role (`mailboxes::set_attributes`), on
//! whichever backend the tests run on (SQLite, or FoundationDB in the FDB
//! pass): stored and read back, a record at the default order written as
//! earlier builds wrote it, an earlier build's record read as order 0, and
//! a role (special use) held by one mailbox only.

mod common;
use common::fixture;

use meshmail_storage::StorageError;
use meshmail_storage::model::mailboxes::{self, Attributes};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;

#[tokio::test]
async fn sort_order_and_special_use_are_stored_and_old_records_read_as_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, _) = common::account_with_inbox(&db, "s@example.org").await;
    let (sorted, drafts_taken) = db
        .run("attributes", move |txn| async move {
            let mb = mailboxes::create(&fixture(&txn), account, "Sorted", None).await?;
            // At the default the record has no sort_order: what builds
            // before it wrote, byte for byte.
            let raw = txn.get(&test_keys::mailbox(account, mb.id)).await?.unwrap();
            assert!(!String::from_utf8_lossy(&raw).contains("sort_order"));
            let attrs = Attributes {
                sort_order: Some(9),
                special_use: Some(Some("\\Flagged".into())),
            };
            mailboxes::set_attributes(&fixture(&txn), account, mb.id, &attrs).await?;
            // Drafts is one of the account's first mailboxes: its special
            // use cannot go to a second one.
            let again = Attributes {
                special_use: Some(Some("\\Drafts".into())),
                ..Attributes::default()
            };
            let taken = mailboxes::set_attributes(&fixture(&txn), account, mb.id, &again).await;
            Ok::<_, StorageError>((mb.id, matches!(taken, Err(StorageError::AlreadyExists(_)))))
        })
        .await
        .unwrap();
    assert!(drafts_taken, "one mailbox per special use");
    let read = db
        .read(
            "read",
            move |txn| async move { mailboxes::get(&txn, account, sorted).await },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.sort_order, read.special_use.as_deref()), (9, Some("\\Flagged")));

    // An earlier build's record: the same JSON without the field.
    db.run("old record", move |txn| async move {
        let key = test_keys::mailbox(account, sorted);
        let mut v: serde_json::Value = serde_json::from_slice(&txn.get(&key).await?.unwrap()).unwrap();
        assert_eq!(v["sort_order"], 9);
        v.as_object_mut().unwrap().remove("sort_order");
        txn.set(&key, &serde_json::to_vec(&v).unwrap())
    })
    .await
    .unwrap();
    let old = db
        .read("read old", move |txn| async move {
            mailboxes::get(&txn, account, sorted).await
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.sort_order, 0);
    assert_eq!(old.special_use.as_deref(), Some("\\Flagged"));
}
