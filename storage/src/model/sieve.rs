//! Sieve scripts (issue 43): each account's scripts by name, which one is
//! active, and the ids its `duplicate` tests saw. The store keeps the
//! source; protocols compile it at upload (refusing bad scripts) and
//! cache the compiled form per node by `version`, so delivery never
//! re-parses. A script is one value: its size limit (64 KiB, checked by
//! the compiler) stays under FDB's 100 KB value limit.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{decode, get_record, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::ids::AccountId;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Scripts one account may keep.
pub const SCRIPTS_MAX: usize = 32;
/// Script source bytes (the compiler refuses larger ones first).
pub const SCRIPT_BYTES_MAX: usize = 64 * 1024;
/// Script names, in bytes: RFC 5804 §1.6 asks for 128 characters,
/// which UTF-8 may spell in 512 bytes, and RFC 9661 §1.2.1 for at least
/// 512 octets (`maxSizeScriptName`). A key of ~530 bytes is far under
/// FDB's 10 KB key limit.
pub const NAME_BYTES_MAX: usize = 512;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredScript {
    pub name: String,
    pub source: String,
    /// Unique per stored text (ms at the write): the compile cache's key.
    pub version: u64,
    /// The script's id (JMAP's SieveScript id): set when the name is
    /// first stored, kept when the text is replaced or the script renamed,
    /// unique in the account. 0 in records written before the field
    /// existed: [`StoredScript::id`] is then the version, which a later
    /// [`put`] keeps as the id, so it never changes either.
    #[serde(default)]
    pub id: u64,
}

impl StoredScript {
    /// The script's stable id (see the field).
    pub fn id(&self) -> u64 {
        if self.id != 0 { self.id } else { self.version }
    }
}

/// An id for a new script of the account: above every id it holds, so
/// two scripts never share one.
fn next_id(scripts: &[StoredScript], now: u64) -> u64 {
    scripts.iter().map(|s| s.id() + 1).fold(now.max(1), u64::max)
}

/// The active script's name and the version of its text, kept in step by
/// [`put`] and [`activate`]: delivery reads this one small record and
/// finds the compiled script in its cache without reading the source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Active {
    pub name: String,
    /// 0 in records written before the field existed: read the script.
    #[serde(default)]
    pub version: u64,
}

fn check(name: &str, source: &str) -> Result<()> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX || name.contains(['/', '\0']) {
        return Err(StorageError::Model(format!("invalid script name {name:?}")));
    }
    if source.len() > SCRIPT_BYTES_MAX {
        return Err(StorageError::Model(format!(
            "script larger than {SCRIPT_BYTES_MAX} bytes"
        )));
    }
    Ok(())
}

/// Stores (or replaces) a script the caller has compiled successfully.
pub async fn put(txn: &Txn, account: AccountId, name: &str, source: &str) -> Result<StoredScript> {
    check(name, source)?;
    let key = keyspace::sieve_script(account, name);
    let existing: Option<StoredScript> = get_record(txn, &key, "sieve script").await?;
    let now = now_ms();
    let id = match &existing {
        Some(e) => e.id(),
        None => {
            let scripts = list(txn, account).await?;
            if scripts.len() >= SCRIPTS_MAX {
                return Err(StorageError::Model(format!(
                    "an account keeps at most {SCRIPTS_MAX} scripts"
                )));
            }
            next_id(&scripts, now)
        }
    };
    let version = now.max(existing.map_or(0, |e| e.version + 1));
    let script = StoredScript {
        name: name.to_string(),
        source: source.to_string(),
        version,
        id,
    };
    put_record(txn, &key, &script)?;
    let active_key = keyspace::sieve_active(account);
    let act: Option<Active> = get_record(txn, &active_key, "sieve active").await?;
    if act.is_some_and(|a| a.name == name) {
        put_record(
            txn,
            &active_key,
            &Active {
                name: name.to_string(),
                version,
            },
        )?;
    }
    Ok(script)
}

pub async fn get(txn: &Txn, account: AccountId, name: &str) -> Result<Option<StoredScript>> {
    get_record(txn, &keyspace::sieve_script(account, name), "sieve script").await
}

/// The account's scripts in name order (at most [`SCRIPTS_MAX`]).
pub async fn list(txn: &Txn, account: AccountId) -> Result<Vec<StoredScript>> {
    let (b, e) = keyspace::sieve_scripts(account);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(SCRIPTS_MAX + 1)).await?;
    rows.iter().map(|(_, v)| decode("sieve script", v)).collect()
}

/// Makes `name` the active script (`None`: no script runs).
pub async fn activate(txn: &Txn, account: AccountId, name: Option<&str>) -> Result<()> {
    // Whether an account has an active script is what RCPT learns and its
    // cache keeps (`accept::recipient`): the directory changes with it.
    super::directory::changed(txn)?;
    let key = keyspace::sieve_active(account);
    match name {
        None => txn.clear(&key),
        Some(n) => {
            let Some(s) = get(txn, account, n).await? else {
                return Err(StorageError::Model(format!("no script named {n:?}")));
            };
            put_record(
                txn,
                &key,
                &Active {
                    name: n.to_string(),
                    version: s.version,
                },
            )
        }
    }
}

/// The active script's name and version, without its text.
pub async fn active_ref(txn: &Txn, account: AccountId) -> Result<Option<Active>> {
    get_record(txn, &keyspace::sieve_active(account), "sieve active").await
}

/// The active script, if any.
pub async fn active(txn: &Txn, account: AccountId) -> Result<Option<StoredScript>> {
    let Some(a) = get_record::<Active>(txn, &keyspace::sieve_active(account), "sieve active").await? else {
        return Ok(None);
    };
    get(txn, account, &a.name).await
}

/// Deletes a script; the active one cannot be (RFC 5804 §2.10 does the
/// same), so delivery never points at nothing.
pub async fn delete(txn: &Txn, account: AccountId, name: &str) -> Result<bool> {
    let act: Option<Active> = get_record(txn, &keyspace::sieve_active(account), "sieve active").await?;
    if act.is_some_and(|a| a.name == name) {
        return Err(StorageError::Model(format!("{name:?} is the active script")));
    }
    let key = keyspace::sieve_script(account, name);
    let existed = txn.get(&key).await?.is_some();
    txn.clear(&key)?;
    Ok(existed)
}

/// Renames a script in one transaction (ManageSieve RENAMESCRIPT, RFC 5804
/// §2.11.1): the text and its version move unchanged (the compile cache
/// stays valid), and the active record follows, so renaming the active
/// script keeps it active. [`StorageError::NotFound`] when `old` is
/// missing, [`StorageError::AlreadyExists`] when `new` is taken.
pub async fn rename(txn: &Txn, account: AccountId, old: &str, new: &str) -> Result<()> {
    let Some(script) = get(txn, account, old).await? else {
        return Err(StorageError::NotFound(format!("script {old:?}")));
    };
    check(new, &script.source)?;
    if old == new {
        return Ok(());
    }
    let new_key = keyspace::sieve_script(account, new);
    if txn.get(&new_key).await?.is_some() {
        return Err(StorageError::AlreadyExists(format!("script {new:?}")));
    }
    txn.clear(&keyspace::sieve_script(account, old))?;
    put_record(
        txn,
        &new_key,
        &StoredScript {
            name: new.to_string(),
            ..script
        },
    )?;
    let active_key = keyspace::sieve_active(account);
    let act: Option<Active> = get_record(txn, &active_key, "sieve active").await?;
    if let Some(a) = act.filter(|a| a.name == old) {
        put_record(
            txn,
            &active_key,
            &Active {
                name: new.to_string(),
                version: a.version,
            },
        )?;
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Seen {
    pub expires_ms: u64,
}

fn id_hash(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))
}

/// Whether a `duplicate` id was seen and has not expired.
pub async fn duplicate_seen(txn: &Txn, account: AccountId, id: &str, now_ms: u64) -> Result<bool> {
    let seen: Option<Seen> = get_record(
        txn,
        &keyspace::sieve_duplicate(account, &id_hash(id)),
        "sieve duplicate",
    )
    .await?;
    Ok(seen.is_some_and(|s| s.expires_ms > now_ms))
}

/// Records an id until `expires_ms` (keys stay small: the id is hashed).
/// Expired records are overwritten by the next sighting; an account's
/// removal takes the rest.
pub fn mark_duplicate(txn: &Txn, account: AccountId, id: &str, expires_ms: u64) -> Result<()> {
    put_record(
        txn,
        &keyspace::sieve_duplicate(account, &id_hash(id)),
        &Seen { expires_ms },
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Database;
    use crate::kv::sqlite::{SqliteBackend, SqliteOptions};

    #[tokio::test]
    async fn scripts_activate_list_delete_and_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let backend = SqliteBackend::open(SqliteOptions::new(dir.path().join("s.sqlite"))).unwrap();
        let db = Database::new(Arc::new(backend));
        db.run("t", |txn| async move {
            let a = put(&txn, 7, "main", "keep;").await?;
            let other = put(&txn, 7, "other", "discard;").await?;
            assert!(a.id() > 0 && other.id() > a.id(), "each script has its own id");
            assert_eq!(active(&txn, 7).await?, None);
            activate(&txn, 7, Some("main")).await?;
            assert_eq!(active(&txn, 7).await?.map(|s| s.version), Some(a.version));
            assert_eq!(active_ref(&txn, 7).await?.map(|r| r.version), Some(a.version));
            assert!(activate(&txn, 7, Some("nope")).await.is_err());
            assert!(delete(&txn, 7, "main").await.is_err(), "the active script stays");
            assert!(delete(&txn, 7, "other").await?);
            let names: Vec<String> = list(&txn, 7).await?.into_iter().map(|s| s.name).collect();
            assert_eq!(names, vec!["main"]);
            let b = put(&txn, 7, "main", "discard;").await?;
            assert!(b.version > a.version, "a new text is a new cache key");
            assert_eq!(b.id(), a.id(), "a new text keeps the script's id");
            assert_eq!(
                active_ref(&txn, 7).await?.map(|r| r.version),
                Some(b.version),
                "a new text of the active script moves the active record"
            );
            assert!(put(&txn, 7, "a/b", "keep;").await.is_err());
            put(&txn, 7, "spare", "keep;").await?;
            assert!(matches!(
                rename(&txn, 7, "main", "spare").await,
                Err(StorageError::AlreadyExists(_))
            ));
            assert!(matches!(
                rename(&txn, 7, "nope", "x").await,
                Err(StorageError::NotFound(_))
            ));
            rename(&txn, 7, "main", "renamed").await?;
            assert_eq!(get(&txn, 7, "main").await?, None);
            assert_eq!(get(&txn, 7, "renamed").await?.map(|s| s.version), Some(b.version));
            assert_eq!(
                get(&txn, 7, "renamed").await?.map(|s| s.id()),
                Some(a.id()),
                "a rename keeps the id"
            );
            assert_eq!(
                active_ref(&txn, 7).await?,
                Some(Active {
                    name: "renamed".into(),
                    version: b.version
                }),
                "the active script stays active under its new name"
            );
            // A record written before ids existed: its id is its version,
            // and a new text keeps it.
            let legacy = serde_json::json!({"name": "old", "source": "keep;", "version": 5});
            txn.set(&keyspace::sieve_script(7, "old"), &serde_json::to_vec(&legacy).unwrap())?;
            assert_eq!(get(&txn, 7, "old").await?.map(|s| s.id()), Some(5));
            assert_eq!(put(&txn, 7, "old", "discard;").await?.id(), 5);
            assert!(!duplicate_seen(&txn, 7, "id", 1000).await?);
            mark_duplicate(&txn, 7, "id", 2000)?;
            assert!(duplicate_seen(&txn, 7, "id", 1000).await?);
            assert!(!duplicate_seen(&txn, 7, "id", 2000).await?);
            assert!(!duplicate_seen(&txn, 8, "id", 1000).await?);
            Ok::<(), StorageError>(())
        })
        .await
        .unwrap();
    }
}
