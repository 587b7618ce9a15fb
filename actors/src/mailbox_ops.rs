//! Writes to mailboxes other than deliveries (IMAP STORE, EXPUNGE, COPY,
//! MOVE, CREATE, DELETE, RENAME, SUBSCRIBE). Sessions send them to the
//! account's shard actor, which runs them here: every write of a shard's
//! mailboxes thus has one writer, is fenced by the shard's lease, and is
//! followed by a hint to the sessions watching the account.

use std::sync::Arc;

use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::fenced::FencedTxn;
use meshmail_storage::model::messages::{self, FlagOp};
use meshmail_storage::model::{mailboxes, nodes, quota};
use meshmail_storage::{StorageError, Txn, blob};

use crate::node::NodeCtx;
use crate::op_error::OpError;

/// Messages changed per transaction: bounds every transaction's size and
/// duration whatever the client asks for.
pub const UIDS_PER_TXN_MAX: usize = 500;
/// Messages whose flags one STORE transaction changes: a flag change
/// rewrites only the ~80-byte hot row and adds a change-log entry, so
/// 2,000 stay near 300 KB written (FDB allows 10 MB) and one commit (one
/// fsync) serves a 2,000-message `STORE 1:*`.
pub const STORE_UIDS_PER_TXN_MAX: usize = 2000;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum MailboxOp {
    Store {
        mailbox: MailboxId,
        uids: Vec<Uid>,
        op: FlagOp,
        flags: Vec<String>,
        unchanged_since: Option<u64>,
    },
    Expunge {
        mailbox: MailboxId,
        uids: Vec<Uid>,
    },
    Copy {
        from: MailboxId,
        uids: Vec<Uid>,
        to: MailboxId,
        moving: bool,
    },
    /// Creates a mailbox and its missing superiors, all subscribed (what
    /// JMAP's Mailbox/set builds on).
    Create {
        name: String,
        special_use: Option<String>,
    },
    /// IMAP CREATE: the same, subscribing none of them. Subscriptions are
    /// the client's, made by SUBSCRIBE (RFC 3501 §6.3.3, §6.3.6); LIST
    /// RETURN (SUBSCRIBED) and LSUB show what it chose. A new variant
    /// rather than a field of `Create`, which JMAP builds too: a node of an
    /// older build refuses it as malformed (the CREATE fails, nothing is
    /// half-done) during a rolling upgrade.
    CreateUnsubscribed {
        name: String,
        special_use: Option<String>,
    },
    Delete {
        name: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Subscribe {
        name: String,
        subscribed: bool,
    },
    /// JMAP Mailbox/set of `sortOrder` and `role` (RFC 8621 §2).
    SetAttributes {
        mailbox: MailboxId,
        attributes: mailboxes::Attributes,
    },
    /// IMAP4rev1 `\Recent`: takes every message not yet taken as recent by
    /// any session (RFC 3501 §2.3.2), for the session that asks.
    ClaimRecent {
        mailbox: MailboxId,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpResult {
    /// STORE: (uid, new flags, modseq) of every message still present.
    pub stored: Vec<(Uid, Vec<String>, u64)>,
    /// STORE UNCHANGEDSINCE: messages that changed after the given modseq.
    pub modified: Vec<Uid>,
    /// EXPUNGE/MOVE: the UIDs removed from the source mailbox.
    pub expunged: Vec<Uid>,
    /// COPY/MOVE: (source uid, new uid) and the target's UIDVALIDITY.
    pub copied: Vec<(Uid, Uid)>,
    pub uid_validity: u32,
    /// The mailbox's HIGHESTMODSEQ after the operation (0 if not applicable).
    pub modseq: u64,
    /// The mailbox the hint is about.
    pub mailbox: Option<MailboxId>,
    /// ClaimRecent: the UIDs in `(from, to]` are recent for the caller.
    #[serde(default)]
    pub recent: Option<(Uid, Uid)>,
    /// COPY: refused, nothing copied: the account's quota has no room
    /// (IMAP `NO [OVERQUOTA]`).
    #[serde(default)]
    pub over_quota: bool,
}

/// Runs one operation for `account` in bounded, lease-fenced transactions.
pub async fn run(ctx: &Arc<NodeCtx>, shard: u32, account: AccountId, op: MailboxOp) -> Result<OpResult, StorageError> {
    let epoch = ctx
        .lease_epoch(shard)
        .ok_or_else(|| StorageError::Unavailable(format!("shard {shard} is not owned by this node")))?;
    let fence = Fence {
        ctx: ctx.clone(),
        shard,
        epoch,
    };
    match op {
        MailboxOp::Store {
            mailbox,
            uids,
            op,
            flags,
            unchanged_since,
        } => {
            let change = FlagChange {
                op,
                flags,
                unchanged_since,
            };
            store(ctx, &fence, account, mailbox, &uids, change).await
        }
        MailboxOp::Expunge { mailbox, uids } => expunge(ctx, &fence, account, mailbox, &uids).await,
        MailboxOp::Copy { from, uids, to, moving } => copy(ctx, &fence, account, (from, to), &uids, moving).await,
        MailboxOp::ClaimRecent { mailbox } => claim_recent(ctx, fence, account, mailbox).await,
        MailboxOp::Create { name, special_use } => create(ctx, &fence, account, name, special_use, true).await,
        MailboxOp::CreateUnsubscribed { name, special_use } => {
            create(ctx, &fence, account, name, special_use, false).await
        }
        MailboxOp::Subscribe { name, subscribed } => {
            ctx.db
                .run("imap_subscribe", move |txn| {
                    let (name, f) = (name.clone(), fence.clone());
                    async move {
                        // Past this line only the fenced transaction is in reach.
                        let txn = f.check(&txn).await?;
                        mailboxes::set_subscribed(&txn, account, &name, subscribed).await
                    }
                })
                .await?;
            Ok(OpResult::default())
        }
        MailboxOp::SetAttributes { mailbox, attributes } => {
            ctx.db
                .run("jmap_mailbox_attributes", move |txn| {
                    let (attributes, f) = (attributes.clone(), fence.clone());
                    async move {
                        // Past this line only the fenced transaction is in reach.
                        let txn = f.check(&txn).await?;
                        mailboxes::set_attributes(&txn, account, mailbox, &attributes).await
                    }
                })
                .await?;
            Ok(OpResult::default())
        }
        MailboxOp::Rename { from, to } => rename(ctx, &fence, account, &from, &to).await,
        MailboxOp::Delete { name } => delete(ctx, &fence, account, &name).await,
    }
}

/// What a STORE changes: the flags, how, and the UNCHANGEDSINCE bound.
struct FlagChange {
    op: FlagOp,
    flags: Vec<String>,
    unchanged_since: Option<u64>,
}

/// STORE, [`STORE_UIDS_PER_TXN_MAX`] messages per transaction.
async fn store(
    ctx: &Arc<NodeCtx>,
    fence: &Fence,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
    change: FlagChange,
) -> Result<OpResult, StorageError> {
    let mut out = OpResult {
        mailbox: Some(mailbox),
        ..Default::default()
    };
    let FlagChange {
        op,
        flags,
        unchanged_since,
    } = change;
    for chunk in uids.chunks(STORE_UIDS_PER_TXN_MAX) {
        let (chunk, flags, f) = (chunk.to_vec(), flags.clone(), fence.clone());
        let (stored, modified) = ctx
            .db
            .run("imap_store", move |txn| {
                let (chunk, flags, f) = (chunk.clone(), flags.clone(), f.clone());
                async move {
                    // Past this line only the fenced transaction is in reach.
                    let txn = f.check(&txn).await?;
                    let (mut stored, mut modified) = (Vec::new(), Vec::new());
                    // One read of the chunk's rows and of the mailbox
                    // record, not one per message.
                    let done =
                        messages::store_flags_many(&txn, account, mailbox, &chunk, op, &flags, unchanged_since).await?;
                    for (uid, r) in done {
                        match r {
                            Ok((fl, ms)) => stored.push((uid, fl, ms)),
                            Err(_) => modified.push(uid),
                        }
                    }
                    Ok::<_, StorageError>((stored, modified))
                }
            })
            .await?;
        out.stored.extend(stored);
        out.modified.extend(modified);
    }
    out.modseq = highest_modseq(ctx, account, mailbox).await?;
    Ok(out)
}

/// EXPUNGE, [`UIDS_PER_TXN_MAX`] messages per transaction; each removed
/// message releases its body's reference.
async fn expunge(
    ctx: &Arc<NodeCtx>,
    fence: &Fence,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<OpResult, StorageError> {
    let mut out = OpResult {
        mailbox: Some(mailbox),
        ..Default::default()
    };
    for chunk in uids.chunks(UIDS_PER_TXN_MAX) {
        let (chunk, f) = (chunk.to_vec(), fence.clone());
        let gone = ctx
            .db
            .run("imap_expunge", move |txn| {
                let (chunk, f) = (chunk.clone(), f.clone());
                async move {
                    // Past this line only the fenced transaction is in reach.
                    let txn = f.check(&txn).await?;
                    let mut gone = Vec::new();
                    for uid in chunk {
                        if let Some(body) = messages::expunge(&txn, account, mailbox, uid).await? {
                            blob::release(&txn, &body)?;
                            gone.push(uid);
                        }
                    }
                    Ok::<_, StorageError>(gone)
                }
            })
            .await?;
        out.expunged.extend(gone);
    }
    out.modseq = highest_modseq(ctx, account, mailbox).await?;
    Ok(out)
}

/// COPY or MOVE from `from` to `to`, [`UIDS_PER_TXN_MAX`] messages per
/// transaction.
async fn copy(
    ctx: &Arc<NodeCtx>,
    fence: &Fence,
    account: AccountId,
    (from, to): (MailboxId, MailboxId),
    uids: &[Uid],
    moving: bool,
) -> Result<OpResult, StorageError> {
    let mut out = OpResult {
        mailbox: Some(to),
        ..Default::default()
    };
    // A MOVE leaves the usage as it is; a COPY must fit whole (checked
    // before its first chunk: the shard actor is the account's only
    // writer of mailbox operations).
    if !moving && !copy_fits(ctx, account, from, uids).await? {
        metrics::counter!("meshmail_imap_copy_over_quota_total").increment(1);
        out.over_quota = true;
        return Ok(out);
    }
    for chunk in uids.chunks(UIDS_PER_TXN_MAX) {
        let (chunk, f) = (chunk.to_vec(), fence.clone());
        let (pairs, validity) = ctx
            .db
            .run("imap_copy", move |txn| {
                let (chunk, f) = (chunk.clone(), f.clone());
                async move {
                    // Past this line only the fenced transaction is in reach.
                    let txn = f.check(&txn).await?;
                    let target = mailboxes::get(&txn, account, to)
                        .await?
                        .ok_or_else(|| StorageError::NotFound("target mailbox".into()))?;
                    let mut pairs = Vec::new();
                    for uid in chunk {
                        if let Some((new_uid, body)) = messages::copy_to(&txn, account, from, uid, to, moving).await? {
                            if !moving {
                                // A MOVE hands its reference over; a COPY shares the body.
                                blob::add_reference(&txn, &body)?;
                            }
                            pairs.push((uid, new_uid));
                        }
                    }
                    Ok::<_, StorageError>((pairs, target.uid_validity))
                }
            })
            .await?;
        if moving {
            out.expunged.extend(pairs.iter().map(|(u, _)| *u));
        }
        out.copied.extend(pairs);
        out.uid_validity = validity;
    }
    out.modseq = highest_modseq(ctx, account, to).await?;
    Ok(out)
}

/// IMAP4rev1 `\Recent`: the UIDs no session has taken as recent yet.
async fn claim_recent(
    ctx: &Arc<NodeCtx>,
    fence: Fence,
    account: AccountId,
    mailbox: MailboxId,
) -> Result<OpResult, StorageError> {
    let range = ctx
        .db
        .run("imap_claim_recent", move |txn| {
            let f = fence.clone();
            async move {
                // Past this line only the fenced transaction is in reach.
                let txn = f.check(&txn).await?;
                let before = mailboxes::get(&txn, account, mailbox)
                    .await?
                    .ok_or_else(|| StorageError::NotFound(format!("mailbox {mailbox}")))?;
                let top = before.uid_next.saturating_sub(1);
                if top > before.recent_uid {
                    let after = mailboxes::Mailbox {
                        recent_uid: top,
                        ..before.clone()
                    };
                    mailboxes::put(&txn, account, &before, &after)?;
                }
                Ok::<_, StorageError>((before.recent_uid, top.max(before.recent_uid)))
            }
        })
        .await?;
    Ok(OpResult {
        recent: Some(range),
        ..Default::default()
    })
}

/// Creates `name` and, when missing, its superiors (RFC 9051 §6.3.4), in
/// one transaction; `subscribed`: whether the new mailboxes are.
async fn create(
    ctx: &Arc<NodeCtx>,
    fence: &Fence,
    account: AccountId,
    name: String,
    special_use: Option<String>,
    subscribed: bool,
) -> Result<OpResult, StorageError> {
    let fence = fence.clone();
    ctx.db
        .run("imap_create", move |txn| {
            let (name, special_use, f) = (name.clone(), special_use.clone(), fence.clone());
            async move {
                // Past this line only the fenced transaction is in reach.
                let txn = f.check(&txn).await?;
                let mut superior = String::new();
                let pieces: Vec<&str> = name.split(mailboxes::DELIMITER).collect();
                for piece in &pieces[..pieces.len().saturating_sub(1)] {
                    if !superior.is_empty() {
                        superior.push(mailboxes::DELIMITER);
                    }
                    superior.push_str(piece);
                    if !piece.is_empty() && mailboxes::find(&txn, account, &superior).await?.is_none() {
                        create_one(&txn, account, &superior, None, subscribed).await?;
                    }
                }
                create_one(&txn, account, &name, special_use, subscribed).await
            }
        })
        .await?;
    Ok(OpResult::default())
}

/// One new mailbox, `subscribed` or not (unless a subscription of a
/// deleted mailbox of that name is still there).
async fn create_one(
    txn: &FencedTxn<'_>,
    account: AccountId,
    name: &str,
    special_use: Option<String>,
    subscribed: bool,
) -> Result<(), StorageError> {
    if subscribed {
        mailboxes::create(txn, account, name, special_use).await?;
    } else {
        mailboxes::create_unsubscribed(txn, account, name, special_use).await?;
    }
    Ok(())
}

/// The lease check every write transaction of a shard starts with: the
/// shard's writes take the [`FencedTxn`] it returns.
#[derive(Clone)]
struct Fence {
    ctx: Arc<NodeCtx>,
    shard: u32,
    epoch: u64,
}

impl Fence {
    async fn check<'t>(&self, txn: &'t Txn) -> Result<FencedTxn<'t>, StorageError> {
        let id = &self.ctx.identity;
        nodes::check_lease(txn, self.shard, &id.name, id.generation, self.epoch).await
    }
}

async fn highest_modseq(ctx: &NodeCtx, account: AccountId, mailbox: MailboxId) -> Result<u64, StorageError> {
    ctx.db
        .read("imap_modseq", move |txn| async move {
            Ok::<_, StorageError>(
                mailboxes::get(&txn, account, mailbox)
                    .await?
                    .map_or(0, |m| m.highest_modseq),
            )
        })
        .await
}

async fn find(ctx: &NodeCtx, account: AccountId, name: &str) -> Result<mailboxes::Mailbox, StorageError> {
    let name = name.to_string();
    ctx.db
        .read("imap_find", move |txn| {
            let name = name.clone();
            async move {
                mailboxes::find(&txn, account, &name)
                    .await?
                    .ok_or_else(|| StorageError::NotFound(format!("mailbox {name}")))
            }
        })
        .await
}

/// RENAME. Renaming INBOX moves its messages to the new mailbox and leaves
/// INBOX empty (RFC 9051 §6.3.6), in bounded transactions.
async fn rename(
    ctx: &Arc<NodeCtx>,
    fence: &Fence,
    account: AccountId,
    from: &str,
    to: &str,
) -> Result<OpResult, StorageError> {
    if mailboxes::canonical_name(from) != "INBOX" {
        let (from, to, f) = (from.to_string(), to.to_string(), fence.clone());
        ctx.db
            .run("imap_rename", move |txn| {
                let (from, to, f) = (from.clone(), to.clone(), f.clone());
                async move {
                    // Past this line only the fenced transaction is in reach.
                    let txn = f.check(&txn).await?;
                    mailboxes::rename(&txn, account, &from, &to).await
                }
            })
            .await?;
        return Ok(OpResult::default());
    }
    let inbox = find(ctx, account, "INBOX").await?;
    let to = to.to_string();
    let (t, f) = (to.clone(), fence.clone());
    let target = ctx
        .db
        .run("imap_rename_inbox", move |txn| {
            let (t, f) = (t.clone(), f.clone());
            async move {
                // Past this line only the fenced transaction is in reach.
                let txn = f.check(&txn).await?;
                mailboxes::create(&txn, account, &t, None).await
            }
        })
        .await?;
    let uids = messages::all_uids(&ctx.db, account, inbox.id).await?;
    let op = MailboxOp::Copy {
        from: inbox.id,
        uids,
        to: target.id,
        moving: true,
    };
    Box::pin(run(ctx, fence.shard, account, op)).await
}

/// DELETE: expunges the messages in bounded transactions, then removes the
/// empty mailbox. INBOX cannot be deleted.
async fn delete(ctx: &Arc<NodeCtx>, fence: &Fence, account: AccountId, name: &str) -> Result<OpResult, StorageError> {
    if mailboxes::canonical_name(name) == "INBOX" {
        return Err(StorageError::Model("INBOX cannot be deleted".into()));
    }
    let mb = find(ctx, account, name).await?;
    let uids = messages::all_uids(&ctx.db, account, mb.id).await?;
    Box::pin(run(
        ctx,
        fence.shard,
        account,
        MailboxOp::Expunge { mailbox: mb.id, uids },
    ))
    .await?;
    let f = fence.clone();
    ctx.db
        .run("imap_delete", move |txn| {
            let (mb, f) = (mb.clone(), f.clone());
            async move {
                // Past this line only the fenced transaction is in reach.
                let txn = f.check(&txn).await?;
                mailboxes::remove_empty(&txn, account, &mb).await
            }
        })
        .await?;
    Ok(OpResult::default())
}

/// How long a session waits for its shard actor to apply an operation.
pub const OP_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long an operation keeps looking for its shard's owner.
pub const OP_ROUTE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether copying `uids` of `from` stays within the account's quota.
async fn copy_fits(
    ctx: &Arc<NodeCtx>,
    account: AccountId,
    from: MailboxId,
    uids: &[Uid],
) -> Result<bool, StorageError> {
    let limits = ctx
        .db
        .read("copy_quota", move |txn| async move { quota::get(&txn, account).await })
        .await?;
    if limits.is_unlimited() {
        return Ok(true);
    }
    let (mut count, mut bytes) = (0u64, 0u64);
    for chunk in uids.chunks(UIDS_PER_TXN_MAX) {
        let chunk = chunk.to_vec();
        let (n, b) = ctx
            .db
            .read("copy_sizes", move |txn| {
                let chunk = chunk.clone();
                async move {
                    let rows = messages::get_meta_many(&txn, account, from, &chunk).await?;
                    Ok::<_, StorageError>((rows.len() as u64, rows.iter().map(|m| m.body.size).sum::<u64>()))
                }
            })
            .await?;
        count += n;
        bytes += b;
    }
    let usage = ctx
        .db
        .read(
            "copy_usage",
            move |txn| async move { quota::usage(&txn, account).await },
        )
        .await?;
    Ok(quota::exceeds(&limits, &usage, count, bytes).is_none())
}

/// Sends an operation to the account's shard actor — here or on the node
/// that owns the shard — and waits for it. An operation is retried on
/// another owner only when it was not applied (the owner said "not mine",
/// or could not be reached before sending).
pub async fn request(ctx: &Arc<NodeCtx>, account: AccountId, op: MailboxOp) -> Result<OpResult, OpError> {
    let shard = ctx.shard_of(account);
    let started = std::time::Instant::now();
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        if let Some(done) = request_here(ctx, shard, account, op.clone()).await {
            return done;
        }
        let why = match ctx.router() {
            // Alone, with the lease not (yet) granted: wait for it.
            None => format!("shard {shard} is not served by this node (yet)"),
            Some(router) => match router.op(shard, account, op.clone()).await {
                crate::remote::Route::Done(result) => return result,
                crate::remote::Route::Retry(why) => why,
            },
        };
        if started.elapsed() > OP_ROUTE_DEADLINE {
            return Err(OpError::Unavailable(format!(
                "the mailbox is moving between nodes: try again ({why})"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis((25 * attempt).min(500))).await;
    }
}

/// Runs the operation through this node's shard actor if this node serves
/// `shard`; `None` if it does not.
pub async fn request_here(
    ctx: &Arc<NodeCtx>,
    shard: u32,
    account: AccountId,
    op: MailboxOp,
) -> Option<Result<OpResult, OpError>> {
    use ractor::rpc::CallResult;
    let _in_flight = ctx.enter(shard)?;
    let Some(actor) = ctx.shard_actor(shard) else {
        return Some(Err(OpError::Unavailable(format!("shard {shard} has no actor"))));
    };
    let call = actor
        .call(
            move |reply| crate::shard::ShardMsg::Op {
                account,
                op: Box::new(op),
                reply,
            },
            Some(OP_CALL_TIMEOUT),
        )
        .await;
    Some(match call {
        Ok(CallResult::Success(r)) => r,
        Ok(CallResult::Timeout) => Err(OpError::Unavailable("the mailbox is busy: try again".into())),
        _ => Err(OpError::Unavailable("the mailbox writer restarted: try again".into())),
    })
}
