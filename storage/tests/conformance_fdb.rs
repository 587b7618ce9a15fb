//! The conformance suite on FoundationDB: the same test functions as
//! `conformance_sqlite.rs`, on a live cluster. Compiled with
//! `--features fdb,fault-hooks` (the test build turns `fault-hooks` on);
//! runs when `MESHMAIL_FDB_CLUSTER_FILE` names a cluster file, e.g.
//!
//! ```text
//! MESHMAIL_FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster \
//!     cargo test -p meshmail-storage --features fdb --test conformance_fdb
//! ```
//! Without it each test prints `SKIPPED: ...`; with `MESHMAIL_TEST_STORE=fdb`
//! (what `.ci/run` sets) a missing cluster file fails instead. Each run
//! writes under its own random prefix, so it is safe on a shared cluster
//! (it does not clean up: point it at a test cluster).

/// Without the feature the suite cannot even be compiled: say so where a
/// developer running the README's test command sees it.
#[cfg(not(feature = "fdb"))]
#[test]
fn the_foundationdb_suite_needs_the_fdb_feature() {
    assert!(
        !meshmail_storage::open::KvConfig::testing_on_fdb(),
        "MESHMAIL_TEST_STORE=fdb needs a build with `--features fdb`"
    );
    eprintln!(
        "SKIPPED: the FoundationDB conformance suite needs `--features fdb` and a cluster: \
         eval \"$(.ci/fdb.sh start)\" (FoundationDB from ../shared/fdb, see its README.md), then \
         MESHMAIL_TEST_STORE=fdb cargo test -p meshmail-storage --features fdb (as .ci/run does)"
    );
}

#[cfg(feature = "fdb")]
mod conformance;
#[cfg(feature = "fdb")]
mod on_fdb {

    use std::sync::Arc;

    use super::conformance;
    use conformance::{FaultHooks, Target};
    use meshmail_storage::Database;
    use meshmail_storage::kv::Faults;
    use meshmail_storage::kv::fdb::FdbBackend;
    use meshmail_storage::open::{KvConfig, TEST_FDB_CLUSTER_FILE_ENV};

    struct Fdb(FdbBackend);

    impl FaultHooks for Fdb {
        fn faults(&self) -> &Faults {
            self.0.faults()
        }
    }

    fn target() -> Option<Target> {
        let Ok(cluster_file) = std::env::var(TEST_FDB_CLUSTER_FILE_ENV) else {
            assert!(
                !KvConfig::testing_on_fdb(),
                "MESHMAIL_TEST_STORE=fdb but {TEST_FDB_CLUSTER_FILE_ENV} is not set"
            );
            eprintln!(
                "SKIPPED: {TEST_FDB_CLUSTER_FILE_ENV} is not set; start a local cluster as in \
             ../shared/fdb/README.md (or run .ci/fdb.sh start) and point it at its cluster file"
            );
            return None;
        };
        let backend = FdbBackend::open(Some(std::path::Path::new(&cluster_file))).expect("open fdb");
        Some(Target {
            db: Database::new(Arc::new(backend.clone())),
            probe_args: vec!["--fdb".into(), cluster_file],
            prefix: format!("conformance-{}", uuid::Uuid::now_v7()),
            backend: Arc::new(Fdb(backend)),
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
        value_prefixes,
        conflicting_transactions_serialize,
        range_reads_conflict_and_snapshots_do_not,
        atomic_add_many_tasks,
        atomic_add_many_processes,
        limits_are_enforced,
        durable_across_sigkill,
        unknown_commit_outcome_is_retried_idempotently,
        store_down_fails_cleanly,
    );
}
