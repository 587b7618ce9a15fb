//! `meshmail sieve put|list|activate|delete`: an account's Sieve scripts,
//! written straight to the store (no node needs to run; delivery reads the
//! active one). A script is compiled before it is stored, so one that
//! would fail at every delivery is refused here with its line:column.

use std::path::Path;

use anyhow::{Context as _, bail};
use meshmail_protocols::sieve;
use meshmail_storage::model::{accounts, sieve as store};
use meshmail_storage::{Database, ids::AccountId};

use crate::admin::open;
use crate::config::Config;

async fn account_of(db: &Database, email: &str) -> anyhow::Result<(AccountId, String)> {
    let e = email.to_string();
    let account = db
        .read("admin_sieve_account", move |txn| {
            let e = e.clone();
            async move { accounts::get(&txn, &e).await }
        })
        .await?;
    match account {
        Some(a) => Ok((a.id, a.email)),
        None => bail!("no account {email}"),
    }
}

pub async fn put(cfg: &Config, email: &str, name: &str, file: &Path, activate: bool) -> anyhow::Result<()> {
    let source = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let db = open(cfg).await?;
    let (account, own) = account_of(&db, email).await?;
    let ctx = sieve::Context {
        own_addresses: vec![own.to_ascii_lowercase()],
    };
    // Compiled before anything is written: a bad script changes nothing.
    if let Err(e) = sieve::compile(&source, &ctx) {
        bail!("{}:{e}", file.display());
    }
    let text = String::from_utf8(source).context("the script is not UTF-8")?;
    let n = name.to_string();
    let stored = db
        .run("admin_sieve_put", move |txn| {
            let (n, text) = (n.clone(), text.clone());
            async move {
                let s = store::put(&txn, account, &n, &text).await?;
                if activate {
                    store::activate(&txn, account, Some(&n)).await?;
                }
                Ok::<_, meshmail_storage::StorageError>(s)
            }
        })
        .await?;
    let state = if activate { " (active)" } else { "" };
    println!("stored {}{state} for {email}, version {}", stored.name, stored.version);
    Ok(())
}

pub async fn list(cfg: &Config, email: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let (account, _) = account_of(&db, email).await?;
    let (scripts, active) = db
        .read("admin_sieve_list", move |txn| async move {
            let scripts = store::list(&txn, account).await?;
            let active = store::active(&txn, account).await?.map(|s| s.name);
            Ok::<_, meshmail_storage::StorageError>((scripts, active))
        })
        .await?;
    for s in &scripts {
        let mark = if active.as_deref() == Some(s.name.as_str()) {
            "*"
        } else {
            " "
        };
        println!("{mark} {}\t{} bytes\tversion {}", s.name, s.source.len(), s.version);
    }
    println!("{} script(s); * is active", scripts.len());
    Ok(())
}

pub async fn activate(cfg: &Config, email: &str, name: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let (account, _) = account_of(&db, email).await?;
    let n = name.to_string();
    db.run("admin_sieve_activate", move |txn| {
        let n = n.clone();
        async move { store::activate(&txn, account, Some(&n)).await }
    })
    .await?;
    println!("{name} is the active script of {email}");
    Ok(())
}

pub async fn delete(cfg: &Config, email: &str, name: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let (account, _) = account_of(&db, email).await?;
    let n = name.to_string();
    let existed = db
        .run("admin_sieve_delete", move |txn| {
            let n = n.clone();
            async move { store::delete(&txn, account, &n).await }
        })
        .await?;
    if !existed {
        bail!("no script {name} for {email}");
    }
    println!("deleted {name}");
    Ok(())
}
