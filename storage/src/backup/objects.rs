//! Bodies between the object store and a backup's `objects/` directory.
//! Both directions check each body's SHA-256 against its content-addressed
//! name, so a damaged body is found where it is, not after a restore.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::StreamExt;

use super::format::{ChunkInfo, ChunkWriter, Record, io_err, read_chunk};
use super::{BackupError, Phase, Progress};
use crate::blob::{BlobStore, blob_path, content_hash};

/// Where a body goes inside a backup directory.
pub fn object_file(dir: &Path, hash: &str) -> PathBuf {
    dir.join("objects").join(blob_path(hash))
}

/// Copies every body of the object store into `dir/objects/` (each file
/// fsynced: the manifest, written after, vouches for them) and lists them
/// in objects chunks. Returns (bodies, bytes).
pub async fn copy_out(
    blobs: &BlobStore,
    dir: &Path,
    w: &mut ChunkWriter,
    written: &mut u64,
    progress: Progress<'_>,
) -> Result<(u64, u64), BackupError> {
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut listing = Box::pin(blobs.list_objects());
    while let Some(item) = listing.next().await {
        let (hash, _) = item?;
        let body = match blobs.get_object(&hash).await {
            Ok(b) => b,
            // Swept (unreferenced) between the listing and the read.
            Err(crate::StorageError::NotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let found = content_hash(&body);
        if found != hash {
            return Err(BackupError::ObjectDamaged {
                hash,
                detail: format!("the object store holds bytes whose SHA-256 is {found}"),
            });
        }
        write_file(dir, &object_file(dir, &hash), &body, *written + w.written_bytes + bytes)?;
        w.push(
            &Record::Set(hash.into_bytes(), body.len().to_le_bytes().to_vec()),
            *written + bytes,
        )?;
        n += 1;
        bytes += body.len() as u64;
        progress(Phase::Objects, n, bytes);
    }
    w.close(*written + bytes)?;
    *written += bytes;
    Ok((n, bytes))
}

fn write_file(dir: &Path, path: &Path, body: &[u8], written: u64) -> Result<(), BackupError> {
    let err = |e| io_err(dir, path, written, e);
    std::fs::create_dir_all(path.parent().expect("under objects/")).map_err(err)?;
    let mut f = std::fs::File::create(path).map_err(err)?;
    f.write_all(body).map_err(err)?;
    f.sync_all().map_err(err)
}

/// Reads the objects chunks: the set of hashes the backup holds.
pub fn listed(dir: &Path, chunks: &[&ChunkInfo]) -> Result<HashSet<String>, BackupError> {
    let mut out = HashSet::new();
    for c in chunks {
        for r in read_chunk(dir, c)? {
            out.insert(String::from_utf8_lossy(r.key()).into_owned());
        }
    }
    Ok(out)
}

/// Puts every listed body into the target store, checking each.
pub async fn copy_in(
    blobs: &BlobStore,
    dir: &Path,
    hashes: &HashSet<String>,
    progress: Progress<'_>,
) -> Result<(u64, u64), BackupError> {
    let (mut n, mut bytes) = (0u64, 0u64);
    for hash in hashes {
        let path = object_file(dir, hash);
        let body = std::fs::read(&path).map_err(|e| BackupError::Io {
            path: path.clone(),
            source: e,
        })?;
        let found = content_hash(&body);
        if &found != hash {
            return Err(BackupError::ObjectDamaged {
                hash: hash.clone(),
                detail: format!("{} holds bytes whose SHA-256 is {found}", path.display()),
            });
        }
        bytes += body.len() as u64;
        blobs.put_object(hash, Bytes::from(body)).await?;
        n += 1;
        progress(Phase::Objects, n, bytes);
    }
    Ok((n, bytes))
}
