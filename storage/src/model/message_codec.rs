//! The stored form of a message row (`msg` keys): a compact, versioned
//! binary record instead of JSON.
//!
//! Version 1 (first byte `0x01`):
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
//! | envelope, body_structure | length + their JSON text (0: null) |
//!
//! Rows written before this format are JSON objects (first byte `{`) and
//! are still read; they are rewritten in the new form whenever the row is
//! written again (flags, copy, move). Nothing else changes: the summary
//! parts stay the JSON the protocols crate produces, read by IMAP FETCH
//! and JMAP as before.

use super::messages::{BodyRef, Message};
use crate::error::{Result, StorageError};

/// The first byte of a version-1 row.
pub const VERSION_1: u8 = 1;
/// Longest string field accepted while decoding (flags, ids, summaries are
/// far smaller; a row is one KV value of ≤ 100 KB).
const FIELD_BYTES_MAX: usize = 100_000;

pub fn encode(m: &Message) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(96 + m.flags.iter().map(|f| f.len() + 1).sum::<usize>());
    out.push(VERSION_1);
    varint(&mut out, u64::from(m.uid));
    varint(&mut out, m.modseq);
    varint(&mut out, zigzag(m.internal_date_ms));
    varint(&mut out, m.flags.len() as u64);
    for f in &m.flags {
        bytes(&mut out, f.as_bytes());
    }
    match hex32(&m.body.hash) {
        Some(raw) => {
            out.push(0);
            out.extend_from_slice(&raw);
        }
        None => {
            out.push(1);
            bytes(&mut out, m.body.hash.as_bytes());
        }
    }
    varint(&mut out, m.body.size);
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
                bytes(&mut out, t.as_bytes());
            }
        },
    }
    for v in [&m.envelope, &m.body_structure] {
        if v.is_null() {
            varint(&mut out, 0);
        } else {
            let json = serde_json::to_vec(v).map_err(|e| StorageError::Model(format!("encode summary: {e}")))?;
            bytes(&mut out, &json);
        }
    }
    Ok(out)
}

/// Reads a row in either form: version 1 or the JSON of earlier builds.
pub fn decode(raw: &[u8]) -> Result<Message> {
    match raw.first() {
        Some(&VERSION_1) => Reader { raw, at: 1 }.message().map_err(|detail| corrupt(&detail)),
        Some(b'{') => super::decode("message", raw),
        Some(b) => Err(corrupt(&format!("unknown row version {b}"))),
        None => Err(corrupt("empty row")),
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

    fn message(mut self) -> std::result::Result<Message, String> {
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
        let envelope = self.json()?;
        let body_structure = self.json()?;
        if self.at != self.raw.len() {
            return Err(format!("{} trailing bytes", self.raw.len() - self.at));
        }
        Ok(Message {
            uid,
            modseq,
            flags,
            internal_date_ms,
            body: BodyRef { hash, size, inline },
            envelope,
            body_structure,
            acceptance_id,
            thread_id,
        })
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
    fn rows_round_trip_and_are_smaller_than_json() {
        let m = sample();
        let bin = encode(&m).unwrap();
        assert_eq!(decode(&bin).unwrap(), m);
        let json = serde_json::to_vec(&m).unwrap();
        assert!(bin.len() * 3 < json.len() * 2, "{} vs {} bytes", bin.len(), json.len());
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
        assert_eq!(decode(&encode(&odd).unwrap()).unwrap(), odd);
    }

    #[test]
    fn json_rows_of_earlier_builds_still_read() {
        let m = sample();
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(decode(&json).unwrap(), m);
    }

    #[test]
    fn damaged_rows_are_corrupt_not_a_panic() {
        let bin = encode(&sample()).unwrap();
        for cut in 0..bin.len() {
            assert!(decode(&bin[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = bin.clone();
        extra.push(0);
        assert!(decode(&extra).is_err());
        assert!(decode(&[9, 1, 2]).is_err());
        assert!(
            decode(&[
                VERSION_1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ])
            .is_err()
        );
    }
}
