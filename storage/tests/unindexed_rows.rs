//! Deferred indexing (`model::unindexed`): messages delivered since a
//! mailbox was last indexed have no unseen, receivedAt, thread-membership
//! or change-log keys, and every reader must answer exactly as it does once
//! they are indexed.
//! The indexed store is the reference: the same reads are taken before and
//! after indexing, on a mailbox whose indexed part already holds flag
//! changes and expunges, with receivedAt dates out of order and tied.

mod common;
use common::fixture;

use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::messages::{self, BodyRef, ChangeKind, FlagOp, NewMessage};
use meshmail_storage::model::summary::{Envelope, HeaderText, Summary};
use meshmail_storage::model::unindexed::{self, INDEX_AFTER};
use meshmail_storage::model::{accounts, domains, mailboxes, message_codec, new_id, threads};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;
use meshmail_storage::{Database, StorageError};

fn store() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    (dir, db)
}

async fn setup(db: &Database) -> (AccountId, MailboxId) {
    db.run("setup", |txn| async move {
        domains::add(&txn, "example.org").await?;
        let a = accounts::add(&txn, "u@example.org", "$argon2id$x").await?;
        let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
        Ok::<_, StorageError>((a.id, inbox.id))
    })
    .await
    .unwrap()
}

/// Message `i`: every third one seen, dates out of order with ties; the
/// ones between multiples of 5 reply to the multiple before them (threads
/// of five).
fn message(i: u32) -> NewMessage {
    let subject = format!("message {i}");
    NewMessage {
        body: BodyRef {
            hash: format!("{:064x}", i + 1),
            size: 100 + u64::from(i),
            inline: true,
        },
        flags: if i.is_multiple_of(3) {
            vec!["\\Seen".into()]
        } else {
            vec![]
        },
        internal_date_ms: 1_700_000_000_000 + i64::from((i * 7919) % 23) * 1000,
        summary: Summary {
            envelope: Envelope {
                subject: Some(HeaderText {
                    raw: subject.clone(),
                    decoded: subject,
                }),
                message_id: Some(format!("<m{i}@example.org>")),
                in_reply_to: (!i.is_multiple_of(5)).then(|| format!("<m{}@example.org>", i - i % 5)),
                ..Envelope::default()
            },
            ..Summary::default()
        },
        acceptance_id: new_id(),
    }
}

async fn deliver(db: &Database, account: AccountId, mailbox: MailboxId, range: std::ops::Range<u32>) {
    // A few per transaction, as the batcher does.
    let all: Vec<u32> = range.collect();
    for chunk in all.chunks(7) {
        let chunk = chunk.to_vec();
        db.run("deliver", move |txn| {
            let chunk = chunk.clone();
            async move {
                for i in chunk {
                    messages::append(&fixture(&txn), account, mailbox, &message(i)).await?;
                }
                Ok::<_, StorageError>(())
            }
        })
        .await
        .unwrap();
    }
}

/// Every index-backed answer (and the row reads beside them), as text.
async fn reads(db: &Database, account: AccountId, mailbox: MailboxId) -> Vec<String> {
    db.read("reads", move |txn| async move {
        let mut out = Vec::new();
        let hot = messages::list_meta(&txn, account, mailbox, 1, None, 10_000).await?;
        let uids: Vec<Uid> = hot.iter().map(|m| m.uid).collect();
        out.push(format!("hot {hot:?}"));
        out.push(format!(
            "whole {:?}",
            messages::get_many(&txn, account, mailbox, &uids).await?
        ));
        for (from, limit) in [(1, 10_000), (1, 3), (5, 4), (20, 10_000), (30, 2), (1000, 5)] {
            let unseen = messages::unseen_uids(&txn, account, mailbox, from, limit).await?;
            out.push(format!("unseen from {from} limit {limit}: {unseen:?}"));
        }
        for since in [0, 1, 10, 25, 40, 1000] {
            for limit in [10_000, 3, 20] {
                let changes = messages::changes_since(&txn, account, mailbox, since, limit).await?;
                out.push(format!("changes since {since} limit {limit}: {changes:?}"));
            }
        }
        for newest_first in [false, true] {
            for (skip, limit) in [(0, 10_000), (0, 5), (3, 7), (10, 30), (40, 10), (0, 0)] {
                let by_date = messages::uids_by_date(&txn, account, mailbox, newest_first, skip, limit).await?;
                out.push(format!(
                    "by date newest {newest_first} skip {skip} limit {limit}: {by_date:?}"
                ));
            }
            for m in &hot {
                for max in [10_000, 5] {
                    let rank =
                        messages::date_rank(&txn, account, mailbox, m.internal_date_ms, m.uid, newest_first, max)
                            .await?;
                    out.push(format!("rank of {} newest {newest_first} max {max}: {rank:?}", m.uid));
                }
            }
        }
        out.push(format!("counts {:?}", mailboxes::counts(&txn, account, mailbox).await?));
        let threads: std::collections::BTreeSet<String> = hot.iter().filter_map(|m| m.thread_id.clone()).collect();
        for t in threads {
            out.push(format!("thread {t}: {:?}", threads::members(&txn, account, &t).await?));
        }
        Ok::<_, StorageError>(out)
    })
    .await
    .unwrap()
}

async fn record(db: &Database, account: AccountId, mailbox: MailboxId) -> mailboxes::Mailbox {
    db.read("record", move |txn| async move {
        Ok::<_, StorageError>(mailboxes::get(&txn, account, mailbox).await?.unwrap())
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn unindexed_deliveries_read_as_they_do_once_indexed() {
    let (_dir, db) = store();
    let (account, inbox) = setup(&db).await;
    // The indexed part: 30 deliveries, then flag changes and expunges
    // (each indexes the mailbox first).
    deliver(&db, account, inbox, 0..30).await;
    db.run("changes", move |txn| async move {
        let txn = fixture(&txn);
        let seen = ["\\Seen".to_string()];
        messages::store_flags_many(&txn, account, inbox, &[2, 4, 7], FlagOp::Add, &seen, None).await?;
        messages::store_flags_many(&txn, account, inbox, &[1], FlagOp::Remove, &seen, None).await?;
        messages::expunge(&txn, account, inbox, 5).await?;
        messages::expunge(&txn, account, inbox, 30).await?;
        Ok::<_, StorageError>(())
    })
    .await
    .unwrap();
    assert_eq!(record(&db, account, inbox).await.unindexed_from, None);
    // The unindexed part: 25 more.
    deliver(&db, account, inbox, 30..55).await;
    let mb = record(&db, account, inbox).await;
    assert_eq!(mb.unindexed_from, Some(31), "UIDs 31.. wait to be indexed");
    let thread_41 = db
        .read("thread", move |txn| async move {
            Ok::<_, StorageError>(
                messages::get_meta(&txn, account, inbox, 41)
                    .await?
                    .unwrap()
                    .thread_id
                    .unwrap(),
            )
        })
        .await
        .unwrap();
    let member_key = test_keys::thread_member(account, &thread_41, inbox, 41);
    let (row, summary, unseen, by_date, member) = db
        .read("raw", move |txn| {
            let member_key = member_key.clone();
            async move {
                let member = txn.get(&member_key).await?;
                let row = txn.get(&test_keys::message(account, inbox, 41)).await?;
                let summary = txn.get(&test_keys::message_summary(account, inbox, 41)).await?;
                let unseen = txn.get(&test_keys::unseen(account, inbox, 41)).await?;
                let by_date = txn
                    .get(&test_keys::message_by_date(
                        account,
                        inbox,
                        message(40).internal_date_ms,
                        41,
                    ))
                    .await?;
                Ok::<_, StorageError>((row, summary, unseen, by_date, member))
            }
        })
        .await
        .unwrap();
    assert_eq!(member, None, "thread membership comes later");
    assert_eq!(
        row.unwrap()[0],
        message_codec::VERSION_2,
        "rows are written whole at delivery"
    );
    assert!(summary.is_some());
    // UID 41 is message 40: unseen.
    assert_eq!((unseen, by_date), (None, None), "index keys come later");
    let unindexed = reads(&db, account, inbox).await;
    db.run("index", move |txn| async move {
        unindexed::index_first(&fixture(&txn), account, inbox).await
    })
    .await
    .unwrap();
    assert_eq!(record(&db, account, inbox).await.unindexed_from, None);
    let indexed = reads(&db, account, inbox).await;
    assert_eq!(unindexed.len(), indexed.len());
    for (u, i) in unindexed.iter().zip(&indexed) {
        assert_eq!(u, i, "an unindexed read differs from the indexed one");
    }
}

#[tokio::test]
async fn a_flag_change_comes_after_the_added_change_it_follows() {
    let (_dir, db) = store();
    let (account, inbox) = setup(&db).await;
    deliver(&db, account, inbox, 1..4).await;
    let changed = db
        .run("store", move |txn| async move {
            messages::store_flags(
                &fixture(&txn),
                account,
                inbox,
                2,
                FlagOp::Add,
                &["$Label1".into()],
                None,
            )
            .await
        })
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let changes = db
        .read("changes", move |txn| async move {
            messages::changes_since(&txn, account, inbox, 0, 100).await
        })
        .await
        .unwrap();
    let kinds: Vec<(u64, Uid, ChangeKind)> = changes.iter().map(|c| (c.modseq, c.uid, c.kind.clone())).collect();
    assert_eq!(
        kinds,
        vec![
            (2, 1, ChangeKind::Added),
            (3, 2, ChangeKind::Added),
            (4, 3, ChangeKind::Added),
            (changed.1, 2, ChangeKind::Flags),
        ]
    );
    assert_eq!(changed.1, 5);
}

#[tokio::test]
async fn the_delivery_that_brings_index_after_rows_indexes_them() {
    let (_dir, db) = store();
    let (account, inbox) = setup(&db).await;
    deliver(&db, account, inbox, 0..INDEX_AFTER - 1).await;
    assert_eq!(record(&db, account, inbox).await.unindexed_from, Some(1));
    deliver(&db, account, inbox, INDEX_AFTER - 1..INDEX_AFTER).await;
    assert_eq!(record(&db, account, inbox).await.unindexed_from, None);
    let (first_unseen, last_unseen) = db
        .read("raw", move |txn| async move {
            let first = txn.get(&test_keys::unseen(account, inbox, 2)).await?;
            let last = txn.get(&test_keys::unseen(account, inbox, INDEX_AFTER)).await?;
            Ok::<_, StorageError>((first, last))
        })
        .await
        .unwrap();
    // Message i is UID i + 1; every third is seen.
    assert!(first_unseen.is_some() && last_unseen.is_some());
    deliver(&db, account, inbox, INDEX_AFTER..INDEX_AFTER + 1).await;
    assert_eq!(record(&db, account, inbox).await.unindexed_from, Some(INDEX_AFTER + 1));
}

/// A thread spanning two mailboxes, one indexed and one not: its members
/// are the same before and after indexing, each once.
#[tokio::test]
async fn a_thread_lists_its_unindexed_members_in_every_mailbox() {
    let (_dir, db) = store();
    let (account, inbox) = setup(&db).await;
    let archive = db
        .run("archive", move |txn| async move {
            mailboxes::create(&fixture(&txn), account, "Threads", None)
                .await
                .map(|m| m.id)
        })
        .await
        .unwrap();
    // Messages 0..5 are one thread (1..5 reply to 0): three in the
    // archive, indexed by an expunge there; two in the inbox, not indexed.
    deliver(&db, account, archive, 0..3).await;
    db.run("expunge", move |txn| async move {
        messages::expunge(&fixture(&txn), account, archive, 2).await.map(drop)
    })
    .await
    .unwrap();
    deliver(&db, account, inbox, 3..5).await;
    assert_eq!(record(&db, account, archive).await.unindexed_from, None);
    assert_eq!(record(&db, account, inbox).await.unindexed_from, Some(1));
    let members = |db: Database| async move {
        db.read("members", move |txn| async move {
            let t = messages::get_meta(&txn, account, archive, 1)
                .await?
                .unwrap()
                .thread_id
                .unwrap();
            threads::members(&txn, account, &t).await
        })
        .await
        .unwrap()
    };
    let want = vec![(inbox, 1), (inbox, 2), (archive, 1), (archive, 3)];
    let mut sorted = want.clone();
    sorted.sort();
    assert_eq!(members(db.clone()).await, sorted, "before the inbox is indexed");
    db.run("index", move |txn| async move {
        unindexed::index_first(&fixture(&txn), account, inbox).await
    })
    .await
    .unwrap();
    assert_eq!(members(db.clone()).await, sorted, "after");
}
