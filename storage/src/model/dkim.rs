//! DKIM signing keys of local domains, kept in the store so that every node
//! of a mesh, on any machine, signs the same way. The private key is a
//! secret: whoever can read the store can sign for the domain (the same
//! trust as the password hashes next to it).

use serde::{Deserialize, Serialize};

use super::{decode, get_record, put_record};
use crate::error::Result;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum DkimAlgorithm {
    /// RFC 8463 ed25519-sha256.
    Ed25519,
    /// rsa-sha256, 2048 bits.
    Rsa,
}

impl DkimAlgorithm {
    /// The `k=` tag of the DNS record.
    pub fn key_type(self) -> &'static str {
        match self {
            DkimAlgorithm::Ed25519 => "ed25519",
            DkimAlgorithm::Rsa => "rsa",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DkimKey {
    pub domain: String,
    pub selector: String,
    pub algorithm: DkimAlgorithm,
    /// PKCS#8 DER of the private key, base64.
    pub private_pkcs8_b64: String,
    /// The `p=` value of the DNS record (base64 public key).
    pub public_b64: String,
    pub created_ms: u64,
}

impl DkimKey {
    /// The TXT record to publish at `<selector>._domainkey.<domain>`.
    pub fn dns_name(&self) -> String {
        format!("{}._domainkey.{}", self.selector, self.domain)
    }
    pub fn dns_txt(&self) -> String {
        format!("v=DKIM1; k={}; p={}", self.algorithm.key_type(), self.public_b64)
    }
}

/// Stores (or replaces: key rotation) the key of `key.domain`.
pub fn put(txn: &Txn, key: &DkimKey) -> Result<()> {
    put_record(txn, &keyspace::dkim_key(&key.domain.to_ascii_lowercase()), key)
}

pub async fn get(txn: &Txn, domain: &str) -> Result<Option<DkimKey>> {
    get_record(txn, &keyspace::dkim_key(&domain.to_ascii_lowercase()), "dkim key").await
}

pub async fn list(txn: &Txn, limit: usize) -> Result<Vec<DkimKey>> {
    let (b, e) = keyspace::dkim_keys();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    rows.iter().map(|(_, v)| decode("dkim key", v)).collect()
}
