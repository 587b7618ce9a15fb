//! `meshmail backup create DIR` and `meshmail backup restore DIR`: the
//! command-line side of `meshmail_storage::backup` (which holds the design:
//! a fuzzy key copy made consistent by a ledger pass, bodies checked by
//! hash, a manifest written last). This file opens the configured store
//! and blob store, draws the progress bar and prints the figures.
//!
//! Both commands talk to the store directly, like `verify ledger`: `create`
//! runs while nodes serve (it only reads), `restore` writes into a store no
//! node is using yet.

use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use meshmail_storage::backup::create::{Pace, Source};
use meshmail_storage::backup::{self, Phase, RestoreOptions};
use meshmail_storage::open::KvConfig;

use crate::config::Config;

fn bar() -> anyhow::Result<ProgressBar> {
    Ok(ProgressBar::new_spinner().with_style(ProgressStyle::with_template(
        "{spinner} {elapsed_precise} {prefix}: {msg}",
    )?))
}

/// Redraws the bar from a phase report (items and bytes so far).
fn report(bar: &ProgressBar) -> impl Fn(Phase, u64, u64) + Send + Sync + '_ {
    move |phase, items, bytes| {
        bar.set_prefix(phase.label());
        let mb = bytes as f64 / 1e6;
        bar.set_message(match phase {
            Phase::Keys => format!("{items} keys, {mb:.1} MB"),
            Phase::Ledger => format!("{items} ledger entries, {mb:.1} MB"),
            Phase::Objects => format!("{items} bodies, {mb:.1} MB"),
            Phase::Verify => format!("{items} chunks, {mb:.1} MB"),
            Phase::Write => format!("{items} records"),
            Phase::Repair => format!("{items} mailboxes"),
        });
        bar.tick();
    }
}

fn source(cfg: &Config) -> Source {
    match cfg.kv() {
        KvConfig::Sqlite { .. } => Source {
            store_kind: "sqlite".into(),
            key_prefix: String::new(),
        },
        KvConfig::Fdb { key_prefix, .. } => Source {
            store_kind: "fdb".into(),
            key_prefix,
        },
    }
}

pub async fn create(cfg: &Config, dir: &Path, pace: Pace) -> anyhow::Result<()> {
    let (db, blobs) = crate::store::open_with_blobs(cfg).await?;
    let bar = bar()?;
    let started = Instant::now();
    let manifest = backup::create(&db, &blobs, dir, &source(cfg), pace, &report(&bar)).await;
    bar.finish_and_clear();
    let manifest = manifest?;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let c = &manifest.counts;
    let mb = (c.chunk_bytes + c.object_bytes) as f64 / 1e6;
    println!(
        "backup complete: {} in {secs:.1} s ({:.1} MB/s): {} keys, {} ledger entries (with {} keys), \
         {} bodies ({:.1} MB), {} chunk files, {mb:.1} MB; every message acknowledged before {} ms \
         (the start) is in it",
        dir.display(),
        mb / secs,
        c.keys,
        c.ledger_entries,
        c.ledger_group_keys,
        c.objects,
        c.object_bytes as f64 / 1e6,
        manifest.chunks.len(),
        manifest.started_ms,
    );
    Ok(())
}

pub async fn restore(cfg: &Config, dir: &Path, force: bool) -> anyhow::Result<()> {
    let (db, blobs) = crate::store::open_with_blobs(cfg).await?;
    let bar = bar()?;
    let started = Instant::now();
    let opts = RestoreOptions { allow_non_empty: force };
    let done = backup::restore(&db, &blobs, dir, opts, &report(&bar)).await;
    bar.finish_and_clear();
    let (manifest, r) = done?;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let mb = (manifest.counts.chunk_bytes + r.object_bytes) as f64 / 1e6;
    println!(
        "restore complete from {} ({} backup of {} ms) in {secs:.1} s ({:.1} MB/s): {} records, {} bodies \
         ({:.1} MB); repaired {} mailboxes of {} messages: {} counters fixed, {} UIDNEXT raised, {} body \
         reference counts raised, {} bodies missing",
        dir.display(),
        manifest.store_kind,
        manifest.started_ms,
        mb / secs,
        r.records,
        r.objects,
        r.object_bytes as f64 / 1e6,
        r.repair.mailboxes,
        r.repair.messages,
        r.repair.counters_fixed,
        r.repair.uid_next_raised,
        r.repair.refs_raised,
        r.repair.bodies_missing,
    );
    if r.repair.bodies_missing > 0 {
        anyhow::bail!(
            "{} restored messages name bodies the backup does not hold (see `meshmail verify ledger`)",
            r.repair.bodies_missing
        );
    }
    Ok(())
}
