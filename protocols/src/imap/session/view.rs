//! The selected mailbox as one session sees it: its sequence-number map and
//! how far it has caught up with the store. Sync reads the change log (never
//! polls on a timer, never watches the store: it runs at the points the RFC
//! allows untagged responses, and when the shard actor's hint wakes IDLE).

use std::collections::BTreeSet;

use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::mailboxes::{self, Mailbox};
use meshmail_storage::model::messages::{self, ChangeKind};
use meshmail_storage::{Database, StorageError};

use crate::summary::Envelope;

use crate::imap::wire::response::FetchResponse;
use crate::imap::wire::sequence::IdSet;

/// Changes read per sync before falling back to a full reload.
const CHANGES_PER_SYNC_MAX: usize = 5000;

pub struct Selected {
    pub account: AccountId,
    pub id: MailboxId,
    pub name: String,
    pub read_only: bool,
    pub uid_validity: u32,
    /// UIDs in sequence order: `uids[seq - 1]`.
    pub uids: Vec<Uid>,
    /// Every change up to this MODSEQ is reflected in `uids`.
    pub known_modseq: u64,
    /// Expunges seen while EXPUNGE responses were not allowed.
    pub pending_expunges: Vec<Uid>,
    /// Flag states this session already sent (its own STOREs): the change
    /// log will show them again, and they need not be echoed.
    pub reported: std::collections::HashMap<Uid, u64>,
    /// IMAP4rev1 `\Recent`: the messages recent in this session.
    pub recent: BTreeSet<Uid>,
    /// The highest UID whose recency this session has settled.
    pub recent_checked: Uid,
    /// The keywords the last untagged FLAGS named: a FETCH may show no
    /// other (a client tracking state treats that as an error), so a new
    /// one is announced first ([`Selected::announce`]).
    pub announced: Vec<String>,
    /// The mailbox keeps an unseen index (see `messages::unseen_uids`):
    /// SEARCH UNSEEN reads it instead of every row. Never turns false.
    pub unseen_index: bool,
}

/// The system flags, in the order FLAGS lists them.
pub const SYSTEM_FLAGS: &str = "\\Answered \\Flagged \\Deleted \\Seen \\Draft";

impl Selected {
    pub async fn open(
        db: &Database,
        account: AccountId,
        mb: &Mailbox,
        read_only: bool,
    ) -> Result<Selected, StorageError> {
        let mut s = Selected {
            account,
            id: mb.id,
            name: mb.name.clone(),
            read_only,
            uid_validity: mb.uid_validity,
            uids: Vec::new(),
            known_modseq: mb.highest_modseq,
            pending_expunges: Vec::new(),
            reported: Default::default(),
            recent: BTreeSet::new(),
            recent_checked: 0,
            announced: mb.keywords.clone(),
            unseen_index: mb.unseen_index,
        };
        s.uids = messages::all_uids(db, account, mb.id).await?;
        s.recent_checked = s.max_uid();
        Ok(s)
    }

    /// `* FLAGS (...)` and `* OK [PERMANENTFLAGS (...)]` for the keywords
    /// announced so far.
    pub fn flags_lines(&self) -> Vec<u8> {
        let mut names = SYSTEM_FLAGS.to_string();
        for k in &self.announced {
            names.push(' ');
            names.push_str(k);
        }
        let mut out = format!("* FLAGS ({names})\r\n").into_bytes();
        let permanent = if self.read_only {
            "PERMANENTFLAGS ()".to_string()
        } else {
            format!("PERMANENTFLAGS ({names} \\*)")
        };
        out.extend_from_slice(&crate::imap::wire::response::untagged(
            crate::imap::wire::response::Status::Ok,
            Some(&permanent),
            "Flags permitted",
        ));
        out
    }

    /// Before a FETCH shows `flags`: the FLAGS lines again if one of them
    /// is a keyword this session has not been told about (else nothing).
    pub fn announce(&mut self, flags: &[String]) -> Vec<u8> {
        let mut new = false;
        for f in flags {
            if !f.starts_with('\\') && !self.announced.iter().any(|k| k.eq_ignore_ascii_case(f)) {
                self.announced.push(f.clone());
                new = true;
            }
        }
        if !new || meshmail_actors::faults::imap_suppresses_flags_update() {
            return Vec::new();
        }
        self.flags_lines()
    }

    /// The flags a FETCH shows: the stored ones, plus `\Recent` for a
    /// message recent in this session.
    pub fn shown_flags<'a>(&self, uid: Uid, flags: &'a [String]) -> impl Iterator<Item = &'a str> + use<'a> {
        let recent = self.recent.contains(&uid).then_some("\\Recent");
        flags.iter().map(String::as_str).chain(recent)
    }

    /// Takes the UIDs in `(from, to]` of this view as recent.
    pub fn take_recent(&mut self, from: Uid, to: Uid) {
        let fresh: Vec<Uid> = self.uids.iter().copied().filter(|u| *u > from && *u <= to).collect();
        self.recent.extend(fresh);
    }

    pub fn max_uid(&self) -> Uid {
        self.uids.last().copied().unwrap_or(0)
    }

    pub fn seq_of(&self, uid: Uid) -> Option<u32> {
        self.uids.binary_search(&uid).ok().map(|i| i as u32 + 1)
    }

    /// UIDs of a sequence-number set.
    pub fn uids_of_seqs(&self, seqs: &IdSet) -> Vec<Uid> {
        seqs.iter()
            .filter_map(|s| self.uids.get(s as usize - 1).copied())
            .collect()
    }

    /// UIDs of a UID set that exist in this view.
    pub fn existing(&self, uids: &IdSet) -> Vec<Uid> {
        self.uids.iter().copied().filter(|u| uids.contains(*u)).collect()
    }

    /// Brings the view up to date and renders the untagged responses: EXPUNGE
    /// (or VANISHED) only when `allow_expunge`, then EXISTS, then flag
    /// changes as FETCH. A trimmed change log means a full reload.
    pub async fn sync(
        &mut self,
        db: &Database,
        allow_expunge: bool,
        condstore: bool,
        qresync: bool,
    ) -> Result<Vec<u8>, StorageError> {
        let mut out = Vec::new();
        let (account, id, known) = (self.account, self.id, self.known_modseq);
        let (mb, floor, changes) = db
            .read("imap_sync", move |txn| async move {
                let mb = mailboxes::get(&txn, account, id).await?;
                let floor = messages::change_floor(&txn, account, id).await?;
                let changes = match &mb {
                    Some(m) if m.highest_modseq > known && floor <= known => {
                        messages::changes_since(&txn, account, id, known, CHANGES_PER_SYNC_MAX).await?
                    }
                    _ => Vec::new(),
                };
                Ok::<_, StorageError>((mb, floor, changes))
            })
            .await?;
        let Some(mb) = mb else {
            // Deleted under us: the client will see it gone at the next LIST.
            return Ok(out);
        };
        let mut expunged: Vec<Uid> = std::mem::take(&mut self.pending_expunges);
        let mut flagged: Vec<Uid> = Vec::new();
        let mut added: Vec<Uid> = Vec::new();
        if mb.highest_modseq > known {
            if floor > known || changes.len() >= CHANGES_PER_SYNC_MAX {
                let now = messages::all_uids(db, account, id).await?;
                expunged.extend(self.uids.iter().filter(|u| now.binary_search(u).is_err()));
                added.extend(now.iter().filter(|u| **u > self.max_uid()));
                flagged.extend(now.iter().filter(|u| **u <= self.max_uid()));
            } else {
                self.sort_changes(changes, &mut expunged, &mut flagged, &mut added);
            }
            self.known_modseq = mb.highest_modseq;
        }
        self.apply_expunges(expunged, allow_expunge, qresync, &mut out);
        added.sort_unstable();
        added.dedup();
        if !added.is_empty() {
            self.uids.extend(added);
            out.extend_from_slice(format!("* {} EXISTS\r\n", self.uids.len()).as_bytes());
        }
        self.report_flags(db, flagged, condstore, &mut out).await?;
        self.reported.clear();
        Ok(out)
    }

    /// Sorts the change log's entries into expunged, flag-changed and added
    /// UIDs.
    fn sort_changes(
        &self,
        changes: Vec<messages::Change>,
        expunged: &mut Vec<Uid>,
        flagged: &mut Vec<Uid>,
        added: &mut Vec<Uid>,
    ) {
        for ch in changes {
            match ch.kind {
                ChangeKind::Added if ch.uid > self.max_uid() => added.push(ch.uid),
                ChangeKind::Added => {}
                // A flag change this session's own STORE already
                // showed (at that MODSEQ or later) needs no row
                // read: after `STORE 1:*` that is every message.
                ChangeKind::Flags if self.reported.get(&ch.uid).is_some_and(|m| *m >= ch.modseq) => {}
                ChangeKind::Flags => flagged.push(ch.uid),
                ChangeKind::Expunged => expunged.push(ch.uid),
            }
        }
    }

    /// Announces the expunges of messages in the view (VANISHED under
    /// QRESYNC, else EXPUNGE by sequence number) and drops them from it;
    /// when expunges may not be sent now, keeps them for a later sync.
    fn apply_expunges(&mut self, mut expunged: Vec<Uid>, allow_expunge: bool, qresync: bool, out: &mut Vec<u8>) {
        expunged.sort_unstable();
        expunged.dedup();
        expunged.retain(|u| self.uids.binary_search(u).is_ok());
        if !allow_expunge || expunged.is_empty() {
            self.pending_expunges = expunged;
            return;
        }
        if qresync {
            let mut set = IdSet::new();
            for u in &expunged {
                set.insert(*u);
            }
            out.extend_from_slice(&crate::imap::wire::response::vanished_line(false, &set));
            self.uids.retain(|u| expunged.binary_search(u).is_err());
        } else {
            // Highest first would also work; ascending with live
            // renumbering is what RFC 9051 §7.5.1 describes.
            for u in &expunged {
                if let Some(seq) = self.seq_of(*u) {
                    out.extend_from_slice(format!("* {seq} EXPUNGE\r\n").as_bytes());
                    self.uids.remove(seq as usize - 1);
                }
            }
        }
    }

    /// An untagged FETCH of the flags (and MODSEQ under CONDSTORE) of each
    /// message in the view whose flags changed, unless this session's own
    /// STORE already showed that very change.
    async fn report_flags(
        &mut self,
        db: &Database,
        mut flagged: Vec<Uid>,
        condstore: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), StorageError> {
        flagged.sort_unstable();
        flagged.dedup();
        flagged.retain(|u| self.uids.binary_search(u).is_ok() && !self.pending_expunges.contains(u));
        for chunk in flagged.chunks(META_ROWS_PER_READ) {
            let rows = load_meta(db, self.account, self.id, chunk).await?;
            for m in rows {
                let Some(seq) = self.seq_of(m.uid) else { continue };
                if self.reported.get(&m.uid) == Some(&m.modseq) {
                    continue;
                }
                out.extend_from_slice(&self.announce(&m.flags));
                let mut f = FetchResponse::new(seq, false);
                f.uid(m.uid).flags(self.shown_flags(m.uid, &m.flags));
                if condstore {
                    f.modseq(m.modseq);
                }
                out.extend_from_slice(&f.finish());
            }
        }
        Ok(())
    }
}

/// Whole messages (with their summaries) read per store read: summaries
/// are 1–3 KB, so ~1 MB per read, well inside FDB's limits.
pub(super) const ROWS_PER_READ: usize = 500;
/// Hot rows (~80 bytes, no summary) read per store read.
pub(super) const META_ROWS_PER_READ: usize = 5000;
/// Hot rows with their envelopes read per store read: the range read
/// returns whole binary summaries (~0.3–1 KB) but decodes envelopes only,
/// so ~2 MB per read.
pub(super) const ENVELOPE_ROWS_PER_READ: usize = 2000;

/// The whole messages (hot row and summary) of some UIDs, missing ones
/// skipped, in UID order, in one snapshot: one range read for a run of
/// UIDs. For commands that show envelopes, structures or bodies.
pub async fn load_rows(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<messages::Message>, StorageError> {
    let uids = uids.to_vec();
    db.read("imap_rows", move |txn| {
        let uids = uids.clone();
        async move { messages::get_many(&txn, account, mailbox, &uids).await }
    })
    .await
}

/// The hot parts and envelopes (no body structures decoded) of some UIDs,
/// missing ones skipped, in UID order, in one snapshot: for SEARCH on
/// envelope fields, SORT and THREAD.
pub async fn load_envelopes(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<(messages::MessageMeta, Envelope)>, StorageError> {
    let uids = uids.to_vec();
    db.read("imap_envelopes", move |txn| {
        let uids = uids.clone();
        async move { messages::get_envelopes_many(&txn, account, mailbox, &uids).await }
    })
    .await
}

/// The hot parts and header section lengths (nothing else of the summary
/// decoded) of some UIDs, in UID order.
pub async fn load_header_lens(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<(messages::MessageMeta, u64)>, StorageError> {
    let uids = uids.to_vec();
    db.read("imap_header_lens", move |txn| {
        let uids = uids.clone();
        async move { messages::get_header_lens_many(&txn, account, mailbox, &uids).await }
    })
    .await
}

/// The hot parts (flags, MODSEQ, size, dates; no summary) of some UIDs,
/// missing ones skipped, in UID order, in one snapshot.
pub async fn load_meta(
    db: &Database,
    account: AccountId,
    mailbox: MailboxId,
    uids: &[Uid],
) -> Result<Vec<messages::MessageMeta>, StorageError> {
    let uids = uids.to_vec();
    db.read("imap_meta", move |txn| {
        let uids = uids.clone();
        async move { messages::get_meta_many(&txn, account, mailbox, &uids).await }
    })
    .await
}
