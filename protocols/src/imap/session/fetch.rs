//! FETCH: envelope, structure and part offsets come from the summary
//! stored at delivery (never a re-parse); only body bytes are read, a run
//! of them at a time.

use bytes::Bytes;
use meshmail_actors::mailbox_ops::MailboxOp;
use meshmail_storage::ids::Uid;
use meshmail_storage::model::messages::{FlagOp, MessageMeta};

use super::State;
use super::commands::write;
use super::envelope_cache::FixedParts;
use super::messages::{SummaryNeed, load_for, resolve, rows_per_read, vanished_since};
use super::view::Selected;
use crate::imap::wire::response::{self, BinaryError, FetchResponse, Status};
use crate::imap::wire::types::{FetchAttr, FetchCommand, Section, SectionText};
use crate::net::Conn;
use crate::summary::Summary;

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
        a if header_only(a) => SummaryNeed::HeaderLen,
        FetchAttr::Envelope => SummaryNeed::Envelope,
        _ => SummaryNeed::Whole,
    }
}

/// What the items of a FETCH read of the summary together. An envelope
/// read decodes no `header_len`, so with a header section it is whole.
fn summary_need_of(attrs: &[FetchAttr]) -> SummaryNeed {
    let need = attrs.iter().map(summary_need).max().unwrap_or(SummaryNeed::Nothing);
    if need == SummaryNeed::Envelope && attrs.iter().any(header_only) {
        SummaryNeed::Whole
    } else {
        need
    }
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

/// Whether `a` shows bytes of the message's own header section alone
/// (`BODY.PEEK[HEADER]`, `HEADER.FIELDS (...)`, `RFC822.HEADER`: what a
/// client rebuilding its cache asks of every message).
fn header_only(a: &FetchAttr) -> bool {
    match a {
        FetchAttr::Rfc822Header => true,
        FetchAttr::BodySection { section, .. } => {
            section.part.is_empty()
                && matches!(
                    section.text,
                    Some(SectionText::Header | SectionText::HeaderFields(_) | SectionText::HeaderFieldsNot(_))
                )
        }
        _ => false,
    }
}

/// What a FETCH reads of the message bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawNeed {
    Nothing,
    /// The header section only: each body is read up to the summary's
    /// `header_len` (`BlobStore::get_prefixes`), not whole and hashed.
    Header,
    Whole,
}

fn raw_need(attrs: &[FetchAttr]) -> RawNeed {
    let mut raw = attrs.iter().filter(|a| needs_raw(a)).peekable();
    if raw.peek().is_none() {
        RawNeed::Nothing
    } else if raw.all(header_only) {
        RawNeed::Header
    } else {
        RawNeed::Whole
    }
}

/// How a FETCH shows each of its rows.
struct Shown<'a> {
    cmd: &'a FetchCommand,
    shows_flags: bool,
    /// UIDs (sorted) whose flags this FETCH changed (`\Seen`).
    flags_changed: &'a [Uid],
    raw: RawNeed,
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
        let end = match show.raw {
            RawNeed::Nothing => rows.len(),
            need => body_run_end(rows, start, need),
        };
        let run = &rows[start..end];
        let mut raws = match show.raw {
            RawNeed::Nothing => Vec::new(),
            need => read_bodies(st, run, need).await,
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

/// The end of the run of `rows` from `start` whose bodies (or headers)
/// together stay within [`FETCH_BODY_BYTES_MAX`] (one row at least).
fn body_run_end(rows: &[(MessageMeta, Option<Summary>)], start: usize, need: RawNeed) -> usize {
    let size = |i: usize| read_len(&rows[i], need);
    let mut end = start + 1;
    let mut bytes = size(start);
    while end < rows.len() && bytes + size(end) <= FETCH_BODY_BYTES_MAX {
        bytes += size(end);
        end += 1;
    }
    end
}

/// The bytes of a row a FETCH reads: its header section (when the summary
/// knows where it ends) or the whole body.
fn read_len((m, summary): &(MessageMeta, Option<Summary>), need: RawNeed) -> u64 {
    match (need, summary) {
        (RawNeed::Header, Some(s)) => s.header_len.min(m.body.size),
        _ => m.body.size,
    }
}

/// The bodies of `rows` (or their header sections), in order, read
/// together (see `BlobStore::get_many`); None for one that cannot be
/// read, logged.
async fn read_bodies(st: &State, rows: &[(MessageMeta, Option<Summary>)], need: RawNeed) -> Vec<Option<Bytes>> {
    let refs: Vec<_> = rows.iter().map(|(m, _)| m.body.clone()).collect();
    let (blobs, db) = (&st.shared.ctx.blobs, &st.shared.ctx.db);
    let read = if need == RawNeed::Header {
        let lens: Vec<u64> = rows.iter().map(|r| read_len(r, need)).collect();
        blobs.get_prefixes(db, &refs, &lens).await
    } else {
        blobs.get_many(db, &refs).await
    };
    match read {
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

/// FETCH (and UID FETCH): the rows by chunks, from the hot-row cache when
/// it can answer, `\Seen` set first when an item sets it.
pub(super) async fn fetch(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, cmd: FetchCommand) {
    let uids = resolve(st, sel, &cmd.set, cmd.uid);
    let set_seen = !sel.read_only && cmd.attrs.iter().any(FetchAttr::sets_seen);
    let raw = raw_need(&cmd.attrs);
    // Summaries only for the items that show them: `FETCH 1:* (UID FLAGS)`
    // reads hot rows alone, `ENVELOPE` no body structure.
    let need = summary_need_of(&cmd.attrs);
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
    let cached = if need == SummaryNeed::Nothing && raw == RawNeed::Nothing && !set_seen {
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
    let plan = Plan {
        cmd: &cmd,
        need,
        set_seen,
        raw,
    };
    let Some((gone, unknown_cte)) = fetch_from_store(st, sel, conn, from_store, &plan).await else {
        st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
        return;
    };
    vanished += gone;
    if cmd.vanished
        && st.qresync
        && cmd.uid
        && let Some(since) = cmd.changed_since
    {
        let set = cmd.set.resolve(sel.max_uid(), None);
        vanished_since(&st.shared.ctx.db, sel, conn, since, Some(&set)).await;
    }
    st.sync(conn, Some(sel), cmd.uid).await;
    fetch_completed(st, conn, tag, unknown_cte, vanished);
}

/// What a FETCH reads and does for every chunk of rows.
struct Plan<'a> {
    cmd: &'a FetchCommand,
    need: SummaryNeed,
    set_seen: bool,
    raw: RawNeed,
}

/// Reads, marks `\Seen` and sends the rows of `uids` a chunk at a time;
/// returns how many no longer had a row and whether a part had an unknown
/// transfer encoding, or None when the store could not be read.
async fn fetch_from_store(
    st: &mut State,
    sel: &mut Selected,
    conn: &mut Conn,
    uids: &[Uid],
    plan: &Plan<'_>,
) -> Option<(usize, bool)> {
    let (account, mailbox) = (sel.account, sel.id);
    let db = st.shared.ctx.db.clone();
    let (mut vanished, mut unknown_cte) = (0usize, false);
    for chunk in uids.chunks(rows_per_read(plan.need)) {
        let mut rows = load_for(&db, sel, chunk, plan.need).await?;
        vanished += chunk.len() - rows.len();
        let mut flags_changed: Vec<Uid> = if plan.set_seen {
            mark_seen(st, sel, &mut rows).await
        } else {
            Vec::new()
        };
        flags_changed.sort_unstable();
        let shows_flags = plan.cmd.attrs.iter().any(|a| matches!(a, FetchAttr::Flags)) || !flags_changed.is_empty();
        let show = Shown {
            cmd: plan.cmd,
            shows_flags,
            flags_changed: &flags_changed,
            raw: plan.raw,
        };
        unknown_cte |= send_rows(st, sel, conn, &rows, &show).await;
        // The envelopes just read serve later searches of the mailbox.
        if plan.need >= SummaryNeed::Envelope
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
    Some((vanished, unknown_cte))
}

/// Sets `\Seen` on the unseen of `rows` (an item that sets it: BODY[],
/// RFC822...), updating the rows to what was stored; returns the UIDs
/// whose flags changed. A refused write leaves the rows as they were.
async fn mark_seen(st: &mut State, sel: &mut Selected, rows: &mut [(MessageMeta, Option<Summary>)]) -> Vec<Uid> {
    let mut flags_changed = Vec::new();
    let unseen: Vec<Uid> = rows.iter().filter(|(m, _)| !m.is_seen()).map(|(m, _)| m.uid).collect();
    if unseen.is_empty() {
        return flags_changed;
    }
    let op = MailboxOp::Store {
        mailbox: sel.id,
        uids: unseen,
        op: FlagOp::Add,
        flags: vec!["\\Seen".into()],
        unchanged_since: None,
    };
    if let Ok(r) = write(st, sel.account, op).await {
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
    flags_changed
}

/// The tagged reply: NO for an undecodable part, else OK, saying when
/// some messages asked for were expunged meanwhile.
fn fetch_completed(st: &mut State, conn: &mut Conn, tag: &str, unknown_cte: bool, vanished: usize) {
    if unknown_cte {
        st.tagged(
            conn,
            tag,
            Status::No,
            Some("UNKNOWN-CTE"),
            "Cannot decode a part's transfer encoding",
        );
    } else if vanished > 0 {
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
    let mut shown = ShownItems::default();
    let no_summary = Summary::default();
    let empty = Bytes::new();
    let row = Row {
        sel,
        m,
        summary: summary.unwrap_or(&no_summary),
        raw: raw.unwrap_or(&empty),
    };
    if cmd.uid {
        f.uid(m.uid);
        shown.uid = true;
    }
    for attr in &cmd.attrs {
        row.item(&mut f, attr, &mut shown);
    }
    // Flags a FETCH changed, and the MODSEQ a CONDSTORE client is owed,
    // come unasked when no item showed them.
    if flags_changed && !shown.flags {
        f.flags(sel.shown_flags(m.uid, &m.flags));
    }
    if st.condstore && !shown.modseq && (cmd.changed_since.is_some() || flags_changed) {
        f.modseq(m.modseq);
    }
    (f.finish(), shown.bad_cte)
}

/// What the items of one response showed so far, and whether a BINARY
/// item met an unknown transfer encoding.
#[derive(Default)]
struct ShownItems {
    uid: bool,
    flags: bool,
    modseq: bool,
    bad_cte: bool,
}

/// One message as a FETCH response shows it.
struct Row<'a> {
    sel: &'a Selected,
    m: &'a MessageMeta,
    summary: &'a Summary,
    raw: &'a Bytes,
}

impl Row<'_> {
    /// Adds item `attr` to `f`.
    fn item(&self, f: &mut FetchResponse, attr: &FetchAttr, shown: &mut ShownItems) {
        let (m, summary, raw) = (self.m, self.summary, self.raw);
        match attr {
            FetchAttr::Uid if !shown.uid => {
                f.uid(m.uid);
                shown.uid = true;
            }
            FetchAttr::Uid => {}
            FetchAttr::Flags => {
                f.flags(self.sel.shown_flags(m.uid, &m.flags));
                shown.flags = true;
            }
            FetchAttr::InternalDate => {
                f.internal_date(m.internal_date_ms);
            }
            FetchAttr::Rfc822Size => {
                f.rfc822_size(m.body.size);
            }
            FetchAttr::ModSeq => {
                f.modseq(m.modseq);
                shown.modseq = true;
            }
            FetchAttr::EmailId | FetchAttr::ThreadId => self.object_id(f, attr),
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
                f.rfc822("RFC822.HEADER", &section(raw, summary, SectionText::Header));
            }
            FetchAttr::Rfc822Text => {
                f.rfc822("RFC822.TEXT", &section(raw, summary, SectionText::Text));
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
                Err(BinaryError::UnknownCte) => shown.bad_cte = true,
            },
            FetchAttr::BinarySize { part } => match response::binary_bytes(raw, summary, part) {
                Ok(d) => {
                    f.binary_size(part, d.len() as u64);
                }
                Err(BinaryError::NoSuchPart) => {
                    f.binary_size(part, 0);
                }
                Err(BinaryError::UnknownCte) => shown.bad_cte = true,
            },
        }
    }

    /// EMAILID and THREADID: the same ids JMAP gives the message (OBJECTID,
    /// RFC 8474), named by its first place, so a MOVE keeps them.
    fn object_id(&self, f: &mut FetchResponse, attr: &FetchAttr) {
        let first = self.m.first_place(self.sel.id);
        if matches!(attr, FetchAttr::EmailId) {
            f.object_id("EMAILID", &crate::jmap::wire::ids::email_id(first));
        } else {
            let id = crate::jmap::wire::ids::thread_id(self.m.thread_id.as_deref(), first);
            f.object_id("THREADID", &id);
        }
    }
}

fn section(raw: &[u8], summary: &Summary, text: SectionText) -> Vec<u8> {
    let s = Section {
        part: vec![],
        text: Some(text),
    };
    response::section_bytes(raw, summary, &s).unwrap_or_default()
}
