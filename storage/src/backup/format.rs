//! The on-disk form of a backup directory: chunk files of length-prefixed
//! records, each hashed, and a manifest written last.
//!
//! ```text
//! DIR/manifest.json              written last: temp file, fsync, rename, fsync DIR
//! DIR/keys-000001.chunk ...      the fuzzy key copy, in key order
//! DIR/ledger-000001.chunk ...    the ledger pass: each entry with the keys it names
//! DIR/objects-000001.chunk ...   which bodies DIR/objects/ holds (hash, size)
//! DIR/objects/blobs/ab/cd/<sha256>  bodies, by the same path as in the object store
//! ```
//!
//! A record is `op (u8: 0 set, 1 clear) | key length (u32 LE) | key |
//! value length (u32 LE) | value`. Plain, not compressed: `zstd` is not a
//! dependency, and most of the bytes are message bodies that are already
//! stored as they came. The manifest lists every chunk with its record
//! count, byte length and SHA-256, so a truncated or altered chunk is found
//! before anything is restored.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::BackupError;

/// The format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The manifest's name: its presence (complete, parsed, hashes matching)
/// is what makes a directory a backup.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Where a failed backup says so (best effort: the disk may be full).
pub const FAILED_FILE: &str = "BACKUP-FAILED.txt";
/// A chunk file is closed once it holds this many bytes: bounds what one
/// corrupt file costs and what restore holds in memory per chunk.
pub const CHUNK_FILE_BYTES_MAX: u64 = 64 << 20;
/// Largest record accepted on reading (a key ≤ 10 KB and a value ≤ 100 KB
/// by FDB's limits; a little slack for the framing).
const RECORD_PART_BYTES_MAX: usize = 200_000;

/// What a chunk file holds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChunkKind {
    /// The fuzzy copy of the keyspace (every subspace but the ledger).
    Keys,
    /// Ledger entries, each followed by the keys it names as read with it.
    Ledger,
    /// The bodies under `objects/`: key = hash, value = size (u64 LE).
    Objects,
}

impl ChunkKind {
    fn stem(self) -> &'static str {
        match self {
            ChunkKind::Keys => "keys",
            ChunkKind::Ledger => "ledger",
            ChunkKind::Objects => "objects",
        }
    }
}

/// One chunk file as the manifest lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChunkInfo {
    pub kind: ChunkKind,
    pub file: String,
    pub records: u64,
    pub bytes: u64,
    pub sha256: String,
}

/// Counts of what the backup holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counts {
    /// Keys of the fuzzy copy.
    pub keys: u64,
    /// Ledger entries (each with its group of keys).
    pub ledger_entries: u64,
    /// Keys carried inside ledger groups (rows, summaries, bodies...).
    pub ledger_group_keys: u64,
    /// Bodies copied from the object store.
    pub objects: u64,
    pub object_bytes: u64,
    /// Record bytes over all chunk files.
    pub chunk_bytes: u64,
}

/// The last file a backup writes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format_version: u32,
    /// "sqlite" or "fdb": the backend the backup was read from.
    pub store_kind: String,
    /// The FDB key prefix of the source ("" for SQLite or the whole keyspace).
    pub key_prefix: String,
    /// Wall-clock ms when the backup began: every message acknowledged
    /// before it is in the backup.
    pub started_ms: u64,
    pub keys_done_ms: u64,
    pub finished_ms: u64,
    pub counts: Counts,
    pub chunks: Vec<ChunkInfo>,
}

/// One record of a chunk file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Set(Vec<u8>, Vec<u8>),
    Clear(Vec<u8>),
}

impl Record {
    pub fn key(&self) -> &[u8] {
        match self {
            Record::Set(k, _) | Record::Clear(k) => k,
        }
    }
}

/// Maps an I/O error on `path` to a typed error: ENOSPC and EDQUOT become
/// [`BackupError::DiskFull`] naming the backup directory and how much was
/// written, so the operator knows what ran out and how far it got.
pub fn io_err(dir: &Path, path: &Path, written_bytes: u64, e: std::io::Error) -> BackupError {
    match e.raw_os_error() {
        Some(code) if code == libc::ENOSPC || code == libc::EDQUOT => BackupError::DiskFull {
            dir: dir.to_path_buf(),
            written_bytes,
        },
        _ => BackupError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// Writes the chunk files of one backup, closing each at
/// [`CHUNK_FILE_BYTES_MAX`], and remembers them for the manifest.
pub struct ChunkWriter {
    dir: PathBuf,
    kind: ChunkKind,
    current: Option<OpenChunk>,
    pub done: Vec<ChunkInfo>,
    /// Bytes written by this writer so far (for the disk-full message).
    pub written_bytes: u64,
}

struct OpenChunk {
    file: String,
    out: BufWriter<File>,
    hasher: Sha256,
    records: u64,
    bytes: u64,
}

impl ChunkWriter {
    pub fn new(dir: &Path, kind: ChunkKind) -> ChunkWriter {
        ChunkWriter {
            dir: dir.to_path_buf(),
            kind,
            current: None,
            done: Vec::new(),
            written_bytes: 0,
        }
    }

    pub fn push(&mut self, record: &Record, total_written: u64) -> Result<(), BackupError> {
        let mut buf = Vec::with_capacity(16 + record.key().len());
        match record {
            Record::Set(k, v) => {
                buf.push(0);
                frame(&mut buf, k);
                frame(&mut buf, v);
            }
            Record::Clear(k) => {
                buf.push(1);
                frame(&mut buf, k);
                frame(&mut buf, &[]);
            }
        }
        if self.current.is_none() {
            self.open(total_written)?;
        }
        let dir = self.dir.clone();
        let chunk = self.current.as_mut().expect("opened above");
        let path = dir.join(&chunk.file);
        chunk
            .out
            .write_all(&buf)
            .map_err(|e| io_err(&dir, &path, total_written + self.written_bytes, e))?;
        chunk.hasher.update(&buf);
        chunk.records += 1;
        chunk.bytes += buf.len() as u64;
        self.written_bytes += buf.len() as u64;
        if chunk.bytes >= CHUNK_FILE_BYTES_MAX {
            self.close(total_written)?;
        }
        Ok(())
    }

    fn open(&mut self, total_written: u64) -> Result<(), BackupError> {
        let file = format!("{}-{:06}.chunk", self.kind.stem(), self.done.len() + 1);
        let path = self.dir.join(&file);
        let f = File::create(&path).map_err(|e| io_err(&self.dir, &path, total_written + self.written_bytes, e))?;
        self.current = Some(OpenChunk {
            file,
            out: BufWriter::with_capacity(1 << 20, f),
            hasher: Sha256::new(),
            records: 0,
            bytes: 0,
        });
        Ok(())
    }

    /// Flushes and fsyncs the open chunk (a chunk is durable before the
    /// manifest that names it is written).
    pub fn close(&mut self, total_written: u64) -> Result<(), BackupError> {
        let Some(chunk) = self.current.take() else {
            return Ok(());
        };
        let path = self.dir.join(&chunk.file);
        let err = |e| io_err(&self.dir, &path, total_written + self.written_bytes, e);
        let file = chunk.out.into_inner().map_err(|e| err(e.into_error()))?;
        file.sync_all().map_err(err)?;
        self.done.push(ChunkInfo {
            kind: self.kind,
            file: chunk.file,
            records: chunk.records,
            bytes: chunk.bytes,
            sha256: hex::encode(chunk.hasher.finalize()),
        });
        Ok(())
    }
}

fn frame(buf: &mut Vec<u8>, part: &[u8]) {
    buf.extend_from_slice(&(part.len() as u32).to_le_bytes());
    buf.extend_from_slice(part);
}

/// Reads one chunk whole and checks it against the manifest: length,
/// SHA-256, then every record's framing and the record count.
pub fn read_chunk(dir: &Path, info: &ChunkInfo) -> Result<Vec<Record>, BackupError> {
    let path = dir.join(&info.file);
    let mut raw = Vec::with_capacity(info.bytes as usize);
    File::open(&path)
        .and_then(|mut f| f.read_to_end(&mut raw))
        .map_err(|e| BackupError::Io {
            path: path.clone(),
            source: e,
        })?;
    if raw.len() as u64 != info.bytes {
        return Err(BackupError::ChunkDamaged {
            file: path,
            detail: format!("{} bytes, the manifest says {}", raw.len(), info.bytes),
        });
    }
    let found = hex::encode(Sha256::digest(&raw));
    if found != info.sha256 {
        return Err(BackupError::ChunkDamaged {
            file: path,
            detail: format!("SHA-256 {found}, the manifest says {}", info.sha256),
        });
    }
    let records = parse_records(&raw).map_err(|detail| BackupError::ChunkDamaged {
        file: path.clone(),
        detail: detail.to_string(),
    })?;
    if records.len() as u64 != info.records {
        return Err(BackupError::ChunkDamaged {
            file: path,
            detail: format!("{} records, the manifest says {}", records.len(), info.records),
        });
    }
    Ok(records)
}

/// What is wrong inside a chunk file (reported as `ChunkDamaged`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RecordsDamaged(String);

fn parse_records(raw: &[u8]) -> Result<Vec<Record>, RecordsDamaged> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let part = |at: &mut usize| -> Result<Vec<u8>, RecordsDamaged> {
        let len_bytes = raw
            .get(*at..*at + 4)
            .ok_or_else(|| RecordsDamaged(format!("truncated length at byte {at}")))?;
        let len = u32::from_le_bytes(len_bytes.try_into().expect("4 bytes")) as usize;
        if len > RECORD_PART_BYTES_MAX {
            return Err(RecordsDamaged(format!("a record part of {len} bytes at byte {at}")));
        }
        let body = raw
            .get(*at + 4..*at + 4 + len)
            .ok_or_else(|| RecordsDamaged(format!("truncated record at byte {at}")))?;
        *at += 4 + len;
        Ok(body.to_vec())
    };
    while at < raw.len() {
        let op = raw[at];
        at += 1;
        let key = part(&mut at)?;
        let value = part(&mut at)?;
        out.push(match op {
            0 => Record::Set(key, value),
            1 => Record::Clear(key),
            other => return Err(RecordsDamaged(format!("unknown record op {other} at byte {}", at - 1))),
        });
    }
    Ok(out)
}

/// Writes the manifest atomically: a temporary file, fsync, rename over
/// the final name, fsync of the directory. Before the rename there is no
/// manifest, so a backup cut short at any point never looks complete.
pub fn write_manifest(dir: &Path, manifest: &Manifest, written_bytes: u64) -> Result<(), BackupError> {
    let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
    let fin = dir.join(MANIFEST_FILE);
    let text = serde_json::to_vec_pretty(manifest).expect("a manifest always serializes");
    let err = |p: &Path, e| io_err(dir, p, written_bytes, e);
    let mut f = File::create(&tmp).map_err(|e| err(&tmp, e))?;
    f.write_all(&text).map_err(|e| err(&tmp, e))?;
    f.sync_all().map_err(|e| err(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &fin).map_err(|e| err(&fin, e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err(dir, e))?;
    Ok(())
}

/// Reads and checks the manifest of `dir`: refuses a directory without a
/// complete one (a backup that failed or is still running).
pub fn read_manifest(dir: &Path) -> Result<Manifest, BackupError> {
    let path = dir.join(MANIFEST_FILE);
    let raw = match std::fs::read(&path) {
        Ok(raw) => raw,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let failed = dir.join(FAILED_FILE);
            return Err(BackupError::Incomplete {
                dir: dir.to_path_buf(),
                failed_note: std::fs::read_to_string(failed).ok(),
            });
        }
        Err(e) => return Err(BackupError::Io { path, source: e }),
    };
    let manifest: Manifest = serde_json::from_slice(&raw).map_err(|e| BackupError::ManifestInvalid {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(BackupError::ManifestInvalid {
            path,
            detail: format!(
                "format version {}, this build reads {FORMAT_VERSION}",
                manifest.format_version
            ),
        });
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ChunkWriter::new(dir.path(), ChunkKind::Keys);
        let recs = vec![
            Record::Set(b"a".to_vec(), b"1".to_vec()),
            Record::Clear(b"b".to_vec()),
            Record::Set(b"c".to_vec(), vec![7; 1000]),
        ];
        for r in &recs {
            w.push(r, 0).unwrap();
        }
        w.close(0).unwrap();
        let info = w.done[0].clone();
        assert_eq!(read_chunk(dir.path(), &info).unwrap(), recs);
        let path = dir.path().join(&info.file);
        let raw = std::fs::read(&path).unwrap();
        std::fs::write(&path, &raw[..raw.len() - 3]).unwrap();
        assert!(matches!(
            read_chunk(dir.path(), &info),
            Err(BackupError::ChunkDamaged { .. })
        ));
        let mut flipped = raw.clone();
        flipped[5] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let err = read_chunk(dir.path(), &info).unwrap_err().to_string();
        assert!(err.contains("SHA-256"), "{err}");
    }

    #[test]
    fn a_directory_without_a_manifest_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_manifest(dir.path()).unwrap_err();
        assert!(matches!(err, BackupError::Incomplete { .. }), "{err}");
    }
}
