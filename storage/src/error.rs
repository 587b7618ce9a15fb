//! Errors of the storage layer.
//!
//! The classification matters more than the text: the retry loop in
//! [`crate::kv::Database::run`] retries exactly the errors for which
//! [`StorageError::is_retryable`] is true, and tells the next attempt whether
//! the previous one may have committed ([`StorageError::maybe_committed`]).

use thiserror::Error;

/// Anything the KV layer, the data model or the blob store can fail with.
#[derive(Debug, Error)]
pub enum StorageError {
    /// Another transaction wrote something this one read (FDB error 1020).
    #[error("transaction conflict: a key read by this transaction was changed by another")]
    Conflict,
    /// The commit may or may not have been applied (FDB error 1021). Retrying
    /// is safe only for idempotent transactions: see `Database::run_idempotent`.
    #[error("commit outcome unknown: the transaction may or may not have been applied")]
    CommitUnknown,
    /// The transaction lived longer than the 5 s limit (FDB error 1007).
    #[error("transaction too old: it ran longer than {limit_ms} ms")]
    TransactionTooOld { limit_ms: u64 },
    /// The store is temporarily unable to serve (locked, busy, recovering).
    #[error("store temporarily unavailable: {0}")]
    Unavailable(String),
    #[error("key too large: {size} bytes (limit {limit})")]
    KeyTooLarge { size: usize, limit: usize },
    #[error("value too large: {size} bytes (limit {limit})")]
    ValueTooLarge { size: usize, limit: usize },
    #[error("transaction too large: {size} bytes written (limit {limit})")]
    TransactionTooLarge { size: usize, limit: usize },
    #[error("write attempted in a read-only snapshot transaction")]
    ReadOnly,
    #[error("transaction gave up after {attempts} attempts in {elapsed_ms} ms; last error: {last}")]
    RetriesExhausted {
        attempts: u32,
        elapsed_ms: u64,
        last: Box<StorageError>,
    },
    /// The shard's lease is not (or no longer) held by the writer: another
    /// node took the shard over. Never retried: the writer must stop.
    #[error("fenced: shard {shard} is not owned by this writer ({detail})")]
    Fenced { shard: u32, detail: String },
    /// The store's format is newer than the formats this node writes: a
    /// node of an older build (or one pinned to an older format) must not
    /// join, since it would write what the newer format forbids. Never
    /// retried.
    #[error(
        "the store has format {store}, and this node knows formats up to {known}{}: it must not write          this store (run a build that knows format {store})",
        if *pinned { " (pinned by [upgrade] pin_store_format)" } else { "" }
    )]
    FormatTooNew { store: u32, known: u32, pinned: bool },
    /// A stored value could not be decoded: the keyspace holds something this
    /// version does not understand.
    #[error("corrupt or unreadable record at {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// A rule of the data model was broken by the caller (duplicate name,
    /// unknown account...). Never retried.
    #[error("{0}")]
    Model(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("blob store: {0}")]
    Blob(String),
    /// The medium refused the write: the disk is full (`ENOSPC`,
    /// `SQLITE_FULL`) or mounted read-only (`EROFS`, `SQLITE_READONLY`).
    /// Not retried: it does not clear within a retry budget, and waiting
    /// would only hold the client. Protocols answer "try again later"
    /// (SMTP 452 4.3.1 when `full`, else 451; IMAP `NO [UNAVAILABLE]`).
    #[error("storage cannot take writes ({}): {detail}", if *full { "disk full" } else { "read-only" })]
    Unwritable { full: bool, detail: String },
    #[error("backend error: {0}")]
    Backend(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl StorageError {
    /// True for errors where running the same transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StorageError::Conflict
                | StorageError::CommitUnknown
                | StorageError::TransactionTooOld { .. }
                | StorageError::Unavailable(_)
        )
    }

    /// True when the store itself could not serve (down, locked, too slow, too
    /// contended), as opposed to a request it refused: protocols answer these
    /// with "try again later" (SMTP 451, IMAP `NO [UNAVAILABLE]`).
    pub fn is_unavailable(&self) -> bool {
        self.is_retryable()
            || matches!(
                self,
                StorageError::RetriesExhausted { .. } | StorageError::Fenced { .. } | StorageError::Unwritable { .. }
            )
    }

    /// True when the failed attempt might nevertheless have been applied.
    pub fn maybe_committed(&self) -> bool {
        matches!(self, StorageError::CommitUnknown)
    }

    /// A short, stable label for metrics (`reason="conflict"`...).
    pub fn label(&self) -> &'static str {
        match self {
            StorageError::Conflict => "conflict",
            StorageError::CommitUnknown => "commit_unknown",
            StorageError::TransactionTooOld { .. } => "too_old",
            StorageError::Unavailable(_) => "unavailable",
            StorageError::KeyTooLarge { .. } => "key_too_large",
            StorageError::ValueTooLarge { .. } => "value_too_large",
            StorageError::TransactionTooLarge { .. } => "txn_too_large",
            StorageError::ReadOnly => "read_only",
            StorageError::RetriesExhausted { .. } => "retries_exhausted",
            StorageError::Fenced { .. } => "fenced",
            StorageError::FormatTooNew { .. } => "format_too_new",
            StorageError::Corrupt { .. } => "corrupt",
            StorageError::Model(_) => "model",
            StorageError::NotFound(_) => "not_found",
            StorageError::AlreadyExists(_) => "already_exists",
            StorageError::Blob(_) => "blob",
            StorageError::Unwritable { full: true, .. } => "disk_full",
            StorageError::Unwritable { full: false, .. } => "read_only_media",
            StorageError::Backend(_) => "backend",
            StorageError::Io(_) => "io",
        }
    }
}

/// Errors a transaction closure may return: its own, or the store's.
///
/// The retry loop needs to see the storage error inside a caller's error type
/// to decide whether to retry; implement this for your error enum.
pub trait TxError: From<StorageError> {
    fn as_storage(&self) -> Option<&StorageError>;
}

impl TxError for StorageError {
    fn as_storage(&self) -> Option<&StorageError> {
        Some(self)
    }
}

/// The medium's refusal, if `e` (or an error it wraps) is an I/O error
/// saying the disk is full or read-only.
pub fn unwritable_io(e: &(dyn std::error::Error + 'static), context: &str) -> Option<StorageError> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            let full = match io.kind() {
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => true,
                std::io::ErrorKind::ReadOnlyFilesystem => false,
                _ => return None,
            };
            return Some(StorageError::Unwritable {
                full,
                detail: format!("{context}: {io}"),
            });
        }
        cur = err.source();
    }
    None
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
