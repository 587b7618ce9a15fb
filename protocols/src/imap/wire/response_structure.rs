//! The ENVELOPE and BODY/BODYSTRUCTURE structures of a FETCH answer
//! (RFC 9051 §7.5.2), written from a message's summary. Re-exported from
//! [`super::response`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::response::{nstring, string};
use crate::summary::{AddressList, BodyPart, Envelope};

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
        match &a.raw_name {
            // As written: encoded words stay for the client to decode, 8-bit
            // bytes go as a literal (RFC 3501 §7.4.2 leaves header text raw).
            Some(raw) => nstring(out, Some(raw.as_bytes()), utf8),
            None => name_string(out, a.name.as_deref(), utf8),
        }
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
    // As written, 8-bit bytes included (as a literal), like Dovecot.
    text(out, env.subject.as_ref().map(|s| s.raw.as_str()));
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
        s(out, part.written_type.as_ref().map_or(&part.subtype, |w| &w.1));
        if extensible {
            out.push(b' ');
            params(out, &part.params, utf8);
            extension_tail(out, part, utf8);
        }
        out.push(b')');
        return;
    }
    let (media_type, subtype) = part
        .written_type
        .as_ref()
        .map_or((&part.media_type, &part.subtype), |w| (&w.0, &w.1));
    s(out, media_type);
    out.push(b' ');
    s(out, subtype);
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
