//! Email/query answered from the receivedAt index: the webmail's (and most
//! clients') list request — one mailbox, sorted by receivedAt — reads
//! `position + limit` index keys instead of every row of the mailbox. Any
//! other query takes the general path in [`super::email_query`], which
//! gives the same order (ties broken by UID in the sort's direction).

use meshmail_storage::StorageError;
use meshmail_storage::keyspace::{MailboxId, Uid};
use meshmail_storage::model::mailboxes::{self, Mailbox};
use meshmail_storage::model::messages;

use super::email_query::{Filter, FilterCondition};
use super::ids;
use super::mailbox::{Comparator, clamp_position};
use super::wire::MethodError;
use meshmail_actors::node::NodeCtx;
use meshmail_storage::keyspace::AccountId;

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

/// One page of an indexed query: (position, UIDs, total).
pub async fn page(
    ctx: &NodeCtx,
    account: AccountId,
    q: IndexedQuery,
    position: i64,
    limit: usize,
) -> Result<(usize, Vec<Uid>, usize), MethodError> {
    let (position, uids, total) = ctx
        .db
        .read("jmap_query_index", move |txn| async move {
            let total = mailboxes::counts(&txn, account, q.mailbox).await?.messages.max(0) as usize;
            let position = clamp_position(position, total);
            let uids = messages::uids_by_date(&txn, account, q.mailbox, q.newest_first, position, limit).await?;
            Ok::<_, StorageError>((position, uids, total))
        })
        .await?;
    metrics::counter!("meshmail_jmap_query_indexed_total").increment(1);
    Ok((position, uids, total))
}
