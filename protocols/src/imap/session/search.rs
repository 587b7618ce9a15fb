//! SEARCH, SORT and THREAD of the selected mailbox: the matching (rows from the
//! store, bodies parsed only when a key needs them) and the answers. The
//! key semantics are in [`crate::imap::wire::search`], the sort keys in [`crate::imap::wire::sort`].

use meshmail_storage::ids::Uid;
use meshmail_storage::model::messages::MessageMeta;

use super::State;
use super::envelope_cache::FixedParts;
use super::messages::{SummaryNeed, load_for, rows_per_read};
use super::view::Selected;
use crate::imap::wire::response::{self, Esearch, Status};
use crate::imap::wire::search::{
    MessageView, SearchContext, matches, needs_body, needs_envelope, needs_headers, needs_live_meta, needs_meta,
    uses_modseq,
};
use crate::imap::wire::sequence::IdSet;
use crate::imap::wire::sort::{SortValue, compare, sent_date_ms, sort_subject, sort_values};
use crate::imap::wire::thread::{THREAD_MESSAGES_MAX, ThreadMessage, thread_line};
use crate::imap::wire::types::{SearchCommand, SearchKey, SearchReturn, SortCommand, ThreadCommand};
use crate::net::Conn;
use crate::summary::Envelope;

/// A message as SEARCH sees it; the body is parsed only if the key needs it.
struct View<'a> {
    m: &'a MessageMeta,
    mailbox: meshmail_storage::ids::MailboxId,
    seq: u32,
    recent: bool,
    /// Read only when the key needs the envelope (else empty).
    envelope: &'a Envelope,
    headers: Vec<(String, String)>,
    text: Option<(String, String)>,
}

impl MessageView for View<'_> {
    fn uid(&self) -> u32 {
        self.m.uid
    }
    fn email_id(&self) -> String {
        crate::jmap::wire::ids::email_id(self.m.first_place(self.mailbox))
    }
    fn thread_id(&self) -> String {
        crate::jmap::wire::ids::thread_id(self.m.thread_id.as_deref(), self.m.first_place(self.mailbox))
    }
    fn seq(&self) -> u32 {
        self.seq
    }
    fn flags(&self) -> &[String] {
        &self.m.flags
    }
    fn recent(&self) -> bool {
        self.recent
    }
    fn internal_date_ms(&self) -> i64 {
        self.m.internal_date_ms
    }
    fn size(&self) -> u64 {
        self.m.body.size
    }
    fn modseq(&self) -> u64 {
        self.m.modseq
    }
    fn envelope(&self) -> &Envelope {
        self.envelope
    }
    /// Every field of that name, one per line: a key matches any
    /// occurrence (RFC 3501 §6.4.4), never text spanning two of them
    /// (a search string holds no line break).
    fn header(&self, name: &str) -> Option<String> {
        let values: Vec<&str> = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        (!values.is_empty()).then(|| values.join("\n"))
    }
    fn text(&self, body_only: bool) -> Option<String> {
        self.text.as_ref().map(|(head, body)| {
            if body_only {
                body.clone()
            } else {
                format!("{head}\n{body}")
            }
        })
    }
}

/// Decoded header fields and text of a raw message, parsed once for SEARCH.
fn parse_for_search(raw: &[u8]) -> (Vec<(String, String)>, (String, String)) {
    let parsed = std::panic::catch_unwind(|| mail_parser::MessageParser::default().parse(raw));
    let Ok(Some(msg)) = parsed else {
        let text = String::from_utf8_lossy(raw).into_owned();
        return (Vec::new(), (String::new(), text));
    };
    let headers: Vec<(String, String)> = msg
        .headers()
        .iter()
        .map(|h| {
            let value = match h.value() {
                mail_parser::HeaderValue::Text(t) => unfold(t.as_bytes()),
                // This occurrence's own bytes (not the first field of the
                // name), unfolded: a folded line matches as one.
                _ => unfold(
                    raw.get(h.offset_start as usize..h.offset_end as usize)
                        .unwrap_or_default(),
                ),
            };
            (h.name().to_string(), value)
        })
        .collect();
    let head: String = headers.iter().map(|(n, v)| format!("{n}: {v}\n")).collect();
    let mut body = String::new();
    searchable_text(&msg, &mut body, 0);
    (headers, (head, body))
}

/// A raw header value as one line (RFC 5322 §2.2.3): each line break with
/// the whitespace around it becomes one space.
fn unfold(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    text.split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text BODY and TEXT search: every text part decoded (transfer
/// encoding and charset; HTML as written), attachments of a text type
/// included, and the text of encapsulated messages (not their headers),
/// the way Dovecot searches without a full-text index. Binary parts are
/// skipped.
fn searchable_text(msg: &mail_parser::Message<'_>, out: &mut String, depth: usize) {
    use mail_parser::PartType;
    for part in &msg.parts {
        match &part.body {
            PartType::Text(t) | PartType::Html(t) => {
                out.push_str(t);
                out.push('\n');
            }
            PartType::Message(nested) if depth < crate::summary::MAX_DEPTH => searchable_text(nested, out, depth + 1),
            _ => {}
        }
    }
}

/// A message that matched: its sequence number, hot part, and envelope
/// (when the search read it).
struct Found {
    seq: u32,
    m: MessageMeta,
    envelope: Option<Envelope>,
}

/// The messages of the selected mailbox that match `key`, with their
/// sequence numbers, in sequence order; None when the store cannot be read.
/// Envelopes are read only when the key (or, `envelopes`, the caller)
/// needs them, and then without their body structures: UNSEEN, LARGER and
/// the like read hot rows alone.
async fn matching(st: &State, sel: &Selected, key: &SearchKey, envelopes: bool) -> Option<Vec<Found>> {
    let mailbox = sel.id;
    let ctx = SearchContext {
        max_seq: sel.uids.len() as u32,
        max_uid: sel.max_uid(),
        saved: st.saved.as_ref(),
    };
    let load_raw = needs_body(key) || needs_headers(key);
    // The cache holds envelopes, sizes and internal dates: it answers keys
    // on those (and SORT and THREAD, `envelopes`, whose criteria read no
    // flag), reading hot rows beside it only for flags and MODSEQs.
    let fixed_only = needs_meta(key) && !needs_live_meta(key);
    if !load_raw && (envelopes || needs_envelope(key) || fixed_only) {
        let live = needs_live_meta(key);
        if let Some(found) = matching_cached(st, sel, key, &ctx, envelopes, live).await {
            return found;
        }
    }
    let envelopes = envelopes || needs_envelope(key);
    if !load_raw
        && !envelopes
        && let Some(found) = matching_hot(st, sel, key, &ctx).await
    {
        return Some(found);
    }
    let db = st.shared.ctx.db.clone();
    let no_envelope = Envelope::default();
    let mut found = Vec::new();
    // No key, sort criterion or thread algorithm reads a body structure.
    let need = if envelopes {
        SummaryNeed::Envelope
    } else {
        SummaryNeed::Nothing
    };
    for chunk in sel.uids.chunks(rows_per_read(need)) {
        let rows = load_for(&db, sel, chunk, need).await?;
        for (m, summary) in rows {
            let envelope = summary.map(|s| s.envelope);
            let seq = sel.seq_of(m.uid).unwrap_or(0);
            let (headers, text) = if load_raw {
                match st.shared.ctx.blobs.get(&db, &m.body).await {
                    Ok(raw) => {
                        let (h, t) = parse_for_search(&raw);
                        (h, Some(t))
                    }
                    Err(_) => (Vec::new(), None),
                }
            } else {
                (Vec::new(), None)
            };
            let view = View {
                m: &m,
                mailbox,
                seq,
                recent: sel.recent.contains(&m.uid),
                envelope: envelope.as_ref().unwrap_or(&no_envelope),
                headers,
                text,
            };
            if matches(key, &view, &ctx) {
                found.push(Found { seq, m, envelope });
            }
        }
    }
    Some(found)
}

/// The hot rows of the view's messages that still exist, in UID order:
/// copied from the node's hot-row cache when it answers, else read from
/// the store in chunks. None when the store cannot be read.
async fn view_rows(st: &State, sel: &Selected) -> Option<Vec<MessageMeta>> {
    let db = &st.shared.ctx.db;
    if let Some(cache) = &st.shared.hot_rows {
        let copied = cache
            .with_rows(db, sel.account, sel.id, sel.uid_validity, |held| {
                sel.uids.iter().filter_map(|u| held.get(*u).cloned()).collect()
            })
            .await;
        if copied.is_some() {
            return copied;
        }
    }
    let mut rows = Vec::with_capacity(sel.uids.len());
    for chunk in sel.uids.chunks(rows_per_read(SummaryNeed::Nothing)) {
        rows.extend(
            load_for(db, sel, chunk, SummaryNeed::Nothing)
                .await?
                .into_iter()
                .map(|(m, _)| m),
        );
    }
    Some(rows)
}

/// [`matching`] on hot rows alone (no envelope, header or body read), in
/// the node's hot-row cache: only the matches are copied out. None when
/// the cache is off or cannot answer.
async fn matching_hot(st: &State, sel: &Selected, key: &SearchKey, ctx: &SearchContext<'_>) -> Option<Vec<Found>> {
    let cache = st.shared.hot_rows.as_ref()?;
    let no_envelope = Envelope::default();
    cache
        .with_rows(&st.shared.ctx.db, sel.account, sel.id, sel.uid_validity, |held| {
            let mut found = Vec::new();
            for uid in &sel.uids {
                let Some(m) = held.get(*uid) else { continue };
                let seq = sel.seq_of(m.uid).unwrap_or(0);
                let view = View {
                    m,
                    mailbox: sel.id,
                    seq,
                    recent: sel.recent.contains(&m.uid),
                    envelope: &no_envelope,
                    headers: Vec::new(),
                    text: None,
                };
                if matches(key, &view, ctx) {
                    found.push(Found {
                        seq,
                        m: m.clone(),
                        envelope: None,
                    });
                }
            }
            found
        })
        .await
}

/// [`matching`] with the envelopes, sizes and internal dates from the
/// node's [`EnvelopeCache`]: hot rows are read only when `live` (the key
/// looks at flags, MODSEQs or threads), else each message of the view is
/// its UID and the cache's fixed parts. `keep_envelopes`: the matches carry
/// a copy of theirs (SORT, THREAD). None when the cache is off; Some(None)
/// when the store cannot be read.
async fn matching_cached(
    st: &State,
    sel: &Selected,
    key: &SearchKey,
    ctx: &SearchContext<'_>,
    keep_envelopes: bool,
    live: bool,
) -> Option<Option<Vec<Found>>> {
    let cache = st.shared.envelopes.as_ref()?;
    let db = &st.shared.ctx.db;
    let rows: Option<Vec<MessageMeta>> = if live {
        match view_rows(st, sel).await {
            Some(rows) => Some(rows),
            None => return Some(None),
        }
    } else {
        None
    };
    let found = cache
        .with_envelopes(db, sel.account, sel.id, sel.uid_validity, &sel.uids, |held| {
            // Each message with its cached parts, looked up once; a UID the
            // cache no longer holds was expunged by another session.
            let with_fixed: Box<dyn Iterator<Item = (MessageMeta, &FixedParts)>> = match rows {
                Some(rows) => Box::new(rows.into_iter().filter_map(|m| held.get(m.uid).map(|f| (m, f)))),
                None => Box::new(sel.uids.iter().filter_map(|u| {
                    let fixed = held.get(*u)?;
                    let mut m = MessageMeta::bare(*u);
                    m.body.size = fixed.size;
                    m.internal_date_ms = fixed.internal_date_ms;
                    Some((m, fixed))
                })),
            };
            let mut found = Vec::new();
            for (m, fixed) in with_fixed {
                let seq = sel.seq_of(m.uid).unwrap_or(0);
                let view = View {
                    m: &m,
                    mailbox: sel.id,
                    seq,
                    recent: sel.recent.contains(&m.uid),
                    envelope: &fixed.envelope,
                    headers: Vec::new(),
                    text: None,
                };
                if matches(key, &view, ctx) {
                    let envelope = keep_envelopes.then(|| fixed.envelope.clone());
                    found.push(Found { seq, m, envelope });
                }
            }
            found
        })
        .await;
    Some(found)
}

/// SORT (RFC 5256): the matches in the order of the criteria, ties in
/// sequence order.
pub(super) async fn sort(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, cmd: SortCommand) {
    let Some(found) = matching(st, sel, &cmd.search.key, true).await else {
        st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
        return;
    };
    let no_envelope = Envelope::default();
    let mut keyed: Vec<(Vec<SortValue>, u32, Uid)> = found
        .iter()
        .map(|f| {
            let env = f.envelope.as_ref().unwrap_or(&no_envelope);
            (sort_values(&cmd.criteria, &f.m, env), f.seq, f.m.uid)
        })
        .collect();
    keyed.sort_by(|a, b| compare(&cmd.criteria, &a.0, &b.0).then(a.1.cmp(&b.1)));
    let ids: Vec<u32> = keyed
        .iter()
        .map(|(_, seq, uid)| if cmd.uid { *uid } else { *seq })
        .collect();
    let mut line = b"* SORT".to_vec();
    for id in ids {
        line.extend_from_slice(format!(" {id}").as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    conn.send(&line);
    st.sync(conn, Some(sel), cmd.uid).await;
    st.tagged(conn, tag, Status::Ok, None, "SORT completed");
}

/// THREAD (RFC 5256): the matches threaded by the algorithm.
pub(super) async fn thread(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, cmd: ThreadCommand) {
    let Some(found) = matching(st, sel, &cmd.search.key, true).await else {
        st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
        return;
    };
    if found.len() > THREAD_MESSAGES_MAX {
        st.tagged(conn, tag, Status::No, Some("LIMIT"), "Too many messages to thread");
        return;
    }
    let msgs: Vec<ThreadMessage> = found
        .iter()
        .map(|f| {
            let no_envelope = Envelope::default();
            let env = f.envelope.as_ref().unwrap_or(&no_envelope);
            ThreadMessage {
                id: if cmd.uid { f.m.uid } else { f.seq },
                seq: f.seq,
                date_ms: sent_date_ms(&f.m, env),
                subject: sort_subject(env).to_string(),
                message_id: env.message_id.clone(),
                references: env.references.clone(),
                in_reply_to: env.in_reply_to.clone(),
            }
        })
        .collect();
    let threads = crate::imap::wire::thread::thread(cmd.algorithm, &msgs);
    conn.send(&thread_line(&threads, &msgs));
    st.sync(conn, Some(sel), cmd.uid).await;
    st.tagged(conn, tag, Status::Ok, None, "THREAD completed");
}

/// Whether `key` is `UNSEEN` alone (the most common search of a client
/// that keeps its own cache).
fn plain_unseen(key: &SearchKey) -> bool {
    match key {
        SearchKey::Unseen => true,
        SearchKey::And(keys) => keys.len() == 1 && plain_unseen(&keys[0]),
        _ => false,
    }
}

/// `SEARCH UNSEEN` from the mailbox's unseen index: key-only range reads
/// of the unseen messages instead of a read of every row; only messages in
/// this session's view count, as in [`matching`]. (seq, uid, 0) each.
async fn unseen_from_index(st: &State, sel: &Selected) -> Option<Vec<(u32, Uid, u64)>> {
    const PAGE: usize = meshmail_storage::model::messages::RANGE_KEYS_MAX;
    let (account, mailbox, top) = (sel.account, sel.id, sel.max_uid());
    let mut hits = Vec::new();
    let mut from: Uid = 1;
    // Bounded: each page advances `from` past its last UID, and UIDs are
    // at most `top`.
    while from <= top {
        let page = st
            .shared
            .ctx
            .db
            .read("imap_unseen", move |txn| async move {
                meshmail_storage::model::messages::unseen_uids(&txn, account, mailbox, from, PAGE).await
            })
            .await
            .ok()?;
        for uid in &page {
            if let Some(seq) = sel.seq_of(*uid) {
                hits.push((seq, *uid, 0));
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => from = last.checked_add(1)?,
            _ => break,
        }
    }
    Some(hits)
}

pub(super) async fn search(st: &mut State, sel: &mut Selected, conn: &mut Conn, tag: &str, cmd: SearchCommand) {
    let hits: Option<Vec<(u32, Uid, u64)>> = if sel.unseen_index && plain_unseen(&cmd.key) {
        unseen_from_index(st, sel).await
    } else {
        matching(st, sel, &cmd.key, false)
            .await
            .map(|found| found.iter().map(|f| (f.seq, f.m.uid, f.m.modseq)).collect())
    };
    let Some(hits) = hits else {
        st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
        return;
    };
    let ids: Vec<u32> = hits.iter().map(|(s, u, _)| if cmd.uid { *u } else { *s }).collect();
    let modseq = uses_modseq(&cmd.key).then(|| hits.iter().map(|h| h.2).max().unwrap_or(0));
    if modseq.is_some() {
        st.condstore_by_use(conn, sel);
    }
    match cmd.ret {
        Some(ret) => {
            if ret.save {
                let mut saved = IdSet::new();
                for (_, u, _) in &hits {
                    saved.insert(*u);
                }
                st.saved = Some(saved);
            }
            let mut all = IdSet::new();
            for i in &ids {
                all.insert(*i);
            }
            let only_save = ret.save && !ret.min && !ret.max && !ret.all && !ret.count;
            if !only_save {
                let e = Esearch {
                    tag: Some(tag),
                    uid: cmd.uid,
                    min: ret.min.then(|| ids.iter().min().copied()).flatten(),
                    max: ret.max.then(|| ids.iter().max().copied()).flatten(),
                    all: (ret.all && !ids.is_empty()).then_some(&all),
                    count: ret.count.then_some(ids.len() as u64),
                    modseq: modseq.and_then(|_| esearch_modseq(&ret, &hits)),
                };
                conn.send(&response::esearch_line(&e));
            }
        }
        None => conn.send(&response::search_line(&ids, modseq)),
    }
    st.sync(conn, Some(sel), cmd.uid).await;
    st.tagged(conn, tag, Status::Ok, None, "SEARCH completed");
}

/// The MODSEQ an ESEARCH answer carries (RFC 7162 §3.1.5 with RFC 4731
/// §3.2): the highest of the messages the answer returns. MIN or MAX alone
/// return one message, so its own; ALL and COUNT stand for every match.
/// None when nothing matched: there is no message whose MODSEQ to give.
fn esearch_modseq(ret: &SearchReturn, hits: &[(u32, Uid, u64)]) -> Option<u64> {
    if ret.all || ret.count {
        return hits.iter().map(|h| h.2).max();
    }
    let min = hits.iter().min_by_key(|h| h.0).filter(|_| ret.min).map(|h| h.2);
    let max = hits.iter().max_by_key(|h| h.0).filter(|_| ret.max).map(|h| h.2);
    min.max(max)
}

#[cfg(test)]
mod tests {
    use super::{SearchReturn, esearch_modseq};

    #[test]
    fn esearch_modseq_is_that_of_the_returned_messages() {
        let hits = [(1, 10, 8), (2, 11, 6), (3, 12, 7), (4, 13, 5)];
        let ret = |min, max, all, count| SearchReturn {
            min,
            max,
            all,
            count,
            save: false,
        };
        assert_eq!(esearch_modseq(&ret(true, false, false, false), &hits), Some(8));
        assert_eq!(esearch_modseq(&ret(false, true, false, false), &hits), Some(5));
        assert_eq!(esearch_modseq(&ret(true, true, false, false), &hits[1..3]), Some(7));
        assert_eq!(esearch_modseq(&ret(false, false, true, false), &hits[1..]), Some(7));
        assert_eq!(esearch_modseq(&ret(true, false, false, true), &hits), Some(8));
        assert_eq!(esearch_modseq(&ret(false, false, true, false), &[]), None);
        assert_eq!(esearch_modseq(&ret(true, true, false, false), &[]), None);
        // SAVE alone returns nothing, so no MODSEQ either.
        assert_eq!(esearch_modseq(&ret(false, false, false, false), &hits), None);
    }
}
