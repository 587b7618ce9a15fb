//! Mailboxes: name, UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, special use and
//! subscription, plus the counters kept in step with every change.

use serde::{Deserialize, Serialize};

use super::fenced::FencedTxn;
use super::{get_record, next_sequence, now_ms, put_record};
use crate::error::{Result, StorageError};
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Created for every new account (RFC 6154 special-use attributes).
pub const DEFAULT_MAILBOXES: &[(&str, Option<&str>)] = &[
    ("INBOX", None),
    ("Drafts", Some("\\Drafts")),
    ("Sent", Some("\\Sent")),
    ("Trash", Some("\\Trash")),
    ("Junk", Some("\\Junk")),
    ("Archive", Some("\\Archive")),
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Mailbox {
    pub id: MailboxId,
    pub name: String,
    pub uid_validity: u32,
    /// The UID the next message will get. Never decreases.
    pub uid_next: Uid,
    /// The MODSEQ of the last change. Never decreases.
    pub highest_modseq: u64,
    pub special_use: Option<String>,
    pub subscribed: bool,
    pub created_ms: u64,
    /// IMAP4rev1 `\Recent`: the highest UID some session has already taken
    /// as recent (RFC 3501 §2.3.2: a message is recent in exactly one
    /// session). Raised only by `MailboxOp::ClaimRecent`.
    #[serde(default)]
    pub recent_uid: Uid,
    /// Keywords ever set in this mailbox, in order of first use (the FLAGS
    /// a SELECT announces); at most [`KEYWORDS_MAX`], never shrinks.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// True when every message of the mailbox has its receivedAt index key
    /// (mailboxes created since the index exists). Older mailboxes are
    /// sorted from their rows instead.
    #[serde(default)]
    pub date_index: bool,
    /// True when every message of the mailbox without `\Seen` has its
    /// unseen index key (mailboxes created since the index exists): SEARCH
    /// UNSEEN reads that index. Older mailboxes are searched row by row.
    #[serde(default)]
    pub unseen_index: bool,
    /// The first UID of the messages delivered since the mailbox was last
    /// indexed: they have no unseen, receivedAt or change-log keys yet,
    /// which readers make up from their rows (`model::unindexed`). None:
    /// every row is indexed (and every record written before deferred
    /// indexing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unindexed_from: Option<Uid>,
    /// JMAP `sortOrder` (RFC 8621 §2): where a client lists the mailbox
    /// among its siblings. Absent (records written before it, and every
    /// mailbox left at the default) reads as 0; not written when 0, so
    /// such records stay byte for byte what earlier builds wrote.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sort_order: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Keywords a mailbox record lists. Beyond that a keyword is still stored
/// on its messages, and a session announces it when it first shows it.
pub const KEYWORDS_MAX: usize = 500;

impl Mailbox {
    /// Adds the keywords (flags not starting with a backslash) not listed yet.
    pub fn note_keywords(&mut self, flags: &[String]) {
        for f in flags {
            if f.starts_with('\\') || self.keywords.len() >= KEYWORDS_MAX {
                continue;
            }
            if !self.keywords.iter().any(|k| k.eq_ignore_ascii_case(f)) {
                self.keywords.push(f.clone());
            }
        }
    }
}

/// The hierarchy delimiter of mailbox names, for IMAP and JMAP alike.
pub const DELIMITER: char = '/';

/// Counter kinds kept per mailbox.
pub const COUNT_MESSAGES: &str = "messages";
pub const COUNT_UNSEEN: &str = "unseen";
pub const COUNT_BYTES: &str = "bytes";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: i64,
    pub unseen: i64,
    pub bytes: i64,
}

pub async fn create_defaults(txn: &FencedTxn<'_>, account: AccountId) -> Result<()> {
    for (name, special) in DEFAULT_MAILBOXES {
        create(txn, account, name, special.map(str::to_string)).await?;
    }
    Ok(())
}

/// IMAP treats INBOX case-insensitively; every other name is kept as given.
pub fn canonical_name(name: &str) -> String {
    if name.eq_ignore_ascii_case("INBOX") {
        "INBOX".to_string()
    } else {
        name.to_string()
    }
}

pub async fn create(
    txn: &FencedTxn<'_>,
    account: AccountId,
    name: &str,
    special_use: Option<String>,
) -> Result<Mailbox> {
    let name = canonical_name(name);
    if name.is_empty() || name.len() > 1000 {
        return Err(StorageError::Model("mailbox name must be 1..1000 bytes".into()));
    }
    let name_key = keyspace::mailbox_name(account, &name);
    if txn.get(&name_key).await?.is_some() {
        return Err(StorageError::AlreadyExists(format!("mailbox {name}")));
    }
    let id = next_sequence(txn, &keyspace::mailbox_sequence(account)).await?;
    // UIDVALIDITY: seconds since epoch, made unique per account by the id so
    // a mailbox re-created in the same second still gets a new value.
    let uid_validity = ((now_ms() / 1000) as u32).wrapping_add(id as u32);
    let mb = Mailbox {
        id,
        name,
        uid_validity,
        uid_next: 1,
        highest_modseq: 1,
        special_use,
        subscribed: true,
        created_ms: now_ms(),
        recent_uid: 0,
        keywords: Vec::new(),
        date_index: true,
        unseen_index: true,
        unindexed_from: None,
        sort_order: 0,
    };
    put_record(txn, &keyspace::mailbox(account, id), &mb)?;
    txn.set(&name_key, &id.to_le_bytes())?;
    Ok(mb)
}

/// Creates a mailbox subscribed only if its name still is: IMAP CREATE
/// subscribes nothing (RFC 3501 §6.3.3), but a subscription outlives its
/// mailbox (§6.3.6), and the record's flag (JMAP's `isSubscribed`) says
/// the same as the subscription key.
pub async fn create_unsubscribed(
    txn: &FencedTxn<'_>,
    account: AccountId,
    name: &str,
    special_use: Option<String>,
) -> Result<Mailbox> {
    let created = create(txn, account, name, special_use).await?;
    if txn
        .get(&keyspace::subscription(account, &created.name))
        .await?
        .is_some()
    {
        return Ok(created);
    }
    let mut after = created.clone();
    after.subscribed = false;
    put(txn, account, &created, &after)?;
    Ok(after)
}

pub async fn get(txn: &Txn, account: AccountId, id: MailboxId) -> Result<Option<Mailbox>> {
    get_record(txn, &keyspace::mailbox(account, id), "mailbox").await
}

pub async fn find(txn: &Txn, account: AccountId, name: &str) -> Result<Option<Mailbox>> {
    let name = canonical_name(name);
    match txn.get(&keyspace::mailbox_name(account, &name)).await? {
        Some(id) => get(txn, account, crate::kv::decode_i64(Some(&id))).await,
        None => Ok(None),
    }
}

/// Writes a changed mailbox record. Asserts UIDNEXT/MODSEQ never go back.
pub fn put(txn: &FencedTxn<'_>, account: AccountId, before: &Mailbox, after: &Mailbox) -> Result<()> {
    assert!(after.uid_next >= before.uid_next, "UIDNEXT went backwards");
    assert!(
        after.highest_modseq >= before.highest_modseq,
        "HIGHESTMODSEQ went backwards"
    );
    put_record(txn, &keyspace::mailbox(account, after.id), after)
}

/// FAULT INJECTION ONLY (`X-Meshmail-Fault: reuse-uid`, behind
/// `MESHMAIL_FAULT_HOOKS=1`): moves UIDNEXT back by one, so the next append
/// reuses the last UID — the one thing [`put`] refuses. It exists to prove
/// that the chaos checker detects a reused UID; nothing else may call it.
pub async fn rewind_uid_next_for_fault_injection(
    txn: &FencedTxn<'_>,
    account: AccountId,
    mailbox: MailboxId,
) -> Result<()> {
    if let Some(mut mb) = get(txn, account, mailbox).await?
        && mb.uid_next > 1
    {
        mb.uid_next -= 1;
        put_record(txn, &keyspace::mailbox(account, mb.id), &mb)?;
    }
    Ok(())
}

/// Every mailbox of an account (bounded: an account has at most 10,000).
pub async fn list(txn: &Txn, account: AccountId) -> Result<Vec<Mailbox>> {
    let (b, e) = keyspace::mailboxes(account);
    let mut out = Vec::new();
    let mut cursor = txn.range_cursor(&b, &e, 10_000, false);
    while let Some(chunk) = cursor.next_chunk().await? {
        for (k, v) in chunk {
            if keyspace::is_mailbox_record(&k) {
                out.push(super::decode("mailbox", &v)?);
            }
        }
    }
    Ok(out)
}

pub async fn counts(txn: &Txn, account: AccountId, mailbox: MailboxId) -> Result<Counts> {
    Ok(Counts {
        messages: count(txn, account, mailbox, COUNT_MESSAGES).await?,
        unseen: count(txn, account, mailbox, COUNT_UNSEEN).await?,
        bytes: count(txn, account, mailbox, COUNT_BYTES).await?,
    })
}

/// One counter: the one behind the mailbox record plus, for mailboxes
/// counted before it existed, the one under `("cnt", ...)` (never moved:
/// adds go to the new key, so the sum is right without a backfill).
async fn count(txn: &Txn, account: AccountId, mailbox: MailboxId, kind: &str) -> Result<i64> {
    let new = txn.get_i64(&keyspace::mailbox_counter(account, mailbox, kind)).await?;
    let old = txn.get_i64(&keyspace::counter(account, mailbox, kind)).await?;
    Ok(new + old)
}

/// Changes the counters with atomic adds (no read conflict).
pub fn add_counts(txn: &FencedTxn<'_>, account: AccountId, mailbox: MailboxId, delta: Counts) -> Result<()> {
    for (kind, d) in [
        (COUNT_MESSAGES, delta.messages),
        (COUNT_UNSEEN, delta.unseen),
        (COUNT_BYTES, delta.bytes),
    ] {
        if d != 0 {
            txn.add_i64(&keyspace::mailbox_counter(account, mailbox, kind), d)?;
        }
    }
    Ok(())
}

/// Renames a mailbox (not INBOX: renaming INBOX moves its messages, which
/// the caller does message by message). Keeps id, UIDVALIDITY and messages.
pub async fn rename(txn: &FencedTxn<'_>, account: AccountId, from: &str, to: &str) -> Result<Mailbox> {
    let to = canonical_name(to);
    if to == "INBOX" {
        return Err(StorageError::AlreadyExists("mailbox INBOX".into()));
    }
    let before = find(txn, account, from)
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("mailbox {from}")))?;
    if find(txn, account, &to).await?.is_some() {
        return Err(StorageError::AlreadyExists(format!("mailbox {to}")));
    }
    let mut mb = before.clone();
    mb.name = to.clone();
    put(txn, account, &before, &mb)?;
    txn.clear(&keyspace::mailbox_name(account, &before.name))?;
    txn.set(&keyspace::mailbox_name(account, &to), &mb.id.to_le_bytes())?;
    Ok(mb)
}

/// Subscribes or unsubscribes a name. Subscribing needs the mailbox to
/// exist; unsubscribing does not (the mailbox may be gone). The
/// subscription lives in its own key and outlives its mailbox; the
/// mailbox record's flag (what JMAP's `isSubscribed` reads, and all that
/// older stores have) is kept in step.
pub async fn set_subscribed(txn: &FencedTxn<'_>, account: AccountId, name: &str, subscribed: bool) -> Result<()> {
    let name = canonical_name(name);
    let key = keyspace::subscription(account, &name);
    let Some(before) = find(txn, account, &name).await? else {
        if subscribed {
            return Err(StorageError::NotFound(format!("mailbox {name}")));
        }
        return txn.clear(&key);
    };
    if subscribed {
        txn.set(&key, b"")?;
    } else {
        txn.clear(&key)?;
    }
    let mut mb = before.clone();
    mb.subscribed = subscribed;
    put(txn, account, &before, &mb)
}

/// What [`set_attributes`] changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attributes {
    pub sort_order: Option<u32>,
    /// `Some(None)` removes the special use.
    pub special_use: Option<Option<String>>,
}

/// Changes a mailbox's sort order and special use. A special use another
/// mailbox of the account has is refused (`AlreadyExists`): JMAP allows
/// each role on one mailbox only (RFC 8621 §2). Neither changes a MODSEQ:
/// the JMAP Mailbox state digests them.
pub async fn set_attributes(
    txn: &FencedTxn<'_>,
    account: AccountId,
    id: MailboxId,
    attrs: &Attributes,
) -> Result<Mailbox> {
    let before = get(txn, account, id)
        .await?
        .ok_or_else(|| StorageError::NotFound(format!("mailbox {id}")))?;
    let mut mb = before.clone();
    if let Some(order) = attrs.sort_order {
        mb.sort_order = order;
    }
    if let Some(special_use) = &attrs.special_use {
        if let Some(wanted) = special_use {
            let taken = list(txn, account)
                .await?
                .into_iter()
                .any(|o| o.id != id && o.special_use.as_deref().is_some_and(|u| u.eq_ignore_ascii_case(wanted)));
            if taken {
                return Err(StorageError::AlreadyExists(format!("a mailbox with {wanted}")));
            }
        }
        mb.special_use = special_use.clone();
    }
    if mb != before {
        put(txn, account, &before, &mb)?;
    }
    Ok(mb)
}

/// Every subscribed name: the subscription keys, plus the mailboxes whose
/// record says subscribed (stores written before the keys existed).
pub async fn subscriptions(txn: &Txn, account: AccountId) -> Result<Vec<String>> {
    let (b, e) = keyspace::subscriptions(account);
    let mut names: Vec<String> = Vec::new();
    for (k, _) in txn.get_range(&b, &e, RangeOptions::limit(10_000)).await? {
        if let Ok((_, _, name)) = foundationdb_tuple::unpack::<(String, AccountId, String)>(&k) {
            names.push(name);
        }
    }
    for mb in list(txn, account).await? {
        if mb.subscribed && !names.contains(&mb.name) {
            names.push(mb.name);
        }
    }
    names.sort();
    Ok(names)
}

/// Removes an empty mailbox's record, name and counters. The caller expunges
/// its messages first, in bounded transactions.
pub async fn remove_empty(txn: &FencedTxn<'_>, account: AccountId, mailbox: &Mailbox) -> Result<()> {
    let (b, e) = keyspace::messages(account, mailbox.id);
    if !txn.get_range(&b, &e, RangeOptions::limit(1)).await?.is_empty() {
        return Err(StorageError::Model(format!("mailbox {} is not empty", mailbox.name)));
    }
    txn.clear(&keyspace::mailbox(account, mailbox.id))?;
    txn.clear(&keyspace::mailbox_name(account, &mailbox.name))?;
    if mailbox.subscribed {
        // The subscription stays (RFC 3501 §6.3.6): LIST shows the name as
        // \NonExistent until it is unsubscribed or created again.
        txn.set(&keyspace::subscription(account, &mailbox.name), b"")?;
    }
    for kind in [COUNT_MESSAGES, COUNT_UNSEEN, COUNT_BYTES] {
        txn.clear(&keyspace::counter(account, mailbox.id, kind))?;
        txn.clear(&keyspace::mailbox_counter(account, mailbox.id, kind))?;
    }
    // Every summary went with its message; clearing the (empty) range
    // costs nothing and leaves no orphan should one have been missed.
    let (sb, se) = keyspace::message_summaries(account, mailbox.id);
    txn.clear_range(&sb, &se)?;
    let (ub, ue) = keyspace::unseen_all(account, mailbox.id);
    txn.clear_range(&ub, &ue)?;
    let (cb, ce) = keyspace::changes_since(account, mailbox.id, 0);
    txn.clear_range(&cb, &ce)
}
