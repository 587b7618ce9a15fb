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
///
/// Stores without the fact may hold format 2 already (builds of the day
/// before the fact); none of those checks, so upgrade every node of a mesh
/// to a build that does before the next format change.
pub const STORE_FORMAT: u32 = 3;

/// What checking the store's format against [`STORE_FORMAT`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFormatCheck {
    /// No format was recorded (a new store, or one from before the fact):
    /// this build's is now.
    Recorded,
    /// The store's format is this build's.
    Matches,
    /// The store had an earlier format, which this build reads; it now has
    /// this build's, so builds of the earlier one refuse it from now on.
    Upgraded { from: u32 },
    /// The store has a format newer than this build's: it must not write.
    TooNew { store: u32 },
}

/// Compares the store's format with [`STORE_FORMAT`] and records this
/// build's when it is newer (or none is recorded). A read-then-write, like
/// [`check_shard_count`]: two nodes of different builds starting at once
/// conflict, and the retry of the loser sees the winner's format.
pub async fn check_store_format(txn: &Txn) -> Result<StoreFormatCheck> {
    let check = match store_format(txn).await? {
        None => StoreFormatCheck::Recorded,
        Some(s) if s == STORE_FORMAT => return Ok(StoreFormatCheck::Matches),
        Some(s) if s > STORE_FORMAT => return Ok(StoreFormatCheck::TooNew { store: s }),
        Some(s) => StoreFormatCheck::Upgraded { from: s },
    };
    mark_store_format(txn, STORE_FORMAT)?;
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

    async fn check_format(db: &Database) -> StoreFormatCheck {
        db.run("t", |txn| async move { check_store_format(&txn).await })
            .await
            .unwrap()
    }

    async fn set_format(db: &Database, format: u32) {
        db.run("t", move |txn| async move { mark_store_format(&txn, format) })
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_store_records_the_newest_format_that_opened_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap();
        assert_eq!(check_format(&db).await, StoreFormatCheck::Recorded);
        assert_eq!(check_format(&db).await, StoreFormatCheck::Matches);

        set_format(&db, STORE_FORMAT - 1).await;
        assert_eq!(
            check_format(&db).await,
            StoreFormatCheck::Upgraded { from: STORE_FORMAT - 1 }
        );
        assert_eq!(check_format(&db).await, StoreFormatCheck::Matches);

        // A store a later build opened: refused, and left as it is.
        set_format(&db, STORE_FORMAT + 1).await;
        for _ in 0..2 {
            assert_eq!(
                check_format(&db).await,
                StoreFormatCheck::TooNew {
                    store: STORE_FORMAT + 1
                }
            );
        }
    }
}
