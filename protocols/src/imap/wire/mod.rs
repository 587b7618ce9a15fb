//! The IMAP wire layer (IMAP4rev2, RFC 9051, and IMAP4rev1, RFC 3501):
//! pure code, no I/O. The session (`imap::session`: state machine,
//! sockets, store access, caches) is built on top and decides what is
//! allowed when; this layer says what the bytes mean and how answers are
//! written, and runs the pure algorithms over them (search matching,
//! SORT keys, THREAD).
//!
//! - Framing: [`literal_announcement`] tells whether a line ends with
//!   `{n}`, `{n+}` or `~{n}`; the session answers `+ Ready` (or refuses),
//!   reads n bytes and the next line, and passes the whole command (lines
//!   joined with CRLF, literals inline) to [`parse_command`]. [`is_done`]
//!   ends IDLE; [`parse_sasl_response`] reads AUTHENTICATE lines.
//! - [`parser`]: [`parse_command`] / [`parse_command_with`] into the AST of
//!   [`types`]. Extensions parsed: LITERAL+/-, SASL-IR, ID, ENABLE,
//!   UNSELECT, NAMESPACE, IDLE, UIDPLUS (UID EXPUNGE), MOVE, CONDSTORE and
//!   QRESYNC (SELECT parameters, CHANGEDSINCE/VANISHED, UNCHANGEDSINCE,
//!   MODSEQ search), ESEARCH and SEARCHRES (`RETURN`, `$`), LIST-EXTENDED,
//!   LIST-STATUS, SPECIAL-USE and CREATE-SPECIAL-USE, MULTIAPPEND, BINARY,
//!   QUOTA, UTF8=ACCEPT (via [`ParseOptions`]).
//! - [`sequence`]: [`SequenceSet`] (as written) and [`IdSet`] (resolved).
//! - [`search`]: [`matches()`] of a [`SearchKey`] against a [`MessageView`].
//! - [`response`]: strings, ENVELOPE, BODYSTRUCTURE, FETCH/LIST/STATUS/
//!   ESEARCH/VANISHED lines, body sections and transfer decoding.
//! - [`sort`] and [`thread`]: SORT and THREAD (RFC 5256) arguments, keys
//!   and algorithms, over what the session loaded.
//! - [`sections`]: body sections and transfer decoding (via [`response`]).
//! - [`utf7`]: modified UTF-7 mailbox names.
//!
//! What it may touch: [`crate::summary`] (the stored parse of a message,
//! pure) and parsing crates. Never `imap::session`, [`crate::net`], the
//! store or the actors (`protocols/tests/layers.rs` fails if it does).

pub mod parser;
mod parser_fetch;
mod parser_reader;
pub mod response;
mod response_structure;
pub mod search;
mod sections;
pub mod sequence;
pub(crate) mod sort;
pub mod thread;
pub mod types;
pub mod utf7;

#[cfg(test)]
mod parser_tests;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub use parser::{MAX_SEARCH_DEPTH, ParseError, ParseOptions, parse_command, parse_command_with};
pub use parser_reader::parse_date_time;
pub use response::{FetchResponse, Status};
pub use search::{MessageView, SearchContext, matches, needs_body, needs_headers};
pub use sequence::{IdSet, SeqNumber, SequenceSet};
pub use types::*;
pub use utf7::list_pattern_matches;

/// A literal announced at the end of a line: `{n}` (synchronizing: send
/// `+ Ready` first, or refuse it with a tagged NO/BAD without reading it),
/// `{n+}` (LITERAL+/LITERAL-: the bytes follow at once), `~{n}` (literal8,
/// RFC 3516). A length too large for u64 is reported as `u64::MAX` so that
/// the session's size check refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Literal {
    pub len: u64,
    pub sync: bool,
    pub binary: bool,
}

/// Does this line (without its CRLF; a trailing CRLF is ignored) end with
/// a literal announcement? Braces inside a quoted string do not count.
pub fn literal_announcement(line: &[u8]) -> Option<Literal> {
    let line = line.strip_suffix(b"\r\n").unwrap_or(line);
    let mut in_quote = false;
    let mut escaped = false;
    for &b in line {
        match (in_quote, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, false, b'"') => in_quote = !in_quote,
            _ => {}
        }
    }
    if in_quote {
        return None;
    }
    let inner = line.strip_suffix(b"}")?;
    let open = inner.iter().rposition(|&b| b == b'{')?;
    let mut digits = &inner[open + 1..];
    let sync = match digits.strip_suffix(b"+") {
        Some(d) => {
            digits = d;
            false
        }
        None => true,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let len = digits
        .iter()
        .try_fold(0u64, |acc, &d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')));
    Some(Literal {
        len: len.unwrap_or(u64::MAX),
        sync,
        binary: open > 0 && inner[open - 1] == b'~',
    })
}

/// Is this line the `DONE` that ends IDLE (any case, CRLF optional)?
pub fn is_done(line: &[u8]) -> bool {
    line.strip_suffix(b"\r\n").unwrap_or(line).eq_ignore_ascii_case(b"DONE")
}

/// A client line during AUTHENTICATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslResponse {
    Data(Vec<u8>),
    /// `*`: the client gives up (answer `TAG BAD`).
    Cancel,
}

/// Decodes a SASL continuation line (base64, possibly empty, or `*`).
pub fn parse_sasl_response(line: &[u8]) -> Result<SaslResponse, &'static str> {
    let line = line.strip_suffix(b"\r\n").unwrap_or(line);
    if line == b"*" {
        return Ok(SaslResponse::Cancel);
    }
    STANDARD
        .decode(line)
        .map(SaslResponse::Data)
        .map_err(|_| "invalid base64")
}
/// Fuzz entry point (cargo-fuzz target `imap_command` and the stable test
/// `protocols/tests/imap_wire.rs`): runs the parser and the helpers that
/// see client bytes, and checks what must hold. A panic is a bug.
#[doc(hidden)]
pub fn fuzz_command(data: &[u8]) {
    let _ = literal_announcement(data);
    let _ = is_done(data);
    let _ = parse_sasl_response(data);
    if let Ok(name) = utf7::decode(data) {
        assert_eq!(utf7::encode(&name).as_bytes(), data, "modified UTF-7 is not canonical");
    }
    if let Some(set) = SequenceSet::parse(data) {
        assert_eq!(SequenceSet::parse(set.to_string().as_bytes()), Some(set.clone()));
        let resolved = set.resolve(1000, None);
        assert_eq!(
            SequenceSet::parse(resolved.to_string().as_bytes()).map(|s| s.resolve(0, None)),
            (!resolved.is_empty()).then_some(resolved.clone())
        );
    }
    for utf8_accept in [false, true] {
        match parse_command_with(data, ParseOptions { utf8_accept }) {
            Ok(command) => exercise(&command),
            Err(e) => {
                let line = e.response();
                assert!(line.ends_with(b"\r\n") && !line[..line.len() - 2].contains(&b'\n'));
            }
        }
    }
}

/// What a session would do with a parsed command, on a made-up message.
fn exercise(command: &Command) {
    let _ = format!("{command:?}");
    let raw = b"Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nhi\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nFrom: a@b\r\n\r\nin\r\n--b--\r\n";
    match &command.kind {
        CommandKind::Fetch(f) => {
            let summary = crate::summary::summarize(raw);
            let _ = f.set.resolve(3, None).clamp(1, 3);
            for attr in &f.attrs {
                match attr {
                    FetchAttr::BodySection { section, partial, .. } => {
                        let _ = section.to_string();
                        if let Some(bytes) = response::section_bytes(raw, &summary, section) {
                            let _ = response::partial_range(&bytes, *partial);
                        }
                    }
                    FetchAttr::Binary { part, .. } | FetchAttr::BinarySize { part } => {
                        let _ = response::binary_bytes(raw, &summary, part);
                    }
                    _ => {}
                }
            }
        }
        CommandKind::Search(s) => {
            struct Empty(crate::summary::Envelope);
            impl MessageView for Empty {
                fn uid(&self) -> u32 {
                    7
                }
                fn seq(&self) -> u32 {
                    1
                }
                fn flags(&self) -> &[String] {
                    &[]
                }
                fn internal_date_ms(&self) -> i64 {
                    0
                }
                fn size(&self) -> u64 {
                    10
                }
                fn modseq(&self) -> u64 {
                    1
                }
                fn envelope(&self) -> &crate::summary::Envelope {
                    &self.0
                }
                fn header(&self, _: &str) -> Option<String> {
                    Some("x".into())
                }
                fn text(&self, _: bool) -> Option<String> {
                    Some("body".into())
                }
            }
            let saved: IdSet = [7].into_iter().collect();
            let ctx = SearchContext {
                max_seq: 1,
                max_uid: 7,
                saved: Some(&saved),
            };
            let _ = matches(&s.key, &Empty(Default::default()), &ctx);
            let _ = needs_body(&s.key);
        }
        CommandKind::Append { messages, .. } => {
            for m in messages {
                let _ = crate::summary::summarize(&m.data);
            }
        }
        CommandKind::List(l) => {
            for p in &l.patterns {
                let _ = list_pattern_matches(p, "INBOX/a/b", Some('/'));
            }
        }
        _ => {}
    }
}
