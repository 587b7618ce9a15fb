//! The durable outbound queue: one item per remote recipient of an accepted
//! message, each with its own acceptance id (so each ends in exactly one
//! ledger state: `Relayed` or `Bounced`).
//!
//! Ownership follows the shard discipline: every item belongs to a virtual
//! shard ([`outbound_shard`]), only the node holding that shard's lease
//! runs it, and every state change ([`claim`], [`finish`]) reads the lease
//! through [`nodes::check_lease`], so a paused or superseded node fails to
//! commit instead of marking a message delivered or bounced.
//!
//! Keys (see `docs/KEYSPACE.md`):
//! - `("outq", id)`: the item.
//! - `("outd", shard, due_ms, id)`: exactly one due-index entry per item;
//!   a runner scans `("outd", shard, 0..=now)` in bounded chunks.
//! - `("outc", shard, id)`: present while an attempt is in flight (the
//!   claim), so a node that takes a shard over finds claims of the old
//!   owner at once instead of waiting for their timeout.
//! - `("outn",)`: the number of queued items (atomic adds, for metrics).

use serde::{Deserialize, Serialize};

use super::ledger::{self, LedgerState};
use super::messages::BodyRef;
use super::{decode, get_record, nodes, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn, key_after};

/// RFC 3461 RET: what a failure DSN returns of the message.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum DsnRet {
    Full,
    Hdrs,
}

/// RFC 3461 NOTIFY. `None` in [`DsnParams::notify`] means the parameter
/// was absent: failures and delays are reported (§4.1's default).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DsnNotify {
    pub never: bool,
    pub success: bool,
    pub failure: bool,
    pub delay: bool,
}

/// The DSN parameters given on submission (RFC 3461).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DsnParams {
    pub ret: Option<DsnRet>,
    /// ENVID, xtext-decoded.
    pub envid: Option<String>,
    pub notify: Option<DsnNotify>,
    /// ORCPT as given: `addr-type;address` (xtext-decoded).
    pub orcpt: Option<String>,
}

impl DsnParams {
    pub fn wants_failure(&self) -> bool {
        self.notify.is_none_or(|n| n.failure)
    }
    pub fn wants_delay(&self) -> bool {
        self.notify.is_none_or(|n| n.delay)
    }
    pub fn wants_success(&self) -> bool {
        self.notify.is_some_and(|n| n.success)
    }
}

/// Who runs an attempt: the lease (node, generation, epoch) of the item's shard.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Fence {
    pub node: String,
    pub generation: u64,
    pub epoch: u64,
}

/// An attempt in flight.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claim {
    pub fence: Fence,
    pub started_ms: u64,
    /// After this the attempt is presumed dead and the item is due again.
    pub until_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboundItem {
    pub id: [u8; 16],
    pub acceptance_id: [u8; 16],
    /// The envelope sender; empty for a null reverse path (a DSN): such
    /// an item is never answered with another DSN.
    pub sender: String,
    pub recipient: String,
    pub body: BodyRef,
    pub queued_ms: u64,
    /// Attempts started (claims taken), including one in flight.
    pub attempts: u32,
    pub last_error: Option<String>,
    /// The virtual shard whose lease owner runs this item.
    #[serde(default)]
    pub shard: u32,
    #[serde(default)]
    pub next_attempt_ms: u64,
    #[serde(default)]
    pub last_attempt_ms: Option<u64>,
    #[serde(default)]
    pub dsn: DsnParams,
    /// MAIL FROM ... SMTPUTF8: the envelope or headers need it of the peer.
    #[serde(default)]
    pub smtputf8: bool,
    /// BODY=8BITMIME was given (or the body has 8-bit octets).
    #[serde(default)]
    pub eight_bit: bool,
    /// RFC 8689 REQUIRETLS: only over verified TLS to a peer that offers it.
    #[serde(default)]
    pub require_tls: bool,
    /// The message says `TLS-Required: No` (RFC 8689 §5) and REQUIRETLS
    /// was not asked for: MTA-STS is not applied, and a failed STARTTLS
    /// falls back to plaintext.
    #[serde(default)]
    pub tls_optional: bool,
    /// The delay warning DSN was sent.
    #[serde(default)]
    pub delay_warned: bool,
    #[serde(default)]
    pub claim: Option<Claim>,
    /// An operator asked for a bounce (`meshmail queue bounce`): the runner
    /// bounces it at its next look, with this reason.
    #[serde(default)]
    pub bounce_requested: Option<String>,
    /// The acceptance id of this item's DSN, fixed at the first claim so a
    /// DSN retried after a crash is delivered once (the ledger is checked).
    #[serde(default)]
    pub dsn_id: Option<[u8; 16]>,
}

impl OutboundItem {
    pub fn recipient_domain(&self) -> &str {
        self.recipient.rsplit_once('@').map_or("", |(_, d)| d)
    }
}

/// The shard an item belongs to: a stable hash of sender and body, so the
/// recipients of one message share a shard (and a node, and so one SMTP
/// transaction per domain), while one sender's messages spread out.
pub fn outbound_shard(sender: &str, body_hash: &str, shard_count: u32) -> u32 {
    assert!(shard_count > 0, "shard_count must be positive");
    let mut h: u64 = 0xcbf29ce484222325;
    for b in sender.bytes().chain([0]).chain(body_hash.bytes()) {
        h ^= b.to_ascii_lowercase() as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    (h % shard_count as u64) as u32
}

/// Queues an item and records its acceptance as queued, in one
/// transaction. The caller holds a blob reference for `item.body` in the
/// same transaction and has set `item.shard`.
pub fn enqueue(txn: &Txn, item: &OutboundItem) -> Result<()> {
    let mut item = item.clone();
    if item.next_attempt_ms == 0 {
        item.next_attempt_ms = item.queued_ms;
    }
    put_record(txn, &keyspace::outbound(&item.id), &item)?;
    txn.set(&keyspace::outbound_due(item.shard, item.next_attempt_ms, &item.id), b"")?;
    txn.add_i64(&keyspace::outbound_count(), 1)?;
    ledger::record(txn, &item.acceptance_id, &LedgerState::Queued { outbound_id: item.id })
}

pub async fn get(txn: &Txn, id: &[u8; 16]) -> Result<Option<OutboundItem>> {
    get_record(txn, &keyspace::outbound(id), "outbound item").await
}

/// Items in id (= queue time) order, after `after`, at most `limit`.
pub async fn list_page(txn: &Txn, after: Option<&[u8; 16]>, limit: usize) -> Result<Vec<OutboundItem>> {
    let (b, e) = keyspace::outbound_all();
    let begin = match after {
        Some(id) => key_after(&keyspace::outbound(id)),
        None => b,
    };
    let rows = txn.get_range(&begin, &e, RangeOptions::limit(limit).snapshot()).await?;
    rows.iter().map(|(_, v)| decode("outbound item", v)).collect()
}

pub async fn list(txn: &Txn, limit: usize) -> Result<Vec<OutboundItem>> {
    list_page(txn, None, limit).await
}

/// Queued items in the whole store (an atomic counter).
pub async fn count(txn: &Txn) -> Result<i64> {
    txn.get_i64(&keyspace::outbound_count()).await
}

/// Ids of `shard`'s items due at or before `now`, oldest due first, at most
/// `limit`. Snapshot reads: a scan must not conflict with every enqueue;
/// [`claim`] re-reads what it acts on.
pub async fn due(txn: &Txn, shard: u32, now: u64, limit: usize) -> Result<Vec<[u8; 16]>> {
    let (begin, _) = keyspace::outbound_due_shard(shard);
    let end = keyspace::outbound_due_before(shard, now.saturating_add(1));
    let rows = txn
        .get_range(&begin, &end, RangeOptions::limit(limit).snapshot())
        .await?;
    rows.iter().map(|(k, _)| keyspace::outbound_due_id(k)).collect()
}

/// Ids of `shard`'s items with an attempt in flight, at most `limit`.
pub async fn claimed(txn: &Txn, shard: u32, limit: usize) -> Result<Vec<[u8; 16]>> {
    let (b, e) = keyspace::outbound_claims(shard);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit).snapshot()).await?;
    rows.iter().map(|(k, _)| keyspace::outbound_claim_id(k)).collect()
}

fn move_due(txn: &Txn, item: &mut OutboundItem, due_ms: u64) -> Result<()> {
    txn.clear(&keyspace::outbound_due(item.shard, item.next_attempt_ms, &item.id))?;
    item.next_attempt_ms = due_ms;
    txn.set(&keyspace::outbound_due(item.shard, due_ms, &item.id), b"")
}

/// Starts an attempt: fenced by the shard's lease; returns the item, or
/// `None` when there is nothing to do (gone, not due, or in flight under
/// this same lease). A claim of another lease (a dead or superseded
/// owner) is taken over. The due entry moves to `until_ms`, so an attempt
/// whose node dies is due again then, whoever owns the shard.
pub async fn claim(txn: &Txn, id: &[u8; 16], fence: &Fence, now: u64, until_ms: u64) -> Result<Option<OutboundItem>> {
    let Some(mut item) = get(txn, id).await? else {
        return Ok(None);
    };
    nodes::check_lease(txn, item.shard, &fence.node, fence.generation, fence.epoch).await?;
    let stale_claim = item
        .claim
        .as_ref()
        .is_some_and(|c| &c.fence != fence || c.until_ms <= now);
    if item.claim.is_some() && !stale_claim {
        return Ok(None);
    }
    if item.claim.is_none() && item.next_attempt_ms > now {
        return Ok(None);
    }
    item.attempts += 1;
    item.last_attempt_ms = Some(now);
    item.claim = Some(Claim {
        fence: fence.clone(),
        started_ms: now,
        until_ms,
    });
    if item.dsn_id.is_none() {
        item.dsn_id = Some(super::new_id());
    }
    move_due(txn, &mut item, until_ms)?;
    txn.set(&keyspace::outbound_claim(item.shard, id), b"")?;
    put_record(txn, &keyspace::outbound(id), &item)?;
    Ok(Some(item))
}

/// How an attempt ended for one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The remote MX (or the relay) answered 250 for the recipient.
    Relayed { host: String, tls: bool },
    /// A temporary failure: try again at `next_ms`.
    Retry {
        next_ms: u64,
        error: String,
        delay_warned: bool,
    },
    /// A permanent failure, an expiry or an operator's bounce.
    Bounced { reason: String },
}

fn remove_item(txn: &Txn, item: &OutboundItem) -> Result<()> {
    txn.clear(&keyspace::outbound(&item.id))?;
    txn.clear(&keyspace::outbound_due(item.shard, item.next_attempt_ms, &item.id))?;
    txn.clear(&keyspace::outbound_claim(item.shard, &item.id))?;
    txn.add_i64(&keyspace::outbound_count(), -1)?;
    crate::blob::release(txn, &item.body)
}

/// Ends an attempt, fenced by the lease the claim was taken under. Refused
/// (an error) when the item's claim is no longer this fence's (an operator
/// or a new owner acted meanwhile); `Ok(false)` when the item is gone.
pub async fn finish(txn: &Txn, id: &[u8; 16], fence: &Fence, how: &Finish) -> Result<bool> {
    let Some(mut item) = get(txn, id).await? else {
        return Ok(false);
    };
    nodes::check_lease(txn, item.shard, &fence.node, fence.generation, fence.epoch).await?;
    if item.claim.as_ref().map(|c| &c.fence) != Some(fence) {
        return Err(StorageError::Model(format!(
            "outbound item {} is no longer claimed by {}#{} epoch {}",
            super::id_to_string(id),
            fence.node,
            fence.generation,
            fence.epoch
        )));
    }
    match how {
        Finish::Relayed { host, tls } => {
            remove_item(txn, &item)?;
            ledger::record(
                txn,
                &item.acceptance_id,
                &LedgerState::Relayed {
                    outbound_id: item.id,
                    host: host.clone(),
                    tls: *tls,
                },
            )?;
        }
        Finish::Bounced { reason } => {
            remove_item(txn, &item)?;
            ledger::record(
                txn,
                &item.acceptance_id,
                &LedgerState::Bounced { reason: reason.clone() },
            )?;
        }
        Finish::Retry {
            next_ms,
            error,
            delay_warned,
        } => {
            item.claim = None;
            item.last_error = Some(error.clone());
            item.delay_warned |= *delay_warned;
            txn.clear(&keyspace::outbound_claim(item.shard, id))?;
            move_due(txn, &mut item, *next_ms)?;
            put_record(txn, &keyspace::outbound(id), &item)?;
        }
    }
    Ok(true)
}

/// Operator: make an item due now (`meshmail queue retry`). An attempt in
/// flight is forgotten (its end is refused; at worst the message goes out
/// twice, never zero times).
pub async fn retry_now(txn: &Txn, id: &[u8; 16]) -> Result<Option<OutboundItem>> {
    let Some(mut item) = get(txn, id).await? else {
        return Ok(None);
    };
    item.claim = None;
    txn.clear(&keyspace::outbound_claim(item.shard, id))?;
    move_due(txn, &mut item, now_ms())?;
    put_record(txn, &keyspace::outbound(id), &item)?;
    Ok(Some(item))
}

/// Operator: bounce at the next look (`meshmail queue bounce`); the runner
/// sends the DSN, so it works with no node running (it happens when one
/// runs).
pub async fn request_bounce(txn: &Txn, id: &[u8; 16], reason: &str) -> Result<Option<OutboundItem>> {
    if retry_now(txn, id).await?.is_none() {
        return Ok(None);
    }
    let mut item = get(txn, id).await?.expect("just written");
    item.bounce_requested = Some(reason.to_string());
    put_record(txn, &keyspace::outbound(id), &item)?;
    Ok(Some(item))
}

/// Operator: remove an item without delivering it (`meshmail queue drop`);
/// its acceptance ends as bounced, with no DSN.
pub async fn drop_item(txn: &Txn, id: &[u8; 16], reason: &str) -> Result<Option<OutboundItem>> {
    let Some(item) = get(txn, id).await? else {
        return Ok(None);
    };
    remove_item(txn, &item)?;
    ledger::record(
        txn,
        &item.acceptance_id,
        &LedgerState::Bounced {
            reason: reason.to_string(),
        },
    )?;
    Ok(Some(item))
}

#[cfg(test)]
#[path = "outbound_tests.rs"]
mod tests;
