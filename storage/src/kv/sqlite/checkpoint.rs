//! WAL checkpoints off the commit path.
//!
//! SQLite's default (`wal_autocheckpoint = 1000`) runs a checkpoint inside
//! the commit that takes the WAL past 1,000 pages: that commit copies every
//! page the WAL holds into the main file and fsyncs it before it returns,
//! and every delivery of its batch (and every commit queued behind it)
//! waits for that. Under ingest a 8 KiB-page WAL reaches 1,000 pages every
//! ~100 deliveries, so about one commit in twenty paid a checkpoint.
//!
//! In [`CheckpointMode::Background`] the writer connection's WAL hook only
//! signals a thread of this process, which checkpoints from its own
//! connection while commits go on (SQLite lets a checkpoint run beside the
//! writer and the readers; only two checkpoints exclude each other, so
//! several processes sharing the file each run one and the loser of a race
//! just retries later). A checkpoint that falls behind is caught by a
//! backstop: past [`BACKSTOP_FACTOR`] × the threshold the committing
//! connection checkpoints itself, as SQLite would, so the WAL stays bounded
//! whatever the thread does.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::time::Instant;

use rusqlite::Connection;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode as SqliteCheckpoint;
use serde::{Deserialize, Serialize};

use super::{SqliteOptions, open_connection_sized, sql_err};
use crate::error::Result;

/// Where the WAL is folded into the main file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointMode {
    /// A thread of the process, signalled by the commits (the default).
    #[default]
    Background,
    /// Inside the commit that crosses the threshold (SQLite's own way).
    InCommit,
}

/// WAL pages after which a checkpoint runs (SQLite's default is 1,000).
/// Larger means the pages that every commit rewrites (a mailbox's append
/// tail, the counters) are copied to the main file once per checkpoint
/// rather than once per 1,000 pages, at the cost of a longer WAL for
/// readers to search (its index is a hash table: cheap).
pub const CHECKPOINT_AFTER_PAGES: u32 = 4096;
/// The committing connection checkpoints itself past this many times the
/// threshold (the background thread fell behind or cannot run).
pub const BACKSTOP_FACTOR: i32 = 4;
/// The WAL file is truncated to this size after a checkpoint that
/// restarted it, so one burst does not keep a huge file forever.
pub const WAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;

/// Sets up checkpoints on the write connection; returns the background
/// thread's handle when there is one (it stops when the handle drops).
pub fn install(writer: &mut Connection, options: &SqliteOptions) -> Result<Option<Checkpointer>> {
    let after_pages = options.checkpoint_after_pages.min(i32::MAX as u32) as i32;
    writer
        .execute_batch(&format!("PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}"))
        .map_err(sql_err)?;
    match options.checkpoint {
        CheckpointMode::InCommit => {
            writer
                .execute_batch(&format!("PRAGMA wal_autocheckpoint={after_pages}"))
                .map_err(sql_err)?;
            Ok(None)
        }
        CheckpointMode::Background => {
            let conn = open_connection_sized(&options.path, options.durability, None, None)?;
            conn.execute_batch(&format!("PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}"))
                .map_err(sql_err)?;
            // One pending signal is enough: the thread checkpoints
            // everything the WAL holds when it wakes.
            let (signal, wake) = mpsc::sync_channel::<()>(1);
            std::thread::Builder::new()
                .name("sqlite-checkpoint".into())
                .spawn(move || run(conn, wake))
                .map_err(crate::error::StorageError::Io)?;
            let hook_signal = signal.clone();
            let mut pages_before = 0;
            // Replaces SQLite's autocheckpoint (itself a WAL hook).
            writer
                .wal_hook(Some(move |wal: &mut Wal, pages: i32| {
                    // Pages this commit appended (the WAL restarts from
                    // its start after a complete checkpoint).
                    let appended = if pages >= pages_before {
                        pages - pages_before
                    } else {
                        pages
                    };
                    pages_before = pages;
                    metrics::histogram!("meshmail_kv_sqlite_commit_pages").record(f64::from(appended));
                    on_commit(wal, pages, after_pages, &hook_signal);
                    Ok(())
                }))
                .map_err(sql_err)?;
            Ok(Some(Checkpointer { _signal: signal }))
        }
    }
}

/// Keeps the background thread alive; dropping every copy of the sender
/// (this and the hook's, which dies with the connection) ends it.
pub struct Checkpointer {
    _signal: SyncSender<()>,
}

/// Called by SQLite after each commit with the pages the WAL now holds.
fn on_commit(wal: &mut Wal, pages: i32, after_pages: i32, signal: &SyncSender<()>) {
    metrics::gauge!("meshmail_kv_sqlite_wal_pages").set(f64::from(pages));
    if pages >= after_pages.saturating_mul(BACKSTOP_FACTOR) {
        metrics::counter!("meshmail_kv_sqlite_checkpoints_total", "where" => "commit").increment(1);
        let started = Instant::now();
        // PASSIVE, as SQLite's own autocheckpoint: it never waits for
        // readers, so a long reader cannot stall the commit here.
        let _ = wal.checkpoint_v2(SqliteCheckpoint::PASSIVE);
        metrics::histogram!("meshmail_kv_sqlite_checkpoint_seconds", "where" => "commit")
            .record(started.elapsed().as_secs_f64());
    } else if pages >= after_pages {
        // Full: a wake-up is already pending. Disconnected: the thread
        // is gone with the backend, and so is this connection soon.
        let _ = signal.try_send(());
    }
}

/// The thread: one PASSIVE checkpoint per wake-up, until the backend is gone.
fn run(conn: Connection, wake: Receiver<()>) {
    while wake.recv().is_ok() {
        let started = Instant::now();
        let result = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        });
        metrics::histogram!("meshmail_kv_sqlite_checkpoint_seconds", "where" => "background")
            .record(started.elapsed().as_secs_f64());
        match result {
            Ok((busy, log, done)) => {
                metrics::counter!("meshmail_kv_sqlite_checkpoints_total", "where" => "background").increment(1);
                if busy != 0 || done < log {
                    // Another process's checkpoint, or a reader on old
                    // frames: the next signal tries again.
                    metrics::counter!("meshmail_kv_sqlite_checkpoints_partial_total").increment(1);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "background WAL checkpoint failed; the next commit signals a retry");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::Backend;
    use std::path::Path;

    use crate::kv::sqlite::{Durability, SqliteBackend, SqliteOptions};

    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    /// Commits values until the WAL is past the threshold, then waits
    /// (bounded) for the main file to take the pages: in background mode
    /// that is the thread's checkpoint, since no commit reaches the
    /// backstop. Every value reads back afterwards.
    async fn fill_past_threshold(mode: CheckpointMode) -> (u64, u64, bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.sqlite");
        let mut opts = SqliteOptions::new(&path);
        opts.durability = Durability::Normal;
        opts.checkpoint = mode;
        let backend = SqliteBackend::open(opts).unwrap();
        let page = u64::from(crate::kv::sqlite::PAGE_SIZE_BYTES_DEFAULT);
        let main_before = file_len(&path);
        let value = vec![0x5au8; 6000];
        // ~1.2 pages per key; stop short of the backstop.
        let keys = CHECKPOINT_AFTER_PAGES * 3 / 2 / 100 * 100;
        for chunk in 0..keys / 100 {
            let txn = backend.begin(false).await.unwrap();
            for i in 0..100 {
                txn.set(format!("k{:08}", chunk * 100 + i).as_bytes(), &value);
            }
            txn.commit().await.unwrap();
        }
        let wal = path.with_extension("sqlite-wal");
        assert!(
            file_len(&wal) >= page * u64::from(CHECKPOINT_AFTER_PAGES),
            "the WAL never reached the threshold"
        );
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        let grown = page * u64::from(keys) / 2;
        while file_len(&path) < main_before + grown && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let txn = backend.begin(true).await.unwrap();
        for i in [0, keys / 2, keys - 1] {
            let k = format!("k{i:08}");
            let got = txn.get(k.as_bytes(), true).await.unwrap();
            assert!(
                got.as_deref() == Some(&value[..]),
                "{k}: {:?} bytes",
                got.map(|v| v.len())
            );
        }
        (main_before, file_len(&path), file_len(&path) >= main_before + grown)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_background_thread_checkpoints_the_wal_without_a_commit_waiting() {
        let (before, after, checkpointed) = fill_past_threshold(CheckpointMode::Background).await;
        assert!(
            checkpointed,
            "main file {before} -> {after} bytes: no background checkpoint moved the WAL's pages"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_commit_mode_checkpoints_as_sqlite_does() {
        let (before, after, checkpointed) = fill_past_threshold(CheckpointMode::InCommit).await;
        assert!(checkpointed, "main file {before} -> {after} bytes");
    }
}
