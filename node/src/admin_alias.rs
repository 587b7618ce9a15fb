//! `meshmail alias add|remove|list`: address routing records, written
//! straight to the store (no node needs to run; nodes read them at RCPT).

use anyhow::bail;
use meshmail_storage::model::aliases;

use crate::admin::open;
use crate::config::Config;

pub async fn add(cfg: &Config, address: &str, targets: &[String]) -> anyhow::Result<()> {
    let targets: Vec<String> = targets
        .iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    if targets.is_empty() {
        bail!("give at least one target: meshmail alias add ADDRESS TARGET[,TARGET...]");
    }
    let db = open(cfg).await?;
    let address = address.to_string();
    let alias = db
        .run("admin_alias_add", move |txn| {
            let (address, targets) = (address.clone(), targets.clone());
            async move { aliases::put(&txn, &address, &targets).await }
        })
        .await?;
    let kind = if alias.is_catch_all() { "catch-all" } else { "alias" };
    println!("{kind} {} -> {}", alias.address, alias.targets.join(", "));
    Ok(())
}

pub async fn remove(cfg: &Config, address: &str) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let address = address.to_string();
    let a = address.clone();
    let existed = db
        .run("admin_alias_remove", move |txn| {
            let a = a.clone();
            async move { aliases::remove(&txn, &a).await }
        })
        .await?;
    if !existed {
        bail!("no alias {address}");
    }
    println!("removed {address}");
    Ok(())
}

pub async fn list(cfg: &Config) -> anyhow::Result<()> {
    let db = open(cfg).await?;
    let list = db
        .read(
            "admin_alias_list",
            |txn| async move { aliases::list(&txn, 10_000).await },
        )
        .await?;
    for a in &list {
        println!("{}\t{}", a.address, a.targets.join(","));
    }
    println!("{} alias(es)", list.len());
    Ok(())
}
