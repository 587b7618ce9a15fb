//! The blob store against S3 (in CI: moto, started by `.ci/s3-emulator.sh`).
//! Runs only when `MESHMAIL_TEST_S3_ENDPOINT` is set; otherwise each test
//! says it was skipped and passes.
//!
//! The bucket outlives a run, so bodies carry a per-run nonce, and the tests
//! take a lock: a sweep with zero grace deletes every body the current KV
//! store does not reference, including those of a test running beside it.

use std::time::Duration;

use bytes::Bytes;
use meshmail_storage::blob::{self, BlobConfig, BlobStore, PreparedBody};
use meshmail_storage::model::{id_to_string, new_id};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;
use meshmail_storage::{Database, StorageError};
use tempfile::TempDir;

/// Upper bound on steps of one test sweep pass.
const SWEEP_STEPS_MAX: usize = 1_000;

static S3_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Env {
    _dir: TempDir,
    db: Database,
    blobs: BlobStore,
    nonce: String,
}

/// None (after saying so) when no S3 endpoint is configured.
async fn env(test: &str) -> Option<Env> {
    let Ok(endpoint) = std::env::var("MESHMAIL_TEST_S3_ENDPOINT") else {
        eprintln!("{test}: skipped: MESHMAIL_TEST_S3_ENDPOINT is not set");
        return None;
    };
    let bucket = std::env::var("MESHMAIL_TEST_S3_BUCKET").unwrap_or_else(|_| "meshmail-test".into());
    let cfg = BlobConfig::S3 {
        endpoint: Some(endpoint),
        bucket,
        region: "us-east-1".into(),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
        allow_http: true,
    };
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    // Threshold 1 KiB: the 4 KiB bodies below go to S3.
    let blobs = BlobStore::open(&cfg, 1024).await.unwrap();
    let nonce = id_to_string(&new_id());
    Some(Env {
        _dir: dir,
        db,
        blobs,
        nonce,
    })
}

impl Env {
    fn body(&self, name: &str, len: usize) -> Bytes {
        let seed = format!("{} {name} ", self.nonce);
        seed.bytes().cycle().take(len).collect()
    }

    async fn reference(&self, prepared: &PreparedBody) -> Result<(), StorageError> {
        self.db
            .run(
                "test_reference",
                |txn| async move { blob::reference(&txn, prepared).await },
            )
            .await
    }

    async fn refs(&self, hash: &str) -> i64 {
        let key = &test_keys::blob_refs(hash);
        self.db
            .read("test_refs", |txn| async move { txn.get_i64(key).await })
            .await
            .unwrap()
    }

    async fn sweep_pass(&self) -> u64 {
        let mut deleted = 0;
        for _ in 0..SWEEP_STEPS_MAX {
            let step = self.blobs.sweep_step(&self.db, Duration::ZERO, 50).await.unwrap();
            deleted += step.deleted;
            if step.finished_pass {
                return deleted;
            }
        }
        panic!("sweep pass did not finish in {SWEEP_STEPS_MAX} steps");
    }
}

#[tokio::test]
async fn s3_bodies_round_trip_and_deduplicate() {
    let _serial = S3_LOCK.lock().await;
    let Some(e) = env("s3_bodies_round_trip_and_deduplicate").await else {
        return;
    };
    let bytes = e.body("large", 4096);
    let first = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
    assert!(!first.body.inline);
    // Same content again: PutMode::Create answers "already exists", fine.
    let second = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
    assert_eq!(first.body, second.body);
    e.reference(&first).await.unwrap();
    e.reference(&second).await.unwrap();
    assert_eq!(e.refs(&first.body.hash).await, 2);
    assert_eq!(e.blobs.get(&e.db, &first.body).await.unwrap(), bytes);

    let small = e.body("small", 200);
    let inline = e.blobs.prepare(&e.db, small.clone()).await.unwrap();
    assert!(inline.body.inline);
    e.reference(&inline).await.unwrap();
    assert_eq!(e.blobs.get(&e.db, &inline.body).await.unwrap(), small);
}

#[tokio::test]
async fn s3_sweep_deletes_only_unreferenced_bodies() {
    let _serial = S3_LOCK.lock().await;
    let Some(e) = env("s3_sweep_deletes_only_unreferenced_bodies").await else {
        return;
    };
    let kept = e.blobs.prepare(&e.db, e.body("kept", 4096)).await.unwrap();
    e.reference(&kept).await.unwrap();
    let orphan = e.blobs.prepare(&e.db, e.body("orphan", 4096)).await.unwrap();
    // Other runs' bodies in the bucket are orphans here too: at least ours.
    assert!(e.sweep_pass().await >= 1);
    let err = e.blobs.get(&e.db, &orphan.body).await.unwrap_err();
    assert!(matches!(err, StorageError::NotFound(_)), "{err:?}");
    assert_eq!(e.blobs.get(&e.db, &kept.body).await.unwrap().len(), 4096);

    // The race: prepared, then swept before the metadata transaction.
    let late = e.blobs.prepare(&e.db, e.body("late", 4096)).await.unwrap();
    e.sweep_pass().await;
    let err = e.reference(&late).await.unwrap_err();
    assert!(blob::is_body_swept(&err), "{err:?}");
    let again = e.blobs.prepare(&e.db, e.body("late", 4096)).await.unwrap();
    assert_eq!(again.generation, late.generation + 1);
    e.reference(&again).await.unwrap();
    assert_eq!(e.blobs.get(&e.db, &again.body).await.unwrap().len(), 4096);

    // Leave the bucket as we found it.
    e.db.run("test_release", |txn| {
        let (kept, again) = (&kept.body, &again.body);
        async move {
            blob::release(&txn, kept)?;
            blob::release(&txn, again)
        }
    })
    .await
    .unwrap();
    assert_eq!(e.sweep_pass().await, 2);
}
