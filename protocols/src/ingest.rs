//! What every way into a mailbox (SMTP/LMTP/submission, IMAP APPEND) does
//! with the raw bytes before asking the shard actor to deliver: parse once
//! into the stored summary (FETCH never parses again) and write the body to
//! the blob store (before the metadata transaction that references it).

use bytes::Bytes;
use meshmail_actors::node::NodeCtx;
use meshmail_storage::StorageError;
use meshmail_storage::blob::PreparedBody;

use crate::summary::{Summary, summarize};

/// A message ready to be delivered.
pub struct Ingested {
    pub body: PreparedBody,
    /// Stored with the message, in the storage model's typed, versioned
    /// form (its envelope readable alone).
    pub summary: Summary,
}

/// Parses `raw` (off the async workers: messages can be large) and writes it
/// to the blob store.
pub async fn ingest(ctx: &NodeCtx, raw: Bytes) -> Result<Ingested, StorageError> {
    let for_parse = raw.clone();
    // `summarize` never panics (it catches the parser's); a failed task
    // still leaves the message deliverable, with the empty summary.
    let summary = tokio::task::spawn_blocking(move || summarize(&for_parse))
        .await
        .unwrap_or_default();
    let body = ctx.blobs.prepare(&ctx.db, raw).await?;
    Ok(Ingested { body, summary })
}
