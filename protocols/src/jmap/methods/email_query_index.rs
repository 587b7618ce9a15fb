//! Email/query answered from the receivedAt index: the webmail's (and most
//! clients') list request — one mailbox, sorted by receivedAt — reads
//! `position + limit` index keys instead of every row of the mailbox. Any
//! other query takes the general path in [`super::email_query`], which
//! gives the same order (ties broken by UID in the sort's direction).

use std::collections::{BTreeMap, BTreeSet};

use meshmail_actors::node::NodeCtx;
use meshmail_storage::StorageError;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::mailboxes::{self, Mailbox};
use meshmail_storage::model::messages::{self, ChangeKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::email_filter::{Filter, FilterCondition};
use super::email_get::email_state;
use super::mailbox::{Comparator, clamp_position};
use crate::jmap::dispatch::{Call, Output, parse, reply};
use crate::jmap::store;
use crate::jmap::wire::MethodError;
use crate::jmap::wire::ids::{self, FirstPlace, StateVector};

/// A query the index can answer: its mailbox and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedQuery {
    pub mailbox: MailboxId,
    pub newest_first: bool,
}

/// The indexed form of a query, if it has one: a filter of exactly one
/// `inMailbox` naming an indexed mailbox, one `receivedAt` comparator, no
/// anchor and no thread collapsing.
pub fn indexed(
    filter: Option<&Filter>,
    sort: &[Comparator],
    anchored: bool,
    collapse_threads: bool,
    mailboxes: &[Mailbox],
) -> Option<IndexedQuery> {
    let Some(Filter::Condition(c)) = filter else {
        return None;
    };
    let only = FilterCondition {
        in_mailbox: c.in_mailbox.clone(),
        ..FilterCondition::default()
    };
    if **c != only || anchored || collapse_threads {
        return None;
    }
    let [cmp] = sort else { return None };
    if cmp.property != "receivedAt" {
        return None;
    }
    let wanted = c.in_mailbox.as_deref()?;
    let mb = mailboxes.iter().find(|m| ids::mailbox_id(m.id) == wanted)?;
    mb.date_index.then_some(IndexedQuery {
        mailbox: mb.id,
        newest_first: !cmp.is_ascending,
    })
}

/// One page of an indexed query: (position, email ids, total). The ids
/// come from the index (a moved message's origin is in its index value),
/// so a page reads no rows.
pub async fn page(
    ctx: &NodeCtx,
    account: AccountId,
    q: IndexedQuery,
    position: i64,
    limit: usize,
) -> Result<(usize, Vec<String>, usize), MethodError> {
    let (position, dated, total) = ctx
        .db
        .read("jmap_query_index", move |txn| async move {
            let total = mailboxes::counts(&txn, account, q.mailbox).await?.messages.max(0) as usize;
            let position = clamp_position(position, total);
            let page = messages::by_date(&txn, account, q.mailbox, q.newest_first, position, limit).await?;
            Ok::<_, StorageError>((position, page, total))
        })
        .await?;
    metrics::counter!("meshmail_jmap_query_indexed_total").increment(1);
    let ids = dated.iter().map(|d| ids::email_id(d.first_place(q.mailbox))).collect();
    Ok((position, ids, total))
}

/// Messages before a new one in the order that /queryChanges will place
/// (larger: cannotCalculateChanges, the client queries again).
const RANK_MAX: usize = 10_000;
/// Changes one /queryChanges reads from a mailbox's log at most.
const QUERY_CHANGES_MAX: usize = 10_000;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryChangesArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    filter: Option<Filter>,
    #[serde(default)]
    sort: Option<Vec<Comparator>>,
    since_query_state: String,
    #[serde(default)]
    max_changes: Option<usize>,
    /// Allowed to be ignored (RFC 8620 §5.6): every change is reported.
    #[serde(default)]
    #[expect(dead_code, reason = "an optimisation the RFC lets the server skip")]
    up_to_id: Option<String>,
    #[serde(default)]
    calculate_total: Option<bool>,
    #[serde(default)]
    collapse_threads: Option<bool>,
}

#[derive(Serialize)]
struct Added {
    id: String,
    index: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryChangesResponse {
    account_id: String,
    old_query_state: String,
    new_query_state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<usize>,
    removed: Vec<String>,
    added: Vec<Added>,
}

/// Email/queryChanges for the indexed query shape (one `inMailbox`, sorted
/// by receivedAt): membership and order change only when a message enters
/// or leaves the mailbox, so the mailbox's change log since the old state
/// tells everything — `Added` entries still present are added at their
/// rank, `Expunged` ones removed; flag changes move nothing. Any other
/// query shape answers cannotCalculateChanges.
pub async fn query_changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: QueryChangesArgs = parse(args)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let sort = args.sort.unwrap_or_default();
    let q = indexed(
        args.filter.as_ref(),
        &sort,
        false,
        args.collapse_threads.unwrap_or(false),
        &mailboxes,
    )
    .ok_or(MethodError::CannotCalculateChanges)?;
    let old = StateVector::decode(&args.since_query_state).ok_or(MethodError::CannotCalculateChanges)?;
    let since = old.get(q.mailbox).ok_or(MethodError::CannotCalculateChanges)?.modseq;
    let max = args.max_changes.unwrap_or(QUERY_CHANGES_MAX).min(QUERY_CHANGES_MAX);
    let mailbox = q.mailbox;
    let (floor, log, counts) = ctx
        .db
        .read("jmap_query_changes", move |txn| async move {
            Ok::<_, StorageError>((
                messages::change_floor(&txn, account, mailbox).await?,
                messages::changes_since(&txn, account, mailbox, since, QUERY_CHANGES_MAX + 1).await?,
                mailboxes::counts(&txn, account, mailbox).await?,
            ))
        })
        .await?;
    if floor > since || log.len() > QUERY_CHANGES_MAX {
        return Err(MethodError::CannotCalculateChanges);
    }
    let (entered, removed) = entered_and_removed(&log, mailbox);
    let ranks = ranks_of(&ctx, account, mailbox, entered, q.newest_first).await?;
    if removed.len() + ranks.len() > max {
        return Err(MethodError::TooManyChanges);
    }
    let mut added = Vec::with_capacity(ranks.len());
    for (first, rank) in ranks {
        let index = rank.ok_or(MethodError::CannotCalculateChanges)?;
        added.push(Added {
            id: ids::email_id(first),
            index,
        });
    }
    // RFC 8620 §5.6: added sorted by index, so a client can splice in order.
    added.sort_by_key(|a| a.index);
    metrics::counter!("meshmail_jmap_query_changes_total").increment(1);
    reply(
        "Email/queryChanges",
        &QueryChangesResponse {
            account_id: call.account_id(),
            old_query_state: args.since_query_state,
            new_query_state: email_state(&mailboxes),
            total: args
                .calculate_total
                .unwrap_or(false)
                .then_some(counts.messages.max(0) as usize),
            removed: removed.into_values().map(ids::email_id).collect(),
            added,
        },
    )
}

/// From the change log: the UIDs that entered the mailbox and are still
/// there, and the removed ones by UID, each with the first place its id
/// names. The messages added since are new UIDs, so none is also
/// "removed" unless it came and went; those are removed only.
fn entered_and_removed(log: &[messages::Change], mailbox: MailboxId) -> (Vec<Uid>, BTreeMap<Uid, FirstPlace>) {
    let mut removed = BTreeMap::new();
    let mut entered = BTreeSet::new();
    for ch in log {
        match ch.kind {
            ChangeKind::Added => {
                entered.insert(ch.uid);
            }
            ChangeKind::Expunged => {
                entered.remove(&ch.uid);
                removed.insert(ch.uid, ch.first_place(mailbox));
            }
            ChangeKind::Flags => {}
        }
    }
    (entered.into_iter().collect(), removed)
}

/// Each entered message's id place and its rank in the date order (None
/// past `RANK_MAX`); one gone since the log was read is left out: a later
/// state removes it.
async fn ranks_of(
    ctx: &NodeCtx,
    account: AccountId,
    mailbox: MailboxId,
    entered: Vec<Uid>,
    newest_first: bool,
) -> Result<Vec<(FirstPlace, Option<usize>)>, StorageError> {
    ctx.db
        .read("jmap_query_ranks", move |txn| {
            let entered = entered.clone();
            async move {
                let mut out = Vec::with_capacity(entered.len());
                for uid in entered {
                    let Some(msg) = messages::get(&txn, account, mailbox, uid).await? else {
                        continue;
                    };
                    let rank = messages::date_rank(
                        &txn,
                        account,
                        mailbox,
                        msg.internal_date_ms,
                        uid,
                        newest_first,
                        RANK_MAX,
                    )
                    .await?;
                    out.push((msg.first_place(mailbox), rank));
                }
                Ok::<_, StorageError>(out)
            }
        })
        .await
}
