//! Poison quarantine: a delivery that crashed its handler three times is
//! kept durably with its reason (and its body reference), and its ledger
//! entry says so — quarantined is a final state of an acceptance, so the
//! sender may be told 250. An operator lists, shows, redelivers or drops it.

use std::sync::Arc;

use meshmail_storage::blob::{self, PreparedBody};
use meshmail_storage::model::ledger::{self, LedgerState};
use meshmail_storage::model::messages::BodyRef;
use meshmail_storage::model::quarantine::{self, QuarantineRecord};
use meshmail_storage::model::{new_id, now_ms};
use meshmail_storage::{Database, StorageError};

use crate::delivery::{self, DeliveryError, DeliveryRequest, Outcome, StoredRequest};
use crate::node::NodeCtx;

/// Moves a delivery to quarantine: record, ledger state and a body reference
/// in one transaction.
pub async fn quarantine(ctx: &NodeCtx, req: &DeliveryRequest, reason: &str) -> Result<Outcome, DeliveryError> {
    let qid = new_id();
    let record = QuarantineRecord {
        id: qid,
        acceptance_id: Some(req.acceptance_id),
        reason: reason.to_string(),
        attempts: quarantine::ATTEMPTS_MAX,
        quarantined_ms: now_ms(),
        recipient: req.recipient.clone(),
        body_hash: req.body.body.hash.clone(),
        body_size: req.body.body.size,
        request: serde_json::to_value(req.stored()).unwrap_or_default(),
    };
    let prepared = req.body.clone();
    let acceptance = req.acceptance_id;
    ctx.db
        .run("quarantine_put", move |txn| {
            let (record, prepared) = (record.clone(), prepared.clone());
            async move {
                blob::reference(&txn, &prepared).await?;
                quarantine::put(&txn, &record)?;
                ledger::record(
                    &txn,
                    &acceptance,
                    &LedgerState::Quarantined {
                        quarantine_id: record.id,
                    },
                )?;
                Ok::<(), StorageError>(())
            }
        })
        .await?;
    metrics::counter!("meshmail_quarantined_total").increment(1);
    tracing::warn!(quarantine = %meshmail_storage::model::id_to_string(&qid), reason, "delivery quarantined");
    Ok(Outcome::Quarantined { quarantine_id: qid })
}

/// Redelivers a quarantined item through its shard actor (the single writer).
pub async fn redeliver(ctx: &Arc<NodeCtx>, id: [u8; 16]) -> Result<Outcome, DeliveryError> {
    let record = load(&ctx.db, id).await?;
    let stored: StoredRequest = serde_json::from_value(record.request.clone())
        .map_err(|e| DeliveryError::Permanent(format!("quarantine record has no request: {e}")))?;
    let acceptance_id = record.acceptance_id.unwrap_or_else(new_id);
    let body = prepared_from_store(ctx, &record).await?;
    let req = DeliveryRequest {
        acceptance_id,
        account: stored.account,
        recipient: stored.recipient,
        mailbox: stored.mailbox,
        body,
        flags: stored.flags,
        internal_date_ms: stored.internal_date_ms,
        summary: *stored.summary.0,
        fault: None,
        from_quarantine: Some(id),
        deadline: crate::delivery::deadline_in(crate::delivery::DELIVERY_DEADLINE),
    };
    // A fresh count: three more crashes quarantine it again.
    let aid = acceptance_id;
    ctx.db
        .run("quarantine_reset", move |txn| async move {
            quarantine::clear_failures(&txn, &aid)
        })
        .await?;
    delivery::deliver(ctx, req).await
}

/// Drops a quarantined item: the acceptance ends as bounced.
pub async fn drop_item(db: &Database, id: [u8; 16]) -> Result<(), DeliveryError> {
    let record = load(db, id).await?;
    db.run("quarantine_drop", move |txn| {
        let record = record.clone();
        async move {
            if quarantine::get(&txn, &record.id).await?.is_none() {
                return Ok(()); // Already gone (a retried drop).
            }
            quarantine::remove(&txn, &record.id)?;
            blob::release(
                &txn,
                &BodyRef {
                    hash: record.body_hash.clone(),
                    size: record.body_size,
                    inline: false,
                },
            )?;
            if let Some(aid) = record.acceptance_id {
                let reason = format!("dropped from quarantine by an operator ({})", record.reason);
                ledger::record(&txn, &aid, &LedgerState::Bounced { reason })?;
            }
            Ok::<(), StorageError>(())
        }
    })
    .await?;
    Ok(())
}

async fn load(db: &Database, id: [u8; 16]) -> Result<QuarantineRecord, DeliveryError> {
    db.read(
        "quarantine_get",
        move |txn| async move { quarantine::get(&txn, &id).await },
    )
    .await?
    .ok_or_else(|| {
        DeliveryError::Permanent(format!(
            "no quarantine item {}",
            meshmail_storage::model::id_to_string(&id)
        ))
    })
}

/// Rebuilds a prepared body from what the quarantine keeps referenced.
async fn prepared_from_store(ctx: &NodeCtx, record: &QuarantineRecord) -> Result<PreparedBody, DeliveryError> {
    let (hash, size) = (record.body_hash.as_str(), record.body_size);
    let prepared = ctx
        .db
        .read("quarantine_body", move |txn| async move {
            blob::prepared_from_stored(&txn, hash, size).await
        })
        .await?;
    Ok(prepared)
}
