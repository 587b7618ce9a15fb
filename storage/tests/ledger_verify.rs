//! The ledger verifier reconciles every acceptance with what it names, and
//! reports exactly the ones that are not backed by the store.

mod common;
use common::fixture;

use meshmail_storage::StorageError;
use meshmail_storage::model::messages::{self, NewMessage};
use meshmail_storage::model::new_id;
use meshmail_storage::model::verify::verify_ledger;
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;

#[tokio::test]
async fn verifier_reports_exactly_the_message_deleted_behind_its_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox) = common::account_with_inbox(&db, "bob@example.org").await;
    // 250 deliveries in batches of 50, so the verifier needs several chunks.
    let mut ids = Vec::new();
    for _ in 0..5 {
        let batch: Vec<[u8; 16]> = (0..50).map(|_| new_id()).collect();
        ids.extend(batch.clone());
        db.run("deliver", move |txn| {
            let batch = batch.clone();
            async move {
                for id in batch {
                    let msg = NewMessage {
                        acceptance_id: id,
                        ..common::placeholder_message()
                    };
                    messages::append(&fixture(&txn), account, inbox, &msg).await?;
                }
                Ok::<(), StorageError>(())
            }
        })
        .await
        .unwrap();
    }
    let clean = verify_ledger(&db, 64, |_| {}).await.unwrap();
    assert_eq!(clean.entries, 250);
    assert_eq!(clean.delivered, 250);
    assert!(clean.is_clean(), "{:?}", clean.problems);

    // Behind the server's back: delete the message with UID 137.
    db.run("sabotage", move |txn| async move {
        txn.clear(&test_keys::message(account, inbox, 137))
    })
    .await
    .unwrap();
    let mut calls = 0;
    let report = verify_ledger(&db, 64, |_| calls += 1).await.unwrap();
    assert_eq!(report.entries, 250);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems[0].acceptance_id, ids[136]);
    assert!(report.problems[0].detail.contains("uid 137"));
    assert!(calls >= 4, "walked in bounded chunks ({calls} progress calls)");
}
