//! The embedded default backend: one SQLite file in WAL mode, shared by every
//! node process on the machine.
//!
//! Concurrency is FoundationDB's, optimistic: a transaction reads from a
//! snapshot (its own read connection; readers never block the writer),
//! buffers its mutations ([`WriteBuffer`]), and records the key ranges it
//! read. At commit it takes the write lock (a fair hand-off between
//! processes, [`fair_lock`]), checks the conflict log for writes committed
//! after its snapshot that overlap its reads (→ [`StorageError::Conflict`]),
//! applies its mutations, logs its own write ranges and bumps the version,
//! all in one SQLite transaction. The log keeps about 10 s of history: twice
//! the 5 s transaction lifetime, so no live transaction's window is pruned.

pub mod checkpoint;
mod fair_lock;
mod group_commit;
mod heap;
mod schema;
pub mod wal_vfs;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::overlay::WriteBuffer;
use super::range::key_after;
use super::{Backend, BackendTransaction, KeyValue};
use crate::error::{Result, StorageError};
pub use fair_lock::FairLock;

/// How hard SQLite works to make a commit durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a commit is on disk when it returns (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: survives a process crash, not a power cut.
    Normal,
}

#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub path: PathBuf,
    pub durability: Durability,
    /// Idle read connections kept open for reuse.
    pub readers_idle_max: usize,
    /// Page size of a new file (an existing file keeps its own: WAL mode
    /// cannot change it). See [`PAGE_SIZE_BYTES_DEFAULT`].
    pub page_size_bytes: u32,
    /// Where WAL checkpoints run (see [`checkpoint`]).
    pub checkpoint: checkpoint::CheckpointMode,
    /// Page cache of the write connection, KiB ([`WRITER_CACHE_KIB`]).
    pub writer_cache_kib: u32,
    /// WAL pages after which a checkpoint runs
    /// ([`checkpoint::CHECKPOINT_AFTER_PAGES`]).
    pub checkpoint_after_pages: u32,
    /// WAL pages after which the checkpoint thread restarts the WAL
    /// ([`checkpoint`]); 0: never.
    pub restart_wal_after_pages: u32,
    /// The write connection writes each commit's WAL frames in one run
    /// ([`wal_vfs`]); false: SQLite's two writes per frame (A/B runs).
    /// Only with [`Durability::Full`]: without a sync at each commit nothing
    /// would write the run before SQLite shows the frames to readers.
    pub coalesce_wal_writes: bool,
}

/// The page size new files get. A `kv` row holds key + value in its
/// B-tree cell; SQLite keeps at most about (page − 12) · 64/255 − 23 bytes
/// of a cell in the page (~1,000 B at 4 KiB) and spills the rest to an
/// overflow page of its own. At 4 KiB every inline 1 KiB body (and most
/// message rows) took a mostly empty 4 KiB overflow page; 8 KiB pages keep
/// cells up to ~2 KB in place. Not yet isolated in `bench smtp` (see
/// soak/reports/ingest-2026-12-02.md).
pub const PAGE_SIZE_BYTES_DEFAULT: u32 = 8192;

impl SqliteOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteOptions {
            path: path.into(),
            durability: Durability::Full,
            readers_idle_max: 16,
            page_size_bytes: PAGE_SIZE_BYTES_DEFAULT,
            checkpoint: checkpoint::CheckpointMode::default(),
            writer_cache_kib: WRITER_CACHE_KIB,
            checkpoint_after_pages: checkpoint::CHECKPOINT_AFTER_PAGES,
            restart_wal_after_pages: checkpoint::CHECKPOINT_AFTER_PAGES,
            coalesce_wal_writes: true,
        }
    }
}

pub use crate::kv::faults::Faults;

struct Writer {
    conn: Connection,
    commits_since_prune: u32,
    /// When a commit last waited out the busy timeout (another process holds
    /// the file's write lock).
    last_busy: Option<Instant>,
}

struct Shared {
    options: SqliteOptions,
    /// Commits wait for their turn here, as tasks, before they take a
    /// blocking thread: waiting on `writer` instead parked one blocking
    /// thread per queued commit (a node ran ~490 of them under load, each
    /// with its stack and allocator cache). FIFO, so no commit starves.
    writer_turn: tokio::sync::Semaphore,
    /// Transactions waiting to be applied; the holder of `writer_turn`
    /// applies all of them in one SQLite transaction ([`group_commit`]).
    pending: Mutex<VecDeque<group_commit::CommitRequest>>,
    writer: Mutex<Writer>,
    /// Held while a commit writes; the checkpoint thread takes it to
    /// restart the WAL ([`checkpoint`]).
    commit_gate: Arc<checkpoint::CommitGate>,
    fair: FairLock,
    readers: Mutex<Vec<Connection>>,
    faults: Faults,
    /// The background checkpoint thread, if any (ends with the backend).
    checkpointer: Option<checkpoint::Checkpointer>,
}

/// The SQLite backend. Cheap to clone.
#[derive(Clone)]
pub struct SqliteBackend {
    shared: Arc<Shared>,
}

impl SqliteBackend {
    /// Opens or creates the database file (and its parent directory).
    pub fn open(options: SqliteOptions) -> Result<Self> {
        if let Some(dir) = options.path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        if !(64..=1_000_000).contains(&options.checkpoint_after_pages) {
            return Err(StorageError::Backend(format!(
                "checkpoint_after_pages {} is not in 64..=1000000",
                options.checkpoint_after_pages
            )));
        }
        if !(512..=65536).contains(&options.page_size_bytes) || !options.page_size_bytes.is_power_of_two() {
            return Err(StorageError::Backend(format!(
                "page_size_bytes {} is not a power of two in 512..=65536",
                options.page_size_bytes
            )));
        }
        let fair = FairLock::open(&options.path)?;
        // Only with a sync at every commit: that sync is what writes the
        // run before SQLite publishes the frames to readers (see wal_vfs).
        let vfs = if options.coalesce_wal_writes && options.durability == Durability::Full {
            wal_vfs::register()
                .map_err(|rc| StorageError::Backend(format!("registering the WAL-run VFS: SQLite error {rc}")))?;
            Some(wal_vfs::VFS_NAME)
        } else {
            None
        };
        let mut conn = open_connection_sized(&options.path, options.durability, Some(options.page_size_bytes), vfs)?;
        conn.execute_batch(&format!("PRAGMA cache_size=-{}", options.writer_cache_kib))
            .map_err(sql_err)?;
        if vfs.is_some() {
            // No frames before the commit's: a transaction that spilled
            // dirty pages to the WAL and then rolled back would leave a run
            // behind that no sync writes out, and writing it later could
            // land on frames another process committed since. Without
            // spills, every WAL write is followed by the commit's sync (or
            // by an error that dropped the run). The cache may exceed
            // cache_size for one transaction's dirty pages instead (at most
            // FDB's 10 MB of writes per transaction, 16 MB per group).
            conn.execute_batch(wal_vfs::WRITER_PRAGMAS).map_err(sql_err)?;
        }
        {
            // Schema creation races with other processes opening the same file.
            let _guard = fair.acquire()?;
            schema::create(&conn).map_err(sql_err)?;
        }
        let commit_gate = Arc::new(checkpoint::CommitGate::default());
        let checkpointer = checkpoint::install(&mut conn, &options, &commit_gate)?;
        Ok(SqliteBackend {
            shared: Arc::new(Shared {
                writer: Mutex::new(Writer {
                    conn,
                    commits_since_prune: 0,
                    last_busy: None,
                }),
                commit_gate,
                fair,
                writer_turn: tokio::sync::Semaphore::new(1),
                pending: Mutex::new(VecDeque::new()),
                readers: Mutex::new(Vec::new()),
                faults: Faults::default(),
                checkpointer,
                options,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.shared.options.path
    }

    /// WAL restarts that readers held up in this backend (0 without the
    /// background checkpoint thread).
    pub fn restarts_postponed(&self) -> u64 {
        self.shared
            .checkpointer
            .as_ref()
            .map_or(0, checkpoint::Checkpointer::restarts_postponed)
    }

    /// Fault injection for tests.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Folds the WAL into the main file and truncates it
    /// (`wal_checkpoint(TRUNCATE)`), under the writer lock: what the file
    /// costs on disk once nothing is pending (benchmarks, operators).
    pub fn checkpoint_truncate(&self) -> Result<()> {
        let writer = self.shared.writer.lock().expect("writer poisoned");
        let _guard = self.shared.fair.acquire()?;
        let busy: i64 = writer
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(sql_err)?;
        if busy != 0 {
            return Err(StorageError::Unavailable("checkpoint blocked by a reader".into()));
        }
        Ok(())
    }
}

fn open_connection(path: &Path, durability: Durability) -> Result<Connection> {
    let conn = open_connection_sized(path, durability, None, None)?;
    conn.execute_batch(&format!("PRAGMA cache_size=-{READER_CACHE_KIB}"))
        .map_err(sql_err)?;
    Ok(conn)
}

/// Page cache of each read connection, KiB. SQLite's default (2 MiB) times
/// the pooled readers (up to 16) and the writer put ~34 MiB of cache in
/// every node, filled slowly as the file grows: resident memory that
/// crept for half an hour. Reads that miss it are served by the OS's page
/// cache, which all connections and processes share.
const READER_CACHE_KIB: u32 = 1024;
/// Page cache of the one write connection, KiB: the B-tree's inner pages
/// that every commit walks stay in it.
pub const WRITER_CACHE_KIB: u32 = 4096;

/// Bytes of heap SQLite holds in this process (page caches, statements,
/// schemas): the `meshmail_kv_sqlite_heap_bytes` gauge.
pub fn heap_bytes() -> i64 {
    // SAFETY: sqlite3_memory_used only reads SQLite's global counter.
    unsafe { rusqlite::ffi::sqlite3_memory_used() }
}

/// Opens a connection; `page_size_bytes` applies only to a file that has
/// no pages yet (it must be set before WAL mode and the first table);
/// `vfs`: a registered VFS by name (the writer's [`wal_vfs`]), or SQLite's default.
fn open_connection_sized(
    path: &Path,
    durability: Durability,
    page_size_bytes: Option<u32>,
    vfs: Option<&std::ffi::CStr>,
) -> Result<Connection> {
    let conn = match vfs {
        Some(name) => Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), name),
        None => Connection::open(path),
    }
    .map_err(sql_err)?;
    if let Some(size) = page_size_bytes {
        conn.execute_batch(&format!("PRAGMA page_size={size}"))
            .map_err(sql_err)?;
    }
    // SQLite's busy handler only matters for processes that bypass the fair
    // lock (the sqlite3 shell, a checkpoint): wait instead of failing.
    conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(sql_err)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(sql_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StorageError::Backend(format!(
            "could not enable WAL (journal_mode={mode})"
        )));
    }
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.execute_batch(&format!("PRAGMA synchronous={sync}; PRAGMA foreign_keys=OFF;"))
        .map_err(sql_err)?;
    Ok(conn)
}

/// Maps SQLite errors: lock contention is retryable; a full or read-only
/// disk is `Unwritable` (fails fast); the rest is not retryable.
fn sql_err(e: rusqlite::Error) -> StorageError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StorageError::Unavailable(e.to_string()),
        Some(ErrorCode::DiskFull) => StorageError::Unwritable {
            full: true,
            detail: e.to_string(),
        },
        Some(ErrorCode::ReadOnly) => StorageError::Unwritable {
            full: false,
            detail: e.to_string(),
        },
        _ => StorageError::Backend(e.to_string()),
    }
}

fn join_err(e: tokio::task::JoinError) -> StorageError {
    StorageError::Backend(format!("storage worker failed: {e}"))
}

#[async_trait]
impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn faults(&self) -> Option<&Faults> {
        Some(&self.shared.faults)
    }

    async fn begin(&self, read_only: bool) -> Result<Box<dyn BackendTransaction>> {
        Ok(Box::new(SqliteTxn {
            shared: self.shared.clone(),
            state: Arc::new(Mutex::new(TxnState::default())),
            read_only,
        }))
    }
}

/// A read transaction pinned on one connection, and the version it sees.
struct Snapshot {
    conn: Connection,
    version: i64,
}

#[derive(Default)]
struct TxnState {
    snapshot: Option<Snapshot>,
    buffer: WriteBuffer,
    /// Read-conflict ranges `[begin, end)`.
    reads: Vec<(Vec<u8>, Vec<u8>)>,
}

struct SqliteTxn {
    shared: Arc<Shared>,
    state: Arc<Mutex<TxnState>>,
    read_only: bool,
}

impl Drop for SqliteTxn {
    fn drop(&mut self) {
        if let Ok(mut st) = self.state.lock()
            && let Some(snap) = st.snapshot.take()
        {
            self.shared.release_reader(snap.conn);
        }
    }
}

impl Shared {
    /// Pins the transaction's read snapshot on first use.
    fn ensure_snapshot(&self, st: &mut TxnState) -> Result<()> {
        if st.snapshot.is_none() {
            let pooled = self.readers.lock().expect("reader pool poisoned").pop();
            let conn = match pooled {
                Some(c) => c,
                None => open_connection(&self.options.path, self.options.durability)?,
            };
            // Cached, like ROLLBACK below: a read transaction parses no SQL.
            conn.prepare_cached("BEGIN DEFERRED")
                .and_then(|mut begin| begin.execute([]))
                .map_err(sql_err)?;
            // The first read pins the WAL snapshot; the version comes with it.
            let version = schema::read_version(&conn).map_err(sql_err)?;
            st.snapshot = Some(Snapshot { conn, version });
        }
        Ok(())
    }

    fn release_reader(&self, conn: Connection) {
        let ended = conn
            .prepare_cached("ROLLBACK")
            .and_then(|mut rollback| rollback.execute([]));
        if ended.is_err() {
            return; // A broken connection is dropped, not pooled.
        }
        let mut pool = self.readers.lock().expect("reader pool poisoned");
        if pool.len() < self.options.readers_idle_max {
            pool.push(conn);
        }
    }
}

/// The reads' SQL, named so the test of the statement cache looks up the
/// very statements the reads use.
const POINT_READ: &str = "SELECT v FROM kv WHERE k = ?1";
const RANGE_READ: &str = "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k ASC";
const RANGE_READ_REVERSE: &str = "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k DESC";

fn read_one(conn: &Connection, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let cell = read_cell(conn, key)?;
    cell.map(|c| c.resolve(conn)).transpose().map_err(sql_err)
}

/// The `kv` cell of `key`: the value, or where it lives in the heap.
fn read_cell(conn: &Connection, key: &[u8]) -> Result<Option<heap::Cell>> {
    let mut stmt = conn.prepare_cached(POINT_READ).map_err(sql_err)?;
    stmt.query_row(params![key], |r| heap::Cell::from_sql(r.get_ref(0)?))
        .optional()
        .map_err(sql_err)
}

/// [`read_one`] of the first `len` bytes: a value in the heap is read
/// through an incremental blob handle, which touches only the pages that
/// hold those bytes (a 10 KB body's header is in its first page).
fn read_prefix(conn: &Connection, key: &[u8], len: usize) -> Result<Option<(Vec<u8>, usize)>> {
    match read_cell(conn, key)? {
        None => Ok(None),
        Some(heap::Cell::Inline(v)) => Ok(Some(super::cut(v, len))),
        Some(heap::Cell::Heap(id)) => heap::read_prefix(conn, id, len).map(Some).map_err(sql_err),
    }
}

fn read_range(conn: &Connection, begin: &[u8], end: &[u8], limit: usize, reverse: bool) -> Result<Vec<KeyValue>> {
    // No `LIMIT ?`: SQLite re-prepares a statement whose LIMIT is a bound
    // parameter at every execution (the value may change the plan), ~6 % of
    // the node's CPU serving FETCH FLAGS. The scan walks the primary key in
    // order, so taking `limit` rows stops it as early as LIMIT would.
    let sql = if reverse { RANGE_READ_REVERSE } else { RANGE_READ };
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params![begin, end], |r| {
            Ok((r.get(0)?, heap::Cell::from_sql(r.get_ref(1)?)?))
        })
        .map_err(sql_err)?;
    let cells = rows
        .take(limit)
        .collect::<std::result::Result<Vec<(Vec<u8>, heap::Cell)>, _>>()
        .map_err(sql_err)?;
    drop(stmt);
    cells
        .into_iter()
        .map(|(k, c)| Ok((k, c.resolve(conn).map_err(sql_err)?)))
        .collect()
}

#[async_trait]
impl BackendTransaction for SqliteTxn {
    async fn get(&self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>> {
        // A point read is one B-tree lookup (microseconds, usually from the
        // page cache): done in place, it costs less than the hand-off to a
        // blocking thread would. Range reads and commits (fsync) still go to
        // the blocking pool.
        let mut guard = self.state.lock().expect("txn state poisoned");
        let st = &mut *guard;
        self.shared.ensure_snapshot(st)?;
        let snap = st.snapshot.as_ref().expect("snapshot pinned");
        let value = st.buffer.get(key, |k| read_one(&snap.conn, k))?;
        if !snapshot {
            st.reads.push((key.to_vec(), key_after(key)));
        }
        Ok(value)
    }

    async fn get_prefix(&self, key: &[u8], len: usize, snapshot: bool) -> Result<Option<(Vec<u8>, usize)>> {
        let mut guard = self.state.lock().expect("txn state poisoned");
        let st = &mut *guard;
        self.shared.ensure_snapshot(st)?;
        let snap = st.snapshot.as_ref().expect("snapshot pinned");
        let value = if st.buffer.touches(key) {
            st.buffer
                .get(key, |k| read_one(&snap.conn, k))?
                .map(|v| super::cut(v, len))
        } else {
            read_prefix(&snap.conn, key, len)?
        };
        if !snapshot {
            st.reads.push((key.to_vec(), key_after(key)));
        }
        Ok(value)
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>> {
        let (shared, state) = (self.shared.clone(), self.state.clone());
        let (begin, end) = (begin.to_vec(), end.to_vec());
        tokio::task::spawn_blocking(move || {
            let mut guard = state.lock().expect("txn state poisoned");
            let st = &mut *guard;
            shared.ensure_snapshot(st)?;
            let snap = st.snapshot.as_ref().expect("snapshot pinned");
            let rows = st.buffer.get_range(&begin, &end, limit, reverse, |b, e, n, r| {
                read_range(&snap.conn, b, e, n, r)
            })?;
            if !snapshot {
                // Only the part of the range the caller saw can conflict.
                let range = match rows.last() {
                    Some((last, _)) if rows.len() == limit && reverse => (last.clone(), end),
                    Some((last, _)) if rows.len() == limit => (begin, key_after(last)),
                    _ => (begin, end),
                };
                st.reads.push(range);
            }
            Ok(rows)
        })
        .await
        .map_err(join_err)?
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        self.state.lock().expect("txn state poisoned").buffer.set(key, value);
    }

    fn clear(&self, key: &[u8]) {
        self.state.lock().expect("txn state poisoned").buffer.clear(key);
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) {
        self.state
            .lock()
            .expect("txn state poisoned")
            .buffer
            .clear_range(begin, end);
    }

    fn atomic_add(&self, key: &[u8], operand: &[u8]) {
        self.state.lock().expect("txn state poisoned").buffer.add(key, operand);
    }

    async fn commit(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let (read_version, reads, mutations) = {
            let mut st = self.state.lock().expect("txn state poisoned");
            let read_version = st.snapshot.as_ref().map(|s| s.version);
            if let Some(snap) = st.snapshot.take() {
                self.shared.release_reader(snap.conn);
            }
            if st.buffer.is_empty() {
                return Ok(());
            }
            (read_version, std::mem::take(&mut st.reads), st.buffer.take_mutations())
        };
        self.shared.commit_queued(read_version, reads, mutations).await
    }
}

#[cfg(test)]
mod tests {
    use super::group_commit::overlaps_any;
    use super::*;

    fn r(b: &[u8], e: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (b.to_vec(), e.to_vec())
    }

    fn page_size(path: &Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_new_file_gets_the_page_size_and_an_existing_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.sqlite");
        let mut opts = SqliteOptions::new(&path);
        drop(SqliteBackend::open(opts.clone()).unwrap());
        assert_eq!(page_size(&path), i64::from(PAGE_SIZE_BYTES_DEFAULT));
        opts.page_size_bytes = 16384;
        drop(SqliteBackend::open(opts.clone()).unwrap());
        assert_eq!(page_size(&path), i64::from(PAGE_SIZE_BYTES_DEFAULT));
        opts.page_size_bytes = 1000;
        assert!(SqliteBackend::open(opts).is_err());
    }

    /// A pooled reader keeps its prepared statements across reads and
    /// transactions: none is re-prepared (a bound LIMIT made SQLite
    /// re-prepare the range read at every execution).
    #[tokio::test]
    async fn read_transactions_reuse_their_prepared_statements() {
        use rusqlite::StatementStatus;
        let dir = tempfile::tempdir().unwrap();
        let backend = SqliteBackend::open(SqliteOptions::new(dir.path().join("kv.sqlite"))).unwrap();
        let txn = backend.begin(false).await.unwrap();
        txn.set(b"a", b"1");
        txn.commit().await.unwrap();
        for _ in 0..5 {
            let txn = backend.begin(true).await.unwrap();
            assert_eq!(txn.get_range(b"a", b"b", 10, false, true).await.unwrap().len(), 1);
            assert_eq!(txn.get(b"a", true).await.unwrap().as_deref(), Some(&b"1"[..]));
        }
        let pool = backend.shared.readers.lock().unwrap();
        assert_eq!(pool.len(), 1, "one reader served every transaction");
        let conn = &pool[0];
        let range = conn.prepare_cached(RANGE_READ).unwrap();
        assert_eq!(
            range.get_status(StatementStatus::RePrepare),
            0,
            "range read re-prepared"
        );
        drop(range);
        let point = conn.prepare_cached(POINT_READ).unwrap();
        assert_eq!(
            point.get_status(StatementStatus::RePrepare),
            0,
            "point read re-prepared"
        );
    }

    #[test]
    fn overlap_detection() {
        let writes = vec![r(b"c", b"d"), r(b"a", b"b")];
        assert!(overlaps_any(&[r(b"a", b"a\0")], writes.clone()));
        assert!(overlaps_any(&[r(b"b", b"z")], writes.clone()));
        assert!(!overlaps_any(&[r(b"b", b"c")], writes.clone()));
        assert!(!overlaps_any(&[r(b"d", b"e")], writes));
    }
}
