//! The parsed views of a message JMAP asks for (RFC 8621 §4.1): addresses,
//! header forms, the body-part tree and body values (textBody, htmlBody
//! and attachments: `email_body_lists`). Pure functions of the raw bytes.

use mail_parser::{
    Address, Header, HeaderName, HeaderValue, Message, MessageParser, MessagePart, MimeHeaders, PartType,
};
use std::collections::BTreeMap;

use serde::Serialize;
use unicode_normalization::UnicodeNormalization;

use super::ids;
use meshmail_storage::ids::{MailboxId, Uid};

/// Parts described per message at most (hostile MIME trees stay bounded).
pub const PARTS_MAX: usize = 1000;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct EmailAddress {
    pub name: Option<String>,
    pub email: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AddressGroup {
    pub name: Option<String>,
    pub addresses: Vec<EmailAddress>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct EmailHeader {
    pub name: String,
    pub value: String,
}

/// One header in one of the forms of RFC 8621 §4.1.2.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum HeaderForm {
    Text(String),
    Addresses(Vec<EmailAddress>),
    Grouped(Vec<AddressGroup>),
    List(Vec<String>),
    Null(Option<()>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Raw,
    Text,
    Addresses,
    GroupedAddresses,
    MessageIds,
    Date,
    Urls,
}

/// `header:Name[:asForm][:all]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderProperty {
    pub name: String,
    pub form: Form,
    pub all: bool,
}

pub fn parse_header_property(p: &str) -> Option<HeaderProperty> {
    let rest = p.strip_prefix("header:")?;
    let mut it = rest.split(':');
    let name = it.next().filter(|n| !n.is_empty())?.to_string();
    let mut form = Form::Raw;
    let mut all = false;
    for x in it {
        match x {
            "all" if !all => all = true,
            _ if all => return None,
            "asRaw" => form = Form::Raw,
            "asText" => form = Form::Text,
            "asAddresses" => form = Form::Addresses,
            "asGroupedAddresses" => form = Form::GroupedAddresses,
            "asMessageIds" => form = Form::MessageIds,
            "asDate" => form = Form::Date,
            "asURLs" => form = Form::Urls,
            _ => return None,
        }
    }
    Some(HeaderProperty { name, form, all })
}

pub fn addresses(a: Option<&Address<'_>>) -> Option<Vec<EmailAddress>> {
    let a = a?;
    let mut out = Vec::new();
    let mut push = |addr: &mail_parser::Addr<'_>| {
        out.push(EmailAddress {
            name: addr.name.as_ref().map(|n| n.to_string()).filter(|n| !n.is_empty()),
            email: addr.address.as_deref().unwrap_or_default().to_string(),
        })
    };
    match a {
        Address::List(list) => list.iter().for_each(&mut push),
        Address::Group(groups) => groups.iter().flat_map(|g| g.addresses.iter()).for_each(&mut push),
    }
    Some(out)
}

fn grouped(a: Option<&Address<'_>>) -> Vec<AddressGroup> {
    match a {
        None => Vec::new(),
        Some(Address::List(_)) => vec![AddressGroup {
            name: None,
            addresses: addresses(a).unwrap_or_default(),
        }],
        Some(Address::Group(groups)) => groups
            .iter()
            .map(|g| AddressGroup {
                name: g.name.as_ref().map(|n| n.to_string()),
                addresses: addresses(Some(&Address::List(g.addresses.clone()))).unwrap_or_default(),
            })
            .collect(),
    }
}

/// A header's value in the Raw form (RFC 8621 §4.1.2.1): the octets after
/// the colon up to, not including, the field's terminating CRLF.
fn raw_value<'a>(raw: &'a [u8], h: &Header<'_>) -> &'a [u8] {
    let (s, e) = (h.offset_start as usize, h.offset_end as usize);
    let value = raw.get(s..e.max(s)).unwrap_or_default();
    let value = value.strip_suffix(b"\n").unwrap_or(value);
    value.strip_suffix(b"\r").unwrap_or(value)
}

/// A header's name as the message spells it (mail-parser gives known
/// names in its own capitalisation: `Message-ID` for `Message-Id`).
fn raw_name(raw: &[u8], h: &Header<'_>) -> String {
    let (f, s) = (h.offset_field as usize, h.offset_start as usize);
    match raw.get(f..s.max(f)).and_then(|b| std::str::from_utf8(b).ok()) {
        Some(n) => n.trim_end_matches(':').trim_end().to_string(),
        None => h.name.as_str().to_string(),
    }
}

/// The raw value of each header `name` (case-insensitive) of a part, in order.
fn raw_values<'a>(raw: &'a [u8], part: &MessagePart<'_>, name: &str) -> Vec<&'a str> {
    part.headers
        .iter()
        .filter(|h| h.name.as_str().eq_ignore_ascii_case(name))
        .filter_map(|h| std::str::from_utf8(raw_value(raw, h)).ok())
        .collect()
}

/// Parses one raw header value in `form`, with mail-parser set to read
/// that header that way.
fn parse_form(name: &str, raw: &str, form: Form) -> HeaderForm {
    match form {
        Form::Raw => return HeaderForm::Text(raw.to_string()),
        Form::Urls => return list_urls(raw).map_or(HeaderForm::Null(None), HeaderForm::List),
        _ => {}
    }
    let text = format!("{name}:{raw}\r\n\r\n");
    let header_name: HeaderName<'static> = HeaderName::parse(name.to_string()).unwrap_or(HeaderName::Other("".into()));
    let parser = match form {
        Form::Text => MessageParser::new().header_text(header_name),
        Form::Addresses | Form::GroupedAddresses => MessageParser::new().header_address(header_name),
        Form::MessageIds => MessageParser::new().header_id(header_name),
        Form::Date => MessageParser::new().header_date(header_name),
        Form::Raw | Form::Urls => unreachable!("handled above"),
    };
    let parsed = parser.parse_headers(text.as_bytes());
    let value = parsed
        .as_ref()
        .and_then(|m| m.parts.first())
        .and_then(|p| p.headers.first())
        .map(|h| &h.value);
    match (form, value) {
        (Form::Text, Some(HeaderValue::Text(t))) => HeaderForm::Text(nfc(t.trim())),
        (Form::Text, _) => HeaderForm::Text(nfc(raw.trim())),
        (Form::Addresses, Some(HeaderValue::Address(a))) => {
            HeaderForm::Addresses(addresses(Some(a)).unwrap_or_default())
        }
        (Form::Addresses, _) => HeaderForm::Addresses(Vec::new()),
        (Form::GroupedAddresses, Some(HeaderValue::Address(a))) => HeaderForm::Grouped(grouped(Some(a))),
        (Form::GroupedAddresses, _) => HeaderForm::Grouped(Vec::new()),
        (Form::MessageIds, Some(HeaderValue::Text(t))) => HeaderForm::List(vec![t.to_string()]),
        (Form::MessageIds, Some(HeaderValue::TextList(l))) => {
            HeaderForm::List(l.iter().map(|t| t.to_string()).collect())
        }
        (Form::Date, Some(HeaderValue::DateTime(d))) if d.is_valid() => HeaderForm::Text(d.to_rfc3339()),
        _ => HeaderForm::Null(None),
    }
}

/// Text in Unicode Normalization Form C, as the Text form ends (RFC 8621
/// §4.1.2.2 step 5): a composed and a decomposed "é" compare equal.
pub fn nfc(text: &str) -> String {
    // ASCII is already NFC: most subjects skip the normalizer (Email/get
    // of a message list calls this once per message).
    if text.is_ascii() {
        return text.to_string();
    }
    text.nfc().collect()
}

/// The URLs form (RFC 8621 §4.1.2.7): a comma-separated list of
/// angle-bracketed URLs as RFC 2369 §2 writes them, whitespace inside the
/// brackets ignored and comments allowed between them. None (`null`) when
/// the value is anything else, such as List-Post's `NO`.
pub fn list_urls(value: &str) -> Option<Vec<String>> {
    let mut urls = Vec::new();
    let mut chars = value.chars().peekable();
    let mut expect_url = true;
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => skip_comment(&mut chars)?,
            '<' if expect_url => {
                let mut url = String::new();
                loop {
                    match chars.next()? {
                        '>' => break,
                        c if c.is_whitespace() => {}
                        c => url.push(c),
                    }
                }
                if url.is_empty() {
                    return None;
                }
                urls.push(url);
                expect_url = false;
            }
            ',' if !expect_url => expect_url = true,
            _ => return None,
        }
    }
    // `<a>,` (a trailing comma) is not a list; nor is an empty value.
    (!urls.is_empty() && !expect_url).then_some(urls)
}

/// Skips an RFC 5322 comment (nested, with quoted pairs) after its `(`;
/// None if it never closes.
fn skip_comment(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<()> {
    let mut depth = 1usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(());
                }
            }
            _ => {}
        }
    }
    None
}

/// Every field `name` of a part, in order, in the Text form (what the
/// Email/query `header` condition compares).
pub fn header_texts(raw: &[u8], part: &MessagePart<'_>, name: &str) -> Vec<String> {
    raw_values(raw, part, name)
        .into_iter()
        .filter_map(|v| match parse_form(name, v, Form::Text) {
            HeaderForm::Text(t) => Some(t),
            _ => None,
        })
        .collect()
}

/// A `header:...` property of the root part (or of any part).
pub fn header_property(raw: &[u8], part: &MessagePart<'_>, p: &HeaderProperty) -> serde_json::Value {
    let values = raw_values(raw, part, &p.name);
    let forms: Vec<HeaderForm> = values.iter().map(|v| parse_form(&p.name, v, p.form)).collect();
    let v = if p.all {
        serde_json::to_value(forms)
    } else {
        serde_json::to_value(forms.into_iter().last().unwrap_or(HeaderForm::Null(None)))
    };
    v.unwrap_or(serde_json::Value::Null)
}

/// The `headers` property: every field in order, name as written, value
/// in the Raw form.
pub fn headers(raw: &[u8], part: &MessagePart<'_>) -> Vec<EmailHeader> {
    part.headers
        .iter()
        .map(|h| EmailHeader {
            name: raw_name(raw, h),
            value: String::from_utf8_lossy(raw_value(raw, h)).into_owned(),
        })
        .collect()
}

/// EmailBodyPart (RFC 8621 §4.1.4).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BodyPart {
    pub part_id: Option<String>,
    pub blob_id: Option<String>,
    pub size: u64,
    pub headers: Vec<EmailHeader>,
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub media_type: String,
    pub charset: Option<String>,
    pub disposition: Option<String>,
    pub cid: Option<String>,
    pub language: Option<Vec<String>>,
    pub location: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_parts: Option<Vec<BodyPart>>,
    /// `header:*` body properties asked for ([`add_header_forms`]).
    #[serde(flatten)]
    pub header_forms: BTreeMap<String, serde_json::Value>,
    /// The part's index in the parsed message (its partId, for a leaf).
    #[serde(skip)]
    pub index: usize,
}

/// Fills the `header:*` body properties asked for, in every level of the
/// tree (RFC 8621 §4.1.4: bodyProperties may name header forms).
pub fn add_header_forms(part: &mut BodyPart, raw: &[u8], msg: &Message<'_>, wanted: &[(String, HeaderProperty)]) {
    if let Some(p) = msg.parts.get(part.index) {
        for (key, h) in wanted {
            part.header_forms.insert(key.clone(), header_property(raw, p, h));
        }
    }
    for sub in part.sub_parts.iter_mut().flatten() {
        add_header_forms(sub, raw, msg, wanted);
    }
}

/// Where a message's bytes come from, for its parts' blob ids: a stored
/// message or an upload, or a message attached inside one of them (`path`
/// is the part path to it, so its part `p` is the source's part `path.p`
/// and downloads resolve through the outer bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub source: BlobSource,
    pub path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobSource {
    Message(MailboxId, Uid),
    Upload(String),
}

impl Origin {
    /// The parts of a stored message, named by its first place (its id).
    pub fn stored(first: (MailboxId, Uid)) -> Origin {
        Origin {
            source: BlobSource::Message(first.0, first.1),
            path: None,
        }
    }

    /// The origin of the message a blob holds (Email/parse); `None` for
    /// a Sieve script's text, which is no message and has no parts.
    pub fn of_blob(blob: &ids::BlobRef) -> Option<Origin> {
        let (source, path) = match blob {
            ids::BlobRef::Message(m, u) => (BlobSource::Message(*m, *u), None),
            ids::BlobRef::Part(m, u, p) => (BlobSource::Message(*m, *u), Some(p.clone())),
            ids::BlobRef::Upload(h) => (BlobSource::Upload(h.clone()), None),
            ids::BlobRef::UploadPart(h, p) => (BlobSource::Upload(h.clone()), Some(p.clone())),
            ids::BlobRef::Script(..) => return None,
        };
        Some(Origin { source, path })
    }

    pub fn part_blob_id(&self, part: &str) -> String {
        let full = match &self.path {
            Some(prefix) => format!("{prefix}.{part}"),
            None => part.to_string(),
        };
        match &self.source {
            BlobSource::Message(m, u) => ids::part_blob_id((*m, *u), &full),
            BlobSource::Upload(h) => ids::upload_part_blob_id(h, &full),
        }
    }
}

/// A part's media type, lower case; `text/plain` when it has none.
pub fn media_type(part: &MessagePart<'_>) -> String {
    match part.content_type() {
        Some(ct) => match &ct.c_subtype {
            Some(s) => format!("{}/{}", ct.c_type, s).to_ascii_lowercase(),
            None => ct.c_type.to_ascii_lowercase(),
        },
        None => "text/plain".to_string(),
    }
}

/// Describes part `index` of `msg` (and its children, for a multipart).
pub fn body_part(raw: &[u8], msg: &Message<'_>, index: usize, origin: Option<&Origin>, depth: usize) -> BodyPart {
    let Some(part) = msg.parts.get(index) else {
        return empty_part();
    };
    let ct = part.content_type();
    let media_type = media_type(part);
    let multipart = matches!(part.body, PartType::Multipart(_));
    let charset = ct
        .and_then(|c| c.attribute("charset"))
        .map(|c| c.to_ascii_lowercase())
        .or_else(|| media_type.starts_with("text/").then(|| "us-ascii".to_string()));
    let language = match part.content_language() {
        HeaderValue::Text(t) => Some(vec![t.to_string()]),
        HeaderValue::TextList(l) => Some(l.iter().map(|t| t.to_string()).collect()),
        _ => None,
    };
    let sub_parts = match &part.body {
        PartType::Multipart(children) if depth < crate::summary::MAX_DEPTH => Some(
            children
                .iter()
                .map(|&c| c as usize)
                .filter(|&c| c > index && c < msg.parts.len().min(PARTS_MAX))
                .map(|c| body_part(raw, msg, c, origin, depth + 1))
                .collect(),
        ),
        PartType::Multipart(_) => Some(Vec::new()),
        _ => None,
    };
    let part_id = (!multipart).then(|| index.to_string());
    BodyPart {
        blob_id: match (&part_id, origin) {
            (Some(p), Some(o)) => Some(o.part_blob_id(p)),
            _ => None,
        },
        part_id,
        size: if multipart { 0 } else { part.len() as u64 },
        headers: headers(raw, part),
        name: part.attachment_name().map(str::to_string),
        media_type,
        charset: if multipart { None } else { charset },
        disposition: part.content_disposition().map(|d| d.c_type.to_ascii_lowercase()),
        cid: part
            .content_id()
            .map(|c| c.trim().trim_start_matches('<').trim_end_matches('>').to_string()),
        language,
        location: part.content_location().map(str::to_string),
        sub_parts,
        header_forms: BTreeMap::new(),
        index,
    }
}

fn empty_part() -> BodyPart {
    BodyPart {
        part_id: None,
        blob_id: None,
        size: 0,
        headers: Vec::new(),
        name: None,
        media_type: "text/plain".into(),
        charset: None,
        disposition: None,
        cid: None,
        language: None,
        location: None,
        sub_parts: None,
        header_forms: BTreeMap::new(),
        index: 0,
    }
}

/// A body value (RFC 8621 §4.1.4 EmailBodyValue).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BodyValue {
    pub value: String,
    pub is_encoding_problem: bool,
    pub is_truncated: bool,
}

/// The decoded text of a text part, cut at `max_bytes` (0: no cut) on a
/// character boundary.
pub fn body_value(part: &MessagePart<'_>, max_bytes: usize) -> BodyValue {
    let (text, problem) = match &part.body {
        PartType::Text(t) | PartType::Html(t) => (t.to_string(), false),
        PartType::Binary(b) | PartType::InlineBinary(b) => match std::str::from_utf8(b) {
            Ok(s) => (s.to_string(), false),
            Err(_) => (String::from_utf8_lossy(b).into_owned(), true),
        },
        PartType::Message(m) => (String::from_utf8_lossy(m.raw_message()).into_owned(), false),
        PartType::Multipart(_) => (String::new(), false),
    };
    // RFC 8621 §4.1.4: "with any CRLF replaced with a single LF" (before
    // the cut, so maxBodyValueBytes counts what the client gets).
    let text = if text.contains("\r\n") {
        text.replace("\r\n", "\n")
    } else {
        text
    };
    if max_bytes > 0 && text.len() > max_bytes {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return BodyValue {
            value: text[..end].to_string(),
            is_encoding_problem: problem,
            is_truncated: true,
        };
    }
    BodyValue {
        value: text,
        is_encoding_problem: problem,
        is_truncated: false,
    }
}

/// The decoded bytes of part `part_id` (a part blob), if it exists.
pub fn part_contents(raw: &[u8], part_id: &str) -> Option<(Vec<u8>, String, Option<String>)> {
    // `a.b`: part b of the message attached as part a (Email/parse of an
    // attached message names its parts this way).
    let (first, rest) = match part_id.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (part_id, None),
    };
    let msg = MessageParser::default().parse(raw)?;
    let index: usize = first.parse().ok()?;
    let part = msg.parts.get(index)?;
    if let Some(rest) = rest {
        let start = part.offset_body as usize;
        let end = (part.offset_end as usize).min(raw.len());
        if !matches!(part.body, PartType::Message(_)) || start > end {
            return None;
        }
        return part_contents(&raw[start..end], rest);
    }
    if matches!(part.body, PartType::Multipart(_)) {
        return None;
    }
    let d = body_part(raw, &msg, index, None, 0);
    Some((part.contents().to_vec(), d.media_type, d.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_properties_parse() {
        let p = parse_header_property("header:Subject:asText").unwrap();
        assert_eq!((p.name.as_str(), p.form, p.all), ("Subject", Form::Text, false));
        let p = parse_header_property("header:X-A:all").unwrap();
        assert_eq!((p.form, p.all), (Form::Raw, true));
        assert!(parse_header_property("header::asText").is_none());
        assert!(parse_header_property("header:X:asNope").is_none());
    }

    #[test]
    fn header_forms() {
        assert_eq!(
            parse_form("From", " Ann <ann@x.org>, bob@y.org", Form::Addresses),
            HeaderForm::Addresses(vec![
                EmailAddress {
                    name: Some("Ann".into()),
                    email: "ann@x.org".into()
                },
                EmailAddress {
                    name: None,
                    email: "bob@y.org".into()
                }
            ])
        );
        assert_eq!(
            parse_form("Subject", " =?UTF-8?Q?Caf=C3=A9?=", Form::Text),
            HeaderForm::Text("Café".into())
        );
        assert_eq!(
            parse_form("References", " <a@x> <b@y>", Form::MessageIds),
            HeaderForm::List(vec!["a@x".into(), "b@y".into()])
        );
    }

    /// RFC 8621 §4.1.2: Raw ends before the field's CRLF; names keep the
    /// message's spelling; Text is NFC; URLs follow RFC 2369 or are null.
    #[test]
    fn header_forms_of_rfc8621_4_1_2() {
        let raw = b"Message-Id: <a@x>\r\nSubject: =?UTF-8?Q?Cafe=CC=81?=\r\nList-Post: NO\r\n\r\nbody\r\n";
        let msg = MessageParser::default().parse(&raw[..]).unwrap();
        let root = &msg.parts[0];
        let hs = headers(raw, root);
        assert_eq!(hs[0].name, "Message-Id");
        assert_eq!(hs[0].value, " <a@x>");
        let p = parse_header_property("header:Subject:asText").unwrap();
        assert_eq!(header_property(raw, root, &p), serde_json::json!("Caf\u{e9}"));
        let p = parse_header_property("header:List-Post:asURLs").unwrap();
        assert_eq!(header_property(raw, root, &p), serde_json::Value::Null);
        assert_eq!(
            list_urls(" <mailto:l@x?subject=a>, (web)\r\n <https://x/ p>"),
            Some(vec!["mailto:l@x?subject=a".to_string(), "https://x/p".to_string()])
        );
        for bad in ["", " NO", "<a>,", "<a> <b>", "<>", "<a", "(open <a>"] {
            assert_eq!(list_urls(bad), None, "{bad:?}");
        }
    }

    /// Email/parse of an attached message names its parts through the outer
    /// blob, and those ids download the nested part's bytes.
    #[test]
    fn parts_of_an_attached_message_resolve_through_the_outer_bytes() {
        let raw = b"From: a@x\r\nContent-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n--o\r\nContent-Type: message/rfc822\r\n\r\nFrom: b@y\r\nSubject: inner\r\nContent-Type: multipart/mixed; boundary=i\r\n\r\n--i\r\nContent-Type: text/plain\r\n\r\ninner text\r\n--i\r\nContent-Type: application/octet-stream; name=n.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--i--\r\n--o--\r\n";
        let outer = MessageParser::default().parse(&raw[..]).unwrap();
        let attached = outer
            .parts
            .iter()
            .position(|p| matches!(p.body, PartType::Message(_)))
            .unwrap();
        let blob = ids::parse_blob(&ids::part_blob_id((1, 2), &attached.to_string())).unwrap();
        let (inner_raw, media_type, _) = part_contents(raw, &attached.to_string()).unwrap();
        assert_eq!(media_type, "message/rfc822");
        let inner = MessageParser::default().parse(&inner_raw[..]).unwrap();
        let tree = body_part(&inner_raw, &inner, 0, Origin::of_blob(&blob).as_ref(), 0);
        let subs = tree.sub_parts.unwrap();
        let bin = subs.iter().find(|p| p.name.as_deref() == Some("n.bin")).unwrap();
        let id = bin.blob_id.clone().unwrap();
        assert_eq!(id, format!("b1_2_{attached}-{}", bin.part_id.as_deref().unwrap()));
        let Some(ids::BlobRef::Part(1, 2, path)) = ids::parse_blob(&id) else {
            panic!("{id}")
        };
        let (bytes, _, name) = part_contents(raw, &path).unwrap();
        assert_eq!((bytes, name.as_deref()), (vec![0u8, 1, 2], Some("n.bin")));
        // An upload's parts the same way.
        let up = Origin::of_blob(&ids::BlobRef::Upload("ab".repeat(32))).unwrap();
        assert_eq!(up.part_blob_id("3"), format!("U{}_3", "ab".repeat(32)));
        assert!(part_contents(raw, "1.1").is_none(), "part 1 is text, not a message");
    }

    #[test]
    fn parts_and_values() {
        let raw = b"From: a@x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b\r\nContent-Type: application/pdf; name=x.pdf\r\nContent-Disposition: attachment; filename=x.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\n";
        let msg = MessageParser::default().parse(&raw[..]).unwrap();
        let tree = body_part(raw, &msg, 0, Some(&Origin::stored((1, 2))), 0);
        assert_eq!(tree.media_type, "multipart/mixed");
        let subs = tree.sub_parts.unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1].name.as_deref(), Some("x.pdf"));
        assert_eq!(subs[1].size, 3);
        assert_eq!(subs[1].blob_id.as_deref(), Some("b1_2_2"));
        assert_eq!(msg.attachments, vec![2]);
        assert_eq!(body_value(&msg.parts[1], 0).value, "hello");
        let two_lines = MessageParser::default()
            .parse(&b"Subject: x\r\n\r\none\r\ntwo\r\n"[..])
            .unwrap();
        assert_eq!(
            body_value(&two_lines.parts[0], 0).value,
            "one\ntwo\n",
            "CRLF becomes LF"
        );
        assert!(body_value(&msg.parts[1], 3).is_truncated);
        assert_eq!(part_contents(raw, "2").unwrap().0, vec![0, 1, 2]);
    }
}
