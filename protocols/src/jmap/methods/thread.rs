//! Thread/get and Thread/changes (RFC 8621 §3). A thread's members come
//! from the `thrx` index written with every message; its state is the
//! Email state (threads change only when emails do).

use std::collections::BTreeSet;

use meshmail_storage::ids::{MailboxId, Uid};
use meshmail_storage::model::messages::Message;
use meshmail_storage::model::threads;
use serde::Serialize;
use serde_json::{Map, Value};

use super::email_get::email_state;
use super::email_query::{CHANGES_MAX, compute_changes};
use crate::jmap::dispatch::{Call, ChangesArgs, ChangesResponse, GetArgs, Output, check_get_size, parse, reply};
use crate::jmap::store;
use crate::jmap::wire::MethodError;
use crate::jmap::wire::ids::{self, ThreadRef};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadObject {
    id: String,
    email_ids: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GetResponse {
    account_id: String,
    state: String,
    list: Vec<ThreadObject>,
    not_found: Vec<String>,
}

/// The emails of a thread, oldest first (RFC 8621 §3: by receivedAt).
async fn members(call: &Call<'_>, t: &ThreadRef) -> Result<Vec<String>, MethodError> {
    let ctx = &call.shared.ctx;
    let account = call.caller.account;
    // (mailbox now, row) of each member: a one-message thread is named by
    // its message's first place (an email id); a stored thread's members
    // are indexed where they are now.
    let rows: Vec<(MailboxId, Message)> = match t {
        ThreadRef::Single(m, u) => store::emails(ctx, account, vec![(*m, *u)]).await?,
        ThreadRef::Stored(id) => {
            let id = id.clone();
            let places: Vec<(MailboxId, Uid)> = ctx
                .db
                .read("jmap_thread", move |txn| {
                    let id = id.clone();
                    async move { threads::members(&txn, account, &id).await }
                })
                .await?;
            let rows = store::messages(ctx, account, places.clone()).await?;
            places.iter().zip(rows).map(|((m, _), r)| r.map(|r| (*m, r))).collect()
        }
    }
    .into_iter()
    .flatten()
    .collect();
    let mut found: Vec<(i64, String)> = rows
        .into_iter()
        .filter_map(|(m, row)| {
            // A fallback thread id must name a message without a stored thread.
            if matches!(t, ThreadRef::Single(..)) && row.thread_id.is_some() {
                return None;
            }
            Some((row.internal_date_ms, ids::email_id(row.first_place(m))))
        })
        .collect();
    found.sort();
    Ok(found.into_iter().map(|(_, id)| id).collect())
}

pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: GetArgs = parse(args)?;
    check_get_size(call, args.ids.as_ref())?;
    let Some(wanted) = args.ids else {
        return Err(MethodError::RequestTooLarge);
    };
    let mailboxes = store::mailboxes(&call.shared.ctx, call.caller.account).await?;
    let mut resp = GetResponse {
        account_id: call.account_id(),
        state: email_state(&mailboxes),
        list: Vec::new(),
        not_found: Vec::new(),
    };
    for id in wanted {
        let emails = match ids::parse_thread(&id) {
            Some(t) => members(call, &t).await?,
            None => Vec::new(),
        };
        if emails.is_empty() {
            resp.not_found.push(id);
        } else {
            resp.list.push(ThreadObject { id, email_ids: emails });
        }
    }
    reply("Thread/get", &resp)
}

pub async fn changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ChangesArgs = parse(args)?;
    let max = args
        .max_changes
        .map_or(CHANGES_MAX, |m| (m as usize).clamp(1, CHANGES_MAX));
    let ch = compute_changes(call, &args.since_state, max).await?;
    let rows = store::messages(&call.shared.ctx, call.caller.account, ch.touched.clone()).await?;
    let mut created = BTreeSet::new();
    let mut updated = BTreeSet::new();
    let mut destroyed = BTreeSet::new();
    for ((m, _), row) in ch.touched.iter().zip(rows) {
        let Some(row) = row else { continue };
        let first = row.first_place(*m);
        let t = ids::thread_id(row.thread_id.as_deref(), first);
        let id = ids::email_id(first);
        let t_ref = ids::parse_thread(&t).expect("ids we make parse");
        let n = members(call, &t_ref).await?.len();
        // A thread whose only member is new is new.
        if n == 1 && ch.created.contains(&id) {
            created.insert(t);
        } else {
            updated.insert(t);
        }
    }
    for t in &ch.expunged_threads {
        let alive = match ids::parse_thread(t) {
            Some(r) => !members(call, &r).await?.is_empty(),
            None => false,
        };
        if alive {
            updated.insert(t.clone());
        } else if !created.remove(t) {
            destroyed.insert(t.clone());
        }
    }
    for t in &created {
        updated.remove(t);
    }
    reply(
        "Thread/changes",
        &ChangesResponse {
            account_id: call.account_id(),
            old_state: args.since_state,
            new_state: ch.new_state.encode(),
            has_more_changes: ch.has_more,
            created: created.into_iter().collect(),
            updated: updated.into_iter().collect(),
            destroyed: destroyed.into_iter().collect(),
            updated_properties: None,
        },
    )
}
