//! Large values live outside the key B-tree, in `kv_heap`, an append-only
//! rowid table; their `kv` row holds the heap row's id (an SQLite INTEGER
//! where values are otherwise BLOBs, so the two cannot be confused and
//! stores written before the heap read unchanged).
//!
//! Why: `kv` is a WITHOUT ROWID table, an index B-tree whose every cell —
//! interior ones included — is a whole row. An inline 1 KiB body made the
//! cells of its region so big that a leaf held ~6 and interior pages had a
//! fan-out of ~6, so a delivery's random-keyed body insert split pages up
//! the tree; a delivery dirtied ~15 pages of 8 KiB (bench smtp,
//! `meshmail_kv_sqlite_commit_pages`). In the heap, new values get
//! increasing row ids: a batch's bodies are appended to the same one or
//! two tail pages, and the key B-tree keeps small cells (~40 B). At 4 KiB
//! pages a 1 KiB body no longer spills into an overflow page of its own
//! (a table leaf keeps up to page − 35 bytes of a row in place, an index
//! cell only ~1,000 B).

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};

/// Values longer than this go to the heap. Mailbox records and counters
/// (rewritten by every delivery) stay inline: a heap rewrite costs a
/// delete in one page and an append in another. At 512 most summaries of
/// real mail (multipart structures) went to the heap too, and SELECT +
/// FETCH ENVELOPE of a 2,000-message folder paid a second look-up each
/// (+21 %); a 1 KiB message's body (~1.2 KB with its headers) still goes.
pub const SPILL_MIN_BYTES: usize = 1024;

pub fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS kv_heap (id INTEGER PRIMARY KEY, v BLOB NOT NULL);")
}

/// The first `len` bytes of heap row `id` and the whole value's length,
/// read through an incremental blob handle (only the pages of the prefix),
/// inside the connection's open read transaction.
pub fn read_prefix(conn: &Connection, id: i64, len: usize) -> rusqlite::Result<(Vec<u8>, usize)> {
    let blob = conn.blob_open(rusqlite::MAIN_DB, "kv_heap", "v", id, true)?;
    let whole = blob.len();
    let mut buf = vec![0u8; len.min(whole)];
    blob.read_at_exact(&mut buf, 0)?;
    Ok((buf, whole))
}

/// What a `kv.v` cell holds.
pub enum Cell {
    Inline(Vec<u8>),
    Heap(i64),
}

impl Cell {
    pub fn from_sql(v: ValueRef<'_>) -> rusqlite::Result<Cell> {
        match v {
            ValueRef::Blob(b) => Ok(Cell::Inline(b.to_vec())),
            ValueRef::Integer(id) => Ok(Cell::Heap(id)),
            other => Err(rusqlite::Error::FromSqlConversionFailure(
                0,
                other.data_type(),
                "a kv value is a blob or a heap row id".into(),
            )),
        }
    }

    /// The value, read from the heap if it lives there.
    pub fn resolve(self, conn: &Connection) -> rusqlite::Result<Vec<u8>> {
        match self {
            Cell::Inline(v) => Ok(v),
            Cell::Heap(id) => {
                let mut stmt = conn.prepare_cached("SELECT v FROM kv_heap WHERE id = ?1")?;
                stmt.query_row(params![id], |r| r.get(0))
            }
        }
    }
}

/// The heap row a key's value lives in, if it does.
fn heap_id(tx: &Connection, key: &[u8]) -> rusqlite::Result<Option<i64>> {
    let mut stmt = tx.prepare_cached("SELECT v FROM kv WHERE k = ?1 AND typeof(v) = 'integer'")?;
    stmt.query_row(params![key], |r| r.get(0)).optional()
}

/// Writes `key = value`, inline or in the heap, freeing the heap row of
/// the value it replaces (or rewriting it in place when both are large).
///
/// A small value is one upsert that leaves a heap-held old value alone
/// (one B-tree descent for a new key and for a rewrite, as before the
/// heap: a look-up first cost STORE of 2,000 flags +40 %); only when that
/// changed nothing is the old value in the heap and freed.
pub fn set(tx: &Connection, key: &[u8], value: &[u8]) -> rusqlite::Result<()> {
    if value.len() <= SPILL_MIN_BYTES {
        let mut upsert = tx.prepare_cached(
            "INSERT INTO kv(k, v) VALUES (?1, ?2) \
             ON CONFLICT(k) DO UPDATE SET v = excluded.v WHERE typeof(kv.v) != 'integer'",
        )?;
        if upsert.execute(params![key, value])? == 1 {
            return Ok(());
        }
        if let Some(id) = heap_id(tx, key)? {
            free(tx, id)?;
        }
        let mut set = tx.prepare_cached("INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)")?;
        set.execute(params![key, value])?;
        return Ok(());
    }
    if let Some(id) = heap_id(tx, key)? {
        let mut update = tx.prepare_cached("UPDATE kv_heap SET v = ?2 WHERE id = ?1")?;
        update.execute(params![id, value])?;
        return Ok(());
    }
    let mut append = tx.prepare_cached("INSERT INTO kv_heap(v) VALUES (?1)")?;
    append.execute(params![value])?;
    let id = tx.last_insert_rowid();
    let mut set = tx.prepare_cached("INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)")?;
    set.execute(params![key, id])?;
    Ok(())
}

/// Clears `key`: one delete when its value is inline (the common case; a
/// `RETURNING` of the old value instead made every delete materialize its
/// result), else the heap row goes too.
pub fn clear(tx: &Connection, key: &[u8]) -> rusqlite::Result<()> {
    let mut del_inline = tx.prepare_cached("DELETE FROM kv WHERE k = ?1 AND typeof(v) != 'integer'")?;
    if del_inline.execute(params![key])? == 1 {
        return Ok(());
    }
    if let Some(id) = heap_id(tx, key)? {
        free(tx, id)?;
        let mut del = tx.prepare_cached("DELETE FROM kv WHERE k = ?1")?;
        del.execute(params![key])?;
    }
    Ok(())
}

pub fn clear_range(tx: &Connection, begin: &[u8], end: &[u8]) -> rusqlite::Result<()> {
    let mut free_all = tx.prepare_cached(
        "DELETE FROM kv_heap WHERE id IN \
         (SELECT v FROM kv WHERE k >= ?1 AND k < ?2 AND typeof(v) = 'integer')",
    )?;
    free_all.execute(params![begin, end])?;
    let mut del = tx.prepare_cached("DELETE FROM kv WHERE k >= ?1 AND k < ?2")?;
    del.execute(params![begin, end])?;
    Ok(())
}

fn free(tx: &Connection, id: i64) -> rusqlite::Result<()> {
    let mut del = tx.prepare_cached("DELETE FROM kv_heap WHERE id = ?1")?;
    del.execute(params![id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap_rows(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM kv_heap", [], |r| r.get(0))
            .unwrap()
    }

    fn get(conn: &Connection, key: &[u8]) -> Option<Vec<u8>> {
        let cell: Option<Cell> = conn
            .query_row("SELECT v FROM kv WHERE k = ?1", params![key], |r| {
                Cell::from_sql(r.get_ref(0)?)
            })
            .optional()
            .unwrap();
        cell.map(|c| c.resolve(conn).unwrap())
    }

    /// Large values go to the heap and come back whole; replacing,
    /// shrinking, clearing and range-clearing them leave no heap row
    /// behind; small values never touch it.
    #[test]
    fn large_values_round_trip_through_the_heap_and_leave_nothing_behind() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;")
            .unwrap();
        create(&conn).unwrap();
        let big = vec![7u8; SPILL_MIN_BYTES + 1];
        let bigger = vec![9u8; 4 * SPILL_MIN_BYTES];
        set(&conn, b"small", b"v").unwrap();
        assert_eq!(heap_rows(&conn), 0);
        set(&conn, b"a", &big).unwrap();
        assert_eq!(heap_rows(&conn), 1);
        assert_eq!(get(&conn, b"a"), Some(big.clone()));
        set(&conn, b"a", &bigger).unwrap();
        assert_eq!((heap_rows(&conn), get(&conn, b"a")), (1, Some(bigger.clone())));
        set(&conn, b"a", b"short now").unwrap();
        assert_eq!((heap_rows(&conn), get(&conn, b"a")), (0, Some(b"short now".to_vec())));
        set(&conn, b"a", &big).unwrap();
        clear(&conn, b"a").unwrap();
        assert_eq!((heap_rows(&conn), get(&conn, b"a")), (0, None));
        for k in [&b"r1"[..], b"r2", b"r3"] {
            set(&conn, k, &big).unwrap();
        }
        clear_range(&conn, b"r1", b"r3").unwrap();
        assert_eq!(heap_rows(&conn), 1, "r3 is outside [r1, r3)");
        assert_eq!(get(&conn, b"r3"), Some(big));
        assert_eq!(get(&conn, b"small"), Some(b"v".to_vec()));
    }
}
