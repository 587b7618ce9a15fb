//! Email/query's FilterCondition (RFC 8621 §4.4.1) and how one message
//! meets it. Most conditions read the row alone (its stored summary and
//! flags); the thread-keyword ones need every message of the account
//! ([`ThreadKeywords`], gathered only for a filter that has one), and
//! `header` needs the message's header section (read only for a filter
//! that has one). Neither is on the path of the common queries.

use std::collections::HashMap;

use mail_parser::MessagePart;
use meshmail_storage::ids::MailboxId;
use meshmail_storage::model::messages::Message;
use serde::Deserialize;

use super::email_get::flag_of_keyword;
use crate::jmap::wire::MethodError;
use crate::jmap::wire::email_parts;
use crate::jmap::wire::ids;
use crate::summary::Envelope;

pub type Filter = crate::jmap::wire::filter::Filter<FilterCondition>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterCondition {
    pub in_mailbox: Option<String>,
    pub in_mailbox_other_than: Option<Vec<String>>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub min_size: Option<u64>,
    pub max_size: Option<u64>,
    pub has_keyword: Option<String>,
    pub not_keyword: Option<String>,
    pub has_attachment: Option<bool>,
    pub text: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub cc: Option<String>,
    pub bcc: Option<String>,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub all_in_thread_have_keyword: Option<String>,
    pub some_in_thread_have_keyword: Option<String>,
    pub none_in_thread_have_keyword: Option<String>,
    /// `[name]` or `[name, text]` (RFC 8621 §4.4.1).
    pub header: Option<Vec<String>>,
}

impl FilterCondition {
    /// Whether the condition looks at the other messages of the thread.
    pub fn uses_threads(&self) -> bool {
        self.all_in_thread_have_keyword.is_some()
            || self.some_in_thread_have_keyword.is_some()
            || self.none_in_thread_have_keyword.is_some()
    }
}

/// One candidate of a query.
pub struct Row {
    pub mailbox: MailboxId,
    pub msg: Message,
}

impl Row {
    pub fn env(&self) -> &Envelope {
        &self.msg.summary.envelope
    }

    /// The JMAP id of the row's thread.
    pub fn thread(&self) -> String {
        ids::thread_id(self.msg.thread_id.as_deref(), self.msg.first_place(self.mailbox))
    }

    fn has_keyword(&self, keyword: &str) -> bool {
        let flag = flag_of_keyword(keyword);
        self.msg.flags.iter().any(|f| f.eq_ignore_ascii_case(&flag))
    }
}

/// RFC 3339 UTC date → seconds.
fn parse_date(s: &str) -> Option<i64> {
    let d = mail_parser::DateTime::parse_rfc3339(s)?;
    d.is_valid().then(|| d.to_timestamp())
}

pub fn contains(hay: &str, needle: &str) -> bool {
    hay.to_lowercase().contains(&needle.to_lowercase())
}

pub fn addresses_text(l: &crate::summary::AddressList) -> String {
    let mut s = l.raw.clone().unwrap_or_default();
    for a in &l.addresses {
        if let Some(n) = &a.name {
            s.push(' ');
            s.push_str(n);
        }
    }
    s
}

/// Whether row `r` meets condition `c`: the row's own fields first, then
/// its thread and its header fields.
fn matches_condition(c: &FilterCondition, r: &Row, cx: &Context<'_>) -> Result<bool, MethodError> {
    Ok(row_matches(c, r, cx.mailbox_ids)?
        && cx.threads.matches(c, r)
        && header_matches(c.header.as_deref(), cx.headers)?)
}

/// The conditions on the row itself (its summary and flags).
fn row_matches(c: &FilterCondition, r: &Row, mailbox_ids: &[(String, MailboxId)]) -> Result<bool, MethodError> {
    let resolve = |id: &str| mailbox_ids.iter().find(|(s, _)| s == id).map(|(_, m)| *m);
    if let Some(m) = &c.in_mailbox
        && resolve(m) != Some(r.mailbox)
    {
        return Ok(false);
    }
    if let Some(list) = &c.in_mailbox_other_than
        && list.iter().any(|m| resolve(m) == Some(r.mailbox))
    {
        return Ok(false);
    }
    let received_s = r.msg.internal_date_ms.div_euclid(1000);
    if let Some(b) = &c.before {
        let t = parse_date(b).ok_or_else(|| MethodError::InvalidArguments(format!("before: bad date {b}")))?;
        if received_s >= t {
            return Ok(false);
        }
    }
    if let Some(a) = &c.after {
        let t = parse_date(a).ok_or_else(|| MethodError::InvalidArguments(format!("after: bad date {a}")))?;
        if received_s < t {
            return Ok(false);
        }
    }
    if c.min_size.is_some_and(|n| r.msg.body.size < n) || c.max_size.is_some_and(|n| r.msg.body.size >= n) {
        return Ok(false);
    }
    let has = |k: &str| r.has_keyword(k);
    if c.has_keyword.as_deref().is_some_and(|k| !has(k)) || c.not_keyword.as_deref().is_some_and(has) {
        return Ok(false);
    }
    if let Some(want) = c.has_attachment {
        let structure = &r.msg.summary;
        let attached = structure.has_attachment.unwrap_or_else(|| {
            structure
                .structure
                .children
                .iter()
                .any(|p| p.disposition.as_ref().is_some_and(|d| d.kind == "attachment"))
        });
        if attached != want {
            return Ok(false);
        }
    }
    let subject = r.env().subject.as_ref().map(|s| s.decoded.as_str()).unwrap_or_default();
    let field_checks = [
        (&c.from, addresses_text(&r.env().from)),
        (&c.to, addresses_text(&r.env().to)),
        (&c.cc, addresses_text(&r.env().cc)),
        (&c.bcc, addresses_text(&r.env().bcc)),
        (&c.subject, subject.to_string()),
    ];
    for (want, have) in field_checks {
        if let Some(w) = want
            && !contains(&have, w)
        {
            return Ok(false);
        }
    }
    if let Some(t) = &c.text {
        let all = format!(
            "{} {} {} {} {subject}",
            addresses_text(&r.env().from),
            addresses_text(&r.env().to),
            addresses_text(&r.env().cc),
            addresses_text(&r.env().bcc)
        );
        if !contains(&all, t) {
            return Ok(false);
        }
    }
    if c.body.is_some() {
        return Err(MethodError::UnsupportedFilter(
            "body (use text: it searches the addresses and the subject)".into(),
        ));
    }
    Ok(true)
}

/// Whether row `r` meets filter `f`.
pub fn matches(f: &Filter, r: &Row, cx: &Context<'_>) -> Result<bool, MethodError> {
    f.matches(&mut |c| matches_condition(c, r, cx))
}

/// What matching a row needs besides the row.
pub struct Context<'a> {
    pub mailbox_ids: &'a [(String, MailboxId)],
    pub threads: &'a ThreadKeywords,
    /// The row's header section (raw bytes and its parsed fields), when
    /// the filter has a `header` condition.
    pub headers: Option<(&'a [u8], &'a MessagePart<'a>)>,
}

/// The `header` condition: a field of that name, containing the text
/// (case-insensitive, in its decoded Text form) if one is given.
fn header_matches(header: Option<&[String]>, source: Option<(&[u8], &MessagePart<'_>)>) -> Result<bool, MethodError> {
    let Some(header) = header else {
        return Ok(true);
    };
    let (name, text) = match header {
        [name] => (name, None),
        [name, text] => (name, Some(text)),
        _ => {
            return Err(MethodError::UnsupportedFilter(
                "header takes [name] or [name, text]".into(),
            ));
        }
    };
    let Some((raw, part)) = source else {
        return Ok(false);
    };
    let values = email_parts::header_texts(raw, part, name);
    Ok(match text {
        None => !values.is_empty(),
        Some(t) => values.iter().any(|v| contains(v, t)),
    })
}

/// Per thread, how many messages it has and how many carry each flag:
/// what the *InThreadHaveKeyword conditions ask (RFC 8621 §4.4.1).
#[derive(Debug, Default)]
pub struct ThreadKeywords {
    threads: HashMap<String, ThreadStat>,
}

#[derive(Debug, Default)]
struct ThreadStat {
    members: usize,
    /// Lower-case IMAP flag → messages carrying it.
    flags: HashMap<String, usize>,
}

impl ThreadKeywords {
    pub fn add(&mut self, r: &Row) {
        let stat = self.threads.entry(r.thread()).or_default();
        stat.members += 1;
        for f in &r.msg.flags {
            *stat.flags.entry(f.to_ascii_lowercase()).or_default() += 1;
        }
    }

    /// (messages of the row's thread with the keyword, messages of it). A
    /// row of a thread never added is a thread of its own.
    fn count(&self, r: &Row, keyword: &str) -> (usize, usize) {
        match self.threads.get(&r.thread()) {
            Some(stat) => {
                let flag = flag_of_keyword(keyword).to_ascii_lowercase();
                (stat.flags.get(&flag).copied().unwrap_or(0), stat.members)
            }
            None => (usize::from(r.has_keyword(keyword)), 1),
        }
    }

    fn matches(&self, c: &FilterCondition, r: &Row) -> bool {
        let all = |k: &String| {
            let (with, members) = self.count(r, k);
            with == members
        };
        let some = |k: &String| self.count(r, k).0 > 0;
        c.all_in_thread_have_keyword.as_ref().is_none_or(all)
            && c.some_in_thread_have_keyword.as_ref().is_none_or(some)
            && c.none_in_thread_have_keyword.as_ref().is_none_or(|k| !some(k))
    }
}
