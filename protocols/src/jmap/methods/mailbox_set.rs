//! Mailbox/set (RFC 8621 §2.5; RFC 8620 §5.3). Every change goes to the
//! account's shard actor: names and subscriptions as IMAP's CREATE,
//! RENAME, DELETE and SUBSCRIBE do, `sortOrder` and `role` as
//! `MailboxOp::SetAttributes` (the role is the mailbox's IMAP special use).

use std::collections::BTreeMap;

use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::op_error::OpError;
use meshmail_storage::model::mailboxes::{Attributes, Counts, Mailbox};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::mailbox::{DELIMITER, Rights, SetResponse, object, rights, role, special_use_of, state_of};
use crate::jmap::dispatch::{Call, Output, parse, reply};
use crate::jmap::store;
use crate::jmap::wire::ids;
use crate::jmap::wire::object::{Object, Properties};
use crate::jmap::wire::{MethodError, SetError};

/// `sortOrder` is below 2^31 (RFC 8621 §2).
const SORT_ORDER_MAX: u32 = (1 << 31) - 1;

/// Properties only the server sets (RFC 8621 §2). An update may repeat
/// them with their current values (RFC 8620 §5.3: a client may send back
/// an object it read), never change them.
const SERVER_SET: &[&str] = &[
    "id",
    "totalEmails",
    "unreadEmails",
    "totalThreads",
    "unreadThreads",
    "myRights",
];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    if_in_state: Option<String>,
    #[serde(default)]
    create: Option<BTreeMap<String, Object<MailboxCreate>>>,
    #[serde(default)]
    update: Option<BTreeMap<String, Map<String, Value>>>,
    #[serde(default)]
    destroy: Option<Vec<String>>,
    #[serde(default)]
    on_destroy_remove_emails: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MailboxCreate {
    name: String,
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    is_subscribed: Option<bool>,
    #[serde(default)]
    sort_order: Option<u32>,
}

impl Properties for MailboxCreate {
    const REQUIRED: &'static [&'static str] = &["name"];
}

/// A created mailbox's `created` entry: its server-set properties and the
/// defaults of those the client left out (RFC 8620 §5.3).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    id: String,
    total_emails: i64,
    unread_emails: i64,
    total_threads: i64,
    unread_threads: i64,
    my_rights: Rights,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sort_order: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_subscribed: Option<bool>,
}

fn full_name(parent: Option<&Mailbox>, leaf: &str) -> String {
    match parent {
        Some(p) => format!("{}{DELIMITER}{leaf}", p.name),
        None => leaf.to_string(),
    }
}

pub async fn set(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: SetArgs = parse(args)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let before = store::mailboxes(&ctx, account).await?;
    let old_state = state_of(&before);
    crate::jmap::dispatch::begin_set(
        call,
        crate::jmap::dispatch::set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
        args.if_in_state.as_deref(),
        &old_state,
    )?;
    let mut resp: SetResponse<Created> = SetResponse {
        account_id: call.account_id(),
        old_state: Some(old_state),
        ..Default::default()
    };
    for (cid, c) in args.create.unwrap_or_default() {
        // A create that does not parse is refused alone (RFC 8620 §5.3).
        let outcome = match c.0 {
            Ok(c) => create_one(call, c).await?,
            Err(e) => Err(e.into()),
        };
        match outcome {
            Ok(created) => {
                call.created.insert(cid.clone(), created.id.clone());
                resp.created.insert(cid, created);
            }
            Err(e) => {
                resp.not_created.insert(cid, e);
            }
        }
    }
    for (id, patch) in args.update.unwrap_or_default() {
        let current = store::mailboxes(&ctx, account).await?;
        let Some(m) = call
            .resolve_id(&id)
            .and_then(|i| ids::parse_mailbox(&i))
            .and_then(|n| current.iter().find(|m| m.id == n).cloned())
        else {
            resp.not_updated.insert(id, SetError::not_found());
            continue;
        };
        match update_one(call, &m, &current, patch).await? {
            Ok(()) => {
                resp.updated.insert(id, None);
            }
            Err(e) => {
                resp.not_updated.insert(id, e);
            }
        }
    }
    for id in args.destroy.unwrap_or_default() {
        match destroy_one(call, &id, args.on_destroy_remove_emails).await? {
            Ok(()) => resp.destroyed.push(id),
            Err(e) => {
                resp.not_destroyed.insert(id, e);
            }
        }
    }
    resp.new_state = state_of(&store::mailboxes(&ctx, account).await?);
    reply("Mailbox/set", &resp)
}

/// A role as the store keeps it: `Ok(None)` for no role, an error for a
/// role no mailbox but the inbox may have or that is not registered.
fn special_use_for(role: Option<&str>) -> Result<Option<String>, SetError> {
    match role {
        None => Ok(None),
        Some("inbox") => Err(SetError::invalid_properties(
            &["role"],
            "the inbox role is INBOX's, by its name",
        )),
        Some(r) => special_use_of(r).map(Some).ok_or_else(|| {
            SetError::invalid_properties(
                &["role"],
                format!("unknown role {r}: one of {}", super::mailbox::ROLES.join(", ")),
            )
        }),
    }
}

/// The SetError of a refused `SetAttributes`: a role another mailbox has
/// is a bad `role` (RFC 8621 §2: one mailbox per role).
fn attributes_error(e: &OpError) -> SetError {
    match e {
        OpError::AlreadyExists(_) => SetError::invalid_properties(&["role"], "another mailbox has this role"),
        e => SetError::from_op(e),
    }
}

/// One Mailbox/set create: the new mailbox's `created` entry, or why not.
/// The outer error is a failed read of the store (the method fails).
async fn create_one(call: &Call<'_>, c: MailboxCreate) -> Result<Result<Created, SetError>, MethodError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let current = store::mailboxes(ctx, account).await?;
    let parent = match c.parent_id.as_deref().map(|p| call.resolve_id(p)) {
        None => None,
        Some(Some(p)) => match ids::parse_mailbox(&p).and_then(|id| current.iter().find(|m| m.id == id)) {
            Some(m) => Some(m.clone()),
            None => return Ok(Err(SetError::invalid_properties(&["parentId"], "no such mailbox"))),
        },
        Some(None) => return Ok(Err(SetError::invalid_properties(&["parentId"], "unknown creation id"))),
    };
    if c.name.is_empty() || c.name.contains(DELIMITER) || c.name.len() > 255 {
        return Ok(Err(SetError::invalid_properties(&["name"], "1..255 bytes, no '/'")));
    }
    if c.sort_order.is_some_and(|o| o > SORT_ORDER_MAX) {
        return Ok(Err(SetError::invalid_properties(
            &["sortOrder"],
            "0 <= sortOrder < 2^31",
        )));
    }
    let special_use = match special_use_for(c.role.as_deref()) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let name = full_name(parent.as_ref(), &c.name);
    let op = MailboxOp::Create {
        name: name.clone(),
        special_use: None,
    };
    match mailbox_ops::request(ctx, account, op).await {
        Ok(_) => {}
        Err(OpError::AlreadyExists(_)) => return Ok(Err(SetError::new("alreadyExists", format!("{name} exists")))),
        Err(e) => return Ok(Err(SetError::from_op(&e))),
    }
    let after = store::mailboxes(ctx, account).await?;
    let Some(m) = after.iter().find(|m| m.name == name).cloned() else {
        // Deleted again between the create and this read.
        return Ok(Err(SetError::new(
            "serverFail",
            format!("{name} vanished after its creation"),
        )));
    };
    // The role (checked unique in the writer's transaction) and the order
    // come second: IMAP's CREATE has neither. A refused one takes the new
    // mailbox away again, so a create is all or nothing for the client.
    let attributes = Attributes {
        sort_order: c.sort_order.filter(|o| *o != 0),
        special_use: special_use.map(Some),
    };
    if attributes != Attributes::default() {
        let op = MailboxOp::SetAttributes {
            mailbox: m.id,
            attributes,
        };
        if let Err(e) = mailbox_ops::request(ctx, account, op).await {
            let _ = mailbox_ops::request(ctx, account, MailboxOp::Delete { name: name.clone() }).await;
            return Ok(Err(attributes_error(&e)));
        }
    }
    if c.is_subscribed == Some(false) {
        let op = MailboxOp::Subscribe {
            name: name.clone(),
            subscribed: false,
        };
        let _ = mailbox_ops::request(ctx, account, op).await;
    }
    Ok(Ok(Created {
        id: ids::mailbox_id(m.id),
        total_emails: 0,
        unread_emails: 0,
        total_threads: 0,
        unread_threads: 0,
        my_rights: rights(false),
        parent_id: c.parent_id.is_none().then_some(None),
        role: c.role.is_none().then_some(None),
        sort_order: c.sort_order.is_none().then_some(0),
        is_subscribed: c.is_subscribed.is_none().then_some(true),
    }))
}

/// One Mailbox/set destroy. The outer error is a failed read of the store.
async fn destroy_one(call: &Call<'_>, id: &str, remove_emails: bool) -> Result<Result<(), SetError>, MethodError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let current = store::mailboxes_with_counts(ctx, account).await?;
    let Some((m, c)) = ids::parse_mailbox(id).and_then(|n| current.iter().find(|(m, _)| m.id == n).cloned()) else {
        return Ok(Err(SetError::not_found()));
    };
    if m.name == "INBOX" {
        return Ok(Err(SetError::new("forbidden", "the inbox cannot be destroyed")));
    }
    let prefix = format!("{}{DELIMITER}", m.name);
    if current.iter().any(|(o, _)| o.name.starts_with(&prefix)) {
        return Ok(Err(SetError::new("mailboxHasChild", "the mailbox has children")));
    }
    if c.messages > 0 && !remove_emails {
        return Ok(Err(SetError::new("mailboxHasEmail", "the mailbox is not empty")));
    }
    Ok(
        mailbox_ops::request(ctx, account, MailboxOp::Delete { name: m.name.clone() })
            .await
            .map(|_| ())
            .map_err(|e| SetError::from_op(&e)),
    )
}

/// What an update patch asks for, read and checked before anything is
/// written.
#[derive(Debug, Default)]
struct Patch {
    leaf: Option<String>,
    /// `Some(None)`: to the top level.
    parent: Option<Option<Mailbox>>,
    subscribed: Option<bool>,
    attributes: Attributes,
}

/// Reads a patch against the mailbox's current object (`current_object`,
/// for the server-set properties it repeats). Every property at fault is
/// listed in one invalidProperties.
fn read_patch(
    call: &Call<'_>,
    m: &Mailbox,
    current: &[Mailbox],
    current_object: &Value,
    patch: Map<String, Value>,
) -> Result<Patch, SetError> {
    let mut out = Patch::default();
    let mut bad: Vec<String> = Vec::new();
    for (key, value) in patch {
        // A patch key may be a path into the object (RFC 8620 §5.3):
        // `myRights/mayDelete` repeats part of a server-set property.
        let head = key.split('/').next().unwrap_or_default().to_string();
        if SERVER_SET.contains(&head.as_str()) {
            let pointer = format!("/{key}");
            if current_object.pointer(&pointer) != Some(&value) {
                bad.push(head);
            }
            continue;
        }
        let ok = match (key.as_str(), value) {
            ("name", Value::String(n)) => {
                out.leaf = Some(n);
                true
            }
            ("parentId", Value::Null) => {
                out.parent = Some(None);
                true
            }
            ("parentId", Value::String(p)) => {
                let p = call.resolve_id(&p).unwrap_or(p);
                let found = ids::parse_mailbox(&p).and_then(|id| current.iter().find(|o| o.id == id).cloned());
                out.parent = found.clone().map(Some);
                found.is_some()
            }
            ("isSubscribed", Value::Bool(b)) => {
                out.subscribed = Some(b);
                true
            }
            ("sortOrder", Value::Number(n)) => match n.as_u64().filter(|o| *o <= u64::from(SORT_ORDER_MAX)) {
                Some(o) => {
                    out.attributes.sort_order = Some(o as u32);
                    true
                }
                None => false,
            },
            ("role", Value::Null) => role_change(m, None, &mut out.attributes),
            ("role", Value::String(r)) => role_change(m, Some(&r), &mut out.attributes),
            _ => false,
        };
        if !ok {
            bad.push(head);
        }
    }
    if bad.is_empty() {
        return Ok(out);
    }
    bad.sort();
    bad.dedup();
    let names: Vec<&str> = bad.iter().map(String::as_str).collect();
    Err(SetError::invalid_properties(
        &names,
        "not valid here, or a server-set property with another value than it has",
    ))
}

/// A `role` in a patch: the same role as now changes nothing; INBOX keeps
/// its role and no other mailbox takes it; any other role must be
/// registered. False when refused.
fn role_change(m: &Mailbox, wanted: Option<&str>, attributes: &mut Attributes) -> bool {
    if role(m).as_deref() == wanted {
        return true;
    }
    if m.name == "INBOX" {
        return false;
    }
    match special_use_for(wanted) {
        Ok(special_use) => {
            attributes.special_use = Some(special_use);
            true
        }
        Err(_) => false,
    }
}

/// One Mailbox/set update. The outer error is a failed read of the store.
async fn update_one(
    call: &Call<'_>,
    m: &Mailbox,
    current: &[Mailbox],
    patch: Map<String, Value>,
) -> Result<Result<(), SetError>, MethodError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let repeats_server_set = patch
        .keys()
        .any(|k| SERVER_SET.contains(&k.split('/').next().unwrap_or_default()));
    let current_object = if repeats_server_set {
        let counts = store::mailboxes_with_counts(ctx, account)
            .await?
            .into_iter()
            .find(|(o, _)| o.id == m.id)
            .map_or(Counts::default(), |(_, c)| c);
        let by_name: BTreeMap<&str, i64> = current.iter().map(|o| (o.name.as_str(), o.id)).collect();
        serde_json::to_value(object(m, counts, &by_name)).map_err(|e| MethodError::ServerFail(e.to_string()))?
    } else {
        Value::Null
    };
    let patch = match read_patch(call, m, current, &current_object, patch) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    Ok(apply_patch(call, m, patch).await)
}

/// Writes a checked patch: the name (rename), then order and role, then
/// the subscription.
async fn apply_patch(call: &Call<'_>, m: &Mailbox, patch: Patch) -> Result<(), SetError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let (parent_now, leaf_now) = match m.name.rsplit_once(DELIMITER) {
        Some((p, l)) => (Some(p.to_string()), l.to_string()),
        None => (None, m.name.clone()),
    };
    let leaf = patch.leaf.unwrap_or(leaf_now);
    if leaf.is_empty() || leaf.contains(DELIMITER) || leaf.len() > 255 {
        return Err(SetError::invalid_properties(&["name"], "1..255 bytes, no '/'"));
    }
    let name = match &patch.parent {
        Some(parent) => full_name(parent.as_ref(), &leaf),
        None => match &parent_now {
            Some(p) => format!("{p}{DELIMITER}{leaf}"),
            None => leaf.clone(),
        },
    };
    if name != m.name {
        if m.name == "INBOX" {
            return Err(SetError::new("forbidden", "the inbox cannot be renamed"));
        }
        let op = MailboxOp::Rename {
            from: m.name.clone(),
            to: name.clone(),
        };
        mailbox_ops::request(ctx, account, op)
            .await
            // A name taken by a sibling is a bad `name` property of this update.
            .map_err(|e| match e {
                OpError::AlreadyExists(_) => SetError::invalid_properties(&["name"], e.to_string()),
                e => SetError::from_op(&e),
            })?;
    }
    if patch.attributes != Attributes::default() {
        let op = MailboxOp::SetAttributes {
            mailbox: m.id,
            attributes: patch.attributes,
        };
        mailbox_ops::request(ctx, account, op)
            .await
            .map_err(|e| attributes_error(&e))?;
    }
    if let Some(s) = patch.subscribed
        && s != m.subscribed
    {
        mailbox_ops::request(ctx, account, MailboxOp::Subscribe { name, subscribed: s })
            .await
            .map_err(|e| SetError::from_op(&e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_create_needs_only_a_name() {
        crate::jmap::wire::object::assert_required::<MailboxCreate>(serde_json::json!({"name": "x"}));
    }

    #[test]
    fn roles_map_to_registered_special_uses() {
        assert_eq!(special_use_for(Some("archive")).unwrap().as_deref(), Some("\\Archive"));
        assert_eq!(special_use_for(None).unwrap(), None);
        assert!(special_use_for(Some("inbox")).is_err());
        assert!(special_use_for(Some("nonsense")).is_err());
    }
}
