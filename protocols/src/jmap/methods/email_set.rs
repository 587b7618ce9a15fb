//! Email/set (RFC 8621 §4.6), and the pieces Email/copy, /import and
//! /parse ([`super::email_import`]) share with it. Every change goes to the
//! account's shard actor: keywords as STORE, a new mailbox as a MOVE (the
//! email keeps its id), destroy as EXPUNGE, and new messages (create,
//! import, copy) through the delivery path, each with its own acceptance
//! id. The message a create describes is written by
//! [`super::email_build`].

use std::collections::BTreeMap;

use bytes::Bytes;
use meshmail_actors::delivery::{DeliveryError, DeliveryRequest, Outcome, deliver};
use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::op_error::OpError;
use meshmail_storage::ids::{MailboxId, Uid};
use meshmail_storage::model::mailboxes::Mailbox;
use meshmail_storage::model::messages::{FlagOp, Message};
use meshmail_storage::model::{new_id, now_ms};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::email_build::{EmailCreate, build_message};
use super::email_get::{email_state, flag_of_keyword, valid_keyword};
use super::mailbox::SetResponse;
use crate::ingest::ingest;
use crate::jmap::dispatch::{Call, Output, begin_set, parse, reply, set_count};
use crate::jmap::store;
use crate::jmap::wire::ids;
use crate::jmap::wire::object::Object;
use crate::jmap::wire::{MethodError, SetError};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    if_in_state: Option<String>,
    #[serde(default)]
    create: Option<BTreeMap<String, Object<EmailCreate>>>,
    #[serde(default)]
    update: Option<BTreeMap<String, Map<String, Value>>>,
    #[serde(default)]
    destroy: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedEmail {
    pub id: String,
    pub blob_id: String,
    pub thread_id: String,
    pub size: u64,
}

/// The one mailbox an email may be in (maxMailboxesPerEmail = 1).
pub(super) fn one_mailbox(
    call: &Call<'_>,
    map: &BTreeMap<String, bool>,
    mailboxes: &[Mailbox],
) -> Result<Mailbox, SetError> {
    let chosen: Vec<&String> = map.iter().filter(|(_, v)| **v).map(|(k, _)| k).collect();
    let [only] = chosen.as_slice() else {
        return Err(SetError::invalid_properties(
            &["mailboxIds"],
            "an email is in exactly one mailbox here",
        ));
    };
    let id = call.resolve_id(only).unwrap_or_else(|| only.to_string());
    ids::parse_mailbox(&id)
        .and_then(|n| mailboxes.iter().find(|m| m.id == n).cloned())
        .ok_or_else(|| SetError::invalid_properties(&["mailboxIds"], "no such mailbox"))
}

pub(super) fn flags_of(keywords: &BTreeMap<String, bool>) -> Result<Vec<String>, SetError> {
    let mut out = Vec::new();
    for (k, v) in keywords {
        if !valid_keyword(k) {
            return Err(SetError::invalid_properties(&["keywords"], format!("bad keyword {k}")));
        }
        if *v {
            out.push(flag_of_keyword(k));
        }
    }
    Ok(out)
}

pub(super) use super::email_build::rfc3339_seconds;

/// Delivers `raw` into `mailbox` of the caller's account through the
/// account's shard actor.
pub async fn store_message(
    call: &Call<'_>,
    mailbox: &str,
    raw: Vec<u8>,
    flags: Vec<String>,
    internal_date_ms: i64,
) -> Result<(MailboxId, Uid, u64), SetError> {
    let ctx = &call.shared.ctx;
    let raw = Bytes::from(raw);
    let size = raw.len() as u64;
    let acceptance_id = new_id();
    // A body swept between its write and the commit is written again.
    for _ in 0..3 {
        let ingested = ingest(ctx, raw.clone())
            .await
            .map_err(|e| SetError::new("serverFail", e.to_string()))?;
        let req = DeliveryRequest {
            acceptance_id,
            account: call.caller.account,
            recipient: call.caller.email.clone(),
            mailbox: mailbox.to_string(),
            body: ingested.body,
            flags: flags.clone(),
            internal_date_ms,
            summary: ingested.summary,
            fault: None,
            from_quarantine: None,
            deadline: meshmail_actors::delivery::deadline_in(meshmail_actors::delivery::DELIVERY_DEADLINE),
        };
        match deliver(ctx, req).await {
            Ok(Outcome::Delivered { mailbox, uid, .. }) => return Ok((mailbox, uid, size)),
            Ok(Outcome::Quarantined { .. }) => return Err(SetError::new("serverFail", "the message was quarantined")),
            Err(DeliveryError::BodySwept) => continue,
            // RFC 8620 §5.3 / RFC 8621 §4.8: the account's quota has no room.
            Err(DeliveryError::OverQuota) => {
                return Err(SetError::new("overQuota", "the account's quota has no room for it"));
            }
            Err(e) => return Err(SetError::new("serverFail", e.to_string())),
        }
    }
    Err(SetError::new("serverFail", "the body could not be stored"))
}

pub(super) async fn created_view(call: &Call<'_>, mailbox: MailboxId, uid: Uid, size: u64) -> CreatedEmail {
    let thread = store::message(&call.shared.ctx, call.caller.account, mailbox, uid)
        .await
        .ok()
        .flatten()
        .and_then(|m| m.thread_id);
    // A new message: where it is stored is its first place.
    let first = (mailbox, uid);
    CreatedEmail {
        id: ids::email_id(first),
        blob_id: ids::message_blob_id(first),
        thread_id: ids::thread_id(thread.as_deref(), first),
        size,
    }
}

pub async fn set(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: SetArgs = parse(args)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let old_state = email_state(&mailboxes);
    begin_set(
        call,
        set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
        args.if_in_state.as_deref(),
        &old_state,
    )?;
    let mut resp: SetResponse<CreatedEmail> = SetResponse {
        account_id: call.account_id(),
        old_state: Some(old_state),
        ..Default::default()
    };
    for (cid, c) in args.create.unwrap_or_default() {
        // A create that does not parse is refused alone (RFC 8620 §5.3).
        let outcome = match c.0 {
            Ok(c) => create_one(call, &c, &mailboxes).await,
            Err(e) => Err(e.into()),
        };
        match outcome {
            Ok((m, u, size)) => {
                let view = created_view(call, m, u, size).await;
                call.created.insert(cid.clone(), view.id.clone());
                resp.created.insert(cid, view);
            }
            Err(e) => {
                resp.not_created.insert(cid, e);
            }
        }
    }
    for (id, patch) in args.update.unwrap_or_default() {
        let real = call.resolve_id(&id).unwrap_or_else(|| id.clone());
        match update_one(call, &real, patch, &mailboxes).await {
            Ok(()) => {
                resp.updated.insert(id, None);
            }
            Err(e) => {
                resp.not_updated.insert(id, e);
            }
        }
    }
    for id in args.destroy.unwrap_or_default() {
        let real = call.resolve_id(&id).unwrap_or_else(|| id.clone());
        let (mailbox, uid) = match current_place(call, &real).await {
            Ok(place) => place,
            Err(e) => {
                resp.not_destroyed.insert(id, e);
                continue;
            }
        };
        match mailbox_ops::request(
            &ctx,
            account,
            MailboxOp::Expunge {
                mailbox,
                uids: vec![uid],
            },
        )
        .await
        {
            Ok(r) if r.expunged.contains(&uid) => resp.destroyed.push(id),
            Ok(_) => {
                resp.not_destroyed.insert(id, SetError::not_found());
            }
            Err(e) => {
                resp.not_destroyed.insert(id, SetError::from_op(&e));
            }
        }
    }
    resp.new_state = email_state(&store::mailboxes(&ctx, account).await?);
    reply("Email/set", &resp)
}

/// Where the email `id` is now (it names its first place): the mailbox
/// and UID a STORE, MOVE or EXPUNGE of it goes to. Read from a snapshot: a
/// move racing the operation makes the operation find nothing (notFound),
/// never touch another message, since UIDs are not reused.
pub(super) async fn current_place(call: &Call<'_>, id: &str) -> Result<(MailboxId, Uid), SetError> {
    let first = ids::parse_email(id).ok_or_else(SetError::not_found)?;
    let found = store::email(&call.shared.ctx, call.caller.account, first)
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))?;
    found.map(|(m, msg)| (m, msg.uid)).ok_or_else(SetError::not_found)
}

/// One Email/set create: builds the message and delivers it.
async fn create_one(
    call: &Call<'_>,
    c: &EmailCreate,
    mailboxes: &[Mailbox],
) -> Result<(MailboxId, Uid, u64), SetError> {
    let mb = one_mailbox(call, &c.mailbox_ids, mailboxes)?;
    let flags = flags_of(&c.keywords)?;
    let raw = build_message(call, c).await?;
    let received = match &c.received_at {
        Some(s) => {
            rfc3339_seconds(s).ok_or_else(|| SetError::invalid_properties(&["receivedAt"], "not RFC 3339"))? * 1000
        }
        None => now_ms() as i64,
    };
    store_message(call, &mb.name, raw, flags, received).await
}

/// One Email/set update: keywords (whole or by patch) and mailboxIds.
pub async fn update_one(
    call: &Call<'_>,
    id: &str,
    patch: Map<String, Value>,
    mailboxes: &[Mailbox],
) -> Result<(), SetError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let first = ids::parse_email(id).ok_or_else(SetError::not_found)?;
    let (mailbox, msg) = store::email(ctx, account, first)
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))?
        .ok_or_else(SetError::not_found)?;
    let patch = EmailPatch::parse(patch)?;
    patch.store_keywords(call, mailbox, &msg).await?;
    if let Some(set) = patch.mailbox_ids(mailbox) {
        let to = one_mailbox(call, &set, mailboxes)?;
        if to.id != mailbox {
            mailbox_ops::request(
                ctx,
                account,
                MailboxOp::Copy {
                    from: mailbox,
                    uids: vec![msg.uid],
                    to: to.id,
                    moving: true,
                },
            )
            .await
            .map_err(|e| SetError::from_op(&e))?;
        }
    }
    Ok(())
}

/// An Email/set update: the keywords (replaced whole, or some added and
/// some removed) and the mailboxIds (replaced whole and/or patched).
#[derive(Default)]
struct EmailPatch {
    replace: Option<Vec<String>>,
    add: Vec<String>,
    remove: Vec<String>,
    target: Option<BTreeMap<String, bool>>,
    target_patch: Vec<(String, bool)>,
}

impl EmailPatch {
    /// Only keywords and mailboxIds can change; any other property refuses
    /// the update, as does a bad keyword.
    fn parse(patch: Map<String, Value>) -> Result<EmailPatch, SetError> {
        let mut p = EmailPatch::default();
        for (key, value) in patch {
            if key == "keywords" {
                let map: BTreeMap<String, bool> = serde_json::from_value(value)
                    .map_err(|e| SetError::invalid_properties(&["keywords"], e.to_string()))?;
                p.replace = Some(flags_of(&map)?);
            } else if let Some(k) = key.strip_prefix("keywords/") {
                if !valid_keyword(k) {
                    return Err(SetError::invalid_properties(&["keywords"], format!("bad keyword {k}")));
                }
                match value {
                    Value::Bool(true) => p.add.push(flag_of_keyword(k)),
                    Value::Null | Value::Bool(false) => p.remove.push(flag_of_keyword(k)),
                    _ => return Err(SetError::invalid_properties(&["keywords"], "true or null")),
                }
            } else if key == "mailboxIds" {
                p.target = Some(
                    serde_json::from_value(value)
                        .map_err(|e| SetError::invalid_properties(&["mailboxIds"], e.to_string()))?,
                );
            } else if let Some(m) = key.strip_prefix("mailboxIds/") {
                p.target_patch.push((m.to_string(), value == Value::Bool(true)));
            } else {
                return Err(SetError::invalid_properties(&[key.as_str()], "cannot be changed"));
            }
        }
        Ok(p)
    }

    /// Stores the keyword changes on `msg` in `mailbox`: the replacement,
    /// then the additions, then the removals.
    async fn store_keywords(&self, call: &Call<'_>, mailbox: MailboxId, msg: &Message) -> Result<(), SetError> {
        let (ctx, account) = (&call.shared.ctx, call.caller.account);
        let op = |op, flags: Vec<String>| MailboxOp::Store {
            mailbox,
            uids: vec![msg.uid],
            op,
            flags,
            unchanged_since: None,
        };
        let fail = |e: OpError| SetError::from_op(&e);
        if let Some(mut flags) = self.replace.clone() {
            // System flags without a keyword (\Deleted) are kept.
            flags.extend(
                msg.flags
                    .iter()
                    .filter(|f| f.eq_ignore_ascii_case("\\Deleted"))
                    .cloned(),
            );
            mailbox_ops::request(ctx, account, op(FlagOp::Replace, flags))
                .await
                .map_err(fail)?;
        }
        if !self.add.is_empty() {
            mailbox_ops::request(ctx, account, op(FlagOp::Add, self.add.clone()))
                .await
                .map_err(fail)?;
        }
        if !self.remove.is_empty() {
            mailbox_ops::request(ctx, account, op(FlagOp::Remove, self.remove.clone()))
                .await
                .map_err(fail)?;
        }
        Ok(())
    }

    /// The mailboxIds the update asks for, from the message's `current`
    /// mailbox; None when it does not touch them.
    fn mailbox_ids(self, current: MailboxId) -> Option<BTreeMap<String, bool>> {
        if self.target.is_none() && self.target_patch.is_empty() {
            return None;
        }
        let mut set = self
            .target
            .unwrap_or_else(|| BTreeMap::from([(ids::mailbox_id(current), true)]));
        for (m, on) in self.target_patch {
            if on {
                set.insert(m, true);
            } else {
                set.remove(&m);
            }
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_email_create_needs_only_mailbox_ids() {
        crate::jmap::wire::object::assert_required::<EmailCreate>(serde_json::json!({"mailboxIds": {"m1": true}}));
    }
}
