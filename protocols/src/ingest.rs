//! What every way into a mailbox (SMTP/LMTP/submission, IMAP APPEND) does
//! with the raw bytes before asking the shard actor to deliver: parse once
//! into the stored summary (FETCH never parses again) and write the body to
//! the blob store (before the metadata transaction that references it).

use std::time::Instant;

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

/// Messages up to this size are parsed on the calling task: a parse of a
/// few KiB takes microseconds, less than the hand-off to the blocking pool
/// and back (two thread wake-ups, often a move to the other core). Bigger
/// ones still go to the pool, so that no message stalls an async worker
/// for long.
const PARSE_IN_PLACE_MAX_BYTES: usize = 16 * 1024;

/// Parses `raw` (a large message off the async workers) and writes it to
/// the blob store.
pub async fn ingest(ctx: &NodeCtx, raw: Bytes) -> Result<Ingested, StorageError> {
    let summary = parse(raw.clone()).await;
    let body = ctx.blobs.prepare(&ctx.db, raw).await?;
    Ok(Ingested { body, summary })
}

/// The stored summary of `raw`, timed as its own stage
/// (`meshmail_ingest_parse_seconds`, by where it ran).
async fn parse(raw: Bytes) -> Summary {
    let started = Instant::now();
    let in_place = raw.len() <= PARSE_IN_PLACE_MAX_BYTES;
    // `summarize` never panics (it catches the parser's); a failed task
    // still leaves the message deliverable, with the empty summary.
    let summary = if in_place {
        summarize(&raw)
    } else {
        tokio::task::spawn_blocking(move || summarize(&raw))
            .await
            .unwrap_or_default()
    };
    let place = if in_place { "in_place" } else { "blocking_pool" };
    metrics::histogram!("meshmail_ingest_parse_seconds", "place" => place).record(started.elapsed().as_secs_f64());
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body_bytes: usize) -> Bytes {
        let mut raw = b"From: a@example.org\r\nSubject: sized\r\n\r\n".to_vec();
        while raw.len() < body_bytes {
            raw.extend_from_slice(b"0123456789 abcdefghijklmnopqrstuvwxyz 0123456789 abcdefghij\r\n");
        }
        Bytes::from(raw)
    }

    /// Either side of the in-place limit, the summary is the parser's own
    /// (not the empty one a failed hand-off leaves).
    #[tokio::test]
    async fn small_and_large_messages_get_the_same_parse() {
        for size in [1024, PARSE_IN_PLACE_MAX_BYTES + 1, 4 * PARSE_IN_PLACE_MAX_BYTES] {
            let raw = message(size);
            let got = parse(raw.clone()).await;
            assert!(!got.parse_failed, "{size} B");
            assert_eq!(got.size, raw.len() as u64, "{size} B");
            assert_eq!(got, summarize(&raw), "{size} B");
        }
    }
}
