//! The maildrop of one POP3 session: INBOX as it was at login (RFC 1939
//! §5: message numbers and sizes hold for the whole session), the marks
//! DELE and RETR leave on it, and the UPDATE state that applies them
//! through the shard actor at QUIT — never before, so a session that dies
//! first changes nothing.

use std::sync::Arc;

use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::node::NodeCtx;
use meshmail_actors::op_error::OpError;
use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::mailboxes;
use meshmail_storage::model::messages::{self, BodyRef, FlagOp};
use meshmail_storage::{Database, StorageError};

use crate::pop3::wire::MessageNumber;
use crate::pop3::wire::response::unique_id;

/// Messages a session's maildrop holds at most: the oldest this many of
/// INBOX (16 bytes each, so 3.2 MB per session at the cap). A POP3 client
/// downloads and deletes; a larger INBOX is seen in pieces as it shrinks.
pub const MAILDROP_MESSAGES_MAX: usize = 200_000;

/// Hot rows (~80 bytes each, no summary) read per read transaction at
/// login: ~80 KB per read, far inside FDB's 5 s and 10 MB; a maildrop at
/// [`MAILDROP_MESSAGES_MAX`] takes 200 reads. Small enough that
/// `node/tests/pop3.rs` crosses a page boundary with ~1,000 messages.
const ROWS_PER_READ: usize = 1_000;

/// The mailbox POP3 serves (RFC 1939 knows one maildrop per user).
const INBOX: &str = "INBOX";

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the account has no INBOX")]
    NoInbox,
    #[error(transparent)]
    Store(#[from] StorageError),
}

/// Why a message number names nothing a command can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    #[error("There's no message {0}.")]
    NoSuchMessage(MessageNumber),
    #[error("Message is deleted.")]
    Deleted,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    uid: Uid,
    size: u64,
    seen: bool,
    deleted: bool,
    retrieved: bool,
}

/// What QUIT's UPDATE state did.
#[derive(Debug, Default)]
pub struct Updated {
    pub expunged: usize,
    pub marked_seen: usize,
}

pub struct Maildrop {
    pub account: AccountId,
    pub mailbox: MailboxId,
    pub uid_validity: u32,
    entries: Vec<Entry>,
}

impl Maildrop {
    /// INBOX's messages now, oldest first (in UID order, as IMAP numbers
    /// them), read [`ROWS_PER_READ`] hot rows per read transaction.
    pub async fn load(db: &Database, account: AccountId) -> Result<Maildrop, LoadError> {
        let mb = db
            .read("pop3_inbox", move |txn| async move {
                mailboxes::find(&txn, account, INBOX).await
            })
            .await?
            .ok_or(LoadError::NoInbox)?;
        let mailbox = mb.id;
        let mut entries = Vec::new();
        let mut from: Uid = 1;
        while entries.len() < MAILDROP_MESSAGES_MAX {
            let limit = ROWS_PER_READ.min(MAILDROP_MESSAGES_MAX - entries.len());
            let rows = db
                .read("pop3_scan", move |txn| async move {
                    messages::list_meta(&txn, account, mailbox, from, None, limit).await
                })
                .await?;
            let Some(last) = rows.last() else { break };
            from = last.uid + 1;
            let full = rows.len() == limit;
            entries.extend(rows.iter().map(|m| Entry {
                uid: m.uid,
                size: m.body.size,
                seen: m.is_seen(),
                deleted: false,
                retrieved: false,
            }));
            if !full {
                break;
            }
        }
        debug_assert!(
            entries.windows(2).all(|w| w[0].uid < w[1].uid),
            "UIDs strictly increase"
        );
        Ok(Maildrop {
            account,
            mailbox,
            uid_validity: mb.uid_validity,
            entries,
        })
    }

    fn entry(&self, n: MessageNumber) -> Result<&Entry, Missing> {
        let e = (n as usize)
            .checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .ok_or(Missing::NoSuchMessage(n))?;
        if e.deleted {
            return Err(Missing::Deleted);
        }
        Ok(e)
    }

    /// STAT: messages and octets, the deleted ones left out (RFC 1939 §5).
    pub fn stat(&self) -> (usize, u64) {
        self.live().fold((0, 0), |(n, octets), (_, e)| (n + 1, octets + e.size))
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.deleted)
            .map(|(i, e)| (i + 1, e))
    }

    /// LIST n: the message's size.
    pub fn size(&self, n: MessageNumber) -> Result<u64, Missing> {
        self.entry(n).map(|e| e.size)
    }

    /// LIST: (number, size) of every message not deleted.
    pub fn sizes(&self) -> Vec<(usize, u64)> {
        self.live().map(|(n, e)| (n, e.size)).collect()
    }

    /// UIDL n.
    pub fn unique_id(&self, n: MessageNumber) -> Result<String, Missing> {
        self.entry(n).map(|e| unique_id(self.uid_validity, e.uid))
    }

    /// UIDL: (number, unique id) of every message not deleted.
    pub fn unique_ids(&self) -> Vec<(usize, String)> {
        self.live()
            .map(|(n, e)| (n, unique_id(self.uid_validity, e.uid)))
            .collect()
    }

    /// The UID and size RETR and TOP read.
    pub fn target(&self, n: MessageNumber) -> Result<(Uid, u64), Missing> {
        self.entry(n).map(|e| (e.uid, e.size))
    }

    /// RETR sent the message: it becomes `\Seen` at QUIT (Dovecot's
    /// default, `pop3_no_flag_updates = no`; TOP does not count).
    pub fn mark_retrieved(&mut self, n: MessageNumber) {
        if let Some(e) = (n as usize).checked_sub(1).and_then(|i| self.entries.get_mut(i)) {
            e.retrieved = true;
        }
    }

    pub fn dele(&mut self, n: MessageNumber) -> Result<(), Missing> {
        self.entry(n)?;
        self.entries[n as usize - 1].deleted = true;
        Ok(())
    }

    /// RSET: nothing is deleted any more (RFC 1939 §5). What RETR read
    /// stays read, as in Dovecot.
    pub fn rset(&mut self) {
        for e in &mut self.entries {
            e.deleted = false;
        }
    }

    /// The UPDATE state (RFC 1939 §6): `\Seen` on the messages retrieved
    /// and kept, then the deleted ones expunged, each one operation of the
    /// account's shard actor (fenced by its lease; it splits them into
    /// bounded transactions). The flags go first: if the expunge then
    /// fails, nothing the client was told it read is lost unread.
    pub async fn update(&self, ctx: &Arc<NodeCtx>) -> Result<Updated, OpError> {
        let mut out = Updated::default();
        let seen: Vec<Uid> = self
            .entries
            .iter()
            .filter(|e| e.retrieved && !e.deleted && !e.seen)
            .map(|e| e.uid)
            .collect();
        if !seen.is_empty() {
            let op = MailboxOp::Store {
                mailbox: self.mailbox,
                uids: seen.clone(),
                op: FlagOp::Add,
                flags: vec!["\\Seen".to_string()],
                unchanged_since: None,
            };
            mailbox_ops::request(ctx, self.account, op).await?;
            out.marked_seen = seen.len();
        }
        let gone: Vec<Uid> = self.entries.iter().filter(|e| e.deleted).map(|e| e.uid).collect();
        if !gone.is_empty() {
            let op = MailboxOp::Expunge {
                mailbox: self.mailbox,
                uids: gone,
            };
            out.expunged = mailbox_ops::request(ctx, self.account, op).await?.expunged.len();
        }
        Ok(out)
    }
}

/// The body reference of one message of the maildrop, read at RETR/TOP
/// time (the snapshot keeps only UIDs and sizes). None: expunged since.
pub async fn body_of(db: &Database, drop: &Maildrop, uid: Uid) -> Result<Option<BodyRef>, StorageError> {
    let (account, mailbox) = (drop.account, drop.mailbox);
    db.read("pop3_body_ref", move |txn| async move {
        messages::get_meta(&txn, account, mailbox, uid).await
    })
    .await
    .map(|m| m.map(|m| m.body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop_of(sizes: &[u64]) -> Maildrop {
        Maildrop {
            account: 1,
            mailbox: 1,
            uid_validity: 7,
            entries: sizes
                .iter()
                .enumerate()
                .map(|(i, s)| Entry {
                    uid: (i as Uid + 1) * 10,
                    size: *s,
                    seen: false,
                    deleted: false,
                    retrieved: false,
                })
                .collect(),
        }
    }

    #[test]
    fn deleted_messages_leave_stat_and_listings_but_keep_their_numbers() {
        let mut d = drop_of(&[100, 200, 300]);
        assert_eq!(d.stat(), (3, 600));
        d.dele(2).unwrap();
        assert_eq!(d.stat(), (2, 400));
        assert_eq!(d.sizes(), [(1, 100), (3, 300)]);
        assert_eq!(d.size(2), Err(Missing::Deleted));
        assert_eq!(d.dele(2), Err(Missing::Deleted));
        assert_eq!(d.size(4), Err(Missing::NoSuchMessage(4)));
        assert_eq!(d.unique_id(3).unwrap(), unique_id(7, 30));
        d.rset();
        assert_eq!(d.stat(), (3, 600));
    }
}
