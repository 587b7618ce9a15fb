//! Mailbox/get, /changes, /query, /queryChanges, /set (RFC 8621 §2).
//! Names are IMAP's, with `/` as the hierarchy separator: `a/b` is `b`
//! under `a`. Thread counts equal email counts (threads are not counted
//! per mailbox).

use std::collections::BTreeMap;

use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::op_error::OpError;
use meshmail_storage::model::mailboxes::{Counts, Mailbox};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::dispatch::{
    Call, ChangesArgs, ChangesResponse, GetArgs, Output, check_get_size, parse, reply, select_properties,
};
use super::ids::{self, StateVector};
use super::object::{Object, Properties};
use super::store;
use super::wire::{MethodError, SetError};

pub use meshmail_storage::model::mailboxes::DELIMITER;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rights {
    may_read_items: bool,
    may_add_items: bool,
    may_remove_items: bool,
    may_set_seen: bool,
    may_set_keywords: bool,
    may_create_child: bool,
    may_rename: bool,
    may_delete: bool,
    may_submit: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MailboxObject {
    pub id: String,
    pub name: String,
    pub parent_id: Option<String>,
    pub role: Option<String>,
    pub sort_order: u32,
    pub total_emails: i64,
    pub unread_emails: i64,
    pub total_threads: i64,
    pub unread_threads: i64,
    pub my_rights: Rights,
    pub is_subscribed: bool,
}

/// The JMAP role of a mailbox (RFC 8621 §2, from RFC 6154 special use).
pub fn role(m: &Mailbox) -> Option<String> {
    if m.name == "INBOX" {
        return Some("inbox".into());
    }
    m.special_use
        .as_deref()
        .map(|s| s.trim_start_matches('\\').to_ascii_lowercase())
}

fn special_use_of(role: &str) -> Option<String> {
    const ROLES: &[&str] = &[
        "all",
        "archive",
        "drafts",
        "flagged",
        "junk",
        "sent",
        "trash",
        "important",
    ];
    ROLES.contains(&role).then(|| {
        let mut s = String::from("\\");
        let mut c = role.chars();
        if let Some(f) = c.next() {
            s.extend(f.to_uppercase());
            s.push_str(c.as_str());
        }
        s
    })
}

fn object(m: &Mailbox, c: Counts, by_name: &BTreeMap<&str, i64>) -> MailboxObject {
    let (parent, leaf) = match m.name.rsplit_once(DELIMITER) {
        Some((p, l)) => (by_name.get(p).map(|id| ids::mailbox_id(*id)), l.to_string()),
        None => (None, m.name.clone()),
    };
    let role = role(m);
    let is_inbox = role.as_deref() == Some("inbox");
    MailboxObject {
        id: ids::mailbox_id(m.id),
        name: leaf,
        parent_id: parent,
        sort_order: if is_inbox { 0 } else { 10 },
        role,
        total_emails: c.messages.max(0),
        unread_emails: c.unseen.max(0),
        total_threads: c.messages.max(0),
        unread_threads: c.unseen.max(0),
        my_rights: Rights {
            may_read_items: true,
            may_add_items: true,
            may_remove_items: true,
            may_set_seen: true,
            may_set_keywords: true,
            may_create_child: true,
            may_rename: !is_inbox,
            may_delete: !is_inbox,
            may_submit: true,
        },
        is_subscribed: m.subscribed,
    }
}

pub fn state_of(mailboxes: &[Mailbox]) -> String {
    StateVector::of(mailboxes, true).encode()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GetResponse {
    account_id: String,
    state: String,
    list: Vec<Value>,
    not_found: Vec<String>,
}

pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: GetArgs = parse(args)?;
    check_get_size(call, args.ids.as_ref())?;
    let all = store::mailboxes_with_counts(&call.shared.ctx, call.caller.account).await?;
    let by_name: BTreeMap<&str, i64> = all.iter().map(|(m, _)| (m.name.as_str(), m.id)).collect();
    let plain: Vec<Mailbox> = all.iter().map(|(m, _)| m.clone()).collect();
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    let wanted: Option<Vec<String>> = args.ids.map(|v| {
        v.iter()
            .map(|i| call.resolve_id(i).unwrap_or_else(|| i.clone()))
            .collect()
    });
    match wanted {
        None => {
            for (m, c) in &all {
                list.push(to_value(object(m, *c, &by_name), args.properties.as_deref())?);
            }
        }
        Some(ids_wanted) => {
            for id in ids_wanted {
                match ids::parse_mailbox(&id).and_then(|n| all.iter().find(|(m, _)| m.id == n)) {
                    Some((m, c)) => list.push(to_value(object(m, *c, &by_name), args.properties.as_deref())?),
                    None => not_found.push(id),
                }
            }
        }
    }
    reply(
        "Mailbox/get",
        &GetResponse {
            account_id: call.account_id(),
            state: state_of(&plain),
            list,
            not_found,
        },
    )
}

fn to_value<T: Serialize>(o: T, props: Option<&[String]>) -> Result<Value, MethodError> {
    let v = serde_json::to_value(o).map_err(|e| MethodError::ServerFail(e.to_string()))?;
    Ok(select_properties(v, props))
}

pub async fn changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ChangesArgs = parse(args)?;
    let old = StateVector::decode(&args.since_state).ok_or(MethodError::CannotCalculateChanges)?;
    let now = store::mailboxes(&call.shared.ctx, call.caller.account).await?;
    let new = StateVector::of(&now, true);
    let mut resp = ChangesResponse {
        account_id: call.account_id(),
        old_state: args.since_state.clone(),
        new_state: new.encode(),
        ..Default::default()
    };
    for mark in &new.marks {
        match old.get(mark.mailbox) {
            None => resp.created.push(ids::mailbox_id(mark.mailbox)),
            Some(o) if o != mark => resp.updated.push(ids::mailbox_id(mark.mailbox)),
            Some(_) => {}
        }
    }
    for mark in &old.marks {
        if new.get(mark.mailbox).is_none() {
            resp.destroyed.push(ids::mailbox_id(mark.mailbox));
        }
    }
    // Mailboxes are few: all changes fit in one answer whatever maxChanges
    // says, unless it is smaller than their number.
    let total = resp.created.len() + resp.updated.len() + resp.destroyed.len();
    if let Some(max) = args.max_changes {
        if max == 0 {
            return Err(MethodError::InvalidArguments("maxChanges must be positive".into()));
        }
        if total as u64 > max {
            return Err(MethodError::CannotCalculateChanges);
        }
    }
    reply("Mailbox/changes", &resp)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryArgs {
    account_id: String,
    #[serde(default)]
    filter: Option<QueryFilter>,
    #[serde(default)]
    sort: Option<Vec<Comparator>>,
    #[serde(default)]
    position: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    calculate_total: Option<bool>,
    #[serde(default)]
    sort_as_tree: Option<bool>,
    #[serde(default)]
    filter_as_tree: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryFilter {
    #[serde(default, with = "double_option")]
    parent_id: Option<Option<String>>,
    name: Option<String>,
    #[serde(default, with = "double_option")]
    role: Option<Option<String>>,
    has_any_role: Option<bool>,
    is_subscribed: Option<bool>,
}

/// Distinguishes a property given as `null` from one left out.
mod double_option {
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparator {
    pub property: String,
    #[serde(default = "yes")]
    pub is_ascending: bool,
    #[serde(default)]
    pub collation: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryResponse {
    pub account_id: String,
    pub query_state: String,
    pub can_calculate_changes: bool,
    pub position: usize,
    pub ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

pub async fn query(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: QueryArgs = parse(args)?;
    let _ = (args.sort_as_tree, args.filter_as_tree, &args.account_id);
    let all = store::mailboxes_with_counts(&call.shared.ctx, call.caller.account).await?;
    let by_name: BTreeMap<&str, i64> = all.iter().map(|(m, _)| (m.name.as_str(), m.id)).collect();
    let plain: Vec<Mailbox> = all.iter().map(|(m, _)| m.clone()).collect();
    let f = args.filter.unwrap_or_default();
    let mut objs: Vec<MailboxObject> = all
        .iter()
        .map(|(m, c)| object(m, *c, &by_name))
        .filter(|o| {
            f.parent_id.as_ref().is_none_or(|p| &o.parent_id == p)
                && f.name
                    .as_ref()
                    .is_none_or(|n| o.name.to_lowercase().contains(&n.to_lowercase()))
                && f.role.as_ref().is_none_or(|r| &o.role == r)
                && f.has_any_role.is_none_or(|h| o.role.is_some() == h)
                && f.is_subscribed.is_none_or(|s| o.is_subscribed == s)
        })
        .collect();
    for c in args.sort.unwrap_or_default().iter().rev() {
        match c.property.as_str() {
            "name" => objs.sort_by(|a, b| a.name.cmp(&b.name)),
            "sortOrder" => objs.sort_by_key(|o| o.sort_order),
            other => return Err(MethodError::UnsupportedSort(other.to_string())),
        }
        if !c.is_ascending {
            objs.reverse();
        }
    }
    let total = objs.len();
    let position = clamp_position(args.position.unwrap_or(0), total);
    let limit = args.limit.unwrap_or(usize::MAX);
    let ids: Vec<String> = objs.into_iter().skip(position).take(limit).map(|o| o.id).collect();
    reply(
        "Mailbox/query",
        &QueryResponse {
            account_id: call.account_id(),
            query_state: state_of(&plain),
            can_calculate_changes: false,
            position,
            ids,
            total: args.calculate_total.unwrap_or(false).then_some(total),
            limit: None,
        },
    )
}

/// RFC 8620 §5.5: a negative position counts from the end.
pub fn clamp_position(position: i64, total: usize) -> usize {
    if position < 0 {
        total.saturating_sub(position.unsigned_abs() as usize)
    } else {
        (position as usize).min(total)
    }
}

pub async fn query_changes(_call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    super::dispatch::query_changes_unsupported(args)
}

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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetResponse<T: Serialize> {
    pub account_id: String,
    pub old_state: Option<String>,
    pub new_state: String,
    pub created: BTreeMap<String, T>,
    pub updated: BTreeMap<String, Option<Value>>,
    pub destroyed: Vec<String>,
    pub not_created: BTreeMap<String, SetError>,
    pub not_updated: BTreeMap<String, SetError>,
    pub not_destroyed: BTreeMap<String, SetError>,
}

impl<T: Serialize> Default for SetResponse<T> {
    fn default() -> Self {
        SetResponse {
            account_id: String::new(),
            old_state: None,
            new_state: String::new(),
            created: BTreeMap::new(),
            updated: BTreeMap::new(),
            destroyed: Vec::new(),
            not_created: BTreeMap::new(),
            not_updated: BTreeMap::new(),
            not_destroyed: BTreeMap::new(),
        }
    }
}

#[derive(Serialize)]
struct Created {
    id: String,
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
    super::dispatch::begin_set(
        call,
        super::dispatch::set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
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
            Ok(id) => {
                call.created.insert(cid.clone(), id.clone());
                resp.created.insert(cid, Created { id });
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
        match update_one(call, &m, &current, patch).await {
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

/// One Mailbox/set create: the new mailbox's id, or why not. The outer
/// error is a failed read of the store (the method fails).
async fn create_one(call: &Call<'_>, c: MailboxCreate) -> Result<Result<String, SetError>, MethodError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let _ = c.sort_order;
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
    let name = full_name(parent.as_ref(), &c.name);
    let special_use = c.role.as_deref().and_then(special_use_of);
    let op = MailboxOp::Create {
        name: name.clone(),
        special_use,
    };
    match mailbox_ops::request(ctx, account, op).await {
        Ok(_) => {}
        Err(OpError::AlreadyExists(_)) => return Ok(Err(SetError::new("alreadyExists", format!("{name} exists")))),
        Err(e) => return Ok(Err(SetError::from_op(&e))),
    }
    let after = store::mailboxes(ctx, account).await?;
    let Some(m) = after.iter().find(|m| m.name == name) else {
        // Deleted again between the create and this read.
        return Ok(Err(SetError::new(
            "serverFail",
            format!("{name} vanished after its creation"),
        )));
    };
    if c.is_subscribed == Some(false) {
        let op = MailboxOp::Subscribe {
            name: name.clone(),
            subscribed: false,
        };
        let _ = mailbox_ops::request(ctx, account, op).await;
    }
    Ok(Ok(ids::mailbox_id(m.id)))
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

async fn update_one(
    call: &Call<'_>,
    m: &Mailbox,
    current: &[Mailbox],
    patch: Map<String, Value>,
) -> Result<(), SetError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    let mut leaf = m
        .name
        .rsplit_once(DELIMITER)
        .map_or(m.name.clone(), |(_, l)| l.to_string());
    let mut parent: Option<Mailbox> = m
        .name
        .rsplit_once(DELIMITER)
        .and_then(|(p, _)| current.iter().find(|o| o.name == p).cloned());
    let mut subscribed = None;
    for (key, value) in patch {
        match (key.as_str(), value) {
            ("name", Value::String(n)) => leaf = n,
            ("parentId", Value::Null) => parent = None,
            ("parentId", Value::String(p)) => {
                let p = call.resolve_id(&p).unwrap_or(p);
                parent = Some(
                    ids::parse_mailbox(&p)
                        .and_then(|id| current.iter().find(|o| o.id == id).cloned())
                        .ok_or_else(|| SetError::invalid_properties(&["parentId"], "no such mailbox"))?,
                );
            }
            ("isSubscribed", Value::Bool(b)) => subscribed = Some(b),
            ("sortOrder", _) | ("role", _) => {}
            (other, _) => {
                return Err(SetError::invalid_properties(&[other], "cannot be changed"));
            }
        }
    }
    if leaf.is_empty() || leaf.contains(DELIMITER) {
        return Err(SetError::invalid_properties(&["name"], "1..255 bytes, no '/'"));
    }
    let name = full_name(parent.as_ref(), &leaf);
    if name != m.name {
        if m.name == "INBOX" {
            return Err(SetError::new("forbidden", "the inbox cannot be renamed"));
        }
        mailbox_ops::request(
            ctx,
            account,
            MailboxOp::Rename {
                from: m.name.clone(),
                to: name.clone(),
            },
        )
        .await
        // A name taken by a sibling is a bad `name` property of this update.
        .map_err(|e| match e {
            OpError::AlreadyExists(_) => SetError::invalid_properties(&["name"], e.to_string()),
            e => SetError::from_op(&e),
        })?;
    }
    if let Some(s) = subscribed
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
        super::super::object::assert_required::<MailboxCreate>(serde_json::json!({"name": "x"}));
    }
}
