//! A mailbox of a few hundred messages over real IMAP sockets
//! (`py/big_mailbox.py`, imaplib): SELECT, FETCH FLAGS, SEARCH UNSEEN,
//! STORE, EXPUNGE and MOVE answers checked against a model, in INBOX (rows
//! of today's split form, SEARCH UNSEEN from the unseen index) and in a
//! mailbox whose rows the test rewrites, with the node stopped, into the
//! forms earlier builds wrote (version-1 rows with the summary inside,
//! JSON rows, and split rows whose summary is JSON, summary version 1; no
//! unseen index): those must answer the same (FETCH ENVELOPE and SEARCH
//! SUBJECT included), and the rows a STORE changes must come out split.

mod common;

use common::{Node, setup_account};
use meshmail_storage::model::fenced::{AdminWrite, FencedTxn};
use meshmail_storage::model::messages::{self, EarlierForm, Message};
use meshmail_storage::model::{accounts, mailboxes, message_codec};
use meshmail_storage::{Database, StorageError};

const USER: &str = "big@example.org";
const PASSWORD: &str = "big mailbox secret";
/// Messages per mailbox: a few hundred, so every reader's chunking and
/// the range reads see more than one page of the unseen index.
const MESSAGES: &str = "300";

fn start(dir: &std::path::Path) -> Node {
    Node::start(dir, &["--allow-plaintext-auth-on-loopback"], &[])
}

/// The account and the "Old" mailbox of the test.
async fn old_mailbox(db: &Database) -> (meshmail_storage::ids::AccountId, mailboxes::Mailbox) {
    db.read("find", |txn| async move {
        let a = accounts::get(&txn, USER).await?.expect("account");
        let mb = mailboxes::find(&txn, a.id, "Old").await?.expect("Old");
        Ok::<_, StorageError>((a.id, mb))
    })
    .await
    .unwrap()
}

/// Rewrites every row of "Old" into an earlier build's form (by UID mod 3:
/// a version-1 row, a JSON row, or a split row whose summary is JSON,
/// summary version 1), drops their unseen keys (and, for whole rows,
/// their summaries), and
/// clears the record's `unseen_index`, as a store of the previous build
/// would be. One transaction per 100 rows. Returns the rows rewritten.
fn downgrade_old(data_dir: &std::path::Path) -> usize {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = common::open_store(data_dir);
        let (account, old) = old_mailbox(&db).await;
        let mut from = 1;
        let mut rewritten = 0;
        loop {
            let page: Vec<Message> = db
                .read("page", move |txn| async move {
                    messages::list(&txn, account, old.id, from, 100).await
                })
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            from = last.uid + 1;
            rewritten += page.len();
            db.run("downgrade", move |txn| {
                let page = page.clone();
                async move {
                    for m in &page {
                        let form = match m.uid % 3 {
                            0 => EarlierForm::V1,
                            1 => EarlierForm::Json,
                            _ => EarlierForm::SummaryV1,
                        };
                        assert!(messages::rewrite_in_earlier_form(&txn, account, old.id, m.uid, form).await?);
                    }
                    Ok::<_, StorageError>(())
                }
            })
            .await
            .unwrap();
        }
        db.run("record", move |txn| async move {
            let before = mailboxes::get(&txn, account, old.id).await?.expect("Old");
            let after = mailboxes::Mailbox {
                unseen_index: false,
                ..before.clone()
            };
            // A store no node serves: set up outside any shard's lease.
            mailboxes::put(&FencedTxn::admin(&txn, AdminWrite::Fixture), account, &before, &after)
        })
        .await
        .unwrap();
        rewritten
    })
}

/// How many rows of "Old" are in each form: (split, version 1, JSON).
fn row_forms(data_dir: &std::path::Path) -> (usize, usize, usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = common::open_store(data_dir);
        let (account, old) = old_mailbox(&db).await;
        let top = old.uid_next;
        db.read("forms", move |txn| async move {
            let mut forms = (0, 0, 0);
            for uid in 1..top {
                match messages::stored_form(&txn, account, old.id, uid).await? {
                    Some(message_codec::VERSION_2 | message_codec::VERSION_3 | message_codec::VERSION_4) => {
                        forms.0 += 1
                    }
                    Some(message_codec::VERSION_1) => forms.1 += 1,
                    Some(b'{') => forms.2 += 1,
                    _ => {}
                }
            }
            Ok::<_, StorageError>(forms)
        })
        .await
        .unwrap()
    })
}

#[test]
fn answers_stay_right_through_flags_expunges_moves_and_old_rows() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, PASSWORD);
    let mut node = start(dir.path());
    let (ok, text) = common::python_script("big_mailbox.py", &["fill", node.addr("imap"), USER, PASSWORD, MESSAGES]);
    assert!(ok, "fill failed:\n{text}");
    node.kill();

    assert_eq!(downgrade_old(dir.path()), 300, "every row of Old rewritten");
    let (split, v1, json) = row_forms(dir.path());
    // The split third keeps version-2 hot rows, beside JSON summaries
    // (rows written later are version 4: a new store starts at format 4).
    assert_eq!((split, v1, json), (100, 100, 100), "Old holds only earlier forms");

    let node = start(dir.path());
    let (ok, text) = common::python_script(
        "big_mailbox.py",
        &["check", node.addr("imap"), USER, PASSWORD, MESSAGES],
    );
    assert!(text.contains("big mailbox: ok"), "the check did not finish:\n{text}");
    assert!(ok, "{text}");
    drop(node);

    // The rows the STOREs changed were split on the way; the others kept
    // their earlier form and were read as such all along.
    let (split, v1, json) = row_forms(dir.path());
    assert!(split > 100, "{split} split rows");
    assert!(v1 > 0 && json > 0, "untouched old rows remain: {v1} v1, {json} JSON");
}
