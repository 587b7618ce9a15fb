//! The stored form of a message's [`Summary`] (the write-once `msum`
//! value), typed and versioned by its first byte.
//!
//! Version 2 (`0x02`, written since this build): binary, envelope first.
//!
//! | part | encoding |
//! |---|---|
//! | envelope | varint length, then the envelope fields (below) |
//! | flags | one byte: bit 0 `parse_failed`, bits 1–2 `has_attachment` (0 unknown, 1 false, 2 true) |
//! | size, header_len, body_offset | varints |
//! | preview | optional text |
//! | structure | the body part tree (below) |
//!
//! Text is varint length + UTF-8; an optional text is varint `len + 1`
//! (0: none); a list is a varint count then its items. The envelope is
//! date, date timestamp (0 or 1 + zigzag varint), subject, the other
//! subjects, from, sender, reply-to, to, cc, bcc, in-reply-to, message-id,
//! references. A header text is its raw text then 0 (decoded is the same)
//! or 1 + the decoded text. An address list is its optional raw text, then
//! 0 + the addresses or 1 (the same addresses as `from`: how sender and
//! reply-to usually are). An address is a presence byte (bits 0–5: name,
//! raw name, raw name equal to name, adl, mailbox, host) then the present
//! texts. A body part is its fields in declaration order, options as a
//! 0/1 tag, children as a list, a nested message as 0 or 1 + its offsets,
//! envelope (same encoding, also length-prefixed) and structure.
//!
//! Why: SEARCH SUBJECT/FROM, FETCH ENVELOPE and SORT need the envelope
//! alone; the length prefix lets [`decode_envelope`] skip the body
//! structure without decoding it, and binary skips JSON parsing entirely
//! (the whole JSON decode was most of a SEARCH's time).
//!
//! Version 1 (`0x01`, the builds before): the envelope and the rest of the
//! summary as two length-prefixed JSON texts (length 0: null), the rest
//! being the summary's JSON without its `envelope` key, keys sorted (it
//! went through `serde_json::Value`). Stores written by those builds are
//! read as they are: that is the migration (a summary is never rewritten).

use serde_json::Value;

use super::summary::{AddressList, BodyPart, Disposition, Envelope, HeaderText, ImapAddress, NestedMessage, Summary};
use super::wire::{Decoded, Reader, bad, bytes, unzigzag, varint, zigzag};
use crate::error::{Result, StorageError};

/// The first byte of a JSON summary (earlier builds).
pub const SUMMARY_VERSION_1: u8 = 1;
/// The first byte of a binary summary (this build).
pub const SUMMARY_VERSION_2: u8 = 2;
/// Deepest body part tree decoded (parts and nested messages both count).
/// `summarize` has stopped at 24 levels since the first stored summary, so
/// no stored tree is deeper; this bounds the recursion on damaged bytes,
/// and so the stack a decode may take on a 2 MiB worker thread (it was 64,
/// and damaged bytes nesting that far overflowed a debug test thread).
pub(crate) const DEPTH_MAX: usize = 32;

/// The current stored form (version 2).
pub fn encode(s: &Summary) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + s.preview.as_ref().map_or(0, String::len));
    out.push(SUMMARY_VERSION_2);
    put_envelope_prefixed(&mut out, &s.envelope);
    let attach = match s.has_attachment {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    };
    out.push(u8::from(s.parse_failed) | attach << 1);
    varint(&mut out, s.size);
    varint(&mut out, s.header_len);
    varint(&mut out, s.body_offset);
    opt_text(&mut out, s.preview.as_deref());
    put_part(&mut out, &s.structure);
    out
}

/// A stored summary of any version.
pub fn decode(raw: &[u8]) -> Result<Summary> {
    match raw.first() {
        Some(&SUMMARY_VERSION_2) => {
            let mut r = Reader::new(raw, 1);
            r.summary()
                .and_then(|s| r.end().map(|()| s))
                .map_err(|d| corrupt(&d.to_string()))
        }
        Some(&SUMMARY_VERSION_1) => {
            let (env, body) = v1_texts(raw)?;
            from_json_parts(env, body)
        }
        Some(b) => Err(corrupt(&format!("unknown summary version {b}"))),
        None => Err(corrupt("empty summary")),
    }
}

/// The envelope of a stored summary of any version, without decoding the
/// rest (version 2 skips the body structure by its length prefix; version 1
/// parses only the envelope's JSON).
pub fn decode_envelope(raw: &[u8]) -> Result<Envelope> {
    match raw.first() {
        Some(&SUMMARY_VERSION_2) => {
            let mut r = Reader::new(raw, 1);
            r.envelope_prefixed().map_err(|d| corrupt(&d.to_string()))
        }
        Some(&SUMMARY_VERSION_1) => {
            let (env, body) = v1_texts(raw)?;
            envelope_from_json(env, body)
        }
        Some(b) => Err(corrupt(&format!("unknown summary version {b}"))),
        None => Err(corrupt("empty summary")),
    }
}

/// Where the header section of a stored summary's message ends (any
/// version; version 2 skips the envelope by its length prefix and decodes
/// nothing else): what a FETCH of header sections alone needs.
pub fn decode_header_len(raw: &[u8]) -> Result<u64> {
    match raw.first() {
        Some(&SUMMARY_VERSION_2) => {
            let mut r = Reader::new(raw, 1);
            r.header_len().map_err(|d| corrupt(&d.to_string()))
        }
        _ => decode(raw).map(|s| s.header_len),
    }
}

/// The two JSON texts of a version-1 summary (after its version byte).
fn v1_texts(raw: &[u8]) -> Result<(&[u8], &[u8])> {
    let mut r = Reader::new(raw, 1);
    let texts =
        (|| Ok::<_, super::wire::DecodeError>((r.bytes()?, r.bytes()?)))().map_err(|d| corrupt(&d.to_string()))?;
    r.end().map_err(|d| corrupt(&d.to_string()))?;
    Ok(texts)
}

/// A summary as version 1 stored it. Nothing writes it any more; kept so
/// tests can build stores as earlier builds wrote them.
pub fn encode_v1(s: &Summary) -> Result<Vec<u8>> {
    let (env, body) = json_parts(s)?;
    let mut out = Vec::with_capacity(env.len() + body.len() + 8);
    out.push(SUMMARY_VERSION_1);
    bytes(&mut out, &env);
    bytes(&mut out, &body);
    Ok(out)
}

/// The two JSON texts earlier builds stored a summary as (in a version-1
/// summary and inside a version-1 message row): the envelope, and the rest
/// without it, both through `serde_json::Value` as those builds did.
pub(super) fn json_parts(s: &Summary) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut body = serde_json::to_value(s).map_err(encode_error)?;
    let env = body
        .as_object_mut()
        .and_then(|o| o.remove("envelope"))
        .unwrap_or(Value::Null);
    let text = |v: &Value| -> Result<Vec<u8>> {
        if v.is_null() {
            Ok(Vec::new())
        } else {
            serde_json::to_vec(v).map_err(encode_error)
        }
    };
    Ok((text(&env)?, text(&body)?))
}

/// A summary from the two JSON texts of version 1 (empty: null), read the
/// way those builds' readers did: the envelope put back into the rest,
/// and a rest that is not a summary read as the empty summary (bytes that
/// are not JSON at all are corrupt).
pub(super) fn from_json_parts(env: &[u8], body: &[u8]) -> Result<Summary> {
    let (env, mut body) = (json(env)?, json(body)?);
    if let Some(o) = body.as_object_mut() {
        o.insert("envelope".into(), env);
    }
    Ok(serde_json::from_value(body).unwrap_or_default())
}

/// The envelope of version-1 JSON texts, parsing only the envelope's: the
/// same as [`from_json_parts`]'s for every summary a build wrote (whose
/// rest is an object, or null for none).
fn envelope_from_json(env: &[u8], body: &[u8]) -> Result<Envelope> {
    if body.is_empty() || body[0] != b'{' {
        return Ok(Envelope::default());
    }
    Ok(serde_json::from_value(json(env)?).unwrap_or_default())
}

fn json(b: &[u8]) -> Result<Value> {
    if b.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(b).map_err(|e| corrupt(&e.to_string()))
}

fn encode_error(e: serde_json::Error) -> StorageError {
    StorageError::Model(format!("encode summary: {e}"))
}

fn corrupt(detail: &str) -> StorageError {
    StorageError::Corrupt {
        what: "message summary".into(),
        detail: detail.to_string(),
    }
}

fn text(out: &mut Vec<u8>, s: &str) {
    bytes(out, s.as_bytes());
}

fn opt_text(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => varint(out, 0),
        Some(s) => {
            varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn opt_u64(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            varint(out, v);
        }
    }
}

fn texts(out: &mut Vec<u8>, list: &[String]) {
    varint(out, list.len() as u64);
    for s in list {
        text(out, s);
    }
}

fn pairs(out: &mut Vec<u8>, list: &[(String, String)]) {
    varint(out, list.len() as u64);
    for (k, v) in list {
        text(out, k);
        text(out, v);
    }
}

/// The envelope behind its length, so a reader can skip it or read it
/// alone.
fn put_envelope_prefixed(out: &mut Vec<u8>, e: &Envelope) {
    let mut env = Vec::with_capacity(192);
    put_envelope(&mut env, e);
    bytes(out, &env);
}

fn put_envelope(out: &mut Vec<u8>, e: &Envelope) {
    opt_text(out, e.date.as_deref());
    match e.date_timestamp {
        None => out.push(0),
        Some(t) => {
            out.push(1);
            varint(out, zigzag(t));
        }
    }
    match &e.subject {
        None => out.push(0),
        Some(h) => {
            out.push(1);
            put_header_text(out, h);
        }
    }
    varint(out, e.other_subjects.len() as u64);
    for h in &e.other_subjects {
        put_header_text(out, h);
    }
    put_addresses(out, &e.from, None);
    put_addresses(out, &e.sender, Some(&e.from.addresses));
    put_addresses(out, &e.reply_to, Some(&e.from.addresses));
    put_addresses(out, &e.to, None);
    put_addresses(out, &e.cc, None);
    put_addresses(out, &e.bcc, None);
    opt_text(out, e.in_reply_to.as_deref());
    opt_text(out, e.message_id.as_deref());
    opt_text(out, e.references.as_deref());
}

fn put_header_text(out: &mut Vec<u8>, h: &HeaderText) {
    text(out, &h.raw);
    if h.decoded == h.raw {
        out.push(0);
    } else {
        out.push(1);
        text(out, &h.decoded);
    }
}

/// `from`: the list this one may repeat (sender and reply-to default to
/// the From addresses).
fn put_addresses(out: &mut Vec<u8>, list: &AddressList, from: Option<&[ImapAddress]>) {
    opt_text(out, list.raw.as_deref());
    if from.is_some_and(|f| f == list.addresses.as_slice()) {
        out.push(1);
        return;
    }
    out.push(0);
    varint(out, list.addresses.len() as u64);
    for a in &list.addresses {
        put_address(out, a);
    }
}

const NAME: u8 = 1;
const RAW_NAME: u8 = 1 << 1;
const RAW_NAME_IS_NAME: u8 = 1 << 2;
const ADL: u8 = 1 << 3;
const MAILBOX: u8 = 1 << 4;
const HOST: u8 = 1 << 5;

fn put_address(out: &mut Vec<u8>, a: &ImapAddress) {
    let same = a.name.is_some() && a.raw_name == a.name;
    let bits = [
        (a.name.is_some(), NAME),
        (a.raw_name.is_some() && !same, RAW_NAME),
        (same, RAW_NAME_IS_NAME),
        (a.adl.is_some(), ADL),
        (a.mailbox.is_some(), MAILBOX),
        (a.host.is_some(), HOST),
    ];
    out.push(bits.iter().filter(|(on, _)| *on).fold(0, |acc, (_, b)| acc | b));
    for s in [
        &a.name,
        if same { &None } else { &a.raw_name },
        &a.adl,
        &a.mailbox,
        &a.host,
    ]
    .into_iter()
    .flatten()
    {
        text(out, s);
    }
}

fn put_part(out: &mut Vec<u8>, p: &BodyPart) {
    text(out, &p.media_type);
    text(out, &p.subtype);
    match &p.written_type {
        None => out.push(0),
        Some((t, st)) => {
            out.push(1);
            text(out, t);
            text(out, st);
        }
    }
    pairs(out, &p.params);
    opt_text(out, p.id.as_deref());
    opt_text(out, p.description.as_deref());
    text(out, &p.encoding);
    varint(out, p.size);
    opt_u64(out, p.lines);
    opt_text(out, p.md5.as_deref());
    match &p.disposition {
        None => out.push(0),
        Some(d) => {
            out.push(1);
            text(out, &d.kind);
            pairs(out, &d.params);
        }
    }
    texts(out, &p.language);
    opt_text(out, p.location.as_deref());
    varint(out, p.header_offset);
    varint(out, p.body_offset);
    varint(out, p.end_offset);
    varint(out, p.children.len() as u64);
    for c in &p.children {
        put_part(out, c);
    }
    match &p.message {
        None => out.push(0),
        Some(m) => {
            out.push(1);
            varint(out, m.header_offset);
            varint(out, m.body_offset);
            put_envelope_prefixed(out, &m.envelope);
            put_part(out, &m.structure);
        }
    }
}

/// Decoding version 2 (after the version byte).
impl Reader<'_> {
    fn summary(&mut self) -> Decoded<Summary> {
        let envelope = self.envelope_prefixed()?;
        let flags = self.byte()?;
        if flags & !0b111 != 0 {
            return Err(bad(format!("summary flags {flags:#x}")));
        }
        let has_attachment = match flags >> 1 {
            0 => None,
            1 => Some(false),
            2 => Some(true),
            t => return Err(bad(format!("attachment tag {t}"))),
        };
        Ok(Summary {
            parse_failed: flags & 1 == 1,
            has_attachment,
            size: self.varint()?,
            header_len: self.varint()?,
            body_offset: self.varint()?,
            preview: self.opt_text()?,
            structure: self.part(0)?,
            envelope,
        })
    }

    /// The fields of [`Reader::summary`] up to `header_len`, the envelope
    /// skipped.
    fn header_len(&mut self) -> Decoded<u64> {
        self.bytes()?;
        self.byte()?;
        self.varint()?;
        self.varint()
    }

    fn envelope_prefixed(&mut self) -> Decoded<Envelope> {
        let mut r = Reader::new(self.bytes()?, 0);
        let e = r.envelope()?;
        r.end()?;
        Ok(e)
    }

    fn envelope(&mut self) -> Decoded<Envelope> {
        let date = self.opt_text()?;
        let date_timestamp = match self.byte()? {
            0 => None,
            1 => Some(unzigzag(self.varint()?)),
            t => return Err(bad(format!("date tag {t}"))),
        };
        let subject = match self.byte()? {
            0 => None,
            1 => Some(self.header_text()?),
            t => return Err(bad(format!("subject tag {t}"))),
        };
        let other_subjects = (0..self.count()?)
            .map(|_| self.header_text())
            .collect::<Decoded<Vec<_>>>()?;
        let from = self.addresses(None)?;
        let sender = self.addresses(Some(&from.addresses))?;
        let reply_to = self.addresses(Some(&from.addresses))?;
        Ok(Envelope {
            date,
            date_timestamp,
            subject,
            other_subjects,
            sender,
            reply_to,
            to: self.addresses(None)?,
            cc: self.addresses(None)?,
            bcc: self.addresses(None)?,
            in_reply_to: self.opt_text()?,
            message_id: self.opt_text()?,
            references: self.opt_text()?,
            from,
        })
    }

    fn opt_text(&mut self) -> Decoded<Option<String>> {
        let n = self.varint()?;
        if n == 0 {
            return Ok(None);
        }
        let n = usize::try_from(n - 1).map_err(|e| bad(e.to_string()))?;
        if n > super::wire::FIELD_BYTES_MAX {
            return Err(bad(format!("field of {n} bytes")));
        }
        String::from_utf8(self.take(n)?.to_vec())
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    }

    fn header_text(&mut self) -> Decoded<HeaderText> {
        let raw = self.text()?;
        let decoded = match self.byte()? {
            0 => raw.clone(),
            1 => self.text()?,
            t => return Err(bad(format!("header text tag {t}"))),
        };
        Ok(HeaderText { raw, decoded })
    }

    fn addresses(&mut self, from: Option<&[ImapAddress]>) -> Decoded<AddressList> {
        let raw = self.opt_text()?;
        let addresses = match (self.byte()?, from) {
            (0, _) => (0..self.count()?)
                .map(|_| self.address())
                .collect::<Decoded<Vec<_>>>()?,
            (1, Some(from)) => from.to_vec(),
            (t, _) => return Err(bad(format!("address list tag {t}"))),
        };
        Ok(AddressList { raw, addresses })
    }

    fn address(&mut self) -> Decoded<ImapAddress> {
        let bits = self.byte()?;
        if bits & !0b11_1111 != 0 || bits & (RAW_NAME | RAW_NAME_IS_NAME) == RAW_NAME | RAW_NAME_IS_NAME {
            return Err(bad(format!("address bits {bits:#x}")));
        }
        let mut field = |bit: u8| -> Decoded<Option<String>> {
            if bits & bit != 0 {
                self.text().map(Some)
            } else {
                Ok(None)
            }
        };
        let name = field(NAME)?;
        let raw_name = field(RAW_NAME)?;
        let (adl, mailbox, host) = (field(ADL)?, field(MAILBOX)?, field(HOST)?);
        let raw_name = if bits & RAW_NAME_IS_NAME != 0 {
            if name.is_none() {
                return Err(bad("raw name equal to a missing name"));
            }
            name.clone()
        } else {
            raw_name
        };
        Ok(ImapAddress {
            name,
            raw_name,
            adl,
            mailbox,
            host,
        })
    }

    fn opt_u64(&mut self) -> Decoded<Option<u64>> {
        match self.byte()? {
            0 => Ok(None),
            1 => self.varint().map(Some),
            t => Err(bad(format!("option tag {t}"))),
        }
    }

    fn texts(&mut self) -> Decoded<Vec<String>> {
        (0..self.count()?).map(|_| self.text()).collect()
    }

    fn pairs(&mut self) -> Decoded<Vec<(String, String)>> {
        (0..self.count()?).map(|_| Ok((self.text()?, self.text()?))).collect()
    }

    fn part(&mut self, depth: usize) -> Decoded<BodyPart> {
        if depth > DEPTH_MAX {
            return Err(bad(format!("body structure deeper than {DEPTH_MAX}")));
        }
        let media_type = self.text()?;
        let subtype = self.text()?;
        let written_type = match self.byte()? {
            0 => None,
            1 => Some((self.text()?, self.text()?)),
            t => return Err(bad(format!("written type tag {t}"))),
        };
        let params = self.pairs()?;
        let id = self.opt_text()?;
        let description = self.opt_text()?;
        let encoding = self.text()?;
        let size = self.varint()?;
        let lines = self.opt_u64()?;
        let md5 = self.opt_text()?;
        let disposition = match self.byte()? {
            0 => None,
            1 => Some(Disposition {
                kind: self.text()?,
                params: self.pairs()?,
            }),
            t => return Err(bad(format!("disposition tag {t}"))),
        };
        let language = self.texts()?;
        let location = self.opt_text()?;
        let (header_offset, body_offset, end_offset) = (self.varint()?, self.varint()?, self.varint()?);
        let children = (0..self.count()?)
            .map(|_| self.part(depth + 1))
            .collect::<Decoded<Vec<_>>>()?;
        let message = match self.byte()? {
            0 => None,
            1 => Some(Box::new(NestedMessage {
                header_offset: self.varint()?,
                body_offset: self.varint()?,
                envelope: self.envelope_prefixed()?,
                structure: self.part(depth + 1)?,
            })),
            t => return Err(bad(format!("nested message tag {t}"))),
        };
        Ok(BodyPart {
            media_type,
            subtype,
            written_type,
            params,
            id,
            description,
            encoding,
            size,
            lines,
            md5,
            disposition,
            language,
            location,
            header_offset,
            body_offset,
            end_offset,
            children,
            message,
        })
    }
}

#[cfg(test)]
#[path = "summary_codec_tests.rs"]
mod tests;
