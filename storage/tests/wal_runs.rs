//! The writer's WAL-run VFS (`kv::sqlite::wal_vfs`): a commit's frames reach
//! the file in a few large writes, and what they hold is what SQLite wrote:
//! another connection on SQLite's own VFS reads every committed key, and
//! the file passes `PRAGMA integrity_check`. Its own test binary, because
//! the VFS's write counts are per process.

use std::sync::Arc;

use meshmail_storage::Database;
use meshmail_storage::kv::sqlite::{Durability, SqliteBackend, SqliteOptions, wal_vfs};

const KEYS: usize = 300;

/// The VFS's counts are per process: the tests take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn value(i: usize) -> Vec<u8> {
    (0..1500).map(|j| (i * 31 + j) as u8).collect()
}

async fn write_batch(db: &Database, round: usize) {
    db.run("test_wal_runs", |txn| async move {
        for i in 0..KEYS {
            txn.set(format!("k/{round}/{i:05}").as_bytes(), &value(i))?;
        }
        Ok::<_, meshmail_storage::StorageError>(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_commit_is_written_in_runs_and_reads_back_everywhere() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meshmail.sqlite");
    let db = Database::new(Arc::new(SqliteBackend::open(SqliteOptions::new(&path)).unwrap()));

    let (writes0, runs0) = wal_vfs::counts();
    write_batch(&db, 1).await;
    let (writes1, runs1) = wal_vfs::counts();
    let (writes, runs) = (writes1 - writes0, runs1 - runs0);
    // ~300 values of 1.5 KB: well over 50 pages, two writes each from SQLite.
    assert!(writes >= 100, "only {writes} WAL writes went through the VFS");
    assert!(runs >= 1 && runs * 20 <= writes, "{writes} writes made {runs} runs");

    // A second store on SQLite's own VFS (no runs) reads what the first
    // committed, and writes its own.
    let mut plain = SqliteOptions::new(&path);
    plain.coalesce_wal_writes = false;
    let other = Database::new(Arc::new(SqliteBackend::open(plain).unwrap()));
    for i in [0, 1, KEYS / 2, KEYS - 1] {
        let key = format!("k/1/{i:05}");
        let got = other
            .read("test_wal_read", |txn| {
                let key = key.clone();
                async move { txn.get(key.as_bytes()).await }
            })
            .await
            .unwrap();
        assert_eq!(got, Some(value(i)), "{key}");
    }
    let before = wal_vfs::counts();
    write_batch(&other, 2).await;
    assert_eq!(
        wal_vfs::counts(),
        before,
        "a store with coalesce_wal_writes = false used the VFS"
    );
    write_batch(&db, 3).await;

    drop((db, other));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let rows: i64 = conn.query_row("SELECT count(*) FROM kv", [], |r| r.get(0)).unwrap();
    assert!(rows >= (3 * KEYS) as i64, "{rows} rows");
}

/// Without a sync at each commit (`Durability::Normal`) nothing would write
/// a run before SQLite shows its frames to readers: the writer opens on
/// SQLite's own VFS, and a second store reads what it committed.
#[tokio::test]
async fn without_fsync_the_writer_keeps_sqlites_own_writes() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meshmail.sqlite");
    let open = || {
        let mut options = SqliteOptions::new(&path);
        options.durability = Durability::Normal;
        Database::new(Arc::new(SqliteBackend::open(options).unwrap()))
    };
    let (db, other) = (open(), open());
    let before = wal_vfs::counts();
    write_batch(&db, 1).await;
    let got = other
        .read("test_wal_read", |txn| async move { txn.get(b"k/1/00007").await })
        .await
        .unwrap();
    assert_eq!(got, Some(value(7)));
    assert_eq!(wal_vfs::counts(), before, "Durability::Normal went through the VFS");
}

/// Opens `path` through the VFS (as the backend's writer, with its pragmas)
/// or through SQLite's own; a cache of 16 pages.
fn raw(path: &std::path::Path, through_vfs: bool) -> rusqlite::Connection {
    let conn = if through_vfs {
        wal_vfs::register().unwrap();
        rusqlite::Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), wal_vfs::VFS_NAME).unwrap()
    } else {
        rusqlite::Connection::open(path).unwrap()
    };
    conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA cache_size=16;")
        .unwrap();
    if through_vfs {
        conn.execute_batch(wal_vfs::WRITER_PRAGMAS).unwrap();
    }
    conn
}

/// A transaction through the VFS that outgrows its cache and rolls back
/// must leave nothing to be written later: another connection commits
/// where its frames would have gone, the first commits again, and the
/// other's rows are intact. The writer's `cache_spill=OFF` keeps such frames
/// from existing at all; with spills allowed this test still passed, since
/// SQLite touched the WAL at the rollback and the run went out then (the
/// VFS's counts showed the extra run), so it guards the outcome, not which
/// of the two defences gave it.
#[tokio::test]
async fn a_rolled_back_transaction_leaves_no_run_behind() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raw.sqlite");
    let a = raw(&path, true);
    a.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
        .unwrap();
    let b = raw(&path, false);

    a.execute_batch("BEGIN").unwrap();
    for k in 0..300 {
        a.execute("INSERT INTO t VALUES (?1, ?2)", rusqlite::params![k, value(k as usize)])
            .unwrap();
    }
    a.execute_batch("ROLLBACK").unwrap();

    b.execute_batch("BEGIN").unwrap();
    for k in 1000..1040 {
        b.execute("INSERT INTO t VALUES (?1, ?2)", rusqlite::params![k, value(k as usize)])
            .unwrap();
    }
    b.execute_batch("COMMIT").unwrap();
    a.execute("INSERT INTO t VALUES (5000, x'00')", []).unwrap();

    for conn in [&a, &b] {
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        let rows: Vec<(i64, Vec<u8>)> = conn
            .prepare("SELECT k, v FROM t WHERE k >= 1000 AND k < 5000 ORDER BY k")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows.len(), 40);
        assert!(rows.iter().all(|(k, v)| *v == value(*k as usize)));
    }
    drop((a, b));
    let fresh = raw(&path, false);
    let check: String = fresh.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let n: i64 = fresh.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 41);
}
