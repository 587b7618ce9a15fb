//! The orphan sweep: bounded, resumable steps that delete bodies nobody
//! references, by the protocol described in the parent module.

use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStoreExt};

use super::{BlobStore, ROOT, blob_path, is_hash, object_path, store_err};
use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{Database, RangeOptions, key_after, prefix_range};
use crate::model::now_ms;

/// Longest one object delete may take before the sweep gives up on it (and
/// leaves its marker to be taken over once stale).
pub const DELETE_DEADLINE: Duration = Duration::from_secs(60);
/// A `bdel` marker older than this belongs to a dead sweeper.
pub const DELETING_MARKER_STALE_MS: u64 = 15 * 60 * 1000;
/// `max_items` of a sweep step is clamped to this.
pub const SWEEP_ITEMS_PER_STEP_MAX: usize = 10_000;
/// Leaf directories listed per step (empty ones stay on the local store).
const SWEEP_LEAVES_PER_STEP_MAX: usize = 256;
/// Inline entries read per step: each value is up to 90 KB.
const SWEEP_INLINE_PER_STEP_MAX: usize = 128;
/// Deleting markers examined per step for staleness.
const SWEEP_MARKERS_PER_STEP_MAX: usize = 64;
/// Reference counts read per read-only transaction (well inside 5 s).
const REFS_PER_READ_MAX: usize = 1_000;
const CURSOR_OBJECTS: &str = "blob_sweep";
const CURSOR_INLINE: &str = "blob_sweep_inline";

/// What one [`BlobStore::sweep_step`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Objects listed plus inline entries read.
    pub scanned: u64,
    pub deleted: u64,
    pub bytes_freed: u64,
    /// True when this step completed a pass over every object and inline
    /// entry; the next step starts a new pass.
    pub finished_pass: bool,
}

impl BlobStore {
    /// One bounded, resumable step of the orphan sweep: deletes bodies with no
    /// reference whose object is older than `grace`. Looks at no more than
    /// `max_items` objects and inline entries; the position is saved in the KV
    /// store, so steps can run on any node. Call it until `finished_pass` for
    /// a full pass; running it on several nodes at once is safe but wasteful.
    pub async fn sweep_step(&self, db: &Database, grace: Duration, max_items: usize) -> Result<SweepReport> {
        let max_items = max_items.clamp(1, SWEEP_ITEMS_PER_STEP_MAX);
        let (objects_key, inline_key) = (&keyspace::cursor(CURSOR_OBJECTS), &keyspace::cursor(CURSOR_INLINE));
        let (objects_at, inline_at) = db
            .read("blob_sweep_cursor", |txn| async move {
                Ok::<_, StorageError>((
                    Walk::decode(txn.get(objects_key).await?),
                    Walk::decode(txn.get(inline_key).await?),
                ))
            })
            .await?;
        let mut report = SweepReport::default();
        let objects_at = match objects_at {
            Walk::Done => Walk::Done,
            Walk::At(after) => {
                let after = String::from_utf8_lossy(&after).into_owned();
                let (metas, next) = self.list_after(&after, max_items).await?;
                report.scanned += metas.len() as u64;
                self.sweep_objects(db, &metas, grace, &mut report).await?;
                let next = next.map_or(Walk::Done, |p| Walk::At(p.into_bytes()));
                db.run("blob_sweep_cursor", |txn| {
                    let value = next.encode();
                    async move { txn.set(objects_key, &value) }
                })
                .await?;
                next
            }
        };
        let inline_at = match inline_at {
            Walk::Done => Walk::Done,
            Walk::At(after) => self.sweep_inline(db, &after, max_items, &mut report).await?,
        };
        recover_stale_markers(self, db).await?;
        if matches!((&objects_at, &inline_at), (Walk::Done, Walk::Done)) {
            db.run("blob_sweep_cursor", |txn| async move {
                txn.clear(objects_key)?;
                txn.clear(inline_key)
            })
            .await?;
            report.finished_pass = true;
        }
        metrics::counter!("meshmail_blob_sweep_deleted_total").increment(report.deleted);
        metrics::counter!("meshmail_blob_sweep_freed_bytes_total").increment(report.bytes_freed);
        Ok(report)
    }

    /// Up to `max_items` objects whose path sorts after `after`, in path
    /// order, and where to resume (None: the walk is complete). Listings come
    /// back in no guaranteed order (the local store walks directories in
    /// readdir order), so the walk descends the fixed two-level fan-out
    /// (≤ 256 × 256 directories) and sorts each leaf, which holds about
    /// 1/65,536 of all bodies. "<dir>/~" marks a directory as done: '~' sorts
    /// after every hex digit.
    async fn list_after(&self, after: &str, max_items: usize) -> Result<(Vec<ObjectMeta>, Option<String>)> {
        let done = |dir: &ObjectPath| format!("{dir}/~").as_str() <= after;
        let mut position = after.to_string();
        let (mut out, mut leaves) = (Vec::new(), 0);
        for top in self.subdirs(&ObjectPath::from(ROOT)).await? {
            if done(&top) {
                continue;
            }
            for leaf in self.subdirs(&top).await? {
                if done(&leaf) {
                    continue;
                }
                if leaves == SWEEP_LEAVES_PER_STEP_MAX {
                    return Ok((out, Some(position)));
                }
                leaves += 1;
                let listing = if after.starts_with(&format!("{leaf}/")) {
                    self.store.list_with_offset(Some(&leaf), &ObjectPath::from(after))
                } else {
                    self.store.list(Some(&leaf))
                };
                let mut metas: Vec<ObjectMeta> = listing.try_collect().await.map_err(store_err)?;
                metas.sort_by(|a, b| a.location.cmp(&b.location));
                for meta in metas {
                    if out.len() == max_items {
                        return Ok((out, Some(position)));
                    }
                    position = meta.location.to_string();
                    out.push(meta);
                }
                position = format!("{leaf}/~");
            }
        }
        Ok((out, None))
    }

    async fn subdirs(&self, dir: &ObjectPath) -> Result<Vec<ObjectPath>> {
        let mut dirs = self
            .store
            .list_with_delimiter(Some(dir))
            .await
            .map_err(store_err)?
            .common_prefixes;
        dirs.sort();
        Ok(dirs)
    }

    async fn sweep_objects(
        &self,
        db: &Database,
        metas: &[ObjectMeta],
        grace: Duration,
        report: &mut SweepReport,
    ) -> Result<()> {
        let now = now_ms() as i64;
        let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        // Objects that are not ours (a wrong name) are never deleted.
        let candidates: Vec<(String, u64)> = metas
            .iter()
            .filter(|m| now.saturating_sub(m.last_modified.timestamp_millis()) >= grace_ms)
            .filter_map(|m| hash_of_path(m.location.as_ref()).map(|h| (h, m.size)))
            .collect();
        for chunk in candidates.chunks(REFS_PER_READ_MAX) {
            let refs = db
                .read("blob_sweep_refs", |txn| async move {
                    let mut refs = Vec::with_capacity(chunk.len());
                    for (hash, _) in chunk {
                        refs.push(txn.get_i64(&keyspace::blob_refs(hash)).await?);
                    }
                    Ok::<_, StorageError>(refs)
                })
                .await?;
            for ((hash, size), refs) in chunk.iter().zip(refs) {
                if refs <= 0 && self.delete_unreferenced(db, hash, None).await? {
                    report.deleted += 1;
                    report.bytes_freed += size;
                }
            }
        }
        Ok(())
    }

    /// The delete protocol for one object: claim (txn1), delete, finish
    /// (txn2). `expected` is the marker that must be present now: None for a
    /// fresh delete, a stale marker when taking over a dead sweeper's delete.
    /// Returns whether this call deleted (or finished deleting) the object.
    async fn delete_unreferenced(&self, db: &Database, hash: &str, expected: Option<&[u8]>) -> Result<bool> {
        let (deleting, refs) = (&keyspace::blob_deleting(hash), &keyspace::blob_refs(hash));
        let marker = &new_marker();
        let claimed = db
            .run("blob_sweep_claim", |txn| async move {
                let current = txn.get(deleting).await?;
                if current.as_deref() == Some(marker.as_slice()) {
                    return Ok(true); // an earlier attempt committed (outcome unknown)
                }
                if current.as_deref() != expected {
                    return Ok(false); // someone else is deleting it, or did
                }
                if txn.get_i64(refs).await? > 0 {
                    if expected.is_some() {
                        // Cannot happen by the protocol; never delete a referenced body.
                        tracing::warn!(hash, "stale deleting marker on a referenced body; dropping it");
                        txn.clear(deleting)?;
                    }
                    return Ok(false);
                }
                txn.set(deleting, marker)?;
                txn.add_i64(&keyspace::blob_generation(hash), 1)?;
                Ok::<_, StorageError>(true)
            })
            .await?;
        if !claimed {
            return Ok(false);
        }
        // On failure the marker stays: deliveries of this content wait (then
        // fail as unavailable) until a later step takes the stale marker over.
        match tokio::time::timeout(DELETE_DEADLINE, self.store.delete(&object_path(hash))).await {
            Ok(Ok(())) | Ok(Err(object_store::Error::NotFound { .. })) => {}
            Ok(Err(e)) => {
                tracing::warn!(hash, error = %e, "orphan sweep: delete failed");
                return Ok(false);
            }
            Err(_) => {
                tracing::warn!(hash, "orphan sweep: delete timed out");
                return Ok(false);
            }
        }
        db.run("blob_sweep_finish", |txn| async move {
            if txn.get(deleting).await?.as_deref() == Some(marker.as_slice()) {
                txn.clear(deleting)?;
                txn.clear(refs)?;
            }
            Ok::<_, StorageError>(())
        })
        .await?;
        Ok(true)
    }

    /// Clears up to a chunk of unreferenced inline bodies after `after` (an
    /// empty `after`: from the start) and saves the position, each chunk in
    /// one transaction: a concurrent `reference` of the same content
    /// conflicts with it on the count or the body and one of the two retries.
    ///
    /// One walk covers both places inline bodies live: `("binl", hash)` of
    /// older stores first, then `("bref", …)`, where each body sits behind its
    /// count. `"binl"` sorts before `"bref"`, so one cursor orders both: a
    /// position at or past the end of `binl` resumes in `bref`.
    async fn sweep_inline(
        &self,
        db: &Database,
        after: &[u8],
        max_items: usize,
        report: &mut SweepReport,
    ) -> Result<Walk> {
        let limit = max_items.min(SWEEP_INLINE_PER_STEP_MAX);
        let scanned_before = report.scanned;
        let mut next = self.sweep_inline_chunk(db, after, limit, report).await?;
        // The older place ran out within this step: go on behind it with
        // what is left of the step (an empty store finishes in one step).
        let used = (report.scanned - scanned_before) as usize;
        if let Walk::At(position) = &next
            && position.as_slice() == prefix_range(&subspace_prefix("binl")).1.as_slice()
            && used < limit
        {
            let position = position.clone();
            next = self.sweep_inline_chunk(db, &position, limit - used, report).await?;
        }
        Ok(next)
    }

    /// One transaction of [`Self::sweep_inline`]: up to `limit` keys of
    /// the place `after` is in.
    async fn sweep_inline_chunk(
        &self,
        db: &Database,
        after: &[u8],
        limit: usize,
        report: &mut SweepReport,
    ) -> Result<Walk> {
        let (v1_begin, v1_end) = prefix_range(&subspace_prefix("binl"));
        let (refs_begin, refs_end) = prefix_range(&subspace_prefix("bref"));
        let in_refs = !after.is_empty() && after >= v1_end.as_slice();
        let (range_begin, end) = &if in_refs {
            (refs_begin, refs_end)
        } else {
            (v1_begin, v1_end.clone())
        };
        let begin = &if after.is_empty() {
            range_begin.clone()
        } else {
            key_after(after).max(range_begin.clone())
        };
        let cursor = &keyspace::cursor(CURSOR_INLINE);
        let v1_end = &v1_end;
        let (scanned, deleted, freed, next) = db
            .run("blob_sweep_inline", |txn| async move {
                let rows = txn.get_range(begin, end, RangeOptions::limit(limit).snapshot()).await?;
                let (mut deleted, mut freed) = (0u64, 0u64);
                for (key, value) in &rows {
                    // Counts of bodies kept as objects share the `bref` range.
                    let Some(hash) = inline_hash_of_key(key) else {
                        continue;
                    };
                    let refs = keyspace::blob_refs(&hash);
                    if txn.get_i64(&refs).await? <= 0 {
                        txn.clear(key)?;
                        txn.clear(&refs)?;
                        deleted += 1;
                        freed += value.len() as u64;
                    }
                }
                let next = match rows.last() {
                    Some((last, _)) if rows.len() == limit => Walk::At(last.clone()),
                    // The older place is done: the walk goes on behind it.
                    _ if !in_refs => Walk::At(v1_end.clone()),
                    _ => Walk::Done,
                };
                txn.set(cursor, &next.encode())?;
                Ok::<_, StorageError>((rows.len() as u64, deleted, freed, next))
            })
            .await?;
        report.scanned += scanned;
        report.deleted += deleted;
        report.bytes_freed += freed;
        Ok(next)
    }
}

/// Takes over the deletes of sweepers that died between txn1 and txn2. The
/// `bdel` range only holds deletes in progress, so the first chunk of it is
/// enough (no cursor).
async fn recover_stale_markers(blobs: &BlobStore, db: &Database) -> Result<()> {
    let (begin, end) = &prefix_range(&subspace_prefix("bdel"));
    let rows = db
        .read("blob_sweep_markers", |txn| async move {
            txn.get_range(begin, end, RangeOptions::limit(SWEEP_MARKERS_PER_STEP_MAX))
                .await
        })
        .await?;
    let now = now_ms();
    for (key, marker) in rows {
        let Some(hash) = hash_of_key(&key) else {
            continue;
        };
        if now.saturating_sub(marker_ms(&marker)) < DELETING_MARKER_STALE_MS {
            continue;
        }
        tracing::warn!(hash = %hash, "orphan sweep: taking over a stale delete");
        blobs.delete_unreferenced(db, &hash, Some(&marker)).await?;
    }
    Ok(())
}

/// The hash an object path names, if it is exactly a blob path.
fn hash_of_path(path: &str) -> Option<String> {
    let hash = path.rsplit('/').next()?;
    (is_hash(hash) && blob_path(hash) == path).then(|| hash.to_string())
}

/// The hash in a `("bdel", hash)` key.
fn hash_of_key(key: &[u8]) -> Option<String> {
    let (_, hash): (String, String) = foundationdb_tuple::unpack(key).ok()?;
    is_hash(&hash).then_some(hash)
}

/// The hash of an inline body's key: `("bref", hash, "inline")`, or
/// `("binl", hash)` in stores written before; None for anything else (a
/// reference count).
fn inline_hash_of_key(key: &[u8]) -> Option<String> {
    let hash = match foundationdb_tuple::unpack::<(String, String, String)>(key) {
        Ok((_, hash, tag)) if tag == keyspace::BLOB_INLINE_TAG => hash,
        Ok(_) => return None,
        Err(_) => {
            foundationdb_tuple::unpack::<(String, String)>(key)
                .ok()
                .filter(|(space, _)| space == "binl")?
                .1
        }
    };
    is_hash(&hash).then_some(hash)
}

/// The packed prefix of every key of one subspace, checked against the
/// keyspace so the two cannot drift apart.
fn subspace_prefix(name: &str) -> Vec<u8> {
    let prefix = foundationdb_tuple::pack(&(name,));
    let sample = match name {
        "binl" => keyspace::blob_inline_v1("0"),
        "bref" => keyspace::blob_inline("0"),
        _ => keyspace::blob_deleting("0"),
    };
    assert!(sample.starts_with(&prefix), "keyspace layout changed for {name}");
    prefix
}

/// A `bdel` value: the claim time (ms, LE) and a nonce, so that two claims
/// never compare equal.
fn new_marker() -> Vec<u8> {
    let mut m = now_ms().to_le_bytes().to_vec();
    m.extend_from_slice(&rand::random::<u64>().to_le_bytes());
    m
}

fn marker_ms(marker: &[u8]) -> u64 {
    marker
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Progress of one walk of the sweep, as stored in its cursor key.
#[derive(Debug, PartialEq, Eq)]
enum Walk {
    /// Everything up to and including this position was visited (empty: none).
    At(Vec<u8>),
    /// This pass is complete; waits for the other walk to complete too.
    Done,
}

impl Walk {
    fn decode(value: Option<Vec<u8>>) -> Walk {
        match value.as_deref() {
            Some([b'd']) => Walk::Done,
            Some([b'a', rest @ ..]) => Walk::At(rest.to_vec()),
            _ => Walk::At(Vec::new()),
        }
    }

    fn encode(&self) -> Vec<u8> {
        match self {
            Walk::Done => b"d".to_vec(),
            Walk::At(position) => [b"a".as_slice(), position].concat(),
        }
    }
}

#[cfg(test)]
mod tests {

    use bytes::Bytes;

    use super::*;
    use crate::blob::{BlobConfig, reference};

    /// The claim re-reads the references itself: the sweep's earlier read of
    /// them may be stale by then (a delivery committed in between).
    #[tokio::test]
    async fn claim_refuses_a_referenced_body() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap();
        let cfg = BlobConfig::Local {
            dir: dir.path().join("bodies"),
        };
        let blobs = BlobStore::open(&cfg, 0).await.unwrap();
        let prepared = blobs.prepare(&db, Bytes::from_static(b"a body")).await.unwrap();
        let p = &prepared;
        db.run("test_reference", |txn| async move { reference(&txn, p).await })
            .await
            .unwrap();
        assert!(!blobs.delete_unreferenced(&db, &p.body.hash, None).await.unwrap());
        assert_eq!(blobs.get(&db, &p.body).await.unwrap(), "a body");
        let deleting = &keyspace::blob_deleting(&p.body.hash);
        let marker = db
            .read("test_marker", |txn| async move { txn.get(deleting).await })
            .await;
        assert_eq!(marker.unwrap(), None);
    }

    #[test]
    fn walk_positions_round_trip() {
        for walk in [Walk::Done, Walk::At(Vec::new()), Walk::At(b"blobs/ab/cd/ef".to_vec())] {
            assert_eq!(Walk::decode(Some(walk.encode())), walk);
        }
        assert_eq!(Walk::decode(None), Walk::At(Vec::new()));
    }
}
