//! What a script sees of a message: its header fields (editable, for
//! editheader), its body, size and envelope. Built once per delivery from
//! the raw message; the body's text parts are decoded only when a `body`
//! test asks.

use std::sync::OnceLock;

use base64::Engine;

/// The SMTP envelope (RFC 5228 §5.4); `from` is `""` for the null path.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// Unfolded, without the leading space.
    pub value: String,
}

pub struct MessageView<'a> {
    pub fields: Vec<Field>,
    pub raw: &'a [u8],
    body_at: usize,
    pub envelope: Envelope,
    texts: OnceLock<Vec<String>>,
    /// Whether `fields` was changed by addheader/deleteheader.
    pub edited: bool,
}

impl<'a> MessageView<'a> {
    pub fn new(raw: &'a [u8], envelope: Envelope) -> MessageView<'a> {
        let (fields, body_at) = split_header(raw);
        MessageView {
            fields,
            raw,
            body_at,
            envelope,
            texts: OnceLock::new(),
            edited: false,
        }
    }

    pub fn size(&self) -> u64 {
        self.raw.len() as u64
    }

    /// The decoded values of a header (RFC 5228 §5.7: RFC 2047 decoded).
    pub fn header(&self, name: &str) -> impl Iterator<Item = String> + '_ {
        let name = name.to_string();
        self.fields
            .iter()
            .filter(move |f| f.name.eq_ignore_ascii_case(&name))
            .map(|f| decode_words(&f.value))
    }

    /// The body after the header section, undecoded.
    pub fn raw_body(&self) -> &[u8] {
        &self.raw[self.body_at.min(self.raw.len())..]
    }

    /// The decoded text of each text/* part (RFC 5173 `:text`).
    pub fn texts(&self) -> &[String] {
        self.texts.get_or_init(|| {
            let Some(msg) = mail_parser::MessageParser::default().parse(self.raw) else {
                return Vec::new();
            };
            msg.parts
                .iter()
                .filter_map(|p| match &p.body {
                    mail_parser::PartType::Text(t) | mail_parser::PartType::Html(t) => Some(t.to_string()),
                    _ => None,
                })
                .collect()
        })
    }

    /// The message with its edited header section (editheader).
    pub fn rebuilt(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.raw.len() + 256);
        for f in &self.fields {
            out.extend_from_slice(f.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(f.value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(self.raw_body());
        out
    }
}

/// Header fields (unfolded) and where the body starts.
fn split_header(raw: &[u8]) -> (Vec<Field>, usize) {
    let mut fields: Vec<Field> = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let end = raw[at..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(raw.len(), |i| at + i + 1);
        let line = &raw[at..end];
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\r', '\n']);
        at = end;
        if text.is_empty() {
            return (fields, at);
        }
        if text.starts_with([' ', '\t']) {
            if let Some(last) = fields.last_mut() {
                last.value.push_str(text);
            }
            continue;
        }
        match text.split_once(':') {
            Some((name, value)) => fields.push(Field {
                name: name.trim_end().to_string(),
                value: value.trim_start().to_string(),
            }),
            None => continue,
        }
    }
    (fields, raw.len())
}

/// RFC 2047 encoded words in UTF-8, US-ASCII or ISO-8859-1 decoded;
/// whitespace between adjacent encoded words dropped. Others stay as sent.
pub fn decode_words(value: &str) -> String {
    if !value.contains("=?") {
        return value.to_string();
    }
    let mut out = String::new();
    let mut rest = value;
    let mut after_word = false;
    while let Some(i) = rest.find("=?") {
        let (before, from) = rest.split_at(i);
        let decoded = decode_one(from);
        match decoded {
            Some((text, used)) => {
                if !(after_word && before.trim().is_empty()) {
                    out.push_str(before);
                }
                out.push_str(&text);
                rest = &from[used..];
                after_word = true;
            }
            None => {
                out.push_str(before);
                out.push_str("=?");
                rest = &from[2..];
                after_word = false;
            }
        }
    }
    out.push_str(rest);
    out
}

/// One `=?charset?enc?text?=` at the start of `s`: its text and length.
fn decode_one(s: &str) -> Option<(String, usize)> {
    let inner = &s[2..];
    let q1 = inner.find('?')?;
    let charset = inner[..q1].split('*').next()?.to_ascii_lowercase();
    let enc = inner.get(q1 + 1..q1 + 2)?.to_ascii_lowercase();
    if inner.get(q1 + 2..q1 + 3) != Some("?") {
        return None;
    }
    let text_start = q1 + 3;
    let end = inner[text_start..].find("?=")? + text_start;
    let text = &inner[text_start..end];
    let bytes = match enc.as_str() {
        "b" => base64::engine::general_purpose::STANDARD.decode(text.trim()).ok()?,
        "q" => q_decode(text),
        _ => return None,
    };
    let decoded = match charset.as_str() {
        "utf-8" | "us-ascii" => String::from_utf8_lossy(&bytes).into_owned(),
        "iso-8859-1" | "latin1" => bytes.iter().map(|&b| b as char).collect(),
        _ => return None,
    };
    Some((decoded, end + 4))
}

fn q_decode(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'_' => out.push(b' '),
            b'=' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(v) = hex {
                    out.push(v);
                    i += 3;
                    continue;
                }
                out.push(b'=');
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_unfolded_and_decoded() {
        let raw = b"Subject: =?UTF-8?B?w4lsb2lzZQ==?= =?ISO-8859-1?Q?_caf=E9?=\r\nX-Long: a\r\n b\r\n\r\nbody\r\n";
        let v = MessageView::new(raw, Envelope::default());
        assert_eq!(v.header("subject").collect::<Vec<_>>(), vec!["Éloise café"]);
        assert_eq!(v.header("x-long").collect::<Vec<_>>(), vec!["a b"]);
        assert_eq!(v.raw_body(), b"body\r\n");
    }
}
