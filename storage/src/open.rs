//! Opening the store a node is configured for: the KV backend and the blob
//! store, from one serializable configuration.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::kv::Database;
use crate::kv::sqlite::checkpoint::CheckpointMode;
use crate::kv::sqlite::{Durability, SqliteBackend, SqliteOptions};

/// Which KV backend holds the metadata.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum KvConfig {
    /// The embedded default: one SQLite file shared by every local node.
    Sqlite {
        /// Empty (left out of a node's `[store]`): the node's
        /// `<data-dir>/meshmail.sqlite`.
        #[serde(default)]
        path: PathBuf,
        /// false = synchronous=NORMAL (survives a crash, not a power cut).
        #[serde(default = "yes")]
        fsync: bool,
        /// Page size of a new file (an existing one keeps its own).
        #[serde(default = "page_size_default")]
        page_size_bytes: u32,
        /// `background` (default): WAL checkpoints run on a thread of
        /// their own; `in_commit`: inside the commit that crosses the
        /// threshold, as SQLite does by itself (for A/B benchmarks).
        #[serde(default)]
        checkpoint: CheckpointMode,
        /// Page cache of the write connection, KiB (default 4096): the
        /// B-tree pages every commit walks; misses are read from the OS's
        /// page cache.
        #[serde(default = "writer_cache_default")]
        writer_cache_kib: u32,
        /// WAL pages after which a checkpoint runs (default 4096).
        #[serde(default = "checkpoint_after_default")]
        checkpoint_after_pages: u32,
        /// WAL pages after which the checkpoint thread makes the WAL start
        /// over, holding commits for a few milliseconds (default 4096;
        /// 0: never, only when SQLite happens to; background mode only).
        /// The thread wakes only past `checkpoint_after_pages`, so a
        /// smaller value acts as that one.
        #[serde(default = "checkpoint_after_default")]
        restart_wal_after_pages: u32,
        /// Write each commit's WAL frames in one run instead of SQLite's two
        /// writes per frame (default true; false for A/B benchmarks).
        #[serde(default = "yes")]
        coalesce_wal_writes: bool,
    },
    /// FoundationDB (needs the `fdb` build feature and libfdb_c).
    Fdb {
        /// None = the client library's default cluster file.
        cluster_file: Option<PathBuf>,
        /// Every key of this store lives under these bytes (UTF-8), so one
        /// FDB cluster can hold several meshes, or test runs, apart. Empty
        /// (the default): the whole keyspace. Every node of a mesh must
        /// name the same prefix.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        key_prefix: String,
    },
}

fn yes() -> bool {
    true
}

fn checkpoint_after_default() -> u32 {
    crate::kv::sqlite::checkpoint::CHECKPOINT_AFTER_PAGES
}

fn writer_cache_default() -> u32 {
    crate::kv::sqlite::WRITER_CACHE_KIB
}

fn page_size_default() -> u32 {
    crate::kv::sqlite::PAGE_SIZE_BYTES_DEFAULT
}

impl KvConfig {
    /// The embedded default under a data directory.
    pub fn sqlite_in(data_dir: &Path) -> Self {
        Self::sqlite_file(data_dir.join("meshmail.sqlite"))
    }

    /// SQLite in one file, every setting at its default.
    pub fn sqlite_file(path: PathBuf) -> Self {
        KvConfig::Sqlite {
            path,
            fsync: true,
            page_size_bytes: page_size_default(),
            checkpoint: CheckpointMode::default(),
            writer_cache_kib: writer_cache_default(),
            checkpoint_after_pages: checkpoint_after_default(),
            restart_wal_after_pages: checkpoint_after_default(),
            coalesce_wal_writes: true,
        }
    }
}

/// The variable that makes tests run on FoundationDB: `fdb` (then
/// [`TEST_FDB_CLUSTER_FILE_ENV`] names the cluster) or `sqlite` (the default).
pub const TEST_STORE_ENV: &str = "MESHMAIL_TEST_STORE";
/// The cluster file the FDB test runs use.
pub const TEST_FDB_CLUSTER_FILE_ENV: &str = "MESHMAIL_FDB_CLUSTER_FILE";

impl KvConfig {
    /// The store a test runs on: SQLite in `dir`, or, with
    /// `MESHMAIL_TEST_STORE=fdb`, the FDB cluster of
    /// `MESHMAIL_FDB_CLUSTER_FILE` under a prefix of `dir`'s own (the same
    /// for every call with one `dir` in this process, new in every
    /// process), so tests running side by side on one cluster never see
    /// each other's keys, and a test that opens its store twice sees one. The backend is a parameter of every test that opens its store
    /// here: one test function, run once per backend.
    ///
    /// Panics when FDB is asked for and cannot be: a test run that was
    /// meant for FDB must not quietly pass on SQLite.
    pub fn for_tests(dir: &Path) -> Self {
        match std::env::var(TEST_STORE_ENV).as_deref() {
            Ok("fdb") => {
                let cluster_file = std::env::var_os(TEST_FDB_CLUSTER_FILE_ENV).unwrap_or_else(|| {
                    panic!("{TEST_STORE_ENV}=fdb needs {TEST_FDB_CLUSTER_FILE_ENV} (a cluster file)")
                });
                KvConfig::Fdb {
                    cluster_file: Some(PathBuf::from(cluster_file)),
                    key_prefix: test_prefix(dir),
                }
            }
            Ok("sqlite") | Err(std::env::VarError::NotPresent) => Self::sqlite_in(dir),
            Ok(other) => panic!("{TEST_STORE_ENV}={other}: expected `sqlite` or `fdb`"),
            Err(e) => panic!("{TEST_STORE_ENV}: {e}"),
        }
    }

    /// True when tests run on FoundationDB (see [`KvConfig::for_tests`]).
    pub fn testing_on_fdb() -> bool {
        std::env::var(TEST_STORE_ENV).as_deref() == Ok("fdb")
    }
}

/// `test-<process run>-<dir digest>/`: see [`KvConfig::for_tests`].
fn test_prefix(dir: &Path) -> String {
    use sha2::Digest;
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| uuid::Uuid::now_v7().simple().to_string());
    let digest = sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes());
    format!("test-{run}-{}/", hex::encode(&digest[..8]))
}

/// Opens the configured KV backend.
pub fn open_kv(cfg: &KvConfig) -> Result<Database> {
    match cfg {
        KvConfig::Sqlite {
            path,
            fsync,
            page_size_bytes,
            checkpoint,
            writer_cache_kib,
            checkpoint_after_pages,
            restart_wal_after_pages,
            coalesce_wal_writes,
        } => {
            let mut opts = SqliteOptions::new(path);
            opts.durability = if *fsync { Durability::Full } else { Durability::Normal };
            opts.page_size_bytes = *page_size_bytes;
            opts.checkpoint = *checkpoint;
            opts.writer_cache_kib = *writer_cache_kib;
            opts.checkpoint_after_pages = *checkpoint_after_pages;
            opts.restart_wal_after_pages = *restart_wal_after_pages;
            opts.coalesce_wal_writes = *coalesce_wal_writes;
            Ok(Database::new(Arc::new(SqliteBackend::open(opts)?)))
        }
        #[cfg(feature = "fdb")]
        KvConfig::Fdb {
            cluster_file,
            key_prefix,
        } => Ok(Database::new(Arc::new(crate::kv::fdb::FdbBackend::open_prefixed(
            cluster_file.as_deref(),
            key_prefix.as_bytes(),
        )?))),
        #[cfg(not(feature = "fdb"))]
        KvConfig::Fdb { .. } => Err(crate::error::StorageError::Backend(
            "this build has no FoundationDB support: rebuild with `--features fdb`".into(),
        )),
    }
}
