//! Local mail domains.

use serde::{Deserialize, Serialize};

use super::{get_record, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    pub created_ms: u64,
}

/// Lower-cases and checks a domain name.
pub fn normalize(name: &str) -> Result<String> {
    let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let valid = !n.is_empty()
        && n.len() <= 253
        && n.split('.')
            .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !valid {
        return Err(StorageError::Model(format!("invalid domain name {name:?}")));
    }
    Ok(n)
}

pub async fn add(txn: &Txn, name: &str) -> Result<Domain> {
    let name = normalize(name)?;
    let key = keyspace::domain(&name);
    if txn.get(&key).await?.is_some() {
        return Err(StorageError::AlreadyExists(format!("domain {name}")));
    }
    let d = Domain {
        name,
        created_ms: now_ms(),
    };
    put_record(txn, &key, &d)?;
    super::directory::changed(txn)?;
    Ok(d)
}

pub async fn get(txn: &Txn, name: &str) -> Result<Option<Domain>> {
    get_record(txn, &keyspace::domain(&normalize(name)?), "domain").await
}

/// Every domain (there are few: one chunk).
pub async fn list(txn: &Txn) -> Result<Vec<Domain>> {
    let (b, e) = keyspace::domains();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(10_000)).await?;
    rows.iter().map(|(_, v)| super::decode("domain", v)).collect()
}
