//! Which store the meshmail nodes of a bench run on: the
//! embedded SQLite default in each run's data directory, or a FoundationDB
//! cluster given by its cluster file, each run under a key prefix of its
//! own that is cleared when the run ends, so runs never see each other's
//! messages and the cluster does not grow from one run to the next.
//!
//! On FDB a message's cost is the node's CPU plus the FDB server's: a node
//! that hands its work to `fdbserver` must not look cheaper for it, so
//! [`server_cpu_seconds`] sums every `fdbserver` process of the machine.

use std::path::{Path, PathBuf};

use meshmail_storage::open::{KvConfig, open_kv};

/// The store of a bench's meshmail runs.
#[derive(Debug, Clone, Default)]
pub enum BenchStore {
    /// SQLite in each run's data directory (the default).
    #[default]
    Sqlite,
    /// The FoundationDB cluster of this cluster file (needs a soak and a
    /// meshmail built with `--features fdb`).
    Fdb { cluster_file: PathBuf },
}

impl BenchStore {
    /// FDB on this cluster file when one is given, SQLite otherwise.
    pub fn fdb_or_sqlite(cluster_file: Option<&Path>) -> BenchStore {
        cluster_file.map_or(BenchStore::Sqlite, |f| BenchStore::Fdb {
            cluster_file: f.to_path_buf(),
        })
    }

    pub fn is_fdb(&self) -> bool {
        matches!(self, BenchStore::Fdb { .. })
    }
}

/// One run's part of the store: the SQLite file of its data directory, or
/// a fresh key prefix on the cluster, cleared on drop.
#[derive(Debug)]
pub struct RunStore {
    store: BenchStore,
    prefix: String,
}

impl RunStore {
    pub fn new(store: &BenchStore) -> RunStore {
        RunStore {
            store: store.clone(),
            prefix: format!("bench-{}/", uuid::Uuid::now_v7().simple()),
        }
    }

    /// The global arguments that put a node, or an admin command, on this
    /// run's store (none for SQLite: `--data-dir` names it).
    pub fn global_args(&self) -> Vec<String> {
        match &self.store {
            BenchStore::Sqlite => Vec::new(),
            BenchStore::Fdb { cluster_file } => vec![
                "--store".into(),
                format!("fdb:{}", cluster_file.display()),
                "--fdb-key-prefix".into(),
                self.prefix.clone(),
            ],
        }
    }

    /// The store as the bench opens it itself (to write accounts before
    /// the node starts); `page_size_bytes` applies to SQLite only.
    pub fn kv_config(&self, data_dir: &Path, page_size_bytes: u32) -> KvConfig {
        match &self.store {
            BenchStore::Sqlite => {
                let mut kv = KvConfig::sqlite_in(data_dir);
                if let KvConfig::Sqlite { page_size_bytes: p, .. } = &mut kv {
                    *p = page_size_bytes;
                }
                kv
            }
            BenchStore::Fdb { cluster_file } => KvConfig::Fdb {
                cluster_file: Some(cluster_file.clone()),
                key_prefix: self.prefix.clone(),
            },
        }
    }

    /// Deletes every key of this run (FDB; SQLite's file goes with its
    /// data directory). One range clear: cheap whatever it covers.
    fn clear(&self) -> anyhow::Result<()> {
        let BenchStore::Fdb { .. } = &self.store else {
            return Ok(());
        };
        let kv = self.kv_config(Path::new("."), 0);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async {
            let db = open_kv(&kv)?;
            db.run(
                "bench_clear",
                |txn| async move { txn.clear_range(b"\x00", b"\xff\xff") },
            )
            .await?;
            Ok(())
        })
    }
}

impl Drop for RunStore {
    fn drop(&mut self) {
        if let Err(e) = self.clear() {
            eprintln!("could not clear the bench's keys under {:?}: {e:#}", self.prefix);
        }
    }
}

/// CPU seconds (user + system) of every `fdbserver` process on the
/// machine so far: 0 when none runs (SQLite runs).
pub fn server_cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "fdbserver"))
        .filter_map(|e| crate::node_proc::process_cpu_seconds(&e.path().join("stat").to_string_lossy()).ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdb_runs_get_their_own_prefix_and_node_flags() {
        let store = BenchStore::Fdb {
            cluster_file: "/c".into(),
        };
        let (a, b) = (RunStore::new(&store), RunStore::new(&store));
        assert_ne!(a.prefix, b.prefix);
        let args = a.global_args();
        assert_eq!(args[..3], ["--store", "fdb:/c", "--fdb-key-prefix"]);
        assert_eq!(args[3], a.prefix);
        assert!(RunStore::new(&BenchStore::Sqlite).global_args().is_empty());
        // Dropping an FDB run store without a cluster only prints.
        std::mem::forget(a);
        std::mem::forget(b);
    }
}
