//! An account's Sieve scripts as a client manages them, whichever
//! protocol it speaks: ManageSieve's session (RFC 5804) and JMAP's
//! SieveScript methods (RFC 9661) both call this module, so a script is
//! checked and stored one way. A script is compiled with
//! [`crate::sieve::compile`] before anything is written (one that would
//! fail at every delivery is refused with its line and column), then
//! stored in one transaction on `storage::model::sieve`, the records
//! delivery reads. Every operation is one transaction; no shard actor
//! owns these records (as `meshmail sieve put` writes them).
//!
//! It sits in the `managesieve` layer but above neither of ManageSieve's
//! sublayers: it uses only [`crate::sieve`], the store and its own
//! error type, so JMAP's methods may name it without reaching into
//! ManageSieve's session.

use meshmail_storage::ids::AccountId;
use meshmail_storage::kv::Txn;
use meshmail_storage::model::sieve::{self as store, SCRIPTS_MAX, StoredScript};
use meshmail_storage::{Database, StorageError};

use crate::sieve::{self, SieveError};

/// Why a script operation changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script does not compile; the text starts with `line N, column
    /// M:` (ManageSieve's and Dovecot's shape) when the error has a place.
    #[error("{0}")]
    Invalid(String),
    /// Over [`sieve::SCRIPT_BYTES_MAX`].
    #[error("scripts are limited to {} bytes", sieve::SCRIPT_BYTES_MAX)]
    TooLarge,
    #[error("there is no script by that name")]
    NotFound,
    #[error("a script by that name already exists")]
    AlreadyExists,
    #[error("the active script cannot be deleted")]
    Active,
    /// The account keeps [`SCRIPTS_MAX`] scripts already.
    #[error("an account keeps at most {SCRIPTS_MAX} scripts")]
    TooMany,
    #[error("the store is unavailable: {0}")]
    Store(#[from] StorageError),
}

/// The text of a compile error: the line and column first, as clients
/// show it next to the script (Dovecot's `line N: ...` shape).
pub fn compile_error_text(e: &SieveError) -> String {
    let text = e.to_string();
    match e.pos() {
        Some(pos) => {
            let what = text.strip_prefix(&format!("{pos}: ")).unwrap_or(&text);
            format!("line {}, column {}: {what}", pos.line, pos.col)
        }
        None => text,
    }
}

/// The script's text when it compiles for the account whose address is
/// `email` (a literal redirect to it is refused).
pub fn check(source: &[u8], email: &str) -> Result<String, ScriptError> {
    let ctx = sieve::Context {
        own_addresses: vec![email.to_ascii_lowercase()],
    };
    if let Err(e) = sieve::compile(source, &ctx) {
        return Err(match e {
            SieveError::TooLarge { .. } => ScriptError::TooLarge,
            e => ScriptError::Invalid(compile_error_text(&e)),
        });
    }
    // compile() refuses invalid UTF-8 with its position.
    String::from_utf8(source.to_vec()).map_err(|_| ScriptError::Invalid("not UTF-8".into()))
}

/// Whether one more script may be stored under `name`.
pub async fn room_for(txn: &Txn, account: AccountId, name: &str) -> Result<bool, StorageError> {
    Ok(store::get(txn, account, name).await?.is_some() || store::list(txn, account).await?.len() < SCRIPTS_MAX)
}

/// Compiles `source` and stores it under `name` (a new script, or a new
/// text for an existing one, which keeps its id and, if active, stays
/// active). `only_new`: refuse a name that exists (`AlreadyExists`).
pub async fn put(
    db: &Database,
    account: AccountId,
    email: &str,
    name: &str,
    source: &[u8],
    only_new: bool,
) -> Result<StoredScript, ScriptError> {
    let text = check(source, email)?;
    db.run("sieve_script_put", |txn| {
        let (name, text) = (name.to_string(), text.clone());
        async move {
            let exists = store::get(&txn, account, &name).await?.is_some();
            if exists && only_new {
                return Ok(Err(ScriptError::AlreadyExists));
            }
            if !room_for(&txn, account, &name).await? {
                return Ok(Err(ScriptError::TooMany));
            }
            Ok::<_, StorageError>(Ok(store::put(&txn, account, &name, &text).await?))
        }
    })
    .await?
}

/// Tells the account's push clients (JMAP EventSource and WebSocket) that
/// its scripts changed: a hint on the account with no mailbox, as a
/// mailbox write publishes after its commit. It reaches the streams on
/// this node and, when this node owns the account, the nodes watching it;
/// a stream watching through another owner sees the change at its next
/// wake-up (hints are hints).
pub fn changed(ctx: &meshmail_actors::node::NodeCtx, account: AccountId) {
    ctx.publish_hint(meshmail_actors::shard::ChangeHint {
        account,
        mailbox: 0,
        uid: 0,
        modseq: 0,
        committed_at: std::time::Instant::now(),
    });
}

/// Makes `name` the active script (`None`: none runs).
pub async fn activate(db: &Database, account: AccountId, name: Option<&str>) -> Result<(), ScriptError> {
    let done = db
        .run("sieve_script_activate", |txn| {
            let name = name.map(str::to_string);
            async move {
                if let Some(n) = &name
                    && store::get(&txn, account, n).await?.is_none()
                {
                    return Ok(Err(ScriptError::NotFound));
                }
                store::activate(&txn, account, name.as_deref()).await?;
                Ok::<_, StorageError>(Ok(()))
            }
        })
        .await?;
    // RCPT caches whether the account has an active script.
    crate::accept::rcpt_cache::local_change();
    done
}

/// Deletes a script that is not the active one.
pub async fn delete(db: &Database, account: AccountId, name: &str) -> Result<(), ScriptError> {
    db.run("sieve_script_delete", |txn| {
        let name = name.to_string();
        async move {
            let active = store::active_ref(&txn, account).await?;
            if active.is_some_and(|a| a.name == name) {
                return Ok(Err(ScriptError::Active));
            }
            let existed = store::delete(&txn, account, &name).await?;
            Ok::<_, StorageError>(if existed { Ok(()) } else { Err(ScriptError::NotFound) })
        }
    })
    .await?
}

/// Renames a script; its text, id and activity go with it.
pub async fn rename(db: &Database, account: AccountId, old: &str, new: &str) -> Result<(), ScriptError> {
    let renamed = db
        .run("sieve_script_rename", |txn| {
            let (old, new) = (old.to_string(), new.to_string());
            async move { store::rename(&txn, account, &old, &new).await }
        })
        .await;
    match renamed {
        Ok(()) => Ok(()),
        Err(StorageError::NotFound(_)) => Err(ScriptError::NotFound),
        Err(StorageError::AlreadyExists(_)) => Err(ScriptError::AlreadyExists),
        Err(e) => Err(e.into()),
    }
}

/// The account's scripts (name order) and the active one's name, in one
/// snapshot read.
pub async fn list(db: &Database, account: AccountId) -> Result<(Vec<StoredScript>, Option<String>), ScriptError> {
    Ok(db
        .read("sieve_script_list", move |txn| async move {
            let scripts = store::list(&txn, account).await?;
            let active = store::active_ref(&txn, account).await?.map(|a| a.name);
            Ok::<_, StorageError>((scripts, active))
        })
        .await?)
}

/// One script by name.
pub async fn get(db: &Database, account: AccountId, name: &str) -> Result<StoredScript, ScriptError> {
    db.read("sieve_script_get", |txn| {
        let name = name.to_string();
        async move { store::get(&txn, account, &name).await }
    })
    .await?
    .ok_or(ScriptError::NotFound)
}
