//! Identity, EmailSubmission and VacationResponse (RFC 8621 §6–8).
//!
//! A user sends only as themselves: From, Sender and the envelope sender
//! must each be one of the account's addresses by the rule SMTP submission
//! applies (`accept::sender_allowed`), and the identity must be one of the
//! account's. EmailSubmission/set hands the message to the acceptance layer
//! a submission client's message reaches too (`accept::accept_message`, as
//! the authenticated user, with the user's own address as the envelope
//! sender): local recipients are delivered through their shard actors and
//! remote ones queued for outbound delivery. Its undoStatus is therefore
//! `final` at once. Acceptance answers one typed `Outcome` per recipient:
//! none stored is `serverFail`; each recipient's `deliveryStatus.smtpReply`
//! is the outcome as an SMTP reply (RFC 8621 §7 defines it so), written by
//! `smtp::session::replies::reply_of`, the same text an SMTP client gets.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use meshmail_storage::StorageError;
use meshmail_storage::model::jmap::{self, Identity, Submission};
use meshmail_storage::model::messages::Message;
use meshmail_storage::model::{id_from_str, id_to_string, new_id, now_ms};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::email_get::utc_date;
use super::identity::identities;
use super::mailbox::{Comparator, QueryResponse, SetResponse, clamp_position};
use crate::accept::{Accepted, Outcome, RcptOutcome, Recipient, accept_message, resolve_recipient, sender_allowed};
use crate::envelope::Mailbox as SmtpMailbox;
use crate::jmap::dispatch::{Call, ChangesArgs, ChangesResponse, GetArgs, Output, begin_set, parse, reply, set_count};
use crate::jmap::store;
use crate::jmap::wire::ids;
use crate::jmap::wire::ids::FirstPlace;
use crate::jmap::wire::object::{Object, Properties};
use crate::jmap::wire::{MethodError, SetError};
use crate::smtp::session::replies::reply_of;

/// Submissions listed at most (the record is kept for the client's view).
const SUBMISSIONS_MAX: usize = 10_000;
/// Recipients per submission (the SMTP listener's limit applies too).
const RCPT_MAX: usize = 100;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Address {
    email: String,
    parameters: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    mail_from: Address,
    rcpt_to: Vec<Address>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeliveryStatus {
    smtp_reply: String,
    delivered: &'static str,
    displayed: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubmissionObject {
    id: String,
    identity_id: String,
    email_id: String,
    thread_id: String,
    envelope: Envelope,
    send_at: String,
    undo_status: &'static str,
    delivery_status: BTreeMap<String, DeliveryStatus>,
    dsn_blob_ids: Vec<String>,
    mdn_blob_ids: Vec<String>,
}

fn object(s: &Submission) -> SubmissionObject {
    let delivery_status = s
        .rcpt_to
        .iter()
        .zip(s.replies.iter())
        .map(|(r, reply)| {
            let delivered = match reply.as_bytes().first() {
                Some(b'2') => "yes",
                Some(b'4') => "queued",
                _ => "no",
            };
            (
                r.clone(),
                DeliveryStatus {
                    smtp_reply: reply.clone(),
                    delivered,
                    displayed: "unknown",
                },
            )
        })
        .collect();
    SubmissionObject {
        id: submission_id(&s.id),
        identity_id: s.identity_id.clone(),
        email_id: s.email_id.clone(),
        thread_id: s.thread_id.clone(),
        envelope: Envelope {
            mail_from: Address {
                email: s.mail_from.clone(),
                parameters: None,
            },
            rcpt_to: s
                .rcpt_to
                .iter()
                .map(|r| Address {
                    email: r.clone(),
                    parameters: None,
                })
                .collect(),
        },
        send_at: utc_date((s.send_at_ms / 1000) as i64),
        undo_status: "final",
        delivery_status,
        dsn_blob_ids: Vec::new(),
        mdn_blob_ids: Vec::new(),
    }
}

/// `S` + the record's UUIDv7 in hex (ids are `[A-Za-z0-9_-]`).
fn submission_id(id: &[u8; 16]) -> String {
    format!("S{}", id_to_string(id).replace('-', ""))
}

fn parse_submission_id(s: &str) -> Option<[u8; 16]> {
    let hex = s.strip_prefix('S')?;
    if hex.len() != 32 {
        return None;
    }
    let dashed = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    id_from_str(&dashed).ok()
}

async fn submissions(call: &Call<'_>) -> Result<Vec<Submission>, MethodError> {
    let account = call.caller.account;
    Ok(call
        .shared
        .ctx
        .db
        .read("jmap_submissions", move |txn| async move {
            jmap::list_submissions(&txn, account, SUBMISSIONS_MAX).await
        })
        .await?)
}

/// The EmailSubmission state: the newest record's id (ids grow in time).
fn submission_state(all: &[Submission]) -> String {
    state_of_last(all.last())
}

fn state_of_last(last: Option<&Submission>) -> String {
    last.map_or_else(|| "s0".to_string(), |s| format!("s{}", submission_id(&s.id)))
}

/// The state without listing every record (one key read): /set needs it
/// twice per call, and a list would make sending quadratic.
async fn current_state(call: &Call<'_>) -> Result<String, MethodError> {
    let account = call.caller.account;
    let last = call
        .shared
        .ctx
        .db
        .read("jmap_submission_state", move |txn| async move {
            jmap::last_submission(&txn, account).await
        })
        .await?;
    Ok(state_of_last(last.as_ref()))
}

pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: GetArgs = parse(args)?;
    crate::jmap::dispatch::check_get_size(call, args.ids.as_ref())?;
    let all = submissions(call).await?;
    let mut resp = crate::jmap::dispatch::GetResponse {
        account_id: call.account_id(),
        state: submission_state(&all),
        list: Vec::new(),
        not_found: Vec::new(),
    };
    let render = |s: &Submission| {
        crate::jmap::dispatch::select_properties(
            serde_json::to_value(object(s)).unwrap_or_default(),
            args.properties.as_deref(),
        )
    };
    match &args.ids {
        None => resp.list = all.iter().map(render).collect(),
        Some(wanted) => {
            for id in wanted {
                let id = call.resolve_id(id).unwrap_or_else(|| id.clone());
                match parse_submission_id(&id).and_then(|raw| all.iter().find(|s| s.id == raw)) {
                    Some(s) => resp.list.push(render(s)),
                    None => resp.not_found.push(id),
                }
            }
        }
    }
    reply("EmailSubmission/get", &resp)
}

pub async fn changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ChangesArgs = parse(args)?;
    let all = submissions(call).await?;
    let new_state = submission_state(&all);
    let since = if args.since_state == "s0" {
        None
    } else {
        Some(
            args.since_state
                .strip_prefix('s')
                .and_then(parse_submission_id)
                .ok_or(MethodError::CannotCalculateChanges)?,
        )
    };
    let created: Vec<String> = all
        .iter()
        .filter(|s| since.is_none_or(|t| s.id > t))
        .map(|s| submission_id(&s.id))
        .collect();
    reply(
        "EmailSubmission/changes",
        &ChangesResponse {
            account_id: call.account_id(),
            old_state: args.since_state,
            new_state,
            created,
            ..Default::default()
        },
    )
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    filter: Option<Map<String, Value>>,
    /// Accepted; submissions come in creation order, the only one kept.
    #[serde(default)]
    #[expect(dead_code, reason = "creation order is the only order")]
    sort: Option<Vec<Comparator>>,
    #[serde(default)]
    position: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    calculate_total: Option<bool>,
}

pub async fn query(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: QueryArgs = parse(args)?;
    let all = submissions(call).await?;
    let mut list: Vec<&Submission> = all.iter().collect();
    if let Some(f) = &args.filter {
        for (k, v) in f {
            match (k.as_str(), v) {
                ("emailIds", Value::Array(ids)) => list.retain(|s| ids.iter().any(|i| i.as_str() == Some(&s.email_id))),
                ("threadIds", Value::Array(ids)) => {
                    list.retain(|s| ids.iter().any(|i| i.as_str() == Some(&s.thread_id)))
                }
                ("undoStatus", Value::String(u)) => {
                    if u != "final" {
                        list.clear()
                    }
                }
                ("identityIds", Value::Array(ids)) => {
                    list.retain(|s| ids.iter().any(|i| i.as_str() == Some(&s.identity_id)))
                }
                (other, _) => return Err(MethodError::UnsupportedFilter(other.to_string())),
            }
        }
    }
    let total = list.len();
    let position = clamp_position(args.position.unwrap_or(0), total);
    let ids_out = list
        .iter()
        .skip(position)
        .take(args.limit.unwrap_or(usize::MAX))
        .map(|s| submission_id(&s.id))
        .collect();
    reply(
        "EmailSubmission/query",
        &QueryResponse {
            account_id: call.account_id(),
            query_state: submission_state(&all),
            can_calculate_changes: false,
            position,
            ids: ids_out,
            total: args.calculate_total.unwrap_or(false).then_some(total),
            limit: None,
        },
    )
}

pub async fn query_changes(_call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    crate::jmap::dispatch::query_changes_unsupported(args)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubmissionSetArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    if_in_state: Option<String>,
    #[serde(default)]
    create: Option<BTreeMap<String, Object<SubmissionCreate>>>,
    #[serde(default)]
    update: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    destroy: Option<Vec<String>>,
    #[serde(default)]
    on_success_update_email: Option<BTreeMap<String, Map<String, Value>>>,
    #[serde(default)]
    on_success_destroy_email: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubmissionCreate {
    identity_id: String,
    email_id: String,
    #[serde(default)]
    envelope: Option<EnvelopeIn>,
}

impl Properties for SubmissionCreate {
    const REQUIRED: &'static [&'static str] = &["identityId", "emailId"];
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeIn {
    mail_from: AddressIn,
    rcpt_to: Vec<AddressIn>,
}

#[derive(Debug, Deserialize)]
struct AddressIn {
    email: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreatedSubmission {
    id: String,
    undo_status: &'static str,
    send_at: String,
}

/// The message as sent: without its Bcc header (RFC 5322 §3.6.3).
pub fn strip_bcc(raw: &[u8]) -> Vec<u8> {
    let header_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 2)
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| p + 1))
        .unwrap_or(raw.len());
    let (head, body) = raw.split_at(header_end);
    let mut out = Vec::with_capacity(raw.len());
    let mut skipping = false;
    for line in head.split_inclusive(|&b| b == b'\n') {
        let continuation = line.first().is_some_and(|b| *b == b' ' || *b == b'\t');
        if !continuation {
            skipping = line.len() >= 4 && line[..4].eq_ignore_ascii_case(b"bcc:");
        }
        if !skipping {
            out.extend_from_slice(line);
        }
    }
    out.extend_from_slice(body);
    out
}

/// Every recipient address the message's To, Cc and Bcc name.
fn header_recipients(raw: &[u8]) -> (Vec<String>, Vec<String>) {
    let Some(msg) = mail_parser::MessageParser::default().parse(raw) else {
        return (Vec::new(), Vec::new());
    };
    let emails = |a: Option<&mail_parser::Address<'_>>| -> Vec<String> {
        crate::jmap::wire::email_parts::addresses(a)
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.email)
            .collect()
    };
    let mut rcpt = emails(msg.to());
    rcpt.extend(emails(msg.cc()));
    rcpt.extend(emails(msg.bcc()));
    let mut from = emails(msg.from());
    from.extend(emails(msg.sender()));
    (from, rcpt)
}

async fn submit_one(call: &Call<'_>, c: &SubmissionCreate) -> Result<Submission, SetError> {
    let identity = submission_identity(call, c).await?;
    let email = SubmittedEmail::load(call, c).await?;
    let (from_headers, header_rcpts) = header_recipients(&email.raw);
    let (mail_from, rcpts) = match &c.envelope {
        Some(e) => (
            e.mail_from.email.clone(),
            e.rcpt_to.iter().map(|r| r.email.clone()).collect(),
        ),
        None => (identity.email.to_ascii_lowercase(), header_rcpts),
    };
    check_senders(call, &from_headers, &mail_from).await?;
    let recipients = resolve_recipients(call, &rcpts).await?;
    let from = if mail_from.is_empty() {
        None
    } else {
        Some(SmtpMailbox::parse(&mail_from).map_err(|e| SetError::new("forbiddenMailFrom", e.to_string()))?)
    };
    let rcpt_names: Vec<String> = recipients
        .iter()
        .map(|r| match r {
            Recipient::Local { address, .. } | Recipient::Remote { address, .. } => address.clone(),
        })
        .collect();
    let accepted = Accepted {
        from,
        recipients,
        helo: call.shared.smtp.hostname.clone(),
        peer: SocketAddr::new(call.caller.ip, 0),
        tls: call.caller.tls,
        authenticated: Some(call.caller.email.clone()),
        lmtp: false,
        auth_results: None,
        junk: false,
        envelope: Default::default(),
        learned: Default::default(),
    };
    let started = std::time::Instant::now();
    let outcomes = accept_message(call.shared.smtp.acceptor(), accepted, strip_bcc(&email.raw)).await;
    metrics::histogram!("meshmail_jmap_submission_seconds").record(started.elapsed().as_secs_f64());
    if let Some(refused) = none_stored(&outcomes) {
        return Err(refused);
    }
    let record = Submission {
        id: new_id(),
        identity_id: identity.id.clone(),
        email_id: email.id.clone(),
        thread_id: ids::thread_id(email.msg.thread_id.as_deref(), email.first),
        mail_from: mail_from.clone(),
        rcpt_to: rcpt_names,
        send_at_ms: now_ms(),
        replies: outcomes
            .iter()
            .map(|o| reply_of(o).to_string().trim().to_string())
            .collect(),
    };
    let (account, r) = (call.caller.account, record.clone());
    call.shared
        .ctx
        .db
        .run("jmap_submission", move |txn| {
            let r = r.clone();
            async move { jmap::put_submission(&txn, account, &r) }
        })
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))?;
    Ok(record)
}

fn server_fail(e: impl std::fmt::Display) -> SetError {
    SetError::new("serverFail", e.to_string())
}

/// The create's identity (a creation id resolved), one of the account's.
async fn submission_identity(call: &Call<'_>, c: &SubmissionCreate) -> Result<Identity, SetError> {
    let identity_id = call.resolve_id(&c.identity_id).unwrap_or_else(|| c.identity_id.clone());
    let (identities, _) = identities(call).await.map_err(server_fail)?;
    identities
        .into_iter()
        .find(|i| i.id == identity_id)
        .ok_or_else(|| SetError::invalid_properties(&["identityId"], "no such identity"))
}

/// The email a create sends: its id, where it was first stored, its
/// record and its content.
struct SubmittedEmail {
    id: String,
    first: FirstPlace,
    msg: Message,
    raw: Bytes,
}

impl SubmittedEmail {
    async fn load(call: &Call<'_>, c: &SubmissionCreate) -> Result<SubmittedEmail, SetError> {
        let id = call
            .resolve_id(&c.email_id)
            .ok_or_else(|| SetError::invalid_properties(&["emailId"], "unknown creation id"))?;
        let first = ids::parse_email(&id).ok_or_else(|| SetError::new("invalidEmail", "no such email"))?;
        let ctx = &call.shared.ctx;
        let (_, msg) = store::email(ctx, call.caller.account, first)
            .await
            .map_err(server_fail)?
            .ok_or_else(|| SetError::new("invalidEmail", "no such email"))?;
        let raw = store::body(ctx, &msg).await.map_err(server_fail)?;
        Ok(SubmittedEmail { id, first, msg, raw })
    }
}

/// A user sends only as themselves: every From/Sender address and the
/// envelope sender (unless null) must be the account's own (the SMTP rule).
async fn check_senders(call: &Call<'_>, from_headers: &[String], mail_from: &str) -> Result<(), SetError> {
    let allowed = async |address: &str| {
        sender_allowed(&call.shared.ctx, &call.caller.email, address, &call.shared.smtp.routing)
            .await
            .map_err(server_fail)
    };
    for f in from_headers {
        if !allowed(f).await? {
            return Err(SetError::new(
                "forbiddenFrom",
                format!("{f} is not one of your addresses"),
            ));
        }
    }
    if !mail_from.is_empty() && !allowed(mail_from).await? {
        return Err(SetError::new(
            "forbiddenMailFrom",
            "the envelope sender must be one of your addresses",
        ));
    }
    Ok(())
}

/// Every envelope recipient resolved as SMTP would; any that is not
/// deliverable refuses the whole submission, naming them all.
async fn resolve_recipients(call: &Call<'_>, rcpts: &[String]) -> Result<Vec<Recipient>, SetError> {
    if rcpts.is_empty() {
        return Err(SetError::new("noRecipients", "the message has no recipients"));
    }
    if rcpts.len() > RCPT_MAX {
        return Err(SetError::new("tooManyRecipients", format!("at most {RCPT_MAX}")));
    }
    let mut recipients = Vec::with_capacity(rcpts.len());
    let mut invalid = Vec::new();
    for r in rcpts {
        let resolved = match SmtpMailbox::parse(r) {
            Ok(m) => resolve_recipient(&call.shared.ctx, &m.normalized(), true, &call.shared.smtp.routing)
                .await
                .map_err(server_fail)?,
            Err(_) => RcptOutcome::Unknown,
        };
        match resolved {
            RcptOutcome::Accept(found) => recipients.extend(found),
            _ => invalid.push(r.clone()),
        }
    }
    if !invalid.is_empty() {
        return Err(SetError {
            kind: "invalidRecipients",
            description: Some(format!("not deliverable: {}", invalid.join(", "))),
            properties: None,
            not_found: None,
            existing_id: None,
        });
    }
    Ok(recipients)
}

/// `serverFail` when acceptance stored no recipient's copy (the first
/// refusal, as its SMTP reply, says why); `None` when one at least is
/// durable (the others show in `deliveryStatus`).
fn none_stored(outcomes: &[Outcome]) -> Option<SetError> {
    if outcomes.iter().any(Outcome::is_stored) {
        return None;
    }
    let why = outcomes.first().map(|o| reply_of(o).to_string()).unwrap_or_default();
    Some(SetError::new("serverFail", format!("not accepted: {}", why.trim())))
}

pub async fn set(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: SubmissionSetArgs = parse(args)?;
    let old_state = current_state(call).await?;
    begin_set(
        call,
        set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
        args.if_in_state.as_deref(),
        &old_state,
    )?;
    let mut resp: SetResponse<CreatedSubmission> = SetResponse {
        account_id: call.account_id(),
        old_state: Some(old_state),
        ..Default::default()
    };
    // Creation id and submission id, each to the email it sent: what the
    // onSuccess arguments name.
    let mut succeeded: BTreeMap<String, String> = BTreeMap::new();
    for (cid, c) in args.create.unwrap_or_default() {
        // A create that does not parse is refused alone (RFC 8620 §5.3).
        let outcome = match c.0 {
            Ok(c) => submit_one(call, &c).await,
            Err(e) => Err(e.into()),
        };
        match outcome {
            Ok(s) => {
                let id = submission_id(&s.id);
                call.created.insert(cid.clone(), id.clone());
                succeeded.insert(format!("#{cid}"), s.email_id.clone());
                succeeded.insert(id.clone(), s.email_id.clone());
                resp.created.insert(
                    cid,
                    CreatedSubmission {
                        id,
                        undo_status: "final",
                        send_at: utc_date((s.send_at_ms / 1000) as i64),
                    },
                );
            }
            Err(e) => {
                resp.not_created.insert(cid, e);
            }
        }
    }
    for (id, _) in args.update.unwrap_or_default() {
        // undoStatus is final at once: nothing can be canceled.
        resp.not_updated
            .insert(id, SetError::new("cannotUnsend", "the message was already sent"));
    }
    for id in args.destroy.unwrap_or_default() {
        match destroy_one(call, &id).await {
            Ok(()) => resp.destroyed.push(id),
            Err(e) => {
                resp.not_destroyed.insert(id, e);
            }
        }
    }
    resp.new_state = current_state(call).await?;
    let mut out = reply("EmailSubmission/set", &resp)?;
    if let Some(a) = on_success_email_set(
        call,
        args.on_success_update_email.unwrap_or_default(),
        args.on_success_destroy_email.unwrap_or_default(),
        &succeeded,
    ) {
        out.extend(super::email_set::set(call, a).await?);
    }
    Ok(out)
}

/// Deletes the record of submission `id` (a creation id resolved).
async fn destroy_one(call: &Call<'_>, id: &str) -> Result<(), SetError> {
    let account = call.caller.account;
    let Some(raw) = parse_submission_id(&call.resolve_id(id).unwrap_or_else(|| id.to_string())) else {
        return Err(SetError::not_found());
    };
    call.shared
        .ctx
        .db
        .run("jmap_submission_destroy", move |txn| async move {
            jmap::delete_submission(&txn, account, &raw)?;
            Ok::<_, StorageError>(())
        })
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))
}

/// RFC 8621 §7.5: the arguments of the implicit Email/set after successful
/// submissions, `None` when the onSuccess arguments name none of them.
fn on_success_email_set(
    call: &Call<'_>,
    update_email: BTreeMap<String, Map<String, Value>>,
    destroy_email: Vec<String>,
    succeeded: &BTreeMap<String, String>,
) -> Option<Map<String, Value>> {
    let mut update = Map::new();
    for (key, patch) in update_email {
        if let Some(email) = succeeded.get(&key) {
            update.insert(email.clone(), Value::Object(patch));
        }
    }
    let destroy: Vec<Value> = destroy_email
        .iter()
        .filter_map(|k| succeeded.get(k))
        .map(|e| Value::String(e.clone()))
        .collect();
    if update.is_empty() && destroy.is_empty() {
        return None;
    }
    let mut a = Map::new();
    a.insert("accountId".into(), Value::String(call.account_id()));
    if !update.is_empty() {
        a.insert("update".into(), Value::Object(update));
    }
    if !destroy.is_empty() {
        a.insert("destroy".into(), Value::Array(destroy));
    }
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcc_is_stripped_with_its_folds() {
        let raw = b"From: a@x\r\nBcc: hidden@y,\r\n other@z\r\nTo: b@y\r\n\r\nBcc: stays in the body\r\n";
        let out = strip_bcc(raw);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "From: a@x\r\nTo: b@y\r\n\r\nBcc: stays in the body\r\n"
        );
    }

    #[test]
    fn a_submission_create_needs_an_identity_and_an_email() {
        crate::jmap::wire::object::assert_required::<SubmissionCreate>(
            serde_json::json!({"identityId": "i0", "emailId": "e1_1"}),
        );
    }

    #[test]
    fn submission_ids_round_trip() {
        let id = new_id();
        assert_eq!(parse_submission_id(&submission_id(&id)), Some(id));
        assert_eq!(parse_submission_id("Sxyz"), None);
    }
}
