//! What a store costs on disk and in I/O: allocated bytes of a data
//! directory (SQLite file, its WAL, blobs) after a checkpoint, and the bytes
//! a process made the kernel write (`/proc/<pid>/io`), for the ingest
//! benchmark's bytes-per-message and write-amplification figures.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::Context;
use meshmail_storage::kv::sqlite::{SqliteBackend, SqliteOptions};

/// Allocated bytes (512-byte blocks, not apparent sizes: sparse files and
/// partly used pages count as the disk sees them) of every file under `dir`.
pub fn allocated_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    Ok(total)
}

/// Disk use of a stopped node's data directory after folding the WAL into
/// the main file (`wal_checkpoint(TRUNCATE)`), in bytes: (SQLite file, blobs).
pub fn checkpointed_usage(data_dir: &Path) -> anyhow::Result<(u64, u64)> {
    let db = data_dir.join("meshmail.sqlite");
    let backend = SqliteBackend::open(SqliteOptions::new(&db))?;
    backend.checkpoint_truncate()?;
    drop(backend);
    let mut sqlite = 0;
    for suffix in ["", "-wal", "-shm"] {
        let p = data_dir.join(format!("meshmail.sqlite{suffix}"));
        if let Ok(m) = std::fs::metadata(&p) {
            sqlite += m.blocks() * 512;
        }
    }
    let blobs_dir = data_dir.join("blobs");
    let blobs = if blobs_dir.exists() {
        allocated_bytes(&blobs_dir)?
    } else {
        0
    };
    Ok((sqlite, blobs))
}

/// Bytes a process caused to be sent to the storage layer so far
/// (`write_bytes` of `/proc/<pid>/io`).
pub fn process_write_bytes(pid: u32) -> anyhow::Result<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no write_bytes in /proc io")
}
