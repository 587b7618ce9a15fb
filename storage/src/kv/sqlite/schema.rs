//! The SQLite schema behind the KV backend.

use rusqlite::{Connection, OptionalExtension, params};

/// `kv` holds the keyspace; `meta` the commit version; `commit_log` the
/// write ranges of recent commits, one row per commit (all its ranges in
/// one blob: a batch of hundreds of keys costs one B-tree insert, not
/// hundreds plus their index entries), for optimistic conflict checks.
///
/// The per-range `conflict_log` table of earlier builds is replaced by an
/// empty view of that name: a process of an older build sharing the file
/// would otherwise log its commits where this one never looks (and miss
/// this one's), each blind to the other's conflicts. With the view in
/// place an older build fails loudly instead: at open (its `CREATE INDEX`
/// on `conflict_log`: "views may not be indexed") or, if it was already
/// running, at its next commit ("cannot modify conflict_log because it is
/// a view").
pub fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS commit_log (
             version INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, ranges BLOB NOT NULL);
         INSERT OR IGNORE INTO meta(name, value) VALUES ('version', 0), ('pruned_through', 0);",
    )?;
    super::heap::create(conn)?;
    let old: Option<String> = conn
        .query_row("SELECT type FROM sqlite_master WHERE name = 'conflict_log'", [], |r| {
            r.get(0)
        })
        .optional()?;
    if old.as_deref() == Some("table") {
        conn.execute_batch("DROP TABLE conflict_log")?;
    }
    if old.as_deref() != Some("view") {
        conn.execute_batch(OLD_BUILDS_FENCE)?;
    }
    Ok(())
}

/// The view that stands where older builds' `conflict_log` table was (see
/// [`create`]): no rows, no columns they use.
const OLD_BUILDS_FENCE: &str = "CREATE VIEW conflict_log AS SELECT \
     'replaced by commit_log: every process sharing this file must run the same build' AS why WHERE 0";

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
    let mut stmt = conn.prepare_cached("SELECT ranges FROM commit_log WHERE version > ?1")?;
    let blobs = stmt.query_map(params![version], |r| r.get::<_, Vec<u8>>(0))?;
    let mut out = Vec::new();
    for blob in blobs {
        let blob = blob?;
        decode_ranges(&blob, &mut out).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Blob,
                "malformed commit_log ranges".into(),
            )
        })?;
    }
    Ok(out)
}

/// Logs one commit's (coalesced) write ranges.
pub fn log_commit(conn: &Connection, version: i64, at_ms: i64, ranges: &[(Vec<u8>, Vec<u8>)]) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached("INSERT INTO commit_log(version, at_ms, ranges) VALUES (?1, ?2, ?3)")?;
    stmt.execute(params![version, at_ms, encode_ranges(ranges)])?;
    Ok(())
}

/// The first four bytes of a front-coded blob: a length no key of the
/// first form can have (keys are at most 10 KB).
const FRONT_CODED: [u8; 4] = [0xff; 4];

/// One commit's ranges, sorted (as [`super::coalesce`] leaves them), front
/// coded: `FRONT_CODED`, then per range the begin as (bytes shared with the
/// previous begin, varint; suffix length, varint; suffix), and the end as
/// `0` when it is the begin plus a zero byte (one written key, nearly every
/// range) or `1` + (bytes shared with the begin; suffix length; suffix).
///
/// A commit's keys share long prefixes (subspace, account, mailbox), and
/// the first form spelled every key out twice: ~700 bytes a delivery,
/// written with each commit and kept for the log's 10 s.
pub fn encode_ranges(ranges: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + ranges.len() * 16);
    out.extend_from_slice(&FRONT_CODED);
    let mut previous: &[u8] = &[];
    for (b, e) in ranges {
        put_suffix(&mut out, previous, b);
        if e.len() == b.len() + 1 && e.starts_with(b) && e[b.len()] == 0 {
            out.push(0);
        } else {
            out.push(1);
            put_suffix(&mut out, b, e);
        }
        previous = b;
    }
    out
}

fn put_suffix(out: &mut Vec<u8>, base: &[u8], key: &[u8]) {
    let shared = base.iter().zip(key).take_while(|(a, b)| a == b).count();
    put_varint(out, shared);
    put_varint(out, key.len() - shared);
    out.extend_from_slice(&key[shared..]);
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The inverse of [`encode_ranges`] (and of the first form, `(len u32 LE,
/// begin, len u32 LE, end)*`, which logs written before an upgrade hold),
/// appended to `out`; None if malformed.
pub fn decode_ranges(blob: &[u8], out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Option<()> {
    match blob.strip_prefix(&FRONT_CODED) {
        Some(rest) => decode_front_coded(rest, out),
        None => decode_first_form(blob, out),
    }
}

fn decode_front_coded(mut blob: &[u8], out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Option<()> {
    let mut previous: Vec<u8> = Vec::new();
    while !blob.is_empty() {
        let b = take_suffix(&mut blob, &previous)?;
        let (&kind, rest) = blob.split_first()?;
        blob = rest;
        let e = match kind {
            0 => {
                let mut e = b.clone();
                e.push(0);
                e
            }
            1 => take_suffix(&mut blob, &b)?,
            _ => return None,
        };
        previous.clone_from(&b);
        out.push((b, e));
    }
    Some(())
}

fn take_suffix(blob: &mut &[u8], base: &[u8]) -> Option<Vec<u8>> {
    let shared = take_varint(blob)?;
    let len = take_varint(blob)?;
    let suffix = blob.get(..len)?;
    let mut key = base.get(..shared)?.to_vec();
    key.extend_from_slice(suffix);
    *blob = &blob[len..];
    Some(key)
}

fn take_varint(blob: &mut &[u8]) -> Option<usize> {
    let mut v = 0usize;
    for shift in (0..35).step_by(7) {
        let (&b, rest) = blob.split_first()?;
        *blob = rest;
        v |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn decode_first_form(mut blob: &[u8], out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Option<()> {
    let take = |blob: &mut &[u8]| -> Option<Vec<u8>> {
        let len = u32::from_le_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        let key = blob.get(4..4 + len)?.to_vec();
        *blob = &blob[4 + len..];
        Some(key)
    };
    while !blob.is_empty() {
        let b = take(&mut blob)?;
        let e = take(&mut blob)?;
        out.push((b, e));
    }
    Some(())
}

/// Drops log entries older than `cutoff_ms` and remembers the newest version
/// dropped, so a transaction older than that is refused rather than missed.
pub fn prune_conflict_log(conn: &Connection, cutoff_ms: i64) -> rusqlite::Result<()> {
    let newest: Option<i64> = conn.query_row(
        "SELECT max(version) FROM commit_log WHERE at_ms < ?1",
        params![cutoff_ms],
        |r| r.get(0),
    )?;
    if let Some(v) = newest {
        conn.execute("DELETE FROM commit_log WHERE version <= ?1", params![v])?;
        let prev = read_meta(conn, "pruned_through")?;
        write_meta(conn, "pruned_through", prev.max(v))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What builds before `commit_log` ran at open, and at every commit.
    const OLD_CREATE: &str = "CREATE TABLE IF NOT EXISTS conflict_log (
             version INTEGER NOT NULL, b BLOB NOT NULL, e BLOB NOT NULL, at_ms INTEGER NOT NULL);
         CREATE INDEX IF NOT EXISTS conflict_log_by_version ON conflict_log(version);";
    const OLD_LOG: &str = "INSERT INTO conflict_log(version, b, e, at_ms) VALUES (1, x'61', x'62', 0)";

    #[test]
    fn an_old_store_is_converted_and_an_older_build_sharing_it_fails() {
        let old = Connection::open_in_memory().unwrap();
        old.execute_batch(OLD_CREATE).unwrap();
        old.execute_batch(OLD_LOG).unwrap();
        create(&old).unwrap();
        // Opening again (another process of this build) keeps the fence.
        create(&old).unwrap();
        // An older build opening the file now fails at its index...
        let err = old.execute_batch(OLD_CREATE).unwrap_err();
        assert!(err.to_string().contains("views may not be indexed"), "{err}");
        // ...and one already running fails at its next commit.
        let err = old.execute_batch(OLD_LOG).unwrap_err();
        assert!(err.to_string().contains("cannot modify conflict_log"), "{err}");
        // This build's log works.
        log_commit(&old, 2, 0, &[(b"a".to_vec(), b"b".to_vec())]).unwrap();
        assert_eq!(write_ranges_since(&old, 1).unwrap().len(), 1);
    }

    #[test]
    fn ranges_round_trip_and_truncation_is_refused() {
        let ranges = vec![
            (Vec::new(), vec![0xff; 300]),
            (b"a".to_vec(), b"b".to_vec()),
            (b"msg/1/2/10".to_vec(), b"msg/1/2/10\0".to_vec()),
            (b"msg/1/2/11".to_vec(), b"msg/1/2/11\0".to_vec()),
            (b"msum/1/2/10".to_vec(), b"msum/1/2/12".to_vec()),
        ];
        let blob = encode_ranges(&ranges);
        let mut out = Vec::new();
        decode_ranges(&blob, &mut out).unwrap();
        assert_eq!(out, ranges);
        for cut in 4..blob.len() {
            let mut partial = Vec::new();
            let whole = decode_ranges(&blob[..cut], &mut partial).is_some();
            assert!(
                !whole || partial.len() < ranges.len(),
                "a blob cut at {cut} decoded whole"
            );
        }
        // One key written per range, as commits log them: ~4× smaller.
        let points: Vec<(Vec<u8>, Vec<u8>)> = (0..100u32)
            .map(|uid| {
                let k = format!("\x02msg\x00\x15\x03\x15\x07\x16{uid:05}").into_bytes();
                let mut e = k.clone();
                e.push(0);
                (k, e)
            })
            .collect();
        let first_form_len: usize = points.iter().map(|(b, e)| 8 + b.len() + e.len()).sum();
        assert!(encode_ranges(&points).len() * 4 < first_form_len);
    }

    #[test]
    fn logs_of_the_first_form_still_read() {
        let ranges = vec![(b"a".to_vec(), b"b".to_vec()), (Vec::new(), vec![0xff; 300])];
        let mut blob = Vec::new();
        for (b, e) in &ranges {
            for k in [b, e] {
                blob.extend_from_slice(&(k.len() as u32).to_le_bytes());
                blob.extend_from_slice(k);
            }
        }
        let mut out = Vec::new();
        decode_ranges(&blob, &mut out).unwrap();
        assert_eq!(out, ranges);
        assert!(decode_ranges(&blob[..blob.len() - 1], &mut Vec::new()).is_none());
    }
}
