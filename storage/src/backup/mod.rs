//! Online backup and restore of a whole store: the KV keyspace and the
//! object-store bodies (`meshmail backup create DIR`, `meshmail backup
//! restore DIR`).
//!
//! # Why not one snapshot
//! A consistent copy "as of one instant" needs one read transaction over
//! the whole keyspace. FoundationDB ends every transaction after 5 s (its
//! MVCC window), and the shared [`crate::Txn`] enforces the same on SQLite,
//! so a store of any size cannot be read in one. (SQLite alone could:
//! `VACUUM INTO` or the online backup API copy a file consistently. That
//! path exists only on one backend and copies no bodies, so it is not the
//! design; an operator of a single-machine SQLite mesh may still use it.)
//!
//! # What a backup is instead: a fuzzy copy made consistent by the ledger
//! 1. **Start point.** `started_ms` is taken first. The guarantee is about
//!    messages acknowledged before it: their ledger entries (written in the
//!    delivery's own transaction) are committed by then.
//! 2. **Keys** (fuzzy copy). Every subspace except the ledger, leases and
//!    liveness stamps is copied in key order, one bounded read transaction
//!    per chunk ([`create::KEYS_PER_READ_START`] keys, adapted to stay near
//!    [`create::READ_BYTES_TARGET`]). Chunks read at different versions, so
//!    a message moved, expunged or delivered while the copy runs may be
//!    seen in its old place, its new place, both or neither.
//! 3. **Ledger pass** (the consistency step). The ledger is walked after
//!    the key copy, ≤ [`groups::ENTRIES_PER_READ`] entries per read
//!    transaction. Each entry is written together with what it names, read
//!    in the *same* transaction: a delivered message's row, summary, body
//!    reference count and inline body (unless the key copy held it: a body
//!    under its hash never changes); the absence of an expunged one; the
//!    outbound item or quarantine record. Restore applies these groups on
//!    top of the key copy, so each message's ledger entry, row and body
//!    agree as of one instant. That makes `meshmail verify ledger` clean by
//!    construction, and it is what keeps "acknowledged before the backup
//!    began" whole: such an entry exists when the pass reads it, and its row
//!    comes with it wherever a MOVE during the copy put it.
//! 4. **Bodies.** The object store is listed (after both passes: bodies
//!    are written before the metadata that names them) and every body is
//!    copied, its SHA-256 checked against its content-addressed name.
//!    Inline bodies came with the keys. Content addressing dedupes.
//! 5. **Manifest last**, written to a temporary file, fsynced and renamed:
//!    a backup cut short (a crash, a full disk) has no manifest and restore
//!    refuses it. On a write error the partial files are removed and a
//!    `BACKUP-FAILED.txt` note is left where the disk allows.
//!
//! Restore checks every chunk's length and SHA-256 before it writes
//! anything, refuses a non-empty store unless told, writes the records in
//! bounded transactions (≤ [`restore::BATCH_BYTES_MAX`] bytes each), puts
//! the bodies, then **repairs what the fuzzy copy cannot keep exact**
//! ([`repair`]): per mailbox the counters are recomputed from the rows,
//! UIDNEXT and HIGHESTMODSEQ raised above every row (so no UID is ever
//! given twice), the secondary indexes marked as not to be trusted (reads
//! fall back to the rows; the change log is floored, so CONDSTORE/QRESYNC
//! and JMAP clients resynchronise), and body reference counts raised to at
//! least the rows that name them (never lower: the orphan sweep must not
//! delete a body a restored row needs).
//!
//! What it does not promise: a message moved while the copy ran may come
//! back in both mailboxes (a duplicate, never a loss); flags changed during
//! the copy come back as they were at some instant between start and end.
//!
//! # Why not a change log (versionstamps)
//! Replaying the writes made during the copy would need every write path
//! to append to a log (FDB versionstamped keys; SQLite has none of its
//! own): a cost on every delivery for the sake of backups. The ledger
//! already ties each acceptance to its message in one transaction, so the
//! backup uses it instead.
//!
//! # `fdbbackup`
//! FoundationDB's own `fdbbackup` (with `backup_agent` processes) is
//! continuous and consistent at one version, with point-in-time restore;
//! for a large FDB cluster it is the better tool for the *keyspace*. It
//! copies raw keys only: not the object-store bodies (back the bucket up
//! with its own versioning/replication, after the FDB backup reaches a
//! version), and it needs agents running. This command works the same on
//! both backends, needs nothing running but the store, and checks what it
//! wrote; use it for SQLite meshes, for moving a mesh between backends, and
//! as a logical copy next to `fdbbackup` on FDB.

pub mod create;
pub mod format;
pub mod groups;
pub mod objects;
pub mod repair;
pub mod restore;

use std::path::PathBuf;

use thiserror::Error;

use crate::error::StorageError;

pub use create::create;
pub use format::{FORMAT_VERSION, MANIFEST_FILE, Manifest};
pub use restore::{RestoreOptions, RestoreReport, restore};

/// What a backup or a restore can fail with.
#[derive(Debug, Error)]
pub enum BackupError {
    #[error(
        "disk full writing the backup to {dir} after {written_bytes} bytes; the partial backup was removed \
         (no manifest was written, so nothing can restore it by mistake)"
    )]
    DiskFull { dir: PathBuf, written_bytes: u64 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{dir} is not empty: a backup is written into a new or empty directory")]
    DirNotEmpty { dir: PathBuf },
    #[error(
        "{dir} holds no complete backup (no manifest.json: the backup failed or is still running){}",
        failed_note.as_deref().map(|n| format!("; it failed: {}", n.trim())).unwrap_or_default()
    )]
    Incomplete { dir: PathBuf, failed_note: Option<String> },
    #[error("{path}: not a usable manifest: {detail}")]
    ManifestInvalid { path: PathBuf, detail: String },
    #[error("backup chunk {file} is damaged: {detail}; nothing was restored")]
    ChunkDamaged { file: PathBuf, detail: String },
    #[error("body {hash}: {detail}")]
    ObjectDamaged { hash: String, detail: String },
    #[error(
        "the target store is not empty (found key {first_key}); restore into an empty store, or pass --force \
         to write over it"
    )]
    TargetNotEmpty { first_key: String },
    #[error("blob store: {0}")]
    ObjectStore(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The stage a backup or restore is in, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Keys,
    Ledger,
    Objects,
    Verify,
    Write,
    Repair,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Keys => "copying keys",
            Phase::Ledger => "ledger pass",
            Phase::Objects => "copying bodies",
            Phase::Verify => "verifying chunks",
            Phase::Write => "writing records",
            Phase::Repair => "repairing counters",
        }
    }
}

/// Called with the phase and the items and bytes done in it so far.
pub type Progress<'a> = &'a (dyn Fn(Phase, u64, u64) + Send + Sync);
