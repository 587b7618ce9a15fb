//! IMAP commands on the messages of the selected mailbox: FETCH, SEARCH,
//! STORE, COPY, MOVE, EXPUNGE, UID EXPUNGE, and the QRESYNC part of SELECT.
//! FETCH never re-parses a message: envelope, structure and part offsets
//! come from the summary stored at delivery; only body bytes are read.

use bytes::Bytes;
use meshmail_actors::mailbox_ops::MailboxOp;
use meshmail_storage::StorageError;
use meshmail_storage::ids::Uid;
use meshmail_storage::model::messages::{self, ChangeKind, FlagOp, MessageMeta};

use super::commands::{find, refused, write};
use super::view::{Selected, load_envelopes, load_meta, load_rows};
use super::{State, Transition};
use crate::imap::wire::response::{self, BinaryError, FetchResponse, Status};
use crate::imap::wire::sequence::{IdSet, SequenceSet};
use crate::imap::wire::types::{CommandKind, FetchAttr, FetchCommand, Qresync, Section, SectionText, StoreMode};
use crate::net::{Conn, ConnError};
use crate::summary::Summary;

use super::envelope_cache::FixedParts;
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
            if !sel.read_only {
                // CLOSE expunges silently (no EXPUNGE responses).
                let deleted = deleted_uids(st, sel, &sel.uids).await.unwrap_or_default();
                if !deleted.is_empty() {
                    let op = MailboxOp::Expunge {
                        mailbox: sel.id,
                        uids: deleted,
                    };
                    let _ = write(st, sel.account, op).await;
                }
            }
            st.tagged(conn, tag, Status::Ok, None, "CLOSE completed");
            return Ok(Transition::Deselect);
        }
        K::Unselect => {
            st.tagged(conn, tag, Status::Ok, None, "UNSELECT completed");
            return Ok(Transition::Deselect);
        }
        K::Fetch(cmd) => fetch(st, sel, conn, tag, cmd).await,
        K::Search(cmd) => super::search::search(st, sel, conn, tag, cmd).await,
        K::Sort(cmd) => super::search::sort(st, sel, conn, tag, cmd).await,
        K::Thread(cmd) => super::search::thread(st, sel, conn, tag, cmd).await,
        K::Store(cmd) => {
            let uid = cmd.uid;
            let uids = resolve(st, sel, &cmd.set, uid);
            if sel.read_only {
                st.tagged(conn, tag, Status::No, Some("READ-ONLY"), "Mailbox is read-only");
                return Ok(Transition::Stay);
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
            match write(st, sel.account, op).await {
                Ok(r) => {
                    sel.reported.extend(r.stored.iter().map(|(u, _, m)| (*u, *m)));
                    let (utf8, condstore) = (st.utf8, st.condstore);
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
                Err(e) => refused(st, conn, tag, &e),
            }
        }
        K::Copy { uid, set, mailbox } => copy(st, sel, conn, tag, uid, &set, &mailbox, false).await,
        K::Move { uid, set, mailbox } => copy(st, sel, conn, tag, uid, &set, &mailbox, true).await,
        K::Expunge => expunge(st, sel, conn, tag, None).await,
        K::UidExpunge(set) => expunge(st, sel, conn, tag, Some(set)).await,
        // Every other command is routed to `commands`.
        _ => st.tagged(conn, tag, Status::Bad, None, "Command not valid here"),
    }
    Ok(Transition::Stay)
}

fn id_set(ids: &[u32]) -> String {
    let mut set = IdSet::new();
    for i in ids {
        set.insert(*i);
    }
    set.to_string()
}

/// The UIDs a set names in the selected mailbox.
fn resolve(st: &State, sel: &Selected, set: &SequenceSet, uid: bool) -> Vec<Uid> {
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
    /// The envelope, its body structure not decoded (FETCH ENVELOPE,
    /// SEARCH FROM/SUBJECT, SORT, THREAD).
    Envelope,
    /// The whole summary (BODYSTRUCTURE, sections).
    Whole,
}

/// What rendering `a` reads of the stored summary (envelope, structure,
/// part offsets).
fn summary_need(a: &FetchAttr) -> SummaryNeed {
    match a {
        FetchAttr::Uid
        | FetchAttr::Flags
        | FetchAttr::InternalDate
        | FetchAttr::Rfc822Size
        | FetchAttr::ModSeq
        | FetchAttr::EmailId
        | FetchAttr::ThreadId
        | FetchAttr::Rfc822 => SummaryNeed::Nothing,
        FetchAttr::Envelope => SummaryNeed::Envelope,
        _ => SummaryNeed::Whole,
    }
}

/// Rows read per store read for `need` (each read well inside FDB's
/// limits: see the constants).
pub(super) fn rows_per_read(need: SummaryNeed) -> usize {
    match need {
        SummaryNeed::Nothing => META_ROWS_PER_READ,
        SummaryNeed::Envelope => ENVELOPE_ROWS_PER_READ,
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
        SummaryNeed::Envelope => {
            let rows = load_envelopes(db, account, mailbox, uids).await.ok()?;
            rows.into_iter()
                .map(|(m, envelope)| {
                    let s = Summary {
                        envelope,
                        ..Summary::default()
                    };
                    (m, Some(s))
                })
                .collect()
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

/// A FETCH of hot-row items only (UID, FLAGS, MODSEQ, RFC822.SIZE,
/// INTERNALDATE, ids) answered from the node's [`HotRowCache`]: Some(the
/// number of UIDs of the view no longer stored) when answered, None when
/// the cache is off or cannot answer (the caller reads the store).
///
/// [`HotRowCache`]: super::hot_row_cache::HotRowCache
async fn fetch_cached(
    st: &State,
    sel: &mut Selected,
    conn: &mut Conn,
    uids: &[Uid],
    cmd: &FetchCommand,
) -> Option<usize> {
    let cache = st.shared.hot_rows.as_ref()?;
    let shows_flags = cmd.attrs.iter().any(|a| matches!(a, FetchAttr::Flags));
    let (account, mailbox, uid_validity) = (sel.account, sel.id, sel.uid_validity);
    cache
        .with_rows(&st.shared.ctx.db, account, mailbox, uid_validity, |rows| {
            let mut vanished = 0;
            for uid in uids {
                let Some(m) = rows.get(*uid) else {
                    vanished += 1;
                    continue;
                };
                let Some(seq) = to_show(sel, conn, m, cmd, shows_flags) else {
                    continue;
                };
                let (f, _) = render(st, sel, seq, m, None, None, cmd, false);
                conn.send(&f);
            }
            vanished
        })
        .await
}

/// The sequence number to answer `m` under; None when the FETCH skips it
/// (unchanged since CHANGEDSINCE, or no longer in the view). Sends first
/// the untagged FLAGS a keyword new to the session needs.
fn to_show(sel: &mut Selected, conn: &mut Conn, m: &MessageMeta, cmd: &FetchCommand, shows_flags: bool) -> Option<u32> {
    if cmd.changed_since.is_some_and(|since| m.modseq <= since) {
        return None;
    }
    let seq = sel.seq_of(m.uid)?;
    if shows_flags {
        conn.send(&sel.announce(&m.flags));
    }
    Some(seq)
}

fn needs_raw(a: &FetchAttr) -> bool {
    matches!(
        a,
        FetchAttr::Rfc822
            | FetchAttr::Rfc822Header
            | FetchAttr::Rfc822Text
            | FetchAttr::BodySection { .. }
            | FetchAttr::Binary { .. }
            | FetchAttr::BinarySize { .. }
    )
}

/// How a FETCH shows each of its rows.
struct Shown<'a> {
    cmd: &'a FetchCommand,
    shows_flags: bool,
    /// UIDs (sorted) whose flags this FETCH changed (`\Seen`).
    flags_changed: &'a [Uid],
    raw_needed: bool,
}

/// Body bytes a FETCH holds at once: the rows of one store read are
/// rendered in runs of at most this many body bytes (one message at least),
/// so `FETCH 1:* BODY[]` of a folder of big messages never holds them all.
const FETCH_BODY_BYTES_MAX: u64 = 8 << 20;

/// Renders and sends `rows`; true when a part had an unknown transfer
/// encoding. Bodies, when an item needs them, are read a run at a time.
async fn send_rows(
    st: &State,
    sel: &mut Selected,
    conn: &mut Conn,
    rows: &[(MessageMeta, Option<Summary>)],
    show: &Shown<'_>,
) -> bool {
    let mut unknown_cte = false;
    let mut start = 0;
    while start < rows.len() {
        let end = if show.raw_needed {
            body_run_end(rows, start)
        } else {
            rows.len()
        };
        let run = &rows[start..end];
        let mut raws = if show.raw_needed {
            read_bodies(st, run).await
        } else {
            Vec::new()
        };
        for (k, (m, summary)) in run.iter().enumerate() {
            let Some(seq) = to_show(sel, conn, m, show.cmd, show.shows_flags) else {
                continue;
            };
            let raw = raws.get_mut(k).and_then(Option::take);
            let changed = show.flags_changed.binary_search(&m.uid).is_ok();
            let (f, bad_cte) = render(st, sel, seq, m, summary.as_ref(), raw.as_ref(), show.cmd, changed);
            unknown_cte |= bad_cte;
            conn.send(&f);
        }
        start = end;
    }
    unknown_cte
}

/// The end of the run of `rows` from `start` whose bodies together stay
/// within [`FETCH_BODY_BYTES_MAX`] (one row at least).
fn body_run_end(rows: &[(MessageMeta, Option<Summary>)], start: usize) -> usize {
    let mut end = start + 1;
    let mut bytes = rows[start].0.body.size;
    while end < rows.len() && bytes + rows[end].0.body.size <= FETCH_BODY_BYTES_MAX {
        bytes += rows[end].0.body.size;
        end += 1;
    }
    end
}

/// The bodies of `rows`, in order, read together (see
/// `BlobStore::get_many`); None for one that cannot be read, logged.
async fn read_bodies(st: &State, rows: &[(MessageMeta, Option<Summary>)]) -> Vec<Option<Bytes>> {
    let refs: Vec<_> = rows.iter().map(|(m, _)| m.body.clone()).collect();
    match st.shared.ctx.blobs.get_many(&st.shared.ctx.db, &refs).await {
        Ok(read) => read
            .into_iter()
            .zip(rows)
            .map(|(r, (m, _))| {
                r.map_err(|e| tracing::warn!(uid = m.uid, error = %e, "message body unreadable"))
                    .ok()
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "message bodies unreadable: the store cannot be read");
            rows.iter().map(|_| None).collect()
        }
    }
}

async fn fetch(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, cmd: FetchCommand) {
    let uids = resolve(st, sel, &cmd.set, cmd.uid);
    let (account, mailbox, read_only) = (sel.account, sel.id, sel.read_only);
    let set_seen = !read_only && cmd.attrs.iter().any(FetchAttr::sets_seen);
    let raw_needed = cmd.attrs.iter().any(needs_raw);
    // Summaries only for the items that show them: `FETCH 1:* (UID FLAGS)`
    // reads hot rows alone, `ENVELOPE` no body structure.
    let need = cmd.attrs.iter().map(summary_need).max().unwrap_or(SummaryNeed::Nothing);
    let db = st.shared.ctx.db.clone();
    let mut unknown_cte = false;
    // The first FETCH that uses MODSEQ makes the session CONDSTORE-aware
    // (RFC 7162 §3.1): the client learns the HIGHESTMODSEQ in an untagged
    // OK before the first MODSEQ it sees (§3.1.2.1), as from SELECT.
    let uses_modseq = cmd.changed_since.is_some() || cmd.attrs.iter().any(|a| matches!(a, FetchAttr::ModSeq));
    if uses_modseq {
        st.condstore_by_use(conn, sel);
    }
    // Messages of this session's view that another session expunged: they
    // have no row any more, and an EXPUNGE may not be sent during FETCH.
    let mut vanished = 0usize;
    // Hot-row items alone (`FETCH 1:* (UID FLAGS)`): from the node's
    // hot-row cache when it answers, else from the store below.
    let cached = if need == SummaryNeed::Nothing && !raw_needed && !set_seen {
        fetch_cached(st, sel, conn, &uids, &cmd).await
    } else {
        None
    };
    let from_store: &[Uid] = match cached {
        Some(gone) => {
            vanished = gone;
            &[]
        }
        None => &uids,
    };
    for chunk in from_store.chunks(rows_per_read(need)) {
        let Some(mut rows) = load_for(&db, sel, chunk, need).await else {
            st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
            return;
        };
        vanished += chunk.len() - rows.len();
        let mut flags_changed: Vec<Uid> = Vec::new();
        if set_seen {
            let unseen: Vec<Uid> = rows.iter().filter(|(m, _)| !m.is_seen()).map(|(m, _)| m.uid).collect();
            if !unseen.is_empty() {
                let op = MailboxOp::Store {
                    mailbox,
                    uids: unseen,
                    op: FlagOp::Add,
                    flags: vec!["\\Seen".into()],
                    unchanged_since: None,
                };
                if let Ok(r) = write(st, account, op).await {
                    sel.reported.extend(r.stored.iter().map(|(u, _, m)| (*u, *m)));
                    for (u, flags, modseq) in r.stored {
                        if let Ok(i) = rows.binary_search_by_key(&u, |(m, _)| m.uid) {
                            let m = &mut rows[i].0;
                            m.flags = flags;
                            m.modseq = modseq;
                            flags_changed.push(u);
                        }
                    }
                }
            }
        }
        flags_changed.sort_unstable();
        let shows_flags = cmd.attrs.iter().any(|a| matches!(a, FetchAttr::Flags)) || !flags_changed.is_empty();
        let show = Shown {
            cmd: &cmd,
            shows_flags,
            flags_changed: &flags_changed,
            raw_needed,
        };
        unknown_cte |= send_rows(st, sel, conn, &rows, &show).await;
        // The envelopes just read serve later searches of the mailbox.
        if need >= SummaryNeed::Envelope
            && rows.iter().all(|(_, s)| s.is_some())
            && let Some(cache) = &st.shared.envelopes
        {
            cache.offer(account, mailbox, sel.uid_validity, &sel.uids, chunk, || {
                rows.into_iter()
                    .filter_map(|(m, s)| Some((m.uid, FixedParts::new(s?.envelope, &m))))
                    .collect()
            });
        }
    }
    if cmd.vanished
        && st.qresync
        && cmd.uid
        && let Some(since) = cmd.changed_since
    {
        let set = cmd.set.resolve(sel.max_uid(), None);
        vanished_since(&st.shared.ctx.db, sel, conn, since, Some(&set)).await;
    }
    st.sync(conn, Some(sel), cmd.uid).await;
    if unknown_cte {
        st.tagged(
            conn,
            tag,
            Status::No,
            Some("UNKNOWN-CTE"),
            "Cannot decode a part's transfer encoding",
        );
    } else {
        if vanished > 0 {
            // RFC 9051 §7.1: the client learns why some messages it asked
            // for got no answer; the EXPUNGEs come at its next command.
            st.tagged(
                conn,
                tag,
                Status::Ok,
                Some("EXPUNGEISSUED"),
                "Some messages were expunged by another session",
            );
        } else {
            st.tagged(conn, tag, Status::Ok, None, "FETCH completed");
        }
    }
}

/// One FETCH response; true in the second element when a BINARY part had
/// an unknown transfer encoding. `summary` is there whenever an item
/// needs it ([`summary_need`]).
#[allow(clippy::too_many_arguments)] // what one response is made of, named
fn render(
    st: &State,
    sel: &Selected,
    seq: u32,
    m: &MessageMeta,
    summary: Option<&Summary>,
    raw: Option<&Bytes>,
    cmd: &FetchCommand,
    flags_changed: bool,
) -> (Vec<u8>, bool) {
    let mut f = FetchResponse::new(seq, st.utf8);
    let mut has_uid = false;
    let mut has_flags = false;
    let mut has_modseq = false;
    let mut bad_cte = false;
    let no_summary = Summary::default();
    let summary = summary.unwrap_or(&no_summary);
    let empty = Bytes::new();
    let raw = raw.unwrap_or(&empty);
    if cmd.uid {
        f.uid(m.uid);
        has_uid = true;
    }
    for attr in &cmd.attrs {
        match attr {
            FetchAttr::Uid if !has_uid => {
                f.uid(m.uid);
                has_uid = true;
            }
            FetchAttr::Uid => {}
            FetchAttr::Flags => {
                f.flags(sel.shown_flags(m.uid, &m.flags));
                has_flags = true;
            }
            FetchAttr::InternalDate => {
                f.internal_date(m.internal_date_ms);
            }
            FetchAttr::Rfc822Size => {
                f.rfc822_size(m.body.size);
            }
            FetchAttr::ModSeq => {
                f.modseq(m.modseq);
                has_modseq = true;
            }
            // The same ids JMAP gives the message (OBJECTID, RFC 8474):
            // named by its first place, so a MOVE keeps them.
            FetchAttr::EmailId => {
                f.object_id("EMAILID", &crate::jmap::wire::ids::email_id(m.first_place(sel.id)));
            }
            FetchAttr::ThreadId => {
                let id = crate::jmap::wire::ids::thread_id(m.thread_id.as_deref(), m.first_place(sel.id));
                f.object_id("THREADID", &id);
            }
            FetchAttr::Envelope => {
                f.envelope(&summary.envelope);
            }
            FetchAttr::Body => {
                f.body_structure(&summary.structure, false);
            }
            FetchAttr::BodyStructure => {
                f.body_structure(&summary.structure, true);
            }
            FetchAttr::Rfc822 => {
                f.rfc822("RFC822", raw);
            }
            FetchAttr::Rfc822Header => {
                let h = section(raw, summary, SectionText::Header);
                f.rfc822("RFC822.HEADER", &h);
            }
            FetchAttr::Rfc822Text => {
                let t = section(raw, summary, SectionText::Text);
                f.rfc822("RFC822.TEXT", &t);
            }
            FetchAttr::BodySection { section, partial, .. } => {
                // A part that does not exist reads as empty, as in Dovecot
                // (RFC 3501 names no error for it; NIL upsets some clients).
                let data = response::section_bytes(raw, summary, section).unwrap_or_default();
                let sliced = response::partial_range(&data, *partial);
                f.section(section, partial.map(|p| p.offset), Some(sliced));
            }
            FetchAttr::Binary { part, partial, .. } => match response::binary_bytes(raw, summary, part) {
                Ok(d) => {
                    f.binary(
                        part,
                        partial.map(|p| p.offset),
                        Some(response::partial_range(&d, *partial)),
                    );
                }
                // Empty like a BODY[] section that does not exist.
                Err(BinaryError::NoSuchPart) => {
                    f.binary(part, partial.map(|p| p.offset), Some(&[]));
                }
                Err(BinaryError::UnknownCte) => bad_cte = true,
            },
            FetchAttr::BinarySize { part } => match response::binary_bytes(raw, summary, part) {
                Ok(d) => {
                    f.binary_size(part, d.len() as u64);
                }
                Err(BinaryError::NoSuchPart) => {
                    f.binary_size(part, 0);
                }
                Err(BinaryError::UnknownCte) => bad_cte = true,
            },
        }
    }
    if flags_changed && !has_flags {
        f.flags(sel.shown_flags(m.uid, &m.flags));
    }
    if st.condstore && !has_modseq && (cmd.changed_since.is_some() || flags_changed) {
        f.modseq(m.modseq);
    }
    (f.finish(), bad_cte)
}

fn section(raw: &[u8], summary: &Summary, text: SectionText) -> Vec<u8> {
    let s = Section {
        part: vec![],
        text: Some(text),
    };
    response::section_bytes(raw, summary, &s).unwrap_or_default()
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
async fn vanished_since(
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
