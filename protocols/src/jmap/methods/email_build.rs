//! The message an Email/set create describes (RFC 8621 §4.6): the
//! convenience header properties, `header:*` properties on the Email and
//! on its parts, and the body from textBody/htmlBody/attachments or from
//! bodyStructure, each part's content from bodyValues (`partId`) or from a
//! blob (`blobId`). What the RFC says a client SHOULD NOT send is refused
//! (invalidProperties naming it, nested ones by their path), not repaired.

use std::collections::{BTreeMap, HashMap};

use mail_builder::MessageBuilder;
use mail_builder::headers::HeaderType;
use mail_builder::headers::address::Address as BuildAddress;
use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::date::Date;
use mail_builder::headers::message_id::MessageId;
use mail_builder::headers::raw::Raw;
use mail_builder::headers::text::Text;
use mail_builder::headers::url::URL;
use mail_builder::mime::{BodyPart, MimePart};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;

use super::blob::{BlobData, read_blob};
use crate::jmap::dispatch::Call;
use crate::jmap::wire::SetError;
use crate::jmap::wire::email_parts::{Form, HeaderProperty, parse_header_property};
use crate::jmap::wire::object::Properties;

/// How deep a bodyStructure may nest.
const BODY_DEPTH_MAX: usize = 16;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BodyPartIn {
    #[serde(default)]
    part_id: Option<String>,
    #[serde(default)]
    blob_id: Option<String>,
    #[serde(default, rename = "type")]
    media_type: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    disposition: Option<String>,
    #[serde(default)]
    cid: Option<String>,
    #[serde(default)]
    language: Option<Vec<String>>,
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    charset: Option<String>,
    /// Refused with a partId (the server knows the size).
    #[serde(default)]
    size: Option<u64>,
    /// Refused: a part's header fields are given as `header:*`.
    #[serde(default)]
    headers: Option<IgnoredAny>,
    #[serde(default)]
    sub_parts: Option<Vec<BodyPartIn>>,
    /// `header:*` properties (their JSON type depends on the form in the
    /// key: read in [`header_fields`]); other keys are ignored.
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BodyValueIn {
    value: String,
    #[serde(default)]
    is_encoding_problem: bool,
    #[serde(default)]
    is_truncated: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EmailAddressIn {
    #[serde(default)]
    name: Option<String>,
    email: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct GroupIn {
    #[serde(default)]
    name: Option<String>,
    addresses: Vec<EmailAddressIn>,
}

/// The Email properties a client may set at creation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmailCreate {
    pub mailbox_ids: BTreeMap<String, bool>,
    #[serde(default)]
    pub keywords: BTreeMap<String, bool>,
    #[serde(default)]
    pub received_at: Option<String>,
    #[serde(default)]
    message_id: Option<Vec<String>>,
    #[serde(default)]
    in_reply_to: Option<Vec<String>>,
    #[serde(default)]
    references: Option<Vec<String>>,
    #[serde(default)]
    sender: Option<Vec<EmailAddressIn>>,
    #[serde(default)]
    from: Option<Vec<EmailAddressIn>>,
    #[serde(default)]
    to: Option<Vec<EmailAddressIn>>,
    #[serde(default)]
    cc: Option<Vec<EmailAddressIn>>,
    #[serde(default)]
    bcc: Option<Vec<EmailAddressIn>>,
    #[serde(default)]
    reply_to: Option<Vec<EmailAddressIn>>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    sent_at: Option<String>,
    #[serde(default)]
    text_body: Option<Vec<BodyPartIn>>,
    #[serde(default)]
    html_body: Option<Vec<BodyPartIn>>,
    #[serde(default)]
    attachments: Option<Vec<BodyPartIn>>,
    #[serde(default)]
    body_structure: Option<BodyPartIn>,
    #[serde(default)]
    body_values: BTreeMap<String, BodyValueIn>,
    /// Refused: the Email's header fields are given as `header:*`.
    #[serde(default)]
    headers: Option<IgnoredAny>,
    /// `header:*` properties; other keys are ignored.
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

impl Properties for EmailCreate {
    /// RFC 8621 §4.1.1: an Email is in at least one mailbox.
    const REQUIRED: &'static [&'static str] = &["mailboxIds"];
}

/// One header field value of a `header:*` property, typed by its form.
#[derive(Debug, Clone)]
enum HeaderIn {
    Raw(String),
    Text(String),
    Addresses(Vec<EmailAddressIn>),
    Grouped(Vec<GroupIn>),
    MessageIds(Vec<String>),
    Date(i64),
    Urls(Vec<String>),
}

fn addresses(list: &[EmailAddressIn]) -> BuildAddress<'static> {
    BuildAddress::new_list(
        list.iter()
            .map(|a| BuildAddress::new_address(a.name.clone(), a.email.clone()))
            .collect(),
    )
}

impl HeaderIn {
    fn header_type(&self) -> HeaderType<'static> {
        match self {
            // The Raw form starts after the colon; the writer puts the space.
            HeaderIn::Raw(r) => Raw::new(r.trim_start().to_string()).into(),
            HeaderIn::Text(t) => Text::new(t.clone()).into(),
            HeaderIn::Addresses(a) => addresses(a).into(),
            HeaderIn::Grouped(g) => BuildAddress::new_list(
                g.iter()
                    .map(|g| match &g.name {
                        Some(n) => BuildAddress::new_group(Some(n.clone()), vec![addresses(&g.addresses)]),
                        None => addresses(&g.addresses),
                    })
                    .collect(),
            )
            .into(),
            HeaderIn::MessageIds(ids) => MessageId::new_list(ids.iter().cloned()).into(),
            HeaderIn::Date(t) => Date::new(*t).into(),
            HeaderIn::Urls(urls) => URL::new_list(urls.iter().cloned()).into(),
        }
    }
}

/// A `header:*` property's field(s): one per value with `:all`, else one.
struct HeaderField {
    name: String,
    value: HeaderIn,
}

fn read_as<T: DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// One value in `form`; None if it has another JSON type (a list where the
/// form takes one value is such a case).
fn header_value(form: Form, v: &Value) -> Option<HeaderIn> {
    Some(match form {
        Form::Raw => HeaderIn::Raw(read_as(v)?),
        Form::Text => HeaderIn::Text(read_as(v)?),
        Form::Addresses => HeaderIn::Addresses(read_as(v)?),
        Form::GroupedAddresses => HeaderIn::Grouped(read_as(v)?),
        Form::MessageIds => HeaderIn::MessageIds(read_as(v)?),
        Form::Date => HeaderIn::Date(rfc3339_seconds(&read_as::<String>(v)?)?),
        Form::Urls => HeaderIn::Urls(read_as(v)?),
    })
}

fn header_values(p: &HeaderProperty, v: &Value) -> Option<Vec<HeaderIn>> {
    match (v, p.all) {
        (Value::Null, _) => Some(Vec::new()),
        (Value::Array(list), true) => list.iter().map(|v| header_value(p.form, v)).collect(),
        (_, true) => None,
        (v, false) => header_value(p.form, v).map(|h| vec![h]),
    }
}

/// Where `header:*` properties stand: the Email (where `Content-*` fields
/// belong to the body structure and the convenience properties already
/// name some fields) or a body part (where the transfer encoding is the
/// server's choice).
enum Scope<'a> {
    Email { given: &'a [&'a str] },
    Part { path: &'a str },
}

/// The `header:*` properties of `other`, checked and typed.
fn header_fields(other: &BTreeMap<String, Value>, scope: &Scope<'_>) -> Result<Vec<HeaderField>, SetError> {
    let mut out = Vec::new();
    for (key, value) in other.iter().filter(|(k, _)| k.starts_with("header:")) {
        let at = match scope {
            Scope::Email { .. } => key.clone(),
            Scope::Part { path } => format!("{path}/{key}"),
        };
        let invalid = |why: &str| SetError::invalid_properties(&[at.as_str()], why);
        let p = parse_header_property(key).ok_or_else(|| invalid("not a header property"))?;
        let lower = p.name.to_ascii_lowercase();
        match scope {
            Scope::Email { given } => {
                if lower.starts_with("content-") {
                    return Err(invalid("Content-* fields belong to the body parts"));
                }
                if given.iter().any(|g| g.eq_ignore_ascii_case(&p.name)) {
                    return Err(invalid("this field is also given by its own property"));
                }
            }
            Scope::Part { .. } if lower == "content-transfer-encoding" => {
                return Err(invalid("the server chooses the transfer encoding"));
            }
            Scope::Part { .. } => {}
        }
        let values = header_values(&p, value).ok_or_else(|| invalid("a value of the wrong type for its form"))?;
        out.extend(values.into_iter().map(|value| HeaderField {
            name: p.name.clone(),
            value,
        }));
    }
    Ok(out)
}

pub fn rfc3339_seconds(s: &str) -> Option<i64> {
    let d = mail_parser::DateTime::parse_rfc3339(s)?;
    d.is_valid().then(|| d.to_timestamp())
}

/// The SHOULD-reject cases of RFC 8621 §4.6 that concern the Email as a
/// whole (the parts' own are checked as each part is built).
fn check(c: &EmailCreate) -> Result<(), SetError> {
    if c.headers.is_some() {
        return Err(SetError::invalid_properties(&["headers"], "give header:* properties"));
    }
    if c.body_structure.is_some() && (c.text_body.is_some() || c.html_body.is_some() || c.attachments.is_some()) {
        return Err(SetError::invalid_properties(
            &["bodyStructure"],
            "bodyStructure or textBody/htmlBody/attachments, not both",
        ));
    }
    for (property, list, media) in [
        ("textBody", &c.text_body, "text/plain"),
        ("htmlBody", &c.html_body, "text/html"),
    ] {
        let Some(list) = list else { continue };
        let wrong_type = list
            .iter()
            .any(|p| p.media_type.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case(media)));
        if list.len() > 1 || wrong_type {
            return Err(SetError::invalid_properties(
                &[property],
                format!("at most one part, of type {media}"),
            ));
        }
    }
    if let Some((id, _)) = c
        .body_values
        .iter()
        .find(|(_, v)| v.is_truncated || v.is_encoding_problem)
    {
        return Err(SetError::invalid_properties(
            &[format!("bodyValues/{id}").as_str()],
            "isTruncated and isEncodingProblem must be false",
        ));
    }
    Ok(())
}

/// Every blobId the body names (bounded by the depth limit).
fn blob_ids(c: &EmailCreate) -> Vec<String> {
    fn walk(p: &BodyPartIn, depth: usize, out: &mut Vec<String>) {
        out.extend(p.blob_id.iter().cloned());
        if depth < BODY_DEPTH_MAX {
            p.sub_parts.iter().flatten().for_each(|s| walk(s, depth + 1, out));
        }
    }
    let mut out = Vec::new();
    let flat = [&c.text_body, &c.html_body, &c.attachments];
    for p in flat.into_iter().flatten().flatten().chain(c.body_structure.iter()) {
        walk(p, 0, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// The blobs the body names, read before anything is built; any missing
/// one is `blobNotFound` listing them all.
async fn read_blobs(call: &Call<'_>, c: &EmailCreate) -> Result<HashMap<String, BlobData>, SetError> {
    let mut found = HashMap::new();
    let mut missing = Vec::new();
    for id in blob_ids(c) {
        match read_blob(call, &id).await {
            Ok(b) => {
                found.insert(id, b);
            }
            Err(_) => missing.push(id),
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(SetError::blob_not_found(missing))
    }
}

/// Builds parts from a checked create and the blobs it names.
struct Parts<'a> {
    c: &'a EmailCreate,
    blobs: &'a HashMap<String, BlobData>,
}

impl Parts<'_> {
    /// A leaf part: its content, then its Content-* fields and `header:*`.
    fn leaf(&self, p: &BodyPartIn, path: &str, default_type: &str) -> Result<MimePart<'static>, SetError> {
        let invalid = |what: &str, why: &str| SetError::invalid_properties(&[format!("{path}/{what}").as_str()], why);
        if p.headers.is_some() {
            return Err(invalid("headers", "give header:* properties"));
        }
        if p.size.is_some() && p.part_id.is_some() {
            return Err(invalid("size", "the size of a part with a partId is the server's"));
        }
        let blob = p.blob_id.as_ref().and_then(|b| self.blobs.get(b));
        let media = p
            .media_type
            .clone()
            .or_else(|| blob.map(|b| b.media_type.clone()))
            .unwrap_or_else(|| default_type.to_string())
            .to_ascii_lowercase();
        let contents: BodyPart<'static> = match (&p.part_id, blob) {
            (Some(id), None) => match self.c.body_values.get(id) {
                Some(v) => BodyPart::Text(v.value.clone().into()),
                None => return Err(invalid("partId", "no bodyValues entry for it")),
            },
            (None, Some(b)) => match (media.starts_with("text/"), std::str::from_utf8(&b.bytes)) {
                (true, Ok(text)) => BodyPart::Text(text.to_string().into()),
                _ => BodyPart::Binary(b.bytes.to_vec().into()),
            },
            _ => return Err(invalid("partId", "exactly one of partId and blobId")),
        };
        let mut ct = ContentType::new(media.clone());
        if matches!(contents, BodyPart::Text(_)) {
            ct = ct.attribute("charset", p.charset.clone().unwrap_or_else(|| "utf-8".into()));
        }
        let name = p.name.clone().or_else(|| blob.and_then(|b| b.name.clone()));
        if let Some(n) = &name {
            ct = ct.attribute("name", n.clone());
        }
        let mut part = MimePart::new(ct, contents);
        part = match (p.disposition.as_deref(), name) {
            (Some("inline"), _) => part.inline(),
            (Some(_), n) => part.attachment(n.unwrap_or_else(|| "attachment".into())),
            (None, Some(n)) if !media.starts_with("text/") => part.attachment(n),
            (None, _) => part,
        };
        self.decorate(part, p, path)
    }

    /// cid, language, location and the part's `header:*` fields.
    fn decorate(&self, mut part: MimePart<'static>, p: &BodyPartIn, path: &str) -> Result<MimePart<'static>, SetError> {
        if let Some(cid) = &p.cid {
            part = part.cid(cid.trim().trim_start_matches('<').trim_end_matches('>').to_string());
        }
        if let Some(lang) = p.language.as_ref().filter(|l| !l.is_empty()) {
            part = part.language(lang.join(", "));
        }
        if let Some(loc) = &p.location {
            part = part.location(loc.clone());
        }
        for f in header_fields(&p.other, &Scope::Part { path })? {
            part = part.header(f.name, f.value.header_type());
        }
        Ok(part)
    }

    /// A part of bodyStructure: a multipart with its subParts, or a leaf.
    fn tree(&self, p: &BodyPartIn, path: &str, depth: usize) -> Result<MimePart<'static>, SetError> {
        let media = p.media_type.as_deref().unwrap_or("text/plain").to_ascii_lowercase();
        if !media.starts_with("multipart/") {
            return self.leaf(p, path, "text/plain");
        }
        let invalid = |why: &str| SetError::invalid_properties(&[path], why);
        if depth >= BODY_DEPTH_MAX {
            return Err(invalid("nested too deep"));
        }
        if p.part_id.is_some() || p.blob_id.is_some() {
            return Err(invalid("a multipart has subParts, not content"));
        }
        let mut children = Vec::new();
        for (i, s) in p.sub_parts.iter().flatten().enumerate() {
            children.push(self.tree(s, &format!("{path}/subParts/{i}"), depth + 1)?);
        }
        if children.is_empty() {
            return Err(invalid("a multipart needs subParts"));
        }
        let part = MimePart::new(ContentType::new(media), BodyPart::Multipart(children));
        self.decorate(part, p, path)
    }

    /// The body from textBody/htmlBody/attachments: alternative for text
    /// and HTML, related for inline parts with a cid, mixed for the rest.
    fn flat(&self) -> Result<Option<MimePart<'static>>, SetError> {
        let c = self.c;
        let text = c.text_body.iter().flatten().next();
        let html = c.html_body.iter().flatten().next();
        let text = text.map(|p| self.leaf(p, "textBody/0", "text/plain")).transpose()?;
        let html = html.map(|p| self.leaf(p, "htmlBody/0", "text/html")).transpose()?;
        let mut body = match (text, html) {
            (Some(t), Some(h)) => Some(multipart("alternative", vec![t, h])),
            (one, other) => one.or(other),
        };
        let (mut inline, mut attached) = (Vec::new(), Vec::new());
        for (i, a) in c.attachments.iter().flatten().enumerate() {
            let part = self.leaf(a, &format!("attachments/{i}"), "application/octet-stream")?;
            if a.disposition.as_deref() == Some("inline") && a.cid.is_some() {
                inline.push(part);
            } else {
                attached.push(part);
            }
        }
        for (kind, parts) in [("related", inline), ("mixed", attached)] {
            if parts.is_empty() {
                continue;
            }
            body = Some(multipart(kind, body.into_iter().chain(parts).collect()));
        }
        Ok(body)
    }
}

fn multipart(subtype: &str, parts: Vec<MimePart<'static>>) -> MimePart<'static> {
    MimePart::new(
        ContentType::new(format!("multipart/{subtype}")),
        BodyPart::Multipart(parts),
    )
}

/// The header fields the convenience properties give, by name.
fn given_fields(c: &EmailCreate) -> Vec<&'static str> {
    let given = [
        (c.message_id.is_some(), "Message-ID"),
        (c.in_reply_to.is_some(), "In-Reply-To"),
        (c.references.is_some(), "References"),
        (c.sender.is_some(), "Sender"),
        (c.from.is_some(), "From"),
        (c.to.is_some(), "To"),
        (c.cc.is_some(), "Cc"),
        (c.bcc.is_some(), "Bcc"),
        (c.reply_to.is_some(), "Reply-To"),
        (c.subject.is_some(), "Subject"),
        (c.sent_at.is_some(), "Date"),
    ];
    given.into_iter().filter(|(g, _)| *g).map(|(_, n)| n).collect()
}

/// Writes the RFC 5322 message an Email/set create describes.
pub async fn build_message(call: &Call<'_>, c: &EmailCreate) -> Result<Vec<u8>, SetError> {
    check(c)?;
    let given = given_fields(c);
    let extra = header_fields(&c.other, &Scope::Email { given: &given })?;
    let blobs = read_blobs(call, c).await?;
    let parts = Parts { c, blobs: &blobs };
    let body = match &c.body_structure {
        Some(root) => Some(parts.tree(root, "bodyStructure", 0)?),
        None => parts.flat()?,
    };
    let mut b = MessageBuilder::new();
    if let Some(v) = &c.from {
        b = b.from(addresses(v));
    }
    if let Some(v) = &c.sender {
        b = b.sender(addresses(v));
    }
    if let Some(v) = &c.to {
        b = b.to(addresses(v));
    }
    if let Some(v) = &c.cc {
        b = b.cc(addresses(v));
    }
    if let Some(v) = &c.bcc {
        b = b.bcc(addresses(v));
    }
    if let Some(v) = &c.reply_to {
        b = b.reply_to(addresses(v));
    }
    if let Some(s) = &c.subject {
        b = b.subject(s.clone());
    }
    let has = |name: &str| extra.iter().any(|f| f.name.eq_ignore_ascii_case(name));
    if !has("Date") {
        let date = match &c.sent_at {
            Some(s) => rfc3339_seconds(s).ok_or_else(|| SetError::invalid_properties(&["sentAt"], "not RFC 3339"))?,
            None => (meshmail_storage::model::now_ms() / 1000) as i64,
        };
        b = b.date(date);
    }
    if !has("Message-ID") {
        let message_id = match c.message_id.as_ref().and_then(|v| v.first()) {
            Some(id) => id.clone(),
            None => format!("{}@{}", uuid_text(), call.shared.smtp.hostname),
        };
        b = b.message_id(message_id);
    }
    if let Some(v) = &c.in_reply_to {
        b = b.in_reply_to(v.clone());
    }
    if let Some(v) = &c.references {
        b = b.references(v.clone());
    }
    for f in extra {
        b = b.header(f.name, f.value.header_type());
    }
    if let Some(body) = body {
        b = b.body(body);
    }
    b.write_to_vec()
        .map_err(|e| SetError::new("invalidProperties", e.to_string()))
}

fn uuid_text() -> String {
    meshmail_storage::model::id_to_string(&meshmail_storage::model::new_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(v: Value) -> EmailCreate {
        serde_json::from_value(v).unwrap()
    }

    fn refused(v: Value) -> Vec<String> {
        let c = create(v);
        let e = check(&c)
            .and_then(|_| {
                header_fields(
                    &c.other,
                    &Scope::Email {
                        given: &given_fields(&c),
                    },
                )
                .map(|_| ())
            })
            .unwrap_err();
        assert_eq!(e.kind, "invalidProperties");
        e.properties.unwrap()
    }

    #[test]
    fn should_reject_cases_name_their_property() {
        use serde_json::json;
        let mb = json!({"m1": true});
        assert_eq!(refused(json!({"mailboxIds": mb, "headers": []})), ["headers"]);
        assert_eq!(
            refused(json!({"mailboxIds": mb, "header:Content-Type": " text/plain"})),
            ["header:Content-Type"]
        );
        assert_eq!(
            refused(json!({"mailboxIds": mb, "textBody": [{"partId": "a"}, {"partId": "b"}]})),
            ["textBody"]
        );
        assert_eq!(
            refused(json!({"mailboxIds": mb, "bodyValues": {"a": {"value": "x", "isTruncated": true}}})),
            ["bodyValues/a"]
        );
        assert_eq!(
            refused(json!({"mailboxIds": mb, "bodyStructure": {"partId": "a"}, "textBody": [{"partId": "a"}]})),
            ["bodyStructure"]
        );
        assert_eq!(
            refused(json!({"mailboxIds": mb, "header:X-List": ["a", "b"]})),
            ["header:X-List"],
            "a list without :all"
        );
        assert_eq!(
            refused(json!({"mailboxIds": mb, "from": [], "header:From": " a@x"})),
            ["header:From"]
        );
    }

    #[test]
    fn header_properties_are_typed_by_their_form() {
        use serde_json::json;
        let c = create(json!({"mailboxIds": {"m1": true},
            "header:X-A": " raw", "header:X-B:all": [" one", " two"],
            "header:From:asAddresses": [{"name": "Foo", "email": "test@example.org"}]}));
        let fields = header_fields(&c.other, &Scope::Email { given: &[] }).unwrap();
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["From", "X-A", "X-B", "X-B"]);
        assert!(matches!(&fields[0].value, HeaderIn::Addresses(a) if a[0].email == "test@example.org"));
    }
}
