//! A MOVE made while a backup runs, between its key copy and its ledger
//! pass: the restored store has the message at its new place (the ledger
//! pass read the entry and the row together), `verify ledger` is clean,
//! the destination's UIDNEXT is above the row the ledger pass brought (the
//! key copy read the mailbox record before the move), and its counters
//! match its rows, so the next delivery takes a fresh UID.

mod common;
use common::fixture;

use std::sync::{Arc, Mutex};

use meshmail_storage::StorageError;
use meshmail_storage::backup::create::{Pace, Source};
use meshmail_storage::backup::{self, Phase, RestoreOptions};
use meshmail_storage::blob::BlobStore;
use meshmail_storage::model::mailboxes;
use meshmail_storage::model::message_reads;
use meshmail_storage::model::messages::{self, NewMessage};
use meshmail_storage::model::verify::verify_ledger;
use meshmail_storage::open::{KvConfig, open_kv};

const MESSAGES: u32 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_during_the_backup_restores_at_its_new_place_with_a_clean_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(&dir.path().join("src"))).unwrap();
    let blobs = BlobStore::from_store(Arc::new(object_store::memory::InMemory::new()), 65_536);
    let (account, inbox) = common::account_with_inbox(&db, "carol@example.org").await;
    let work = db
        .run("mkdir", move |txn| async move {
            mailboxes::create(&fixture(&txn), account, "Work", None).await
        })
        .await
        .unwrap()
        .id;
    db.run("deliver", move |txn| async move {
        for _ in 0..MESSAGES {
            messages::append(&fixture(&txn), account, inbox, &common::placeholder_message()).await?;
        }
        Ok::<(), StorageError>(())
    })
    .await
    .unwrap();
    let moved_id = db
        .read("row", move |txn| async move {
            message_reads::get_meta(&txn, account, inbox, MESSAGES).await
        })
        .await
        .unwrap()
        .unwrap()
        .acceptance_id
        .unwrap();

    // The move runs once, when the ledger pass reports its first chunk
    // (one entry per read): after the key copy, before the last entry.
    let moved = Arc::new(Mutex::new(false));
    let (db2, m2) = (db.clone(), moved.clone());
    let progress = move |phase: Phase, _items: u64, _bytes: u64| {
        if phase != Phase::Ledger || std::mem::replace(&mut *m2.lock().unwrap(), true) {
            return;
        }
        let db = db2.clone();
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async move {
                db.run("move", move |txn| async move {
                    messages::copy_to(&fixture(&txn), account, inbox, MESSAGES, work, true).await
                })
                .await
                .unwrap()
                .expect("moved");
            })
        });
    };
    let bk = dir.path().join("bk");
    let source = Source {
        store_kind: db.backend_name().into(),
        key_prefix: String::new(),
    };
    let pace = Pace {
        keys_per_read_max: 1,
        ..Pace::default()
    };
    let manifest = backup::create(&db, &blobs, &bk, &source, pace, &progress)
        .await
        .unwrap();
    assert!(*moved.lock().unwrap(), "the move ran during the backup");
    assert_eq!(manifest.counts.ledger_entries, u64::from(MESSAGES));

    let restored = open_kv(&KvConfig::for_tests(&dir.path().join("dst"))).unwrap();
    let blobs2 = BlobStore::from_store(Arc::new(object_store::memory::InMemory::new()), 65_536);
    let (_, report) = backup::restore(&restored, &blobs2, &bk, RestoreOptions::default(), &|_, _, _| {})
        .await
        .unwrap();
    assert_eq!(report.repair.uid_next_raised, 1, "{report:?}");

    let clean = verify_ledger(&restored, 7, |_| {}).await.unwrap();
    assert!(clean.is_clean(), "{:?}", clean.problems);
    assert_eq!(clean.delivered, u64::from(MESSAGES));
    let (at_work, work_mb, counts) = restored
        .read("check", move |txn| async move {
            Ok::<_, StorageError>((
                message_reads::get_meta(&txn, account, work, 1).await?,
                mailboxes::get(&txn, account, work).await?.unwrap(),
                mailboxes::counts(&txn, account, work).await?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(at_work.unwrap().acceptance_id, Some(moved_id));
    assert_eq!(work_mb.uid_next, 2, "UIDNEXT raised above the moved row");
    assert_eq!(counts.messages, 1);

    // A new delivery into Work takes UID 2, and the ledger stays clean.
    let (uid, _) = restored
        .run("deliver after", move |txn| async move {
            let msg = NewMessage {
                ..common::placeholder_message()
            };
            messages::append(&fixture(&txn), account, work, &msg).await
        })
        .await
        .unwrap();
    assert_eq!(uid, 2);
    let after = verify_ledger(&restored, 7, |_| {}).await.unwrap();
    assert!(after.is_clean(), "{:?}", after.problems);
}
