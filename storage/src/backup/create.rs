//! `backup create`: the key copy, then the ledger pass, then the bodies,
//! then the manifest (see the module docs of [`super`] for why).

use std::path::Path;

use super::format::{self, ChunkKind, ChunkWriter, Counts, FAILED_FILE, Manifest, Record};
use super::{BackupError, Phase, Progress, groups, objects};
use crate::blob::BlobStore;
use crate::keyspace;
use crate::kv::{Database, KeyValue, RangeOptions, key_after};
use crate::model::now_ms;

/// Keys read per transaction at first; adapted per chunk.
pub const KEYS_PER_READ_START: usize = 1_000;
/// Bounds of the adaptive read size (a range read returns ≤ 10,000 keys).
const KEYS_PER_READ_MIN: usize = 16;
const KEYS_PER_READ_MAX: usize = 10_000;
/// Bytes one read transaction aims at: inline bodies (≤ 90 KB each) sit
/// among small records, so a fixed key count could read 100s of MB in one
/// transaction; ~4 MB reads in well under FDB's 5 s.
pub const READ_BYTES_TARGET: usize = 4 << 20;

/// Inline bodies the key copy remembers by hash, so the ledger pass does
/// not copy them again (a body under its hash never changes): ~100 MB at
/// most; past it, bodies are copied twice rather than held.
pub const INLINE_SEEN_MAX: usize = 1_000_000;

/// Hashes of the inline bodies the key copy wrote.
pub type InlineSeen = std::collections::HashSet<String>;

/// Subspaces the key copy leaves out: the ledger (copied by the ledger
/// pass, with what it names), shard leases and liveness stamps (they
/// belong to the nodes that wrote them: a restored mesh takes its leases
/// afresh instead of waiting out the old owners').
const SKIPPED_SUBSPACES: &[&str] = &["ldg", "lease", "nseen"];

/// How hard the backup may press on a busy store.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Most keys (and ledger entries) one read transaction takes.
    pub keys_per_read_max: usize,
    /// A pause after every read transaction: spreads the backup's load
    /// over time on a store that also serves mail (0: none).
    pub pause_per_read: std::time::Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            keys_per_read_max: KEYS_PER_READ_MAX,
            pause_per_read: std::time::Duration::ZERO,
        }
    }
}

impl Pace {
    pub(super) async fn pause(&self) {
        if !self.pause_per_read.is_zero() {
            tokio::time::sleep(self.pause_per_read).await;
        }
    }
}

/// Where the backup comes from, for the manifest.
#[derive(Debug, Clone)]
pub struct Source {
    /// "sqlite" or "fdb".
    pub store_kind: String,
    pub key_prefix: String,
}

/// Takes a backup of `db` and `blobs` into `dir` (new or empty). On any
/// error the partial files are removed and the error returned.
pub async fn create(
    db: &Database,
    blobs: &BlobStore,
    dir: &Path,
    source: &Source,
    pace: Pace,
    progress: Progress<'_>,
) -> Result<Manifest, BackupError> {
    prepare_dir(dir)?;
    let mut written = 0u64;
    match run(db, blobs, dir, source, pace, progress, &mut written).await {
        Ok(m) => Ok(m),
        Err(e) => {
            discard_partial(dir, &e);
            Err(e)
        }
    }
}

async fn run(
    db: &Database,
    blobs: &BlobStore,
    dir: &Path,
    source: &Source,
    pace: Pace,
    progress: Progress<'_>,
    written: &mut u64,
) -> Result<Manifest, BackupError> {
    let started_ms = now_ms();
    let mut counts = Counts::default();
    let mut keys = ChunkWriter::new(dir, ChunkKind::Keys);
    let mut seen = InlineSeen::new();
    counts.keys = copy_keys(db, &mut keys, pace, &mut seen, progress).await?;
    *written += keys.written_bytes;
    let keys_done_ms = now_ms();

    let mut ledger = ChunkWriter::new(dir, ChunkKind::Ledger);
    (counts.ledger_entries, counts.ledger_group_keys) =
        groups::copy_ledger(db, &mut ledger, *written, pace, seen, progress).await?;
    *written += ledger.written_bytes;

    let mut objs = ChunkWriter::new(dir, ChunkKind::Objects);
    (counts.objects, counts.object_bytes) = objects::copy_out(blobs, dir, &mut objs, written, progress).await?;
    *written += objs.written_bytes;

    let chunks: Vec<_> = [keys.done, ledger.done, objs.done].concat();
    counts.chunk_bytes = chunks.iter().map(|c| c.bytes).sum();
    let manifest = Manifest {
        format_version: format::FORMAT_VERSION,
        store_kind: source.store_kind.clone(),
        key_prefix: source.key_prefix.clone(),
        started_ms,
        keys_done_ms,
        finished_ms: now_ms(),
        counts,
        chunks,
    };
    format::write_manifest(dir, &manifest, *written)?;
    Ok(manifest)
}

/// The whole keyspace minus [`SKIPPED_SUBSPACES`], as ordered ranges.
fn copy_ranges() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut skipped: Vec<_> = SKIPPED_SUBSPACES.iter().map(|s| keyspace::subspace(s)).collect();
    skipped.sort();
    let mut out = Vec::new();
    let mut at = Vec::new();
    for (b, e) in skipped {
        if at < b {
            out.push((at, b));
        }
        at = e;
    }
    out.push((at, vec![0xff]));
    out
}

/// The key copy: every range in chunks, one read transaction each.
async fn copy_keys(
    db: &Database,
    w: &mut ChunkWriter,
    pace: Pace,
    seen: &mut InlineSeen,
    progress: Progress<'_>,
) -> Result<u64, BackupError> {
    let mut done = 0u64;
    let most = pace.keys_per_read_max.clamp(KEYS_PER_READ_MIN, KEYS_PER_READ_MAX);
    let mut limit = KEYS_PER_READ_START.min(most);
    for (begin, end) in copy_ranges() {
        let mut begin = begin;
        loop {
            let (b, e) = (begin.clone(), end.clone());
            let rows: Vec<KeyValue> = db
                .read("backup_keys", move |txn| {
                    let (b, e) = (b.clone(), e.clone());
                    async move { txn.get_range(&b, &e, RangeOptions::limit(limit)).await }
                })
                .await?;
            let bytes: usize = rows.iter().map(|(k, v)| k.len() + v.len()).sum();
            for (k, v) in &rows {
                w.push(&Record::Set(k.clone(), v.clone()), 0)?;
                if seen.len() < INLINE_SEEN_MAX
                    && let Some(hash) = keyspace::inline_body_hash(k)
                {
                    seen.insert(hash);
                }
            }
            done += rows.len() as u64;
            progress(Phase::Keys, done, w.written_bytes);
            let full = rows.len() == limit;
            limit = next_limit(limit, bytes).min(most);
            pace.pause().await;
            match rows.last() {
                Some((last, _)) if full => begin = key_after(last),
                _ => break,
            }
        }
    }
    w.close(0)?;
    Ok(done)
}

/// Halves the read size after a read far over the byte target, doubles it
/// after one far under.
fn next_limit(limit: usize, bytes: usize) -> usize {
    if bytes > READ_BYTES_TARGET {
        (limit / 2).max(KEYS_PER_READ_MIN)
    } else if bytes < READ_BYTES_TARGET / 4 {
        (limit * 2).min(KEYS_PER_READ_MAX)
    } else {
        limit
    }
}

/// A backup goes into a new or empty directory: never mixed with older
/// files that a manifest would then seem to vouch for.
fn prepare_dir(dir: &Path) -> Result<(), BackupError> {
    let io = |e| BackupError::Io {
        path: dir.to_path_buf(),
        source: e,
    };
    if dir.exists() {
        if std::fs::read_dir(dir).map_err(io)?.next().is_some() {
            return Err(BackupError::DirNotEmpty { dir: dir.to_path_buf() });
        }
    } else {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    Ok(())
}

/// After a failure: removes what was written (there is no manifest, so it
/// could never be restored, but it takes space and looks like a backup),
/// then leaves a note saying why, if the disk still takes a few bytes.
fn discard_partial(dir: &Path, err: &BackupError) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
    let _ = std::fs::write(dir.join(FAILED_FILE), format!("{err}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_ranges_cover_everything_but_the_skipped_subspaces() {
        let ranges = copy_ranges();
        let ledger = keyspace::ledger_all();
        assert!(ranges.iter().all(|(b, e)| b < e));
        assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0));
        let inside = |k: &[u8]| ranges.iter().any(|(b, e)| b.as_slice() <= k && k < e.as_slice());
        assert!(!inside(&keyspace::ledger(&[7; 16])));
        assert!(!inside(&keyspace::lease(3)));
        assert!(inside(&keyspace::domain("example.org")));
        assert!(inside(&keyspace::blob_refs("ab")));
        assert!(inside(&ledger.1), "the key right after the ledger is copied");
    }

    #[test]
    fn the_read_size_follows_the_bytes() {
        assert_eq!(next_limit(1000, READ_BYTES_TARGET * 2), 500);
        assert_eq!(next_limit(1000, 10), 2000);
        assert_eq!(next_limit(16, usize::MAX), 16);
        assert_eq!(next_limit(10_000, 0), 10_000);
    }
}
