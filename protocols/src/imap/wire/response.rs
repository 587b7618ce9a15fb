//! Rendering server responses. ENVELOPE and BODYSTRUCTURE are written in
//! `response_structure`; reading body sections out of a stored message
//! and transfer decoding are in `sections`; both are re-exported here.
//!
//! Writers append to a `Vec<u8>`; the `*_line` functions return a whole
//! response line with its CRLF. `utf8` is true once the client ENABLEd
//! UTF8=ACCEPT (or IMAP4rev2): quoted strings may then carry UTF-8 and
//! mailbox names are not modified UTF-7; without it, 8-bit strings go as
//! literals and non-ASCII display names as RFC 2047 encoded words.

use std::fmt;
use std::io::Write as _;

use super::sequence::IdSet;
use super::types::{Date, MONTHS, Section, SectionText, StatusItem, StatusValue};
use super::utf7::encode_mailbox;
use crate::summary::{BodyPart, Envelope};

pub use super::response_structure::{body_structure, envelope};
pub use super::sections::{
    BinaryError, binary_bytes, decode_transfer_encoding, filter_header, partial_range, section_bytes,
};

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
pub fn flag_list<I>(out: &mut Vec<u8>, flags: I)
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    out.push(b'(');
    for (i, f) in flags.into_iter().enumerate() {
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
pub fn status_response_line(name: &str, items: &[(StatusItem, StatusValue)], utf8: bool) -> Vec<u8> {
    let mut out = b"* STATUS ".to_vec();
    mailbox(&mut out, name, utf8);
    let values: Vec<String> = items
        .iter()
        .map(|(i, v)| match v {
            StatusValue::Number(n) => format!("{} {n}", i.as_str()),
            StatusValue::ObjectId(id) => format!("{} ({id})", i.as_str()),
        })
        .collect();
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
        // Numbers are written straight into the line: a FETCH of a big
        // mailbox renders tens of thousands of these, and a `format!` per
        // item was an allocation each.
        let mut buf = Vec::with_capacity(64);
        let _ = write!(buf, "* {seq} FETCH (");
        FetchResponse { buf, items: 0, utf8 }
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
        let _ = write!(self.item("UID "), "{uid}");
        self
    }

    pub fn flags<I>(&mut self, flags: I) -> &mut Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        flag_list(self.item("FLAGS "), flags);
        self
    }

    pub fn internal_date(&mut self, unix_ms: i64) -> &mut Self {
        self.item(&format!("INTERNALDATE \"{}\"", internal_date(unix_ms)));
        self
    }

    pub fn rfc822_size(&mut self, size: u64) -> &mut Self {
        let _ = write!(self.item("RFC822.SIZE "), "{size}");
        self
    }

    /// `EMAILID (id)` / `THREADID (id)` (RFC 8474 §5: an objectid is
    /// `1*255(ALPHA / DIGIT / "_" / "-")`, sent bare in parentheses).
    pub fn object_id(&mut self, name: &str, id: &str) -> &mut Self {
        self.item(&format!("{name} ({id})"));
        self
    }

    pub fn modseq(&mut self, modseq: u64) -> &mut Self {
        let _ = write!(self.item("MODSEQ "), "({modseq})");
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
