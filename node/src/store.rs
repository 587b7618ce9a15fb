//! Opening the store, for `serve` and for the admin commands alike: the
//! KV store from the config, then its format checked against this build's
//! (`storage::model::cluster::STORE_FORMAT`) before anything is written;
//! and, while `serve` runs, the same check again ([`watch_format`]).

use std::time::Duration;

use anyhow::Context;
use meshmail_storage::Database;
use meshmail_storage::blob::BlobStore;
use meshmail_storage::model::cluster::{self, STORE_FORMAT, StoreFormatCheck};
use meshmail_storage::open::open_kv;

use crate::config::Config;

/// How often a running node reads the store's format again: one key.
const FORMAT_WATCH_INTERVAL: Duration = Duration::from_secs(5);

pub async fn open(cfg: &Config) -> anyhow::Result<Database> {
    let db = open_kv(&cfg.kv()).with_context(|| format!("opening the store ({:?})", cfg.kv()))?;
    check_format(&db).await?;
    Ok(db)
}

/// The store and the blob store, as the commands that read or write
/// bodies (`export`, `backup create|restore`) need both.
pub async fn open_with_blobs(cfg: &Config) -> anyhow::Result<(Database, BlobStore)> {
    let db = open(cfg).await?;
    let blobs = BlobStore::open(&cfg.blob_config(), cfg.inline_max_bytes)
        .await
        .context("opening the blob store")?;
    Ok((db, blobs))
}

/// A build must not write a store a newer build has opened: it would
/// rewrite records without the fields it does not know (see
/// `STORE_FORMAT`'s table), so it refuses to go on.
async fn check_format(db: &Database) -> anyhow::Result<()> {
    let check = db
        .run("cluster_store_format", |txn| async move {
            cluster::check_store_format(&txn).await
        })
        .await
        .context("checking the store's format")?;
    match check {
        StoreFormatCheck::Matches => {}
        StoreFormatCheck::Recorded => tracing::info!(format = STORE_FORMAT, "store format recorded"),
        StoreFormatCheck::Upgraded { from } => tracing::warn!(
            from,
            to = STORE_FORMAT,
            "store format upgraded: builds that know only format {from} now refuse this store"
        ),
        StoreFormatCheck::TooNew { store } => anyhow::bail!(
            "the store has format {store}, written by a newer meshmail; this build knows formats up to \
             {STORE_FORMAT} and would lose what it does not know, so it refuses to open it. Run a build \
             that knows format {store} (every node of a mesh needs one)."
        ),
    }
    Ok(())
}

/// A task that ends once a newer build has marked the store (a rolling
/// upgrade reached it while this node ran). `serve` watches it as a vital,
/// so this node exits, crash-only, instead of rewriting records without the
/// fields the newer format needs. A failed read (a store that is down) is
/// only logged: the next tick reads again.
pub fn watch_format(db: Database) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // `open` checked just now: the first read is one interval later.
        let first = tokio::time::Instant::now() + FORMAT_WATCH_INTERVAL;
        let mut tick = tokio::time::interval_at(first, FORMAT_WATCH_INTERVAL);
        loop {
            tick.tick().await;
            match db
                .read("cluster_store_format_watch", |txn| async move {
                    cluster::store_format(&txn).await
                })
                .await
            {
                Ok(Some(store)) if store > STORE_FORMAT => {
                    tracing::error!(
                        store,
                        known = STORE_FORMAT,
                        "a newer meshmail marked the store with format {store} while this node ran; this build \
                         knows formats up to {STORE_FORMAT}: stopping before it writes what that format forbids"
                    );
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the store's format (read again in {FORMAT_WATCH_INTERVAL:?})")
                }
            }
        }
    })
}
