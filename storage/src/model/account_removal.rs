//! Deleting an account in bounded steps, so that an account of any size
//! goes without a transaction past FoundationDB's 5 s and 10 MB.
//!
//! [`begin`] removes the account's record in one transaction: from then on
//! RCPT finds no such address (the directory version rises, so every node
//! reloads), logins fail, and a new account of the same address may be
//! created (it gets a new id, so nothing of the old one shows through). It
//! leaves a removal record behind; [`step`] then does one bounded piece of
//! the rest per transaction until it answers [`Step::Done`]:
//! 1. the messages of each mailbox, [`MESSAGES_PER_STEP`] at a time, by the
//!    same expunge as IMAP's (blob references released, each acceptance's
//!    ledger entry marked expunged, so `verify ledger` stays clean);
//! 2. each mailbox, once empty;
//! 3. the account's bearer tokens, [`TOKENS_PER_STEP`] looked at per step;
//! 4. every other key of the account (subscriptions, quota, JMAP records,
//!    threads, change logs…): range clears, which cost FDB nothing per key.
//!
//! A crash between steps leaves the removal record: [`pending`] lists it and
//! the next run resumes. A delivery that resolved the address before
//! [`begin`] and commits after it finds its mailbox gone and fails (its
//! sender gets a 4xx or the delivery is retried and quarantined), or lands
//! before the mailbox's turn and is expunged with the rest.

use serde::{Deserialize, Serialize};

use super::fenced::{AdminWrite, FencedTxn};
use super::{accounts, directory, get_record, jmap, mailboxes, messages, now_ms, put_record};
use crate::blob;
use crate::error::{Result, StorageError};
use crate::ids::AccountId;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn, key_after};

/// Messages expunged per transaction: each rewrites ~8 keys, so 500 stay
/// far below FDB's 10 MB, as IMAP EXPUNGE's chunks do.
pub const MESSAGES_PER_STEP: usize = 500;

/// Token records read per transaction (a few hundred bytes each).
pub const TOKENS_PER_STEP: usize = 2_000;

/// What is left of an account being deleted (its removal record).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Removal {
    pub account: AccountId,
    pub email: String,
    /// When the removal began: tokens of the address made later belong to
    /// a new account of the same address and stay.
    pub began_ms: u64,
    /// Where the walk over tokens resumes; `None` before it starts.
    #[serde(default)]
    pub token_cursor: Option<Vec<u8>>,
    /// Set once every token has been looked at.
    #[serde(default)]
    pub tokens_done: bool,
}

/// What one [`step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// This many messages of the named mailbox were expunged.
    Expunged { mailbox: String, messages: usize },
    /// The named mailbox, now empty, is gone.
    MailboxRemoved(String),
    /// This many of the account's tokens were revoked.
    TokensRevoked(usize),
    /// Nothing of the account is left.
    Done,
}

/// Removes `email`'s account record (so nothing reaches or logs into it
/// from here on) and leaves the removal record that [`step`] works from.
pub async fn begin(txn: &Txn, email: &str) -> Result<Removal> {
    let account = accounts::get(txn, email)
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("account {email}")))?;
    txn.clear(&keyspace::account(&account.email))?;
    txn.clear(&keyspace::account_by_id(account.id))?;
    directory::changed(txn)?;
    let removal = Removal {
        account: account.id,
        email: account.email,
        began_ms: now_ms(),
        token_cursor: None,
        tokens_done: false,
    };
    put_record(txn, &keyspace::account_removal(account.id), &removal)?;
    Ok(removal)
}

/// Every account whose removal began and has not finished.
pub async fn pending(txn: &Txn) -> Result<Vec<Removal>> {
    let (b, e) = keyspace::account_removals();
    let rows = txn.get_range(&b, &e, RangeOptions::limit(1_000)).await?;
    rows.iter().map(|(_, v)| super::decode("account removal", v)).collect()
}

/// One bounded piece of the removal of `account` (see the module doc).
pub async fn step(txn: &Txn, account: AccountId) -> Result<Step> {
    let mut removal: Removal = get_record(txn, &keyspace::account_removal(account), "account removal")
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("removal of account {account}")))?;
    if let Some(mailbox) = mailboxes::list(txn, account).await?.into_iter().next() {
        return empty_or_remove(txn, account, &mailbox).await;
    }
    if !removal.tokens_done {
        let revoked = revoke_tokens(txn, &mut removal).await?;
        put_record(txn, &keyspace::account_removal(account), &removal)?;
        return Ok(Step::TokensRevoked(revoked));
    }
    for (b, e) in keyspace::account_ranges(account) {
        txn.clear_range(&b, &e)?;
    }
    txn.clear(&keyspace::account_removal(account))?;
    Ok(Step::Done)
}

/// Expunges up to [`MESSAGES_PER_STEP`] messages of `mailbox`, or removes
/// it when it has none left.
async fn empty_or_remove(txn: &Txn, account: AccountId, mailbox: &mailboxes::Mailbox) -> Result<Step> {
    // Outside the shard's ownership: the account record went first
    // ([`begin`]), so nothing new resolves the address (see `AdminWrite`).
    let admin = FencedTxn::admin(txn, AdminWrite::AccountRemoval);
    let (b, e) = keyspace::messages(account, mailbox.id);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(MESSAGES_PER_STEP)).await?;
    if rows.is_empty() {
        mailboxes::remove_empty(&admin, account, mailbox).await?;
        return Ok(Step::MailboxRemoved(mailbox.name.clone()));
    }
    for (key, _) in &rows {
        let uid = keyspace::message_uid(key)?;
        if let Some(body) = messages::expunge(&admin, account, mailbox.id, uid).await? {
            blob::release(txn, &body)?;
        }
    }
    Ok(Step::Expunged {
        mailbox: mailbox.name.clone(),
        messages: rows.len(),
    })
}

/// Looks at up to [`TOKENS_PER_STEP`] tokens from the removal's cursor and
/// deletes those of its address; returns how many went.
async fn revoke_tokens(txn: &Txn, removal: &mut Removal) -> Result<usize> {
    let (begin, end) = keyspace::tokens();
    let from = removal.token_cursor.clone().unwrap_or(begin);
    let rows = txn.get_range(&from, &end, RangeOptions::limit(TOKENS_PER_STEP)).await?;
    let mut revoked = 0;
    for (key, value) in &rows {
        let token: jmap::Token = super::decode("token", value)?;
        if token.email == removal.email && token.created_ms <= removal.began_ms {
            txn.clear(key)?;
            revoked += 1;
        }
    }
    match rows.last() {
        Some((key, _)) if rows.len() == TOKENS_PER_STEP => removal.token_cursor = Some(key_after(key)),
        _ => removal.tokens_done = true,
    }
    Ok(revoked)
}
