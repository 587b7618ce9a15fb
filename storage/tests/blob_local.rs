//! The blob store on the local filesystem, with the SQLite KV store: round
//! trips, deduplication, corruption detection, the orphan sweep and the race
//! between the sweep and a delivery of the same content.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use meshmail_storage::blob::{self, BlobConfig, BlobStore, PreparedBody, SweepReport};
use meshmail_storage::model::messages::BodyRef;
use meshmail_storage::model::now_ms;
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::test_keys;
use meshmail_storage::{Database, StorageError};
use tempfile::TempDir;

/// Upper bound on steps of one test sweep pass: a pass that does not finish
/// is a bug, not a slow test.
const SWEEP_STEPS_MAX: usize = 1_000;

struct Env {
    _dir: TempDir,
    root: PathBuf,
    db: Database,
    blobs: BlobStore,
}

async fn env_with(inline_max_bytes: usize) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let root = dir.path().join("bodies");
    let cfg = BlobConfig::Local { dir: root.clone() };
    let blobs = BlobStore::open(&cfg, inline_max_bytes).await.unwrap();
    Env {
        _dir: dir,
        root,
        db,
        blobs,
    }
}

async fn env() -> Env {
    env_with(blob::INLINE_MAX_BYTES_DEFAULT).await
}

/// `len` bytes that differ for each `seed`.
fn body(seed: u64, len: usize) -> Bytes {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn large(seed: u64) -> Bytes {
    body(seed, 200 * 1024)
}

async fn reference(db: &Database, prepared: &PreparedBody) -> Result<(), StorageError> {
    db.run(
        "test_reference",
        |txn| async move { blob::reference(&txn, prepared).await },
    )
    .await
}

async fn release(db: &Database, body: &BodyRef) {
    db.run("test_release", |txn| async move { blob::release(&txn, body) })
        .await
        .unwrap();
}

async fn get_key(db: &Database, key: &[u8]) -> Option<Vec<u8>> {
    db.read("test_get", |txn| async move { txn.get(key).await })
        .await
        .unwrap()
}

async fn refs(db: &Database, hash: &str) -> i64 {
    let key = &test_keys::blob_refs(hash);
    db.read("test_refs", |txn| async move { txn.get_i64(key).await })
        .await
        .unwrap()
}

async fn sweep_pass(e: &Env, grace: Duration, max_items: usize) -> SweepReport {
    let mut total = SweepReport::default();
    for _ in 0..SWEEP_STEPS_MAX {
        let step = e.blobs.sweep_step(&e.db, grace, max_items).await.unwrap();
        total.scanned += step.scanned;
        total.deleted += step.deleted;
        total.bytes_freed += step.bytes_freed;
        if step.finished_pass {
            total.finished_pass = true;
            return total;
        }
    }
    panic!("sweep pass did not finish in {SWEEP_STEPS_MAX} steps");
}

fn file_of(root: &Path, hash: &str) -> PathBuf {
    root.join(blob::blob_path(hash))
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { count_files(&p) } else { 1 })
        .sum()
}

#[tokio::test]
async fn large_and_inline_bodies_round_trip() {
    let e = env().await;
    let big = large(1);
    let prepared = e.blobs.prepare(&e.db, big.clone()).await.unwrap();
    assert!(!prepared.body.inline);
    assert_eq!(prepared.body.size, big.len() as u64);
    assert_eq!(prepared.body.hash, blob::content_hash(&big));
    assert!(file_of(&e.root, &prepared.body.hash).is_file());
    reference(&e.db, &prepared).await.unwrap();
    assert_eq!(e.blobs.get(&e.db, &prepared.body).await.unwrap(), big);

    let small = body(2, 1000);
    let prepared = e.blobs.prepare(&e.db, small.clone()).await.unwrap();
    assert!(prepared.body.inline);
    assert!(!file_of(&e.root, &prepared.body.hash).exists());
    reference(&e.db, &prepared).await.unwrap();
    assert_eq!(e.blobs.get(&e.db, &prepared.body).await.unwrap(), small);
    assert_eq!(count_files(&e.root), 1);
}

#[tokio::test]
async fn same_content_is_stored_once_and_counted_twice() {
    let e = env().await;
    for bytes in [large(3), body(4, 500)] {
        let first = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
        let second = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
        assert_eq!(first.body, second.body);
        reference(&e.db, &first).await.unwrap();
        reference(&e.db, &second).await.unwrap();
        assert_eq!(refs(&e.db, &first.body.hash).await, 2);
    }
    assert_eq!(count_files(&e.root), 1);
}

#[tokio::test]
async fn corruption_is_detected() {
    let e = env().await;
    let prepared = e.blobs.prepare(&e.db, large(5)).await.unwrap();
    reference(&e.db, &prepared).await.unwrap();
    let path = file_of(&e.root, &prepared.body.hash);
    // Same length, one flipped byte; then a truncated file.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[1000] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = e.blobs.get(&e.db, &prepared.body).await.unwrap_err();
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");
    std::fs::write(&path, &bytes[..10]).unwrap();
    let err = e.blobs.get(&e.db, &prepared.body).await.unwrap_err();
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");

    let inline = e.blobs.prepare(&e.db, body(6, 100)).await.unwrap();
    reference(&e.db, &inline).await.unwrap();
    let key = &test_keys::blob_inline(&inline.body.hash);
    e.db.run("test_corrupt", |txn| async move { txn.set(key, b"not the body") })
        .await
        .unwrap();
    let err = e.blobs.get(&e.db, &inline.body).await.unwrap_err();
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");

    let bad = BodyRef {
        hash: "../../etc/passwd".into(),
        size: 1,
        inline: false,
    };
    let err = e.blobs.get(&e.db, &bad).await.unwrap_err();
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");
}

/// `get_many` (FETCH's read of a run of bodies): inline and object bodies
/// interleaved come back in order, inline ones past one read's byte bound
/// included, and a missing or corrupt body fails in its own place only.
#[tokio::test]
async fn many_bodies_are_read_in_order_each_failure_in_its_place() {
    let e = env().await;
    let mut bodies = Vec::new();
    let mut want = Vec::new();
    // 70 inline bodies of 80 KB: more than one read's INLINE_READ_BYTES_MAX.
    for seed in 0..70u64 {
        let bytes = if seed % 10 == 3 {
            large(100 + seed)
        } else {
            body(100 + seed, 80_000)
        };
        let prepared = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
        reference(&e.db, &prepared).await.unwrap();
        bodies.push(prepared.body);
        want.push(bytes);
    }
    const { assert!(70 * 80_000 > blob::INLINE_READ_BYTES_MAX) };
    let got = e.blobs.get_many(&e.db, &bodies).await.unwrap();
    assert_eq!(got.len(), bodies.len());
    for (i, (g, w)) in got.into_iter().zip(&want).enumerate() {
        assert_eq!(&g.unwrap(), w, "body {i}");
    }

    // Prepared but never referenced: an inline body has no bytes stored.
    let missing = e.blobs.prepare(&e.db, body(900, 100)).await.unwrap().body;
    let corrupt = &bodies[3];
    let path = file_of(&e.root, &corrupt.hash);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[7] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let asked = vec![
        bodies[0].clone(),
        missing,
        bodies[1].clone(),
        corrupt.clone(),
        bodies[13].clone(),
    ];
    let got = e.blobs.get_many(&e.db, &asked).await.unwrap();
    assert_eq!(got[0].as_ref().unwrap(), &want[0]);
    assert!(matches!(got[1], Err(StorageError::NotFound(_))), "{:?}", got[1]);
    assert_eq!(got[2].as_ref().unwrap(), &want[1]);
    assert!(matches!(got[3], Err(StorageError::Corrupt { .. })), "{:?}", got[3]);
    assert_eq!(got[4].as_ref().unwrap(), &want[13]);
}

/// `get_prefixes` (a FETCH of headers only): each body's first bytes, in
/// order, for objects and for inline bodies small (in the key's row) and
/// large (in SQLite's heap, read through a blob handle); a length past the
/// end gives the whole body. An object is read only that far (a byte
/// changed past the prefix is not seen, a whole read still sees it); a
/// truncated object is an error.
#[tokio::test]
async fn prefixes_read_only_the_asked_bytes_of_objects() {
    let e = env().await;
    let object = e.blobs.prepare(&e.db, large(40)).await.unwrap();
    let inline = e.blobs.prepare(&e.db, body(41, 300)).await.unwrap();
    let heap = e.blobs.prepare(&e.db, body(42, 20_000)).await.unwrap();
    for p in [&object, &inline, &heap] {
        reference(&e.db, p).await.unwrap();
    }
    let (object, inline, heap) = (object.body, inline.body, heap.body);
    assert!(!object.inline && inline.inline && heap.inline);
    let bodies = vec![
        object.clone(),
        inline.clone(),
        heap.clone(),
        heap.clone(),
        object.clone(),
    ];
    let lens = [100, 20, 9_000, 30_000, 1 << 30];
    let got = e.blobs.get_prefixes(&e.db, &bodies, &lens).await.unwrap();
    assert_eq!(got[0].as_ref().unwrap(), &large(40).slice(..100));
    assert_eq!(got[1].as_ref().unwrap(), &body(41, 300).slice(..20));
    assert_eq!(got[2].as_ref().unwrap(), &body(42, 20_000).slice(..9_000));
    assert_eq!(
        got[3].as_ref().unwrap(),
        &body(42, 20_000),
        "a length past the end is all of it"
    );
    assert_eq!(got[4].as_ref().unwrap(), &large(40));

    // A byte changed after the prefix: the prefix still reads, a whole
    // read of the same body is refused.
    let path = file_of(&e.root, &object.hash);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5000] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let got = e
        .blobs
        .get_prefixes(&e.db, std::slice::from_ref(&object), &[100])
        .await
        .unwrap();
    assert_eq!(got[0].as_ref().unwrap(), &large(40).slice(..100));
    let whole = e.blobs.get_many(&e.db, std::slice::from_ref(&object)).await.unwrap();
    assert!(matches!(whole[0], Err(StorageError::Corrupt { .. })), "{:?}", whole[0]);

    // Cut short before the prefix ends.
    std::fs::write(&path, &bytes[..50]).unwrap();
    let got = e.blobs.get_prefixes(&e.db, &[object], &[100]).await.unwrap();
    assert!(got[0].is_err(), "a short object gave {:?}", got[0]);
}

#[tokio::test]
async fn sweep_deletes_only_unreferenced_bodies_past_grace() {
    let e = env().await;
    let kept = e.blobs.prepare(&e.db, large(7)).await.unwrap();
    reference(&e.db, &kept).await.unwrap();
    let orphan = e.blobs.prepare(&e.db, large(8)).await.unwrap();
    let kept_inline = e.blobs.prepare(&e.db, body(9, 300)).await.unwrap();
    reference(&e.db, &kept_inline).await.unwrap();
    let released_inline = e.blobs.prepare(&e.db, body(10, 400)).await.unwrap();
    reference(&e.db, &released_inline).await.unwrap();
    release(&e.db, &released_inline.body).await;

    // Within the grace period the orphan object stays; a released inline
    // body has no upload in flight to protect and goes at once.
    let report = sweep_pass(&e, Duration::from_secs(3600), 100).await;
    assert_eq!(report.deleted, 1);
    assert!(file_of(&e.root, &orphan.body.hash).is_file());
    let inline_key = test_keys::blob_inline(&released_inline.body.hash);
    assert_eq!(get_key(&e.db, &inline_key).await, None);

    let report = sweep_pass(&e, Duration::ZERO, 100).await;
    assert_eq!(report.deleted, 1);
    assert_eq!(report.bytes_freed, orphan.body.size);
    assert!(!file_of(&e.root, &orphan.body.hash).exists());
    assert!(file_of(&e.root, &kept.body.hash).is_file());
    assert_eq!(e.blobs.get(&e.db, &kept.body).await.unwrap().len(), 200 * 1024);
    assert_eq!(e.blobs.get(&e.db, &kept_inline.body).await.unwrap().len(), 300);

    // Once released, the kept body goes too.
    release(&e.db, &kept.body).await;
    let report = sweep_pass(&e, Duration::ZERO, 100).await;
    assert_eq!(report.deleted, 1);
    assert_eq!(count_files(&e.root), 0);
    assert_eq!(refs(&e.db, &kept.body.hash).await, 0);
}

#[tokio::test]
async fn sweep_steps_are_bounded_and_resume() {
    // Threshold 16: every 100-byte body goes to the object store.
    let e = env_with(16).await;
    let mut kept = Vec::new();
    let mut orphans = Vec::new();
    for seed in 0..40 {
        let prepared = e.blobs.prepare(&e.db, body(100 + seed, 100)).await.unwrap();
        if seed % 2 == 0 {
            reference(&e.db, &prepared).await.unwrap();
            kept.push(prepared.body);
        } else {
            orphans.push(prepared.body);
        }
    }
    let mut steps = 0;
    let mut deleted = 0;
    loop {
        let step = e.blobs.sweep_step(&e.db, Duration::ZERO, 3).await.unwrap();
        assert!(step.scanned <= 6, "3 objects + 3 inline entries at most: {step:?}");
        deleted += step.deleted;
        steps += 1;
        if step.finished_pass {
            break;
        }
        assert!(steps < SWEEP_STEPS_MAX);
    }
    assert!(steps >= 40 / 3, "a bounded step cannot cover 40 objects: {steps} steps");
    assert_eq!(deleted, 20);
    for b in &orphans {
        assert!(!file_of(&e.root, &b.hash).exists());
    }
    for b in &kept {
        assert_eq!(e.blobs.get(&e.db, b).await.unwrap().len(), 100);
    }
    // The next pass starts over and finds nothing left to delete.
    assert_eq!(sweep_pass(&e, Duration::ZERO, 7).await.deleted, 0);
}

#[tokio::test]
async fn a_body_swept_after_prepare_must_be_prepared_again() {
    let e = env().await;
    let bytes = large(11);
    // Step A and the PUT happen; the metadata transaction is slow...
    let prepared = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
    assert_eq!(prepared.generation, 0);
    // ...and meanwhile the sweep finds the body unreferenced and deletes it.
    let report = sweep_pass(&e, Duration::ZERO, 100).await;
    assert_eq!(report.deleted, 1);
    assert!(!file_of(&e.root, &prepared.body.hash).exists());

    let err = reference(&e.db, &prepared).await.unwrap_err();
    assert!(blob::is_body_swept(&err), "{err:?}");
    assert_eq!(refs(&e.db, &prepared.body.hash).await, 0);

    let again = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
    assert_eq!(again.generation, 1);
    reference(&e.db, &again).await.unwrap();
    assert_eq!(e.blobs.get(&e.db, &again.body).await.unwrap(), bytes);
    assert_eq!(sweep_pass(&e, Duration::ZERO, 100).await.deleted, 0);
}

fn marker(at_ms: u64) -> Vec<u8> {
    [at_ms.to_le_bytes(), 7u64.to_le_bytes()].concat()
}

#[tokio::test]
async fn prepare_waits_while_a_delete_is_in_progress() {
    let e = env().await;
    let bytes = large(12);
    let hash = blob::content_hash(&bytes);
    let deleting = test_keys::blob_deleting(&hash);
    let value = marker(now_ms());
    let (key, value) = (&deleting, &value);
    e.db.run("test_mark", |txn| async move { txn.set(key, value) })
        .await
        .unwrap();
    let db = e.db.clone();
    let clearer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let key = &deleting;
        db.run("test_unmark", |txn| async move { txn.clear(key) })
            .await
            .unwrap();
    });
    let started = Instant::now();
    let prepared = e.blobs.prepare(&e.db, bytes).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(file_of(&e.root, &prepared.body.hash).is_file());
    clearer.await.unwrap();
}

#[tokio::test]
async fn a_stale_delete_is_taken_over() {
    let e = env().await;
    let prepared = e.blobs.prepare(&e.db, large(13)).await.unwrap();
    let hash = &prepared.body.hash;
    // A sweeper claimed the body an hour ago and died before deleting it.
    let (key, value) = (&test_keys::blob_deleting(hash), &marker(now_ms() - 3_600_000));
    e.db.run("test_stale", |txn| async move { txn.set(key, value) })
        .await
        .unwrap();
    e.blobs.sweep_step(&e.db, Duration::from_secs(3600), 10).await.unwrap();
    assert_eq!(get_key(&e.db, key).await, None);
    assert!(!file_of(&e.root, hash).exists());
    let again = e.blobs.prepare(&e.db, large(13)).await.unwrap();
    assert_eq!(again.generation, 1);
}

#[test]
fn config_parses_and_hides_the_secret() {
    let cfg: BlobConfig = serde_json::from_str(
        r#"{"kind": "s3", "bucket": "b", "region": "us-east-1",
            "access_key_id": "id", "secret_access_key": "hunter2"}"#,
    )
    .unwrap();
    let shown = format!("{cfg:?}");
    assert!(shown.contains("<redacted>") && !shown.contains("hunter2"), "{shown}");
    let cfg: BlobConfig = serde_json::from_str(r#"{"kind": "local", "dir": "/x"}"#).unwrap();
    assert!(matches!(cfg, BlobConfig::Local { .. }));
    assert!(serde_json::from_str::<BlobConfig>(r#"{"kind": "ftp"}"#).is_err());
}

/// Deliveries of a few bodies race a sweeper with zero grace, on several
/// threads: every interleaving of the module's protocol comes up (refs > 0,
/// waiting on the deleting marker, a generation that moved). Whatever the
/// interleaving, a body whose reference committed must be readable until it
/// is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deliveries_racing_the_sweep_never_lose_a_body() {
    const DELIVERERS: u64 = 3;
    const ROUNDS: u64 = 60;
    let e = Arc::new(env_with(16).await);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sweeper = {
        let (e, stop) = (e.clone(), stop.clone());
        tokio::spawn(async move {
            let mut deleted = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                deleted += e.blobs.sweep_step(&e.db, Duration::ZERO, 4).await.unwrap().deleted;
            }
            deleted
        })
    };
    let mut deliverers = Vec::new();
    for d in 0..DELIVERERS {
        let e = e.clone();
        deliverers.push(tokio::spawn(async move {
            let mut swept = 0;
            for round in 0..ROUNDS {
                let bytes = body(1000 + (d + round) % 2, 100);
                let prepared = loop {
                    let prepared = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
                    match reference(&e.db, &prepared).await {
                        Ok(()) => break prepared,
                        Err(err) if blob::is_body_swept(&err) => swept += 1,
                        Err(err) => panic!("reference: {err:?}"),
                    }
                };
                tokio::task::yield_now().await;
                let got = e.blobs.get(&e.db, &prepared.body).await;
                assert_eq!(got.unwrap(), bytes, "round {round} of deliverer {d}");
                release(&e.db, &prepared.body).await;
            }
            swept
        }));
    }
    let mut swept = 0;
    for d in deliverers {
        swept += d.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let deleted = sweeper.await.unwrap();
    eprintln!("sweeper deleted {deleted} bodies; deliveries re-prepared {swept} times");
    assert!(deleted > 0, "the sweep never raced a delivery");
}

#[tokio::test]
async fn an_empty_store_sweeps_in_one_step() {
    let e = env().await;
    let step = e.blobs.sweep_step(&e.db, Duration::ZERO, 10).await.unwrap();
    assert_eq!(
        step,
        SweepReport {
            finished_pass: true,
            ..SweepReport::default()
        }
    );
}

/// Inline bodies are prepared without a transaction: the inline sweep and a
/// reference of the same content must still never leave a message pointing
/// at swept bytes. A reference that read the old inline entry conflicts
/// with the sweep that cleared it; its retry stores the bytes again.
#[tokio::test]
async fn an_inline_reference_racing_the_inline_sweep_stores_the_bytes_again() {
    let e = env().await;
    let bytes = body(21, 500);
    let first = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
    assert!(first.body.inline);
    assert_eq!(first.generation, blob::INLINE_GENERATION);
    reference(&e.db, &first).await.unwrap();
    release(&e.db, &first.body).await;
    let again = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();

    // The delivery's transaction reads the (still present) inline entry...
    let txn = e.db.begin(false).await.unwrap();
    blob::reference(&txn, &again).await.unwrap();
    // ...the sweep clears it meanwhile...
    assert_eq!(sweep_pass(&e, Duration::ZERO, 100).await.deleted, 1);
    let inline_key = test_keys::blob_inline(&again.body.hash);
    assert_eq!(get_key(&e.db, &inline_key).await, None);
    // ...so the delivery must not commit as it is.
    let err = txn.commit().await.unwrap_err();
    assert!(matches!(err, StorageError::Conflict), "{err:?}");
    // Its retry finds no entry and writes the bytes with the reference.
    reference(&e.db, &again).await.unwrap();
    assert_eq!(refs(&e.db, &again.body.hash).await, 1);
    assert_eq!(e.blobs.get(&e.db, &again.body).await.unwrap(), bytes);
}

/// Stores written before inline bodies moved beside their counts keep them at
/// `("binl", hash)`: such a body is read, shared by a new delivery of the
/// same content (not written again), swept once unreferenced, and a new
/// body sits behind its count, one key after it.
#[tokio::test]
async fn inline_bodies_of_the_older_layout_are_read_shared_and_swept() {
    let e = env().await;
    let old = e.blobs.prepare(&e.db, body(40, 500)).await.unwrap();
    let (hash, bytes) = (&old.body.hash, old.inline_bytes.clone().unwrap());
    let (v1_key, refs_key) = (&test_keys::blob_inline_v1(hash), &test_keys::blob_refs(hash));
    // What an earlier build's `reference` wrote.
    e.db.run("test_v1_body", |txn| {
        let bytes = bytes.clone();
        async move {
            txn.set(v1_key, &bytes)?;
            txn.add_i64(refs_key, 1)
        }
    })
    .await
    .unwrap();
    assert_eq!(e.blobs.get(&e.db, &old.body).await.unwrap(), bytes);

    let again = e.blobs.prepare(&e.db, bytes.clone()).await.unwrap();
    reference(&e.db, &again).await.unwrap();
    assert_eq!(refs(&e.db, hash).await, 2);
    assert_eq!(
        get_key(&e.db, &test_keys::blob_inline(hash)).await,
        None,
        "written twice"
    );

    let new = e.blobs.prepare(&e.db, body(41, 500)).await.unwrap();
    reference(&e.db, &new).await.unwrap();
    let new_key = test_keys::blob_inline(&new.body.hash);
    assert!(
        new_key.starts_with(&test_keys::blob_refs(&new.body.hash)),
        "not beside its count"
    );
    assert_eq!(e.blobs.get(&e.db, &new.body).await.unwrap().len(), 500);

    let report = sweep_pass(&e, Duration::ZERO, 100).await;
    assert_eq!(report.deleted, 0);
    release(&e.db, &old.body).await;
    release(&e.db, &again.body).await;
    release(&e.db, &new.body).await;
    let report = sweep_pass(&e, Duration::ZERO, 100).await;
    assert_eq!(report.deleted, 2);
    assert_eq!(report.bytes_freed, 1_000);
    for key in [v1_key, refs_key, &new_key, &test_keys::blob_refs(&new.body.hash)] {
        assert_eq!(get_key(&e.db, key).await, None);
    }
}
