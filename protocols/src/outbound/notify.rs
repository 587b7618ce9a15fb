//! Sending a DSN: built by [`super::dsn`], then delivered like any accepted
//! message: to the sender's INBOX through the shard actor when the sender
//! is a local account (`meshmail_actors::delivery::deliver`), else into the
//! outbound queue from the null reverse path (so it is never answered by
//! another DSN). `dsn_id` is the DSN's acceptance id: a retry with the
//! same id after a crash is recognised by the ledger and not delivered
//! twice.

use std::sync::Arc;

use bytes::Bytes;
use meshmail_actors::delivery::{DeliveryError, DeliveryRequest, deliver};
use meshmail_actors::node::NodeCtx;
use meshmail_storage::StorageError;
use meshmail_storage::model::accounts::{self, Account};
use meshmail_storage::model::now_ms;
use meshmail_storage::model::outbound::OutboundItem;

use super::Outbound;
use super::dsn::{self, Report};
use crate::accept::{EnvelopeParams, is_local_domain, queue_remote};
use crate::ingest::{Ingested, ingest};

/// Why a DSN could not be sent (its items are retried).
#[derive(Debug, thiserror::Error)]
pub enum DsnError {
    #[error(transparent)]
    Store(#[from] StorageError),
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

/// Sends one DSN to the sender of `entries` (the recipients of one message
/// it reports on, each with its report; all share sender and body).
pub async fn send_dsn(
    o: &Arc<Outbound>,
    entries: &[(&OutboundItem, &Report)],
    dsn_id: [u8; 16],
    body: Option<&Bytes>,
) -> Result<(), DsnError> {
    let Some(&(item, report)) = entries.first() else {
        return Ok(());
    };
    if item.sender.is_empty() {
        // Never a DSN to the null reverse path.
        return Ok(());
    }
    let ctx = &o.ctx;
    let original = match body {
        Some(b) => b.clone(),
        None => ctx
            .blobs
            .get(&ctx.db, &item.body)
            .await
            .unwrap_or_else(|_| Bytes::from_static(b"")),
    };
    let raw = Bytes::from(dsn::build(&o.config.hostname, entries, &original, now_ms()));
    let Some(account) = sender_account(ctx, &item.sender).await? else {
        // A local sender without an account (an alias, a deleted
        // account): nobody to tell.
        tracing::warn!(sender = %item.sender, "DSN for a local sender with no account dropped");
        return Ok(());
    };
    // A body swept between prepare and commit is written again (rare).
    for _ in 0..3 {
        let ingested = ingest(ctx, raw.clone()).await?;
        let outcome = match &account {
            Some(acc) => deliver_local(ctx, dsn_id, acc, ingested).await,
            None => {
                queue_remote(
                    ctx,
                    dsn_id,
                    "",
                    &item.sender,
                    &ingested.body,
                    &EnvelopeParams::default(),
                    Default::default(),
                )
                .await
            }
        };
        match outcome {
            Ok(()) => {
                metrics::counter!("meshmail_outbound_dsn_total", "action" => format!("{:?}", report.action).to_lowercase())
                    .increment(1);
                return Ok(());
            }
            // Swept again: the next try writes the body anew.
            Err(DeliveryError::BodySwept) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(DeliveryError::BodySwept.into())
}

/// Where the DSN goes: `Some(Some(account))` for a local sender's
/// account, `Some(None)` for a remote sender (the outbound queue), `None`
/// for a local sender with no account.
async fn sender_account(ctx: &NodeCtx, sender: &str) -> Result<Option<Option<Account>>, StorageError> {
    let domain = sender.rsplit_once('@').map_or("", |(_, d)| d).to_ascii_lowercase();
    let local = is_local_domain(ctx, &domain).await?;
    if !local {
        return Ok(Some(None));
    }
    let s = sender.to_string();
    let acc = ctx
        .db
        .read("dsn_account", move |txn| {
            let s = s.clone();
            async move {
                match accounts::get(&txn, &s).await {
                    Err(StorageError::Model(_)) => Ok(None),
                    other => other,
                }
            }
        })
        .await?;
    Ok(acc.map(Some))
}

/// Into the local sender's INBOX through its shard actor, under the DSN's
/// acceptance id.
async fn deliver_local(
    ctx: &Arc<NodeCtx>,
    dsn_id: [u8; 16],
    acc: &Account,
    ingested: Ingested,
) -> Result<(), DeliveryError> {
    let req = DeliveryRequest {
        acceptance_id: dsn_id,
        account: acc.id,
        recipient: acc.email.clone(),
        mailbox: "INBOX".into(),
        body: ingested.body,
        flags: Vec::new(),
        internal_date_ms: now_ms() as i64,
        summary: ingested.summary,
        fault: None,
        from_quarantine: None,
        deadline: meshmail_actors::delivery::deadline_in(meshmail_actors::delivery::DELIVERY_DEADLINE),
    };
    deliver(ctx, req).await.map(|_| ())
}
