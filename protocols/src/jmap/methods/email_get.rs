//! Email/get (RFC 8621 §4.2). Metadata, keywords and the envelope fields
//! come from the message row (computed once at delivery); the body, its
//! parts, values and any header form are parsed from the stored bytes
//! only when asked for.

use std::collections::BTreeMap;

use mail_parser::MessageParser;
use meshmail_storage::model::messages::Message;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jmap::dispatch::{Call, Output, check_get_size, parse, reply, select_properties};
use crate::jmap::store;
use crate::jmap::wire::MethodError;
use crate::jmap::wire::email_body_lists;
use crate::jmap::wire::email_parts::{self, BodyValue, EmailAddress, Origin};
use crate::jmap::wire::ids::{self, StateVector};
use crate::summary::{AddressList, Envelope};

pub const DEFAULT_PROPERTIES: &[&str] = &[
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "size",
    "receivedAt",
    "messageId",
    "inReplyTo",
    "references",
    "sender",
    "from",
    "to",
    "cc",
    "bcc",
    "replyTo",
    "subject",
    "sentAt",
    "hasAttachment",
    "preview",
    "bodyValues",
    "textBody",
    "htmlBody",
    "attachments",
];

pub const DEFAULT_BODY_PROPERTIES: &[&str] = &[
    "partId",
    "blobId",
    "size",
    "name",
    "type",
    "charset",
    "disposition",
    "cid",
    "language",
    "location",
];

/// Properties that need the body parsed.
const BODY_PROPERTIES: &[&str] = &[
    "preview",
    "hasAttachment",
    "bodyStructure",
    "textBody",
    "htmlBody",
    "attachments",
    "bodyValues",
    "headers",
];

const KNOWN: &[&str] = &["bodyStructure", "headers"];

/// IMAP system flags and their JMAP keywords (RFC 8621 §4.1.1).
const FLAG_KEYWORDS: &[(&str, &str)] = &[
    ("\\Seen", "$seen"),
    ("\\Flagged", "$flagged"),
    ("\\Answered", "$answered"),
    ("\\Draft", "$draft"),
];

pub fn keyword_of_flag(flag: &str) -> Option<String> {
    if let Some((_, k)) = FLAG_KEYWORDS.iter().find(|(f, _)| f.eq_ignore_ascii_case(flag)) {
        return Some(k.to_string());
    }
    // \Deleted and \Recent have no JMAP form; other system flags neither.
    (!flag.starts_with('\\')).then(|| flag.to_ascii_lowercase())
}

pub fn flag_of_keyword(keyword: &str) -> String {
    match FLAG_KEYWORDS.iter().find(|(_, k)| k.eq_ignore_ascii_case(keyword)) {
        Some((f, _)) => f.to_string(),
        None => keyword.to_ascii_lowercase(),
    }
}

/// RFC 8621 §4.1.1: keywords are 1–255 printable ASCII, none of `( ) { ] % * " \`.
pub fn valid_keyword(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 255
        && k.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && !b"(){]%*\"\\".contains(&b))
}

pub fn keywords(msg: &Message) -> BTreeMap<String, bool> {
    msg.flags
        .iter()
        .filter_map(|f| keyword_of_flag(f))
        .map(|k| (k, true))
        .collect()
}

/// RFC 3339 in UTC.
pub fn utc_date(seconds: i64) -> String {
    mail_parser::DateTime::from_timestamp(seconds).to_rfc3339()
}

fn address_list(list: &AddressList) -> Option<Vec<EmailAddress>> {
    list.raw.as_ref()?;
    Some(
        list.addresses
            .iter()
            .filter_map(|a| {
                let mailbox = a.mailbox.as_deref()?;
                let host = a.host.as_deref()?; // group markers have no host
                let email = if host == "MISSING_DOMAIN" {
                    mailbox.to_string()
                } else {
                    format!("{mailbox}@{host}")
                };
                Some(EmailAddress {
                    name: a.name.clone(),
                    email,
                })
            })
            .collect(),
    )
}

fn id_list(raw: Option<&str>) -> Option<Vec<String>> {
    let ids = meshmail_storage::model::threads::message_ids(raw?);
    (!ids.is_empty()).then_some(ids)
}

/// The Email object's fields that come from the row.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EmailMeta {
    id: String,
    blob_id: String,
    thread_id: String,
    mailbox_ids: BTreeMap<String, bool>,
    keywords: BTreeMap<String, bool>,
    size: u64,
    received_at: String,
    #[serde(flatten)]
    envelope: EnvelopeProps,
}

/// The Email object's fields that come from the stored envelope.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeProps {
    message_id: Option<Vec<String>>,
    in_reply_to: Option<Vec<String>>,
    references: Option<Vec<String>>,
    sender: Option<Vec<EmailAddress>>,
    from: Option<Vec<EmailAddress>>,
    to: Option<Vec<EmailAddress>>,
    cc: Option<Vec<EmailAddress>>,
    bcc: Option<Vec<EmailAddress>>,
    reply_to: Option<Vec<EmailAddress>>,
    subject: Option<String>,
    sent_at: Option<String>,
}

fn envelope_props(env: &Envelope) -> EnvelopeProps {
    EnvelopeProps {
        message_id: id_list(env.message_id.as_deref()),
        in_reply_to: id_list(env.in_reply_to.as_deref()),
        references: id_list(env.references.as_deref()),
        // The IMAP envelope copies From into empty Sender/Reply-To; their
        // raw value tells whether the header was there.
        sender: address_list(&env.sender),
        from: address_list(&env.from),
        to: address_list(&env.to),
        cc: address_list(&env.cc),
        bcc: address_list(&env.bcc),
        reply_to: address_list(&env.reply_to),
        // `subject` is `header:Subject:asText`, which ends in NFC.
        subject: env.subject.as_ref().map(|s| email_parts::nfc(&s.decoded)),
        sent_at: env.date_timestamp.map(utc_date),
    }
}

/// The envelope-derived Email properties of a parsed message (Email/parse).
pub fn envelope_properties(env: &Envelope) -> Map<String, Value> {
    match serde_json::to_value(envelope_props(env)) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn meta(mailbox: i64, msg: &Message) -> EmailMeta {
    let env = &msg.summary.envelope;
    let first = msg.first_place(mailbox);
    EmailMeta {
        id: ids::email_id(first),
        blob_id: ids::message_blob_id(first),
        thread_id: ids::thread_id(msg.thread_id.as_deref(), first),
        mailbox_ids: BTreeMap::from([(ids::mailbox_id(mailbox), true)]),
        keywords: keywords(msg),
        size: msg.body.size,
        received_at: utc_date(msg.internal_date_ms.div_euclid(1000)),
        envelope: envelope_props(env),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailGetArgs {
    pub account_id: String,
    #[serde(default)]
    pub ids: Option<Vec<String>>,
    #[serde(default)]
    pub properties: Option<Vec<String>>,
    #[serde(default)]
    pub body_properties: Option<Vec<String>>,
    #[serde(default)]
    pub fetch_text_body_values: bool,
    #[serde(default, rename = "fetchHTMLBodyValues")]
    pub fetch_html_body_values: bool,
    #[serde(default)]
    pub fetch_all_body_values: bool,
    #[serde(default)]
    pub max_body_value_bytes: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GetResponse {
    account_id: String,
    state: String,
    list: Vec<Value>,
    not_found: Vec<String>,
}

pub fn email_state(mailboxes: &[meshmail_storage::model::mailboxes::Mailbox]) -> String {
    StateVector::of(mailboxes, false).encode()
}

pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: EmailGetArgs = parse(args)?;
    check_get_size(call, args.ids.as_ref())?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let state = email_state(&mailboxes);
    let wanted: Vec<String> = match &args.ids {
        Some(list) => list
            .iter()
            .map(|i| call.resolve_id(i).unwrap_or_else(|| i.clone()))
            .collect(),
        None => {
            // "All emails": allowed up to maxObjectsInGet.
            let mut all = Vec::new();
            for m in &mailboxes {
                for msg in store::mailbox_messages(&ctx, account, m.id).await? {
                    all.push(ids::email_id(msg.first_place(m.id)));
                    if all.len() > call.shared.limits.max_objects_in_get {
                        return Err(MethodError::RequestTooLarge);
                    }
                }
            }
            all
        }
    };
    let properties: Vec<String> = args
        .properties
        .clone()
        .unwrap_or_else(|| DEFAULT_PROPERTIES.iter().map(|s| s.to_string()).collect());
    for p in &properties {
        if !DEFAULT_PROPERTIES.contains(&p.as_str())
            && !KNOWN.contains(&p.as_str())
            && email_parts::parse_header_property(p).is_none()
        {
            return Err(MethodError::InvalidArguments(format!("unknown property {p}")));
        }
    }
    let parsed: Vec<Option<(i64, u32)>> = wanted.iter().map(|i| ids::parse_email(i)).collect();
    let firsts: Vec<(i64, u32)> = parsed.iter().flatten().copied().collect();
    // Each id is looked up where it was first stored, then where a move
    // took it (`store::emails`).
    let mut found = store::emails(&ctx, account, firsts).await?.into_iter();
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    for (id, first) in wanted.into_iter().zip(parsed) {
        let Some((mailbox, msg)) = first.and_then(|_| found.next().flatten()) else {
            not_found.push(id);
            continue;
        };
        list.push(render(call, &args, &properties, mailbox, &msg).await?);
    }
    reply(
        "Email/get",
        &GetResponse {
            account_id: call.account_id(),
            state,
            list,
            not_found,
        },
    )
}

async fn render(
    call: &Call<'_>,
    args: &EmailGetArgs,
    properties: &[String],
    mailbox: i64,
    msg: &Message,
) -> Result<Value, MethodError> {
    let mut value = serde_json::to_value(meta(mailbox, msg)).map_err(|e| MethodError::ServerFail(e.to_string()))?;
    // preview and hasAttachment come from the summary stored at delivery
    // when it has them: a message list reads no body.
    let stored = stored_list_properties(msg);
    let needs_body = properties.iter().any(|p| {
        (BODY_PROPERTIES.contains(&p.as_str()) && !stored.contains_key(p.as_str())) || p.starts_with("header:")
    });
    if let Value::Object(m) = &mut value {
        m.extend(stored);
    }
    if needs_body {
        let raw = store::body(&call.shared.ctx, msg).await?;
        let origin = Origin::stored(msg.first_place(mailbox));
        let limit = if args.max_body_value_bytes > 0 {
            args.max_body_value_bytes
        } else {
            call.shared.limits.max_body_value_bytes
        };
        let extra = body_properties(&raw, origin, args, properties, limit);
        if let Value::Object(m) = &mut value {
            m.extend(extra);
        }
    }
    Ok(select_properties(value, Some(properties)))
}

/// `preview` and `hasAttachment` from the stored summary (absent for
/// messages stored before the summary kept them).
fn stored_list_properties(msg: &Message) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(p) = &msg.summary.preview {
        out.insert("preview".into(), Value::String(p.clone()));
    }
    if let Some(a) = msg.summary.has_attachment {
        out.insert("hasAttachment".into(), Value::Bool(a));
    }
    out
}

/// The parsed properties of one message.
pub fn body_properties(
    raw: &[u8],
    origin: Origin,
    args: &EmailGetArgs,
    properties: &[String],
    max_value_bytes: usize,
) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(msg) = MessageParser::default().parse(raw) else {
        return out;
    };
    let body_props: Vec<String> = args
        .body_properties
        .clone()
        .unwrap_or_else(|| DEFAULT_BODY_PROPERTIES.iter().map(|s| s.to_string()).collect());
    let part_headers: Vec<(String, email_parts::HeaderProperty)> = body_props
        .iter()
        .filter_map(|p| email_parts::parse_header_property(p).map(|h| (p.clone(), h)))
        .collect();
    let part_list = |indices: &[usize]| -> Value {
        Value::Array(
            indices
                .iter()
                .map(|&i| {
                    let mut p = email_parts::body_part(raw, &msg, i, Some(&origin), 0);
                    email_parts::add_header_forms(&mut p, raw, &msg, &part_headers);
                    select_body(serde_json::to_value(p).unwrap_or(Value::Null), &body_props)
                })
                .collect(),
        )
    };
    let want = |p: &str| properties.iter().any(|x| x == p);
    let lists = email_body_lists::body_lists(&msg);
    if want("textBody") {
        out.insert("textBody".into(), part_list(&lists.text));
    }
    if want("htmlBody") {
        out.insert("htmlBody".into(), part_list(&lists.html));
    }
    if want("attachments") {
        out.insert("attachments".into(), part_list(&lists.attachments));
    }
    if want("bodyStructure") {
        let mut tree = email_parts::body_part(raw, &msg, 0, Some(&origin), 0);
        email_parts::add_header_forms(&mut tree, raw, &msg, &part_headers);
        out.insert(
            "bodyStructure".into(),
            select_body(serde_json::to_value(tree).unwrap_or(Value::Null), &body_props),
        );
    }
    if want("hasAttachment") {
        out.insert("hasAttachment".into(), Value::Bool(!msg.attachments.is_empty()));
    }
    if want("preview") {
        let preview = msg
            .body_preview(crate::summary::PREVIEW_CHARS_MAX)
            .map(|p| p.trim().to_string())
            .unwrap_or_default();
        out.insert("preview".into(), Value::String(preview));
    }
    if want("bodyValues") {
        let values = body_values(&msg, &lists, args, max_value_bytes);
        out.insert("bodyValues".into(), serde_json::to_value(values).unwrap_or(Value::Null));
    }
    if let Some(root) = msg.parts.first() {
        if want("headers") {
            out.insert(
                "headers".into(),
                serde_json::to_value(email_parts::headers(raw, root)).unwrap_or(Value::Null),
            );
        }
        for p in properties {
            if let Some(h) = email_parts::parse_header_property(p) {
                out.insert(p.clone(), email_parts::header_property(raw, root, &h));
            }
        }
    }
    out
}

/// `bodyValues` (RFC 8621 §4.2): each fetch* flag adds the text/* parts of
/// its list (fetchAllBodyValues: of the whole structure), never others.
fn body_values(
    msg: &mail_parser::Message<'_>,
    lists: &email_body_lists::BodyLists,
    args: &EmailGetArgs,
    max_value_bytes: usize,
) -> BTreeMap<String, BodyValue> {
    let mut values: BTreeMap<String, BodyValue> = BTreeMap::new();
    let mut add = |indices: &mut dyn Iterator<Item = usize>| {
        for i in indices {
            if let Some(part) = msg.parts.get(i)
                && !matches!(part.body, mail_parser::PartType::Multipart(_))
                && email_parts::media_type(part).starts_with("text/")
            {
                values.insert(i.to_string(), email_parts::body_value(part, max_value_bytes));
            }
        }
    };
    if args.fetch_text_body_values {
        add(&mut lists.text.iter().copied());
    }
    if args.fetch_html_body_values {
        add(&mut lists.html.iter().copied());
    }
    if args.fetch_all_body_values {
        add(&mut (0..msg.parts.len().min(email_parts::PARTS_MAX)));
    }
    values
}

/// Keeps the body properties asked for, in every level of the tree.
fn select_body(v: Value, props: &[String]) -> Value {
    let Value::Object(mut m) = v else { return v };
    let subs = m.remove("subParts");
    let mut out = Map::new();
    for p in props {
        out.insert(p.clone(), m.remove(p).unwrap_or(Value::Null));
    }
    // A multipart's children are always described (RFC 8621 §4.1.4).
    if let Some(Value::Array(children)) = subs {
        out.insert(
            "subParts".into(),
            Value::Array(children.into_iter().map(|c| select_body(c, props)).collect()),
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_map_both_ways() {
        assert_eq!(keyword_of_flag("\\Seen").as_deref(), Some("$seen"));
        assert_eq!(keyword_of_flag("\\Deleted"), None);
        assert_eq!(keyword_of_flag("$Forwarded").as_deref(), Some("$forwarded"));
        assert_eq!(flag_of_keyword("$flagged"), "\\Flagged");
        assert_eq!(flag_of_keyword("Custom"), "custom");
        assert!(valid_keyword("$seen"));
        assert!(!valid_keyword("a b"));
        assert!(!valid_keyword(""));
    }

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
    }
}
