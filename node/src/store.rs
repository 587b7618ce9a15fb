//! Opening the store, for `serve` and for the admin commands alike: the
//! KV store from the config, then its format checked against the formats
//! this node supports (`storage::model::cluster::STORE_FORMAT`, or lower
//! with `[upgrade] pin_store_format`) before anything is written; and,
//! while `serve` runs, the format watch ([`watch_format`]): it follows the
//! store's format, switches it cluster-wide once every node supports the
//! next one (`storage::model::format_switch`), and stops the node if a
//! newer build switched it past what this node knows.

use std::time::Duration;

use anyhow::Context;
use meshmail_storage::Database;
use meshmail_storage::blob::BlobStore;
use meshmail_storage::model::cluster::{self, StoreFormatCheck};
use meshmail_storage::model::format_switch::{self, FormatRange, SwitchOutcome};
use meshmail_storage::open::open_kv;

use crate::config::Config;

/// How often a running node reads the store's format again (one key) and,
/// while the store is behind, tries the switch.
const FORMAT_WATCH_INTERVAL: Duration = Duration::from_secs(5);

pub async fn open(cfg: &Config) -> anyhow::Result<Database> {
    let formats = cfg.upgrade.formats()?;
    let db = open_kv(&cfg.kv()).with_context(|| format!("opening the store ({:?})", cfg.kv()))?;
    let store = check_format(&db, formats).await?;
    db.raise_write_format(store);
    metrics::gauge!("meshmail_store_format").set(f64::from(store));
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

/// A node must not write a store of a newer format than it supports: it
/// would write what that format forbids (see `STORE_FORMAT`'s table), so
/// it refuses to go on. Returns the store's format, which the node writes.
async fn check_format(db: &Database, formats: FormatRange) -> anyhow::Result<u32> {
    let check = db
        .run("cluster_store_format", |txn| async move {
            cluster::check_store_format(&txn, formats).await
        })
        .await
        .context("checking the store's format")?;
    match check {
        StoreFormatCheck::Readable { store } => Ok(store),
        StoreFormatCheck::Recorded { format } => {
            tracing::info!(format, "store format recorded (a new store)");
            Ok(format)
        }
        StoreFormatCheck::Upgraded { from, to } => {
            tracing::warn!(
                ?from,
                to,
                "store format marked {to}: builds that know only earlier formats now refuse this store"
            );
            Ok(to)
        }
        StoreFormatCheck::TooNew { store } => anyhow::bail!(
            "the store has format {store}, and this node knows formats up to {}{}: it would lose what it does not \
             know, so it refuses to open it. Run a build that knows format {store} (every node of a mesh needs \
             one; a store's format never goes back).",
            formats.max,
            if formats.is_pinned() {
                " (pinned by [upgrade] pin_store_format / --pin-store-format)"
            } else {
                ""
            }
        ),
    }
}

/// The running node's format watch: every [`FORMAT_WATCH_INTERVAL`] it
/// reads the store's format and writes it from then on; while the store is
/// behind this node's newest format it tries the cluster-wide switch as
/// `(name, generation)`; and it ends once the store has a format newer
/// than the node's (a newer build switched it while this one ran). `serve`
/// watches it as a vital, so this node then exits, crash-only, instead of
/// writing what the newer format forbids. A failed read (a store that is
/// down) is only logged: the next tick reads again.
pub fn watch_format(db: Database, formats: FormatRange, name: String, generation: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(FORMAT_WATCH_INTERVAL);
        let mut last_wait = Vec::new();
        loop {
            tick.tick().await;
            let store = match db
                .read("cluster_store_format_watch", |txn| async move {
                    cluster::store_format(&txn).await
                })
                .await
            {
                Ok(store) => store.unwrap_or(format_switch::LAST_MARKED_ON_OPEN),
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the store's format (read again in {FORMAT_WATCH_INTERVAL:?})");
                    continue;
                }
            };
            if store > formats.max {
                tracing::error!(
                    store,
                    known = formats.max,
                    "the store was switched to format {store} while this node ran; this node knows formats up to {}: \
                     stopping before it writes what that format forbids",
                    formats.max
                );
                return;
            }
            db.raise_write_format(store);
            metrics::gauge!("meshmail_store_format").set(f64::from(store));
            if store < formats.max {
                switch_step(&db, formats, &name, generation, &mut last_wait).await;
            }
        }
    })
}

/// One try of the switch, logged so an operator sees what it waits for
/// (once per change of the holdouts, not every tick).
async fn switch_step(db: &Database, formats: FormatRange, name: &str, generation: u64, last_wait: &mut Vec<String>) {
    match format_switch::try_switch(db, name, generation, formats).await {
        Ok(SwitchOutcome::Switched { from, to }) => {
            db.raise_write_format(to);
            metrics::gauge!("meshmail_store_format").set(f64::from(to));
            metrics::counter!("meshmail_store_format_switches_total").increment(1);
            tracing::warn!(
                from,
                to,
                "every node supports store format {to}: switched the store from {from} to {to}"
            );
        }
        Ok(SwitchOutcome::Waiting { store, holdouts }) => {
            let names: Vec<String> = holdouts
                .iter()
                .map(|h| format!("{}#{} (formats {})", h.name, h.generation, h.formats))
                .collect();
            if names != *last_wait {
                tracing::info!(
                    store,
                    next = formats.max,
                    waiting_for = %names.join(", "),
                    "the store stays at format {store} until these nodes run a build that supports {} (or are forgotten)",
                    formats.max
                );
                *last_wait = names;
            }
        }
        Ok(SwitchOutcome::AlreadyAt { .. } | SwitchOutcome::Superseded) => {}
        Err(e) => tracing::warn!(error = %e, "the store format switch failed (tried again next tick)"),
    }
}
