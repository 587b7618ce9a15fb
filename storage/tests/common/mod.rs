//! What several storage tests set up the same way: a domain and an account
//! with its INBOX, and a delivery whose body is a placeholder (the model's
//! rows and ledger only, no blob).

#![allow(dead_code)]

use meshmail_storage::ids::{AccountId, MailboxId};
use meshmail_storage::model::fenced::{AdminWrite, FencedTxn};
use meshmail_storage::model::messages::{BodyRef, NewMessage};
use meshmail_storage::model::{accounts, domains, mailboxes, new_id};
use meshmail_storage::{Database, StorageError, Txn};

/// Adds `email`'s domain and account; returns the account and its INBOX.
pub async fn account_with_inbox(db: &Database, email: &str) -> (AccountId, MailboxId) {
    let email = email.to_string();
    db.run("setup", move |txn| {
        let email = email.clone();
        async move {
            domains::add(&txn, email.split('@').nth(1).expect("user@domain")).await?;
            let a = accounts::add(&txn, &email, "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.expect("INBOX");
            Ok::<_, StorageError>((a.id, inbox.id))
        }
    })
    .await
    .unwrap()
}

/// A delivery with a fresh acceptance id and a placeholder inline body.
pub fn placeholder_message() -> NewMessage {
    NewMessage {
        body: BodyRef {
            hash: "00".repeat(32),
            size: 10,
            inline: true,
        },
        flags: vec![],
        internal_date_ms: 0,
        summary: Default::default(),
        acceptance_id: new_id(),
    }
}

/// A transaction allowed to write mailboxes, for a store no node serves:
/// the mailbox writes of these tests are admin writes
/// (`AdminWrite::Fixture`), outside any shard's lease.
pub fn fixture(txn: &Txn) -> FencedTxn<'_> {
    FencedTxn::admin(txn, AdminWrite::Fixture)
}
