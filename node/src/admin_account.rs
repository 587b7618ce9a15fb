//! `meshmail account delete`: an account and everything of it, in bounded
//! transactions (`model::account_removal`), resumable after a crash.

use anyhow::bail;
use meshmail_storage::model::account_removal::{self, Removal, Step};
use meshmail_storage::model::accounts;
use meshmail_storage::{Database, StorageError};

use crate::admin::open;
use crate::config::Config;

/// What a deletion removed, for its last line.
#[derive(Debug, Default)]
struct Tally {
    messages: usize,
    mailboxes: usize,
    tokens: usize,
}

pub async fn delete(cfg: &Config, email: &str, yes: bool) -> anyhow::Result<()> {
    if !yes {
        bail!("deleting an account deletes all of its mail and cannot be undone: add --yes");
    }
    let (local, domain) = accounts::normalize(email)?;
    let email = format!("{local}@{domain}");
    let db = open(cfg).await?;
    let removal = begin_or_resume(&db, &email).await?;
    let bar = indicatif::ProgressBar::new_spinner().with_style(indicatif::ProgressStyle::with_template(
        "{spinner} deleting {prefix}: {pos} messages expunged ({per_sec}) {msg}",
    )?);
    bar.set_prefix(email.clone());
    let mut tally = Tally::default();
    loop {
        let account = removal.account;
        let step = db
            .run("admin_account_delete", move |txn| async move {
                account_removal::step(&txn, account).await
            })
            .await?;
        match step {
            Step::Expunged { mailbox, messages } => {
                tally.messages += messages;
                bar.inc(messages as u64);
                bar.set_message(mailbox);
            }
            Step::MailboxRemoved(name) => {
                tally.mailboxes += 1;
                bar.set_message(format!("{name} removed"));
            }
            Step::TokensRevoked(n) => tally.tokens += n,
            Step::Done => break,
        }
    }
    bar.finish_and_clear();
    println!(
        "deleted account {email} (id {}): {} messages, {} mailboxes, {} tokens",
        removal.account, tally.messages, tally.mailboxes, tally.tokens
    );
    Ok(())
}

/// Removes the account's record, or finds the removal an earlier run (or
/// a retry after an unknown commit outcome) began.
async fn begin_or_resume(db: &Database, email: &str) -> anyhow::Result<Removal> {
    let email = email.to_string();
    let removal = db
        .run("admin_account_delete_begin", move |txn| {
            let email = email.clone();
            async move {
                if let Some(r) = account_removal::pending(&txn)
                    .await?
                    .into_iter()
                    .find(|r| r.email == email)
                    && accounts::get(&txn, &email).await?.is_none()
                {
                    return Ok(r);
                }
                account_removal::begin(&txn, &email).await
            }
        })
        .await;
    match removal {
        Err(StorageError::NotFound(what)) => bail!("no such account: {what}"),
        other => Ok(other?),
    }
}
