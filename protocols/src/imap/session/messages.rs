//! IMAP commands on the messages of the selected mailbox: FETCH, SEARCH,
//! STORE, COPY, MOVE, EXPUNGE, UID EXPUNGE, and the QRESYNC part of SELECT.
//! FETCH never re-parses a message: envelope, structure and part offsets
//! come from the summary stored at delivery; only body bytes are read.

use meshmail_actors::mailbox_ops::MailboxOp;
use meshmail_storage::StorageError;
use meshmail_storage::ids::Uid;
use meshmail_storage::model::messages::{self, ChangeKind, FlagOp, MessageMeta};

use super::commands::{find, refused, write};
use super::view::{Selected, load_envelopes, load_header_lens, load_meta, load_rows};
use super::{State, Transition};
use crate::imap::wire::response::{self, FetchResponse, Status};
use crate::imap::wire::sequence::{IdSet, SequenceSet};
use crate::imap::wire::types::{CommandKind, Qresync, StoreCommand, StoreMode};
use crate::net::{Conn, ConnError};
use crate::summary::Summary;

use super::view::{ENVELOPE_ROWS_PER_READ, META_ROWS_PER_READ, ROWS_PER_READ};

/// The commands of the selected state, run on `sel`.
pub(super) async fn run(
    st: &mut State,
    sel: &mut Selected,
    conn: &mut Conn,
    tag: &str,
    kind: CommandKind,
) -> Result<Transition, ConnError> {
    use CommandKind as K;
    match kind {
        K::Check => {
            st.sync(conn, Some(sel), true).await;
            st.tagged(conn, tag, Status::Ok, None, "CHECK completed");
        }
        K::Close => {
            close(st, sel).await;
            st.tagged(conn, tag, Status::Ok, None, "CLOSE completed");
            return Ok(Transition::Deselect);
        }
        K::Unselect => {
            st.tagged(conn, tag, Status::Ok, None, "UNSELECT completed");
            return Ok(Transition::Deselect);
        }
        K::Fetch(cmd) => super::fetch::fetch(st, sel, conn, tag, cmd).await,
        K::Search(cmd) => super::search::search(st, sel, conn, tag, cmd).await,
        K::Sort(cmd) => super::search::sort(st, sel, conn, tag, cmd).await,
        K::Thread(cmd) => super::search::thread(st, sel, conn, tag, cmd).await,
        K::Store(cmd) => store(st, sel, conn, tag, cmd).await,
        K::Copy { uid, set, mailbox } => copy(st, sel, conn, tag, uid, &set, &mailbox, false).await,
        K::Move { uid, set, mailbox } => copy(st, sel, conn, tag, uid, &set, &mailbox, true).await,
        K::Expunge => expunge(st, sel, conn, tag, None).await,
        K::UidExpunge(set) => expunge(st, sel, conn, tag, Some(set)).await,
        // Every other command is routed to `commands`.
        _ => st.tagged(conn, tag, Status::Bad, None, "Command not valid here"),
    }
    Ok(Transition::Stay)
}

/// CLOSE expunges silently (no EXPUNGE responses), unless read-only;
/// a refused expunge still closes.
async fn close(st: &mut State, sel: &Selected) {
    if sel.read_only {
        return;
    }
    let deleted = deleted_uids(st, sel, &sel.uids).await.unwrap_or_default();
    if !deleted.is_empty() {
        let op = MailboxOp::Expunge {
            mailbox: sel.id,
            uids: deleted,
        };
        let _ = write(st, sel.account, op).await;
    }
}

/// STORE (and UID STORE), with CONDSTORE's UNCHANGEDSINCE: the messages
/// changed since are named in the tagged OK's MODIFIED code.
async fn store(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, cmd: StoreCommand) {
    let uid = cmd.uid;
    let uids = resolve(st, sel, &cmd.set, uid);
    if sel.read_only {
        st.tagged(conn, tag, Status::No, Some("READ-ONLY"), "Mailbox is read-only");
        return;
    }
    if cmd.unchanged_since.is_some() {
        st.condstore_by_use(conn, sel);
    }
    let op = MailboxOp::Store {
        mailbox: sel.id,
        uids,
        op: match cmd.mode {
            StoreMode::Replace => FlagOp::Replace,
            StoreMode::Add => FlagOp::Add,
            StoreMode::Remove => FlagOp::Remove,
        },
        flags: cmd.flags.iter().map(|f| f.as_str().to_string()).collect(),
        unchanged_since: cmd.unchanged_since,
    };
    let r = match write(st, sel.account, op).await {
        Ok(r) => r,
        Err(e) => return refused(st, conn, tag, &e),
    };
    sel.reported.extend(r.stored.iter().map(|(u, _, m)| (*u, *m)));
    let (utf8, condstore) = (st.utf8, st.condstore);
    // The new flags unless SILENT; a CONDSTORE client gets each MODSEQ
    // even then (RFC 7162).
    if !cmd.silent || condstore {
        for (u, flags, modseq) in &r.stored {
            let Some(seq) = sel.seq_of(*u) else { continue };
            let mut f = FetchResponse::new(seq, utf8);
            if uid {
                f.uid(*u);
            }
            if !cmd.silent {
                conn.send(&sel.announce(flags));
                f.flags(sel.shown_flags(*u, flags));
            }
            if condstore {
                f.modseq(*modseq);
            }
            conn.send(&f.finish());
        }
    }
    st.sync(conn, Some(sel), uid).await;
    if r.modified.is_empty() {
        st.tagged(conn, tag, Status::Ok, None, "STORE completed");
    } else {
        let ids: Vec<u32> = if uid {
            r.modified.clone()
        } else {
            r.modified.iter().filter_map(|u| sel.seq_of(*u)).collect()
        };
        let code = format!("MODIFIED {}", id_set(&ids));
        st.tagged(conn, tag, Status::Ok, Some(&code), "Some messages changed since");
    }
}

fn id_set(ids: &[u32]) -> String {
    let mut set = IdSet::new();
    for i in ids {
        set.insert(*i);
    }
    set.to_string()
}

/// The UIDs a set names in the selected mailbox.
pub(super) fn resolve(st: &State, sel: &Selected, set: &SequenceSet, uid: bool) -> Vec<Uid> {
    if uid {
        let ids = set.resolve(sel.max_uid(), st.saved.as_ref());
        sel.existing(&ids)
    } else if matches!(set, SequenceSet::Saved) {
        // `$` holds UIDs whatever the command's form.
        st.saved.as_ref().map(|s| sel.existing(s)).unwrap_or_default()
    } else {
        sel.uids_of_seqs(&set.resolve(sel.uids.len() as u32, None))
    }
}

/// What of the stored summary a command reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum SummaryNeed {
    /// Hot rows alone (`FETCH (UID FLAGS)`, SEARCH UNSEEN).
    Nothing,
    /// Where the header section ends, nothing else decoded (`FETCH
    /// BODY.PEEK[HEADER]` and the other header sections).
    HeaderLen,
    /// The envelope, its body structure not decoded (FETCH ENVELOPE,
    /// SEARCH FROM/SUBJECT, SORT, THREAD).
    Envelope,
    /// The whole summary (BODYSTRUCTURE, sections).
    Whole,
}

/// Rows read per store read for `need` (each read well inside FDB's
/// limits: see the constants).
pub(super) fn rows_per_read(need: SummaryNeed) -> usize {
    match need {
        SummaryNeed::Nothing => META_ROWS_PER_READ,
        SummaryNeed::HeaderLen | SummaryNeed::Envelope => ENVELOPE_ROWS_PER_READ,
        SummaryNeed::Whole => ROWS_PER_READ,
    }
}

/// The rows a FETCH or SEARCH works on: hot parts, with the typed summary
/// as far as `need` says (for `Envelope`, a summary holding the envelope
/// alone). None when the store cannot be read.
pub(super) async fn load_for(
    db: &meshmail_storage::Database,
    sel: &Selected,
    uids: &[Uid],
    need: SummaryNeed,
) -> Option<Vec<(MessageMeta, Option<Summary>)>> {
    let (account, mailbox) = (sel.account, sel.id);
    Some(match need {
        SummaryNeed::Nothing => {
            let rows = load_meta(db, account, mailbox, uids).await.ok()?;
            rows.into_iter().map(|m| (m, None)).collect()
        }
        SummaryNeed::HeaderLen => {
            let rows = load_header_lens(db, account, mailbox, uids).await.ok()?;
            partial(rows, |header_len| Summary {
                header_len,
                ..Summary::default()
            })
        }
        SummaryNeed::Envelope => {
            let rows = load_envelopes(db, account, mailbox, uids).await.ok()?;
            partial(rows, |envelope| Summary {
                envelope,
                ..Summary::default()
            })
        }
        SummaryNeed::Whole => {
            let rows = load_rows(db, account, mailbox, uids).await.ok()?;
            rows.into_iter()
                .map(|m| {
                    let (meta, s) = m.into_parts();
                    (meta, Some(s))
                })
                .collect()
        }
    })
}

/// Rows with a summary holding only what was read of it (`part`).
fn partial<T>(rows: Vec<(MessageMeta, T)>, part: impl Fn(T) -> Summary) -> Vec<(MessageMeta, Option<Summary>)> {
    rows.into_iter().map(|(m, t)| (m, Some(part(t)))).collect()
}

#[allow(clippy::too_many_arguments)] // the COPY/MOVE command's parts, named
async fn copy(
    st: &mut State,
    sel: &mut Selected,
    conn: &mut Conn,
    tag: &str,
    uid: bool,
    set: &SequenceSet,
    name: &str,
    moving: bool,
) {
    let uids = resolve(st, sel, set, uid);
    let target = match find(st, sel.account, name).await {
        Ok(Some(t)) => t,
        Ok(None) => return st.tagged(conn, tag, Status::No, Some("TRYCREATE"), "No such mailbox"),
        Err(_) => return st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later"),
    };
    if moving && sel.read_only {
        return st.tagged(conn, tag, Status::No, Some("READ-ONLY"), "Mailbox is read-only");
    }
    let op = MailboxOp::Copy {
        from: sel.id,
        uids,
        to: target.id,
        moving,
    };
    match write(st, sel.account, op).await {
        Ok(r) if r.over_quota => st.tagged(conn, tag, Status::No, Some("OVERQUOTA"), "Over quota: nothing copied"),
        Ok(r) if r.copied.is_empty() => st.tagged(conn, tag, Status::Ok, None, "Nothing to copy"),
        Ok(r) => {
            let src: Vec<u32> = r.copied.iter().map(|p| p.0).collect();
            let dst: Vec<u32> = r.copied.iter().map(|p| p.1).collect();
            let code = format!("COPYUID {} {} {}", r.uid_validity, id_set(&src), id_set(&dst));
            if moving {
                conn.send(&response::untagged(Status::Ok, Some(&code), "Moved"));
                st.sync(conn, Some(sel), true).await;
                st.tagged(conn, tag, Status::Ok, None, "MOVE completed");
            } else {
                st.sync(conn, Some(sel), uid).await;
                st.tagged(conn, tag, Status::Ok, Some(&code), "COPY completed");
            }
        }
        Err(e) => refused(st, conn, tag, &e),
    }
}

/// UIDs (among `uids`) of messages flagged \Deleted.
pub(super) async fn deleted_uids(st: &State, sel: &Selected, uids: &[Uid]) -> Result<Vec<Uid>, StorageError> {
    let mut out = Vec::new();
    for chunk in uids.chunks(META_ROWS_PER_READ) {
        let rows = load_meta(&st.shared.ctx.db, sel.account, sel.id, chunk).await?;
        out.extend(rows.iter().filter(|m| m.has_flag("\\Deleted")).map(|m| m.uid));
    }
    Ok(out)
}

async fn expunge(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, only: Option<SequenceSet>) {
    if sel.read_only {
        return st.tagged(conn, tag, Status::No, Some("READ-ONLY"), "Mailbox is read-only");
    }
    let candidates = match &only {
        Some(set) => sel.existing(&set.resolve(sel.max_uid(), st.saved.as_ref())),
        None => sel.uids.clone(),
    };
    let deleted = match deleted_uids(st, sel, &candidates).await {
        Ok(d) => d,
        Err(_) => return st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later"),
    };
    if !deleted.is_empty() {
        let op = MailboxOp::Expunge {
            mailbox: sel.id,
            uids: deleted,
        };
        if let Err(e) = write(st, sel.account, op).await {
            return refused(st, conn, tag, &e);
        }
    }
    st.sync(conn, Some(sel), true).await;
    st.tagged(conn, tag, Status::Ok, None, "EXPUNGE completed");
}

/// `* VANISHED (EARLIER)` for messages expunged after `since` (QRESYNC).
pub(super) async fn vanished_since(
    db: &meshmail_storage::Database,
    sel: &Selected,
    conn: &mut Conn,
    since: u64,
    within: Option<&IdSet>,
) {
    let (account, mailbox) = (sel.account, sel.id);
    let floor_and_changes = db
        .read("imap_vanished", move |txn| async move {
            let floor = messages::change_floor(&txn, account, mailbox).await?;
            let changes = messages::changes_since(&txn, account, mailbox, since, 10_000).await?;
            Ok::<_, StorageError>((floor, changes))
        })
        .await;
    let Ok((floor, changes)) = floor_and_changes else {
        return;
    };
    let mut gone = IdSet::new();
    if floor > since {
        // The log no longer reaches back: everything not present is reported.
        if let Some(w) = within {
            for u in w.iter().take(100_000) {
                if sel.seq_of(u).is_none() && u < sel.max_uid() {
                    gone.insert(u);
                }
            }
        }
    } else {
        for ch in changes.iter().filter(|c| c.kind == ChangeKind::Expunged) {
            if within.is_none_or(|w| w.contains(ch.uid)) {
                gone.insert(ch.uid);
            }
        }
    }
    if !gone.is_empty() {
        conn.send(&response::vanished_line(true, &gone));
    }
}

/// SELECT (QRESYNC uidvalidity modseq [known-uids]): what changed since.
pub(super) async fn qresync_select(st: &State, conn: &mut Conn, sel: &Selected, q: &Qresync) {
    let known = q.known_uids.as_ref().map(|k| k.resolve(u32::MAX, None));
    vanished_since(&st.shared.ctx.db, sel, conn, q.modseq, known.as_ref()).await;
    let (account, mailbox, since) = (sel.account, sel.id, q.modseq);
    let changed = st
        .shared
        .ctx
        .db
        .read("imap_qresync", move |txn| async move {
            messages::changes_since(&txn, account, mailbox, since, 10_000).await
        })
        .await
        .unwrap_or_default();
    let mut uids: Vec<Uid> = changed
        .iter()
        .filter(|c| c.kind != ChangeKind::Expunged)
        .map(|c| c.uid)
        .filter(|u| sel.seq_of(*u).is_some())
        .collect();
    uids.sort_unstable();
    uids.dedup();
    if let Ok(rows) = load_meta(&st.shared.ctx.db, account, mailbox, &uids).await {
        for m in rows {
            let Some(seq) = sel.seq_of(m.uid) else { continue };
            let mut f = FetchResponse::new(seq, st.utf8);
            f.uid(m.uid).flags(sel.shown_flags(m.uid, &m.flags)).modseq(m.modseq);
            conn.send(&f.finish());
        }
    }
}
