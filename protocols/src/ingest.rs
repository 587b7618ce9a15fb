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
    /// Stored apart from the rest of the summary (ENVELOPE is read alone).
    pub envelope: serde_json::Value,
    /// The summary without its envelope: structure and part offsets.
    pub body_structure: serde_json::Value,
}

/// Parses `raw` (off the async workers: messages can be large) and writes it
/// to the blob store.
pub async fn ingest(ctx: &NodeCtx, raw: Bytes) -> Result<Ingested, StorageError> {
    let for_parse = raw.clone();
    let summary = tokio::task::spawn_blocking(move || summarize(&for_parse))
        .await
        .ok()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_default();
    let (envelope, body_structure) = split_summary(summary);
    let body = ctx.blobs.prepare(&ctx.db, raw).await?;
    Ok(Ingested {
        body,
        envelope,
        body_structure,
    })
}

fn split_summary(mut summary: serde_json::Value) -> (serde_json::Value, serde_json::Value) {
    let envelope = summary
        .as_object_mut()
        .and_then(|o| o.remove("envelope"))
        .unwrap_or(serde_json::Value::Null);
    (envelope, summary)
}

/// The inverse of [`ingest`]'s split: the summary of a stored message.
pub fn stored_summary(envelope: &serde_json::Value, body_structure: &serde_json::Value) -> Summary {
    stored_summary_owned(envelope.clone(), body_structure.clone())
}

/// [`stored_summary`] of parts the caller owns: no copy of either (a FETCH
/// or SEARCH over a mailbox converts one per message).
pub fn stored_summary_owned(envelope: serde_json::Value, mut body_structure: serde_json::Value) -> Summary {
    if let Some(o) = body_structure.as_object_mut() {
        o.insert("envelope".into(), envelope);
    }
    serde_json::from_value(body_structure).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_stored_summary_round_trip() {
        let raw = b"From: A <a@example.org>\r\nSubject: hi\r\n\r\nbody\r\n";
        let s = summarize(raw);
        let (env, rest) = split_summary(serde_json::to_value(&s).unwrap());
        assert!(rest.get("envelope").is_none());
        assert_eq!(stored_summary(&env, &rest), s);
    }
}
