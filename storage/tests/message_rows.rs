//! Message rows in a store written by earlier builds (JSON rows,
//! version-1 binary rows holding their summary, and split rows whose
//! summary is version-1 JSON) still read after the move to binary
//! summaries (summary version 2), through every reader (get, list,
//! get_many, the envelope-only and hot-only readers), and whole rows are
//! split when they change.

mod common;
use common::fixture;

use meshmail_storage::model::messages::{self, BodyRef, FlagOp, Message, NewMessage};
use meshmail_storage::model::summary::{BodyPart, Envelope, HeaderText, Summary};
use meshmail_storage::model::{accounts, domains, mailboxes, new_id};
use meshmail_storage::model::{message_codec, summary_codec};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;
use meshmail_storage::{Database, StorageError};

#[tokio::test]
async fn an_old_json_store_still_reads_and_rows_move_to_the_binary_form() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox) = db
        .run("setup", |txn| async move {
            domains::add(&txn, "example.org").await?;
            let a = accounts::add(&txn, "old@example.org", "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
            Ok::<_, StorageError>((a.id, inbox.id))
        })
        .await
        .unwrap();
    let envelope = Envelope {
        subject: Some(HeaderText {
            raw: "from the old days".into(),
            decoded: "from the old days".into(),
        }),
        message_id: Some("<a@b>".into()),
        ..Envelope::default()
    };
    let summary = Summary {
        envelope: envelope.clone(),
        structure: BodyPart {
            media_type: "text".into(),
            subtype: "plain".into(),
            ..BodyPart::default()
        },
        ..Summary::default()
    };
    // Three messages appended by today's code...
    let sum = summary.clone();
    db.run("append", move |txn| {
        let sum = sum.clone();
        async move {
            for _ in 0..3 {
                let msg = NewMessage {
                    body: BodyRef {
                        hash: "ab".repeat(32),
                        size: 10,
                        inline: true,
                    },
                    flags: vec![],
                    internal_date_ms: 1_700_000_000_000,
                    summary: sum.clone(),
                    acceptance_id: new_id(),
                };
                messages::append(&fixture(&txn), account, inbox, &msg).await?;
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
    assert_eq!(fresh[0], message_codec::VERSION_2, "new rows are split");
    let summary1 = raw(&db, test_keys::message_summary(account, inbox, 1)).await;
    assert_eq!(summary1[0], summary_codec::SUMMARY_VERSION_2);
    let (current1, current3) = db
        .read("whole", move |txn| async move {
            let one = messages::get(&txn, account, inbox, 1).await?;
            Ok::<_, StorageError>((one.unwrap(), messages::get(&txn, account, inbox, 3).await?.unwrap()))
        })
        .await
        .unwrap();
    // The second message as an earlier build would have stored it: no
    // acceptance id (a copy), no thread.
    let current2 = Message {
        uid: 2,
        modseq: current1.modseq + 1,
        acceptance_id: None,
        thread_id: None,
        ..current1.clone()
    };
    // Row 1 turned back into the JSON of the first builds, row 2 into the
    // version-1 row of a later build (summary inside, no `msum`), and row
    // 3's summary (its hot row kept) into the JSON of the build before
    // this one (summary version 1).
    let json = message_codec::encode_json(&current1).unwrap();
    assert_eq!(json[0], b'{');
    let v1 = message_codec::encode_v1(&current2).unwrap();
    assert_eq!(v1[0], message_codec::VERSION_1);
    let json_summary = summary_codec::encode_v1(&summary).unwrap();
    assert_eq!(json_summary[0], summary_codec::SUMMARY_VERSION_1);
    let (k1, j, k2, v, s1, s2) = (
        key1.clone(),
        json.clone(),
        test_keys::message(account, inbox, 2),
        v1.clone(),
        test_keys::message_summary(account, inbox, 1),
        test_keys::message_summary(account, inbox, 2),
    );
    let (s3, js) = (test_keys::message_summary(account, inbox, 3), json_summary.clone());
    db.run("downgrade", move |txn| {
        let (k1, j, k2, v, s1, s2) = (k1.clone(), j.clone(), k2.clone(), v.clone(), s1.clone(), s2.clone());
        let (s3, js) = (s3.clone(), js.clone());
        async move {
            txn.set(&k1, &j)?;
            txn.set(&k2, &v)?;
            txn.set(&s3, &js)?;
            txn.clear(&s1)?;
            txn.clear(&s2)
        }
    })
    .await
    .unwrap();

    let (one, all, many, metas, hot, envelopes) = db
        .read("read", move |txn| async move {
            let one = messages::get(&txn, account, inbox, 1).await?;
            let all = messages::list(&txn, account, inbox, 1, 10).await?;
            let many = messages::get_many(&txn, account, inbox, &[3, 2, 1, 7]).await?;
            let metas = messages::get_meta_many(&txn, account, inbox, &[1, 2, 3]).await?;
            let hot = messages::list_meta(&txn, account, inbox, 1, None, 10).await?;
            let envelopes = messages::get_envelopes_many(&txn, account, inbox, &[3, 1, 2, 9]).await?;
            Ok::<_, StorageError>((one, all, many, metas, hot, envelopes))
        })
        .await
        .unwrap();
    assert_eq!(one.as_ref(), Some(&current1));
    assert_eq!(all, vec![current1.clone(), current2.clone(), current3.clone()]);
    assert_eq!(many, all, "in UID order, the missing UID skipped");
    assert_eq!(metas, vec![current1.meta(), current2.meta(), current3.meta()]);
    assert_eq!(hot, metas);
    assert!(
        all.iter().all(|m| m.summary == summary),
        "every form reads the same summary"
    );
    let want: Vec<(messages::MessageMeta, Envelope)> = metas.iter().map(|m| (m.clone(), envelope.clone())).collect();
    assert_eq!(envelopes, want, "envelopes of every form, in UID order");

    // A flag change splits both old rows: hot row + summary.
    let stored = db
        .run("flag", move |txn| async move {
            messages::store_flags_many(
                &fixture(&txn),
                account,
                inbox,
                &[1, 2],
                FlagOp::Add,
                &["\\Seen".to_string()],
                None,
            )
            .await
        })
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    for (uid, key, old) in [
        (1, key1.clone(), json.len()),
        (2, test_keys::message(account, inbox, 2), v1.len()),
    ] {
        let rewritten = raw(&db, key).await;
        assert_eq!(rewritten[0], message_codec::VERSION_2, "uid {uid} split");
        assert!(rewritten.len() < old);
        let back = db
            .read("back", move |txn| async move {
                messages::get(&txn, account, inbox, uid).await
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back.flags, vec!["\\Seen".to_string()]);
        assert_eq!(back.summary, summary);
    }
    let counts = db
        .read("counts", move |txn| async move {
            mailboxes::counts(&txn, account, inbox).await
        })
        .await
        .unwrap();
    assert_eq!(counts.unseen, 1, "1 and 2 seen now, 3 still unseen");

    // EXPUNGE takes the summary with the hot row.
    db.run("expunge", move |txn| async move {
        messages::expunge(&fixture(&txn), account, inbox, 2).await?;
        Ok::<_, StorageError>(())
    })
    .await
    .unwrap();
    let left = db
        .read("left", move |txn| async move {
            let s = txn.get(&test_keys::message_summary(account, inbox, 2)).await?;
            let m = txn.get(&test_keys::message(account, inbox, 2)).await?;
            Ok::<_, StorageError>((s, m))
        })
        .await
        .unwrap();
    assert_eq!(left, (None, None));
}
