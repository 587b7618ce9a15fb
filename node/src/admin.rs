//! Admin commands that work directly against the store (no running node
//! needed: the store is the truth).

use std::io::BufRead;

use anyhow::{Context, bail};
use meshmail_storage::Database;
use meshmail_storage::model::{accounts, domains};
use meshmail_storage::open::open_kv;

use crate::config::Config;

fn open(cfg: &Config) -> anyhow::Result<Database> {
    open_kv(&cfg.kv()).with_context(|| format!("opening the store ({:?})", cfg.kv()))
}

pub async fn domain_add(cfg: &Config, domain: &str) -> anyhow::Result<()> {
    let db = open(cfg)?;
    let domain = domain.to_string();
    let d = db
        .run("admin_domain_add", move |txn| {
            let domain = domain.clone();
            async move { domains::add(&txn, &domain).await }
        })
        .await?;
    println!("added domain {}", d.name);
    Ok(())
}

pub async fn domain_list(cfg: &Config) -> anyhow::Result<()> {
    let db = open(cfg)?;
    let list = db
        .read("admin_domain_list", |txn| async move { domains::list(&txn).await })
        .await?;
    for d in list {
        println!("{}", d.name);
    }
    Ok(())
}

pub async fn account_add(cfg: &Config, email: &str, password_stdin: bool) -> anyhow::Result<()> {
    if !password_stdin {
        bail!("give the password on standard input with --password-stdin (never on the command line)");
    }
    let mut password = String::new();
    std::io::stdin().lock().read_line(&mut password)?;
    let password = password.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        bail!("empty password on standard input");
    }
    accounts::normalize(email)?;
    // argon2id is deliberately slow: keep it off the async workers.
    let hash = tokio::task::spawn_blocking(move || accounts::hash_password(&password)).await??;
    let db = open(cfg)?;
    let email = email.to_string();
    let account = db
        .run("admin_account_add", move |txn| {
            let (email, hash) = (email.clone(), hash.clone());
            async move { accounts::add(&txn, &email, &hash).await }
        })
        .await?;
    println!("added account {} (id {})", account.email, account.id);
    Ok(())
}

pub async fn account_list(cfg: &Config) -> anyhow::Result<()> {
    let db = open(cfg)?;
    let mut after: Option<String> = None;
    loop {
        // One bounded page per snapshot transaction.
        let a = after.clone();
        let page = db
            .read("admin_account_list", move |txn| {
                let a = a.clone();
                async move { accounts::list_page(&txn, a.as_deref(), 1000).await }
            })
            .await?;
        for acc in &page {
            println!("{}\t(id {})", acc.email, acc.id);
        }
        match page.last() {
            Some(last) if page.len() == 1000 => after = Some(last.email.clone()),
            _ => break,
        }
    }
    Ok::<(), anyhow::Error>(())
}
