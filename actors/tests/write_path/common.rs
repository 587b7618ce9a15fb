//! A node of this process on a temporary store: an account with its INBOX,
//! the leases of every shard, the supervision tree running; and what the
//! tests read back (messages in a mailbox, ledger states, batch sizes).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use meshmail_actors::batcher::{BatcherMsg, Pending};
use meshmail_actors::delivery::{DeliveryError, DeliveryRequest, Outcome, deadline_in};
use meshmail_actors::node::{self, NodeCtx, NodeIdentity};
use meshmail_storage::blob::{BlobConfig, BlobStore, PreparedBody};
use meshmail_storage::ids::{AccountId, MailboxId};
use meshmail_storage::model::ledger::{self, LedgerState};
use meshmail_storage::model::{accounts, domains, mailboxes, new_id};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::{Database, StorageError};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// Shards of the test nodes: few, so every account's shard is cheap to
/// lease; the code paths are those of 1,024.
pub const SHARDS: u32 = 4;

/// A store shared by the nodes of one test, with one account.
pub struct Store {
    /// Removed with the store.
    _dir: tempfile::TempDir,
    pub db: Database,
    pub blobs: BlobStore,
    pub account: AccountId,
    pub inbox: MailboxId,
}

/// A store whose bodies up to `inline_max_bytes` are kept in the KV store.
pub async fn store(inline_max_bytes: usize) -> Store {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let blobs = BlobStore::open(
        &BlobConfig::Local {
            dir: dir.path().join("blobs"),
        },
        inline_max_bytes,
    )
    .await
    .unwrap();
    let (account, inbox) = db
        .run("setup", |txn| async move {
            domains::add(&txn, "example.test").await?;
            let a = accounts::add(&txn, "dan@example.test", "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.expect("INBOX");
            Ok::<_, StorageError>((a.id, inbox.id))
        })
        .await
        .unwrap();
    Store {
        _dir: dir,
        db,
        blobs,
        account,
        inbox,
    }
}

/// A node `name#generation` on `store`, its actors started; with every
/// shard's lease when `owner` (the only node, or the one others route to).
pub async fn node(store: &Store, name: &str, generation: u64, owner: bool) -> Arc<NodeCtx> {
    let identity = NodeIdentity {
        name: name.into(),
        generation,
    };
    let ctx = NodeCtx::new(store.db.clone(), store.blobs.clone(), identity, SHARDS, 1);
    if owner {
        ctx.acquire_all_leases().await.unwrap();
    }
    // The supervisor lives as long as the test's runtime.
    node::start(ctx.clone()).await.unwrap();
    ctx
}

/// A delivery of `body` to the store's INBOX whose sender waits `patience`.
pub async fn request(store: &Store, body: &[u8], patience: Duration) -> DeliveryRequest {
    let body = store
        .blobs
        .prepare(&store.db, Bytes::copy_from_slice(body))
        .await
        .unwrap();
    request_with(store, body, patience)
}

/// [`request`] of a body already prepared (shared by many deliveries).
pub fn request_with(store: &Store, body: PreparedBody, patience: Duration) -> DeliveryRequest {
    DeliveryRequest {
        acceptance_id: new_id(),
        account: store.account,
        recipient: "dan@example.test".into(),
        mailbox: "INBOX".into(),
        body,
        flags: Vec::new(),
        internal_date_ms: 0,
        summary: Default::default(),
        fault: None,
        from_quarantine: None,
        deadline: deadline_in(patience),
    }
}

/// Queues `reqs` for the account's batcher and kicks it once, so that it
/// takes them together (within its limits); the answers, in order.
pub async fn commit_together(ctx: &NodeCtx, reqs: Vec<DeliveryRequest>) -> Vec<Result<Outcome, DeliveryError>> {
    let shard = ctx.shard_of(reqs[0].account);
    let idx = ctx.batcher_index(shard);
    let mut kick = false;
    let mut answers = Vec::with_capacity(reqs.len());
    for req in reqs {
        let (tx, rx) = tokio::sync::oneshot::channel();
        kick |= ctx.queues[idx].push(Pending {
            req,
            shard,
            enqueued: Instant::now(),
            reply: tx.into(),
        });
        answers.push(rx);
    }
    assert!(kick, "the first push asks for a Kick");
    ctx.batcher(idx).expect("batcher").cast(BatcherMsg::Kick).unwrap();
    let mut out = Vec::with_capacity(answers.len());
    for rx in answers {
        let answer = tokio::time::timeout(Duration::from_secs(60), rx).await;
        out.push(answer.expect("answered in time").expect("answered"));
    }
    out
}

/// How many messages the mailbox counts.
pub async fn messages_in(db: &Database, account: AccountId, mailbox: MailboxId) -> i64 {
    db.read("test_count", move |txn| async move {
        Ok::<_, StorageError>(mailboxes::counts(&txn, account, mailbox).await?.messages)
    })
    .await
    .unwrap()
}

/// The ledger state of an acceptance (`None`: never recorded).
pub async fn ledger_state(db: &Database, id: [u8; 16]) -> Option<LedgerState> {
    db.read("test_ledger", move |txn| async move {
        Ok::<_, StorageError>(ledger::get(&txn, &id).await?.map(|e| e.state))
    })
    .await
    .unwrap()
}

/// The UID a delivery got (panics on any other answer).
pub fn uid_of(answer: &Result<Outcome, DeliveryError>) -> u32 {
    match answer {
        Ok(Outcome::Delivered { uid, .. }) => *uid,
        other => panic!("expected a delivery, got {other:?}"),
    }
}

/// Runs `test` on a runtime of this thread with a metrics recorder of its
/// own (so tests running beside it do not count), and returns what it
/// returned with the size of every batch the batchers committed, in order:
/// one `meshmail_batch_deliveries` sample per batch transaction.
pub fn with_batch_sizes<F: Future>(test: impl FnOnce() -> F) -> (F::Output, Vec<usize>) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let out = metrics::with_local_recorder(&recorder, || {
        // Current-thread: every actor task runs here, under the recorder.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(test())
    });
    let sizes = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "meshmail_batch_deliveries")
        .flat_map(|(.., value)| match value {
            DebugValue::Histogram(samples) => samples.into_iter().map(|s| s.into_inner() as usize).collect(),
            _ => Vec::new(),
        })
        .collect();
    (out, sizes)
}
