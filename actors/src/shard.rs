//! The mailbox shard actor: the single writer of the accounts that hash to
//! its virtual shard. Every write to those mailboxes passes through it (today
//! deliveries; IMAP flag changes, expunges and moves join them), and it
//! keeps the list of sessions to notify — the push path of IMAP IDLE, fed by
//! the writer instead of by watching the store.

use std::sync::Arc;
use std::time::Instant;

use meshmail_storage::ids::{AccountId, MailboxId};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

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
                let kick = st.ctx.queues[idx].push(Pending {
                    req: *req,
                    shard: st.shard,
                    enqueued: Instant::now(),
                    reply,
                });
                // None: the batcher is being restarted, and its restart
                // kicks whatever it finds queued.
                if kick && let Some(b) = st.ctx.batcher(idx) {
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
    slot: Arc<HintSlot>,
}

impl Subscription {
    /// The next hint (several that came meanwhile, merged). Cancel-safe:
    /// a hint not taken stays pending.
    pub async fn recv(&self) -> ChangeHint {
        self.slot.recv().await
    }

    /// Forgets a pending hint (the caller is about to re-read anyway).
    pub fn clear(&self) {
        self.slot.take();
    }
}

/// One session's pending hint. Hints are wake-ups (the session re-reads
/// the store), so the ones that arrive before the session takes the
/// pending one merge into it instead of queueing: a session that does not
/// keep up costs nothing, and an idle one holds ~100 bytes here, where a
/// bounded channel's first block of slots held ~2.3 KB (issue 15: <= 8 KB
/// per idle IMAP session).
#[derive(Default)]
pub struct HintSlot {
    wake: tokio::sync::Notify,
    pending: std::sync::Mutex<Option<ChangeHint>>,
}

impl HintSlot {
    /// Records a hint and wakes the session. Merged into a pending one:
    /// the oldest commit time (push latency is measured from it), the
    /// highest MODSEQ, and a delivery's UID if either was a delivery
    /// (JMAP's EmailDelivery). Returns false when it was merged.
    pub fn offer(&self, hint: ChangeHint) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = match pending.as_mut() {
            None => {
                *pending = Some(hint);
                true
            }
            Some(p) => {
                p.committed_at = p.committed_at.min(hint.committed_at);
                p.modseq = p.modseq.max(hint.modseq);
                p.uid = p.uid.max(hint.uid);
                false
            }
        };
        drop(pending);
        self.wake.notify_one();
        fresh
    }

    /// Waits for a hint. A hint offered while nobody waits leaves a
    /// permit in `wake`, so it is found at the next call.
    async fn recv(&self) -> ChangeHint {
        loop {
            if let Some(hint) = self.take() {
                return hint;
            }
            self.wake.notified().await;
        }
    }

    fn take(&self) -> Option<ChangeHint> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Subscribes a session to its account's change hints.
///
/// The hub is node-wide: hints come from this node's shard actors, or, when
/// the account's shard lives elsewhere, from the owner over the mesh (the
/// node renews its watch there; see [`crate::remote`]).
pub fn subscribe(ctx: &Arc<NodeCtx>, account: AccountId) -> Subscription {
    let slot = Arc::new(HintSlot::default());
    let id = NEXT_SUBSCRIBER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ctx.hints.add(Subscriber {
        id,
        account,
        slot: slot.clone(),
    });
    Subscription {
        ctx: ctx.clone(),
        account,
        id,
        slot,
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.ctx.hints.remove(self.account, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(uid: u32, modseq: u64, committed_at: Instant) -> ChangeHint {
        ChangeHint {
            account: 1,
            mailbox: 2,
            uid,
            modseq,
            committed_at,
        }
    }

    #[test]
    fn hints_merge_into_the_pending_one() {
        let slot = HintSlot::default();
        let (t0, t1) = (Instant::now(), Instant::now() + std::time::Duration::from_millis(5));
        assert!(slot.offer(hint(7, 9, t0)), "the first hint is pending");
        assert!(!slot.offer(hint(0, 12, t1)), "the second merges");
        let merged = slot.take().expect("pending");
        // The oldest commit (latency), the newest MODSEQ, the delivery's UID.
        assert_eq!((merged.uid, merged.modseq, merged.committed_at), (7, 12, t0));
        assert!(slot.take().is_none(), "taken once");
    }

    #[tokio::test]
    async fn a_hint_is_found_whether_offered_before_or_during_the_wait() {
        let slot = Arc::new(HintSlot::default());
        slot.offer(hint(3, 4, Instant::now()));
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), slot.recv()).await;
        assert_eq!(got.expect("woken").uid, 3);
        // And one offered while a receiver waits wakes it.
        let waiter = {
            let slot = slot.clone();
            tokio::spawn(async move { slot.recv().await })
        };
        tokio::task::yield_now().await;
        slot.offer(hint(5, 6, Instant::now()));
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await;
        assert_eq!(got.expect("woken").expect("joined").uid, 5);
    }
}
