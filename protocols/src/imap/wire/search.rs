//! SEARCH: parsing of the search program (called by the parser) and
//! evaluation of a [`SearchKey`] against one message seen through
//! [`MessageView`].
//!
//! Semantics (RFC 9051 §6.4.4): string keys are case-insensitive
//! substrings (Unicode lower-casing; an empty string matches everything);
//! FROM/TO/CC/BCC look at the envelope (raw header value, display names and
//! `mailbox@host`), SUBJECT at the raw and decoded subject; BEFORE/ON/SINCE
//! compare the day of the internal date in UTC (the zone meshmail renders
//! internal dates in), SENT* the day written in the Date header
//! (disregarding time and zone; without a parsable Date header, the day of
//! the internal date, RFC 5256 §2.2). RECENT/NEW/OLD follow the session's `\Recent`
//! set ([`MessageView::recent`]); an IMAP4rev2 session has none, so RECENT
//! and NEW never match there and OLD always does. `$` is the saved result,
//! a set of UIDs.

use super::parser::{MAX_SEARCH_DEPTH, R, Reader, err};
use super::sequence::{IdSet, SequenceSet};
use super::types::{Date, Flag, SearchCommand, SearchKey, SearchReturn};
use crate::summary::{AddressList, Envelope};

pub(super) fn parse_search(r: &mut Reader<'_>, uid: bool) -> R<SearchCommand> {
    let mut ret = None;
    if r.eat_word("RETURN") {
        r.sp()?;
        let mut opts = SearchReturn::default();
        let words = r.list(Reader::word)?;
        for w in &words {
            match w.as_str() {
                "MIN" => opts.min = true,
                "MAX" => opts.max = true,
                "ALL" => opts.all = true,
                "COUNT" => opts.count = true,
                "SAVE" => opts.save = true,
                _ => return err("unknown SEARCH return option"),
            }
        }
        opts.all |= words.is_empty();
        ret = Some(opts);
        r.sp()?;
    }
    let mut charset = None;
    if r.eat_word("CHARSET") {
        r.sp()?;
        charset = Some(r.text()?.to_ascii_uppercase());
        r.sp()?;
    }
    let key = parse_search_keys(r)?;
    Ok(SearchCommand { uid, ret, charset, key })
}

/// The search keys to the end of the command, folded into one (SEARCH and
/// SORT share them).
pub(super) fn parse_search_keys(r: &mut Reader<'_>) -> R<SearchKey> {
    let mut keys = vec![search_key(r, 0)?];
    while r.more() {
        r.sp()?;
        keys.push(search_key(r, 0)?);
    }
    Ok(if keys.len() == 1 {
        keys.remove(0)
    } else {
        SearchKey::And(keys)
    })
}

fn search_key(r: &mut Reader<'_>, depth: usize) -> R<SearchKey> {
    use SearchKey as K;
    if depth >= MAX_SEARCH_DEPTH {
        return err("search keys nested too deeply");
    }
    match r.peek() {
        Some(b'(') => {
            let mut keys = r.list(|r| search_key(r, depth + 1))?;
            return match keys.len() {
                0 => err("empty search key list"),
                1 => Ok(keys.remove(0)),
                _ => Ok(K::And(keys)),
            };
        }
        Some(b'0'..=b'9' | b'*' | b'$') => return r.sequence_set().map(K::Sequence),
        _ => {}
    }
    let word = r.word()?;
    if let Some(key) = flag_key(&word) {
        return Ok(key);
    }
    r.sp()?;
    Ok(match word.as_str() {
        "BCC" => K::Bcc(r.text()?),
        "BODY" => K::Body(r.text()?),
        "CC" => K::Cc(r.text()?),
        "FROM" => K::From(r.text()?),
        "SUBJECT" => K::Subject(r.text()?),
        "TEXT" => K::Text(r.text()?),
        "TO" => K::To(r.text()?),
        "HEADER" => {
            let name = r.text()?;
            r.sp()?;
            K::Header(name, r.text()?)
        }
        "KEYWORD" | "UNKEYWORD" => keyword_key(r, &word)?,
        "BEFORE" => K::Before(r.date()?),
        "ON" => K::On(r.date()?),
        "SINCE" => K::Since(r.date()?),
        "SENTBEFORE" => K::SentBefore(r.date()?),
        "SENTON" => K::SentOn(r.date()?),
        "SENTSINCE" => K::SentSince(r.date()?),
        "LARGER" => K::Larger(r.number64()?),
        "SMALLER" => K::Smaller(r.number64()?),
        "UID" => K::Uid(r.sequence_set()?),
        "EMAILID" => K::EmailId(object_id(r)?),
        "THREADID" => K::ThreadId(object_id(r)?),
        "NOT" => K::Not(Box::new(search_key(r, depth + 1)?)),
        "OR" => {
            let a = search_key(r, depth + 1)?;
            r.sp()?;
            K::Or(Box::new(a), Box::new(search_key(r, depth + 1)?))
        }
        "MODSEQ" => modseq_key(r)?,
        _ => return err("unknown search key"),
    })
}

/// The keys without an argument: flags and the like.
fn flag_key(word: &str) -> Option<SearchKey> {
    use SearchKey as K;
    Some(match word {
        "ALL" => K::All,
        "ANSWERED" => K::Answered,
        "DELETED" => K::Deleted,
        "DRAFT" => K::Draft,
        "FLAGGED" => K::Flagged,
        "NEW" => K::New,
        "OLD" => K::Old,
        "RECENT" => K::Recent,
        "SEEN" => K::Seen,
        "UNANSWERED" => K::Unanswered,
        "UNDELETED" => K::Undeleted,
        "UNDRAFT" => K::Undraft,
        "UNFLAGGED" => K::Unflagged,
        "UNSEEN" => K::Unseen,
        _ => return None,
    })
}

/// KEYWORD and UNKEYWORD take a keyword; system flags have keys of their own.
fn keyword_key(r: &mut Reader<'_>, word: &str) -> R<SearchKey> {
    match r.flag()? {
        Flag::Keyword(k) if word == "KEYWORD" => Ok(SearchKey::Keyword(k)),
        Flag::Keyword(k) => Ok(SearchKey::Unkeyword(k)),
        _ => err("KEYWORD takes a keyword, not a system flag"),
    }
}

/// MODSEQ's arguments (RFC 7162 §3.1.5): an optional metadata entry name
/// and type, then the mod-sequence.
fn modseq_key(r: &mut Reader<'_>) -> R<SearchKey> {
    let mut entry = None;
    if r.peek() == Some(b'"') {
        let name = String::from_utf8_lossy(&r.quoted()?).into_owned();
        r.sp()?;
        let kind = r.word()?.to_ascii_lowercase();
        if !matches!(kind.as_str(), "priv" | "shared" | "all") {
            return err("invalid MODSEQ entry type");
        }
        entry = Some((name, kind));
        r.sp()?;
    }
    Ok(SearchKey::ModSeq {
        entry,
        modseq: r.number64()?,
    })
}

/// One message as a search sees it. Only what the key needs is called:
/// [`needs_body`] and [`needs_headers`] tell the session what to load.
pub trait MessageView {
    fn uid(&self) -> u32;
    fn seq(&self) -> u32;
    /// Flags as stored (`\Seen`, keywords).
    fn flags(&self) -> &[String];
    /// Is the message `\Recent` in this session (IMAP4rev1 only)?
    fn recent(&self) -> bool {
        false
    }
    fn internal_date_ms(&self) -> i64;
    fn size(&self) -> u64;
    fn modseq(&self) -> u64;
    fn envelope(&self) -> &Envelope;
    /// The first header field of that name (case-insensitive), unfolded
    /// and RFC 2047-decoded; None when absent.
    fn header(&self, name: &str) -> Option<String>;
    /// The decoded text of the message (`body_only`: without the header),
    /// None when not loaded.
    fn text(&self, body_only: bool) -> Option<String>;
    /// The OBJECTID EMAILID / THREADID (RFC 8474); empty where ids are
    /// not known, which matches no EMAILID/THREADID key.
    fn email_id(&self) -> String {
        String::new()
    }
    fn thread_id(&self) -> String {
        String::new()
    }
}

/// What a search needs to know about the mailbox.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchContext<'a> {
    /// Message count (`*` of a sequence set).
    pub max_seq: u32,
    /// Highest UID in use (`*` of a UID set).
    pub max_uid: u32,
    /// The saved result (`$`, RFC 5182) as UIDs; None: nothing saved.
    pub saved: Option<&'a IdSet>,
}

/// `objectid = 1*255(ALPHA / DIGIT / "_" / "-")` (RFC 8474 §7); ids are
/// case-sensitive, so the atom is kept as sent.
fn object_id(r: &mut Reader<'_>) -> R<String> {
    let a = r.atom()?;
    if a.len() > 255 || !a.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-') {
        return err("invalid objectid");
    }
    Ok(String::from_utf8_lossy(a).into_owned())
}

/// Does the message match the key?
pub fn matches(key: &SearchKey, m: &dyn MessageView, ctx: &SearchContext<'_>) -> bool {
    use SearchKey as K;
    match key {
        K::All => true,
        K::Old => !m.recent(),
        K::Recent => m.recent(),
        K::New => m.recent() && !has_flag(m, "\\Seen"),
        K::Answered => has_flag(m, "\\Answered"),
        K::Deleted => has_flag(m, "\\Deleted"),
        K::Draft => has_flag(m, "\\Draft"),
        K::Flagged => has_flag(m, "\\Flagged"),
        K::Seen => has_flag(m, "\\Seen"),
        K::Unanswered => !has_flag(m, "\\Answered"),
        K::Undeleted => !has_flag(m, "\\Deleted"),
        K::Undraft => !has_flag(m, "\\Draft"),
        K::Unflagged => !has_flag(m, "\\Flagged"),
        K::Unseen => !has_flag(m, "\\Seen"),
        K::Keyword(k) => has_flag(m, k),
        K::Unkeyword(k) => !has_flag(m, k),
        K::From(s) => addresses_contain(&m.envelope().from, s),
        K::To(s) => addresses_contain(&m.envelope().to, s),
        K::Cc(s) => addresses_contain(&m.envelope().cc, s),
        K::Bcc(s) => addresses_contain(&m.envelope().bcc, s),
        K::Subject(s) => {
            let env = m.envelope();
            env.subject
                .iter()
                .chain(&env.other_subjects)
                .any(|subj| contains_ci(&subj.decoded, s) || contains_ci(&subj.raw, s))
        }
        K::Header(name, s) => m.header(name).is_some_and(|v| contains_ci(&v, s)),
        K::Body(s) => m.text(true).is_some_and(|t| contains_ci(&t, s)),
        K::Text(s) => m.text(false).is_some_and(|t| contains_ci(&t, s)),
        K::Before(d) => Date::from_unix_ms(m.internal_date_ms()) < *d,
        K::On(d) => Date::from_unix_ms(m.internal_date_ms()) == *d,
        K::Since(d) => Date::from_unix_ms(m.internal_date_ms()) >= *d,
        K::SentBefore(d) => sent_day(m) < *d,
        K::SentOn(d) => sent_day(m) == *d,
        K::SentSince(d) => sent_day(m) >= *d,
        K::Larger(n) => m.size() > *n,
        K::Smaller(n) => m.size() < *n,
        K::ModSeq { modseq, .. } => m.modseq() >= *modseq,
        K::EmailId(id) => m.email_id() == *id,
        K::ThreadId(id) => m.thread_id() == *id,
        K::Uid(set) => in_set(set, m.uid(), ctx.max_uid, m, ctx),
        K::Sequence(set) => in_set(set, m.seq(), ctx.max_seq, m, ctx),
        K::Not(k) => !matches(k, m, ctx),
        K::Or(a, b) => matches(a, m, ctx) || matches(b, m, ctx),
        K::And(keys) => keys.iter().all(|k| matches(k, m, ctx)),
    }
}

fn in_set(set: &SequenceSet, n: u32, largest: u32, m: &dyn MessageView, ctx: &SearchContext<'_>) -> bool {
    match set {
        // The saved result is UIDs whichever way it is referenced.
        SequenceSet::Saved => ctx.saved.is_some_and(|s| s.contains(m.uid())),
        _ => set.contains(n, largest, ctx.saved),
    }
}

/// Does evaluating the key call [`MessageView::text`]?
pub fn needs_body(key: &SearchKey) -> bool {
    any_key(key, &|k| matches!(k, SearchKey::Body(_) | SearchKey::Text(_)))
}

/// Does evaluating the key call [`MessageView::envelope`]? Only then does
/// SEARCH read the stored summaries.
pub fn needs_envelope(key: &SearchKey) -> bool {
    use SearchKey as K;
    any_key(key, &|k| {
        matches!(
            k,
            K::From(_)
                | K::To(_)
                | K::Cc(_)
                | K::Bcc(_)
                | K::Subject(_)
                | K::SentBefore(_)
                | K::SentOn(_)
                | K::SentSince(_)
        )
    })
}

/// Does evaluating the key read the hot row (flags, size, internal date,
/// MODSEQ, thread)? A search that does not can run on UIDs and envelopes.
pub fn needs_meta(key: &SearchKey) -> bool {
    any_key(key, &|k| meta_use(k) != MetaUse::Nothing)
}

/// Does evaluating the key read a part of the hot row that changes (flags,
/// MODSEQ) or that the envelope cache does not hold (thread)? A search that
/// does not can run on the cache's fixed parts (envelope, size, internal
/// date) alone.
pub fn needs_live_meta(key: &SearchKey) -> bool {
    any_key(key, &|k| meta_use(k) == MetaUse::Live)
}

/// What of a message's hot row a search key reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaUse {
    Nothing,
    /// Size or internal date: written once with the message.
    Fixed,
    /// Flags, MODSEQ or thread id.
    Live,
}

/// Every key is listed (no `_`): a new key must say what of the hot row it
/// reads, or a search on bare UIDs or cached parts would answer it wrong.
fn meta_use(k: &SearchKey) -> MetaUse {
    use SearchKey as K;
    match k {
        K::Answered
        | K::Deleted
        | K::Draft
        | K::Flagged
        | K::Seen
        | K::New
        | K::Unanswered
        | K::Undeleted
        | K::Undraft
        | K::Unflagged
        | K::Unseen
        | K::Keyword(_)
        | K::Unkeyword(_)
        | K::ModSeq { .. }
        | K::ThreadId(_)
        // A moved message's EMAILID names its origin, which only its hot
        // row holds (a bare UID would give the id of its current place).
        | K::EmailId(_) => MetaUse::Live,
        K::Before(_) | K::On(_) | K::Since(_) | K::Larger(_) | K::Smaller(_) => MetaUse::Fixed,
        // The sent day falls back to the internal date.
        K::SentBefore(_) | K::SentOn(_) | K::SentSince(_) => MetaUse::Fixed,
        K::All
        | K::Old
        | K::Recent
        | K::Bcc(_)
        | K::Cc(_)
        | K::From(_)
        | K::To(_)
        | K::Subject(_)
        | K::Body(_)
        | K::Text(_)
        | K::Header(..)
        | K::Uid(_)
        | K::Sequence(_)
        | K::Not(_)
        | K::Or(..)
        | K::And(_) => MetaUse::Nothing,
    }
}

/// Does evaluating the key call [`MessageView::header`]?
pub fn needs_headers(key: &SearchKey) -> bool {
    any_key(key, &|k| matches!(k, SearchKey::Header(..)))
}

/// Does the key use MODSEQ? Then a SEARCH answer carries the highest
/// MODSEQ of the matches (RFC 7162 §3.1.5).
pub fn uses_modseq(key: &SearchKey) -> bool {
    any_key(key, &|k| matches!(k, SearchKey::ModSeq { .. }))
}

fn any_key(key: &SearchKey, pred: &dyn Fn(&SearchKey) -> bool) -> bool {
    pred(key)
        || match key {
            SearchKey::Not(k) => any_key(k, pred),
            SearchKey::Or(a, b) => any_key(a, pred) || any_key(b, pred),
            SearchKey::And(keys) => keys.iter().any(|k| any_key(k, pred)),
            _ => false,
        }
}

fn has_flag(m: &dyn MessageView, flag: &str) -> bool {
    m.flags().iter().any(|f| f.eq_ignore_ascii_case(flag))
}

/// Case-insensitive substring; an empty needle matches. ASCII text (the
/// common case) is compared in place: a search walks every message, and
/// lowercased copies of each field were most of its time.
fn contains_ci(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    if haystack.is_ascii() && needle.is_ascii() {
        let (h, n) = (haystack.as_bytes(), needle.as_bytes());
        return h.len() >= n.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n));
    }
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// [`contains_ci`] on `mailbox@host`, without building it: the needle is
/// in one side, or spans the `@` (its part before an `@` ends the mailbox,
/// the part after starts the host).
fn address_contains(mailbox: &str, host: &str, needle: &str) -> bool {
    if !(mailbox.is_ascii() && host.is_ascii() && needle.is_ascii()) {
        return contains_ci(&format!("{mailbox}@{host}"), needle);
    }
    let ends_with =
        |s: &str, p: &str| s.len() >= p.len() && s.as_bytes()[s.len() - p.len()..].eq_ignore_ascii_case(p.as_bytes());
    let starts_with =
        |s: &str, p: &str| s.len() >= p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    contains_ci(mailbox, needle)
        || contains_ci(host, needle)
        || needle
            .match_indices('@')
            .any(|(i, _)| ends_with(mailbox, &needle[..i]) && starts_with(host, &needle[i + 1..]))
}

fn addresses_contain(list: &AddressList, needle: &str) -> bool {
    list.raw.as_deref().is_some_and(|raw| contains_ci(raw, needle))
        || list.addresses.iter().any(|a| {
            a.name.as_deref().is_some_and(|n| contains_ci(n, needle))
                || address_contains(
                    a.mailbox.as_deref().unwrap_or_default(),
                    a.host.as_deref().unwrap_or_default(),
                    needle,
                )
        })
}

/// The sent day of a message: its Date header's ([`sent_date`]), else the
/// day of its internal date, as RFC 5256 §2.2 defines the sent date for
/// SORT (and as Dovecot searches), so SEARCH and SORT agree.
fn sent_day(m: &dyn MessageView) -> Date {
    sent_date(m.envelope()).unwrap_or_else(|| Date::from_unix_ms(m.internal_date_ms()))
}

/// The day written in the Date header (`[Www,] d Mon yyyy ...`), else the
/// UTC day of the parsed timestamp.
pub fn sent_date(env: &Envelope) -> Option<Date> {
    let written = env.date.as_deref().and_then(|raw| {
        let after_weekday = raw.split_once(',').map_or(raw, |(_, rest)| rest);
        let mut words = after_weekday.split_whitespace();
        let day = words.next()?.parse().ok()?;
        let month = Date::month_from_name(words.next()?.as_bytes())?;
        let year_text = words.next()?;
        let year: i32 = year_text.parse().ok()?;
        // RFC 5322 §4.3: two-digit years below 50 are 20xx, other short ones 19xx.
        let year = match year_text.len() {
            1 | 2 if year < 50 => year + 2000,
            1..=3 => year + 1900,
            _ => year,
        };
        Date::new(year, month, day)
    });
    written.or_else(|| env.date_timestamp.map(|t| Date::from_unix_ms(t.saturating_mul(1000))))
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
