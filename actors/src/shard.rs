//! The mailbox shard actor: the single writer of the accounts that hash to
//! its virtual shard. Every write to those mailboxes passes through it (today
//! deliveries; IMAP flag changes, expunges and moves join them), and it
//! keeps the list of sessions to notify — the push path of IMAP IDLE, fed by
//! the writer instead of by watching the store.

use std::sync::Arc;
use std::time::Instant;

use meshmail_storage::ids::{AccountId, MailboxId};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;

use crate::batcher::{BatcherMsg, Pending};
use crate::delivery::{DeliveryReply, DeliveryRequest};
use crate::live::LiveGuard;
use crate::mailbox_ops::{self, MailboxOp, OpResult};
use crate::node::NodeCtx;
use crate::remote::Subscriber;

/// A hint that a mailbox changed; sessions re-read the store from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeHint {
    pub account: AccountId,
    pub mailbox: MailboxId,
    pub uid: u32,
    pub modseq: u64,
    /// When the change committed: sessions measure commit → push latency.
    pub committed_at: Instant,
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum ShardMsg {
    Deliver(Box<DeliveryRequest>, DeliveryReply),
    /// Any other write to one of this shard's accounts (IMAP).
    Op {
        account: AccountId,
        op: Box<MailboxOp>,
        reply: RpcReplyPort<Result<OpResult, crate::op_error::OpError>>,
    },
    /// Sent by the batcher after a commit that changed this shard.
    Committed(ChangeHint),
}

pub struct ShardActor;

pub struct ShardArgs {
    pub ctx: Arc<NodeCtx>,
    pub shard: u32,
}

pub struct ShardState {
    ctx: Arc<NodeCtx>,
    shard: u32,
    _live: LiveGuard,
}

impl Actor for ShardActor {
    type Msg = ShardMsg;
    type State = ShardState;
    type Arguments = ShardArgs;

    async fn pre_start(&self, _me: ActorRef<ShardMsg>, args: ShardArgs) -> Result<ShardState, ActorProcessingErr> {
        Ok(ShardState {
            ctx: args.ctx,
            shard: args.shard,
            _live: LiveGuard::new("shard"),
        })
    }

    async fn handle(
        &self,
        _me: ActorRef<ShardMsg>,
        msg: ShardMsg,
        st: &mut ShardState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ShardMsg::Deliver(req, reply) => {
                let idx = st.ctx.batcher_index(st.shard);
                st.ctx.queues[idx].push(Pending {
                    req: *req,
                    shard: st.shard,
                    enqueued: Instant::now(),
                    reply,
                });
                if let Some(b) = st.ctx.batcher(idx) {
                    let _ = b.cast(BatcherMsg::Kick);
                }
            }
            ShardMsg::Op { account, op, reply } => {
                let started = Instant::now();
                let result = mailbox_ops::run(&st.ctx, st.shard, account, *op).await;
                metrics::histogram!("meshmail_shard_op_seconds").record(started.elapsed().as_secs_f64());
                if let Ok(r) = &result
                    && let Some(mailbox) = r.mailbox
                {
                    notify(
                        st,
                        ChangeHint {
                            account,
                            mailbox,
                            uid: 0,
                            modseq: r.modseq,
                            committed_at: Instant::now(),
                        },
                    );
                }
                let _ = reply.send(result.map_err(crate::op_error::OpError::from));
            }
            ShardMsg::Committed(hint) => notify(st, hint),
        }
        Ok(())
    }
}

/// Sends a hint to the account's sessions, here and on watching nodes.
fn notify(st: &mut ShardState, hint: ChangeHint) {
    st.ctx.publish_hint(hint);
}

static NEXT_SUBSCRIBER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Hints for one account while it lives; unsubscribes when dropped.
pub struct Subscription {
    ctx: Arc<NodeCtx>,
    account: AccountId,
    id: u64,
    pub rx: mpsc::Receiver<ChangeHint>,
}

/// Hints a session can fall behind on before they are dropped (it re-reads
/// the store anyway; a hint only wakes it).
pub const HINTS_BUFFERED_MAX: usize = 64;

/// Subscribes a session to its account's change hints.
///
/// The hub is node-wide: hints come from this node's shard actors, or, when
/// the account's shard lives elsewhere, from the owner over the mesh (the
/// node renews its watch there; see [`crate::remote`]).
pub fn subscribe(ctx: &Arc<NodeCtx>, account: AccountId) -> Subscription {
    let (tx, rx) = mpsc::channel(HINTS_BUFFERED_MAX);
    let id = NEXT_SUBSCRIBER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ctx.hints.add(Subscriber { id, account, tx });
    Subscription {
        ctx: ctx.clone(),
        account,
        id,
        rx,
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.ctx.hints.remove(self.account, self.id);
    }
}
