//! Rendering server responses, and reading body sections out of a stored
//! message with its [`Summary`].
//!
//! Writers append to a `Vec<u8>`; the `*_line` functions return a whole
//! response line with its CRLF. `utf8` is true once the client ENABLEd
//! UTF8=ACCEPT (or IMAP4rev2): quoted strings may then carry UTF-8 and
//! mailbox names are not modified UTF-7; without it, 8-bit strings go as
//! literals and non-ASCII display names as RFC 2047 encoded words.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::sequence::IdSet;
use super::types::{Date, MONTHS, Partial, Section, SectionText, StatusItem};
use super::utf7::encode_mailbox;
use crate::summary::{AddressList, BodyPart, Envelope, Summary};

/// Strings longer than this go as literals even when they could be quoted.
pub const QUOTED_MAX: usize = 1024;

/// Status of a tagged or untagged status response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    No,
    Bad,
    PreAuth,
    Bye,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::No => "NO",
            Status::Bad => "BAD",
            Status::PreAuth => "PREAUTH",
            Status::Bye => "BYE",
        }
    }
}

/// Human-readable text cannot hold CR or LF (nor, being resp-text, `[`
/// at the start when there is no code).
fn clean_text(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\r' || c == '\n' || c == '\0' { ' ' } else { c })
        .collect()
}

fn status_line(prefix: &str, status: Status, code: Option<&str>, text: &str) -> Vec<u8> {
    let mut line = format!("{prefix} {}", status.as_str());
    if let Some(code) = code {
        line.push_str(&format!(" [{}]", clean_text(code)));
    }
    let text = clean_text(text);
    line.push(' ');
    if text.is_empty() {
        line.push_str("done");
    } else if code.is_none() && text.starts_with('[') {
        // It would read as a response code.
        line.push_str("- ");
    }
    line.push_str(&text);
    line.push_str("\r\n");
    line.into_bytes()
}

/// `TAG OK [CODE] text`.
pub fn tagged(tag: &str, status: Status, code: Option<&str>, text: &str) -> Vec<u8> {
    status_line(tag, status, code, text)
}

/// `* OK [CODE] text` (also BYE, PREAUTH, NO, BAD).
pub fn untagged(status: Status, code: Option<&str>, text: &str) -> Vec<u8> {
    status_line("*", status, code, text)
}

/// `+ text` (the text may be base64 for AUTHENTICATE, or empty).
pub fn continuation(text: &str) -> Vec<u8> {
    format!("+ {}\r\n", clean_text(text)).into_bytes()
}

/// Can these bytes go inside a quoted string?
fn quotable(s: &[u8], utf8: bool) -> bool {
    s.len() <= QUOTED_MAX
        && !s.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n')
        && (s.is_ascii() || (utf8 && std::str::from_utf8(s).is_ok()))
}

/// A quoted string when possible, else a literal.
pub fn string(out: &mut Vec<u8>, s: &[u8], utf8: bool) {
    if quotable(s, utf8) {
        out.push(b'"');
        for &b in s {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        literal(out, s);
    }
}

/// A string, or NIL.
pub fn nstring(out: &mut Vec<u8>, s: Option<&[u8]>, utf8: bool) {
    match s {
        Some(s) => string(out, s, utf8),
        None => out.extend_from_slice(b"NIL"),
    }
}

/// `{n}` CRLF and the bytes.
pub fn literal(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("{{{}}}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
}

/// `~{n}` CRLF and the bytes (RFC 3516 literal8).
pub fn literal8(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'~');
    literal(out, data);
}

/// An atom when the bytes are one (and not NIL), else a string.
pub fn astring(out: &mut Vec<u8>, s: &[u8], utf8: bool) {
    let atom = !s.is_empty()
        && !s.eq_ignore_ascii_case(b"NIL")
        && s.iter().all(|&b| b.is_ascii_graphic() && !b"(){%*\"\\".contains(&b));
    if atom {
        out.extend_from_slice(s)
    } else {
        string(out, s, utf8)
    }
}

/// A mailbox name (decoded), encoded for the client and quoted.
pub fn mailbox(out: &mut Vec<u8>, name: &str, utf8: bool) {
    string(out, encode_mailbox(name, utf8).as_bytes(), utf8);
}

/// `(\Seen $Forwarded)`.
pub fn flag_list<S: AsRef<str>>(out: &mut Vec<u8>, flags: &[S]) {
    out.push(b'(');
    for (i, f) in flags.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(f.as_ref().as_bytes());
    }
    out.push(b')');
}

/// An internal date, `30-Nov-2026 08:14:49 +0000` (UTC), without quotes.
pub fn internal_date(unix_ms: i64) -> String {
    let date = Date::from_unix_ms(unix_ms);
    let secs = unix_ms.div_euclid(1000).rem_euclid(86_400);
    format!(
        "{:02}-{}-{:04} {:02}:{:02}:{:02} +0000",
        date.day,
        MONTHS[(date.month as usize).clamp(1, 12) - 1],
        date.year,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Display names: as is when they can be sent, else RFC 2047 encoded
/// words of at most 75 characters each.
fn name_string(out: &mut Vec<u8>, name: Option<&str>, utf8: bool) {
    match name {
        Some(n) if !utf8 && !n.is_ascii() => {
            let mut words = Vec::new();
            let mut chunk = String::new();
            for c in n.chars() {
                if chunk.len() + c.len_utf8() > 45 {
                    words.push(std::mem::take(&mut chunk));
                }
                chunk.push(c);
            }
            words.push(chunk);
            let encoded: Vec<String> = words
                .iter()
                .map(|w| format!("=?UTF-8?B?{}?=", STANDARD.encode(w)))
                .collect();
            string(out, encoded.join(" ").as_bytes(), false);
        }
        other => nstring(out, other.map(str::as_bytes), utf8),
    }
}

fn address_list(out: &mut Vec<u8>, list: &AddressList, utf8: bool) {
    if list.addresses.is_empty() {
        out.extend_from_slice(b"NIL");
        return;
    }
    out.push(b'(');
    for a in &list.addresses {
        out.push(b'(');
        name_string(out, a.name.as_deref(), utf8);
        out.push(b' ');
        nstring(out, a.adl.as_deref().map(str::as_bytes), utf8);
        out.push(b' ');
        nstring(out, a.mailbox.as_deref().map(str::as_bytes), utf8);
        out.push(b' ');
        nstring(out, a.host.as_deref().map(str::as_bytes), utf8);
        out.push(b')');
    }
    out.push(b')');
}

/// The ENVELOPE structure (RFC 9051 §7.5.2).
pub fn envelope(out: &mut Vec<u8>, env: &Envelope, utf8: bool) {
    let text = |out: &mut Vec<u8>, s: Option<&str>| nstring(out, s.map(str::as_bytes), utf8);
    out.push(b'(');
    text(out, env.date.as_deref());
    out.push(b' ');
    match &env.subject {
        // A raw 8-bit subject for a client without UTF8=ACCEPT: send the
        // decoded text as encoded words.
        Some(s) if !utf8 && !s.raw.is_ascii() => name_string(out, Some(&s.decoded), false),
        Some(s) => text(out, Some(&s.raw)),
        None => text(out, None),
    }
    for list in [&env.from, &env.sender, &env.reply_to, &env.to, &env.cc, &env.bcc] {
        out.push(b' ');
        address_list(out, list, utf8);
    }
    out.push(b' ');
    text(out, env.in_reply_to.as_deref());
    out.push(b' ');
    text(out, env.message_id.as_deref());
    out.push(b')');
}

fn params(out: &mut Vec<u8>, params: &[(String, String)], utf8: bool) {
    if params.is_empty() {
        out.extend_from_slice(b"NIL");
        return;
    }
    out.push(b'(');
    for (i, (k, v)) in params.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        string(out, k.as_bytes(), utf8);
        out.push(b' ');
        string(out, v.as_bytes(), utf8);
    }
    out.push(b')');
}

/// Disposition, language and location: the extension data after md5 (for
/// a single part) or the parameters (for a multipart).
fn extension_tail(out: &mut Vec<u8>, part: &BodyPart, utf8: bool) {
    out.push(b' ');
    match &part.disposition {
        Some(d) => {
            out.push(b'(');
            string(out, d.kind.as_bytes(), utf8);
            out.push(b' ');
            params(out, &d.params, utf8);
            out.push(b')');
        }
        None => out.extend_from_slice(b"NIL"),
    }
    out.push(b' ');
    if part.language.is_empty() {
        out.extend_from_slice(b"NIL");
    } else {
        out.push(b'(');
        for (i, l) in part.language.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            string(out, l.as_bytes(), utf8);
        }
        out.push(b')');
    }
    out.push(b' ');
    nstring(out, part.location.as_deref().map(str::as_bytes), utf8);
}

/// BODYSTRUCTURE (`extensible`) or BODY of a part tree (RFC 9051 §7.5.2).
/// A message/rfc822 or message/global part with its encapsulated message
/// gets the envelope and nested structure; without (an encoded one) it is
/// a basic part. Recursion follows the summary, itself bounded by
/// [`crate::summary::MAX_DEPTH`].
pub fn body_structure(out: &mut Vec<u8>, part: &BodyPart, extensible: bool, utf8: bool) {
    let s = |out: &mut Vec<u8>, v: &str| string(out, v.as_bytes(), utf8);
    out.push(b'(');
    if part.is_multipart() {
        for child in &part.children {
            body_structure(out, child, extensible, utf8);
        }
        out.push(b' ');
        s(out, &part.subtype);
        if extensible {
            out.push(b' ');
            params(out, &part.params, utf8);
            extension_tail(out, part, utf8);
        }
        out.push(b')');
        return;
    }
    s(out, &part.media_type);
    out.push(b' ');
    s(out, &part.subtype);
    out.push(b' ');
    params(out, &part.params, utf8);
    for field in [&part.id, &part.description] {
        out.push(b' ');
        nstring(out, field.as_deref().map(str::as_bytes), utf8);
    }
    out.push(b' ');
    s(out, &part.encoding);
    out.extend_from_slice(format!(" {}", part.size).as_bytes());
    if let (Some(m), "message") = (&part.message, part.media_type.as_str()) {
        out.push(b' ');
        envelope(out, &m.envelope, utf8);
        out.push(b' ');
        body_structure(out, &m.structure, extensible, utf8);
        out.extend_from_slice(format!(" {}", part.lines.unwrap_or(0)).as_bytes());
    } else if part.media_type == "text" {
        out.extend_from_slice(format!(" {}", part.lines.unwrap_or(0)).as_bytes());
    }
    if extensible {
        out.push(b' ');
        nstring(out, part.md5.as_deref().map(str::as_bytes), utf8);
        extension_tail(out, part, utf8);
    }
    out.push(b')');
}

impl fmt::Display for Section {
    /// The section spec as echoed in a FETCH answer (`1.2.HEADER.FIELDS (A B)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.part.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("."))?;
        let Some(text) = &self.text else { return Ok(()) };
        if !self.part.is_empty() {
            f.write_str(".")?;
        }
        let fields = |f: &mut fmt::Formatter<'_>, name: &str, names: &[String]| {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                astring(&mut out, n.as_bytes(), true);
            }
            write!(f, "{name} ({})", String::from_utf8_lossy(&out))
        };
        match text {
            SectionText::Header => f.write_str("HEADER"),
            SectionText::HeaderFields(n) => fields(f, "HEADER.FIELDS", n),
            SectionText::HeaderFieldsNot(n) => fields(f, "HEADER.FIELDS.NOT", n),
            SectionText::Text => f.write_str("TEXT"),
            SectionText::Mime => f.write_str("MIME"),
        }
    }
}

/// The bytes of a body section, before any partial range. None when the
/// part does not exist, or HEADER/TEXT names a part that is not an
/// encapsulated message (the session then answers NIL or an empty string),
/// or the summary does not fit the bytes.
pub fn section_bytes(raw: &[u8], summary: &Summary, section: &Section) -> Option<Vec<u8>> {
    let slice =
        |from: u64, to: u64| -> Option<&[u8]> { raw.get(usize::try_from(from).ok()?..usize::try_from(to).ok()?) };
    let (header, text_from, end) = if section.part.is_empty() {
        (slice(0, summary.header_len)?, summary.body_offset, raw.len() as u64)
    } else {
        let part = summary.part(&section.part)?;
        match &section.text {
            None => return slice(part.body_offset, part.end_offset).map(<[u8]>::to_vec),
            Some(SectionText::Mime) => return slice(part.header_offset, part.body_offset).map(<[u8]>::to_vec),
            Some(_) => {
                let m = part.message.as_ref()?;
                (slice(m.header_offset, m.body_offset)?, m.body_offset, part.end_offset)
            }
        }
    };
    match &section.text {
        None => Some(raw.to_vec()),
        Some(SectionText::Header) => Some(header.to_vec()),
        Some(SectionText::HeaderFields(names)) => Some(filter_header(header, names, true)),
        Some(SectionText::HeaderFieldsNot(names)) => Some(filter_header(header, names, false)),
        Some(SectionText::Text) => slice(text_from, end).map(<[u8]>::to_vec),
        Some(SectionText::Mime) => None,
    }
}

/// The fields of a header block whose names are (`keep`) or are not in
/// `names`, case-insensitively, with their continuation lines, then the
/// blank line when the block had one.
pub fn filter_header(header: &[u8], names: &[String], keep: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut keeping = false;
    let mut rest = header;
    while !rest.is_empty() {
        let len = rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |i| i + 1);
        let (line, tail) = rest.split_at(len);
        rest = tail;
        if line == b"\r\n" || line == b"\n" {
            out.extend_from_slice(line);
            break;
        }
        if !matches!(line[0], b' ' | b'\t') {
            let name = line.split(|&b| b == b':').next().unwrap_or_default();
            let name = name.trim_ascii_end();
            keeping = names.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name)) == keep;
        }
        if keeping {
            out.extend_from_slice(line);
        }
    }
    out
}

/// The `<offset.count>` range of some bytes (empty past the end).
pub fn partial_range(data: &[u8], partial: Option<Partial>) -> &[u8] {
    let Some(p) = partial else { return data };
    let start = usize::try_from(p.offset).unwrap_or(usize::MAX).min(data.len());
    let end = start
        .saturating_add(usize::try_from(p.count).unwrap_or(usize::MAX))
        .min(data.len());
    &data[start..end]
}

/// Undoes a Content-Transfer-Encoding for BINARY: 7bit/8bit/binary (or
/// none) as is, base64 and quoted-printable decoded leniently (stray
/// characters skipped, bad `=` sequences kept). None for an unknown
/// encoding: answer NO [UNKNOWN-CTE].
pub fn decode_transfer_encoding(bytes: &[u8], encoding: &str) -> Option<Vec<u8>> {
    match encoding.trim().to_ascii_lowercase().as_str() {
        "" | "7bit" | "8bit" | "binary" => Some(bytes.to_vec()),
        "base64" => Some(decode_base64(bytes)),
        "quoted-printable" => Some(decode_quoted_printable(bytes)),
        _ => None,
    }
}

fn decode_base64(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => continue,
        };
        acc = (acc << 6 | u32::from(v)) & 0xff_ffff;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn decode_quoted_printable(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b' ' || b == b'\t' {
            // Trailing whitespace before a line break is transport padding.
            let run = bytes[i..].iter().take_while(|&&c| c == b' ' || c == b'\t').count();
            let after = &bytes[i + run..];
            if !(after.is_empty() || after.starts_with(b"\r\n") || after.starts_with(b"\n")) {
                out.extend_from_slice(&bytes[i..i + run]);
            }
            i += run;
        } else if b == b'=' {
            let rest = &bytes[i + 1..];
            let pad = rest.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
            if let (Some(h), Some(l)) = (rest.first().and_then(|&c| hex(c)), rest.get(1).and_then(|&c| hex(c))) {
                out.push(h << 4 | l);
                i += 3;
            } else if rest[pad..].starts_with(b"\r\n") {
                i += 1 + pad + 2;
            } else if rest[pad..].starts_with(b"\n") || rest[pad..].is_empty() {
                i += 1 + pad + usize::from(!rest[pad..].is_empty());
            } else {
                out.push(b'=');
                i += 1;
            }
        } else {
            out.push(b);
            i += 1;
        }
    }
    out
}

/// Why a BINARY section cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryError {
    /// No such part: answer NIL (or NO).
    NoSuchPart,
    /// NO [UNKNOWN-CTE].
    UnknownCte,
}

/// `BINARY[part]` before any partial range: the whole message for an empty
/// part, a multipart's or message part's bytes as they are, a leaf's bytes
/// with its transfer encoding undone.
pub fn binary_bytes(raw: &[u8], summary: &Summary, part: &[u32]) -> Result<Vec<u8>, BinaryError> {
    if part.is_empty() {
        return Ok(raw.to_vec());
    }
    let p = summary.part(part).ok_or(BinaryError::NoSuchPart)?;
    let section = Section {
        part: part.to_vec(),
        text: None,
    };
    let bytes = section_bytes(raw, summary, &section).ok_or(BinaryError::NoSuchPart)?;
    if p.is_multipart() || p.message.is_some() {
        return Ok(bytes);
    }
    decode_transfer_encoding(&bytes, &p.encoding).ok_or(BinaryError::UnknownCte)
}

/// `* CAPABILITY IMAP4rev2 ...`.
pub fn capability_line<S: AsRef<str>>(caps: &[S]) -> Vec<u8> {
    word_line("* CAPABILITY", caps)
}

/// `* ENABLED CONDSTORE ...` (an empty list is valid).
pub fn enabled_line<S: AsRef<str>>(caps: &[S]) -> Vec<u8> {
    word_line("* ENABLED", caps)
}

fn word_line<S: AsRef<str>>(head: &str, words: &[S]) -> Vec<u8> {
    let mut line = head.to_string();
    for w in words {
        line.push(' ');
        line.push_str(w.as_ref());
    }
    line.push_str("\r\n");
    line.into_bytes()
}

/// One mailbox of a LIST (or LSUB) answer.
#[derive(Debug, Clone, Default)]
pub struct ListItem<'a> {
    /// `\HasNoChildren`, `\Subscribed`, `\Sent`...
    pub attributes: Vec<&'a str>,
    pub delimiter: Option<char>,
    /// Decoded name.
    pub name: &'a str,
    /// `("CHILDINFO" ("SUBSCRIBED"))` of RFC 5258 RECURSIVEMATCH.
    pub child_subscribed: bool,
    /// `("OLDNAME" (name))` of RFC 9051 §6.3.9.
    pub old_name: Option<&'a str>,
}

/// `* LIST (\HasNoChildren) "/" "INBOX"` (`kind` is `LIST` or `LSUB`).
pub fn list_line(kind: &str, item: &ListItem<'_>, utf8: bool) -> Vec<u8> {
    let mut out = format!("* {kind} ").into_bytes();
    flag_list(&mut out, &item.attributes);
    out.push(b' ');
    match item.delimiter {
        Some(d) => string(&mut out, d.to_string().as_bytes(), utf8),
        None => out.extend_from_slice(b"NIL"),
    }
    out.push(b' ');
    mailbox(&mut out, item.name, utf8);
    if item.child_subscribed || item.old_name.is_some() {
        out.extend_from_slice(b" (");
        if item.child_subscribed {
            out.extend_from_slice(b"\"CHILDINFO\" (\"SUBSCRIBED\")");
        }
        if let Some(old) = item.old_name {
            if item.child_subscribed {
                out.push(b' ');
            }
            out.extend_from_slice(b"\"OLDNAME\" (");
            mailbox(&mut out, old, utf8);
            out.push(b')');
        }
        out.push(b')');
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `* STATUS "name" (MESSAGES 3 UIDNEXT 9)`.
pub fn status_response_line(name: &str, items: &[(StatusItem, u64)], utf8: bool) -> Vec<u8> {
    let mut out = b"* STATUS ".to_vec();
    mailbox(&mut out, name, utf8);
    let values: Vec<String> = items.iter().map(|(i, v)| format!("{} {v}", i.as_str())).collect();
    out.extend_from_slice(format!(" ({})\r\n", values.join(" ")).as_bytes());
    out
}

/// The data of an ESEARCH answer (RFC 4731); empty results leave out MIN,
/// MAX and ALL, as the RFC asks.
#[derive(Debug, Clone, Default)]
pub struct Esearch<'a> {
    /// The command's tag, for `(TAG "a1")`.
    pub tag: Option<&'a str>,
    pub uid: bool,
    pub min: Option<u32>,
    pub max: Option<u32>,
    pub all: Option<&'a IdSet>,
    pub count: Option<u64>,
    /// Highest MODSEQ of the matches (RFC 7162 with a MODSEQ key).
    pub modseq: Option<u64>,
}

/// `* ESEARCH (TAG "a1") UID MIN 2 COUNT 3 ALL 2:4`.
pub fn esearch_line(e: &Esearch<'_>) -> Vec<u8> {
    let mut out = b"* ESEARCH".to_vec();
    if let Some(tag) = e.tag {
        out.extend_from_slice(b" (TAG ");
        string(&mut out, tag.as_bytes(), false);
        out.push(b')');
    }
    let mut line = String::new();
    if e.uid {
        line.push_str(" UID");
    }
    if let Some(n) = e.min {
        line.push_str(&format!(" MIN {n}"));
    }
    if let Some(n) = e.max {
        line.push_str(&format!(" MAX {n}"));
    }
    if let Some(n) = e.count {
        line.push_str(&format!(" COUNT {n}"));
    }
    if let Some(all) = e.all.filter(|a| !a.is_empty()) {
        line.push_str(&format!(" ALL {all}"));
    }
    if let Some(m) = e.modseq {
        line.push_str(&format!(" MODSEQ {m}"));
    }
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
    out
}

/// `* SEARCH 2 3 6 (MODSEQ 917)`; `* SEARCH` when nothing matched.
pub fn search_line(ids: &[u32], modseq: Option<u64>) -> Vec<u8> {
    let mut line = String::from("* SEARCH");
    for id in ids {
        line.push_str(&format!(" {id}"));
    }
    if let (Some(m), false) = (modseq, ids.is_empty()) {
        line.push_str(&format!(" (MODSEQ {m})"));
    }
    line.push_str("\r\n");
    line.into_bytes()
}

/// `* VANISHED (EARLIER) 3:5,9` (QRESYNC); the set must not be empty.
pub fn vanished_line(earlier: bool, uids: &IdSet) -> Vec<u8> {
    format!("* VANISHED {}{uids}\r\n", if earlier { "(EARLIER) " } else { "" }).into_bytes()
}

/// `* NAMESPACE (("" "/")) NIL NIL`: one personal namespace.
pub fn namespace_line(prefix: &str, delimiter: Option<char>, utf8: bool) -> Vec<u8> {
    let mut out = b"* NAMESPACE ((".to_vec();
    mailbox(&mut out, prefix, utf8);
    out.push(b' ');
    match delimiter {
        Some(d) => string(&mut out, d.to_string().as_bytes(), utf8),
        None => out.extend_from_slice(b"NIL"),
    }
    out.extend_from_slice(b")) NIL NIL\r\n");
    out
}

/// `* ID ("name" "meshmail" ...)` or `* ID NIL`.
pub fn id_line(fields: &[(&str, &str)]) -> Vec<u8> {
    if fields.is_empty() {
        return b"* ID NIL\r\n".to_vec();
    }
    let mut out = b"* ID (".to_vec();
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        string(&mut out, k.as_bytes(), false);
        out.push(b' ');
        string(&mut out, v.as_bytes(), false);
    }
    out.extend_from_slice(b")\r\n");
    out
}

/// `* QUOTA "root" (STORAGE 10 512 MESSAGE 3 1000)`: (resource, usage,
/// limit), STORAGE in KiB as RFC 9208 says.
pub fn quota_line(root: &str, resources: &[(&str, u64, u64)]) -> Vec<u8> {
    let mut out = b"* QUOTA ".to_vec();
    string(&mut out, root.as_bytes(), true);
    let values: Vec<String> = resources.iter().map(|(r, u, l)| format!("{r} {u} {l}")).collect();
    out.extend_from_slice(format!(" ({})\r\n", values.join(" ")).as_bytes());
    out
}

/// `* QUOTAROOT "INBOX" "root"...`.
pub fn quotaroot_line(name: &str, roots: &[&str], utf8: bool) -> Vec<u8> {
    let mut out = b"* QUOTAROOT ".to_vec();
    mailbox(&mut out, name, utf8);
    for root in roots {
        out.push(b' ');
        string(&mut out, root.as_bytes(), true);
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// One `* n FETCH (...)` answer, item by item, in the order written.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    buf: Vec<u8>,
    items: usize,
    utf8: bool,
}

impl FetchResponse {
    /// Starts `* seq FETCH (`.
    pub fn new(seq: u32, utf8: bool) -> FetchResponse {
        FetchResponse {
            buf: format!("* {seq} FETCH (").into_bytes(),
            items: 0,
            utf8,
        }
    }

    fn item(&mut self, name: &str) -> &mut Vec<u8> {
        if self.items > 0 {
            self.buf.push(b' ');
        }
        self.items += 1;
        self.buf.extend_from_slice(name.as_bytes());
        &mut self.buf
    }

    pub fn uid(&mut self, uid: u32) -> &mut Self {
        self.item(&format!("UID {uid}"));
        self
    }

    pub fn flags<S: AsRef<str>>(&mut self, flags: &[S]) -> &mut Self {
        flag_list(self.item("FLAGS "), flags);
        self
    }

    pub fn internal_date(&mut self, unix_ms: i64) -> &mut Self {
        self.item(&format!("INTERNALDATE \"{}\"", internal_date(unix_ms)));
        self
    }

    pub fn rfc822_size(&mut self, size: u64) -> &mut Self {
        self.item(&format!("RFC822.SIZE {size}"));
        self
    }

    pub fn modseq(&mut self, modseq: u64) -> &mut Self {
        self.item(&format!("MODSEQ ({modseq})"));
        self
    }

    pub fn envelope(&mut self, env: &Envelope) -> &mut Self {
        let utf8 = self.utf8;
        envelope(self.item("ENVELOPE "), env, utf8);
        self
    }

    /// `BODYSTRUCTURE (...)` when `extensible`, else `BODY (...)`.
    pub fn body_structure(&mut self, part: &BodyPart, extensible: bool) -> &mut Self {
        let utf8 = self.utf8;
        let name = if extensible { "BODYSTRUCTURE " } else { "BODY " };
        body_structure(self.item(name), part, extensible, utf8);
        self
    }

    /// `BODY[section]<origin> {n}...` (or NIL): `origin` is the offset of a
    /// partial fetch, `data` already cut to the range.
    pub fn section(&mut self, section: &Section, origin: Option<u64>, data: Option<&[u8]>) -> &mut Self {
        let origin = origin.map(|o| format!("<{o}>")).unwrap_or_default();
        let out = self.item(&format!("BODY[{section}]{origin} "));
        match data {
            Some(d) => literal(out, d),
            None => out.extend_from_slice(b"NIL"),
        }
        self
    }

    /// `RFC822`, `RFC822.HEADER` or `RFC822.TEXT` with its bytes.
    pub fn rfc822(&mut self, name: &str, data: &[u8]) -> &mut Self {
        literal(self.item(&format!("{name} ")), data);
        self
    }

    /// `BINARY[part]<origin>` with decoded bytes: a literal8 only when they
    /// hold NUL (RFC 3516 §4.2).
    pub fn binary(&mut self, part: &[u32], origin: Option<u64>, data: Option<&[u8]>) -> &mut Self {
        let origin = origin.map(|o| format!("<{o}>")).unwrap_or_default();
        let out = self.item(&format!("BINARY[{}]{origin} ", dotted(part)));
        match data {
            Some(d) if d.contains(&0) => literal8(out, d),
            Some(d) => literal(out, d),
            None => out.extend_from_slice(b"NIL"),
        }
        self
    }

    pub fn binary_size(&mut self, part: &[u32], size: u64) -> &mut Self {
        self.item(&format!("BINARY.SIZE[{}] {size}", dotted(part)));
        self
    }

    /// The whole line, `)` and CRLF included.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(b")\r\n");
        self.buf
    }
}

fn dotted(part: &[u32]) -> String {
    part.iter().map(u32::to_string).collect::<Vec<_>>().join(".")
}
