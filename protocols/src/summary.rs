//! What an IMAP (or JMAP) server needs to know about a message without
//! reading it again: the ENVELOPE, the BODYSTRUCTURE tree and the byte
//! offsets of every part's header and body in the raw message, so that
//! `BODY[1.2.MIME]` or `BODY[1.TEXT]` is a slice of the stored bytes.
//!
//! [`summarize`] parses the message once with `mail-parser`, at delivery,
//! and the [`Summary`] is stored with the message (a typed, versioned
//! binary value; the types and their codec are the storage model's). A message
//! the parser refuses or panics on still gets a minimal summary with
//! `parse_failed: true`: a message is never dropped for being strange.
//!
//! Envelope strings are kept raw (unfolded, trimmed), as IMAP sends them;
//! the subject and display names are also kept RFC 2047-decoded (for JMAP
//! and search). When a header occurs more than once, the envelope takes
//! the last one, as Dovecot does, except address fields, whose addresses
//! it lists from all of them (Dovecot's ENVELOPE too). MIME parameters are kept as written
//! (RFC 2231 continuations joined, see [`crate::summary_raw`]). Summaries
//! stored before display names were kept raw have only the decoded name;
//! IMAP re-encodes those as encoded words.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::summary_raw;
use mail_parser::{Encoding, Header, HeaderName, HeaderValue, Message, MessageParser, PartType};

/// Deeper MIME nesting than this is summarized as an opaque leaf. It keeps
/// our recursion (and serde_json's, which refuses more than 128 levels)
/// bounded on hostile input; real mail nests a handful of levels.
pub const MAX_DEPTH: usize = 24;

/// JMAP previews are at most this many characters (RFC 8621 §4.1.4: 256).
pub const PREVIEW_CHARS_MAX: usize = 256;

/// The summary types are the data model's (the store keeps and reads them);
/// this module fills them in.
pub use meshmail_storage::model::summary::{
    AddressList, BodyPart, Disposition, Envelope, HeaderText, ImapAddress, NestedMessage, Summary,
};

/// Summarizes a raw message (the exact bytes that will be stored).
pub fn summarize(raw: &[u8]) -> Summary {
    guarded(raw, try_summarize)
}

/// Runs `summarizer`, falling back to the minimal summary when it gives up
/// or panics. mail-parser promises not to panic; we do not bet the message
/// on it.
fn guarded(raw: &[u8], summarizer: impl FnOnce(&[u8]) -> Option<Summary>) -> Summary {
    match catch_unwind(AssertUnwindSafe(|| summarizer(raw))) {
        Ok(Some(summary)) => summary,
        Ok(None) | Err(_) => failed_summary(raw),
    }
}

/// The summary of a message we could not parse: one text/plain part.
fn failed_summary(raw: &[u8]) -> Summary {
    let len = raw.len() as u64;
    Summary {
        parse_failed: true,
        size: len,
        header_len: 0,
        body_offset: 0,
        envelope: Envelope::default(),
        structure: BodyPart {
            media_type: "text".into(),
            subtype: "plain".into(),
            params: vec![("charset".into(), "us-ascii".into())],
            encoding: "7bit".into(),
            size: len,
            lines: Some(count_lines(raw)),
            end_offset: len,
            ..BodyPart::default()
        },
        preview: None,
        has_attachment: None,
    }
}

fn try_summarize(raw: &[u8]) -> Option<Summary> {
    // Offsets are u32 inside mail-parser.
    if raw.len() > u32::MAX as usize {
        return None;
    }
    let message = MessageParser::default().parse(raw)?;
    let root = message.parts.first()?;
    let body_offset = clamp(root.offset_body, raw);
    let walker = Walker { raw };
    let structure = walker.part(&message, 0, 0, false);
    let summary = Summary {
        parse_failed: false,
        size: raw.len() as u64,
        header_len: body_offset,
        body_offset,
        envelope: walker.envelope(&root.headers),
        structure,
        preview: Some(
            message
                .body_preview(PREVIEW_CHARS_MAX)
                .map(|p| p.trim().to_string())
                .unwrap_or_default(),
        ),
        has_attachment: Some(!message.attachments.is_empty()),
    };
    dismantle(message);
    Some(summary)
}

/// Drops a parsed message without recursion: a hostile message can nest
/// message/rfc822 parts thousands deep, and the derived Drop would recurse
/// once per level.
fn dismantle(message: Message<'_>) {
    let mut pending = vec![message];
    while let Some(mut m) = pending.pop() {
        for part in m.parts.drain(..) {
            if let PartType::Message(nested) = part.body {
                pending.push(nested);
            }
        }
    }
}

fn clamp(offset: u32, raw: &[u8]) -> u64 {
    u64::from(offset).min(raw.len() as u64)
}

/// Lines in a body (BODYSTRUCTURE's body-fld-lines): the line breaks in
/// its content, as Dovecot, Cyrus and UW count them. A part of a multipart
/// ends before the CRLF that precedes the next boundary, which belongs to
/// the boundary (RFC 2046 §5.1.1), so `one\r\ntwo` before a boundary is
/// one line; a last line without a break is not counted anywhere.
fn count_lines(body: &[u8]) -> u64 {
    body.iter().filter(|&&b| b == b'\n').count() as u64
}

/// A part's media type as the summary gives it: lowercased, with the
/// spelling the message used when it differed only in case.
struct MediaType {
    media_type: String,
    subtype: String,
    params: Vec<(String, String)>,
    written_type: Option<(String, String)>,
}

impl MediaType {
    /// Keeps the tree well-formed for IMAP: a "multipart" that is not one
    /// (no boundary, too deep, no children) is described as what the
    /// parser treated it as, opaque bytes or text; a message too deep to
    /// look into is opaque bytes. Text always names its charset.
    fn keep_well_formed(&mut self, too_deep: bool, no_children: bool) {
        if self.media_type == "multipart" && no_children {
            self.written_type = None;
            (self.media_type, self.subtype, self.params) = if too_deep {
                ("application".into(), "octet-stream".into(), Vec::new())
            } else {
                ("text".into(), "plain".into(), Vec::new())
            };
        }
        if too_deep && self.media_type == "message" {
            self.written_type = None;
            (self.media_type, self.subtype) = ("application".into(), "octet-stream".into());
        }
        if self.media_type == "text" && !self.params.iter().any(|(k, _)| k.eq_ignore_ascii_case("charset")) {
            self.params.push(("charset".into(), "us-ascii".into()));
        }
    }
}

struct Walker<'a> {
    raw: &'a [u8],
}

impl Walker<'_> {
    /// Summarizes `message.parts[id]`. `in_digest`: the parent is
    /// multipart/digest, where the default type is message/rfc822.
    fn part(&self, message: &Message<'_>, id: usize, depth: usize, in_digest: bool) -> BodyPart {
        let Some(part) = message.parts.get(id) else {
            return BodyPart::default();
        };
        let header_offset = clamp(part.offset_header, self.raw);
        let body_offset = clamp(part.offset_body, self.raw).max(header_offset);
        let end_offset = clamp(part.offset_end, self.raw).max(body_offset);
        let mut ty = self.media_type(&part.headers, in_digest);
        let mut bp = BodyPart {
            header_offset,
            body_offset,
            end_offset,
            size: end_offset - body_offset,
            ..self.part_fields(&part.headers)
        };
        let too_deep = depth >= MAX_DEPTH;
        match &part.body {
            PartType::Multipart(ids) if !too_deep => {
                bp.children = self.children(message, ids, id, depth, ty.subtype == "digest");
            }
            PartType::Message(nested) if !too_deep && part.encoding == Encoding::None => {
                bp.message = self.nested(nested, depth);
            }
            _ => {}
        }
        ty.keep_well_formed(too_deep, bp.children.is_empty());
        if ty.media_type == "text" || (ty.media_type == "message" && bp.message.is_some()) {
            bp.lines = Some(count_lines(&self.raw[body_offset as usize..end_offset as usize]));
        }
        bp.media_type = ty.media_type;
        bp.subtype = ty.subtype;
        bp.written_type = ty.written_type;
        bp.params = ty.params;
        bp
    }

    /// The part's type from its Content-Type; without one, text/plain
    /// (RFC 2045 §5.2), or message/rfc822 in a digest (RFC 2046 §5.1.5).
    fn media_type(&self, headers: &[Header<'_>], in_digest: bool) -> MediaType {
        let content_type_header = first(headers, &HeaderName::ContentType);
        let content_type = content_type_header.and_then(|h| h.value.as_content_type());
        let written = content_type_header.map(|h| summary_raw::params(&self.raw_text(h)));
        let mut written_type = None;
        let (media_type, subtype, params) = match content_type {
            Some(ct) => {
                let written = written.unwrap_or_default();
                let (t, st) = written.value.split_once('/').unwrap_or((&written.value, ""));
                let (media_type, subtype) = (
                    ct.c_type.to_ascii_lowercase(),
                    ct.c_subtype.as_deref().unwrap_or_default().to_ascii_lowercase(),
                );
                if t.eq_ignore_ascii_case(&media_type)
                    && st.eq_ignore_ascii_case(&subtype)
                    && (t, st) != (&media_type, &subtype)
                {
                    written_type = Some((t.to_string(), st.to_string()));
                }
                (media_type, subtype, written.params)
            }
            None if in_digest => ("message".to_string(), "rfc822".to_string(), Vec::new()),
            None => (
                "text".to_string(),
                "plain".to_string(),
                vec![("charset".to_string(), "us-ascii".to_string())],
            ),
        };
        MediaType {
            media_type,
            subtype,
            params,
            written_type,
        }
    }

    /// The fields of a part its other Content-* headers give.
    fn part_fields(&self, headers: &[Header<'_>]) -> BodyPart {
        BodyPart {
            id: self.raw_value(headers, &HeaderName::ContentId),
            description: self.raw_value(headers, &HeaderName::ContentDescription),
            encoding: self
                .raw_value(headers, &HeaderName::ContentTransferEncoding)
                .unwrap_or_else(|| "7bit".to_string()),
            disposition: first(headers, &HeaderName::ContentDisposition)
                .map(|h| summary_raw::params(&self.raw_text(h)))
                .filter(|d| !d.value.is_empty())
                .map(|d| Disposition {
                    kind: d.value.to_ascii_lowercase(),
                    params: d.params,
                }),
            language: match first(headers, &HeaderName::ContentLanguage).map(|h| &h.value) {
                Some(HeaderValue::Text(t)) => vec![t.to_string()],
                Some(HeaderValue::TextList(l)) => l.iter().map(|t| t.to_string()).collect(),
                _ => Vec::new(),
            },
            location: self.raw_value(headers, &HeaderName::ContentLocation),
            ..BodyPart::default()
        }
    }

    /// The children of multipart `id`. Children always come after their
    /// parent in `parts`; the check also rules out any cycle.
    fn children(&self, message: &Message<'_>, ids: &[u32], id: usize, depth: usize, digest: bool) -> Vec<BodyPart> {
        ids.iter()
            .map(|&c| c as usize)
            .filter(|&c| c > id && c < message.parts.len())
            .map(|c| self.part(message, c, depth + 1, digest))
            .collect()
    }

    /// A message/rfc822 part's message: its offsets, envelope and
    /// structure; None when it has no part at all.
    fn nested(&self, nested: &Message<'_>, depth: usize) -> Option<Box<NestedMessage>> {
        let nested_root = nested.parts.first()?;
        let nested_body = clamp(nested_root.offset_body, self.raw);
        Some(Box::new(NestedMessage {
            header_offset: clamp(nested_root.offset_header, self.raw),
            body_offset: nested_body,
            envelope: self.envelope(&nested_root.headers),
            structure: self.part(nested, 0, depth + 1, false),
        }))
    }

    fn envelope(&self, headers: &[Header<'_>]) -> Envelope {
        let date_header = last(headers, &HeaderName::Date);
        let from = self.addresses(headers, &HeaderName::From);
        let or_from = |list: AddressList| {
            if list.addresses.is_empty() {
                AddressList {
                    raw: list.raw,
                    addresses: from.addresses.clone(),
                }
            } else {
                list
            }
        };
        Envelope {
            date: date_header.map(|h| self.raw_text(h)),
            date_timestamp: date_header.and_then(|h| {
                h.value
                    .as_datetime()
                    .filter(|d| d.is_valid())
                    .map(|d| d.to_timestamp())
                    .or_else(|| summary_raw::lenient_date(&self.raw_text(h)))
            }),
            subject: last(headers, &HeaderName::Subject).map(|h| self.header_text(h)),
            other_subjects: {
                let mut all: Vec<HeaderText> = headers
                    .iter()
                    .filter(|h| h.name == HeaderName::Subject)
                    .map(|h| self.header_text(h))
                    .collect();
                all.pop();
                all
            },
            sender: or_from(self.addresses(headers, &HeaderName::Sender)),
            reply_to: or_from(self.addresses(headers, &HeaderName::ReplyTo)),
            to: self.addresses(headers, &HeaderName::To),
            cc: self.addresses(headers, &HeaderName::Cc),
            bcc: self.addresses(headers, &HeaderName::Bcc),
            in_reply_to: last(headers, &HeaderName::InReplyTo)
                .map(|h| self.raw_text(h))
                .filter(|v| !v.is_empty()),
            message_id: last(headers, &HeaderName::MessageId)
                .map(|h| self.raw_text(h))
                .filter(|v| !v.is_empty()),
            references: last(headers, &HeaderName::References)
                .map(|h| self.raw_text(h))
                .filter(|v| !v.is_empty()),
            from,
        }
    }

    /// Every field of that name, in order: three `Cc:` fields (`Cc`, `CC`,
    /// `cc`: illegal, RFC 5322 §3.6, but common) give one list of all
    /// their addresses, as Dovecot's ENVELOPE does, and SEARCH CC finds
    /// each (the raw values joined by ", ").
    fn addresses(&self, headers: &[Header<'_>], name: &HeaderName<'_>) -> AddressList {
        let fields: Vec<String> = headers
            .iter()
            .filter(|h| h.name == *name)
            .map(|h| self.raw_text(h))
            .collect();
        if fields.is_empty() {
            return AddressList::default();
        }
        let addresses = fields
            .iter()
            .flat_map(|raw| summary_raw::addresses(raw))
            .map(|a| ImapAddress {
                name: a.name.as_deref().map(decode_words),
                raw_name: a.name,
                adl: a.adl,
                mailbox: a.mailbox,
                host: a.host,
            })
            .collect();
        AddressList {
            raw: Some(fields.join(", ")),
            addresses,
        }
    }

    fn header_text(&self, h: &Header<'_>) -> HeaderText {
        HeaderText {
            raw: self.raw_text(h),
            decoded: h.value.as_text().unwrap_or_default().to_string(),
        }
    }

    /// A header's value as written: unfolded, trimmed, lossily UTF-8.
    fn raw_text(&self, header: &Header<'_>) -> String {
        let start = clamp(header.offset_start, self.raw) as usize;
        let end = (clamp(header.offset_end, self.raw) as usize).max(start);
        let text = String::from_utf8_lossy(&self.raw[start..end]);
        // Unfolding is removing the CRLF of each fold (RFC 5322 §2.2.3).
        let unfolded: String = text.chars().filter(|&c| c != '\r' && c != '\n').collect();
        unfolded.trim().to_string()
    }

    fn raw_value(&self, headers: &[Header<'_>], name: &HeaderName<'_>) -> Option<String> {
        first(headers, name).map(|h| self.raw_text(h)).filter(|v| !v.is_empty())
    }
}

/// The first header of that name (IMAP uses the first occurrence).
fn first<'h, 'x>(headers: &'h [Header<'x>], name: &HeaderName<'_>) -> Option<&'h Header<'x>> {
    headers.iter().find(|h| h.name == *name)
}

/// The last header of that name: the envelope's choice when a header is
/// repeated (Dovecot's, and what a later header meant to correct).
fn last<'h, 'x>(headers: &'h [Header<'x>], name: &HeaderName<'_>) -> Option<&'h Header<'x>> {
    headers.iter().rev().find(|h| h.name == *name)
}

/// A display name with its RFC 2047 encoded words decoded, by mail-parser
/// (which knows the charsets) reading it as an unstructured header.
fn decode_words(raw: &str) -> String {
    if !raw.contains("=?") {
        return raw.to_string();
    }
    let header = format!("Subject: {raw}\r\n\r\n");
    MessageParser::default()
        .parse_headers(header.as_bytes())
        .and_then(|m| m.subject().map(str::to_string))
        .unwrap_or_else(|| raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_parser_yields_the_minimal_summary() {
        let raw = b"Subject: x\r\n\r\nline\r\n";
        let s = guarded(raw, |_| panic!("parser bug"));
        assert!(s.parse_failed);
        assert_eq!(s.size, raw.len() as u64);
        assert_eq!(s.structure.size, raw.len() as u64);
        assert_eq!(s.structure.lines, Some(3));
        assert_eq!(
            (s.structure.media_type.as_str(), s.structure.subtype.as_str()),
            ("text", "plain")
        );
        assert_eq!(s.envelope, Envelope::default());
    }

    #[test]
    fn repeated_address_fields_are_all_listed() {
        let raw = b"From: a@x\r\nCc: One <c1@x>\r\nCC: c2@x,\r\n c3@x\r\ncc: c4@x\r\n\r\nbody\r\n";
        let cc = summarize(raw).envelope.cc;
        let mailboxes: Vec<_> = cc.addresses.iter().filter_map(|a| a.mailbox.as_deref()).collect();
        assert_eq!(mailboxes, ["c1", "c2", "c3", "c4"]);
        assert_eq!(cc.raw.as_deref(), Some("One <c1@x>, c2@x, c3@x, c4@x"));
    }

    #[test]
    fn line_counting() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 0);
        assert_eq!(count_lines(b"a\r\n"), 1);
        assert_eq!(count_lines(b"a\r\nb"), 1);
        assert_eq!(count_lines(b"a\r\n\r\n"), 2);
    }
}
