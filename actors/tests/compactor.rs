//! The compactor trims change logs of owned shards only, records the floor,
//! sweeps orphan blobs, and resumes from its cursor.

use std::time::Duration;

use bytes::Bytes;
use meshmail_actors::compactor::{CompactorConfig, step};
use meshmail_actors::node::{NodeCtx, NodeIdentity};
use meshmail_storage::blob::{BlobConfig, BlobStore};
use meshmail_storage::model::fenced::{AdminWrite, FencedTxn};
use meshmail_storage::model::messages::{BodyRef, NewMessage};
use meshmail_storage::model::{accounts, domains, mailboxes, messages, new_id};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::{Database, StorageError};

async fn setup(dir: &std::path::Path) -> (Database, BlobStore, i64, i64) {
    let db = open_kv(&KvConfig::for_tests(dir)).unwrap();
    let blobs = BlobStore::open(&BlobConfig::Local { dir: dir.join("blobs") }, 0)
        .await
        .unwrap();
    let (account, inbox) = db
        .run("setup", |txn| async move {
            domains::add(&txn, "example.org").await?;
            let a = accounts::add(&txn, "dan@example.org", "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
            for _ in 0..50 {
                let msg = NewMessage {
                    body: BodyRef {
                        hash: "00".repeat(32),
                        size: 1,
                        inline: true,
                    },
                    flags: vec![],
                    internal_date_ms: 0,
                    summary: Default::default(),
                    acceptance_id: new_id(),
                };
                messages::append(&fixture(&txn), a.id, inbox.id, &msg).await?;
            }
            Ok::<_, StorageError>((a.id, inbox.id))
        })
        .await
        .unwrap();
    (db, blobs, account, inbox)
}

async fn changes(db: &Database, account: i64, mailbox: i64) -> usize {
    db.read("t", move |txn| async move {
        Ok::<_, StorageError>(messages::changes_since(&txn, account, mailbox, 0, 1000).await?.len())
    })
    .await
    .unwrap()
}

fn config() -> CompactorConfig {
    CompactorConfig {
        change_log_window: 10,
        blob_grace: Duration::ZERO,
        ..CompactorConfig::default()
    }
}

#[tokio::test]
async fn trims_owned_change_logs_and_sweeps_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let (db, blobs, account, inbox) = setup(dir.path()).await;
    assert_eq!(changes(&db, account, inbox).await, 50);

    // A node that owns no shard leaves the log alone.
    let idle = NodeCtx::new(
        db.clone(),
        blobs.clone(),
        NodeIdentity {
            name: "n1".into(),
            generation: 1,
        },
        16,
        1,
    );
    let r = step(&idle, &config()).await.unwrap();
    assert_eq!(r.changes_trimmed_mailboxes, 0);
    assert_eq!(changes(&db, account, inbox).await, 50);

    // An orphan body (prepared, never referenced).
    let orphan = blobs
        .prepare(&db, Bytes::from_static(b"nobody references me"))
        .await
        .unwrap();
    let ctx = NodeCtx::new(
        db.clone(),
        blobs.clone(),
        NodeIdentity {
            name: "n2".into(),
            generation: 1,
        },
        16,
        1,
    );
    ctx.acquire_all_leases().await.unwrap();
    let mut trimmed = 0;
    let mut deleted = 0;
    // Bounded steps: walk until the pass covered every mailbox.
    for _ in 0..3 {
        let r = step(&ctx, &config()).await.unwrap();
        trimmed += r.changes_trimmed_mailboxes;
        deleted += r.blobs_deleted;
    }
    assert_eq!(trimmed, 1, "INBOX (highest modseq 51) is trimmed once");
    assert_eq!(changes(&db, account, inbox).await, 10, "the newest 10 changes stay");
    let floor = db
        .read("t", move |txn| async move {
            messages::change_floor(&txn, account, inbox).await
        })
        .await
        .unwrap();
    assert_eq!(floor, 41);
    assert_eq!(deleted, 1, "the orphan body was swept");
    assert!(blobs.get(&db, &orphan.body).await.is_err());
}

/// A transaction allowed to write mailboxes, for a store no node serves:
/// the mailbox writes of these tests are admin writes
/// (`AdminWrite::Fixture`), outside any shard's lease.
fn fixture(txn: &meshmail_storage::Txn) -> FencedTxn<'_> {
    FencedTxn::admin(txn, AdminWrite::Fixture)
}
