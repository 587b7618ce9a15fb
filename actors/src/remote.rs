//! What crosses the mesh between shard actors and the sessions of other
//! nodes, and the seam to the mesh itself.
//!
//! This crate does not depend on the mesh: the node implements
//! [`ShardRouter`] over it and installs it in the [`NodeCtx`]. When a shard
//! is not served here, [`crate::delivery::deliver`] and
//! [`crate::mailbox_ops::request`] hand the request to the router, which
//! sends it to the owner's gateway; the owner runs it through its own shard
//! actor and batcher (the one writer) and answers.
//!
//! Push (IMAP IDLE) across nodes: a node with sessions watching an account
//! whose shard lives elsewhere tells the owner so ([`Request::Watch`],
//! renewed every few seconds and expiring on the owner if not renewed); the
//! owner's shard actor then casts a [`WireHint`] to that node after every
//! change, and the node fans it out to its sessions through the
//! [`HintHub`]. Hints are hints: a lost one costs a session a re-read.
//!
//! Bodies never cross: a delivery carries the body's reference, written to
//! the blob store as an object before the request leaves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use meshmail_storage::blob::PreparedBody;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::messages::BodyRef;
use meshmail_storage::model::summary::SplitSummary;
use serde::{Deserialize, Serialize};

use crate::delivery::{DeliveryError, DeliveryRequest, Outcome};
use crate::faults::Fault;
use crate::mailbox_ops::{MailboxOp, OpResult};
use crate::shard::ChangeHint;

/// How a remote watch lives on the owner without renewal.
pub const WATCH_TTL: Duration = Duration::from_secs(8);

/// What the router made of a request.
#[derive(Debug)]
pub enum Route<T> {
    /// The owner answered.
    Done(T),
    /// No owner reachable now (unknown, moving, link down, busy): nothing
    /// was done or it is safe to repeat (deliveries are idempotent by their
    /// acceptance id); try again shortly.
    Retry(String),
}

/// The node's way to reach other nodes' shards.
#[async_trait]
pub trait ShardRouter: Send + Sync + 'static {
    async fn deliver(&self, shard: u32, req: WireDelivery) -> Route<Result<Outcome, DeliveryError>>;
    async fn op(
        &self,
        shard: u32,
        account: AccountId,
        op: MailboxOp,
    ) -> Route<Result<OpResult, crate::op_error::OpError>>;
    /// Sends a hint to a watching node (dropped if it cannot be sent now).
    fn push_hint(&self, node: &str, generation: u64, hint: WireHint);
}

/// A delivery as it crosses the mesh: the body by reference only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireDelivery {
    pub acceptance_id: [u8; 16],
    pub account: AccountId,
    pub recipient: String,
    pub mailbox: String,
    pub body: BodyRef,
    pub body_generation: i64,
    pub flags: Vec<String>,
    pub internal_date_ms: i64,
    /// As the fields `envelope` and `body_structure`, as nodes have always
    /// sent it.
    #[serde(flatten)]
    pub summary: SplitSummary,
    pub fault: Option<Fault>,
    pub from_quarantine: Option<[u8; 16]>,
    /// What was left of the sender's patience when this was sent (an
    /// `Instant` means nothing on another host); 0 from an older node.
    #[serde(default)]
    pub deadline_in_ms: u64,
}

impl WireDelivery {
    /// `req`'s body must not be inline (see [`crate::delivery::deliver`]).
    pub fn from_request(req: &DeliveryRequest) -> WireDelivery {
        debug_assert!(req.body.inline_bytes.is_none());
        WireDelivery {
            acceptance_id: req.acceptance_id,
            account: req.account,
            recipient: req.recipient.clone(),
            mailbox: req.mailbox.clone(),
            body: req.body.body.clone(),
            body_generation: req.body.generation,
            flags: req.flags.clone(),
            internal_date_ms: req.internal_date_ms,
            summary: SplitSummary(Box::new(req.summary.clone())),
            fault: req.fault,
            from_quarantine: req.from_quarantine,
            deadline_in_ms: req
                .deadline
                .saturating_duration_since(std::time::Instant::now())
                .as_millis() as u64,
        }
    }

    pub fn into_request(self) -> DeliveryRequest {
        DeliveryRequest {
            acceptance_id: self.acceptance_id,
            account: self.account,
            recipient: self.recipient,
            mailbox: self.mailbox,
            body: PreparedBody {
                body: self.body,
                generation: self.body_generation,
                inline_bytes: None,
            },
            flags: self.flags,
            internal_date_ms: self.internal_date_ms,
            summary: *self.summary.0,
            fault: self.fault,
            from_quarantine: self.from_quarantine,
            deadline: crate::delivery::deadline_in(match self.deadline_in_ms {
                0 => crate::delivery::DELIVERY_DEADLINE,
                ms => std::time::Duration::from_millis(ms),
            }),
        }
    }
}

/// A change hint as it crosses the mesh.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct WireHint {
    pub account: AccountId,
    pub mailbox: MailboxId,
    pub uid: Uid,
    pub modseq: u64,
}

/// Requests between nodes.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    Deliver {
        shard: u32,
        req: WireDelivery,
    },
    Op {
        shard: u32,
        account: AccountId,
        op: MailboxOp,
    },
    /// Node (`node`, `generation`) has sessions watching these accounts.
    Watch {
        node: String,
        generation: u64,
        accounts: Vec<AccountId>,
    },
}

/// Answers between nodes.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    Delivered(Result<Outcome, DeliveryError>),
    Op(Result<OpResult, crate::op_error::OpError>),
    Watching,
    /// This node does not serve the shard (any more): ask the store again.
    NotOwner,
    /// The request could not be decoded.
    Malformed(String),
}

/// The node's live push subscriptions: local sessions by account, and
/// remote nodes watching accounts this node serves.
#[derive(Default)]
pub struct HintHub {
    local: Mutex<HashMap<AccountId, Vec<Subscriber>>>,
    remote: Mutex<HashMap<AccountId, RemoteWatchers>>,
    /// Notified when an account gets its first local session, so the node
    /// registers its watch with the owner now rather than at the next renewal.
    pub new_account: tokio::sync::Notify,
}

/// Nodes watching one account: name → (generation, watch expiry).
type RemoteWatchers = HashMap<String, (u64, Instant)>;

/// A session that wants hints for one account. Its slot holds at most one
/// pending hint: a session that does not keep up has hints merged, never
/// queued, and re-reads.
#[derive(Clone)]
pub struct Subscriber {
    pub id: u64,
    pub account: AccountId,
    pub slot: Arc<crate::shard::HintSlot>,
}

impl HintHub {
    pub fn add(&self, sub: Subscriber) {
        let first = {
            let mut local = lock(&self.local);
            let subs = local.entry(sub.account).or_default();
            subs.push(sub);
            subs.len() == 1
        };
        if first {
            self.new_account.notify_one();
        }
    }

    pub fn remove(&self, account: AccountId, id: u64) {
        let mut local = lock(&self.local);
        if let Some(subs) = local.get_mut(&account) {
            subs.retain(|s| s.id != id);
            if subs.is_empty() {
                local.remove(&account);
            }
        }
    }

    /// Wakes every local session of the account.
    pub fn publish_local(&self, hint: ChangeHint) {
        let mut local = lock(&self.local);
        if let Some(subs) = local.get_mut(&hint.account) {
            // A slot only the hub holds is a session that ended: drop it.
            subs.retain(|s| Arc::strong_count(&s.slot) > 1);
            for s in subs.iter() {
                if !s.slot.offer(hint) {
                    // Merged into a hint the session has not taken yet.
                    metrics::counter!("meshmail_shard_hints_dropped_total").increment(1);
                }
            }
            metrics::counter!("meshmail_shard_hints_sent_total").increment(subs.len() as u64);
        }
    }

    /// Accounts some local session watches.
    pub fn watched_accounts(&self) -> Vec<AccountId> {
        lock(&self.local).keys().copied().collect()
    }

    /// Records (or renews) a remote node's watch on these accounts.
    pub fn watch_remote(&self, node: &str, generation: u64, accounts: &[AccountId]) {
        let until = Instant::now() + WATCH_TTL;
        let mut remote = lock(&self.remote);
        for a in accounts {
            remote
                .entry(*a)
                .or_default()
                .insert(node.to_string(), (generation, until));
        }
        metrics::gauge!("meshmail_remote_watched_accounts").set(remote.len() as f64);
    }

    /// The nodes watching `account` now (expired watches are dropped).
    pub fn remote_watchers(&self, account: AccountId) -> Vec<(String, u64)> {
        let now = Instant::now();
        let mut remote = lock(&self.remote);
        let Some(watchers) = remote.get_mut(&account) else {
            return Vec::new();
        };
        watchers.retain(|_, (_, until)| *until > now);
        let out = watchers.iter().map(|(n, (g, _))| (n.clone(), *g)).collect();
        if watchers.is_empty() {
            remote.remove(&account);
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Serves a request from another node with this node's actors.
pub async fn serve(ctx: &Arc<crate::node::NodeCtx>, request: Request) -> Reply {
    match request {
        Request::Deliver { shard, req } => {
            if !ctx.serves(shard) {
                return Reply::NotOwner;
            }
            match crate::delivery::deliver_here(ctx, shard, req.into_request()).await {
                Some(result) => Reply::Delivered(result),
                None => Reply::NotOwner,
            }
        }
        Request::Op { shard, account, op } => {
            if !ctx.serves(shard) {
                return Reply::NotOwner;
            }
            match crate::mailbox_ops::request_here(ctx, shard, account, op).await {
                Some(result) => Reply::Op(result),
                None => Reply::NotOwner,
            }
        }
        Request::Watch {
            node,
            generation,
            accounts,
        } => {
            ctx.hints.watch_remote(&node, generation, &accounts);
            Reply::Watching
        }
    }
}
