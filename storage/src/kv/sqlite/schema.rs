//! The SQLite schema behind the KV backend.

use rusqlite::{Connection, OptionalExtension, params};

/// `kv` holds the keyspace; `meta` the commit version; `conflict_log` the
/// write ranges of recent commits, for optimistic conflict checks.
pub fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS conflict_log (
             version INTEGER NOT NULL, b BLOB NOT NULL, e BLOB NOT NULL, at_ms INTEGER NOT NULL);
         CREATE INDEX IF NOT EXISTS conflict_log_by_version ON conflict_log(version);
         INSERT OR IGNORE INTO meta(name, value) VALUES ('version', 0), ('pruned_through', 0);",
    )
}

pub fn read_meta(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE name = ?1")?;
    Ok(stmt.query_row(params![name], |r| r.get(0)).optional()?.unwrap_or(0))
}

pub fn read_version(conn: &Connection) -> rusqlite::Result<i64> {
    read_meta(conn, "version")
}

pub fn write_meta(conn: &Connection, name: &str, value: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached("INSERT OR REPLACE INTO meta(name, value) VALUES (?1, ?2)")?;
    stmt.execute(params![name, value])?;
    Ok(())
}

pub fn write_ranges_since(conn: &Connection, version: i64) -> rusqlite::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut stmt = conn.prepare_cached("SELECT b, e FROM conflict_log WHERE version > ?1")?;
    let rows = stmt.query_map(params![version], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Drops log entries older than `cutoff_ms` and remembers the newest version
/// dropped, so a transaction older than that is refused rather than missed.
pub fn prune_conflict_log(conn: &Connection, cutoff_ms: i64) -> rusqlite::Result<()> {
    let newest: Option<i64> = conn.query_row(
        "SELECT max(version) FROM conflict_log WHERE at_ms < ?1",
        params![cutoff_ms],
        |r| r.get(0),
    )?;
    if let Some(v) = newest {
        conn.execute("DELETE FROM conflict_log WHERE version <= ?1", params![v])?;
        let prev = read_meta(conn, "pruned_through")?;
        write_meta(conn, "pruned_through", prev.max(v))?;
    }
    Ok(())
}
