//! Mailbox counters moved behind the mailbox record (`("mbox", a, m,
//! kind)`); counters of stores written before stay under `("cnt", ...)`
//! and are summed, never moved. The walks over `("mbox", ...)` must skip
//! the counters.

mod common;
use common::fixture;

use meshmail_storage::StorageError;
use meshmail_storage::model::mailboxes::{self, Counts};
use meshmail_storage::model::messages::{self, BodyRef, NewMessage};
use meshmail_storage::model::summary::Summary;
use meshmail_storage::model::{accounts, compaction, domains, new_id, quota};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;

#[tokio::test]
async fn counts_of_an_older_store_and_new_deliveries_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox, mailbox_count) = db
        .run("setup", |txn| async move {
            domains::add(&txn, "example.org").await?;
            let a = accounts::add(&txn, "c@example.org", "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
            // What an older build left: 5 messages, 500 bytes, counted
            // under ("cnt", ...).
            for (kind, n) in [("messages", 5), ("unseen", 5), ("bytes", 500)] {
                txn.add_i64(&test_keys::counter(a.id, inbox.id, kind), n)?;
            }
            let n = mailboxes::list(&txn, a.id).await?.len();
            Ok::<_, StorageError>((a.id, inbox.id, n))
        })
        .await
        .unwrap();
    db.run("append", move |txn| async move {
        for _ in 0..2 {
            let msg = NewMessage {
                body: BodyRef {
                    hash: "cd".repeat(32),
                    size: 10,
                    inline: true,
                },
                flags: vec![],
                internal_date_ms: 1_700_000_000_000,
                summary: Summary::default(),
                acceptance_id: new_id(),
            };
            messages::append(&fixture(&txn), account, inbox, &msg).await?;
        }
        // Three of the old messages expunged: negative adds on the new key.
        mailboxes::add_counts(
            &fixture(&txn),
            account,
            inbox,
            Counts {
                messages: -3,
                unseen: -3,
                bytes: -300,
            },
        )
    })
    .await
    .unwrap();
    let (counts, usage, listed, page) = db
        .read("check", move |txn| async move {
            let counts = mailboxes::counts(&txn, account, inbox).await?;
            let usage = quota::usage(&txn, account).await?;
            let listed = mailboxes::list(&txn, account).await?.len();
            let page = compaction::mailbox_page(&txn, 1000).await?;
            Ok::<_, StorageError>((counts, usage, listed, page))
        })
        .await
        .unwrap();
    assert_eq!(
        (counts.messages, counts.unseen, counts.bytes),
        (4, 4, 220),
        "5 old + 2 new - 3 expunged"
    );
    assert_eq!((usage.messages, usage.bytes), (4, 220));
    assert_eq!(listed, mailbox_count, "the counters are not mailboxes");
    assert_eq!(
        page.mailboxes.len(),
        mailbox_count,
        "the compactor's walk skips counters"
    );
}
