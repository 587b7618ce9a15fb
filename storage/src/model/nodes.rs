//! The node registry, per-name generation counters, and shard leases.

use serde::{Deserialize, Serialize};

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
}

/// Registers a starting node and returns its new generation: one more than
/// any earlier start of the same name, so every incarnation is distinct and
/// ordered.
pub async fn register_start(db: &Database, name: &str, mesh_addr: &str) -> Result<u64> {
    let (name, mesh_addr) = (name.to_string(), mesh_addr.to_string());
    db.run("node_register", move |txn| {
        let (name, mesh_addr) = (name.clone(), mesh_addr.clone());
        async move {
            // A read + write (not an atomic add): the new value must be known
            // and two starts of one name must conflict, never share a value.
            let key = keyspace::node_generation(&name);
            let generation = txn.get_i64(&key).await? as u64 + 1;
            txn.set(&key, &(generation as i64).to_le_bytes())?;
            put_record(
                &txn,
                &keyspace::node(&name),
                &NodeRecord {
                    name: name.clone(),
                    generation,
                    mesh_addr: mesh_addr.clone(),
                    started_ms: now_ms(),
                },
            )?;
            Ok::<u64, StorageError>(generation)
        }
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
    };
    put_record(txn, &keyspace::lease(shard), &l)?;
    Ok(l)
}

/// The fence of every write transaction of a shard: reads the lease (so a
/// concurrent takeover conflicts with this transaction) and refuses unless
/// (node, generation, epoch) still own it.
pub async fn check_lease(txn: &Txn, shard: u32, node: &str, generation: u64, epoch: u64) -> Result<()> {
    match lease(txn, shard).await? {
        Some(l) if l.node == node && l.generation == generation && l.epoch == epoch => Ok(()),
        other => Err(StorageError::Model(format!(
            "fenced: shard {shard} is not owned by {node}#{generation} epoch {epoch} (lease: {other:?})"
        ))),
    }
}
