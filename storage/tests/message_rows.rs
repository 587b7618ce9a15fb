//! Message rows in a store written by an earlier build (JSON rows) still
//! read after the switch to the binary form, through every reader (get,
//! list), and are rewritten in the new form when they change.

use std::sync::Arc;

use meshmail_storage::kv::sqlite::{SqliteBackend, SqliteOptions};
use meshmail_storage::model::message_codec;
use meshmail_storage::model::messages::{self, BodyRef, FlagOp, Message, NewMessage};
use meshmail_storage::model::{accounts, domains, mailboxes, new_id};
use meshmail_storage::test_keys;
use meshmail_storage::{Database, StorageError};

#[tokio::test]
async fn an_old_json_store_still_reads_and_rows_move_to_the_binary_form() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::new(Arc::new(
        SqliteBackend::open(SqliteOptions::new(dir.path().join("m.sqlite"))).unwrap(),
    ));
    let (account, inbox) = db
        .run("setup", |txn| async move {
            domains::add(&txn, "example.org").await?;
            let a = accounts::add(&txn, "old@example.org", "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
            Ok::<_, StorageError>((a.id, inbox.id))
        })
        .await
        .unwrap();
    let envelope = serde_json::json!({"subject": "from the old days", "message_id": "<a@b>"});
    let structure = serde_json::json!({"structure": {"media_type": "text", "subtype": "plain"}});
    // Two messages appended by today's code...
    let (env, st) = (envelope.clone(), structure.clone());
    db.run("append", move |txn| {
        let (env, st) = (env.clone(), st.clone());
        async move {
            for _ in 0..2 {
                let msg = NewMessage {
                    body: BodyRef {
                        hash: "ab".repeat(32),
                        size: 10,
                        inline: true,
                    },
                    flags: vec![],
                    internal_date_ms: 1_700_000_000_000,
                    envelope: env.clone(),
                    body_structure: st.clone(),
                    acceptance_id: new_id(),
                };
                messages::append(&txn, account, inbox, &msg).await?;
            }
            Ok::<(), StorageError>(())
        }
    })
    .await
    .unwrap();
    let key1 = test_keys::message(account, inbox, 1);
    let raw = |db: &Database, key: Vec<u8>| {
        let db = db.clone();
        async move {
            db.read("raw", move |txn| {
                let key = key.clone();
                async move { txn.get(&key).await }
            })
            .await
            .unwrap()
            .unwrap()
        }
    };
    let fresh = raw(&db, key1.clone()).await;
    assert_eq!(fresh[0], message_codec::VERSION_1, "new rows are binary");
    // ...then row 1 turned back into the JSON an earlier build wrote.
    let current: Message = message_codec::decode(&fresh).unwrap();
    let json = serde_json::to_vec(&current).unwrap();
    assert_eq!(json[0], b'{');
    let (k, j) = (key1.clone(), json.clone());
    db.run("downgrade", move |txn| {
        let (k, j) = (k.clone(), j.clone());
        async move { txn.set(&k, &j) }
    })
    .await
    .unwrap();

    let (one, all) = db
        .read("read", move |txn| async move {
            let one = messages::get(&txn, account, inbox, 1).await?;
            let all = messages::list(&txn, account, inbox, 1, 10).await?;
            Ok::<_, StorageError>((one, all))
        })
        .await
        .unwrap();
    assert_eq!(one.as_ref(), Some(&current));
    assert_eq!(all.len(), 2);
    assert_eq!(all[0], current);
    assert_eq!(all[0].envelope, envelope);
    assert_eq!(all[1].body_structure, structure);

    // A flag change rewrites the old row in the binary form.
    db.run("flag", move |txn| async move {
        messages::store_flags(&txn, account, inbox, 1, FlagOp::Add, &["\\Seen".to_string()], None).await
    })
    .await
    .unwrap();
    let rewritten = raw(&db, key1).await;
    assert_eq!(rewritten[0], message_codec::VERSION_1);
    assert!(rewritten.len() < json.len());
    let back = message_codec::decode(&rewritten).unwrap();
    assert_eq!(back.flags, vec!["\\Seen".to_string()]);
    assert_eq!(back.envelope, envelope);
}
