//! The FoundationDB backend (feature `fdb`): a thin mapping of the KV traits
//! onto a real FDB cluster.
//!
//! FDB already provides every semantic the traits promise (serializable
//! optimistic transactions, read-your-writes, snapshot reads, atomic `ADD`),
//! so this module only translates calls and errors. It deliberately has no
//! retry loop: `Database::run` retries the errors classified here as
//! retryable, the same way for every backend, and tracks "maybe committed"
//! across attempts. Retrying here as well would multiply attempts and hide
//! unknown commit outcomes from the idempotency logic.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use async_trait::async_trait;
use foundationdb::api::{FdbApiBuilder, NetworkAutoStop};
use foundationdb::options::{MutationType, StreamingMode, TransactionOption};
use foundationdb::{FdbError, RangeOption, Transaction};

use super::{Backend, BackendTransaction, KeyValue, TXN_LIFETIME_MAX};
use crate::error::{Result, StorageError};

/// FDB's own per-transaction timeout, set to the shared 5 s lifetime so a
/// read or commit stuck on an unreachable cluster fails instead of hanging.
const TIMEOUT_MS: i32 = TXN_LIFETIME_MAX.as_millis() as i32;

const NOT_COMMITTED: i32 = 1020;
const COMMIT_UNKNOWN_RESULT: i32 = 1021;
const TRANSACTION_TOO_OLD: i32 = 1007;
const TRANSACTION_TIMED_OUT: i32 = 1031;

/// The client's network thread, booted at most once per process.
///
/// libfdb_c allows selecting the API version and running its network loop
/// only once per process; a second boot panics and a stopped network cannot
/// be restarted. So the first `open` boots it and the guard lives here, in a
/// static, for the rest of the process: every `Database` and in-flight
/// future depends on that thread, and dropping the guard would stop it under
/// them. A failed boot is remembered too, since it cannot be retried either.
/// The guard sits in a `Mutex<Option<_>>` only so that [`stop_network`] can
/// honour `boot`'s contract (stop the loop before exit) at shutdown.
static NETWORK: OnceLock<std::result::Result<Mutex<Option<NetworkAutoStop>>, FdbError>> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent even if a holder panicked: it is only
    // ever moved in or out whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ensure_network() -> Result<()> {
    let state = NETWORK.get_or_init(|| {
        // The builder path is `foundationdb::boot()` without its panics: a
        // libfdb_c too old for API 7.3 becomes an error for `open` to return.
        let builder = FdbApiBuilder::default().build()?;
        // SAFETY: `boot` requires the returned guard to be dropped before the
        // process exits. It is kept in `NETWORK` for the process lifetime and
        // dropped by `stop_network`, which the binary should call at shutdown;
        // without it the process exits with the loop running (FDB's Go
        // binding never stops it either), which is the only other option.
        let guard = unsafe { builder.boot() }?;
        Ok(Mutex::new(Some(guard)))
    });
    match state {
        Ok(guard) if lock(guard).is_some() => Ok(()),
        Ok(_) => Err(StorageError::Backend("FoundationDB network already stopped".into())),
        // Not `map_err`: a failed boot is permanent, never worth retrying.
        Err(e) => Err(StorageError::Backend(format!(
            "FoundationDB client failed to start: fdb error {}: {}",
            e.code(),
            e.message()
        ))),
    }
}

/// Stops the FDB network thread and waits for it. Call once, at process
/// shutdown, after the last transaction: FDB cannot restart it, so every
/// later `open` fails and outstanding futures never resolve.
pub fn stop_network() {
    if let Some(Ok(guard)) = NETWORK.get() {
        drop(lock(guard).take());
    }
}

/// Classifies an FDB error for the shared retry loop. `in_commit` says the
/// error came from `commit`, where a timeout leaves the outcome unknown.
fn map_err(e: FdbError, in_commit: bool) -> StorageError {
    let too_old = || StorageError::TransactionTooOld {
        limit_ms: TXN_LIFETIME_MAX.as_millis() as u64,
    };
    match e.code() {
        NOT_COMMITTED => StorageError::Conflict,
        COMMIT_UNKNOWN_RESULT => StorageError::CommitUnknown,
        TRANSACTION_TOO_OLD => too_old(),
        // The commit may have reached the cluster before the timer fired.
        TRANSACTION_TIMED_OUT if in_commit => StorageError::CommitUnknown,
        // Our own 5 s timer: the same verdict the shared lifetime check gives.
        TRANSACTION_TIMED_OUT => too_old(),
        // Other "maybe committed" codes (e.g. 1039 cluster_version_changed)
        // must not pass as `Unavailable`: the retry loop would then not tell
        // the next attempt to check its idempotency marker.
        _ if e.is_maybe_committed() => StorageError::CommitUnknown,
        code if e.is_retryable() => StorageError::Unavailable(format!("fdb error {code}: {}", e.message())),
        code => StorageError::Backend(format!("fdb error {code}: {}", e.message())),
    }
}

/// The FoundationDB backend. Cheap to clone: clones share one client handle.
#[derive(Clone)]
pub struct FdbBackend {
    db: Arc<foundationdb::Database>,
    /// Prepended to every key this backend reads or writes, and stripped
    /// from every key it returns: one cluster can hold several meshes (or
    /// test runs) that never see each other's keys. Empty by default.
    prefix: Arc<[u8]>,
    #[cfg(feature = "fault-hooks")]
    faults: Arc<super::Faults>,
}

impl std::fmt::Debug for FdbBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FdbBackend")
    }
}

impl FdbBackend {
    /// Connects using `cluster_file`, or FDB's default cluster file (the
    /// `FDB_CLUSTER_FILE` variable, then `/etc/foundationdb/fdb.cluster`).
    /// The cluster itself is only contacted by the first transaction.
    pub fn open(cluster_file: Option<&Path>) -> Result<FdbBackend> {
        Self::open_prefixed(cluster_file, &[])
    }

    /// As [`FdbBackend::open`], with every key under `prefix` (see the field).
    pub fn open_prefixed(cluster_file: Option<&Path>, prefix: &[u8]) -> Result<FdbBackend> {
        let path = match cluster_file {
            None => None,
            Some(p) => match p.to_str() {
                // The C API takes a NUL-terminated string; the binding would
                // panic on an interior NUL, so refuse it here.
                Some(s) if !s.contains('\0') => Some(s),
                _ => {
                    return Err(StorageError::Backend(format!(
                        "unusable FDB cluster file path: {}",
                        p.display()
                    )));
                }
            },
        };
        ensure_network()?;
        let db = foundationdb::Database::new(path).map_err(|e| map_err(e, false))?;
        Ok(FdbBackend {
            db: Arc::new(db),
            prefix: prefix.into(),
            #[cfg(feature = "fault-hooks")]
            faults: Arc::default(),
        })
    }

    /// Fault injection for tests (compiled only with `fault-hooks`): an
    /// unknown outcome after a real commit, or a store that refuses commits.
    #[cfg(feature = "fault-hooks")]
    pub fn faults(&self) -> &super::Faults {
        &self.faults
    }
}

#[async_trait]
impl Backend for FdbBackend {
    fn name(&self) -> &'static str {
        "fdb"
    }

    #[cfg(feature = "fault-hooks")]
    fn faults(&self) -> Option<&super::Faults> {
        Some(&self.faults)
    }

    async fn begin(&self, read_only: bool) -> Result<Box<dyn BackendTransaction>> {
        let trx = self.db.create_trx().map_err(|e| map_err(e, false))?;
        trx.set_option(TransactionOption::Timeout(TIMEOUT_MS))
            .map_err(|e| map_err(e, false))?;
        Ok(Box::new(FdbTxn {
            trx: Mutex::new(Some(trx)),
            read_only,
            #[cfg(feature = "fault-hooks")]
            wrote: Default::default(),
            prefix: self.prefix.clone(),
            #[cfg(feature = "fault-hooks")]
            faults: self.faults.clone(),
        }))
    }
}

/// One FDB transaction. `commit` takes `&self` but FDB's commit consumes the
/// transaction, so it lives in an `Option` that commit empties.
struct FdbTxn {
    trx: Mutex<Option<Transaction>>,
    read_only: bool,
    /// Whether any mutation was issued: FDB commits a transaction without
    /// one locally, never reaching the cluster, so no fault applies to it.
    #[cfg(feature = "fault-hooks")]
    wrote: std::sync::atomic::AtomicBool,
    prefix: Arc<[u8]>,
    #[cfg(feature = "fault-hooks")]
    faults: Arc<super::Faults>,
}

impl FdbTxn {
    /// Runs `f` on the live transaction. FDB's read futures do not borrow the
    /// transaction, so callers await them after the lock is released.
    fn with<T>(&self, f: impl FnOnce(&Transaction) -> T) -> Result<T> {
        lock(&self.trx)
            .as_ref()
            .map(f)
            .ok_or_else(|| StorageError::Backend("FDB transaction used after commit".into()))
    }

    /// The key as stored: under the backend's prefix.
    fn full(&self, key: &[u8]) -> Vec<u8> {
        [&self.prefix[..], key].concat()
    }

    /// Mutations cannot report errors through the trait; one issued after
    /// commit is a caller bug, so make it visible rather than silent.
    fn mutate(&self, f: impl FnOnce(&Transaction)) {
        #[cfg(feature = "fault-hooks")]
        self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = self.with(f) {
            tracing::error!(error = %e, "mutation dropped");
        }
    }
}

#[async_trait]
impl BackendTransaction for FdbTxn {
    async fn get(&self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>> {
        let read = self.with(|t| t.get(&self.full(key), snapshot))?;
        let value = read.await.map_err(|e| map_err(e, false))?;
        Ok(value.map(|v| v.to_vec()))
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>> {
        // WantAll asks for as much as possible per round trip, but FDB may
        // still answer in batches (byte limits, shard boundaries): follow
        // `more` until the limit is met or the range is exhausted.
        let mut opt = RangeOption {
            limit: Some(limit),
            reverse,
            mode: StreamingMode::WantAll,
            ..RangeOption::from((self.full(begin), self.full(end)))
        };
        let mut rows = Vec::new();
        let mut iteration = 1;
        loop {
            let read = self.with(|t| t.get_range(&opt, iteration, snapshot))?;
            let batch = read.await.map_err(|e| map_err(e, false))?;
            let unprefixed = |k: &[u8]| k[self.prefix.len()..].to_vec();
            rows.extend(batch.iter().map(|kv| (unprefixed(kv.key()), kv.value().to_vec())));
            match opt.next_range(&batch) {
                Some(next) => opt = next,
                None => break,
            }
            iteration += 1;
        }
        rows.truncate(limit);
        Ok(rows)
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        self.mutate(|t| t.set(&self.full(key), value));
    }

    fn clear(&self, key: &[u8]) {
        self.mutate(|t| t.clear(&self.full(key)));
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) {
        self.mutate(|t| t.clear_range(&self.full(begin), &self.full(end)));
    }

    fn atomic_add(&self, key: &[u8], operand: &[u8]) {
        self.mutate(|t| t.atomic_op(&self.full(key), operand, MutationType::Add));
    }

    async fn commit(&self) -> Result<()> {
        if self.read_only {
            // Nothing to apply; the transaction is simply dropped.
            return Ok(());
        }
        let trx = lock(&self.trx)
            .take()
            .ok_or_else(|| StorageError::Backend("FDB transaction committed twice".into()))?;
        #[cfg(feature = "fault-hooks")]
        let wrote = self.wrote.load(std::sync::atomic::Ordering::Relaxed);
        #[cfg(feature = "fault-hooks")]
        if wrote {
            self.faults.before_commit()?;
        }
        trx.commit()
            .await
            .map(drop)
            .map_err(|e| map_err(FdbError::from(e), true))?;
        #[cfg(feature = "fault-hooks")]
        if wrote {
            self.faults.after_commit()?;
        }
        Ok(())
    }
}
