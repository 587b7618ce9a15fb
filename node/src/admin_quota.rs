//! `meshmail quota set|show`: an account's limits (RFC 9208 STORAGE in
//! KiB, MESSAGE count), written straight to the store (no node needs to
//! run; the shard actor reads them in every delivery transaction).

use meshmail_storage::StorageError;
use meshmail_storage::model::{accounts, quota};

use crate::admin::open;
use crate::config::Config;

fn show_limit(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_string(), |l| l.to_string())
}

async fn account_id(db: &meshmail_storage::Database, user: &str) -> anyhow::Result<i64> {
    let (local, domain) = accounts::normalize(user)?;
    let email = format!("{local}@{domain}");
    let e = email.clone();
    let account = db
        .read("admin_quota_account", move |txn| {
            let e = e.clone();
            async move { accounts::get(&txn, &e).await }
        })
        .await?;
    account
        .map(|a| a.id)
        .ok_or_else(|| anyhow::anyhow!("no account {email}"))
}

/// Changes the limits given (0 removes one), keeps the others.
pub async fn set(cfg: &Config, user: &str, storage_kib: Option<u64>, messages: Option<u64>) -> anyhow::Result<()> {
    if storage_kib.is_none() && messages.is_none() {
        anyhow::bail!("give --storage-kib N and/or --messages N (0 removes a limit)");
    }
    let db = open(cfg).await?;
    let id = account_id(&db, user).await?;
    let q = db
        .run("admin_quota_set", move |txn| async move {
            let mut q = quota::get(&txn, id).await?;
            if let Some(kib) = storage_kib {
                q.storage_kib = (kib > 0).then_some(kib);
            }
            if let Some(n) = messages {
                q.messages = (n > 0).then_some(n);
            }
            quota::set(&txn, id, &q)?;
            Ok::<_, StorageError>(q)
        })
        .await?;
    println!(
        "quota {user}: storage {} KiB, messages {}",
        show_limit(q.storage_kib),
        show_limit(q.messages)
    );
    Ok(())
}

pub async fn show(cfg: &Config, user: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let id = account_id(&db, user).await?;
    let (q, u) = db
        .read("admin_quota_show", move |txn| async move {
            Ok::<_, StorageError>((quota::get(&txn, id).await?, quota::usage(&txn, id).await?))
        })
        .await?;
    println!(
        "quota {user}: storage {} of {} KiB, messages {} of {}",
        u.storage_kib(),
        show_limit(q.storage_kib),
        u.messages,
        show_limit(q.messages)
    );
    Ok(())
}
