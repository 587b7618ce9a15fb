//! Email/query, /queryChanges, /changes and SearchSnippet/get (RFC 8621
//! §4.4–4.5, §5). Queries walk the mailboxes' rows (bounded); changes read
//! the change log from the MODSEQ each mailbox had in the client's state.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use meshmail_storage::StorageError;
use meshmail_storage::ids::{MailboxId, Uid};
use meshmail_storage::model::messages::{self, Change, ChangeKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use mail_parser::MessageParser;
use meshmail_actors::node::NodeCtx;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::mailboxes::Mailbox;

use super::email_filter::{Context, Filter, FilterCondition, Row, ThreadKeywords, addresses_text, matches};
use super::email_get::email_state;
use super::email_query_index;
use super::mailbox::{Comparator, QueryResponse, clamp_position};
use crate::jmap::dispatch::{Call, ChangesArgs, ChangesResponse, Output, parse, reply};
use crate::jmap::store;
use crate::jmap::wire::MethodError;
use crate::jmap::wire::ids::{self, MailboxMark, StateVector};
use crate::summary::Envelope;

/// Changes one /changes call reports when the client gives no maxChanges.
pub const CHANGES_MAX: usize = 5000;
/// Change-log entries read per mailbox per transaction.
const CHANGES_PAGE: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryArgs {
    /// Checked against the caller by the dispatcher.
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    filter: Option<Filter>,
    #[serde(default)]
    sort: Option<Vec<Comparator>>,
    #[serde(default)]
    position: Option<i64>,
    #[serde(default)]
    anchor: Option<String>,
    #[serde(default)]
    anchor_offset: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    calculate_total: Option<bool>,
    #[serde(default)]
    collapse_threads: Option<bool>,
}

/// The mailboxes a filter can only match in (an `inMailbox` at the top or
/// under AND): lets a query read one mailbox instead of all.
fn only_mailbox(f: &Filter) -> Option<String> {
    match f {
        Filter::Condition(c) => c.in_mailbox.clone(),
        Filter::Operator(op) if op.operator == "AND" => op.conditions.iter().find_map(only_mailbox),
        Filter::Operator(_) => None,
    }
}

/// The rows in the filter's scope that meet it (a bounded walk of the
/// scope's mailboxes). The thread-keyword conditions first walk every
/// mailbox for the threads' keywords, and a `header` condition reads each
/// candidate's header section: both only when the filter has them.
async fn filtered_rows(
    ctx: &NodeCtx,
    account: AccountId,
    mailboxes: &[Mailbox],
    filter: Option<&Filter>,
) -> Result<Vec<Row>, MethodError> {
    let mailbox_ids: Vec<(String, MailboxId)> = mailboxes.iter().map(|m| (ids::mailbox_id(m.id), m.id)).collect();
    let scope: Vec<MailboxId> = match filter.and_then(only_mailbox) {
        Some(id) => mailbox_ids.iter().filter(|(s, _)| *s == id).map(|(_, m)| *m).collect(),
        None => mailboxes.iter().map(|m| m.id).collect(),
    };
    let mut threads = ThreadKeywords::default();
    if filter.is_some_and(|f| f.any_condition(&FilterCondition::uses_threads)) {
        for m in mailboxes {
            for msg in store::mailbox_messages(ctx, account, m.id).await? {
                threads.add(&Row { mailbox: m.id, msg });
            }
        }
    }
    let needs_headers = filter.is_some_and(|f| f.any_condition(&|c| c.header.is_some()));
    let mut rows = Vec::new();
    for m in scope {
        for msg in store::mailbox_messages(ctx, account, m).await? {
            let row = Row { mailbox: m, msg };
            let Some(f) = filter else {
                rows.push(row);
                continue;
            };
            let raw = match needs_headers {
                true => Some(store::body(ctx, &row.msg).await?),
                false => None,
            };
            let parsed = raw.as_deref().and_then(|r| MessageParser::default().parse_headers(r));
            let cx = Context {
                mailbox_ids: &mailbox_ids,
                threads: &threads,
                headers: raw.as_deref().zip(parsed.as_ref().and_then(|p| p.parts.first())),
            };
            if matches(f, &row, &cx)? {
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

pub async fn query(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let mut args: QueryArgs = parse(args)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let sort = args.sort.take().unwrap_or_default();
    let max = call.shared.limits.query_limit_max;
    let limit = args.limit.unwrap_or(max).min(max);
    let indexed = email_query_index::indexed(
        args.filter.as_ref(),
        &sort,
        args.anchor.is_some(),
        args.collapse_threads.unwrap_or(false),
        &mailboxes,
    );
    if let Some(q) = indexed {
        let (position, ids, total) =
            email_query_index::page(&ctx, account, q, args.position.unwrap_or(0), limit).await?;
        return reply(
            "Email/query",
            &QueryResponse {
                account_id: call.account_id(),
                query_state: email_state(&mailboxes),
                can_calculate_changes: true,
                position,
                ids,
                total: args.calculate_total.unwrap_or(false).then_some(total),
                limit: (args.limit.is_some_and(|l| l > max)).then_some(max),
            },
        );
    }
    let mut rows = filtered_rows(&ctx, account, &mailboxes, args.filter.as_ref()).await?;
    sort_rows(&mut rows, &sort)?;
    if args.collapse_threads.unwrap_or(false) {
        let mut seen = HashSet::new();
        rows.retain(|r| seen.insert(ids::thread_id(r.msg.thread_id.as_deref(), r.msg.first_place(r.mailbox))));
    }
    let all_ids: Vec<String> = rows
        .iter()
        .map(|r| ids::email_id(r.msg.first_place(r.mailbox)))
        .collect();
    let total = all_ids.len();
    let position = match &args.anchor {
        Some(a) => {
            let at = all_ids.iter().position(|i| i == a).ok_or(MethodError::AnchorNotFound)? as i64;
            (at + args.anchor_offset.unwrap_or(0)).max(0) as usize
        }
        None => clamp_position(args.position.unwrap_or(0), total),
    }
    .min(total);
    let ids_out: Vec<String> = all_ids.into_iter().skip(position).take(limit).collect();
    reply(
        "Email/query",
        &QueryResponse {
            account_id: call.account_id(),
            query_state: email_state(&mailboxes),
            can_calculate_changes: false,
            position,
            ids: ids_out,
            total: args.calculate_total.unwrap_or(false).then_some(total),
            limit: (args.limit.is_some_and(|l| l > max)).then_some(max),
        },
    )
}

/// Sorts by the comparators, the first one deciding first.
fn sort_rows(rows: &mut [Row], sort: &[Comparator]) -> Result<(), MethodError> {
    // Ties keep the base order: (mailbox, UID) in the direction of the
    // first comparator, as the receivedAt index gives them.
    if sort.first().is_some_and(|c| !c.is_ascending) {
        rows.reverse();
    }
    for c in sort.iter().rev() {
        let asc = c.is_ascending;
        let key_cmp = |a: &Row, b: &Row| -> std::cmp::Ordering {
            let o = match c.property.as_str() {
                "receivedAt" => a.msg.internal_date_ms.cmp(&b.msg.internal_date_ms),
                "sentAt" => a.env().date_timestamp.cmp(&b.env().date_timestamp),
                "size" => a.msg.body.size.cmp(&b.msg.body.size),
                "subject" => subject_key(a.env()).cmp(&subject_key(b.env())),
                "from" => addresses_text(&a.env().from)
                    .to_lowercase()
                    .cmp(&addresses_text(&b.env().from).to_lowercase()),
                "to" => addresses_text(&a.env().to)
                    .to_lowercase()
                    .cmp(&addresses_text(&b.env().to).to_lowercase()),
                _ => std::cmp::Ordering::Equal,
            };
            if asc { o } else { o.reverse() }
        };
        if !["receivedAt", "sentAt", "size", "subject", "from", "to"].contains(&c.property.as_str()) {
            return Err(MethodError::UnsupportedSort(c.property.clone()));
        }
        rows.sort_by(key_cmp);
    }
    Ok(())
}

/// Subjects sort without reply/forward prefixes.
fn subject_key(env: &Envelope) -> String {
    let mut s = env
        .subject
        .as_ref()
        .map(|s| s.decoded.trim().to_lowercase())
        .unwrap_or_default();
    loop {
        let before = s.len();
        for p in ["re:", "fwd:", "fw:", "aw:"] {
            if let Some(rest) = s.strip_prefix(p) {
                s = rest.trim_start().to_string();
            }
        }
        if s.len() == before {
            return s;
        }
    }
}

/// What changed since a state, per email id.
#[derive(Debug, Default)]
pub struct EmailChanges {
    pub created: BTreeSet<String>,
    pub updated: BTreeSet<String>,
    pub destroyed: BTreeSet<String>,
    /// The state reached (the current one unless `has_more`).
    pub new_state: StateVector,
    pub has_more: bool,
    /// Emails touched, with where they live: (mailbox, uid).
    pub touched: Vec<(MailboxId, Uid)>,
    /// The threads of expunged emails.
    pub expunged_threads: BTreeSet<String>,
}

impl EmailChanges {
    /// One change-log entry of `mailbox`, about the email `id`. Emails are
    /// named by their first place, so a move (the source's `moved`
    /// expunge, the destination's `Added` with an origin) is an update of
    /// one email. Mailboxes' logs are read one after the other, not in
    /// time order, so each outcome is decided whatever the order: born
    /// (an `Added` without origin) and gone (an expunge not part of a
    /// move) in the window cancel out; born is created; gone is destroyed;
    /// anything else is updated.
    fn apply(&mut self, mailbox: MailboxId, ch: &Change, id: String) {
        let born = ch.kind == ChangeKind::Added && ch.origin.is_none();
        let gone = ch.kind == ChangeKind::Expunged && !ch.moved;
        if ch.kind == ChangeKind::Expunged {
            let first = ch.first_place(mailbox);
            self.expunged_threads
                .insert(ids::thread_id(ch.thread_id.as_deref(), first));
        } else {
            self.touched.push((mailbox, ch.uid));
        }
        if born {
            self.updated.remove(&id);
            if !self.destroyed.remove(&id) {
                self.created.insert(id);
            }
        } else if gone {
            self.updated.remove(&id);
            if !self.created.remove(&id) {
                self.destroyed.insert(id);
            }
        } else if !self.created.contains(&id) && !self.destroyed.contains(&id) {
            self.updated.insert(id);
        }
    }
}

/// Reads the change log from `since` (a state vector) up to `max` changes.
pub async fn compute_changes(call: &Call<'_>, since: &str, max: usize) -> Result<EmailChanges, MethodError> {
    let old = StateVector::decode(since).ok_or(MethodError::CannotCalculateChanges)?;
    let ctx = call.shared.ctx.clone();
    let account = call.caller.account;
    let mailboxes = store::mailboxes(&ctx, account).await?;
    let now = StateVector::of(&mailboxes, false);
    // A mailbox gone since the state took its change log with it.
    if old.marks.iter().any(|m| now.get(m.mailbox).is_none()) {
        return Err(MethodError::CannotCalculateChanges);
    }
    let mut out = EmailChanges::default();
    let mut reached: Vec<MailboxMark> = Vec::new();
    let mut count = 0usize;
    for mark in &now.marks {
        let from = old.get(mark.mailbox).map_or(0, |m| m.modseq);
        if from > mark.modseq {
            return Err(MethodError::CannotCalculateChanges);
        }
        if count >= max {
            if old.get(mark.mailbox).is_some() {
                reached.push(MailboxMark { modseq: from, ..*mark });
            }
            if from < mark.modseq {
                out.has_more = true;
            }
            continue;
        }
        let mailbox = mark.mailbox;
        let mut at = from;
        let mut done = from >= mark.modseq;
        while !done {
            let (floor, page) = ctx
                .db
                .read("jmap_changes", move |txn| async move {
                    Ok::<_, StorageError>((
                        messages::change_floor(&txn, account, mailbox).await?,
                        messages::changes_since(&txn, account, mailbox, at, CHANGES_PAGE).await?,
                    ))
                })
                .await?;
            if floor > at {
                return Err(MethodError::CannotCalculateChanges);
            }
            for ch in &page {
                if ch.modseq > mark.modseq {
                    done = true;
                    break;
                }
                let id = ids::email_id(ch.first_place(mailbox));
                let new_id = !out.created.contains(&id) && !out.updated.contains(&id) && !out.destroyed.contains(&id);
                if new_id && count >= max {
                    out.has_more = true;
                    done = true;
                    break;
                }
                if new_id {
                    count += 1;
                }
                out.apply(mailbox, ch, id);
                at = ch.modseq;
            }
            if page.len() < CHANGES_PAGE {
                done = true;
            }
        }
        // No entry left below the mailbox's MODSEQ: it is reached (a MODSEQ
        // raised without a log entry changes no email).
        let reached_modseq = if out.has_more { at } else { mark.modseq };
        reached.push(MailboxMark {
            modseq: reached_modseq,
            ..*mark
        });
    }
    out.new_state = StateVector { marks: reached };
    Ok(out)
}

pub async fn changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ChangesArgs = parse(args)?;
    if args.max_changes == Some(0) {
        return Err(MethodError::InvalidArguments("maxChanges must be positive".into()));
    }
    let max = args.max_changes.map_or(CHANGES_MAX, |m| (m as usize).min(CHANGES_MAX));
    let ch = compute_changes(call, &args.since_state, max).await?;
    reply(
        "Email/changes",
        &ChangesResponse {
            account_id: call.account_id(),
            old_state: args.since_state,
            new_state: ch.new_state.encode(),
            has_more_changes: ch.has_more,
            created: ch.created.into_iter().collect(),
            updated: ch.updated.into_iter().collect(),
            destroyed: ch.destroyed.into_iter().collect(),
            updated_properties: None,
        },
    )
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SnippetArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    filter: Option<Filter>,
    email_ids: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Snippet {
    email_id: String,
    subject: Option<String>,
    preview: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SnippetResponse {
    account_id: String,
    list: Vec<Snippet>,
    not_found: Vec<String>,
}

/// Search terms of a filter (text and subject conditions).
fn terms(f: &Filter, out: &mut Vec<String>) {
    match f {
        Filter::Condition(c) => out.extend(c.text.iter().chain(c.subject.iter()).cloned()),
        Filter::Operator(op) if op.operator != "NOT" => op.conditions.iter().for_each(|c| terms(c, out)),
        Filter::Operator(_) => {}
    }
}

/// HTML-escapes `s` and wraps each match of a term in `<mark>`.
fn highlight(s: &str, terms: &[String]) -> Option<String> {
    let lower = s.to_lowercase();
    let mut marks: BTreeMap<usize, usize> = BTreeMap::new();
    for t in terms.iter().filter(|t| !t.is_empty()) {
        let t = t.to_lowercase();
        let mut from = 0;
        while let Some(i) = lower[from..].find(&t) {
            marks.insert(from + i, from + i + t.len());
            from += i + t.len();
        }
    }
    if marks.is_empty() || lower.len() != s.len() {
        return None;
    }
    let mut out = String::new();
    let mut at = 0;
    for (b, e) in marks {
        if b < at || !s.is_char_boundary(b) || !s.is_char_boundary(e) {
            continue;
        }
        out.push_str(&escape(&s[at..b]));
        out.push_str("<mark>");
        out.push_str(&escape(&s[b..e]));
        out.push_str("</mark>");
        at = e;
    }
    out.push_str(&escape(&s[at..]));
    Some(out)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

pub async fn snippets(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: SnippetArgs = parse(args)?;
    crate::jmap::dispatch::check_get_size(call, Some(&args.email_ids))?;
    let mut t = Vec::new();
    if let Some(f) = &args.filter {
        terms(f, &mut t);
    }
    let parsed: Vec<Option<(MailboxId, Uid)>> = args.email_ids.iter().map(|i| ids::parse_email(i)).collect();
    let rows = store::emails(
        &call.shared.ctx,
        call.caller.account,
        parsed.iter().flatten().copied().collect(),
    )
    .await?;
    let mut rows = rows.into_iter();
    let mut resp = SnippetResponse {
        account_id: call.account_id(),
        list: Vec::new(),
        not_found: Vec::new(),
    };
    for (id, p) in args.email_ids.into_iter().zip(parsed) {
        match p.and_then(|_| rows.next().flatten()) {
            Some((_, msg)) => {
                let subject = msg.summary.envelope.subject.map(|s| s.decoded).unwrap_or_default();
                resp.list.push(Snippet {
                    email_id: id,
                    subject: highlight(&subject, &t),
                    preview: None,
                });
            }
            None => resp.not_found.push(id),
        }
    }
    reply("SearchSnippet/get", &resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highlighting_escapes() {
        assert_eq!(
            highlight("a <b> report", &["report".into()]).as_deref(),
            Some("a &lt;b&gt; <mark>report</mark>")
        );
        assert_eq!(highlight("nothing", &["x".into()]), None);
    }
}
