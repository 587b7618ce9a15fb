//! The durable outbound queue: messages accepted on submission for remote
//! recipients. Delivery to remote MXs is not built yet; until then items stay
//! queued and `meshmail queue list` shows them.

use serde::{Deserialize, Serialize};

use super::ledger::{self, LedgerState};
use super::messages::BodyRef;
use super::{decode, put_record};
use crate::error::Result;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboundItem {
    pub id: [u8; 16],
    pub acceptance_id: [u8; 16],
    pub sender: String,
    pub recipient: String,
    pub body: BodyRef,
    pub queued_ms: u64,
    pub attempts: u32,
    pub last_error: Option<String>,
}

/// Queues an item and records its acceptance as queued, in one transaction.
/// The caller holds a blob reference for `item.body` in the same transaction.
pub fn enqueue(txn: &Txn, item: &OutboundItem) -> Result<()> {
    put_record(txn, &keyspace::outbound(&item.id), item)?;
    ledger::record(txn, &item.acceptance_id, &LedgerState::Queued { outbound_id: item.id })
}

pub async fn list(txn: &Txn, limit: usize) -> Result<Vec<OutboundItem>> {
    let (b, e) = keyspace::outbound_all();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    rows.iter().map(|(_, v)| decode("outbound item", v)).collect()
}
