//! The commit batcher: folds every delivery waiting at that moment into one
//! KV transaction.
//!
//! Batch sizing follows the arrival rate with no linger timer: shard actors
//! push deliveries into the batcher's [`BatchQueue`] and send a `Kick`. The
//! batcher takes *everything* queued, commits it, and looks again. At low
//! load each batch holds one delivery (committed at once); under load,
//! deliveries pile up during a commit and the next batch is bigger, which is
//! exactly when amortizing the fsync pays.
//!
//! The queue lives outside the actor, so a batcher that panics (a poison
//! message) loses only the batch in hand; its supervisor restarts it on the
//! same queue and nothing waiting behind it is lost.
//!
//! At most one `Kick` is outstanding per queue ([`BatchQueue::push`] says
//! whether to send one). Under sustained load the batcher never leaves its
//! commit loop, so with a `Kick` per delivery its mailbox grew by one
//! message per delivery for as long as the load lasted: ~100 bytes of heap
//! per delivered message that stayed allocated (jemalloc heap profile of a
//! 200,000-message fill, all of the growth under `shard.rs`'s `cast`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use meshmail_storage::ids::{AccountId, MailboxId};
use meshmail_storage::model::fenced::FencedTxn;
use meshmail_storage::model::ledger::{self, LedgerState};
use meshmail_storage::model::messages::{self, NewMessage};
use meshmail_storage::model::{mailboxes, nodes, quarantine as qmodel, quota};
use meshmail_storage::{StorageError, Txn, blob};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::delivery::{DEADLINE_PASSED, DeliveryError, DeliveryReply, DeliveryRequest, InFlight, Outcome};
use crate::faults::Fault;
use crate::live::LiveGuard;
use crate::node::NodeCtx;
use crate::shard::{ChangeHint, ShardMsg};

/// Most deliveries in one transaction.
pub const BATCH_DELIVERIES_MAX: usize = 512;
/// Most inline body bytes in one transaction (FDB allows 10 MB written).
pub const BATCH_INLINE_BYTES_MAX: usize = 4 * 1024 * 1024;

/// One delivery waiting for its batch.
pub struct Pending {
    pub req: DeliveryRequest,
    pub shard: u32,
    pub enqueued: Instant,
    pub reply: DeliveryReply,
}

/// Deliveries waiting for a batcher; shared with the supervisor so that it
/// survives a batcher restart.
#[derive(Default)]
pub struct BatchQueue {
    items: Mutex<VecDeque<Pending>>,
    /// A `Kick` was sent that the batcher has not started on yet.
    kick_pending: AtomicBool,
}

impl BatchQueue {
    /// Queues a delivery; true when the caller must send the batcher a
    /// `Kick` (none is outstanding). The batcher clears the mark before each
    /// [`BatchQueue::take_batch`], so whatever is pushed after that take is
    /// either in the next one or followed by a fresh `Kick`.
    #[must_use = "send the batcher a Kick when this is true"]
    pub fn push(&self, p: Pending) -> bool {
        {
            let mut q = self.items.lock().expect("batch queue");
            q.push_back(p);
            metrics::gauge!("meshmail_batcher_queue_depth").set(q.len() as f64);
        }
        !self.kick_pending.swap(true, Ordering::SeqCst)
    }

    /// For a batcher that was just (re)started: forgets a `Kick` that went
    /// to its dead predecessor and says whether one is needed now.
    pub fn rearm(&self) -> bool {
        self.kick_pending.store(false, Ordering::SeqCst);
        !self.is_empty() && !self.kick_pending.swap(true, Ordering::SeqCst)
    }

    /// Takes everything queued, within the batch limits. Clears the `Kick`
    /// mark first (see [`BatchQueue::push`]): a delivery queued after this
    /// take sends the next `Kick`.
    fn take_batch(&self) -> Vec<Pending> {
        self.kick_pending.store(false, Ordering::SeqCst);
        let mut q = self.items.lock().expect("batch queue");
        let mut batch = Vec::new();
        let mut inline_bytes = 0usize;
        while let Some(front) = q.front() {
            let size = front.req.body.inline_bytes.as_ref().map_or(0, |b| b.len());
            if batch.len() >= BATCH_DELIVERIES_MAX
                || (!batch.is_empty() && inline_bytes + size > BATCH_INLINE_BYTES_MAX)
            {
                break;
            }
            inline_bytes += size;
            batch.push(q.pop_front().expect("front exists"));
        }
        metrics::gauge!("meshmail_batcher_queue_depth").set(q.len() as f64);
        batch
    }

    pub fn len(&self) -> usize {
        self.items.lock().expect("batch queue").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum BatcherMsg {
    /// Something was queued: commit until the queue is empty.
    Kick,
}

pub struct CommitBatcher;

pub struct BatcherArgs {
    pub ctx: Arc<NodeCtx>,
    pub queue: Arc<BatchQueue>,
}

pub struct BatcherState {
    ctx: Arc<NodeCtx>,
    queue: Arc<BatchQueue>,
    _live: LiveGuard,
}

impl Actor for CommitBatcher {
    type Msg = BatcherMsg;
    type State = BatcherState;
    type Arguments = BatcherArgs;

    async fn pre_start(
        &self,
        _me: ActorRef<BatcherMsg>,
        args: BatcherArgs,
    ) -> Result<BatcherState, ActorProcessingErr> {
        Ok(BatcherState {
            ctx: args.ctx,
            queue: args.queue,
            _live: LiveGuard::new("commit_batcher"),
        })
    }

    async fn handle(
        &self,
        _me: ActorRef<BatcherMsg>,
        msg: BatcherMsg,
        st: &mut BatcherState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BatcherMsg::Kick => loop {
                let batch = st.queue.take_batch();
                if batch.is_empty() {
                    return Ok(());
                }
                commit_batch(&st.ctx, batch).await;
            },
        }
    }
}

/// Commits one batch and answers every waiter. On a failure that is not the
/// store's (a bad item), retries the items one by one so one bad delivery
/// cannot fail the others.
async fn commit_batch(ctx: &Arc<NodeCtx>, batch: Vec<Pending>) {
    let started = Instant::now();
    for p in &batch {
        metrics::histogram!("meshmail_shard_queue_wait_seconds")
            .record(started.duration_since(p.enqueued).as_secs_f64());
    }
    metrics::histogram!("meshmail_batch_deliveries").record(batch.len() as f64);
    let reqs: Arc<Vec<(DeliveryRequest, u32)>> = Arc::new(batch.iter().map(|p| (p.req.clone(), p.shard)).collect());
    let result = run_batch(ctx, reqs.clone()).await;
    match result {
        Ok(outcomes) => {
            metrics::counter!("meshmail_ledger_entries_total")
                .increment(outcomes.iter().filter(|o| o.is_ok()).count() as u64);
            for (p, outcome) in batch.into_iter().zip(outcomes) {
                if let Ok(Outcome::Delivered { mailbox, uid, modseq }) = &outcome {
                    notify(ctx, p.shard, p.req.account, *mailbox, *uid, *modseq);
                }
                let _ = p.reply.send(outcome);
            }
        }
        // One bad item fails a batch with a model error; a store that cannot
        // serve would fail each item alone just the same.
        Err(e) if batch.len() > 1 && !e.is_unavailable() => {
            tracing::warn!(error = %e, size = batch.len(), "batch failed: retrying its deliveries one by one");
            for p in batch {
                Box::pin(commit_batch(ctx, vec![p])).await;
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, size = batch.len(), "batch failed: nothing stored");
            let err = DeliveryError::from(e);
            for p in batch {
                let _ = p.reply.send(Err(err.clone()));
            }
        }
    }
}

fn notify(ctx: &NodeCtx, shard: u32, account: AccountId, mailbox: MailboxId, uid: u32, modseq: u64) {
    if let Some(actor) = ctx.shard_actor(shard) {
        let _ = actor.cast(ShardMsg::Committed(ChangeHint {
            account,
            mailbox,
            uid,
            modseq,
            committed_at: Instant::now(),
        }));
    }
}

type Outcomes = Vec<Result<Outcome, DeliveryError>>;

/// The batch transaction: fences every shard in it, then for each delivery
/// checks the ledger (a retry after an unknown commit outcome must not
/// deliver twice), takes the body reference, and appends the message with
/// its ledger entry.
async fn run_batch(ctx: &Arc<NodeCtx>, reqs: Arc<Vec<(DeliveryRequest, u32)>>) -> Result<Outcomes, StorageError> {
    let ctx2 = ctx.clone();
    ctx.db
        .run("deliver_batch", move |txn| {
            let (ctx, reqs) = (ctx2.clone(), reqs.clone());
            async move {
                // One fence per shard of the batch, each read once.
                let mut fenced: HashMap<u32, FencedTxn<'_>> = HashMap::new();
                let mut inbox_cache: HashMap<(AccountId, String), Option<MailboxId>> = HashMap::new();
                let mut out = Vec::with_capacity(reqs.len());
                let now = Instant::now();
                for (req, shard) in reqs.iter() {
                    // A delivery whose sender was already told "try again
                    // later" is left out of this attempt (and out of the
                    // store). After an attempt of unknown outcome it goes
                    // through the ledger check instead: it may be stored.
                    if now >= req.deadline && !txn.maybe_committed() {
                        metrics::counter!("meshmail_delivery_deadline_passed_total").increment(1);
                        out.push(Err(DeliveryError::Temporary(DEADLINE_PASSED.into())));
                        continue;
                    }
                    if !fenced.contains_key(shard) {
                        let f = fence(&ctx, &txn, *shard).await?;
                        fenced.insert(*shard, f);
                    }
                    let _in_flight = InFlight::new(&ctx.poison, req.acceptance_id);
                    if req.fault == Some(Fault::PanicInBatcher) {
                        panic!("fault hook: poison message in the commit batcher");
                    }
                    let txn = &fenced[shard];
                    out.push(deliver_one(txn, req, &mut inbox_cache).await?);
                }
                Ok::<Outcomes, StorageError>(out)
            }
        })
        .await
}

/// The lease check of `shard` in `txn`: refused unless this incarnation
/// holds the shard's lease at the epoch it was granted.
async fn fence<'t>(ctx: &NodeCtx, txn: &'t Txn, shard: u32) -> Result<FencedTxn<'t>, StorageError> {
    let epoch = ctx.lease_epoch(shard).ok_or_else(|| StorageError::Fenced {
        shard,
        detail: "this node holds no lease for it".into(),
    })?;
    nodes::check_lease(txn, shard, &ctx.identity.name, ctx.identity.generation, epoch).await
}

async fn deliver_one(
    txn: &FencedTxn<'_>,
    req: &DeliveryRequest,
    mailbox_cache: &mut HashMap<(AccountId, String), Option<MailboxId>>,
) -> Result<Result<Outcome, DeliveryError>, StorageError> {
    if let Some(entry) = ledger::get(txn, &req.acceptance_id).await?
        && let LedgerState::Delivered { mailbox, uid, .. } = entry.state
    {
        // Applied by an earlier attempt whose outcome we did not learn.
        let modseq = messages::get_meta(txn, req.account, mailbox, uid)
            .await?
            .map_or(0, |m| m.modseq);
        return Ok(Ok(Outcome::Delivered { mailbox, uid, modseq }));
    }
    let key = (req.account, req.mailbox.clone());
    let mailbox = match mailbox_cache.get(&key) {
        Some(m) => *m,
        None => {
            let m = mailboxes::find(txn, req.account, &req.mailbox).await?.map(|m| m.id);
            mailbox_cache.insert(key, m);
            m
        }
    };
    let Some(mailbox) = mailbox else {
        return Ok(Err(DeliveryError::Permanent(format!(
            "no mailbox {} for {}",
            req.mailbox, req.recipient
        ))));
    };
    // Quota: the account's usage in this transaction (earlier deliveries
    // of the batch included), checked by its single writer.
    if quota::check(txn, req.account, 1, req.body.body.size).await?.is_some() {
        metrics::counter!("meshmail_delivery_over_quota_total").increment(1);
        return Ok(Err(DeliveryError::OverQuota));
    }
    match blob::reference(txn, &req.body).await {
        Ok(()) => {}
        Err(e) if blob::is_body_swept(&e) => return Ok(Err(DeliveryError::BodySwept)),
        Err(e) => return Err(e),
    }
    let new = NewMessage {
        body: req.body.body.clone(),
        flags: req.flags.clone(),
        internal_date_ms: req.internal_date_ms,
        summary: req.summary.clone(),
        acceptance_id: req.acceptance_id,
    };
    if req.fault == Some(Fault::ReuseUid) {
        // Test-only: store this message under the mailbox's last used UID
        // (overwriting that message), so the chaos checker's UID-reuse
        // detection can be shown to fail.
        mailboxes::rewind_uid_next_for_fault_injection(txn, req.account, mailbox).await?;
    }
    let (uid, modseq) = messages::append(txn, req.account, mailbox, &new).await?;
    if let Some(qid) = req.from_quarantine {
        // Redelivery: the quarantine record and its body reference go in
        // the same transaction that delivers.
        if let Some(rec) = qmodel::get(txn, &qid).await? {
            qmodel::remove(txn, &qid)?;
            qmodel::clear_failures(txn, &req.acceptance_id)?;
            blob::release(
                txn,
                &meshmail_storage::model::messages::BodyRef {
                    hash: rec.body_hash,
                    size: rec.body_size,
                    inline: req.body.body.inline,
                },
            )?;
        }
    }
    Ok(Ok(Outcome::Delivered { mailbox, uid, modseq }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshmail_storage::blob::PreparedBody;
    use meshmail_storage::model::messages::BodyRef;

    fn pending() -> Pending {
        let (tx, _rx) = tokio::sync::oneshot::channel();
        Pending {
            req: DeliveryRequest {
                acceptance_id: [7; 16],
                account: 1,
                recipient: "a@example.test".into(),
                mailbox: "INBOX".into(),
                body: PreparedBody {
                    body: BodyRef {
                        hash: "00".into(),
                        size: 1,
                        inline: true,
                    },
                    generation: 0,
                    inline_bytes: None,
                },
                flags: Vec::new(),
                internal_date_ms: 0,
                summary: Default::default(),
                fault: None,
                from_quarantine: None,
                deadline: Instant::now(),
            },
            shard: 0,
            enqueued: Instant::now(),
            reply: tx.into(),
        }
    }

    /// The batcher's mailbox holds at most one Kick however long the load
    /// lasts: only the first push after each take asks for one.
    #[test]
    fn one_kick_per_take_however_many_deliveries_are_queued() {
        let q = BatchQueue::default();
        let kicks = (0..1000).filter(|_| q.push(pending())).count();
        assert_eq!(kicks, 1, "1,000 pushes with no take in between");
        assert_eq!(q.take_batch().len(), BATCH_DELIVERIES_MAX);
        assert!(q.push(pending()), "a push after a take is not covered by it: it kicks");
        assert!(!q.push(pending()), "...once");
    }

    /// A Kick sent to a batcher that then died is not waited for: the
    /// restarted one is kicked when anything is queued.
    #[test]
    fn a_restarted_batcher_is_kicked_for_what_waits() {
        let q = BatchQueue::default();
        assert!(!q.rearm(), "nothing queued: no kick");
        assert!(q.push(pending()), "the kick that went to the dead batcher");
        assert!(!q.push(pending()));
        assert!(q.rearm(), "two deliveries wait for the new batcher");
        assert!(!q.push(pending()), "and its kick is outstanding");
    }
}
