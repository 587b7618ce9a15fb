use super::*;
use crate::kv::Database;
use crate::model::ledger;

fn db(dir: &tempfile::TempDir) -> Database {
    crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap()
}

fn item(shard: u32) -> OutboundItem {
    OutboundItem {
        id: crate::model::new_id(),
        acceptance_id: crate::model::new_id(),
        sender: "a@local.test".into(),
        recipient: "b@remote.test".into(),
        body: BodyRef {
            hash: "00".repeat(32),
            size: 10,
            inline: false,
        },
        queued_ms: 1_000,
        attempts: 0,
        last_error: None,
        shard,
        next_attempt_ms: 0,
        last_attempt_ms: None,
        dsn: DsnParams::default(),
        smtputf8: false,
        eight_bit: false,
        require_tls: false,
        tls_optional: false,
        delay_warned: false,
        claim: None,
        bounce_requested: None,
        dsn_id: None,
    }
}

async fn lease(db: &Database, shard: u32, node: &'static str) -> Fence {
    let l = db
        .run(
            "t",
            |txn| async move { nodes::acquire_lease(&txn, shard, node, 1).await },
        )
        .await
        .unwrap();
    Fence {
        node: node.into(),
        generation: 1,
        epoch: l.epoch,
    }
}

#[tokio::test]
async fn claim_retry_relay_and_fencing() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    let it = item(3);
    let id = it.id;
    db.run("t", |txn| {
        let it = it.clone();
        async move { enqueue(&txn, &it) }
    })
    .await
    .unwrap();
    let due_ids = db
        .read("t", |txn| async move { due(&txn, 3, 1_000, 10).await })
        .await
        .unwrap();
    assert_eq!(due_ids, vec![id]);
    assert!(
        db.read("t", |txn| async move { due(&txn, 3, 999, 10).await })
            .await
            .unwrap()
            .is_empty()
    );

    let a = lease(&db, 3, "a").await;
    let fa = a.clone();
    let got = db
        .run("t", |txn| {
            let fa = fa.clone();
            async move { claim(&txn, &id, &fa, 2_000, 60_000).await }
        })
        .await
        .unwrap()
        .expect("claimed");
    assert_eq!(got.attempts, 1);
    // In flight under the same lease: not claimed twice.
    let fa = a.clone();
    let again = db
        .run("t", |txn| {
            let fa = fa.clone();
            async move { claim(&txn, &id, &fa, 2_001, 60_000).await }
        })
        .await
        .unwrap();
    assert!(again.is_none());
    assert_eq!(
        db.read("t", |txn| async move { claimed(&txn, 3, 10).await })
            .await
            .unwrap(),
        vec![id]
    );

    // A new owner takes the shard: the old one can no longer finish.
    let b = lease(&db, 3, "b").await;
    let fa = a.clone();
    let refused = db
        .run("t", |txn| {
            let fa = fa.clone();
            async move {
                finish(
                    &txn,
                    &id,
                    &fa,
                    &Finish::Relayed {
                        host: "mx".into(),
                        tls: false,
                    },
                )
                .await
            }
        })
        .await;
    assert!(refused.is_err(), "a superseded owner must not commit");
    // The new owner takes the stale claim over at once and retries later.
    let fb = b.clone();
    let got = db
        .run("t", |txn| {
            let fb = fb.clone();
            async move { claim(&txn, &id, &fb, 3_000, 60_000).await }
        })
        .await
        .unwrap()
        .expect("stale claim taken over");
    assert_eq!(got.attempts, 2);
    let fb = b.clone();
    db.run("t", |txn| {
        let fb = fb.clone();
        async move {
            let how = Finish::Retry {
                next_ms: 10_000,
                error: "451 try later".into(),
                delay_warned: false,
            };
            finish(&txn, &id, &fb, &how).await
        }
    })
    .await
    .unwrap();
    assert!(
        db.read("t", |txn| async move { due(&txn, 3, 9_999, 10).await })
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        db.read("t", |txn| async move { claimed(&txn, 3, 10).await })
            .await
            .unwrap()
            .is_empty()
    );
    let fb = b.clone();
    db.run("t", |txn| {
        let fb = fb.clone();
        async move {
            claim(&txn, &id, &fb, 10_000, 70_000).await?.expect("due again");
            finish(
                &txn,
                &id,
                &fb,
                &Finish::Relayed {
                    host: "mx.remote.test".into(),
                    tls: true,
                },
            )
            .await
        }
    })
    .await
    .unwrap();
    let aid = it.acceptance_id;
    let entry = db
        .read("t", |txn| async move { ledger::get(&txn, &aid).await })
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(entry.state, LedgerState::Relayed { tls: true, .. }),
        "{entry:?}"
    );
    assert_eq!(db.read("t", |txn| async move { count(&txn).await }).await.unwrap(), 0);
    assert!(
        db.read("t", |txn| async move { due(&txn, 3, u64::MAX - 1, 10).await })
            .await
            .unwrap()
            .is_empty()
    );
}

#[test]
fn one_message_shares_a_shard() {
    let s = outbound_shard("a@x.test", "abc", 1024);
    assert_eq!(s, outbound_shard("A@X.test", "abc", 1024));
    assert!(s < 1024);
}
