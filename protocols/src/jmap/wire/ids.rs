//! JMAP ids and state strings over meshmail's keys.
//!
//! Ids (RFC 8620 §1.2: `[A-Za-z0-9_-]`, 1–255 chars):
//! - account `a<account id>`, mailbox `m<mailbox id>`;
//! - email `e<mailbox>_<uid>` of the message's *first place*, where it was
//!   first stored (delivery, import, create, COPY), kept across moves (RFC
//!   8621 §4: ids are immutable; IMAP EMAILID is the same string, RFC 8474).
//!   A message never moved is still there; a moved one is found through its
//!   placement key (`storage::model::placement`). A COPY is another email,
//!   with its own first place. Mailbox ids and UIDs are never reused in an
//!   account, so a first place names one message for ever;
//! - thread `t<hex>` (assigned at delivery) or `u<mailbox>_<uid>` (the first
//!   place) for a message stored before threads existed (a thread of its own);
//! - blob `b<mailbox>_<uid>` (a message's raw bytes, by its first place),
//!   `b<mailbox>_<uid>_<part>` (one decoded body part, part ids with `-` for
//!   `.`), `U<sha256>` (an upload of this account), `S<id>_<version>` (the
//!   text of one version of a Sieve script: a new text is a new blob id,
//!   so a blob id always names the same bytes);
//! - Sieve script `S<id>` (`storage::model::sieve::StoredScript::id`,
//!   kept across new texts and renames).
//!
//! State strings come from the change log: every mailbox carries its
//! HIGHESTMODSEQ, raised in the same transaction as every change to it and
//! logged under `chg`. The Email (and Thread) state is the list of
//! `(mailbox, HIGHESTMODSEQ)`; the Mailbox state adds a digest of each
//! mailbox's name, subscription, special use and sort order, which change
//! without a MODSEQ. Any
//! node, IMAP or JMAP, reading the same store computes the same string, so
//! `*/changes` is exact across nodes and restarts.

use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::mailboxes::Mailbox;

pub fn account_id(id: AccountId) -> String {
    format!("a{id}")
}

pub fn parse_account(s: &str) -> Option<AccountId> {
    s.strip_prefix('a')?.parse().ok()
}

pub fn mailbox_id(id: MailboxId) -> String {
    format!("m{id}")
}

pub fn parse_mailbox(s: &str) -> Option<MailboxId> {
    digits(s.strip_prefix('m')?)
}

/// A message's first place: (mailbox, UID) where it was first stored.
pub type FirstPlace = (MailboxId, Uid);

/// The id of the email first stored at `first` (`Message::first_place`).
pub fn email_id(first: FirstPlace) -> String {
    let (mailbox, uid) = first;
    format!("e{mailbox}_{uid}")
}

/// The first place an email id names.
pub fn parse_email(s: &str) -> Option<FirstPlace> {
    let (m, u) = s.strip_prefix('e')?.split_once('_')?;
    Some((digits(m)?, digits(u)?))
}

/// A message's thread id: its stored thread, else a thread of its own
/// named by its first place.
pub fn thread_id(stored: Option<&str>, first: FirstPlace) -> String {
    match stored {
        Some(t) => format!("t{t}"),
        None => format!("u{}_{}", first.0, first.1),
    }
}

/// A thread id: either a stored thread or one message's own thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadRef {
    Stored(String),
    /// The thread of the one message whose first place this is.
    Single(MailboxId, Uid),
}

pub fn parse_thread(s: &str) -> Option<ThreadRef> {
    if let Some(t) = s.strip_prefix('t') {
        return (!t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| ThreadRef::Stored(t.to_string()));
    }
    let (m, u) = s.strip_prefix('u')?.split_once('_')?;
    Some(ThreadRef::Single(digits(m)?, digits(u)?))
}

/// What a blob id names (messages by their first place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobRef {
    Message(MailboxId, Uid),
    Part(MailboxId, Uid, String),
    Upload(String),
    /// A part of an uploaded message (its Email/parse blob ids).
    UploadPart(String, String),
    /// The text of a Sieve script (its id) at one version.
    Script(u64, u64),
}

pub fn script_id(id: u64) -> String {
    format!("S{id}")
}

pub fn parse_script(s: &str) -> Option<u64> {
    digits(s.strip_prefix('S')?)
}

pub fn script_blob_id(id: u64, version: u64) -> String {
    format!("S{id}_{version}")
}

pub fn message_blob_id(first: FirstPlace) -> String {
    format!("b{}_{}", first.0, first.1)
}

pub fn part_blob_id(first: FirstPlace, part: &str) -> String {
    format!("b{}_{}_{}", first.0, first.1, part.replace('.', "-"))
}

pub fn upload_blob_id(hash: &str) -> String {
    format!("U{hash}")
}

pub fn upload_part_blob_id(hash: &str, part: &str) -> String {
    format!("U{hash}_{}", part.replace('.', "-"))
}

/// A part path in a blob id: digits, `-` between levels.
fn part_path(p: &str) -> Option<String> {
    (!p.is_empty() && p.len() <= 64 && p.bytes().all(|b| b.is_ascii_digit() || b == b'-')).then(|| p.replace('-', "."))
}

pub fn parse_blob(s: &str) -> Option<BlobRef> {
    if let Some(rest) = s.strip_prefix('S') {
        let (id, version) = rest.split_once('_')?;
        return Some(BlobRef::Script(digits(id)?, digits(version)?));
    }
    if let Some(rest) = s.strip_prefix('U') {
        let (h, part) = match rest.split_once('_') {
            Some((h, p)) => (h, Some(part_path(p)?)),
            None => (rest, None),
        };
        if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return Some(match part {
            Some(p) => BlobRef::UploadPart(h.to_string(), p),
            None => BlobRef::Upload(h.to_string()),
        });
    }
    let mut it = s.strip_prefix('b')?.splitn(3, '_');
    let m = digits(it.next()?)?;
    let u = digits(it.next()?)?;
    match it.next() {
        None => Some(BlobRef::Message(m, u)),
        Some(p) => Some(BlobRef::Part(m, u, part_path(p)?)),
    }
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// One mailbox's position in a state string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailboxMark {
    pub mailbox: MailboxId,
    pub modseq: u64,
    /// Digest of the name and subscription (Mailbox state only; 0 in the
    /// Email state).
    pub digest: u32,
}

/// A parsed state string: mailboxes in id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateVector {
    pub marks: Vec<MailboxMark>,
}

impl StateVector {
    pub fn of(mailboxes: &[Mailbox], with_digest: bool) -> StateVector {
        let mut marks: Vec<MailboxMark> = mailboxes
            .iter()
            .map(|m| MailboxMark {
                mailbox: m.id,
                modseq: m.highest_modseq,
                digest: if with_digest { digest(m) } else { 0 },
            })
            .collect();
        marks.sort_by_key(|m| m.mailbox);
        StateVector { marks }
    }

    pub fn get(&self, mailbox: MailboxId) -> Option<&MailboxMark> {
        self.marks
            .binary_search_by_key(&mailbox, |m| m.mailbox)
            .ok()
            .map(|i| &self.marks[i])
    }

    /// `s<id>:<modseq>[:<digest>]` joined by `,` (`s` alone when empty).
    pub fn encode(&self) -> String {
        let mut out = String::from("s");
        for (i, m) in self.marks.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("{}:{}", m.mailbox, m.modseq));
            if m.digest != 0 {
                out.push_str(&format!(":{:x}", m.digest));
            }
        }
        out
    }

    pub fn decode(s: &str) -> Option<StateVector> {
        let body = s.strip_prefix('s')?;
        let mut marks = Vec::new();
        if !body.is_empty() {
            for item in body.split(',') {
                let mut it = item.split(':');
                let mailbox = digits(it.next()?)?;
                let modseq = digits(it.next()?)?;
                let digest = match it.next() {
                    Some(d) => u32::from_str_radix(d, 16).ok()?,
                    None => 0,
                };
                if it.next().is_some() {
                    return None;
                }
                marks.push(MailboxMark {
                    mailbox,
                    modseq,
                    digest,
                });
            }
        }
        marks.sort_by_key(|m| m.mailbox);
        marks.dedup_by_key(|m| m.mailbox);
        Some(StateVector { marks })
    }
}

/// FNV-1a over what changes a mailbox without a MODSEQ; never 0.
/// FNV-1a of what a Mailbox shows that no MODSEQ follows: name,
/// subscription, and (JMAP Mailbox/set can change them) special use and
/// sort order. A mailbox with neither digests as it did before they were
/// part of it, so the states clients hold of such mailboxes stay valid.
fn digest(m: &Mailbox) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    eat(m.name.as_bytes());
    eat(&[0, u8::from(m.subscribed)]);
    if let Some(u) = &m.special_use {
        eat(&[1]);
        eat(u.as_bytes());
    }
    if m.sort_order != 0 {
        eat(&[2]);
        eat(&m.sort_order.to_le_bytes());
    }
    h.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_refuse() {
        assert_eq!(parse_email(&email_id((3, 42))), Some((3, 42)));
        assert_eq!(parse_email("e3"), None);
        assert_eq!(parse_email("e3_x"), None);
        assert_eq!(parse_mailbox("m7"), Some(7));
        assert_eq!(parse_mailbox("m-7"), None);
        assert_eq!(
            parse_blob(&part_blob_id((1, 2), "1.2")),
            Some(BlobRef::Part(1, 2, "1.2".into()))
        );
        assert_eq!(parse_blob(&message_blob_id((1, 2))), Some(BlobRef::Message(1, 2)));
        let h = "ab".repeat(32);
        assert_eq!(parse_blob(&upload_blob_id(&h)), Some(BlobRef::Upload(h.clone())));
        assert_eq!(
            parse_blob(&upload_part_blob_id(&h, "2.3")),
            Some(BlobRef::UploadPart(h.clone(), "2.3".into()))
        );
        assert_eq!(parse_blob(&format!("U{h}_")), None);
        assert_eq!(parse_blob(&format!("U{h}_2x")), None);
        assert_eq!(parse_blob("b1_2_"), None);
        assert_eq!(parse_blob("U00"), None);
        assert_eq!(parse_blob(&script_blob_id(7, 1234)), Some(BlobRef::Script(7, 1234)));
        assert_eq!(parse_blob("S7"), None, "a script id is not its blob id");
        assert_eq!(parse_blob("S7_x"), None);
        assert_eq!(parse_script(&script_id(42)), Some(42));
        assert_eq!(parse_script("S"), None);
        assert_eq!(parse_thread("tabc"), Some(ThreadRef::Stored("abc".into())));
        assert_eq!(parse_thread("u1_2"), Some(ThreadRef::Single(1, 2)));
    }

    #[test]
    fn states_round_trip() {
        let v = StateVector {
            marks: vec![
                MailboxMark {
                    mailbox: 1,
                    modseq: 9,
                    digest: 0xabc,
                },
                MailboxMark {
                    mailbox: 4,
                    modseq: 2,
                    digest: 0,
                },
            ],
        };
        assert_eq!(StateVector::decode(&v.encode()), Some(v));
        assert_eq!(StateVector::decode("s"), Some(StateVector::default()));
        assert_eq!(StateVector::decode("x1:2"), None);
        assert_eq!(StateVector::decode("s1:z"), None);
    }
}
