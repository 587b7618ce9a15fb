//! The stored form of a message: a compact, versioned binary record
//! instead of JSON, split since version 2 into a small *hot* row that
//! changes and is scanned, and a write-once *summary* read only by the
//! commands that need it.
//!
//! Version 2 (first byte `0x02`), the `msg` key: the hot part only.
//!
//! | field | encoding |
//! |---|---|
//! | uid, modseq | LEB128 varints |
//! | internal_date_ms | zigzag LEB128 |
//! | flags | count, then each as length + UTF-8 |
//! | body hash | `0` + 32 raw bytes (a lowercase hex SHA-256), or `1` + length + text |
//! | body size, inline | varint, one byte 0/1 |
//! | acceptance_id | `0`, or `1` + 16 bytes |
//! | thread_id | `0` none, `1` + 16 bytes (32 lowercase hex chars), `2` + length + text |
//!
//! Summary version 1 (first byte `0x01`), the `msum` key, written once
//! with the message: envelope and body structure, each as length + their
//! JSON text (0: null), the JSON the protocols crate produces (IMAP FETCH
//! and JMAP read it).
//!
//! Why the split: STORE rewrote the whole row (1–3 KB with the summary)
//! to change a few flag bytes, and SELECT, `FETCH (UID FLAGS)` and
//! `SEARCH UNSEEN` decoded two JSON documents per message to use none of
//! them; a hot row is ~80 bytes and decodes without JSON.
//!
//! Older rows are still read: version 1 (first byte `0x01`, the same hot
//! fields followed by the two summary fields in the same row) and the JSON
//! objects of the first builds (first byte `{`). A hot-only read of a
//! version-1 row stops before its summary. Such rows are split into the
//! version-2 form whenever they are written again (flags, copy, move).

use super::messages::{BodyRef, Message, MessageMeta};
use crate::error::{Result, StorageError};

/// The first byte of a version-1 row (hot fields and summary in one row).
pub const VERSION_1: u8 = 1;
/// The first byte of a version-2 row (hot fields only).
pub const VERSION_2: u8 = 2;
/// The first byte of a stored summary.
pub const SUMMARY_VERSION_1: u8 = 1;
/// Longest string field accepted while decoding (flags, ids, summaries are
/// far smaller; a row is one KV value of ≤ 100 KB).
const FIELD_BYTES_MAX: usize = 100_000;

/// A row as stored: split (version 2; the summary is under its own key)
/// or whole (version 1 and JSON rows of earlier builds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredRow {
    Split(MessageMeta),
    Whole(Message),
}

/// The hot row of the current form (version 2).
pub fn encode_meta(m: &MessageMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + m.flags.iter().map(|f| f.len() + 1).sum::<usize>());
    out.push(VERSION_2);
    put_meta(&mut out, m);
    out
}

/// A row of the previous form (version 1: hot fields and summary in one
/// value). Nothing writes it any more; kept so tests can build stores as
/// earlier builds wrote them, and check that they still read.
pub fn encode_v1(m: &Message) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    out.push(VERSION_1);
    put_meta(&mut out, &m.meta());
    put_summary_fields(&mut out, &m.envelope, &m.body_structure)?;
    Ok(out)
}

/// The write-once summary of a message (the `msum` value).
pub fn encode_summary(envelope: &serde_json::Value, body_structure: &serde_json::Value) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    out.push(SUMMARY_VERSION_1);
    put_summary_fields(&mut out, envelope, body_structure)?;
    Ok(out)
}

fn put_meta(out: &mut Vec<u8>, m: &MessageMeta) {
    varint(out, u64::from(m.uid));
    varint(out, m.modseq);
    varint(out, zigzag(m.internal_date_ms));
    varint(out, m.flags.len() as u64);
    for f in &m.flags {
        bytes(out, f.as_bytes());
    }
    match hex32(&m.body.hash) {
        Some(raw) => {
            out.push(0);
            out.extend_from_slice(&raw);
        }
        None => {
            out.push(1);
            bytes(out, m.body.hash.as_bytes());
        }
    }
    varint(out, m.body.size);
    out.push(u8::from(m.body.inline));
    match &m.acceptance_id {
        Some(id) => {
            out.push(1);
            out.extend_from_slice(id);
        }
        None => out.push(0),
    }
    match m.thread_id.as_deref() {
        None => out.push(0),
        Some(t) => match hex16(t) {
            Some(raw) => {
                out.push(1);
                out.extend_from_slice(&raw);
            }
            None => {
                out.push(2);
                bytes(out, t.as_bytes());
            }
        },
    }
}

fn put_summary_fields(
    out: &mut Vec<u8>,
    envelope: &serde_json::Value,
    body_structure: &serde_json::Value,
) -> Result<()> {
    for v in [envelope, body_structure] {
        if v.is_null() {
            varint(out, 0);
        } else {
            let json = serde_json::to_vec(v).map_err(|e| StorageError::Model(format!("encode summary: {e}")))?;
            bytes(out, &json);
        }
    }
    Ok(())
}

/// Reads a row in any form.
pub fn decode_row(raw: &[u8]) -> Result<StoredRow> {
    match raw.first() {
        Some(&VERSION_2) => {
            let mut r = Reader { raw, at: 1 };
            let meta = r
                .meta()
                .and_then(|m| r.end().map(|()| m))
                .map_err(|d: String| corrupt(&d))?;
            Ok(StoredRow::Split(meta))
        }
        Some(&VERSION_1) => Ok(StoredRow::Whole(
            Reader { raw, at: 1 }.message().map_err(|d: String| corrupt(&d))?,
        )),
        Some(b'{') => Ok(StoredRow::Whole(super::decode("message", raw)?)),
        Some(b) => Err(corrupt(&format!("unknown row version {b}"))),
        None => Err(corrupt("empty row")),
    }
}

/// The hot part of a row in any form, without decoding a summary it may
/// hold (version 1 stops before it; only JSON rows are parsed whole).
pub fn decode_meta(raw: &[u8]) -> Result<MessageMeta> {
    match raw.first() {
        Some(&VERSION_2) => {
            let mut r = Reader { raw, at: 1 };
            r.meta()
                .and_then(|m| r.end().map(|()| m))
                .map_err(|d: String| corrupt(&d))
        }
        Some(&VERSION_1) => Reader { raw, at: 1 }.meta().map_err(|d: String| corrupt(&d)),
        _ => match decode_row(raw)? {
            StoredRow::Whole(m) => Ok(m.meta()),
            StoredRow::Split(m) => Ok(m),
        },
    }
}

/// A whole row of the earlier forms (version 1 or JSON); a version-2 row
/// is an error here, since its summary is under another key.
pub fn decode(raw: &[u8]) -> Result<Message> {
    match decode_row(raw)? {
        StoredRow::Whole(m) => Ok(m),
        StoredRow::Split(_) => Err(corrupt("a version-2 row has no summary inside")),
    }
}

/// A stored summary: (envelope, body structure).
pub fn decode_summary(raw: &[u8]) -> Result<(serde_json::Value, serde_json::Value)> {
    match raw.first() {
        Some(&SUMMARY_VERSION_1) => {
            let mut r = Reader { raw, at: 1 };
            let env = r.json().map_err(|d| corrupt_summary(&d))?;
            let bs = r.json().map_err(|d| corrupt_summary(&d))?;
            r.end().map_err(|d| corrupt_summary(&d))?;
            Ok((env, bs))
        }
        Some(b) => Err(corrupt_summary(&format!("unknown summary version {b}"))),
        None => Err(corrupt_summary("empty summary")),
    }
}

fn corrupt_summary(detail: &str) -> StorageError {
    StorageError::Corrupt {
        what: "message summary".into(),
        detail: detail.to_string(),
    }
}

fn corrupt(detail: &str) -> StorageError {
    StorageError::Corrupt {
        what: "message".into(),
        detail: detail.to_string(),
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// The 32 bytes of a 64-char lowercase hex string (only lowercase, so the
/// text comes back exactly).
fn hex32(s: &str) -> Option<[u8; 32]> {
    (s.len() == 64 && !s.bytes().any(|b| b.is_ascii_uppercase()))
        .then(|| hex::decode(s).ok()?.try_into().ok())
        .flatten()
}

fn hex16(s: &str) -> Option<[u8; 16]> {
    (s.len() == 32 && !s.bytes().any(|b| b.is_ascii_uppercase()))
        .then(|| hex::decode(s).ok()?.try_into().ok())
        .flatten()
}

struct Reader<'a> {
    raw: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.raw.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let s = &self.raw[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn byte(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 64 bits".into())
    }

    fn bytes(&mut self) -> std::result::Result<&[u8], String> {
        let n = self.varint()? as usize;
        if n > FIELD_BYTES_MAX {
            return Err(format!("field of {n} bytes"));
        }
        self.take(n)
    }

    fn text(&mut self) -> std::result::Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|e| e.to_string())
    }

    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    fn json(&mut self) -> std::result::Result<serde_json::Value, String> {
        let b = self.bytes()?;
        if b.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(b).map_err(|e| e.to_string())
    }

    fn end(&self) -> std::result::Result<(), String> {
        if self.at != self.raw.len() {
            return Err(format!("{} trailing bytes", self.raw.len() - self.at));
        }
        Ok(())
    }

    fn meta(&mut self) -> std::result::Result<MessageMeta, String> {
        let uid = u32::try_from(self.varint()?).map_err(|_| "uid out of range".to_string())?;
        let modseq = self.varint()?;
        let z = self.varint()?;
        let internal_date_ms = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let n = self.varint()? as usize;
        if n > FIELD_BYTES_MAX {
            return Err(format!("{n} flags"));
        }
        let flags = (0..n)
            .map(|_| self.text())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let hash = match self.byte()? {
            0 => hex::encode(self.array::<32>()?),
            1 => self.text()?,
            t => return Err(format!("hash tag {t}")),
        };
        let size = self.varint()?;
        let inline = match self.byte()? {
            0 => false,
            1 => true,
            t => return Err(format!("inline byte {t}")),
        };
        let acceptance_id = match self.byte()? {
            0 => None,
            1 => Some(self.array::<16>()?),
            t => return Err(format!("acceptance tag {t}")),
        };
        let thread_id = match self.byte()? {
            0 => None,
            1 => Some(hex::encode(self.array::<16>()?)),
            2 => Some(self.text()?),
            t => return Err(format!("thread tag {t}")),
        };
        Ok(MessageMeta {
            uid,
            modseq,
            flags,
            internal_date_ms,
            body: BodyRef { hash, size, inline },
            acceptance_id,
            thread_id,
        })
    }

    /// A version-1 row after its first byte.
    fn message(mut self) -> std::result::Result<Message, String> {
        let meta = self.meta()?;
        let envelope = self.json()?;
        let body_structure = self.json()?;
        self.end()?;
        Ok(Message::from_parts(meta, envelope, body_structure))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Message {
        Message {
            uid: 4_000_000_000,
            modseq: 1 << 40,
            flags: vec!["\\Seen".into(), "$Label1".into()],
            internal_date_ms: 1_764_600_000_123,
            body: BodyRef {
                hash: crate::blob::content_hash(b"hello"),
                size: 1234,
                inline: true,
            },
            envelope: serde_json::json!({"subject": "hi", "from": [{"name": "A", "mailbox": "a"}]}),
            body_structure: serde_json::json!({"structure": {"media_type": "text"}}),
            acceptance_id: Some([7; 16]),
            thread_id: Some(hex::encode([9u8; 16])),
        }
    }

    #[test]
    fn rows_round_trip_split_and_are_smaller_than_json() {
        let m = sample();
        let hot = encode_meta(&m.meta());
        let summary = encode_summary(&m.envelope, &m.body_structure).unwrap();
        assert_eq!(decode_row(&hot).unwrap(), StoredRow::Split(m.meta()));
        assert_eq!(decode_meta(&hot).unwrap(), m.meta());
        let (env, bs) = decode_summary(&summary).unwrap();
        assert_eq!(Message::from_parts(m.meta(), env, bs), m);
        let json = serde_json::to_vec(&m).unwrap();
        assert!(
            (hot.len() + summary.len()) * 3 < json.len() * 2,
            "{} + {} vs {} bytes",
            hot.len(),
            summary.len(),
            json.len()
        );
        assert!(hot.len() < 128, "a hot row of {} bytes", hot.len());
        // Odd values take the text paths.
        let odd = Message {
            internal_date_ms: -5,
            body: BodyRef {
                hash: "ABC".into(),
                size: 0,
                inline: false,
            },
            acceptance_id: None,
            thread_id: Some("not-hex".into()),
            envelope: serde_json::Value::Null,
            ..m
        };
        assert_eq!(decode_meta(&encode_meta(&odd.meta())).unwrap(), odd.meta());
        let (env, bs) = decode_summary(&encode_summary(&odd.envelope, &odd.body_structure).unwrap()).unwrap();
        assert_eq!((env, bs), (odd.envelope.clone(), odd.body_structure.clone()));
    }

    #[test]
    fn rows_of_earlier_builds_still_read() {
        let m = sample();
        // Version 1: whole, and hot-only without touching its summary.
        let v1 = encode_v1(&m).unwrap();
        assert_eq!(v1[0], VERSION_1);
        assert_eq!(decode(&v1).unwrap(), m);
        assert_eq!(decode_row(&v1).unwrap(), StoredRow::Whole(m.clone()));
        assert_eq!(decode_meta(&v1).unwrap(), m.meta());
        // JSON of the first builds.
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(decode(&json).unwrap(), m);
        assert_eq!(decode_meta(&json).unwrap(), m.meta());
        // A split row is not a whole one.
        assert!(decode(&encode_meta(&m.meta())).is_err());
    }

    #[test]
    fn damaged_rows_are_corrupt_not_a_panic() {
        let m = sample();
        for bin in [encode_v1(&m).unwrap(), encode_meta(&m.meta())] {
            for cut in 0..bin.len() {
                assert!(decode_row(&bin[..cut]).is_err(), "cut at {cut}");
            }
            let mut extra = bin.clone();
            extra.push(0);
            assert!(decode_row(&extra).is_err());
        }
        let summary = encode_summary(&m.envelope, &m.body_structure).unwrap();
        for cut in 0..summary.len() {
            assert!(decode_summary(&summary[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_summary(&[7, 0, 0]).is_err());
        assert!(decode_row(&[9, 1, 2]).is_err());
        assert!(
            decode_row(&[
                VERSION_1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ])
            .is_err()
        );
    }
}
