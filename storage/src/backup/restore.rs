//! `backup restore`: check the whole backup, write its records into an
//! empty store in bounded transactions, put its bodies, then repair what
//! the fuzzy copy cannot keep exact (see [`super`] and [`super::repair`]).

use std::path::Path;
use std::sync::Arc;

use super::format::{ChunkInfo, ChunkKind, Manifest, Record, read_chunk, read_manifest};
use super::repair::{self, RepairReport};
use super::{BackupError, Phase, Progress, objects};
use crate::blob::BlobStore;
use crate::kv::{Database, RangeOptions};

/// Mutation bytes per restore transaction: well under FDB's 10 MB, and
/// few enough records that a retry is cheap.
pub const BATCH_BYTES_MAX: usize = 2 << 20;
/// Records per restore transaction.
pub const BATCH_RECORDS_MAX: usize = 2_000;

#[derive(Debug, Clone, Copy, Default)]
pub struct RestoreOptions {
    /// Write into a store that already holds keys (its keys are
    /// overwritten where the backup has them; nothing is cleared).
    pub allow_non_empty: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RestoreReport {
    pub records: u64,
    pub objects: u64,
    pub object_bytes: u64,
    pub repair: RepairReport,
}

/// Restores the backup in `dir` into `db` and `blobs`.
pub async fn restore(
    db: &Database,
    blobs: &BlobStore,
    dir: &Path,
    opts: RestoreOptions,
    progress: Progress<'_>,
) -> Result<(Manifest, RestoreReport), BackupError> {
    let manifest = read_manifest(dir)?;
    verify_all(dir, &manifest, progress)?;
    if !opts.allow_non_empty {
        check_empty(db).await?;
    }
    let mut report = RestoreReport::default();
    // Keys first, then the ledger groups, which are newer and overwrite.
    for kind in [ChunkKind::Keys, ChunkKind::Ledger] {
        for chunk in manifest.chunks.iter().filter(|c| c.kind == kind) {
            let records = read_chunk(dir, chunk)?;
            report.records += apply(db, records).await?;
            progress(Phase::Write, report.records, 0);
        }
    }
    let hashes = objects::listed(dir, &of_kind(&manifest, ChunkKind::Objects))?;
    (report.objects, report.object_bytes) = objects::copy_in(blobs, dir, &hashes, progress).await?;
    report.repair = repair::run(db, &hashes, progress).await?;
    Ok((manifest, report))
}

fn of_kind(m: &Manifest, kind: ChunkKind) -> Vec<&ChunkInfo> {
    m.chunks.iter().filter(|c| c.kind == kind).collect()
}

/// Every chunk's length, hash and framing, before anything is written:
/// a damaged backup restores nothing rather than part of a store.
fn verify_all(dir: &Path, manifest: &Manifest, progress: Progress<'_>) -> Result<(), BackupError> {
    let mut bytes = 0;
    for (i, chunk) in manifest.chunks.iter().enumerate() {
        read_chunk(dir, chunk)?;
        bytes += chunk.bytes;
        progress(Phase::Verify, i as u64 + 1, bytes);
    }
    Ok(())
}

/// The target must hold nothing but what opening it wrote (its
/// `("cluster", …)` format marker).
async fn check_empty(db: &Database) -> Result<(), BackupError> {
    let (cluster_b, cluster_e) = crate::keyspace::subspace("cluster");
    for (b, e) in [(Vec::new(), cluster_b), (cluster_e, vec![0xff])] {
        let found = db
            .read("restore_check_empty", move |txn| {
                let (b, e) = (b.clone(), e.clone());
                async move { txn.get_range(&b, &e, RangeOptions::limit(1)).await }
            })
            .await?;
        if let Some((k, _)) = found.first() {
            return Err(BackupError::TargetNotEmpty {
                first_key: String::from_utf8_lossy(k).into_owned(),
            });
        }
    }
    Ok(())
}

/// Writes records in transactions of ≤ [`BATCH_BYTES_MAX`] bytes and
/// ≤ [`BATCH_RECORDS_MAX`] records. Sets and clears are idempotent, so a
/// retried (or unknown-outcome) commit is harmless.
async fn apply(db: &Database, records: Vec<Record>) -> Result<u64, BackupError> {
    let total = records.len() as u64;
    let mut batch = Vec::new();
    let mut batch_bytes = 0;
    for r in records {
        let size = match &r {
            Record::Set(k, v) => k.len() + v.len(),
            Record::Clear(k) => k.len(),
        };
        if !batch.is_empty() && (batch_bytes + size > BATCH_BYTES_MAX || batch.len() == BATCH_RECORDS_MAX) {
            write_batch(db, std::mem::take(&mut batch)).await?;
            batch_bytes = 0;
        }
        batch_bytes += size;
        batch.push(r);
    }
    if !batch.is_empty() {
        write_batch(db, batch).await?;
    }
    Ok(total)
}

async fn write_batch(db: &Database, batch: Vec<Record>) -> Result<(), BackupError> {
    let batch = Arc::new(batch);
    db.run("restore_batch", move |txn| {
        let batch = batch.clone();
        async move {
            for r in batch.iter() {
                match r {
                    Record::Set(k, v) => txn.set(k, v)?,
                    Record::Clear(k) => txn.clear(k)?,
                }
            }
            Ok::<_, crate::StorageError>(())
        }
    })
    .await?;
    Ok(())
}
