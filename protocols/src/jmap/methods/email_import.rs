//! Email/copy, /import and /parse (RFC 8621 §4.7–4.9): messages that come
//! from elsewhere — another mailbox, an uploaded blob — and blobs read as
//! messages without storing them. New messages go through the delivery
//! path with their own acceptance id, like Email/set's creates.

use std::collections::BTreeMap;

use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_storage::ids::{MailboxId, Uid};
use meshmail_storage::model::mailboxes::Mailbox;
use meshmail_storage::model::messages::FlagOp;
use meshmail_storage::model::now_ms;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::blob::read_blob;
use super::email_get::{self, EmailGetArgs, email_state};
use super::email_set::{CreatedEmail, created_view, flags_of, one_mailbox, rfc3339_seconds, store_message};
use crate::jmap::dispatch::{Call, Output, begin_set, parse, reply};
use crate::jmap::store;
use crate::jmap::wire::ids;
use crate::jmap::wire::object::{Object, Properties};
use crate::jmap::wire::{MethodError, SetError};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CopyArgs {
    from_account_id: String,
    #[serde(default)]
    if_from_in_state: Option<String>,
    account_id: String,
    #[serde(default)]
    if_in_state: Option<String>,
    create: BTreeMap<String, Object<CopyCreate>>,
    #[serde(default)]
    on_success_destroy_original: bool,
    #[serde(default)]
    destroy_from_if_in_state: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CopyCreate {
    id: String,
    mailbox_ids: BTreeMap<String, bool>,
    #[serde(default)]
    keywords: Option<BTreeMap<String, bool>>,
    #[serde(default)]
    received_at: Option<String>,
}

impl Properties for CopyCreate {
    const REQUIRED: &'static [&'static str] = &["id", "mailboxIds"];
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CopyResponse {
    from_account_id: String,
    account_id: String,
    old_state: Option<String>,
    new_state: String,
    created: BTreeMap<String, CreatedEmail>,
    not_created: BTreeMap<String, SetError>,
}

/// Email/copy: only within the caller's one account, where it copies the
/// message into another mailbox (COPY through the shard actor).
pub async fn copy(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: CopyArgs = parse(args)?;
    call.check_account(&args.account_id)?;
    call.check_account(&args.from_account_id)
        .map_err(|_| MethodError::FromAccountNotFound)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let old = email_state(&mailboxes);
    // One account: the "from" state is the same state.
    begin_set(call, args.create.len(), args.if_in_state.as_deref(), &old)?;
    begin_set(call, args.create.len(), args.if_from_in_state.as_deref(), &old)?;
    let mut created = BTreeMap::new();
    let mut not_created = BTreeMap::new();
    let mut originals = Vec::new();
    for (cid, c) in args.create {
        // A create that does not parse is refused alone (RFC 8620 §5.3).
        let result = match c.0 {
            Ok(c) => copy_one(call, &c, &mailboxes).await,
            Err(e) => Err(e.into()),
        };
        match result {
            Ok((orig, view)) => {
                originals.push(orig);
                call.created.insert(cid.clone(), view.id.clone());
                created.insert(cid, view);
            }
            Err(e) => {
                not_created.insert(cid, e);
            }
        }
    }
    let mut out = reply(
        "Email/copy",
        &CopyResponse {
            from_account_id: call.account_id(),
            account_id: call.account_id(),
            old_state: Some(old),
            new_state: email_state(&store::mailboxes(&ctx, account).await?),
            created,
            not_created,
        },
    )?;
    if args.on_success_destroy_original && !originals.is_empty() {
        let mut destroy = Map::new();
        destroy.insert("accountId".into(), Value::String(call.account_id()));
        destroy.insert(
            "destroy".into(),
            Value::Array(
                originals
                    .iter()
                    .map(|first| Value::String(ids::email_id(*first)))
                    .collect(),
            ),
        );
        // RFC 8620 §5.4: passed on as the implicit /set's ifInState.
        if let Some(s) = &args.destroy_from_if_in_state {
            destroy.insert("ifInState".into(), Value::String(s.clone()));
        }
        out.extend(super::email_set::set(call, destroy).await?);
    }
    Ok(out)
}

/// One Email/copy create: COPY through the shard actor, then its keywords.
/// Returns the original's first place (its id) and the copy.
async fn copy_one(
    call: &Call<'_>,
    c: &CopyCreate,
    mailboxes: &[Mailbox],
) -> Result<((MailboxId, Uid), CreatedEmail), SetError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let _ = &c.received_at;
    let first = ids::parse_email(&c.id).ok_or_else(SetError::not_found)?;
    let (mailbox, uid) = super::email_set::current_place(call, &c.id).await?;
    let to = one_mailbox(call, &c.mailbox_ids, mailboxes)?;
    let copy = MailboxOp::Copy {
        from: mailbox,
        uids: vec![uid],
        to: to.id,
        moving: false,
    };
    let r = mailbox_ops::request(ctx, account, copy)
        .await
        .map_err(|e| SetError::from_op(&e))?;
    let (_, new_uid) = *r.copied.first().ok_or_else(SetError::not_found)?;
    if let Some(k) = &c.keywords {
        let store = MailboxOp::Store {
            mailbox: to.id,
            uids: vec![new_uid],
            op: FlagOp::Replace,
            flags: flags_of(k)?,
            unchanged_since: None,
        };
        mailbox_ops::request(ctx, account, store)
            .await
            .map_err(|e| SetError::from_op(&e))?;
    }
    let size = store::message(ctx, account, to.id, new_uid)
        .await
        .ok()
        .flatten()
        .map_or(0, |m| m.body.size);
    Ok((first, created_view(call, to.id, new_uid, size).await))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImportArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    if_in_state: Option<String>,
    emails: BTreeMap<String, Object<ImportEmail>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImportEmail {
    blob_id: String,
    mailbox_ids: BTreeMap<String, bool>,
    #[serde(default)]
    keywords: BTreeMap<String, bool>,
    #[serde(default)]
    received_at: Option<String>,
}

impl Properties for ImportEmail {
    /// RFC 8621 §4.8: `keywords` may be left out (no keywords).
    const REQUIRED: &'static [&'static str] = &["blobId", "mailboxIds"];
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImportResponse {
    account_id: String,
    old_state: Option<String>,
    new_state: String,
    created: BTreeMap<String, CreatedEmail>,
    not_created: BTreeMap<String, SetError>,
}

pub async fn import(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ImportArgs = parse(args)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let old = email_state(&mailboxes);
    begin_set(call, args.emails.len(), args.if_in_state.as_deref(), &old)?;
    let mut created = BTreeMap::new();
    let mut not_created = BTreeMap::new();
    for (cid, e) in args.emails {
        let result = async {
            // An email that does not parse is refused alone (RFC 8620 §5.3).
            let e = e.0?;
            let mb = one_mailbox(call, &e.mailbox_ids, &mailboxes)?;
            let flags = flags_of(&e.keywords)?;
            let blob_id = call.resolve_id(&e.blob_id).unwrap_or(e.blob_id.clone());
            let blob = read_blob(call, &blob_id)
                .await
                .map_err(|_| SetError::new("blobNotFound", format!("no blob {blob_id}")))?;
            let received = match &e.received_at {
                Some(s) => {
                    rfc3339_seconds(s).ok_or_else(|| SetError::invalid_properties(&["receivedAt"], "not RFC 3339"))?
                        * 1000
                }
                None => now_ms() as i64,
            };
            store_message(call, &mb.name, blob.bytes.to_vec(), flags, received).await
        }
        .await;
        match result {
            Ok((m, u, size)) => {
                let view = created_view(call, m, u, size).await;
                call.created.insert(cid.clone(), view.id.clone());
                created.insert(cid, view);
            }
            Err(e) => {
                not_created.insert(cid, e);
            }
        }
    }
    reply(
        "Email/import",
        &ImportResponse {
            account_id: call.account_id(),
            old_state: Some(old),
            new_state: email_state(&store::mailboxes(&ctx, account).await?),
            created,
            not_created,
        },
    )
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ParseArgs {
    account_id: String,
    blob_ids: Vec<String>,
    #[serde(default)]
    properties: Option<Vec<String>>,
    #[serde(default)]
    body_properties: Option<Vec<String>>,
    #[serde(default)]
    fetch_text_body_values: bool,
    #[serde(default, rename = "fetchHTMLBodyValues")]
    fetch_html_body_values: bool,
    #[serde(default)]
    fetch_all_body_values: bool,
    #[serde(default)]
    max_body_value_bytes: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ParseResponse {
    account_id: String,
    parsed: BTreeMap<String, Value>,
    not_parsable: Vec<String>,
    not_found: Vec<String>,
}

/// Email/parse: the Email view of blobs holding messages (not stored).
pub async fn parse_blobs(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ParseArgs = parse(args)?;
    crate::jmap::dispatch::check_get_size(call, Some(&args.blob_ids))?;
    let get_args = EmailGetArgs {
        account_id: args.account_id.clone(),
        ids: None,
        properties: args.properties.clone(),
        body_properties: args.body_properties.clone(),
        fetch_text_body_values: args.fetch_text_body_values,
        fetch_html_body_values: args.fetch_html_body_values,
        fetch_all_body_values: args.fetch_all_body_values,
        max_body_value_bytes: args.max_body_value_bytes,
    };
    let properties: Vec<String> = args.properties.clone().unwrap_or_else(|| {
        email_get::DEFAULT_PROPERTIES
            .iter()
            .filter(|p| !["id", "mailboxIds", "keywords", "receivedAt", "threadId"].contains(p))
            .map(|s| s.to_string())
            .collect()
    });
    let mut resp = ParseResponse {
        account_id: call.account_id(),
        parsed: BTreeMap::new(),
        not_parsable: Vec::new(),
        not_found: Vec::new(),
    };
    for blob_id in args.blob_ids {
        let Ok(blob) = read_blob(call, &blob_id).await else {
            resp.not_found.push(blob_id);
            continue;
        };
        if mail_parser::MessageParser::default().parse(&blob.bytes[..]).is_none() {
            resp.not_parsable.push(blob_id);
            continue;
        }
        // Its parts' blob ids resolve through this blob's bytes.
        let Some(blob_ref) = crate::jmap::wire::ids::parse_blob(&blob_id) else {
            resp.not_found.push(blob_id);
            continue;
        };
        let Some(origin) = crate::jmap::wire::email_parts::Origin::of_blob(&blob_ref) else {
            resp.not_parsable.push(blob_id);
            continue;
        };
        let limit = if args.max_body_value_bytes > 0 {
            args.max_body_value_bytes
        } else {
            call.shared.limits.max_body_value_bytes
        };
        let mut m = email_get::body_properties(&blob.bytes, origin, &get_args, &properties, limit);
        let summary = crate::summary::summarize(&blob.bytes);
        let meta = email_get::envelope_properties(&summary.envelope);
        for (k, v) in meta {
            m.entry(k).or_insert(v);
        }
        m.insert("blobId".into(), Value::String(blob_id.clone()));
        m.insert("size".into(), Value::from(blob.bytes.len()));
        let v = crate::jmap::dispatch::select_properties(Value::Object(m), Some(&properties));
        resp.parsed.insert(blob_id, v);
    }
    reply("Email/parse", &resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jmap::wire::object::assert_required;

    #[test]
    fn imports_and_copies_need_their_source_and_mailbox() {
        assert_required::<ImportEmail>(serde_json::json!({"blobId": "b", "mailboxIds": {"m1": true}}));
        assert_required::<CopyCreate>(serde_json::json!({"id": "e1_1", "mailboxIds": {"m1": true}}));
    }
}
