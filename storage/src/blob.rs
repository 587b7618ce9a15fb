//! The blob store for message bodies: content-addressed (hex SHA-256), written
//! to an object store (local filesystem or S3) before the metadata
//! transaction that references it, reference-counted in the KV store, and
//! small bodies inlined in the KV store instead.
//!
//! # Protocol
//!
//! A delivery calls [`BlobStore::prepare`] and then, inside its metadata
//! transaction, [`reference()`]; an expunge calls [`release`]; one node now and
//! then calls [`BlobStore::sweep_step`], which deletes bodies nobody
//! references. Keys (see `keyspace.rs`): `bref` (reference count),
//! `bgen` (generation, bumped before every delete), `bdel` (present while a
//! delete is in progress), `("bref", hash, "inline")` (inline bytes, beside
//! the count; `binl` in stores written before).
//!
//! * **prepare, step A**: wait while `bdel` exists, read `bgen` → g.
//!   **step B**: PUT the object (`PutMode::Create`; "already exists" is fine:
//!   same name, same bytes).
//! * **reference** (in the caller's transaction): fail with [`BODY_SWEPT`]
//!   unless `bgen` still equals g; store inline bytes; `bref += 1`.
//! * **sweep**: txn1 reads `bref` ≤ 0 and no `bdel`, sets `bdel`, bumps
//!   `bgen`; then the object is deleted; txn2 clears `bdel` and `bref`.
//!
//! Why each step is needed, by interleaving of a delivery and the sweep of the
//! same content:
//!
//! 1. The delivery's metadata transaction commits before sweep txn1: txn1
//!    reads `bref` > 0 and skips the body. (If they overlap, the serializable
//!    store makes one of them retry: txn1 read `bref`, `reference` wrote it.)
//! 2. Sweep txn1 commits before step A: step A sees `bdel` and waits until
//!    txn2 clears it, so its PUT happens after the delete and re-creates the
//!    object. Without the marker the PUT could land ("already exists") just
//!    before the delete and the message would point at nothing.
//! 3. Step A runs before sweep txn1 and the metadata transaction after it:
//!    the PUT may have found the doomed object and done nothing, so the body
//!    may be gone. `bgen` has moved on, `reference` fails, and the caller must
//!    call `prepare` again (which waits for the delete, then re-PUTs). This is
//!    why `BODY_SWEPT` is not a retryable error: retrying the transaction
//!    alone would fail forever. Because generations only grow, `bgen` is never
//!    cleared (one small key per body ever swept), or an old g could match.
//!
//! None of the three cases depends on clocks: the grace period only spares
//! fresh uploads the round trip of case 3. Inline bodies need no marker:
//! their bytes travel in the referencing transaction itself, and the inline
//! sweep reads `bref` and clears `binl` in one transaction. The sweep's first
//! read of `bref` (outside txn1) only saves transactions; txn1 decides.
//!
//! A sweeper that dies between txn1 and txn2 leaves `bdel` behind, and
//! deliveries of that content would wait forever. A marker older than
//! [`DELETING_MARKER_STALE_MS`] is therefore taken over (claimed with a fresh
//! marker) and its delete finished. That relies on one timing assumption: a
//! delete issued by the dead sweeper does not reach the store 15 minutes
//! later; each delete is cut off after [`DELETE_DEADLINE`] to keep it true.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, RetryConfig};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{Database, Txn};
use crate::model::messages::BodyRef;

/// Bodies up to this size are inlined in the KV store by default: one fewer
/// fsync (or S3 round trip) per delivery, paid in mutation bytes instead.
pub const INLINE_MAX_BYTES_DEFAULT: usize = 64 * 1024;
/// Inline threshold ceiling: one KV value holds at most 100 KB (FDB's limit).
pub const INLINE_MAX_BYTES_CAP: usize = 90_000;
/// The message of the error [`reference()`] returns when the body was swept
/// after `prepare`: the caller must call [`BlobStore::prepare`] again.
pub const BODY_SWEPT: &str = "body was swept; prepare again";
/// How long `prepare` waits for an in-progress delete of the same content.
pub const DELETING_WAIT_MAX: Duration = Duration::from_secs(10);
const ROOT: &str = "blobs";

mod sweep;
pub use sweep::{DELETE_DEADLINE, DELETING_MARKER_STALE_MS, SWEEP_ITEMS_PER_STEP_MAX, SweepReport};

/// Where bodies go: `kind = "local"` or `kind = "s3"`.
#[derive(Clone, Deserialize)]
#[serde(tag = "kind")]
pub enum BlobConfig {
    #[serde(rename = "local")]
    Local { dir: PathBuf },
    #[serde(rename = "s3")]
    S3 {
        /// None: AWS itself; Some for MinIO, Garage, moto...
        endpoint: Option<String>,
        bucket: String,
        region: String,
        /// None: the instance's credentials (IMDS).
        access_key_id: Option<String>,
        secret_access_key: Option<String>,
        #[serde(default)]
        allow_http: bool,
    },
}

impl fmt::Debug for BlobConfig {
    // By hand, so that the secret key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlobConfig::Local { dir } => f.debug_struct("Local").field("dir", dir).finish(),
            BlobConfig::S3 {
                endpoint,
                bucket,
                region,
                access_key_id,
                secret_access_key,
                allow_http,
            } => f
                .debug_struct("S3")
                .field("endpoint", endpoint)
                .field("bucket", bucket)
                .field("region", region)
                .field("access_key_id", access_key_id)
                .field("secret_access_key", &secret_access_key.as_ref().map(|_| "<redacted>"))
                .field("allow_http", allow_http)
                .finish(),
        }
    }
}

/// The `generation` of an inline [`PreparedBody`]: never compared (see
/// [`reference()`]), the object protocol's steps do not apply to it.
pub const INLINE_GENERATION: i64 = -1;

/// A body written (or, when inline, held) and ready to be referenced.
#[derive(Debug, Clone)]
pub struct PreparedBody {
    pub body: BodyRef,
    /// `bgen` as read before the PUT; [`reference()`] checks it is unchanged
    /// ([`INLINE_GENERATION`] for an inline body: not checked).
    pub generation: i64,
    /// The bytes, when the body is to be stored inline by [`reference()`].
    pub inline_bytes: Option<Bytes>,
}

/// The content-addressed body store. Cheap to clone.
#[derive(Clone)]
pub struct BlobStore {
    store: Arc<dyn ObjectStore>,
    inline_max_bytes: usize,
}

impl fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobStore")
            .field("store", &self.store.to_string())
            .field("inline_max_bytes", &self.inline_max_bytes)
            .finish()
    }
}

impl BlobStore {
    /// Opens the configured store. `inline_max_bytes` is capped at
    /// [`INLINE_MAX_BYTES_CAP`]; 0 disables inlining (except empty bodies).
    pub async fn open(cfg: &BlobConfig, inline_max_bytes: usize) -> Result<BlobStore> {
        let store: Arc<dyn ObjectStore> = match cfg {
            BlobConfig::Local { dir } => {
                tokio::fs::create_dir_all(dir).await?;
                // fsync on: without it a committed message can reference a
                // body that a power cut loses (the default is off). Each put
                // then costs a file and a directory fsync, which is why small
                // bodies go inline instead. Empty directories are kept: at
                // most 65,536 of them, and no race with concurrent puts.
                let fs = LocalFileSystem::new_with_prefix(dir)
                    .map_err(store_err)?
                    .with_fsync(true)
                    .with_automatic_cleanup(false);
                Arc::new(fs)
            }
            BlobConfig::S3 {
                endpoint,
                bucket,
                region,
                access_key_id,
                secret_access_key,
                allow_http,
            } => {
                let client = ClientOptions::new()
                    .with_allow_http(*allow_http)
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(60));
                let retry = RetryConfig {
                    backoff: Default::default(),
                    max_retries: 5,
                    retry_timeout: Duration::from_secs(60),
                };
                let mut builder = AmazonS3Builder::new()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_client_options(client)
                    .with_retry(retry);
                if let Some(endpoint) = endpoint {
                    builder = builder.with_endpoint(endpoint);
                }
                if let Some(key) = access_key_id {
                    builder = builder.with_access_key_id(key);
                }
                if let Some(secret) = secret_access_key {
                    builder = builder.with_secret_access_key(secret);
                }
                Arc::new(builder.build().map_err(store_err)?)
            }
        };
        Ok(BlobStore::from_store(store, inline_max_bytes))
    }

    /// Wraps any object store (tests use this with in-memory stores).
    pub fn from_store(store: Arc<dyn ObjectStore>, inline_max_bytes: usize) -> BlobStore {
        BlobStore {
            store,
            inline_max_bytes: inline_max_bytes.min(INLINE_MAX_BYTES_CAP),
        }
    }

    pub fn inline_max_bytes(&self) -> usize {
        self.inline_max_bytes
    }

    /// Makes a body ready to be referenced: waits out an in-progress delete of
    /// the same content, reads its generation, then writes it to the object
    /// store (or keeps it for inlining). Call before the metadata transaction.
    pub async fn prepare(&self, db: &Database, bytes: Bytes) -> Result<PreparedBody> {
        let inline = bytes.len() <= self.inline_max_bytes;
        self.prepare_placed(db, bytes, inline).await
    }

    /// Like [`BlobStore::prepare`], but always writes an object: for a body
    /// that another node will reference (bodies never cross the mesh, so an
    /// inline body, which travels in the referencing transaction, cannot be
    /// used there).
    pub async fn prepare_object(&self, db: &Database, bytes: Bytes) -> Result<PreparedBody> {
        self.prepare_placed(db, bytes, false).await
    }

    async fn prepare_placed(&self, db: &Database, bytes: Bytes, inline: bool) -> Result<PreparedBody> {
        let started = Instant::now();
        let hash = content_hash(&bytes);
        // An inline body travels in the referencing transaction itself, and
        // the inline sweep decides in one transaction that conflicts with
        // it: no marker to wait for, no generation to compare, so no read
        // transaction of its own (one fewer per delivery).
        let generation = if inline {
            INLINE_GENERATION
        } else {
            wait_until_not_deleting(db, &hash).await?
        };
        if !inline {
            let put = self
                .store
                .put_opts(
                    &object_path(&hash),
                    bytes.clone().into(),
                    PutOptions::from(PutMode::Create),
                )
                .await;
            match put {
                Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(store_err(e)),
            }
        }
        let place = if inline { "inline" } else { "object" };
        metrics::histogram!("meshmail_blob_put_seconds", "place" => place).record(started.elapsed().as_secs_f64());
        metrics::counter!("meshmail_blob_put_bytes_total", "place" => place).increment(bytes.len() as u64);
        Ok(PreparedBody {
            body: BodyRef {
                hash,
                size: bytes.len() as u64,
                inline,
            },
            generation,
            inline_bytes: inline.then_some(bytes),
        })
    }

    /// Reads a body and checks it against its hash.
    pub async fn get(&self, db: &Database, body: &BodyRef) -> Result<Bytes> {
        check_hash(&body.hash)?;
        let started = Instant::now();
        let bytes = if body.inline {
            let hash = &body.hash;
            let value = db
                .read("blob_get_inline", |txn| async move { inline_bytes(&txn, hash).await })
                .await?;
            Bytes::from(value.ok_or_else(|| StorageError::NotFound(format!("inline body {}", body.hash)))?)
        } else {
            self.get_object(&body.hash).await?
        };
        verified(body, bytes, started)
    }

    /// Reads several bodies, in order, each checked against its hash. A
    /// FETCH of every header of a 2,000-message folder read its bodies one
    /// transaction each; here the inline bodies share read transactions of
    /// up to [`INLINE_READ_BYTES_MAX`] (their reads issued together, which
    /// on FoundationDB overlaps the round trips), and objects are read
    /// [`OBJECT_READS_IN_FLIGHT`] at a time. Err when the store cannot be
    /// read; each body's own failure (missing, corrupt) in its place.
    pub async fn get_many(&self, db: &Database, bodies: &[BodyRef]) -> Result<Vec<Result<Bytes>>> {
        self.read_many(db, bodies, None).await
    }

    /// The first `lens[i]` bytes of each body, as [`BlobStore::get_many`]
    /// reads whole ones: what a FETCH of headers only needs (a folder's
    /// `BODY.PEEK[HEADER]` read and hashed every byte of every body: 3.2×
    /// Dovecot's time on 2,000 messages of 10 KB, SHA-256 the first cost).
    /// An object gives just that range, which cannot be checked against
    /// the hash of the whole body; only its length is checked. An inline
    /// body is read the same way (`Txn::get_prefix`: on SQLite only the
    /// pages of the prefix, on FoundationDB the value whole and cut), its
    /// stored length checked but not its hash: reading and hashing every
    /// byte to show a tenth of them was the cost. `meshmail verify` and
    /// every whole read still check the hash.
    pub async fn get_prefixes(&self, db: &Database, bodies: &[BodyRef], lens: &[u64]) -> Result<Vec<Result<Bytes>>> {
        assert_eq!(bodies.len(), lens.len(), "one length per body");
        metrics::counter!("meshmail_blob_prefix_reads_total").increment(bodies.len() as u64);
        self.read_many(db, bodies, Some(lens)).await
    }

    async fn read_many(&self, db: &Database, bodies: &[BodyRef], lens: Option<&[u64]>) -> Result<Vec<Result<Bytes>>> {
        let started = Instant::now();
        let mut out: Vec<Option<Result<Bytes>>> = bodies.iter().map(|_| None).collect();
        let inline: Vec<usize> = (0..bodies.len()).filter(|&i| bodies[i].inline).collect();
        for group in inline_groups(bodies, &inline) {
            let asked: Arc<Vec<(String, Option<usize>)>> = Arc::new(
                group
                    .iter()
                    .map(|&i| (bodies[i].hash.clone(), lens.map(|l| l[i] as usize)))
                    .collect(),
            );
            let values = db
                .read("blob_get_inline_many", |txn| {
                    let asked = asked.clone();
                    async move {
                        let mut reads = Vec::with_capacity(asked.len());
                        for (hash, len) in asked.iter() {
                            reads.push(inline_read(&txn, hash, *len));
                        }
                        futures::future::try_join_all(reads).await
                    }
                })
                .await?;
            for (&i, value) in group.iter().zip(values) {
                out[i] = Some(match value {
                    Some((v, whole)) if lens.is_some() => sized(&bodies[i], whole).map(|()| Bytes::from(v)),
                    Some((v, _)) => verified(&bodies[i], Bytes::from(v), started),
                    None => Err(StorageError::NotFound(format!("inline body {}", bodies[i].hash))),
                });
            }
        }
        let objects: Vec<usize> = (0..bodies.len()).filter(|&i| !bodies[i].inline).collect();
        for run in objects.chunks(OBJECT_READS_IN_FLIGHT) {
            let mut reads = Vec::with_capacity(run.len());
            for &i in run {
                reads.push(self.get_object_part(&bodies[i], lens.map(|l| l[i]), started));
            }
            for (&i, got) in run.iter().zip(futures::future::join_all(reads).await) {
                out[i] = Some(got);
            }
        }
        Ok(out.into_iter().map(|o| o.expect("every body read")).collect())
    }

    async fn get_object_checked(&self, body: &BodyRef, started: Instant) -> Result<Bytes> {
        check_hash(&body.hash)?;
        verified(body, self.get_object(&body.hash).await?, started)
    }

    /// The whole object, checked, or its first `len` bytes when that is
    /// less than all of it (see [`BlobStore::get_prefixes`]).
    async fn get_object_part(&self, body: &BodyRef, len: Option<u64>, started: Instant) -> Result<Bytes> {
        let Some(len) = len.filter(|&l| l < body.size) else {
            return self.get_object_checked(body, started).await;
        };
        check_hash(&body.hash)?;
        let end = usize::try_from(len).map_err(|_| StorageError::Corrupt {
            what: format!("body {}", body.hash),
            detail: format!("prefix of {len} bytes"),
        })?;
        let bytes = self
            .store
            .get_range(&object_path(&body.hash), 0..end as u64)
            .await
            .map_err(store_err)?;
        if bytes.len() != end {
            return Err(StorageError::Corrupt {
                what: format!("body {}", body.hash),
                detail: format!("read {} bytes of a {len}-byte prefix", bytes.len()),
            });
        }
        metrics::histogram!("meshmail_blob_get_seconds").record(started.elapsed().as_secs_f64());
        Ok(bytes)
    }

    /// An object's bytes, unchecked (callers check the hash).
    pub(crate) async fn get_object(&self, hash: &str) -> Result<Bytes> {
        let got = self.store.get(&object_path(hash)).await.map_err(store_err)?;
        got.bytes().await.map_err(store_err)
    }

    /// Writes an object whose bytes the caller has checked against `hash`
    /// (restore of a backup): an existing one is the same bytes.
    pub(crate) async fn put_object(&self, hash: &str, bytes: Bytes) -> Result<()> {
        check_hash(hash)?;
        let put = self
            .store
            .put_opts(&object_path(hash), bytes.into(), PutOptions::from(PutMode::Create))
            .await;
        match put {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(store_err(e)),
        }
    }

    /// Every object under the bodies' root with its size, in no set order
    /// (backups: the whole listing is wanted, not a resumable walk).
    pub(crate) fn list_objects(&self) -> impl futures::Stream<Item = Result<(String, u64)>> + '_ {
        use futures::StreamExt;
        self.store
            .list(Some(&ObjectPath::from(ROOT)))
            .filter_map(|item| async move {
                match item {
                    Ok(meta) => {
                        let name = meta.location.filename().unwrap_or_default().to_string();
                        is_hash(&name).then_some(Ok((name, meta.size)))
                    }
                    Err(e) => Some(Err(store_err(e))),
                }
            })
    }
}

/// Bytes of inline bodies read in one transaction by [`BlobStore::get_many`]
/// (well inside FDB's 5 s at its read rates; FETCH reads at most 500 rows).
pub const INLINE_READ_BYTES_MAX: u64 = 4 << 20;
/// Object reads of [`BlobStore::get_many`] in flight at once.
pub const OBJECT_READS_IN_FLIGHT: usize = 8;

/// `inline` (indexes into `bodies`) cut into runs of at most
/// [`INLINE_READ_BYTES_MAX`] bytes, one body at least per run.
fn inline_groups(bodies: &[BodyRef], inline: &[usize]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0u64;
    for &i in inline {
        let size = bodies[i].size;
        match groups.last_mut() {
            Some(g) if bytes + size <= INLINE_READ_BYTES_MAX => g.push(i),
            _ => {
                groups.push(vec![i]);
                bytes = 0;
            }
        }
        bytes += size;
    }
    groups
}

/// `bytes` if they are the body `body` names (hash and size), else
/// `Corrupt`; the read's time goes to `meshmail_blob_get_seconds`.
/// A body read for a prefix only: its whole length checked, not its hash
/// (see [`BlobStore::get_prefixes`]).
fn sized(body: &BodyRef, whole: usize) -> Result<()> {
    if whole as u64 != body.size {
        return Err(StorageError::Corrupt {
            what: format!("body {}", body.hash),
            detail: format!("stored {whole} bytes, expected {}", body.size),
        });
    }
    Ok(())
}

fn verified(body: &BodyRef, bytes: Bytes, started: Instant) -> Result<Bytes> {
    let actual = content_hash(&bytes);
    if actual != body.hash || bytes.len() as u64 != body.size {
        return Err(StorageError::Corrupt {
            what: format!("body {}", body.hash),
            detail: format!(
                "read {} bytes hashing to {actual}, expected {} bytes",
                bytes.len(),
                body.size
            ),
        });
    }
    metrics::histogram!("meshmail_blob_get_seconds").record(started.elapsed().as_secs_f64());
    Ok(bytes)
}

/// Inside the caller's metadata transaction: takes one reference to a
/// prepared body. Fails with `StorageError::Blob(BODY_SWEPT)` (see
/// [`is_body_swept`]) when the orphan sweep deleted the body after `prepare`
/// read its generation: the caller must call [`BlobStore::prepare`] again
/// and rerun its transaction; retrying the transaction alone cannot succeed.
pub async fn reference(txn: &Txn, prepared: &PreparedBody) -> Result<()> {
    let hash = &prepared.body.hash;
    debug_assert_eq!(prepared.body.inline, prepared.inline_bytes.is_some());
    if prepared.inline_bytes.is_none() && txn.get_i64(&keyspace::blob_generation(hash)).await? != prepared.generation {
        return Err(StorageError::Blob(BODY_SWEPT.to_string()));
    }
    if let Some(bytes) = &prepared.inline_bytes {
        // Content-addressed: present means same bytes. Reading first keeps a
        // batch of deliveries of one body from writing it once per recipient
        // against the 10 MB transaction limit.
        if inline_bytes(txn, hash).await?.is_none() {
            txn.set(&keyspace::blob_inline(hash), bytes)?;
        }
    }
    txn.add_i64(&keyspace::blob_refs(hash), 1)
}

/// Inside the caller's transaction: a [`PreparedBody`] for a body that is
/// already referenced (a quarantine item keeps one), to [`reference()`] it
/// again: its generation as of now and, when stored inline, its bytes. A
/// held reference keeps the sweep away, so no `prepare` is needed.
pub async fn prepared_from_stored(txn: &Txn, hash: &str, size: u64) -> Result<PreparedBody> {
    let generation = txn.get_i64(&keyspace::blob_generation(hash)).await?;
    let inline = inline_bytes(txn, hash).await?;
    Ok(PreparedBody {
        body: BodyRef {
            hash: hash.to_string(),
            size,
            inline: inline.is_some(),
        },
        generation,
        inline_bytes: inline.map(Into::into),
    })
}

/// The bytes of an inline body: beside its reference count, or where stores
/// written before that keep them (`("binl", hash)`: never moved, swept in
/// place once unreferenced).
/// An inline body (`len`: its first `len` bytes only) and its whole length.
async fn inline_read(txn: &Txn, hash: &str, len: Option<usize>) -> Result<Option<(Vec<u8>, usize)>> {
    let Some(len) = len else {
        return Ok(inline_bytes(txn, hash).await?.map(|v| {
            let whole = v.len();
            (v, whole)
        }));
    };
    match txn.get_prefix(&keyspace::blob_inline(hash), len).await? {
        Some(found) => Ok(Some(found)),
        None => txn.get_prefix(&keyspace::blob_inline_v1(hash), len).await,
    }
}

async fn inline_bytes(txn: &Txn, hash: &str) -> Result<Option<Vec<u8>>> {
    match txn.get(&keyspace::blob_inline(hash)).await? {
        Some(bytes) => Ok(Some(bytes)),
        None => txn.get(&keyspace::blob_inline_v1(hash)).await,
    }
}

/// Inside the caller's transaction: drops one reference (an expunge). The
/// body itself goes at the next sweep pass that finds no reference.
pub fn release(txn: &Txn, body: &BodyRef) -> Result<()> {
    txn.add_i64(&keyspace::blob_refs(&body.hash), -1)
}

/// True for the error of [`reference()`] that asks for a new `prepare`.
pub fn is_body_swept(err: &StorageError) -> bool {
    matches!(err, StorageError::Blob(msg) if msg == BODY_SWEPT)
}

/// Hex SHA-256 of a body: its name in the store.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `blobs/<h[0..2]>/<h[2..4]>/<h>`: two levels of 256 directories keep any
/// one directory small.
pub fn blob_path(hash: &str) -> String {
    format!("{ROOT}/{}/{}/{hash}", &hash[0..2], &hash[2..4])
}

fn object_path(hash: &str) -> ObjectPath {
    ObjectPath::from(blob_path(hash))
}

fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_hash(hash: &str) -> Result<()> {
    if is_hash(hash) {
        return Ok(());
    }
    Err(StorageError::Corrupt {
        what: "body reference".into(),
        detail: format!("not a SHA-256 hex digest: {hash:?}"),
    })
}

/// Step A of `prepare`: waits (bounded) until no delete of `hash` is in
/// progress, and returns its generation.
async fn wait_until_not_deleting(db: &Database, hash: &str) -> Result<i64> {
    let (deleting, generation) = (&keyspace::blob_deleting(hash), &keyspace::blob_generation(hash));
    let deadline = Instant::now() + DELETING_WAIT_MAX;
    let mut backoff = Duration::from_millis(5);
    loop {
        let (busy, generation) = db
            .read("blob_prepare", |txn| async move {
                Ok::<_, StorageError>((txn.get(deleting).await?.is_some(), txn.get_i64(generation).await?))
            })
            .await?;
        if !busy {
            return Ok(generation);
        }
        if Instant::now() + backoff > deadline {
            return Err(StorageError::Unavailable(format!(
                "body {hash} is being deleted by the orphan sweep"
            )));
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

fn store_err(e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { path, .. } => StorageError::NotFound(format!("blob {path}")),
        e => crate::error::unwritable_io(&e, "blob store").unwrap_or_else(|| StorageError::Blob(e.to_string())),
    }
}

/// Inside the caller's transaction: one more reference to a body that is
/// already referenced (IMAP COPY shares the body of an existing message).
pub fn add_reference(txn: &Txn, body: &BodyRef) -> Result<()> {
    txn.add_i64(&keyspace::blob_refs(&body.hash), 1)
}
