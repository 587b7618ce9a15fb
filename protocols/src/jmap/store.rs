//! Reads JMAP methods share: each one a short snapshot transaction (or a
//! bounded series of them), never a write. Also where the store's and the
//! actors' errors become JMAP errors (`MethodError::from`,
//! `SetError::from_op`), so that `jmap::wire` knows neither.

use bytes::Bytes;
use meshmail_actors::node::NodeCtx;
use meshmail_storage::StorageError;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::mailboxes::{self, Counts, Mailbox};
use meshmail_storage::model::messages::{self, Message};

use super::wire::{MethodError, SetError};

/// Messages read per transaction when walking a mailbox.
const PAGE_MESSAGES: usize = 2000;
/// Messages one walk reads at most (a query over a larger mailbox sees the
/// first this many; bounded memory per request).
pub const WALK_MESSAGES_MAX: usize = 200_000;

pub async fn mailboxes(ctx: &NodeCtx, account: AccountId) -> Result<Vec<Mailbox>, MethodError> {
    Ok(ctx
        .db
        .read("jmap_mailboxes", move |txn| async move {
            mailboxes::list(&txn, account).await
        })
        .await?)
}

/// Every mailbox with its counters.
pub async fn mailboxes_with_counts(ctx: &NodeCtx, account: AccountId) -> Result<Vec<(Mailbox, Counts)>, MethodError> {
    Ok(ctx
        .db
        .read("jmap_mailbox_counts", move |txn| async move {
            let list = mailboxes::list(&txn, account).await?;
            let mut out = Vec::with_capacity(list.len());
            for m in list {
                let c = mailboxes::counts(&txn, account, m.id).await?;
                out.push((m, c));
            }
            Ok::<_, StorageError>(out)
        })
        .await?)
}

/// The messages stored at these places now, in one transaction (missing
/// ones are None). Places, not ids: see [`emails`] for those.
pub async fn messages(
    ctx: &NodeCtx,
    account: AccountId,
    wanted: Vec<(MailboxId, Uid)>,
) -> Result<Vec<Option<Message>>, MethodError> {
    Ok(ctx
        .db
        .read("jmap_messages", move |txn| {
            let wanted = wanted.clone();
            async move {
                let mut out = Vec::with_capacity(wanted.len());
                for (m, u) in wanted {
                    out.push(messages::get(&txn, account, m, u).await?);
                }
                Ok::<_, StorageError>(out)
            }
        })
        .await?)
}

/// The emails named by their first places (what an email id names, see
/// `ids`), each with the mailbox it is in now, in one transaction
/// (missing ones are None).
pub async fn emails(
    ctx: &NodeCtx,
    account: AccountId,
    firsts: Vec<(MailboxId, Uid)>,
) -> Result<Vec<Option<(MailboxId, Message)>>, MethodError> {
    Ok(ctx
        .db
        .read("jmap_emails", move |txn| {
            let firsts = firsts.clone();
            async move {
                let mut out = Vec::with_capacity(firsts.len());
                for first in firsts {
                    out.push(messages::find(&txn, account, first).await?);
                }
                Ok::<_, StorageError>(out)
            }
        })
        .await?)
}

/// The email first stored at `first` and the mailbox it is in now.
pub async fn email(
    ctx: &NodeCtx,
    account: AccountId,
    first: (MailboxId, Uid),
) -> Result<Option<(MailboxId, Message)>, MethodError> {
    Ok(emails(ctx, account, vec![first]).await?.pop().flatten())
}

/// The message stored at (mailbox, UID) now, whatever its id.
pub async fn message(
    ctx: &NodeCtx,
    account: AccountId,
    mailbox: MailboxId,
    uid: Uid,
) -> Result<Option<Message>, MethodError> {
    Ok(messages(ctx, account, vec![(mailbox, uid)]).await?.pop().flatten())
}

/// Every message of a mailbox, in UID order, in bounded pages.
pub async fn mailbox_messages(
    ctx: &NodeCtx,
    account: AccountId,
    mailbox: MailboxId,
) -> Result<Vec<Message>, MethodError> {
    let mut out = Vec::new();
    let mut from: Uid = 1;
    loop {
        let page = ctx
            .db
            .read("jmap_walk", move |txn| async move {
                messages::list(&txn, account, mailbox, from, PAGE_MESSAGES).await
            })
            .await?;
        let Some(last) = page.last() else { return Ok(out) };
        from = last.uid.saturating_add(1);
        let full = page.len() < PAGE_MESSAGES;
        out.extend(page);
        if full || out.len() >= WALK_MESSAGES_MAX || from == Uid::MAX {
            return Ok(out);
        }
    }
}

/// A message's raw bytes, checked against its hash.
pub async fn body(ctx: &NodeCtx, msg: &Message) -> Result<Bytes, MethodError> {
    Ok(ctx.blobs.get(&ctx.db, &msg.body).await?)
}

// The store's and the actors' errors as JMAP errors: here, beside the
// reads, so that the wire layer's types know nothing of either.

impl From<StorageError> for MethodError {
    fn from(e: StorageError) -> Self {
        MethodError::ServerUnavailable(e.to_string())
    }
}

impl SetError {
    /// The SetError for a mailbox operation the shard actor did not apply.
    pub fn from_op(e: &meshmail_actors::op_error::OpError) -> SetError {
        use meshmail_actors::op_error::OpError as E;
        let kind = match e {
            E::AlreadyExists(_) => "alreadyExists",
            E::NotFound(_) => "notFound",
            E::NotAllowed(_) => "forbidden",
            E::Unavailable(_) => "serverUnavailable",
            E::Failed(_) => "serverFail",
        };
        SetError::new(kind, e.to_string())
    }
}
