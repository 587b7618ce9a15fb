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
/// Once the WAL is past the threshold, the thread is woken again only
/// after it has grown by another `1 / RETRY_DIVISOR` of the threshold
/// (see [`Trigger`]).
pub const RETRY_DIVISOR: i32 = 4;
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
            let mut trigger = Trigger::new(after_pages);
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
                    on_commit(wal, pages, after_pages, trigger.due(pages), &hook_signal);
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

/// When a commit wakes the checkpoint thread: when the WAL reaches the
/// threshold, then again only each time it has grown by another
/// `threshold / RETRY_DIVISOR` pages, until it starts over.
///
/// The WAL starts over from its beginning only when the writer begins a
/// transaction after a complete checkpoint while no reader is still on its
/// frames; with readers at every RCPT that often fails, the WAL stays past
/// the threshold, and a wake-up at every commit was a checkpoint at every
/// commit: each sorted the WAL's index, copied the pages that every commit
/// rewrites (a mailbox's tail, its counters) into the main file once more
/// and fsynced it (a profile of ingest: 337 checkpoints for 8,000
/// deliveries, 12.7 % of the node's CPU). Spaced out, such a page is copied
/// once per a few hundred deliveries.
#[derive(Debug)]
struct Trigger {
    after_pages: i32,
    next_at: i32,
    last: i32,
}

impl Trigger {
    fn new(after_pages: i32) -> Self {
        Trigger {
            after_pages,
            next_at: after_pages,
            last: 0,
        }
    }

    /// Whether the commit that left `pages` in the WAL wakes the thread.
    fn due(&mut self, pages: i32) -> bool {
        if pages < self.last {
            // The WAL started over: its next checkpoint is at the threshold.
            self.next_at = self.after_pages;
        }
        self.last = pages;
        if pages < self.next_at {
            return false;
        }
        self.next_at = pages.saturating_add((self.after_pages / RETRY_DIVISOR).max(1));
        true
    }
}

/// Called by SQLite after each commit with the pages the WAL now holds.
fn on_commit(wal: &mut Wal, pages: i32, after_pages: i32, wake: bool, signal: &SyncSender<()>) {
    metrics::gauge!("meshmail_kv_sqlite_wal_pages").set(f64::from(pages));
    if pages >= after_pages.saturating_mul(BACKSTOP_FACTOR) {
        metrics::counter!("meshmail_kv_sqlite_checkpoints_total", "where" => "commit").increment(1);
        let started = Instant::now();
        // PASSIVE, as SQLite's own autocheckpoint: it never waits for
        // readers, so a long reader cannot stall the commit here.
        let _ = wal.checkpoint_v2(SqliteCheckpoint::PASSIVE);
        metrics::histogram!("meshmail_kv_sqlite_checkpoint_seconds", "where" => "commit")
            .record(started.elapsed().as_secs_f64());
    } else if wake {
        // Full: a wake-up is already pending. Disconnected: the thread
        // is gone with the backend, and so is this connection soon.
        let _ = signal.try_send(());
    }
}

/// Passes of one wake-up at most (see [`run`]).
pub const CHASE_PASSES: usize = 4;

/// The thread: per wake-up, a PASSIVE checkpoint, then a few more while
/// commits that landed during the last pass are still to copy (each pass
/// copies only those, so it is short), until the backend is gone. The WAL
/// starts over at the writer's next transaction only if a checkpoint left
/// nothing to copy: without the chase, the one pass per wake-up of a busy
/// writer was always behind, the WAL only grew, and the commit's backstop
/// did the copying.
fn run(conn: Connection, wake: Receiver<()>) {
    while wake.recv().is_ok() {
        // A pass that found no more frames than the last one copied
        // has caught up: a cheap look at the WAL index, no copy, no sync.
        let mut copied_to = -1;
        for _ in 0..CHASE_PASSES {
            match pass(&conn) {
                Some(log) if log > copied_to => copied_to = log,
                _ => break,
            }
        }
    }
}

/// One PASSIVE checkpoint: the WAL's frames then, when it copied them all;
/// None when it could not (a reader on old frames, another process's
/// checkpoint, an error): a later signal tries again.
fn pass(conn: &Connection) -> Option<i64> {
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
                metrics::counter!("meshmail_kv_sqlite_checkpoints_partial_total").increment(1);
                return None;
            }
            Some(log)
        }
        Err(e) => {
            tracing::warn!(error = %e, "background WAL checkpoint failed; the next commit signals a retry");
            None
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

    #[test]
    fn past_the_threshold_the_thread_is_woken_at_growth_steps_not_at_every_commit() {
        let mut t = Trigger::new(4096);
        // Commits of ~90 pages: none wakes it below the threshold.
        let mut pages = 0;
        let mut woken = Vec::new();
        for _ in 0..100 {
            pages += 90;
            if t.due(pages) {
                woken.push(pages);
            }
        }
        // 4,140 is the first commit at or past 4,096; then every 1,024 pages
        // (12 commits of 90 pages): not 55 wake-ups, one per commit.
        assert_eq!(woken.first(), Some(&4140));
        assert_eq!(woken.len(), 5, "{woken:?}");
        assert!(woken.windows(2).all(|w| w[1] - w[0] >= 1024), "{woken:?}");
        // The WAL started over: the next wake-up is at the threshold again.
        assert!(!t.due(90));
        assert!(!t.due(4000));
        assert!(t.due(4100));
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
