//! Big operations through a real node, against FoundationDB's limits
//! (5 s and 10 MB per transaction, 100 KB values): a 40 MB message over
//! SMTP and back over IMAP, and one STORE + EXPUNGE of a 30,000-message
//! INBOX. They run on whichever backend the run is on (`.ci/fdb-tests.sh`
//! runs them on FDB). The shared `Txn` enforces FDB's limits on SQLite
//! too, so an operation that would fail on FDB with `transaction_too_old`
//! (1007) or `transaction_too_large` (2101) fails here on both.

mod common;

use bytes::Bytes;
use common::{Node, python_script, setup_account};
use meshmail_storage::StorageError;
use meshmail_storage::blob::{self, BlobConfig, BlobStore};
use meshmail_storage::model::fenced::{AdminWrite, FencedTxn};
use meshmail_storage::model::messages::{self, NewMessage};
use meshmail_storage::model::{accounts, mailboxes, new_id};

const USER: &str = "big@example.org";
const PASSWORD: &str = "big operations secret";
/// Deliveries per fill transaction, as big as the commit batcher's.
const FILL_BATCH: usize = 500;

fn start(dir: &std::path::Path) -> Node {
    Node::start(
        dir,
        &["--allow-plaintext-auth-on-loopback", "--max-message-bytes", "52428800"],
        &[],
    )
}

/// `count` small messages straight into INBOX, as deliveries would leave
/// them (each with its ledger entry and a reference to one shared body),
/// with the node stopped: far faster than SMTP for 30,000.
fn fill_inbox(data_dir: &std::path::Path, count: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = common::open_store(data_dir);
        let blobs = BlobStore::open(
            &BlobConfig::Local {
                dir: data_dir.join("blobs"),
            },
            blob::INLINE_MAX_BYTES_DEFAULT,
        )
        .await
        .unwrap();
        let body = Bytes::from_static(b"From: a@example.net\r\nSubject: one of many\r\n\r\nhello\r\n");
        let prepared = blobs.prepare(&db, body).await.unwrap();
        let (account, inbox) = db
            .read("find", |txn| async move {
                let a = accounts::get(&txn, USER).await?.expect("account");
                let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.expect("INBOX");
                Ok::<_, StorageError>((a.id, inbox.id))
            })
            .await
            .unwrap();
        for _ in 0..count / FILL_BATCH {
            let prepared = prepared.clone();
            db.run("fill", move |txn| {
                let prepared = prepared.clone();
                async move {
                    for _ in 0..FILL_BATCH {
                        blob::reference(&txn, &prepared).await?;
                        let msg = NewMessage {
                            body: prepared.body.clone(),
                            flags: vec![],
                            internal_date_ms: 1_700_000_000_000,
                            summary: Default::default(),
                            acceptance_id: new_id(),
                        };
                        messages::append(&fixture(&txn), account, inbox, &msg).await?;
                    }
                    Ok::<(), StorageError>(())
                }
            })
            .await
            .unwrap();
        }
    });
}

#[test]
fn one_expunge_empties_a_30000_message_inbox() {
    const COUNT: usize = 30_000;
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, PASSWORD);
    fill_inbox(dir.path(), COUNT);
    let node = start(dir.path());
    let (ok, text) = python_script(
        "big_ops.py",
        &["expunge-all", node.addr("imap"), USER, PASSWORD, &COUNT.to_string()],
    );
    assert!(ok, "{text}");
    assert!(text.contains("expunge all: 30000"), "{text}");
}

#[test]
fn a_40_mb_message_goes_in_over_smtp_and_comes_back_whole_over_imap() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, PASSWORD);
    let node = start(dir.path());
    let (ok, text) = python_script(
        "big_ops.py",
        &[
            "big-message",
            node.addr("smtp"),
            node.addr("imap"),
            USER,
            PASSWORD,
            "40",
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("fetched back identical"), "{text}");
}

/// A transaction allowed to write mailboxes, for a store no node serves:
/// the mailbox writes of these tests are admin writes
/// (`AdminWrite::Fixture`), outside any shard's lease.
fn fixture(txn: &meshmail_storage::Txn) -> FencedTxn<'_> {
    FencedTxn::admin(txn, AdminWrite::Fixture)
}
