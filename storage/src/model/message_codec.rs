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
//! Version 3 (first byte `0x03`): a version-2 row followed by the
//! message's *origin*, the (mailbox, UID) it was first stored at, as two
//! varints. Only a moved row has an origin (its JMAP id and IMAP EMAILID
//! name that first place, see `messages::copy_to`), so every row that was
//! never moved stays byte-identical to version 2 and readable by builds
//! that predate origins. Such a build refuses a version-3 row as corrupt
//! rather than rewriting it without its origin.
//!
//! Version 4 (first byte `0x04`), written only once the store's format is
//! 4 (`super::format_switch`): the version-2 fields with each flag as one
//! token byte, a number for the [`KNOWN_FLAGS`] (`\Seen` is 1 byte
//! instead of 6) or `0` and its text, then the origin as `0`, or `1` and
//! two varints. Builds of format 3 refuse such a row as corrupt, which is
//! why the store switches to format 4 only once every node reads it.
//!
//! The write-once summary (the `msum` key) has its own versioned form,
//! [`super::summary_codec`].
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

use serde::{Deserialize, Serialize};

use super::messages::{BodyRef, Message, MessageMeta};
use super::summary_codec;
use super::wire::{Decoded, Reader, bad, bytes, unzigzag, varint, zigzag};
use crate::error::{Result, StorageError};

/// The first byte of a version-1 row (hot fields and summary in one row).
pub const VERSION_1: u8 = 1;
/// The first byte of a version-2 row (hot fields only).
pub const VERSION_2: u8 = 2;
/// The first byte of a version-3 row (hot fields, then the origin of a
/// moved message).
pub const VERSION_3: u8 = 3;
/// The first byte of a version-4 row (flags as tokens, origin optional).
pub const VERSION_4: u8 = 4;

/// The flags a version-4 row writes as one byte: token `i + 1` is
/// `KNOWN_FLAGS[i]`, spelled exactly so (another spelling is kept as
/// text, so a row reads back byte for byte). Only ever appended to: a
/// token, once written, names its flag for ever.
pub const KNOWN_FLAGS: [&str; 10] = [
    "\\Seen",
    "\\Answered",
    "\\Flagged",
    "\\Deleted",
    "\\Draft",
    "$Forwarded",
    "$Junk",
    "$NotJunk",
    "$MDNSent",
    "$Phishing",
];

/// A row as stored: split (version 2; the summary is under its own key)
/// or whole (version 1 and JSON rows of earlier builds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredRow {
    Split(MessageMeta),
    /// Boxed: a whole message with its summary is ~1 KB on the stack.
    Whole(Box<Message>),
}

/// The hot row in the form a store of `format` holds: version 4 from
/// format 4 on, else [`encode_meta`]'s. `format` is the transaction's
/// ([`crate::kv::Txn::write_format`]; 0 when the process never read the
/// store's, which writes the older form every build reads).
pub fn encode_meta_as(m: &MessageMeta, format: u32) -> Vec<u8> {
    if format < super::format_switch::TOKEN_FLAGS_FORMAT {
        return encode_meta(m);
    }
    let mut out = Vec::with_capacity(64 + m.flags.iter().map(|f| f.len() + 1).sum::<usize>());
    out.push(VERSION_4);
    put_head(&mut out, m);
    varint(&mut out, m.flags.len() as u64);
    for f in &m.flags {
        match KNOWN_FLAGS.iter().position(|k| k == f) {
            Some(i) => out.push(i as u8 + 1),
            None => {
                out.push(0);
                bytes(&mut out, f.as_bytes());
            }
        }
    }
    put_tail(&mut out, m);
    match m.origin {
        None => out.push(0),
        Some((mailbox, uid)) => {
            out.push(1);
            varint(&mut out, zigzag(mailbox));
            varint(&mut out, u64::from(uid));
        }
    }
    out
}

/// The hot row of the form before format 4: version 2, or version 3 when
/// the message has an origin (it was moved).
pub fn encode_meta(m: &MessageMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + m.flags.iter().map(|f| f.len() + 1).sum::<usize>());
    match m.origin {
        None => {
            out.push(VERSION_2);
            put_meta(&mut out, m);
        }
        Some((mailbox, uid)) => {
            out.push(VERSION_3);
            put_meta(&mut out, m);
            varint(&mut out, zigzag(mailbox));
            varint(&mut out, u64::from(uid));
        }
    }
    out
}

/// A row of the previous form (version 1: hot fields and summary in one
/// value, the summary as two JSON texts). Nothing writes it any more; kept
/// so tests can build stores as earlier builds wrote them, and check that
/// they still read.
pub fn encode_v1(m: &Message) -> Result<Vec<u8>> {
    let (env, body) = summary_codec::json_parts(&m.summary)?;
    let mut out = Vec::with_capacity(128 + env.len() + body.len());
    out.push(VERSION_1);
    put_meta(&mut out, &m.meta());
    bytes(&mut out, &env);
    bytes(&mut out, &body);
    Ok(out)
}

/// A message row as the first builds stored it: JSON, the summary as two
/// JSON values. Only read (and written by tests that build such stores);
/// the values go through [`summary_codec`]'s reading of version 1.
#[derive(Serialize, Deserialize)]
struct JsonRow {
    uid: u32,
    modseq: u64,
    flags: Vec<String>,
    internal_date_ms: i64,
    body: BodyRef,
    #[serde(default)]
    envelope: serde_json::Value,
    #[serde(default)]
    body_structure: serde_json::Value,
    acceptance_id: Option<[u8; 16]>,
    #[serde(default)]
    thread_id: Option<String>,
}

/// A message as the first builds stored it (JSON).
pub fn encode_json(m: &Message) -> Result<Vec<u8>> {
    let (env, body) = summary_codec::json_parts(&m.summary)?;
    let value = |b: &[u8]| -> Result<serde_json::Value> {
        if b.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(b).map_err(|e| StorageError::Model(format!("encode: {e}")))
    };
    let row = JsonRow {
        uid: m.uid,
        modseq: m.modseq,
        flags: m.flags.clone(),
        internal_date_ms: m.internal_date_ms,
        body: m.body.clone(),
        envelope: value(&env)?,
        body_structure: value(&body)?,
        acceptance_id: m.acceptance_id,
        thread_id: m.thread_id.clone(),
    };
    super::encode(&row)
}

fn from_json_row(raw: &[u8]) -> Result<Message> {
    let row: JsonRow = super::decode("message", raw)?;
    let text = |v: &serde_json::Value| -> Result<Vec<u8>> {
        if v.is_null() {
            return Ok(Vec::new());
        }
        super::encode(v)
    };
    let summary = summary_codec::from_json_parts(&text(&row.envelope)?, &text(&row.body_structure)?)?;
    let meta = MessageMeta {
        uid: row.uid,
        modseq: row.modseq,
        flags: row.flags,
        internal_date_ms: row.internal_date_ms,
        body: row.body,
        acceptance_id: row.acceptance_id,
        thread_id: row.thread_id,
        origin: None,
    };
    Ok(Message::from_parts(meta, summary))
}

fn put_meta(out: &mut Vec<u8>, m: &MessageMeta) {
    put_head(out, m);
    varint(out, m.flags.len() as u64);
    for f in &m.flags {
        bytes(out, f.as_bytes());
    }
    put_tail(out, m);
}

/// The fields before the flags, in every version.
fn put_head(out: &mut Vec<u8>, m: &MessageMeta) {
    varint(out, u64::from(m.uid));
    varint(out, m.modseq);
    varint(out, zigzag(m.internal_date_ms));
}

/// The fields after the flags, in every version.
fn put_tail(out: &mut Vec<u8>, m: &MessageMeta) {
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

/// Reads a row in any form.
pub fn decode_row(raw: &[u8]) -> Result<StoredRow> {
    match raw.first() {
        Some(&VERSION_2 | &VERSION_3 | &VERSION_4) => Ok(StoredRow::Split(decode_split(raw)?)),
        Some(&VERSION_1) => {
            let (meta, env, body) = Reader::new(raw, 1).v1_parts().map_err(|d| corrupt(&d.to_string()))?;
            let summary = summary_codec::from_json_parts(env, body)?;
            Ok(StoredRow::Whole(Box::new(Message::from_parts(meta, summary))))
        }
        Some(b'{') => Ok(StoredRow::Whole(Box::new(from_json_row(raw)?))),
        Some(b) => Err(corrupt(&format!("unknown row version {b}"))),
        None => Err(corrupt("empty row")),
    }
}

/// The hot part of a row in any form, without decoding a summary it may
/// hold (version 1 stops before it; only JSON rows are parsed whole).
pub fn decode_meta(raw: &[u8]) -> Result<MessageMeta> {
    match raw.first() {
        Some(&VERSION_2 | &VERSION_3 | &VERSION_4) => decode_split(raw),
        Some(&VERSION_1) => Reader::new(raw, 1).meta().map_err(|d| corrupt(&d.to_string())),
        _ => match decode_row(raw)? {
            StoredRow::Whole(m) => Ok(m.meta()),
            StoredRow::Split(m) => Ok(m),
        },
    }
}

/// A hot row of version 2, 3 or 4 (the origin follows the other fields).
fn decode_split(raw: &[u8]) -> Result<MessageMeta> {
    let mut r = Reader::new(raw, 1);
    let read = |r: &mut Reader<'_>| -> Decoded<MessageMeta> {
        let tokens = raw[0] == VERSION_4;
        let mut meta = r.meta_with(tokens)?;
        let has_origin = match raw[0] {
            VERSION_3 => true,
            VERSION_4 => match r.byte()? {
                0 => false,
                1 => true,
                t => return Err(bad(format!("origin tag {t}"))),
            },
            _ => false,
        };
        if has_origin {
            let mailbox = unzigzag(r.varint()?);
            let uid = u32::try_from(r.varint()?).map_err(|_| bad("origin uid out of range"))?;
            meta.origin = Some((mailbox, uid));
        }
        r.end()?;
        Ok(meta)
    };
    read(&mut r).map_err(|d| corrupt(&d.to_string()))
}

/// A whole row of the earlier forms (version 1 or JSON); a version-2 row
/// is an error here, since its summary is under another key.
pub fn decode(raw: &[u8]) -> Result<Message> {
    match decode_row(raw)? {
        StoredRow::Whole(m) => Ok(*m),
        StoredRow::Split(_) => Err(corrupt("a version-2 row has no summary inside")),
    }
}

fn corrupt(detail: &str) -> StorageError {
    StorageError::Corrupt {
        what: "message".into(),
        detail: detail.to_string(),
    }
}

/// Lowercase hex of `N` bytes in one pass over a buffer. `hex::encode`
/// builds its string a char at a time through an iterator: with two per
/// row (body hash, thread id) it was ~12 % of the node's CPU in a
/// `FETCH 1:* (UID FLAGS)` over 30,000 messages.
fn lower_hex<const N: usize>(bytes: [u8; N]) -> String {
    let mut buf = vec![0u8; 2 * N];
    hex::encode_to_slice(bytes, &mut buf).expect("the buffer is twice the input");
    String::from_utf8(buf).expect("hex digits are ASCII")
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

/// Decoding message rows (after the version byte).
impl<'a> Reader<'a> {
    fn meta(&mut self) -> Decoded<MessageMeta> {
        self.meta_with(false)
    }

    /// The hot fields; `tokens`: flags as version 4 writes them.
    fn meta_with(&mut self, tokens: bool) -> Decoded<MessageMeta> {
        let uid = u32::try_from(self.varint()?).map_err(|_| bad("uid out of range"))?;
        let modseq = self.varint()?;
        let internal_date_ms = unzigzag(self.varint()?);
        let flags = (0..self.count()?)
            .map(|_| if tokens { self.flag_token() } else { self.text() })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let hash = match self.byte()? {
            0 => lower_hex(self.array::<32>()?),
            1 => self.text()?,
            t => return Err(bad(format!("hash tag {t}"))),
        };
        let size = self.varint()?;
        let inline = match self.byte()? {
            0 => false,
            1 => true,
            t => return Err(bad(format!("inline byte {t}"))),
        };
        let acceptance_id = match self.byte()? {
            0 => None,
            1 => Some(self.array::<16>()?),
            t => return Err(bad(format!("acceptance tag {t}"))),
        };
        let thread_id = match self.byte()? {
            0 => None,
            1 => Some(lower_hex(self.array::<16>()?)),
            2 => Some(self.text()?),
            t => return Err(bad(format!("thread tag {t}"))),
        };
        Ok(MessageMeta {
            uid,
            modseq,
            flags,
            internal_date_ms,
            body: BodyRef { hash, size, inline },
            acceptance_id,
            thread_id,
            origin: None,
        })
    }

    /// One flag of a version-4 row: a [`KNOWN_FLAGS`] token or its text.
    fn flag_token(&mut self) -> Decoded<String> {
        match self.byte()? {
            0 => self.text(),
            t => KNOWN_FLAGS
                .get(usize::from(t) - 1)
                .map(|f| f.to_string())
                .ok_or_else(|| bad(format!("flag token {t}"))),
        }
    }

    /// A version-1 row after its first byte.
    /// Its hot part and the summary's two JSON texts.
    fn v1_parts(mut self) -> Decoded<(MessageMeta, &'a [u8], &'a [u8])> {
        let meta = self.meta()?;
        let (env, body) = (self.bytes()?, self.bytes()?);
        self.end()?;
        Ok((meta, env, body))
    }
}

#[cfg(test)]
mod tests {
    use super::super::summary::{AddressList, BodyPart, Envelope, HeaderText, ImapAddress, Summary};
    use super::*;

    #[test]
    fn lower_hex_is_hex_encode() {
        assert_eq!(lower_hex([0x00, 0xab, 0xff, 0x10]), "00abff10");
        let bytes: [u8; 32] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        assert_eq!(lower_hex(bytes), hex::encode(bytes));
    }

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
            summary: Summary {
                envelope: Envelope {
                    subject: Some(HeaderText {
                        raw: "hi".into(),
                        decoded: "hi".into(),
                    }),
                    from: AddressList {
                        raw: Some("A <a>".into()),
                        addresses: vec![ImapAddress {
                            name: Some("A".into()),
                            mailbox: Some("a".into()),
                            ..ImapAddress::default()
                        }],
                    },
                    ..Envelope::default()
                },
                structure: BodyPart {
                    media_type: "text".into(),
                    ..BodyPart::default()
                },
                ..Summary::default()
            },
            acceptance_id: Some([7; 16]),
            thread_id: Some(hex::encode([9u8; 16])),
            origin: None,
        }
    }

    #[test]
    fn rows_round_trip_split_and_are_smaller_than_json() {
        let m = sample();
        let hot = encode_meta(&m.meta());
        let summary = summary_codec::encode(&m.summary);
        assert_eq!(decode_row(&hot).unwrap(), StoredRow::Split(m.meta()));
        assert_eq!(decode_meta(&hot).unwrap(), m.meta());
        let back = summary_codec::decode(&summary).unwrap();
        assert_eq!(Message::from_parts(m.meta(), back), m);
        let json = encode_json(&m).unwrap();
        assert!(
            (hot.len() + summary.len()) * 3 < json.len(),
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
            ..m
        };
        assert_eq!(decode_meta(&encode_meta(&odd.meta())).unwrap(), odd.meta());
    }

    #[test]
    fn rows_of_earlier_builds_still_read() {
        let m = sample();
        // Version 1: whole, and hot-only without touching its summary.
        let v1 = encode_v1(&m).unwrap();
        assert_eq!(v1[0], VERSION_1);
        assert_eq!(decode(&v1).unwrap(), m);
        assert_eq!(decode_row(&v1).unwrap(), StoredRow::Whole(Box::new(m.clone())));
        assert_eq!(decode_meta(&v1).unwrap(), m.meta());
        // JSON of the first builds.
        let json = encode_json(&m).unwrap();
        assert_eq!(json[0], b'{');
        assert_eq!(decode(&json).unwrap(), m);
        assert_eq!(decode_meta(&json).unwrap(), m.meta());
        // A split row is not a whole one.
        assert!(decode(&encode_meta(&m.meta())).is_err());
    }

    #[test]
    fn only_moved_rows_take_version_3() {
        let m = sample().meta();
        // No origin: the version-2 bytes earlier builds wrote and read.
        let v2 = encode_meta(&m);
        assert_eq!(v2[0], VERSION_2);
        let moved = MessageMeta {
            origin: Some((7, 4_000_000_001)),
            ..m.clone()
        };
        let v3 = encode_meta(&moved);
        assert_eq!(v3[0], VERSION_3);
        // The same fields, the origin appended.
        assert_eq!(&v3[1..v2.len()], &v2[1..]);
        assert_eq!(decode_meta(&v3).unwrap(), moved);
        assert_eq!(decode_row(&v3).unwrap(), StoredRow::Split(moved.clone()));
        for cut in v2.len()..v3.len() {
            assert!(decode_meta(&v3[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = v3.clone();
        extra.push(0);
        assert!(decode_meta(&extra).is_err());
    }

    #[test]
    fn version_4_rows_tokenize_known_flags_and_read_back_exactly() {
        let mut m = sample().meta();
        m.flags = vec![
            "$Label1".into(),
            "\\Seen".into(),
            "\\seen".into(),
            "$Phishing".into(),
            "\\Flagged".into(),
        ];
        let v2 = encode_meta(&m);
        for origin in [None, Some((-3, 77))] {
            let m = MessageMeta { origin, ..m.clone() };
            let v4 = encode_meta_as(&m, 4);
            assert_eq!(v4[0], VERSION_4);
            // Order and spelling kept: "\\seen" is not the token's spelling.
            assert_eq!(decode_meta(&v4).unwrap(), m);
            assert_eq!(decode_row(&v4).unwrap(), StoredRow::Split(m.clone()));
            for cut in 0..v4.len() {
                assert!(decode_meta(&v4[..cut]).is_err(), "cut at {cut}");
            }
            let mut extra = v4.clone();
            extra.push(0);
            assert!(decode_meta(&extra).is_err());
        }
        // Three known flags at 1 byte instead of 1 + 5, 9, 8; two others a
        // tag byte more each; one origin tag.
        assert_eq!(v2.len() - encode_meta_as(&m, 4).len(), (5 + 9 + 8) - 2 - 1);
        // Below format 4 the older forms are written, which format-3 builds read.
        assert_eq!(encode_meta_as(&m, 3), v2);
        assert_eq!(encode_meta_as(&m, 0), v2);
        // A token no build has assigned is damage, not a panic.
        let plain = MessageMeta {
            uid: 1,
            modseq: 1,
            internal_date_ms: 0,
            flags: vec!["\\Answered".into()],
            ..m
        };
        let mut unknown = encode_meta_as(&plain, 4);
        assert_eq!(&unknown[..6], &[VERSION_4, 1, 1, 0, 1, 2]);
        unknown[5] = 200;
        assert!(decode_meta(&unknown).is_err());
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
        assert!(decode_row(&[9, 1, 2]).is_err());
        assert!(
            decode_row(&[
                VERSION_1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ])
            .is_err()
        );
    }
}
