//! The delivery path as sessions see it: a [`DeliveryRequest`] goes to the
//! recipient's shard actor, which queues it for its commit batcher; the
//! caller gets an [`Outcome`] only once the batch transaction committed.
//!
//! [`deliver`] is also where poison handling lives: when the batcher dies
//! while handling *this* delivery (the [`PoisonBoard`] says so), the failure
//! is counted durably; at the third it is quarantined instead of retried.
//! Deliveries that merely shared a batch with a poison message are retried
//! without counting.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meshmail_storage::blob::PreparedBody;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::quarantine;
use meshmail_storage::model::summary::{SplitSummary, Summary};
use meshmail_storage::{StorageError, Txn};
use ractor::RpcReplyPort;
use ractor::rpc::CallResult;
use serde::{Deserialize, Serialize};

use crate::faults::Fault;
use crate::node::NodeCtx;
use crate::shard::ShardMsg;

/// How long a caller waits for its batch to commit before retrying (the
/// retry is idempotent: the acceptance id is checked in the transaction).
pub const DELIVERY_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a caller keeps waiting for its batcher past the deadline: a
/// commit attempt that started just before it must have ended (FDB and the
/// SQLite busy timeout both bound an attempt at 5 s) before the caller may
/// answer "not stored".
pub const COMMIT_ATTEMPT_GRACE: Duration = Duration::from_secs(10);
/// How long a sender waits for the store by default (IMAP APPEND, JMAP,
/// DSNs; SMTP and LMTP take theirs from `[smtp] delivery_timeout_s`).
pub const DELIVERY_DEADLINE: Duration = Duration::from_secs(30);
/// Retries after failures that were not this delivery's fault.
const COLLATERAL_RETRIES_MAX: u32 = 20;

/// One message for one recipient mailbox.
#[derive(Debug, Clone)]
pub struct DeliveryRequest {
    /// Unique per acceptance (UUIDv7), never derived from the content.
    pub acceptance_id: [u8; 16],
    pub account: AccountId,
    /// For logs and quarantine records.
    pub recipient: String,
    pub mailbox: String,
    pub body: PreparedBody,
    pub flags: Vec<String>,
    pub internal_date_ms: i64,
    pub summary: Summary,
    /// Test-only fault to trigger (see `faults`).
    pub fault: Option<Fault>,
    /// Set when an operator redelivers a quarantined item: the batch
    /// transaction also removes the quarantine record.
    pub from_quarantine: Option<[u8; 16]>,
    /// No commit attempt that includes this delivery starts after this
    /// instant: the caller has answered "try again later" (SMTP 451) by then,
    /// and a copy stored after that answer would be a duplicate when the
    /// client sends it again.
    pub deadline: Instant,
}

/// The deadline of a delivery whose sender waits `patience` from now.
pub fn deadline_in(patience: Duration) -> Instant {
    Instant::now() + patience
}

/// What a quarantine record keeps to redeliver later (no body bytes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRequest {
    pub account: AccountId,
    pub recipient: String,
    pub mailbox: String,
    pub flags: Vec<String>,
    pub internal_date_ms: i64,
    /// As the fields `envelope` and `body_structure`, as records have
    /// always held it.
    #[serde(flatten)]
    pub summary: SplitSummary,
}

impl DeliveryRequest {
    pub fn stored(&self) -> StoredRequest {
        StoredRequest {
            account: self.account,
            recipient: self.recipient.clone(),
            mailbox: self.mailbox.clone(),
            flags: self.flags.clone(),
            internal_date_ms: self.internal_date_ms,
            summary: SplitSummary(Box::new(self.summary.clone())),
        }
    }
}

/// The final state an accepted delivery reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Delivered { mailbox: MailboxId, uid: Uid, modseq: u64 },
    Quarantined { quarantine_id: [u8; 16] },
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeliveryError {
    /// Nothing was stored; try again later (SMTP 451, LMTP 451).
    #[error("temporary failure: {0}")]
    Temporary(String),
    /// The body was swept between prepare and commit: prepare again.
    #[error("message body must be written again")]
    BodySwept,
    /// The account's quota has no room for it (SMTP 552 5.2.2, IMAP
    /// `NO [OVERQUOTA]`, JMAP `overQuota`); nothing was stored.
    #[error("over quota")]
    OverQuota,
    /// The store's disk is full: nothing was stored; try again later (SMTP
    /// 452 4.3.1 "insufficient system storage", IMAP `NO [UNAVAILABLE]`).
    #[error("insufficient system storage: {0}")]
    StorageFull(String),
    /// Will not succeed by retrying (SMTP 554/550).
    #[error("permanent failure: {0}")]
    Permanent(String),
}

impl From<StorageError> for DeliveryError {
    fn from(e: StorageError) -> Self {
        if meshmail_storage::blob::is_body_swept(&e) {
            DeliveryError::BodySwept
        } else if matches!(e, StorageError::Unwritable { full: true, .. }) {
            DeliveryError::StorageFull(e.to_string())
        } else {
            DeliveryError::Temporary(e.to_string())
        }
    }
}

/// The reply a batcher sends to one waiter.
pub type DeliveryReply = RpcReplyPort<Result<Outcome, DeliveryError>>;

/// Which deliveries were being handled when a batcher panicked.
#[derive(Debug, Default)]
pub struct PoisonBoard {
    crashed: Mutex<HashSet<[u8; 16]>>,
}

impl PoisonBoard {
    pub fn mark_crashed(&self, id: [u8; 16]) {
        self.crashed.lock().expect("poison board").insert(id);
    }

    /// True (once) if this delivery was in hand when its handler crashed.
    pub fn take_crashed(&self, id: &[u8; 16]) -> bool {
        self.crashed.lock().expect("poison board").remove(id)
    }
}

/// Held while one delivery is handled: if the handler panics, unwinding
/// drops it and marks this delivery as the culprit.
pub struct InFlight<'a> {
    board: &'a PoisonBoard,
    id: [u8; 16],
}

impl<'a> InFlight<'a> {
    pub fn new(board: &'a PoisonBoard, id: [u8; 16]) -> Self {
        InFlight { board, id }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.board.mark_crashed(self.id);
        }
    }
}

/// How long a delivery keeps looking for its shard's owner (through a
/// failover: detection, then takeover) before the caller answers 4xx.
pub const ROUTE_DEADLINE: Duration = Duration::from_secs(45);

/// The longest sleep between two routing attempts of one delivery, ms
/// (the steps grow by 20 ms: 20, 40, 60, 80, 100, 100...). Was 500: a
/// failover of ~0.7 s then cost up to 200 ms more before the retry.
pub const ROUTE_RETRY_STEP_MAX_MS: u64 = 100;

/// Delivers one request through its shard's actor — here, or on the node
/// that owns the shard — and waits for the commit. While the shard has no
/// reachable owner (a failover in progress) it waits and retries, up to
/// [`ROUTE_DEADLINE`]; retries are safe because the acceptance id makes the
/// delivery idempotent.
pub async fn deliver(ctx: &Arc<NodeCtx>, mut req: DeliveryRequest) -> Result<Outcome, DeliveryError> {
    let started = Instant::now();
    let shard = ctx.shard_of(req.account);
    if req.fault == Some(Fault::DropAck) {
        // Test-only: acknowledge without storing, so the chaos checker's
        // "lost" count can be shown to fail.
        tracing::warn!("fault hook: acknowledging a delivery without storing it");
        return Ok(Outcome::Delivered {
            mailbox: 0,
            uid: 0,
            modseq: 0,
        });
    }
    let mut attempt = 0u32;
    let mut sent_remote = false;
    loop {
        attempt += 1;
        let why = match deliver_here(ctx, shard, req.clone()).await {
            Some(Err(DeliveryError::Temporary(e))) if !ctx.serves(shard) => e,
            Some(done) => return done,
            None => match ctx.router() {
                // Alone, with the lease not (yet) granted: wait for it.
                None => format!("shard {shard} is not served by this node (yet)"),
                Some(router) => {
                    if let Some(bytes) = req.body.inline_bytes.clone() {
                        // Bodies never cross the mesh: write it as an object.
                        req.body = ctx.blobs.prepare_object(&ctx.db, bytes).await?;
                    }
                    sent_remote = true;
                    match router
                        .deliver(shard, crate::remote::WireDelivery::from_request(&req))
                        .await
                    {
                        crate::remote::Route::Done(result) => {
                            metrics::histogram!("meshmail_delivery_seconds", "route" => "remote")
                                .record(started.elapsed().as_secs_f64());
                            return result;
                        }
                        crate::remote::Route::Retry(why) => why,
                    }
                }
            },
        };
        if started.elapsed() > ROUTE_DEADLINE || Instant::now() >= req.deadline {
            if sent_remote && let Some(done) = stored_meanwhile(ctx, &req).await {
                return Ok(done);
            }
            metrics::counter!("meshmail_delivery_route_timeouts_total").increment(1);
            return Err(DeliveryError::Temporary(format!("no owner for shard {shard}: {why}")));
        }
        metrics::counter!("meshmail_delivery_route_retries_total").increment(1);
        tracing::debug!(shard, attempt, %why, "delivery: owner not reachable; retrying");
        // Short steps: the owner comes back (a restart, a survivor's
        // takeover) within about a second, and every step of sleep past
        // that moment is part of the client's write gap.
        tokio::time::sleep(Duration::from_millis(
            (20 * u64::from(attempt)).min(ROUTE_RETRY_STEP_MAX_MS),
        ))
        .await;
    }
}

/// Whether a delivery sent to another node whose answer never came was
/// stored after all: its owner starts no commit attempt past the deadline,
/// so once one attempt's grace has passed the ledger tells for good. Saying
/// 451 for a stored copy would make the sender's retry a duplicate.
async fn stored_meanwhile(ctx: &Arc<NodeCtx>, req: &DeliveryRequest) -> Option<Outcome> {
    let settled = req.deadline + COMMIT_ATTEMPT_GRACE;
    tokio::time::sleep_until(settled.into()).await;
    let (id, account) = (req.acceptance_id, req.account);
    let found = ctx
        .db
        .read("delivery_ledger_check", move |txn: Txn| async move {
            let Some(entry) = meshmail_storage::model::ledger::get(&txn, &id).await? else {
                return Ok::<_, StorageError>(None);
            };
            let meshmail_storage::model::ledger::LedgerState::Delivered { mailbox, uid, .. } = entry.state else {
                return Ok(None);
            };
            let modseq = meshmail_storage::model::messages::get_meta(&txn, account, mailbox, uid)
                .await?
                .map_or(0, |m| m.modseq);
            Ok(Some(Outcome::Delivered { mailbox, uid, modseq }))
        })
        .await;
    match found {
        Ok(Some(done)) => {
            metrics::counter!("meshmail_delivery_stored_after_timeout_total").increment(1);
            Some(done)
        }
        _ => None,
    }
}

/// Delivers through this node's shard actor if this node serves `shard`
/// (`None` if it does not). Holds the shard's in-flight count, so a
/// graceful hand-off waits for it.
pub async fn deliver_here(
    ctx: &Arc<NodeCtx>,
    shard: u32,
    req: DeliveryRequest,
) -> Option<Result<Outcome, DeliveryError>> {
    let _in_flight = ctx.enter(shard)?;
    Some(deliver_local(ctx, shard, req).await)
}

/// Why a delivery whose deadline passed before its commit was not stored.
pub const DEADLINE_PASSED: &str = "the store did not commit it in time";

async fn deliver_local(ctx: &Arc<NodeCtx>, shard: u32, req: DeliveryRequest) -> Result<Outcome, DeliveryError> {
    let started = Instant::now();
    let mut collateral = 0u32;
    loop {
        let Some(actor) = ctx.shard_actor(shard) else {
            return Err(DeliveryError::Temporary(format!("shard {shard} has no actor")));
        };
        let r = req.clone();
        let wait = req
            .deadline
            .saturating_duration_since(Instant::now())
            .min(DELIVERY_CALL_TIMEOUT)
            + COMMIT_ATTEMPT_GRACE;
        let call = actor
            .call(move |port| ShardMsg::Deliver(Box::new(r), port), Some(wait))
            .await;
        match call {
            Ok(CallResult::Success(result)) => {
                metrics::histogram!("meshmail_delivery_seconds", "route" => "local")
                    .record(started.elapsed().as_secs_f64());
                return result;
            }
            Ok(CallResult::Timeout) => collateral += 1,
            Ok(CallResult::SenderError) | Err(_) => {
                if ctx.poison.take_crashed(&req.acceptance_id) {
                    let failures = count_failure(ctx, &req.acceptance_id).await?;
                    tracing::warn!(
                        acceptance = %meshmail_storage::model::id_to_string(&req.acceptance_id),
                        failures, "delivery crashed its handler"
                    );
                    if failures >= quarantine::ATTEMPTS_MAX {
                        let reason = format!("handler crashed {failures} times");
                        return crate::quarantine::quarantine(ctx, &req, &reason).await;
                    }
                } else {
                    collateral += 1;
                }
            }
        }
        if collateral > COLLATERAL_RETRIES_MAX {
            return Err(DeliveryError::Temporary("delivery path unavailable".into()));
        }
        if Instant::now() >= req.deadline {
            return Err(DeliveryError::Temporary(DEADLINE_PASSED.into()));
        }
        tokio::time::sleep(Duration::from_millis(20 * u64::from(collateral.min(10)) + 5)).await;
    }
}

/// Durably counts one crash of a delivery (survives a node crash).
async fn count_failure(ctx: &NodeCtx, id: &[u8; 16]) -> Result<i64, DeliveryError> {
    let id = *id;
    Ok(ctx
        .db
        .run("delivery_failure", move |txn: Txn| async move {
            quarantine::count_failure(&txn, &id).await
        })
        .await?)
}
