//! SORT (RFC 5256): parsing of the sort criteria and the sort keys of a
//! message. Strings compare with `i;ascii-casemap`, the RFC's default
//! collation: ASCII letters folded to upper case, then octet by octet (RFC
//! 4790 §9.2). Upper, not lower: `[`, `\`, `]`, `^`, `_` and `` ` `` lie
//! between the two cases, so they sort after letters.

use std::cmp::Ordering;

use super::parser_reader::{R, Reader, err};
use super::search::parse_search_keys;
use super::types::{SearchCommand, SortCommand, SortCriterion, SortKey};
use crate::summary::{AddressList, Envelope};
use meshmail_storage::model::messages::MessageMeta;

/// `SORT (criteria) charset search-keys` after the command name.
pub(super) fn parse_sort(r: &mut Reader<'_>, uid: bool) -> R<SortCommand> {
    let words = r.list(Reader::word)?;
    let mut criteria = Vec::new();
    let mut reverse = false;
    for w in &words {
        let key = match w.as_str() {
            "REVERSE" => {
                if reverse {
                    return err("REVERSE twice");
                }
                reverse = true;
                continue;
            }
            "ARRIVAL" => SortKey::Arrival,
            "CC" => SortKey::Cc,
            "DATE" => SortKey::Date,
            "FROM" => SortKey::From,
            "SIZE" => SortKey::Size,
            "SUBJECT" => SortKey::Subject,
            "TO" => SortKey::To,
            _ => return err("unknown sort criterion"),
        };
        criteria.push(SortCriterion { reverse, key });
        reverse = false;
    }
    if criteria.is_empty() || reverse {
        return err("expected sort criteria");
    }
    r.sp()?;
    Ok(SortCommand {
        uid,
        criteria,
        search: parse_charset_and_keys(r, uid)?,
    })
}

/// `charset SP search-keys`, the tail SORT and THREAD share (RFC 5256).
pub(super) fn parse_charset_and_keys(r: &mut Reader<'_>, uid: bool) -> R<SearchCommand> {
    let charset = r.text()?.to_ascii_uppercase();
    r.sp()?;
    let key = parse_search_keys(r)?;
    Ok(SearchCommand {
        uid,
        ret: None,
        charset: Some(charset),
        key,
    })
}

/// One sort key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortValue {
    Number(i64),
    Text(Vec<u8>),
}

/// The values of each criterion for one message (all from its hot part
/// and envelope: SORT never reads a body structure).
pub fn sort_values(criteria: &[SortCriterion], m: &MessageMeta, env: &Envelope) -> Vec<SortValue> {
    criteria
        .iter()
        .map(|c| match c.key {
            SortKey::Arrival => SortValue::Number(m.internal_date_ms),
            SortKey::Size => SortValue::Number(m.body.size as i64),
            SortKey::Date => SortValue::Number(sent_date_ms(m, env)),
            SortKey::From => SortValue::Text(first_mailbox(&env.from)),
            SortKey::To => SortValue::Text(first_mailbox(&env.to)),
            SortKey::Cc => SortValue::Text(first_mailbox(&env.cc)),
            SortKey::Subject => SortValue::Text(base_subject(sort_subject(env)).into_bytes()),
        })
        .collect()
}

/// The sent date in UTC (ms), else the internal date (RFC 5256 §2.2).
pub fn sent_date_ms(m: &MessageMeta, env: &Envelope) -> i64 {
    env.date_timestamp
        .map_or(m.internal_date_ms, |t| t.saturating_mul(1000))
}

/// The decoded subject SORT and THREAD use: the first Subject header when
/// there are several (as Dovecot does; the envelope shows the last).
pub fn sort_subject(env: &Envelope) -> &str {
    let first = env.other_subjects.first().or(env.subject.as_ref());
    first.map_or("", |h| h.decoded.as_str())
}

/// Orders two messages' values by the criteria (REVERSE per criterion).
pub fn compare(criteria: &[SortCriterion], a: &[SortValue], b: &[SortValue]) -> Ordering {
    for (c, (x, y)) in criteria.iter().zip(a.iter().zip(b)) {
        let o = match (x, y) {
            (SortValue::Number(x), SortValue::Number(y)) => x.cmp(y),
            (SortValue::Text(x), SortValue::Text(y)) => x.cmp(y),
            _ => Ordering::Equal,
        };
        let o = if c.reverse { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// The addr-mailbox of the first address, case-mapped (a group's start
/// marker counts, its mailbox being the group name, as in Dovecot); empty
/// when there is none (RFC 5256 §3: sorts first).
fn first_mailbox(list: &AddressList) -> Vec<u8> {
    list.addresses
        .first()
        .and_then(|a| a.mailbox.as_deref())
        .unwrap_or_default()
        .to_ascii_uppercase()
        .into_bytes()
}

/// The base subject of RFC 5256 §2.1: reply and forward markers, leading
/// `[blob]`s and trailing `(fwd)` removed, whitespace collapsed, ASCII
/// letters in upper case (`i;ascii-casemap`).
pub fn base_subject(decoded: &str) -> String {
    base_subject_marked(decoded).0
}

/// The base subject, and whether the subject was a reply or forward: it
/// held a subj-refwd (`Re:`, `Fw:`, `Fwd:`) or a `[Fwd: ...]` wrapper
/// (RFC 5256 §2.1; THREAD=REFERENCES step 6 prefers the original).
pub fn base_subject_marked(decoded: &str) -> (String, bool) {
    let mut s: String = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut marked = false;
    loop {
        let before = s.clone();
        // (2) trailing "(fwd)" and whitespace.
        loop {
            let t = s.trim_end();
            match strip_suffix_ci(t, "(fwd)") {
                Some(rest) => s = rest.to_string(),
                None => {
                    s = t.to_string();
                    break;
                }
            }
        }
        // (3) leading subj-leaders and a leading blob that leaves text.
        loop {
            let inner = s.clone();
            if let Some(rest) = strip_leader(&s) {
                s = rest;
                marked = true;
            }
            if let Some(rest) = strip_blob(&s)
                && !rest.trim().is_empty()
            {
                s = rest;
            }
            if s == inner {
                break;
            }
        }
        // (5) the "[fwd: ... ]" wrapper.
        let t = s.trim();
        if let Some(inner) = t
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case("[fwd:"))
            .and_then(|_| t[5..].strip_suffix(']'))
        {
            s = inner.trim().to_string();
            marked = true;
        }
        if s == before {
            break;
        }
    }
    (s.trim().to_ascii_uppercase(), marked)
}

fn strip_suffix_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    (s.is_char_boundary(cut) && s[cut..].eq_ignore_ascii_case(suffix)).then(|| &s[..cut])
}

/// `*WSP "[" *BLOBCHAR "]" *WSP` at the start: the rest.
fn strip_blob(s: &str) -> Option<String> {
    let t = s.trim_start();
    let rest = t.strip_prefix('[')?;
    let end = rest.find([']', '['])?;
    rest[end..].strip_prefix(']').map(|r| r.trim_start().to_string())
}

/// `*subj-blob ("re" / "fw" / "fwd") *WSP [subj-blob] ":"` at the start.
fn strip_leader(s: &str) -> Option<String> {
    let mut t = s.trim_start().to_string();
    while let Some(rest) = strip_blob(&t) {
        t = rest;
    }
    let lower = t.to_ascii_lowercase();
    let word = ["fwd", "fw", "re"].into_iter().find(|w| lower.starts_with(w))?;
    let mut rest = t[word.len()..].trim_start().to_string();
    if let Some(r) = strip_blob(&rest) {
        rest = r;
    }
    rest.strip_prefix(':').map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::{base_subject, base_subject_marked};

    #[test]
    fn base_subjects() {
        assert_eq!(base_subject("Re: Re: Fwd: nested replies"), "NESTED REPLIES");
        assert_eq!(base_subject("[list] Re: [x] hello (fwd)"), "HELLO");
        assert_eq!(base_subject("[Fwd: Re: topic]"), "TOPIC");
        assert_eq!(base_subject("RE[2]: Hi  there"), "HI THERE");
        assert_eq!(base_subject("[only a blob]"), "[ONLY A BLOB]");
        assert_eq!(base_subject("Réponse: x"), "RéPONSE: X");
        assert_eq!(base_subject(""), "");
        assert_eq!(base_subject("日本語 test"), "日本語 TEST");
        assert_eq!(base_subject("[日本]"), "[日本]");
        // Folded to upper case: "_" (0x5F) sorts after "Z" (0x5A).
        assert!(base_subject("_x") > base_subject("zed"));
        assert!(base_subject_marked("[list] Re: x").1);
        assert!(base_subject_marked("[Fwd: x]").1);
        assert!(!base_subject_marked("[list] x (fwd)").1);
        assert!(!base_subject_marked("Rex: y").1);
    }
}
