//! Threads (conversations), computed at delivery in the delivery's own
//! transaction, for JMAP's `threadId` and, later, IMAP `THREAD`.
//!
//! A message joins the thread of any message it names in In-Reply-To or
//! References, or that named it (replies can arrive before their parent):
//! every Message-ID a message carries or names is indexed under `thrm`
//! with its thread. A message that names no known id starts a thread whose
//! id is its acceptance id (unique, time-ordered, never from content).
//! Subjects are not compared (RFC 5256's REFERENCES algorithm would also
//! merge by subject; references alone never merge unrelated mail).
//! Membership is kept under `thrx` so a thread lists its messages without
//! a scan, written when the message's mailbox is indexed
//! ([`super::unindexed`]; until then its row names the thread); rows stored
//! before threads existed have no thread (JMAP shows each as a thread of
//! its own).

use std::collections::BTreeSet;

use super::summary::Envelope;
use crate::error::Result;
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// Ids a message may name that are looked up and indexed: bounds the
/// reads and writes one delivery adds (References can be very long; its
/// last entries are the nearest ancestors, its first the root).
pub const REFERENCES_MAX: usize = 10;
/// Longer Message-IDs are cut (keys stay far below FDB's 10 KB).
const MESSAGE_ID_MAX_BYTES: usize = 250;
/// Messages listed per thread (a thread is read in one range read).
pub const THREAD_MEMBERS_MAX: usize = 10_000;

/// The `<id>` tokens of a Message-ID, In-Reply-To or References value.
pub fn message_ids(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(start) = rest.find('<') {
        let Some(len) = rest[start + 1..].find('>') else { break };
        let id = rest[start + 1..start + 1 + len].trim();
        if !id.is_empty() {
            out.push(truncate(id));
        }
        rest = &rest[start + 1 + len + 1..];
    }
    if out.is_empty() {
        let id = raw.trim();
        if !id.is_empty() && !id.contains(char::is_whitespace) {
            out.push(truncate(id));
        }
    }
    out
}

fn truncate(id: &str) -> String {
    let mut end = id.len().min(MESSAGE_ID_MAX_BYTES);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    id[..end].to_string()
}

/// (own Message-ID, ids it names) from a message's envelope.
fn ids_of(envelope: &Envelope) -> (Option<String>, Vec<String>) {
    fn field(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or_default()
    }
    let own = message_ids(field(&envelope.message_id)).into_iter().next();
    let mut named = message_ids(field(&envelope.in_reply_to));
    let refs = message_ids(field(&envelope.references));
    // The root (first) and the nearest ancestors (last) matter most.
    if let Some(root) = refs.first() {
        named.push(root.clone());
    }
    named.extend(refs.iter().rev().take(REFERENCES_MAX).cloned());
    named.retain(|id| Some(id) != own.as_ref());
    let mut seen = std::collections::HashSet::new();
    named.retain(|id| seen.insert(id.clone()));
    named.truncate(REFERENCES_MAX);
    (own, named)
}

/// The thread of a new message (in its delivery transaction): looks its
/// ids up, starts a thread if none is known, and indexes its ids.
pub async fn assign(txn: &Txn, account: AccountId, envelope: &Envelope, acceptance_id: &[u8; 16]) -> Result<String> {
    let (own, named) = ids_of(envelope);
    let all: Vec<&String> = own.iter().chain(named.iter()).collect();
    let mut thread = None;
    let mut unknown = Vec::new();
    for id in &all {
        match txn.get(&keyspace::thread_by_message_id(account, id)).await? {
            Some(t) if thread.is_none() => thread = Some(String::from_utf8_lossy(&t).into_owned()),
            Some(_) => {}
            None => unknown.push(*id),
        }
    }
    let thread = thread.unwrap_or_else(|| hex::encode(acceptance_id));
    for id in unknown {
        txn.set(&keyspace::thread_by_message_id(account, id), thread.as_bytes())?;
    }
    Ok(thread)
}

pub fn add_member(txn: &Txn, account: AccountId, thread: &str, mailbox: MailboxId, uid: Uid) -> Result<()> {
    txn.set(&keyspace::thread_member(account, thread, mailbox, uid), b"")
}

pub fn remove_member(txn: &Txn, account: AccountId, thread: &str, mailbox: MailboxId, uid: Uid) -> Result<()> {
    txn.clear(&keyspace::thread_member(account, thread, mailbox, uid))
}

/// The (mailbox, uid) of every message of a thread, in key order: its
/// `thrx` keys and the messages delivered since their mailbox was last
/// indexed (whose keys come with their other index keys).
pub async fn members(txn: &Txn, account: AccountId, thread: &str) -> Result<Vec<(MailboxId, Uid)>> {
    let (b, e) = keyspace::thread_members(account, thread);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(THREAD_MEMBERS_MAX)).await?;
    let mut members = rows
        .iter()
        .map(|(k, _)| {
            let (_, _, _, mailbox, uid): (String, AccountId, String, MailboxId, Uid) = foundationdb_tuple::unpack(k)
                .map_err(|e| crate::error::StorageError::Corrupt {
                    what: "thread member key".into(),
                    detail: e.to_string(),
                })?;
            Ok((mailbox, uid))
        })
        .collect::<Result<BTreeSet<_>>>()?;
    // Rows of earlier builds may be in both.
    members.extend(super::unindexed::thread_members(txn, account, thread).await?);
    Ok(members.into_iter().take(THREAD_MEMBERS_MAX).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_extracted_and_bounded() {
        assert_eq!(message_ids("<a@x> <b@y>"), vec!["a@x", "b@y"]);
        assert_eq!(message_ids("  plain@id "), vec!["plain@id"]);
        assert!(message_ids("two words").is_empty());
        let env = Envelope {
            message_id: Some("<c@z>".into()),
            in_reply_to: Some("<b@y>".into()),
            references: Some("<a@x> <b@y>".into()),
            ..Envelope::default()
        };
        let (own, named) = ids_of(&env);
        assert_eq!(own.as_deref(), Some("c@z"));
        assert_eq!(named, vec!["b@y", "a@x"]);
    }
}
