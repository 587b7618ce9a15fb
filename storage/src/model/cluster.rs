//! Facts of the whole cluster, fixed when the store is first used: every
//! node must agree on them or the data model breaks. Today one: the number
//! of virtual shards. Two nodes with different counts would map one account
//! to two shards, each with its own writer, so a node configured with
//! another count than the cluster's refuses to start.

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
    let key = keyspace::cluster_fact("shard_count");
    if let Some(v) = txn.get(&key).await? {
        let bytes: [u8; 4] = v.as_slice().try_into().map_err(|_| StorageError::Corrupt {
            what: "cluster fact shard_count".into(),
            detail: format!("{} bytes, expected 4", v.len()),
        })?;
        let cluster = u32::from_le_bytes(bytes);
        return Ok(if cluster == configured {
            ShardCountCheck::Matches
        } else {
            ShardCountCheck::Mismatch { cluster }
        });
    }
    match highest_leased_shard(txn).await? {
        Some(highest) if highest + 1 != configured => Ok(ShardCountCheck::Mismatch { cluster: highest + 1 }),
        _ => {
            txn.set(&key, &configured.to_le_bytes())?;
            Ok(ShardCountCheck::Recorded)
        }
    }
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
    use std::sync::Arc;

    use super::*;
    use crate::kv::Database;
    use crate::kv::sqlite::{SqliteBackend, SqliteOptions};

    async fn check(db: &Database, n: u32) -> ShardCountCheck {
        db.run("t", move |txn| async move { check_shard_count(&txn, n).await })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn first_start_records_then_others_must_agree() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::new(Arc::new(
            SqliteBackend::open(SqliteOptions::new(dir.path().join("kv.sqlite"))).unwrap(),
        ));
        assert_eq!(check(&db, 64).await, ShardCountCheck::Recorded);
        assert_eq!(check(&db, 64).await, ShardCountCheck::Matches);
        assert_eq!(check(&db, 128).await, ShardCountCheck::Mismatch { cluster: 64 });
    }

    #[tokio::test]
    async fn an_older_store_is_judged_by_its_leases() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::new(Arc::new(
            SqliteBackend::open(SqliteOptions::new(dir.path().join("kv.sqlite"))).unwrap(),
        ));
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
}
