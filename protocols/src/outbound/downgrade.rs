//! 8BITMIME / BINARYMIME downgrade (RFC 6152 §3, RFC 3030 §3): a message
//! whose body has 8-bit octets goes to a peer that does not offer 8BITMIME
//! with each 8-bit MIME leaf re-encoded as quoted-printable (text) or
//! base64 (anything else, and text that is really binary), and a binary
//! body (NUL, bare CR, lines over 998 octets) likewise to any peer, since
//! this client sends with DATA, never BDAT. Parts that are already 7-bit
//! stay byte-identical, so a signature over them (and their `Content-*`
//! fields) still holds; the message is DKIM-signed after the conversion.
//!
//! 8-bit octets in header fields cannot be downgraded this way (that needs
//! SMTPUTF8, RFC 6532): [`DowngradeError::HeaderEightBit`].
//!
//! Pure byte work with bounds on nesting: no input can make it panic or
//! recurse without limit (fuzzed: `protocols/fuzz`, `tests/fuzz_entries.rs`).

use base64::Engine;

/// Multipart / message nesting followed at most; deeper 8-bit content is
/// refused rather than recursed into.
pub const NESTING_MAX: usize = 32;
/// RFC 5321 §4.5.3.1.6: a text line is at most 998 octets plus CRLF.
const LINE_MAX: usize = 998;
/// Quoted-printable lines are at most 76 characters (RFC 2045 §6.7 rule 5).
const QP_LINE: usize = 76;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DowngradeError {
    /// 8-bit octets in a header field: only SMTPUTF8 carries those.
    #[error("8-bit octets in a header field (needs SMTPUTF8)")]
    HeaderEightBit,
    /// A header field with NUL, a bare CR or a line over 998 octets.
    #[error("a header field is not text (NUL, bare CR or an over-long line)")]
    HeaderBinary,
    #[error("MIME nesting deeper than {NESTING_MAX} levels")]
    TooDeep,
}

/// What the peer accepts in a body sent with DATA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// No 8BITMIME: every line 7-bit.
    SevenBit,
    /// 8BITMIME: 8-bit octets allowed, but still lines of text (no NUL,
    /// no bare CR, at most 998 octets).
    EightBit,
}

/// How a run of bytes would travel as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    SevenBit,
    EightBit,
    Binary,
}

fn classify(b: &[u8]) -> Class {
    let mut class = Class::SevenBit;
    let mut line = 0usize;
    for (i, &c) in b.iter().enumerate() {
        match c {
            0 => return Class::Binary,
            b'\r' if b.get(i + 1) != Some(&b'\n') => return Class::Binary,
            b'\n' => line = 0,
            _ => {
                line += 1;
                if line > LINE_MAX + 1 {
                    return Class::Binary;
                }
                if c >= 0x80 {
                    class = Class::EightBit;
                }
            }
        }
    }
    class
}

impl Target {
    pub fn label(self) -> &'static str {
        match self {
            Target::SevenBit => "7bit",
            Target::EightBit => "8bit",
        }
    }
}

fn fits(class: Class, target: Target) -> bool {
    match target {
        Target::SevenBit => class == Class::SevenBit,
        Target::EightBit => class != Class::Binary,
    }
}

/// The message converted for `target`, or `None` when it already fits (the
/// common case, decided without parsing).
pub fn downgrade(msg: &[u8], target: Target) -> Result<Option<Vec<u8>>, DowngradeError> {
    if fits(classify(msg), target) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(msg.len() + msg.len() / 3);
    entity(msg, target, 0, true, &mut out)?;
    Ok(Some(out))
}

/// One header field: its raw lines (folded continuation lines included).
struct Field<'a> {
    raw: &'a [u8],
}

impl Field<'_> {
    fn name(&self) -> &[u8] {
        let end = self.raw.iter().position(|&c| c == b':').unwrap_or(0);
        trim(&self.raw[..end])
    }
    fn is(&self, name: &str) -> bool {
        self.name().eq_ignore_ascii_case(name.as_bytes())
    }
    /// The unfolded value.
    fn value(&self) -> String {
        let start = self
            .raw
            .iter()
            .position(|&c| c == b':')
            .map_or(self.raw.len(), |p| p + 1);
        let v: Vec<u8> = self.raw[start..]
            .iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect();
        String::from_utf8_lossy(&v).trim().to_string()
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let e = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(s, |p| p + 1);
    &b[s..e]
}

/// Splits an entity into its header fields, the line end it uses, and the
/// offset of its body (after the empty line; the end when there is none).
fn split_header(e: &[u8]) -> (Vec<Field<'_>>, &'static [u8], usize) {
    let crlf: &'static [u8] = match e.iter().position(|&c| c == b'\n') {
        Some(p) if p == 0 || e[p - 1] != b'\r' => b"\n",
        _ => b"\r\n",
    };
    let mut fields: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    while at < e.len() {
        let end = e[at..].iter().position(|&c| c == b'\n').map_or(e.len(), |p| at + p + 1);
        let line = &e[at..end];
        if line == b"\r\n" || line == b"\n" {
            let fields = fields.iter().map(|&(s, t)| Field { raw: &e[s..t] }).collect();
            return (fields, crlf, end);
        }
        match fields.last_mut() {
            Some(last) if line[0] == b' ' || line[0] == b'\t' => last.1 = end,
            _ => fields.push((at, end)),
        }
        at = end;
    }
    let fields = fields.iter().map(|&(s, t)| Field { raw: &e[s..t] }).collect();
    (fields, crlf, e.len())
}

/// `type/subtype` (lowercase) and the `boundary` parameter of a
/// Content-Type value (RFC 2045 §5.1; quoted strings unescaped).
fn content_type(v: &str) -> (String, Option<String>) {
    let mut parts = v.splitn(2, ';');
    let mime = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let mut boundary = None;
    let mut rest = parts.next().unwrap_or("");
    while let Some((name, after)) = rest.split_once('=') {
        let name = name.trim().trim_start_matches(';').trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let mut val = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            val.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    _ => val.push(c),
                }
            }
            (val, &q[end..])
        } else {
            let end = after.find(';').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        if name == "boundary" && !value.is_empty() {
            boundary = Some(value);
        }
        rest = next.trim_start().trim_start_matches(';');
    }
    (mime, boundary)
}

/// Converts one entity (header + body) into `out`. `top`: the message
/// itself (it gets `MIME-Version` when a part of it is re-encoded).
fn entity(e: &[u8], target: Target, depth: usize, top: bool, out: &mut Vec<u8>) -> Result<(), DowngradeError> {
    let (fields, crlf, body_at) = split_header(e);
    let head = &e[..body_at];
    let body = &e[body_at..];
    match classify(head) {
        Class::Binary => return Err(DowngradeError::HeaderBinary),
        Class::EightBit if target == Target::SevenBit => return Err(DowngradeError::HeaderEightBit),
        _ => {}
    }
    let ct = fields.iter().find(|f| f.is("Content-Type")).map(|f| f.value());
    let cte = fields
        .iter()
        .find(|f| f.is("Content-Transfer-Encoding"))
        .map(|f| f.value().to_ascii_lowercase());
    let (mime, boundary) = ct.as_deref().map(content_type).unwrap_or_default();
    let declared_binary = cte.as_deref() == Some("binary");
    if fits(classify(body), target) && !declared_binary {
        out.extend_from_slice(e);
        return Ok(());
    }
    if depth >= NESTING_MAX {
        return Err(DowngradeError::TooDeep);
    }
    if mime.starts_with("multipart/")
        && let Some(b) = boundary
    {
        out.extend_from_slice(head);
        return multipart(body, b.as_bytes(), target, depth, out);
    }
    if mime == "message/rfc822" {
        // RFC 6152 §3 / RFC 2046 §5.2.1: an encapsulated message cannot be
        // encoded as a whole; it is converted inside (its own header must
        // then fit too). message/global (RFC 6532) may be encoded: a leaf.
        out.extend_from_slice(head);
        return entity(body, target, depth + 1, true, out);
    }
    // A leaf to re-encode (or a lone multipart without a boundary).
    let (encoding, encoded) = encode_leaf(body, cte.as_deref(), &mime, crlf);
    for f in &fields {
        if !f.is("Content-Transfer-Encoding") {
            out.extend_from_slice(f.raw);
        }
    }
    if top && !fields.iter().any(|f| f.is("MIME-Version")) {
        out.extend_from_slice(b"MIME-Version: 1.0");
        out.extend_from_slice(crlf);
    }
    if ct.is_none() && top {
        // A non-MIME 8-bit body: say which charset the octets were in
        // (UTF-8 when they are valid UTF-8, else RFC 1428's unknown-8bit),
        // since the default us-ascii would make the decoded text wrong.
        let charset = if std::str::from_utf8(body).is_ok() {
            "utf-8"
        } else {
            "unknown-8bit"
        };
        out.extend_from_slice(format!("Content-Type: text/plain; charset={charset}").as_bytes());
        out.extend_from_slice(crlf);
    }
    out.extend_from_slice(format!("Content-Transfer-Encoding: {encoding}").as_bytes());
    out.extend_from_slice(crlf);
    out.extend_from_slice(crlf);
    out.extend_from_slice(&encoded);
    Ok(())
}

/// A leaf's body re-encoded to fit 7 bits: the transfer encoding to
/// declare and the encoded bytes.
fn encode_leaf(body: &[u8], cte: Option<&str>, mime: &str, crlf: &[u8]) -> (&'static str, Vec<u8>) {
    match cte {
        // Already encoded but with stray octets: a decoder passes them
        // through (QP) or skips them (base64); this keeps that meaning.
        Some("quoted-printable") => ("quoted-printable", escape_qp_strays(body, crlf)),
        Some("base64") => ("base64", rewrap_base64(body, crlf)),
        _ => {
            let text = mime.is_empty() || mime.starts_with("text/");
            // Text that is really binary (NUL, bare CR) goes as base64 so
            // every octet survives; over-long text lines are fine in QP
            // (soft breaks).
            let binary = body.contains(&0) || has_bare_cr(body);
            if text && !binary {
                ("quoted-printable", encode_qp(body, crlf))
            } else {
                ("base64", encode_base64(body, crlf))
            }
        }
    }
}

/// Where each delimiter line of `boundary` is: (line start, line end
/// after its line break, whether it is the closing one).
fn delimiters(body: &[u8], boundary: &[u8]) -> Vec<(usize, usize, bool)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let end = body[at..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(body.len(), |p| at + p + 1);
        let line = &body[at..end];
        if let Some(rest) = line.strip_prefix(b"--").and_then(|l| l.strip_prefix(boundary)) {
            let (close, rest) = match rest.strip_prefix(b"--") {
                Some(r) => (true, r),
                None => (false, rest),
            };
            // RFC 2046 §5.1.1: only transport padding may follow.
            let rest = rest
                .strip_suffix(b"\r\n")
                .or_else(|| rest.strip_suffix(b"\n"))
                .unwrap_or(rest);
            if rest.iter().all(|c| matches!(c, b' ' | b'\t')) {
                found.push((at, end, close));
                if close {
                    break;
                }
            }
        }
        at = end;
    }
    found
}

/// A multipart body: preamble, parts (each converted), epilogue. The line
/// break before a delimiter belongs to the delimiter (RFC 2046 §5.1.1) and
/// is kept as it was.
fn multipart(
    body: &[u8],
    boundary: &[u8],
    target: Target,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), DowngradeError> {
    let delims = delimiters(body, boundary);
    let crlf: &[u8] = if body.windows(2).any(|w| w == b"\r\n") {
        b"\r\n"
    } else {
        b"\n"
    };
    let Some(&(first, _, _)) = delims.first() else {
        // No delimiter at all: nothing is a part; readers ignore it.
        sanitize(body, target, crlf, out);
        return Ok(());
    };
    // Preamble and epilogue are ignored by readers (RFC 2046 §5.1.1):
    // what does not fit there is replaced rather than encoded.
    sanitize(&body[..first], target, crlf, out);
    for (i, &(start, end, close)) in delims.iter().enumerate() {
        out.extend_from_slice(&body[start..end]);
        if close {
            sanitize(&body[end..], target, crlf, out);
            return Ok(());
        }
        let next = delims.get(i + 1).map_or(body.len(), |d| d.0);
        let part = &body[end..next];
        // The part ends before the line break that precedes the next
        // delimiter.
        let brk = if part.ends_with(b"\r\n") {
            2
        } else if part.ends_with(b"\n") {
            1
        } else {
            0
        };
        let (content, line_break) = part.split_at(part.len() - brk);
        entity(content, target, depth + 1, false, out)?;
        out.extend_from_slice(line_break);
    }
    Ok(())
}

fn has_bare_cr(b: &[u8]) -> bool {
    b.iter()
        .enumerate()
        .any(|(i, &c)| c == b'\r' && b.get(i + 1) != Some(&b'\n'))
}

/// Text nobody reads (a preamble, an epilogue): kept when it fits, else
/// with `?` for octets that do not, bare CRs dropped and long lines broken.
fn sanitize(b: &[u8], target: Target, crlf: &[u8], out: &mut Vec<u8>) {
    if fits(classify(b), target) {
        out.extend_from_slice(b);
        return;
    }
    let mut col = 0;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\n' => {
                out.push(c);
                col = 0;
                continue;
            }
            b'\r' if b.get(i + 1) == Some(&b'\n') => {
                out.push(c);
                continue;
            }
            b'\r' => continue,
            _ => {}
        }
        if col >= LINE_MAX {
            out.extend_from_slice(crlf);
            col = 0;
        }
        out.push(if c == 0 || c >= 0x80 && target == Target::SevenBit {
            b'?'
        } else {
            c
        });
        col += 1;
    }
}

/// A base64 body with stray octets or bad line lengths: only its alphabet
/// is kept (what a decoder reads anyway), in lines of 76.
fn rewrap_base64(body: &[u8], crlf: &[u8]) -> Vec<u8> {
    let chars: Vec<u8> = body
        .iter()
        .copied()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        .collect();
    let mut out = Vec::with_capacity(chars.len() + chars.len() / 38 + 2);
    for chunk in chars.chunks(QP_LINE) {
        out.extend_from_slice(chunk);
        out.extend_from_slice(crlf);
    }
    out
}

/// Quoted-printable (RFC 2045 §6.7) of text: the line breaks stay hard
/// breaks (as `crlf`), long lines get soft breaks, trailing white space and
/// every octet outside printable ASCII (and `=`) become `=XX`.
pub fn encode_qp(body: &[u8], crlf: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 2);
    let mut lines = body.split(|&c| c == b'\n').peekable();
    while let Some(mut line) = lines.next() {
        let last = lines.peek().is_none();
        if last && line.is_empty() {
            break; // the body ended with a line break
        }
        if let Some(l) = line.strip_suffix(b"\r") {
            line = l;
        }
        let mut col = 0;
        for (i, &c) in line.iter().enumerate() {
            let at_end = i + 1 == line.len();
            let literal = (c == b' ' || c == b'\t') && !at_end || (33..=126).contains(&c) && c != b'=';
            push_qp(&mut out, c, literal, &mut col, QP_LINE, crlf);
        }
        if !last {
            out.extend_from_slice(crlf);
        }
    }
    out
}

/// Base64 in lines of 76 characters (RFC 2045 §6.8).
pub fn encode_base64(body: &[u8], crlf: &[u8]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(body);
    let mut out = Vec::with_capacity(b64.len() + b64.len() / 38 + 2);
    for chunk in b64.as_bytes().chunks(QP_LINE) {
        out.extend_from_slice(chunk);
        out.extend_from_slice(crlf);
    }
    out
}

/// A quoted-printable body with stray 8-bit octets, NULs or bare CRs:
/// those are written as `=XX` (what a lenient decoder yields for them),
/// and over-long lines get soft breaks.
fn escape_qp_strays(body: &[u8], crlf: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 64);
    let mut col = 0;
    for (i, &c) in body.iter().enumerate() {
        if c == b'\n' {
            if !out.ends_with(b"\r") {
                out.extend_from_slice(&crlf[..crlf.len() - 1]);
            }
            out.push(b'\n');
            col = 0;
            continue;
        }
        if c == b'\r' && body.get(i + 1) == Some(&b'\n') {
            out.push(c);
            continue;
        }
        let stray = c >= 0x80 || c == 0 || c == b'\r';
        push_qp(&mut out, c, !stray, &mut col, LINE_MAX, crlf);
    }
    out
}

/// One octet of quoted-printable, as itself (`literal`) or `=XX`, after a
/// soft line break when the line (at column `col`) would pass `line_max`
/// with the break's `=`.
fn push_qp(out: &mut Vec<u8>, c: u8, literal: bool, col: &mut usize, line_max: usize, crlf: &[u8]) {
    let width = if literal { 1 } else { 3 };
    if *col + width > line_max - 1 {
        out.extend_from_slice(b"=");
        out.extend_from_slice(crlf);
        *col = 0;
    }
    if literal {
        out.push(c);
    } else {
        out.extend_from_slice(format!("={c:02X}").as_bytes());
    }
    *col += width;
}

/// The fuzz entry (cargo-fuzz target `outbound_downgrade`, and
/// `tests/fuzz_entries.rs` on stable): any input either converts or is
/// refused, never panics; a conversion fits its target and converting it
/// again changes nothing.
pub fn fuzz(input: &[u8]) {
    for target in [Target::SevenBit, Target::EightBit] {
        match downgrade(input, target) {
            Ok(None) => assert!(fits(classify(input), target)),
            Ok(Some(out)) => {
                assert!(
                    fits(classify(&out), target),
                    "converted message does not fit {target:?}"
                );
                assert_eq!(downgrade(&out, target), Ok(None), "conversion is not idempotent");
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
#[path = "downgrade_tests.rs"]
mod tests;
