//! Facts of the whole cluster, fixed when the store is first used: every
//! node must agree on them or the data model breaks. Two today:
//!
//! - the number of virtual shards. Two nodes with different counts would
//!   map one account to two shards, each with its own writer, so a node
//!   configured with another count than the cluster's refuses to start;
//! - the store's format ([`STORE_FORMAT`]): a build that does not know the
//!   format a store was last opened with could rewrite its records without
//!   fields it has never heard of, so it refuses to open that store.

use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

use super::format_switch::{FormatRange, LAST_MARKED_ON_OPEN};
use super::nodes::Lease;

/// What checking the configured shard count against the cluster found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardCountCheck {
    /// The first start: the configured count is now the cluster's.
    Recorded,
    /// The cluster's count, which the configuration agrees with.
    Matches,
    /// The cluster has another count; the node must not start.
    Mismatch { cluster: u32 },
}

/// Records `configured` as the cluster's shard count if none is recorded,
/// else compares. A store written before the fact was recorded (it has
/// leases but no fact) is judged by its highest leased shard: leases exist
/// for shards `0..count`. The read-then-write makes two first starts
/// conflict, and the retry of the loser sees the winner's count.
pub async fn check_shard_count(txn: &Txn, configured: u32) -> Result<ShardCountCheck> {
    if let Some(cluster) = fact_u32(txn, "shard_count").await? {
        return Ok(if cluster == configured {
            ShardCountCheck::Matches
        } else {
            ShardCountCheck::Mismatch { cluster }
        });
    }
    match highest_leased_shard(txn).await? {
        Some(highest) if highest + 1 != configured => Ok(ShardCountCheck::Mismatch { cluster: highest + 1 }),
        _ => {
            txn.set(&keyspace::cluster_fact("shard_count"), &configured.to_le_bytes())?;
            Ok(ShardCountCheck::Recorded)
        }
    }
}

/// The format of what this build writes. Each build reads every earlier
/// format; a store is marked with the newest format that opened it, so an
/// older build (which would drop what it does not know) refuses it.
///
/// | format | since | what changed |
/// |---|---|---|
/// | 1 | the first store | (no fact recorded: every store written before the fact) |
/// | 2 | deferred indexing | a mailbox record's `unindexed_from`: rows above it have no `unsn`/`mdat`/`chg` keys yet (`model::unindexed`). A build that rewrote the record without the field would leave them unindexed for ever |
/// | 3 | deferred thread membership | rows above `unindexed_from` have no `thrx` key yet either; a format-2 build would list their threads without them and index them without ever writing it |
/// | 4 | flag tokens | message rows may be version 4 (`message_codec`: known flags as one byte), which format-3 builds cannot decode. Switched on cluster-wide ([`super::format_switch`]), never on open |
///
/// Formats up to 3 are marked when a build opens the store; later ones
/// only by the switch, once every node supports them. Stores without the
/// fact may hold format 2 already (builds of the day before the fact).
pub const STORE_FORMAT: u32 = 4;

/// What checking the store's format against a node's formats found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFormatCheck {
    /// A new store (no format, no node ever registered): it starts at
    /// `format`, the node's newest, as no node of an older build uses it.
    Recorded { format: u32 },
    /// The store's format, which this node reads and writes.
    Readable { store: u32 },
    /// The store had a format before [`LAST_MARKED_ON_OPEN`] (or none, but
    /// nodes ran on it); it is marked with that one now, which every build
    /// since the fact reads.
    Upgraded { from: Option<u32>, to: u32 },
    /// The store has a format newer than the node's: it must not write.
    TooNew { store: u32 },
}

/// Compares the store's format with the formats a node supports (`known`:
/// this build's, or lower when pinned), marking it where a build opening a
/// store may ([`StoreFormatCheck`]). Formats past [`LAST_MARKED_ON_OPEN`]
/// are never marked here: only the cluster-wide switch raises them. A
/// read-then-write, like [`check_shard_count`]: two first starts conflict,
/// and the retry of the loser sees the winner's format.
pub async fn check_store_format(txn: &Txn, known: FormatRange) -> Result<StoreFormatCheck> {
    let store = store_format(txn).await?;
    let check = match store {
        Some(s) if s > known.max => return Ok(StoreFormatCheck::TooNew { store: s }),
        Some(s) if s >= LAST_MARKED_ON_OPEN => return Ok(StoreFormatCheck::Readable { store: s }),
        None if super::nodes::list(txn).await?.is_empty() => StoreFormatCheck::Recorded { format: known.max },
        from => StoreFormatCheck::Upgraded {
            from,
            to: LAST_MARKED_ON_OPEN,
        },
    };
    let format = match check {
        StoreFormatCheck::Recorded { format } => format,
        _ => LAST_MARKED_ON_OPEN,
    };
    mark_store_format(txn, format)?;
    Ok(check)
}

/// The store's recorded format (None: a store from before the fact).
pub async fn store_format(txn: &Txn) -> Result<Option<u32>> {
    fact_u32(txn, "store_format").await
}

/// A cluster fact stored as a u32 LE, if recorded.
async fn fact_u32(txn: &Txn, name: &str) -> Result<Option<u32>> {
    let Some(v) = txn.get(&keyspace::cluster_fact(name)).await? else {
        return Ok(None);
    };
    let bytes: [u8; 4] = v.as_slice().try_into().map_err(|_| StorageError::Corrupt {
        what: format!("cluster fact {name}"),
        detail: format!("{} bytes, expected 4", v.len()),
    })?;
    Ok(Some(u32::from_le_bytes(bytes)))
}

/// Records `format` as the store's, as [`check_store_format`] does for
/// this build's (tests mark a store as a newer build would).
pub fn mark_store_format(txn: &Txn, format: u32) -> Result<()> {
    txn.set(&keyspace::cluster_fact("store_format"), &format.to_le_bytes())
}

async fn highest_leased_shard(txn: &Txn) -> Result<Option<u32>> {
    let (b, e) = keyspace::leases();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(1).reversed()).await?;
    match rows.first() {
        None => Ok(None),
        Some((_, v)) => Ok(Some(super::decode::<Lease>("lease", v)?.shard)),
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::kv::Database;

    async fn check(db: &Database, n: u32) -> ShardCountCheck {
        db.run("t", move |txn| async move { check_shard_count(&txn, n).await })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn first_start_records_then_others_must_agree() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap();
        assert_eq!(check(&db, 64).await, ShardCountCheck::Recorded);
        assert_eq!(check(&db, 64).await, ShardCountCheck::Matches);
        assert_eq!(check(&db, 128).await, ShardCountCheck::Mismatch { cluster: 64 });
    }

    #[tokio::test]
    async fn an_older_store_is_judged_by_its_leases() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap();
        for shard in [0u32, 7, 15] {
            db.run("lease", move |txn| async move {
                super::super::nodes::acquire_lease(&txn, shard, "n1", 1).await
            })
            .await
            .unwrap();
        }
        assert_eq!(check(&db, 32).await, ShardCountCheck::Mismatch { cluster: 16 });
        assert_eq!(check(&db, 16).await, ShardCountCheck::Recorded);
        assert_eq!(check(&db, 32).await, ShardCountCheck::Mismatch { cluster: 16 });
    }

    async fn check_format(db: &Database, known: FormatRange) -> StoreFormatCheck {
        db.run("t", move |txn| async move { check_store_format(&txn, known).await })
            .await
            .unwrap()
    }

    async fn set_format(db: &Database, format: u32) {
        db.run("t", move |txn| async move { mark_store_format(&txn, format) })
            .await
            .unwrap();
    }

    const PINNED_3: FormatRange = FormatRange { min: 1, max: 3 };

    #[tokio::test]
    async fn a_new_store_starts_at_the_first_node_s_newest_format() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap();
        let build = FormatRange::BUILD;
        assert_eq!(
            check_format(&db, build).await,
            StoreFormatCheck::Recorded { format: STORE_FORMAT }
        );
        assert_eq!(
            check_format(&db, build).await,
            StoreFormatCheck::Readable { store: STORE_FORMAT }
        );
        // A node pinned below it (or an older build) refuses, store unchanged.
        for _ in 0..2 {
            assert_eq!(
                check_format(&db, PINNED_3).await,
                StoreFormatCheck::TooNew { store: STORE_FORMAT }
            );
        }
    }

    #[tokio::test]
    async fn opening_never_raises_a_format_past_the_last_marked_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap();
        // A store an older build started: format 3, nodes registered.
        assert_eq!(
            check_format(&db, PINNED_3).await,
            StoreFormatCheck::Recorded { format: 3 }
        );
        super::super::nodes::register_start(&db, "old", "x").await.unwrap();
        // A new build reads it and leaves it at 3: only the switch raises it.
        for _ in 0..2 {
            assert_eq!(
                check_format(&db, FormatRange::BUILD).await,
                StoreFormatCheck::Readable { store: 3 }
            );
        }
        // Formats before 3 are still marked up to 3 (no build that reads
        // only those checks formats at all).
        set_format(&db, 2).await;
        assert_eq!(
            check_format(&db, FormatRange::BUILD).await,
            StoreFormatCheck::Upgraded { from: Some(2), to: 3 }
        );
        assert_eq!(
            check_format(&db, FormatRange::BUILD).await,
            StoreFormatCheck::Readable { store: 3 }
        );
        // A store a later build switched: refused, and left as it is.
        set_format(&db, STORE_FORMAT + 1).await;
        assert_eq!(
            check_format(&db, FormatRange::BUILD).await,
            StoreFormatCheck::TooNew {
                store: STORE_FORMAT + 1
            }
        );
    }
}
