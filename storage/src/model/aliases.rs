//! Address routing records: aliases (`sales@example.org` → one or more
//! targets, local or remote) and domain catch-alls (`@example.org` → targets
//! for every address of the domain that matches nothing else). Resolution
//! (exact account, exact alias, subaddress, catch-all) lives with the SMTP
//! recipient check; this module only stores and lists the records.

use serde::{Deserialize, Serialize};

use super::{get_record, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Targets per alias: an alias is a short list, not a mailing list.
pub const TARGETS_MAX: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Alias {
    /// `local@domain`, or `@domain` for a catch-all; lower-case.
    pub address: String,
    /// `local@domain` addresses, local or remote, lower-case.
    pub targets: Vec<String>,
    pub created_ms: u64,
}

impl Alias {
    pub fn is_catch_all(&self) -> bool {
        self.address.starts_with('@')
    }
}

/// Lower-cases and checks an alias address: `local@domain` or `@domain`.
pub fn normalize_address(address: &str) -> Result<String> {
    let a = address.trim();
    match a.strip_prefix('@') {
        Some(domain) => Ok(format!("@{}", super::domains::normalize(domain)?)),
        None => {
            let (local, domain) = super::accounts::normalize(a)?;
            Ok(format!("{local}@{domain}"))
        }
    }
}

/// The domain part of an alias address.
fn domain_of(address: &str) -> &str {
    address.rsplit_once('@').map_or(address, |(_, d)| d)
}

/// Adds or replaces an alias. Its domain must be local (an alias for a
/// foreign domain would never be asked for); the alias must not shadow an
/// account (accounts win at RCPT, so it would be dead).
pub async fn put(txn: &Txn, address: &str, targets: &[String]) -> Result<Alias> {
    let address = normalize_address(address)?;
    if super::domains::get(txn, domain_of(&address)).await?.is_none() {
        return Err(StorageError::NotFound(format!(
            "domain {} (add it first: meshmail domain add {})",
            domain_of(&address),
            domain_of(&address)
        )));
    }
    if !address.starts_with('@') && super::accounts::get(txn, &address).await?.is_some() {
        return Err(StorageError::AlreadyExists(format!(
            "account {address} (an alias would never be used)"
        )));
    }
    if targets.is_empty() || targets.len() > TARGETS_MAX {
        return Err(StorageError::Model(format!(
            "an alias needs 1 to {TARGETS_MAX} targets, got {}",
            targets.len()
        )));
    }
    let mut normalized = Vec::with_capacity(targets.len());
    for t in targets {
        let (local, domain) = super::accounts::normalize(t)?;
        let t = format!("{local}@{domain}");
        if t == address {
            return Err(StorageError::Model(format!("alias {address} points at itself")));
        }
        if !normalized.contains(&t) {
            normalized.push(t);
        }
    }
    let alias = Alias {
        address: address.clone(),
        targets: normalized,
        created_ms: now_ms(),
    };
    put_record(txn, &keyspace::alias(&address), &alias)?;
    super::directory::changed(txn)?;
    Ok(alias)
}

pub async fn get(txn: &Txn, address: &str) -> Result<Option<Alias>> {
    get_record(txn, &keyspace::alias(&normalize_address(address)?), "alias").await
}

/// Removes an alias; false if there was none.
pub async fn remove(txn: &Txn, address: &str) -> Result<bool> {
    let key = keyspace::alias(&normalize_address(address)?);
    let existed = txn.get(&key).await?.is_some();
    txn.clear(&key)?;
    super::directory::changed(txn)?;
    Ok(existed)
}

/// Aliases in address order, at most `limit` (≤ 10,000: one range read).
pub async fn list(txn: &Txn, limit: usize) -> Result<Vec<Alias>> {
    let (b, e) = keyspace::aliases();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit.min(10_000))).await?;
    rows.iter().map(|(_, v)| super::decode("alias", v)).collect()
}
