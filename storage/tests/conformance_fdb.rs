//! The conformance suite on FoundationDB. Compiled with `--features fdb`;
//! runs only when `MESHMAIL_FDB_CLUSTER_FILE` names a cluster file, e.g.
//!
//! ```text
//! MESHMAIL_FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster \
//!     cargo test -p meshmail-storage --features fdb --test conformance_fdb
//! ```
//! Each run writes under its own random prefix, so it is safe on a shared
//! cluster (it does not clean up: point it at a test cluster).
#![cfg(feature = "fdb")]

mod conformance;

use std::sync::Arc;

use conformance::Target;
use meshmail_storage::Database;
use meshmail_storage::kv::fdb::FdbBackend;

fn target() -> Option<Target> {
    let Ok(cluster_file) = std::env::var("MESHMAIL_FDB_CLUSTER_FILE") else {
        eprintln!("MESHMAIL_FDB_CLUSTER_FILE is not set: skipping the FoundationDB conformance suite");
        return None;
    };
    let backend = FdbBackend::open(Some(std::path::Path::new(&cluster_file))).expect("open fdb");
    Some(Target {
        db: Database::new(Arc::new(backend)),
        probe_args: vec!["--fdb".into(), cluster_file],
        prefix: format!("conformance-{}", uuid::Uuid::now_v7()),
    })
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if let Some(t) = target() {
                conformance::$name(&t).await;
            }
        }
    )*};
}

suite!(
    ordering_and_limits,
    read_your_writes,
    conflicting_transactions_serialize,
    range_reads_conflict_and_snapshots_do_not,
    atomic_add_many_tasks,
    atomic_add_many_processes,
    limits_are_enforced,
    durable_across_sigkill,
);
