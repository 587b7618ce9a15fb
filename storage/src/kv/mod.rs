//! The transactional key-value abstraction, shaped like FoundationDB's model.
//!
//! * [`Backend`] / [`BackendTransaction`] are what a store implements
//!   (SQLite here, FoundationDB behind the `fdb` feature). They stay small.
//! * [`Database`] and [`Txn`] are what callers use. They live in shared code
//!   and enforce FDB's limits (key, value, bytes written, lifetime) on every
//!   backend, run the retry loop, and time every stage for the metrics.
//!
//! Semantics every backend provides: serializable read-write transactions
//! with read-your-writes; snapshot reads that add no read conflict; atomic
//! add on little-endian integers that adds no read conflict; commit either
//! applies every mutation or none.

mod faults;
#[cfg(feature = "fdb")]
pub mod fdb;
mod limits;
pub mod overlay;
mod range;
mod retry;
pub mod sqlite;

pub use faults::Faults;
pub use limits::*;
pub use range::{RangeCursor, RangeOptions, key_after, prefix_range, strinc};
pub use retry::{Idempotent, RetryPolicy};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;

use crate::error::{Result, StorageError};

/// One key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A value cut to its first `len` bytes, with its whole length.
pub fn cut(mut value: Vec<u8>, len: usize) -> (Vec<u8>, usize) {
    let whole = value.len();
    value.truncate(len);
    (value, whole)
}

/// One transaction of a backend. Mutations are buffered or applied as the
/// backend likes, but reads must see the transaction's own writes.
#[async_trait]
pub trait BackendTransaction: Send + Sync {
    /// Point read. `snapshot` reads add no read conflict.
    async fn get(&self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>>;
    /// The first `len` bytes of a value (all of a shorter one) and the
    /// whole value's length. By default the value is read whole and cut
    /// (FoundationDB has no partial read); SQLite reads only the pages of
    /// the prefix of a value in its heap (incremental blob I/O).
    async fn get_prefix(&self, key: &[u8], len: usize, snapshot: bool) -> Result<Option<(Vec<u8>, usize)>> {
        Ok(self.get(key, snapshot).await?.map(|v| cut(v, len)))
    }
    /// Keys in `[begin, end)`, at most `limit` (never 0), ascending or
    /// descending. `snapshot` reads add no read conflict.
    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>>;
    fn set(&self, key: &[u8], value: &[u8]);
    fn clear(&self, key: &[u8]);
    fn clear_range(&self, begin: &[u8], end: &[u8]);
    /// FDB's `ADD` mutation: little-endian, operand width wins, wraps.
    fn atomic_add(&self, key: &[u8], operand: &[u8]);
    /// Applies every mutation or none. May fail with `Conflict`, or with
    /// `CommitUnknown` when the outcome cannot be known.
    async fn commit(&self) -> Result<()>;
}

/// A transactional ordered key-value store.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// "sqlite" or "fdb": for logs, metrics and `/status`.
    fn name(&self) -> &'static str;
    /// Starts a transaction. `read_only` transactions are never committed.
    async fn begin(&self, read_only: bool) -> Result<Box<dyn BackendTransaction>>;
    /// The backend's commit fault hooks, where it has them (SQLite always;
    /// FoundationDB with the `fault-hooks` feature): tests and the node's
    /// fault endpoint inject through here.
    fn faults(&self) -> Option<&Faults> {
        None
    }
}

/// A handle to a transactional store with FDB's limits and a retry loop.
#[derive(Clone)]
pub struct Database {
    backend: Arc<dyn Backend>,
    limits: Limits,
    retry: RetryPolicy,
    /// The store format this process writes records in, shared by every
    /// clone (see `model::format_switch`). 0 until set: the model then
    /// writes the last format before the cluster-wide switch existed.
    write_format: Arc<AtomicU32>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("backend", &self.backend.name())
            .field("limits", &self.limits)
            .finish()
    }
}

impl Database {
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Database {
            backend,
            limits: Limits::default(),
            retry: RetryPolicy::default(),
            write_format: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The store format transactions begun from now on write (0: unset).
    pub fn write_format(&self) -> u32 {
        self.write_format.load(Ordering::Relaxed)
    }

    /// Sets the format this process writes. Only raised: a node sets the
    /// store's format once it has read it committed (or switched it), and
    /// a format, once switched on, is never switched off.
    pub fn raise_write_format(&self, format: u32) {
        self.write_format.fetch_max(format, Ordering::Relaxed);
    }

    /// Replaces the limits. Only tests shrink them; raising them above FDB's
    /// would let code pass here that fails in production.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// The backend's commit fault hooks, if it has them (see [`Backend::faults`]).
    pub fn faults(&self) -> Option<&Faults> {
        self.backend.faults()
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Begins one attempt of a transaction without any retry: for tests and
    /// for callers that run their own loop.
    pub async fn begin(&self, read_only: bool) -> Result<Txn> {
        self.begin_attempt(read_only, 0, false).await
    }

    async fn begin_attempt(&self, read_only: bool, attempt: u32, maybe_committed: bool) -> Result<Txn> {
        let raw = self.backend.begin(read_only).await?;
        Ok(Txn {
            inner: Arc::new(TxnInner {
                raw,
                limits: self.limits,
                started: Instant::now(),
                written_bytes: AtomicUsize::new(0),
                read_only,
                attempt,
                maybe_committed,
                write_format: self.write_format(),
            }),
        })
    }
}

struct TxnInner {
    raw: Box<dyn BackendTransaction>,
    limits: Limits,
    started: Instant,
    written_bytes: AtomicUsize,
    read_only: bool,
    attempt: u32,
    maybe_committed: bool,
    write_format: u32,
}

/// One attempt of a transaction. Cheap to clone (all clones are the same
/// transaction), so closures can take it by value and hold it across awaits.
#[derive(Clone)]
pub struct Txn {
    inner: Arc<TxnInner>,
}

impl Txn {
    /// 0 for the first attempt, then 1, 2, ...
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// True when an earlier attempt of this transaction ended with an unknown
    /// commit outcome: an idempotent closure checks its marker first.
    pub fn maybe_committed(&self) -> bool {
        self.inner.maybe_committed
    }

    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The store format this transaction writes records in: the
    /// database's when the attempt began ([`Database::write_format`]), one
    /// value for the whole attempt.
    pub fn write_format(&self) -> u32 {
        self.inner.write_format
    }

    /// Bytes of mutations written so far (keys + values), as FDB counts them
    /// against its 10 MB limit.
    pub fn written_bytes(&self) -> usize {
        self.inner.written_bytes.load(Ordering::Relaxed)
    }

    fn check_alive(&self) -> Result<()> {
        let limit = self.inner.limits.txn_lifetime_max;
        if self.inner.started.elapsed() > limit {
            return Err(StorageError::TransactionTooOld {
                limit_ms: limit.as_millis() as u64,
            });
        }
        Ok(())
    }

    fn check_write(&self, key: &[u8], value_len: usize) -> Result<()> {
        if self.inner.read_only {
            return Err(StorageError::ReadOnly);
        }
        self.check_alive()?;
        self.inner.limits.check_key(key)?;
        let added = key.len() + value_len;
        let total = self.inner.written_bytes.fetch_add(added, Ordering::Relaxed) + added;
        if total > self.inner.limits.txn_write_max_bytes {
            return Err(StorageError::TransactionTooLarge {
                size: total,
                limit: self.inner.limits.txn_write_max_bytes,
            });
        }
        Ok(())
    }

    /// Reads one key (with a read conflict).
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_alive()?;
        self.inner.limits.check_key(key)?;
        self.inner.raw.get(key, self.inner.read_only).await
    }

    /// The first `len` bytes of one key's value (all of a shorter one) and
    /// the whole value's length, read as [`Txn::get`] reads: a body's
    /// header section without reading its body (see
    /// [`BackendTransaction::get_prefix`]).
    pub async fn get_prefix(&self, key: &[u8], len: usize) -> Result<Option<(Vec<u8>, usize)>> {
        self.check_alive()?;
        self.inner.limits.check_key(key)?;
        self.inner.raw.get_prefix(key, len, self.inner.read_only).await
    }

    /// Reads one key without a read conflict: a concurrent change to it will
    /// not make this transaction retry.
    pub async fn get_snapshot(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_alive()?;
        self.inner.limits.check_key(key)?;
        self.inner.raw.get(key, true).await
    }

    /// Reads at most `opts.limit` keys of `[begin, end)`. For more than
    /// [`RANGE_CHUNK_MAX`] keys use [`Txn::range_cursor`].
    pub async fn get_range(&self, begin: &[u8], end: &[u8], opts: RangeOptions) -> Result<Vec<KeyValue>> {
        self.check_alive()?;
        self.inner.limits.check_key(begin)?;
        self.inner.limits.check_key(end)?;
        if begin >= end {
            return Ok(Vec::new());
        }
        let limit = opts.limit.clamp(1, RANGE_CHUNK_MAX);
        let snapshot = opts.snapshot || self.inner.read_only;
        let rows = self
            .inner
            .raw
            .get_range(begin, end, limit, opts.reverse, snapshot)
            .await?;
        debug_assert!(rows.len() <= limit, "backend returned more rows than the limit");
        Ok(rows)
    }

    /// A cursor that streams `[begin, end)` in chunks of at most `chunk` keys.
    pub fn range_cursor(&self, begin: &[u8], end: &[u8], chunk: usize, reverse: bool) -> RangeCursor {
        RangeCursor::new(self.clone(), begin, end, chunk, reverse)
    }

    pub fn set(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_write(key, value.len())?;
        self.inner.limits.check_value(value)?;
        self.inner.raw.set(key, value);
        Ok(())
    }

    pub fn clear(&self, key: &[u8]) -> Result<()> {
        self.check_write(key, 0)?;
        self.inner.raw.clear(key);
        Ok(())
    }

    pub fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<()> {
        self.check_write(begin, end.len())?;
        self.inner.limits.check_key(end)?;
        if begin < end {
            self.inner.raw.clear_range(begin, end);
        }
        Ok(())
    }

    /// Adds `delta` to the little-endian i64 at `key` (absent = 0), without
    /// a read conflict: many transactions can add concurrently.
    pub fn add_i64(&self, key: &[u8], delta: i64) -> Result<()> {
        self.check_write(key, 8)?;
        self.inner.raw.atomic_add(key, &delta.to_le_bytes());
        Ok(())
    }

    /// Reads a little-endian i64 counter written by [`Txn::add_i64`].
    pub async fn get_i64(&self, key: &[u8]) -> Result<i64> {
        Ok(decode_i64(self.get(key).await?.as_deref()))
    }

    /// Commits this attempt. [`Database::run`] does this for you (and
    /// retries); call it only when driving a transaction by hand.
    pub async fn commit(&self) -> Result<()> {
        self.check_alive()?;
        self.inner.raw.commit().await
    }
}

/// Decodes a little-endian integer of up to 8 bytes (absent = 0).
pub fn decode_i64(value: Option<&[u8]>) -> i64 {
    let mut buf = [0u8; 8];
    if let Some(v) = value {
        let n = v.len().min(8);
        buf[..n].copy_from_slice(&v[..n]);
    }
    i64::from_le_bytes(buf)
}

/// The largest number of keys one range read returns: bounds memory and keeps
/// every read well inside the 5 s lifetime.
pub const RANGE_CHUNK_MAX: usize = 10_000;
