//! Accounts: argon2id password hashes (PHC strings) and their default
//! mailboxes.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use serde::{Deserialize, Serialize};

use super::fenced::{AdminWrite, FencedTxn};
use super::{get_record, mailboxes, next_sequence, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::ids::AccountId;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Account {
    pub id: AccountId,
    pub email: String,
    /// argon2id PHC string.
    pub password_hash: String,
    pub created_ms: u64,
    /// 0 = unlimited.
    #[serde(default)]
    pub quota_bytes: u64,
}

/// Splits and lower-cases `user@domain`.
pub fn normalize(email: &str) -> Result<(String, String)> {
    let email = email.trim().to_ascii_lowercase();
    let (local, domain) = email
        .rsplit_once('@')
        .ok_or_else(|| StorageError::Model(format!("{email:?} is not user@domain")))?;
    if local.is_empty() || local.len() > 64 || local.bytes().any(|b| b <= b' ' || b == b'<' || b == b'>') {
        return Err(StorageError::Model(format!("invalid local part in {email:?}")));
    }
    let domain = super::domains::normalize(domain)?;
    Ok((local.to_string(), domain))
}

/// The argon2id parameters: OWASP's second recommended set (19 MiB, t=2).
/// Passed explicitly so a library default change cannot weaken them.
fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("static argon2 params are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes a password. CPU-heavy (tens of ms): call it off the async workers.
pub fn hash_password(password: &str) -> Result<String> {
    let salt =
        SaltString::encode_b64(&rand::random::<[u8; 16]>()).map_err(|e| StorageError::Model(format!("salt: {e}")))?;
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| StorageError::Model(format!("hash: {e}")))
}

/// Checks a password against a PHC string. CPU-heavy, like `hash_password`.
pub fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => argon2().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

/// Creates an account in an existing local domain, with INBOX and the
/// special-use mailboxes. `password_hash` comes from [`hash_password`].
pub async fn add(txn: &Txn, email: &str, password_hash: &str) -> Result<Account> {
    let (local, domain) = normalize(email)?;
    if super::domains::get(txn, &domain).await?.is_none() {
        return Err(StorageError::NotFound(format!(
            "domain {domain} (add it first: meshmail domain add {domain})"
        )));
    }
    let email = format!("{local}@{domain}");
    let key = keyspace::account(&email);
    if txn.get(&key).await?.is_some() {
        return Err(StorageError::AlreadyExists(format!("account {email}")));
    }
    let id = next_sequence(txn, &keyspace::sequence("account_id")).await?;
    let account = Account {
        id,
        email: email.clone(),
        password_hash: password_hash.to_string(),
        created_ms: now_ms(),
        quota_bytes: 0,
    };
    put_record(txn, &key, &account)?;
    txn.set(&keyspace::account_by_id(id), email.as_bytes())?;
    super::directory::changed(txn)?;
    // The account's first mailboxes, in the transaction that creates it:
    // no shard owner knows the account before this commits.
    mailboxes::create_defaults(&FencedTxn::admin(txn, AdminWrite::NewAccount), id).await?;
    Ok(account)
}

pub async fn get(txn: &Txn, email: &str) -> Result<Option<Account>> {
    let (local, domain) = normalize(email)?;
    get_record(txn, &keyspace::account(&format!("{local}@{domain}")), "account").await
}

/// One page of accounts in email order, starting after `after`.
pub async fn list_page(txn: &Txn, after: Option<&str>, limit: usize) -> Result<Vec<Account>> {
    let (mut b, e) = keyspace::accounts();
    if let Some(a) = after {
        b = crate::kv::key_after(&keyspace::account(a));
    }
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    rows.iter().map(|(_, v)| super::decode("account", v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_hash_roundtrip() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong", &h));
        assert!(!verify_password("x", "not a phc string"));
    }

    #[test]
    fn emails_are_normalized() {
        assert_eq!(
            normalize("Bob@Example.ORG").unwrap(),
            ("bob".into(), "example.org".into())
        );
        assert!(normalize("nobody").is_err());
        assert!(normalize("@example.org").is_err());
    }
}
