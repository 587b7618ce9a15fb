//! The node registry, per-name generation counters, and shard leases.

use serde::{Deserialize, Serialize};

use super::cluster;
use super::fenced::{self, FencedTxn};
use super::format_switch::FormatRange;
use super::{decode, get_record, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{Database, RangeOptions, Txn};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NodeRecord {
    pub name: String,
    pub generation: u64,
    /// The mesh address peers dial.
    pub mesh_addr: String,
    pub started_ms: u64,
    /// Set by `meshmail node forget`: the node left for good, so peers drop
    /// it from their directory and it no longer counts against quorum. A
    /// start of the name writes a fresh record, which clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten_ms: Option<u64>,
    /// The build that started this incarnation (`meshmail --version`).
    /// None in records of builds before the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The store formats this incarnation reads and may write. None in
    /// records of builds before the field, which knew formats up to 3
    /// ([`FormatRange::BEFORE_RECORDS`]): the format switch waits for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formats: Option<FormatRange>,
}

impl NodeRecord {
    /// The formats this node said it supports, or what builds that did not
    /// say supported.
    pub fn formats(&self) -> FormatRange {
        self.formats.unwrap_or(FormatRange::BEFORE_RECORDS)
    }
}

/// What a starting node says of itself in its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    pub mesh_addr: String,
    pub build: String,
    pub formats: FormatRange,
}

/// The last sign of life of a node name: written by its mesh runtime every
/// [`SEEN_INTERVAL_MS`], read by `meshmail node forget` (which refuses a
/// node seen lately) and `meshmail status`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct NodeSeen {
    pub generation: u64,
    pub seen_ms: u64,
}

/// How often a running node records [`NodeSeen`].
pub const SEEN_INTERVAL_MS: u64 = 1_000;

/// Records that (name, generation) is alive now. A blind write (no read):
/// it never conflicts, and the newest incarnation's rows win within a
/// second because the superseded one stops writing.
pub async fn record_seen(db: &Database, name: &str, generation: u64) -> Result<()> {
    let name = name.to_string();
    db.run("node_seen", move |txn| {
        let name = name.clone();
        async move {
            put_record(
                &txn,
                &keyspace::node_seen(&name),
                &NodeSeen {
                    generation,
                    seen_ms: now_ms(),
                },
            )
        }
    })
    .await
}

pub async fn seen(txn: &Txn, name: &str) -> Result<Option<NodeSeen>> {
    get_record(txn, &keyspace::node_seen(name), "node_seen").await
}

/// Why `forget` refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ForgetRefused {
    #[error("no node named {0} is registered")]
    Unknown(String),
    #[error("{name} is already forgotten")]
    AlreadyForgotten { name: String },
    #[error(
        "{name}#{generation} was alive {ago_ms} ms ago (holding {leases} shard leases): stop it (or `meshmail node drain` it) first; a node is gone only after {silence_ms} ms without a sign of life"
    )]
    Alive {
        name: String,
        generation: u64,
        ago_ms: u64,
        leases: usize,
        silence_ms: u64,
    },
}

/// What `forget` did: the record as forgotten, and how many shard leases
/// the gone node still held (survivors take them over once it no longer
/// counts against their quorum).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forgotten {
    pub record: NodeRecord,
    pub leases_held: usize,
}

/// Marks `name` as gone for good, in one transaction that also checks it
/// really is gone: no sign of life (see [`record_seen`]) for `silence_ms`.
/// Leases it still holds do not block (a crashed node never released
/// them); they are counted so the operator sees what will be taken over.
/// `Ok(Err(_))` is a refusal; `Err(_)` a store failure.
pub async fn forget(
    db: &Database,
    name: &str,
    silence_ms: u64,
) -> Result<std::result::Result<Forgotten, ForgetRefused>> {
    let name = name.to_string();
    db.run("node_forget", move |txn| {
        let name = name.clone();
        async move {
            let Some(mut record) = get_record::<NodeRecord>(&txn, &keyspace::node(&name), "node").await? else {
                return Ok(Err(ForgetRefused::Unknown(name)));
            };
            if record.forgotten_ms.is_some() {
                return Ok(Err(ForgetRefused::AlreadyForgotten { name }));
            }
            let mut leases = 0;
            let mut from = 0;
            loop {
                let page = list_leases(&txn, from, 1024).await?;
                leases += page.iter().filter(|l| !l.released && l.node == name).count();
                match page.last() {
                    Some(last) if page.len() == 1024 => from = last.shard + 1,
                    _ => break,
                }
            }
            let now = now_ms();
            if let Some(s) = seen(&txn, &name).await?
                && now.saturating_sub(s.seen_ms) < silence_ms
            {
                return Ok(Err(ForgetRefused::Alive {
                    name,
                    generation: s.generation,
                    ago_ms: now.saturating_sub(s.seen_ms),
                    leases,
                    silence_ms,
                }));
            }
            record.forgotten_ms = Some(now);
            put_record(&txn, &keyspace::node(&name), &record)?;
            Ok(Ok(Forgotten {
                record,
                leases_held: leases,
            }))
        }
    })
    .await
}

/// Registers a starting node of this build, supporting every format it
/// knows (see [`register`]).
pub async fn register_start(db: &Database, name: &str, mesh_addr: &str) -> Result<u64> {
    let me = Registration {
        name: name.to_string(),
        mesh_addr: mesh_addr.to_string(),
        build: env!("CARGO_PKG_VERSION").to_string(),
        formats: FormatRange::BUILD,
    };
    register(db, &me).await
}

/// Registers a starting node and returns its new generation: one more than
/// any earlier start of the same name, so every incarnation is distinct and
/// ordered. Refuses ([`StorageError::FormatTooNew`]) a node whose formats
/// stop below the store's: the store's format is read in this transaction,
/// so a concurrent format switch (which reads every node record) and this
/// registration conflict, and the node never joins a store it cannot read.
pub async fn register(db: &Database, me: &Registration) -> Result<u64> {
    db.run("node_register", move |txn| async move {
        if let Some(store) = cluster::store_format(&txn).await?
            && store > me.formats.max
        {
            return Err(StorageError::FormatTooNew {
                store,
                known: me.formats.max,
                pinned: me.formats.max < FormatRange::BUILD.max,
            });
        }
        // A read + write (not an atomic add): the new value must be known
        // and two starts of one name must conflict, never share a value.
        let key = keyspace::node_generation(&me.name);
        let generation = txn.get_i64(&key).await? as u64 + 1;
        txn.set(&key, &(generation as i64).to_le_bytes())?;
        put_record(
            &txn,
            &keyspace::node(&me.name),
            &NodeRecord {
                name: me.name.clone(),
                generation,
                mesh_addr: me.mesh_addr.clone(),
                started_ms: now_ms(),
                forgotten_ms: None,
                build: Some(me.build.clone()),
                formats: Some(me.formats),
            },
        )?;
        Ok::<u64, StorageError>(generation)
    })
    .await
}

pub async fn list(txn: &Txn) -> Result<Vec<NodeRecord>> {
    let (b, e) = keyspace::nodes();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(10_000)).await?;
    rows.iter().map(|(_, v)| decode("node", v)).collect()
}

/// Ownership of one virtual shard.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lease {
    pub shard: u32,
    pub node: String,
    pub generation: u64,
    /// Grows at every change of owner.
    pub epoch: u64,
    pub acquired_ms: u64,
    /// Set by a graceful hand-off. The record (and so its epoch) is kept
    /// rather than cleared: the next owner's epoch must still be higher.
    /// `serde(default)` reads leases written before the field existed.
    #[serde(default)]
    pub released: bool,
}

pub async fn lease(txn: &Txn, shard: u32) -> Result<Option<Lease>> {
    get_record(txn, &keyspace::lease(shard), "lease").await
}

/// Takes a shard for (node, generation) with the next epoch.
pub async fn acquire_lease(txn: &Txn, shard: u32, node: &str, generation: u64) -> Result<Lease> {
    let epoch = lease(txn, shard).await?.map(|l| l.epoch).unwrap_or(0) + 1;
    let l = Lease {
        shard,
        node: node.to_string(),
        generation,
        epoch,
        acquired_ms: now_ms(),
        released: false,
    };
    put_record(txn, &keyspace::lease(shard), &l)?;
    Ok(l)
}

/// The fence of every write transaction of a shard: [`fenced::fence`],
/// which reads the lease and refuses unless (node, generation, epoch) still
/// own it. The [`FencedTxn`] it returns is what the shard's writes take.
pub async fn check_lease<'a>(
    txn: &'a Txn,
    shard: u32,
    node: &str,
    generation: u64,
    epoch: u64,
) -> Result<FencedTxn<'a>> {
    fenced::fence(txn, shard, node, generation, epoch).await
}

/// One write fenced like every write of a shard ([`check_lease`]) that the
/// mail model never reads: the `fence-probe` fault hook commits it to show
/// that a stale incarnation cannot write. Stores `node` under the
/// `fence_probe` cursor.
pub async fn fence_probe(txn: &Txn, shard: u32, node: &str, generation: u64, epoch: u64) -> Result<()> {
    let fenced = check_lease(txn, shard, node, generation, epoch).await?;
    fenced.set(&keyspace::cursor("fence_probe"), node.as_bytes())
}

/// Marks a lease released (graceful hand-off) if (node, generation, epoch)
/// still hold it; returns whether it did. Anything else (another owner, a
/// newer epoch, already released, no lease) is left alone and returns
/// `false`, so a repeated or late release is harmless.
pub async fn release_lease(txn: &Txn, shard: u32, node: &str, generation: u64, epoch: u64) -> Result<bool> {
    match lease(txn, shard).await? {
        Some(mut l) if !l.released && l.node == node && l.generation == generation && l.epoch == epoch => {
            l.released = true;
            put_record(txn, &keyspace::lease(shard), &l)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The leases of shards `from_shard..`, ascending, at most `limit`.
///
/// Snapshot reads (no read conflict): a scan over many shards must not make
/// the transaction conflict with every unrelated lease change. A caller that
/// acts on a lease re-reads it with [`lease`], which does conflict.
pub async fn list_leases(txn: &Txn, from_shard: u32, limit: usize) -> Result<Vec<Lease>> {
    let (_, end) = keyspace::leases();
    let begin = keyspace::lease(from_shard);
    let rows = txn
        .get_range(&begin, &end, RangeOptions::limit(limit).snapshot())
        .await?;
    rows.iter().map(|(_, v)| decode("lease", v)).collect()
}

#[cfg(test)]
mod tests {

    use super::*;

    fn db(dir: &tempfile::TempDir) -> Database {
        crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap()
    }

    async fn acquire(db: &Database, shard: u32, node: &str, generation: u64) -> Lease {
        let node = node.to_string();
        db.run("test_acquire", |txn| {
            let node = node.clone();
            async move { acquire_lease(&txn, shard, &node, generation).await }
        })
        .await
        .unwrap()
    }

    async fn release(db: &Database, shard: u32, node: &'static str, generation: u64, epoch: u64) -> bool {
        db.run("test_release", |txn| async move {
            release_lease(&txn, shard, node, generation, epoch).await
        })
        .await
        .unwrap()
    }

    async fn check(db: &Database, shard: u32, node: &'static str, generation: u64, epoch: u64) -> Result<()> {
        db.read("test_check", |txn| async move {
            check_lease(&txn, shard, node, generation, epoch).await.map(drop)
        })
        .await
    }

    #[tokio::test]
    async fn release_only_by_the_holder_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(&dir);
        let l = acquire(&db, 3, "a", 1).await;
        // Wrong generation, wrong epoch, wrong node: refused, lease intact.
        assert!(!release(&db, 3, "a", 2, l.epoch).await);
        assert!(!release(&db, 3, "a", 1, l.epoch + 1).await);
        assert!(!release(&db, 3, "b", 1, l.epoch).await);
        check(&db, 3, "a", 1, l.epoch).await.unwrap();
        assert!(release(&db, 3, "a", 1, l.epoch).await);
        assert!(!release(&db, 3, "a", 1, l.epoch).await, "a second release is a no-op");
        // The released lease fences its former owner.
        assert!(check(&db, 3, "a", 1, l.epoch).await.is_err());
        // No lease at all: nothing to release.
        assert!(!release(&db, 4, "a", 1, 1).await);
    }

    #[tokio::test]
    async fn acquire_after_release_bumps_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(&dir);
        let first = acquire(&db, 9, "a", 1).await;
        assert!(release(&db, 9, "a", 1, first.epoch).await);
        let second = acquire(&db, 9, "b", 1).await;
        assert_eq!(second.epoch, first.epoch + 1);
        assert!(!second.released);
        check(&db, 9, "b", 1, second.epoch).await.unwrap();
    }

    #[tokio::test]
    async fn list_leases_pages_in_shard_order() {
        let dir = tempfile::tempdir().unwrap();
        let db = db(&dir);
        // Out of order, across a tuple-encoding width change (255 → 256).
        for shard in [300u32, 2, 256, 0, 255, 17] {
            acquire(&db, shard, "a", 1).await;
        }
        let page = |from: u32, limit: usize| {
            let db = db.clone();
            async move {
                db.read("test_list", |txn| async move { list_leases(&txn, from, limit).await })
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|l| l.shard)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(page(0, 100).await, vec![0, 2, 17, 255, 256, 300]);
        assert_eq!(page(0, 2).await, vec![0, 2]);
        assert_eq!(page(3, 3).await, vec![17, 255, 256]);
        assert_eq!(page(256, 100).await, vec![256, 300]);
        assert_eq!(page(301, 100).await, Vec::<u32>::new());
    }

    #[test]
    fn old_records_without_released_decode() {
        let old = br#"{"shard":1,"node":"a","generation":2,"epoch":3,"acquired_ms":4}"#;
        let l: Lease = decode("lease", old).unwrap();
        assert!(!l.released);
    }
}
