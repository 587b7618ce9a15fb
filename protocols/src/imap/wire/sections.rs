//! Reading body sections out of a stored message with its [`Summary`]:
//! section extraction (`BODY[section]`, header field filtering, partial
//! ranges) and Content-Transfer-Encoding decoding for BINARY. Re-exported
//! from [`super::response`].

use super::types::{Partial, Section, SectionText};
use crate::summary::Summary;

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
