//! Mailbox/get, /changes, /query, /queryChanges (RFC 8621 §2); /set is in
//! `mailbox_set`.
//! Names are IMAP's, with `/` as the hierarchy separator: `a/b` is `b`
//! under `a`. Thread counts equal email counts (threads are not counted
//! per mailbox).

use std::collections::BTreeMap;

use meshmail_storage::model::mailboxes::{Counts, Mailbox};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jmap::dispatch::{
    Call, ChangesArgs, ChangesResponse, GetArgs, Output, check_get_size, parse, reply, select_properties,
};
use crate::jmap::store;
use crate::jmap::wire::filter::Filter;
use crate::jmap::wire::ids::{self, StateVector};
use crate::jmap::wire::{MethodError, SetError};

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

/// The roles a mailbox other than the inbox may take: the special-use
/// attributes of the IANA "IMAP Mailbox Name Attributes" registry, lower
/// case (RFC 8621 §2). `inbox` is INBOX's, by its name.
pub const ROLES: &[&str] = &[
    "all",
    "archive",
    "drafts",
    "flagged",
    "junk",
    "sent",
    "trash",
    "important",
];

/// The IMAP special use (`\Drafts`) of a JMAP role; None for a role that
/// is not one of [`ROLES`].
pub fn special_use_of(role: &str) -> Option<String> {
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

pub fn object(m: &Mailbox, c: Counts, by_name: &BTreeMap<&str, i64>) -> MailboxObject {
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
        sort_order: m.sort_order,
        role,
        total_emails: c.messages.max(0),
        unread_emails: c.unseen.max(0),
        total_threads: c.messages.max(0),
        unread_threads: c.unseen.max(0),
        my_rights: rights(is_inbox),
        is_subscribed: m.subscribed,
    }
}

/// The owner's rights: all, but the inbox cannot be renamed or deleted.
pub fn rights(is_inbox: bool) -> Rights {
    Rights {
        may_read_items: true,
        may_add_items: true,
        may_remove_items: true,
        may_set_seen: true,
        may_set_keywords: true,
        may_create_child: true,
        may_rename: !is_inbox,
        may_delete: !is_inbox,
        may_submit: true,
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
    filter: Option<Filter<QueryFilter>>,
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
pub struct QueryFilter {
    #[serde(default, with = "double_option")]
    parent_id: Option<Option<String>>,
    name: Option<String>,
    #[serde(default, with = "double_option")]
    role: Option<Option<String>>,
    has_any_role: Option<bool>,
    is_subscribed: Option<bool>,
}

impl QueryFilter {
    fn matches(&self, o: &MailboxObject) -> bool {
        self.parent_id.as_ref().is_none_or(|p| &o.parent_id == p)
            && self
                .name
                .as_ref()
                .is_none_or(|n| o.name.to_lowercase().contains(&n.to_lowercase()))
            && self.role.as_ref().is_none_or(|r| &o.role == r)
            && self.has_any_role.is_none_or(|h| o.role.is_some() == h)
            && self.is_subscribed.is_none_or(|s| o.is_subscribed == s)
    }
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
    let objs = all.iter().map(|(m, c)| object(m, *c, &by_name));
    let page = QueryPage::of(
        objs,
        args.filter.as_ref(),
        |c, o| c.matches(o),
        &args.sort.unwrap_or_default(),
        |property, objs| {
            match property {
                "name" => objs.sort_by(|a, b| a.name.cmp(&b.name)),
                "sortOrder" => objs.sort_by_key(|o| o.sort_order),
                other => return Err(MethodError::UnsupportedSort(other.to_string())),
            }
            Ok(())
        },
    )?;
    let total = page.total;
    let (position, ids) = page.window(args.position, args.limit, |o| o.id);
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

/// What an in-memory /query keeps (RFC 8620 §5.5), before its window:
/// the objects the filter keeps, sorted by the comparators.
pub struct QueryPage<O> {
    pub objs: Vec<O>,
    pub total: usize,
}

impl<O> QueryPage<O> {
    /// Filters `objs` (`test` answers one condition for one object) and
    /// sorts them with `sort_by` (one property, ascending; an unknown one
    /// is its error), comparator by comparator, last first and stable, so
    /// the first comparator decides.
    pub fn of<C>(
        objs: impl Iterator<Item = O>,
        filter: Option<&Filter<C>>,
        test: impl Fn(&C, &O) -> bool,
        sort: &[Comparator],
        sort_by: impl Fn(&str, &mut Vec<O>) -> Result<(), MethodError>,
    ) -> Result<QueryPage<O>, MethodError> {
        let mut kept = Vec::new();
        for o in objs {
            let keep = match filter {
                Some(f) => f.matches(&mut |c| Ok(test(c, &o)))?,
                None => true,
            };
            if keep {
                kept.push(o);
            }
        }
        for c in sort.iter().rev() {
            sort_by(&c.property, &mut kept)?;
            if !c.is_ascending {
                kept.reverse();
            }
        }
        Ok(QueryPage {
            total: kept.len(),
            objs: kept,
        })
    }

    /// The window RFC 8620 §5.5 answers: the position clamped (negative
    /// counts from the end) and the ids of at most `limit` objects from it.
    pub fn window(self, position: Option<i64>, limit: Option<usize>, id: impl Fn(O) -> String) -> (usize, Vec<String>) {
        let position = clamp_position(position.unwrap_or(0), self.total);
        let ids = self
            .objs
            .into_iter()
            .skip(position)
            .take(limit.unwrap_or(usize::MAX))
            .map(id)
            .collect();
        (position, ids)
    }
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
    crate::jmap::dispatch::query_changes_unsupported(args)
}

/// The answer of every /set (RFC 8620 §5.3), `T` what `created` holds.
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
