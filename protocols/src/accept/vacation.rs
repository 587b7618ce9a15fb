//! Vacation replies (JMAP VacationResponse, RFC 8621 §8, sent by the rules
//! of RFC 5230 §4 and RFC 3834): when a message is delivered to an account
//! whose vacation response is on, the sender gets one automatic reply per
//! period, unless the message is itself automatic, from a list, or not
//! addressed to one of the account's addresses. The reply goes out from the
//! null reverse path (nothing answers it) through the same acceptance path
//! as any message: local senders through their shard actors, remote ones
//! into the outbound queue.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use mail_builder::MessageBuilder;
use mail_parser::{HeaderName, Message, MessageParser};
use meshmail_storage::StorageError;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::{jmap, new_id, now_ms};

use super::{Accepted, Acceptor, Outcome, RcptOutcome, accept_message, resolve_recipient, sender_allowed};
use crate::envelope::Mailbox;

/// One reply per sender per this many days for the same response (RFC
/// 5230's default `:days`).
pub const REPLY_PERIOD_DAYS: u64 = 7;
/// The whole decision and hand-off; a slow store delays one SMTP reply by
/// at most this (the delivery itself is already durable).
pub const VACATION_TIMEOUT_S: u64 = 10;
/// Recipient addresses of a message examined for one of the account's own.
const RECIPIENTS_CHECKED_MAX: usize = 50;
/// Subjects longer than this are cut in the reply's default subject.
const SUBJECT_CHARS_MAX: usize = 200;

/// Why no reply was sent (metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    Off,
    NullSender,
    AutoSubmitted,
    List,
    NotAddressed,
    AlreadyAnswered,
    SenderNotDeliverable,
}

impl Skip {
    fn label(self) -> &'static str {
        match self {
            Skip::Off => "off",
            Skip::NullSender => "null_sender",
            Skip::AutoSubmitted => "auto_submitted",
            Skip::List => "list",
            Skip::NotAddressed => "not_addressed",
            Skip::AlreadyAnswered => "already_answered",
            Skip::SenderNotDeliverable => "sender_not_deliverable",
        }
    }
}

/// After a delivery of `raw` from `sender` to the account: answers it if
/// the account's vacation response says so. Never fails the delivery.
pub async fn after_delivery(acceptor: Acceptor<'_>, account: AccountId, account_email: &str, sender: &str, raw: &[u8]) {
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(VACATION_TIMEOUT_S),
        answer(acceptor, account, account_email, sender, raw),
    )
    .await;
    let label = match outcome {
        Ok(Ok(None)) => "sent",
        Ok(Ok(Some(skip))) => skip.label(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, account, "vacation reply failed");
            "error"
        }
        Err(_) => {
            tracing::warn!(account, "vacation reply timed out");
            "timeout"
        }
    };
    if label != "off" {
        metrics::counter!("meshmail_vacation_replies_total", "result" => label).increment(1);
        metrics::histogram!("meshmail_vacation_seconds").record(started.elapsed().as_secs_f64());
    }
}

/// None when a reply was handed on, else why not.
async fn answer(
    acceptor: Acceptor<'_>,
    account: AccountId,
    account_email: &str,
    sender: &str,
    raw: &[u8],
) -> Result<Option<Skip>, StorageError> {
    if sender.is_empty() {
        return Ok(Some(Skip::NullSender));
    }
    let ctx = acceptor.ctx;
    let vacation = ctx
        .db
        .read("vacation_get", move |txn| async move {
            jmap::get_vacation(&txn, account).await
        })
        .await?;
    let now = now_ms();
    if !in_period(&vacation, now) {
        return Ok(Some(Skip::Off));
    }
    let Some(msg) = MessageParser::default().parse_headers(raw) else {
        return Ok(Some(Skip::NotAddressed));
    };
    if let Some(skip) = automatic(&msg, sender) {
        return Ok(Some(skip));
    }
    if !addressed_to_account(acceptor, &msg, account_email).await? {
        return Ok(Some(Skip::NotAddressed));
    }
    let Ok(to) = Mailbox::parse(sender) else {
        return Ok(Some(Skip::SenderNotDeliverable));
    };
    let recipients = match resolve_recipient(ctx, &to.normalized(), true, acceptor.routing).await? {
        RcptOutcome::Accept(r) => r,
        _ => return Ok(Some(Skip::SenderNotDeliverable)),
    };
    let (s, version) = (sender.to_string(), vacation.version);
    let claimed =
        ctx.db
            .run("vacation_claim", move |txn| {
                let s = s.clone();
                async move {
                    jmap::claim_vacation_reply(&txn, account, &s, version, now, REPLY_PERIOD_DAYS * 86_400_000).await
                }
            })
            .await?;
    if !claimed {
        return Ok(Some(Skip::AlreadyAnswered));
    }
    let reply = build_reply(acceptor.hostname, &vacation, &msg, account_email, sender, now);
    send(acceptor, recipients, reply).await;
    Ok(None)
}

/// Hands a reply to acceptance from the null reverse path.
async fn send(acceptor: Acceptor<'_>, recipients: Vec<super::Recipient>, reply: Vec<u8>) {
    let accepted = Accepted {
        from: None,
        recipients,
        helo: acceptor.hostname.to_string(),
        peer: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        tls: true,
        authenticated: None,
        lmtp: false,
        auth_results: None,
        junk: false,
        envelope: Default::default(),
        learned: Default::default(),
    };
    // The reply's own delivery has a null sender, so it never recurses
    // further than this one level.
    let outcomes = Box::pin(accept_message(acceptor, accepted, reply)).await;
    if let Some(Outcome::Refused(why)) = outcomes.iter().find(|o| !o.is_stored()) {
        tracing::warn!(refusal = %why, "vacation reply not accepted");
    }
}

/// A Sieve `vacation` action (RFC 5230): the same rules as the JMAP
/// vacation response (no answer to automatic or list mail, to the null
/// sender, or twice in the period for the same `:handle`), with the
/// script's text. Never fails the delivery.
pub async fn sieve_reply(
    acceptor: Acceptor<'_>,
    account: AccountId,
    account_email: &str,
    sender: &str,
    raw: &[u8],
    reply: &crate::sieve::VacationReply,
) {
    let r = tokio::time::timeout(
        Duration::from_secs(VACATION_TIMEOUT_S),
        sieve_answer(acceptor, account, account_email, sender, raw, reply),
    )
    .await;
    let label = match r {
        Ok(Ok(None)) => "sent",
        Ok(Ok(Some(skip))) => skip.label(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, account, "sieve vacation reply failed");
            "error"
        }
        Err(_) => "timeout",
    };
    metrics::counter!("meshmail_vacation_replies_total", "result" => label).increment(1);
}

async fn sieve_answer(
    acceptor: Acceptor<'_>,
    account: AccountId,
    account_email: &str,
    sender: &str,
    raw: &[u8],
    reply: &crate::sieve::VacationReply,
) -> Result<Option<Skip>, StorageError> {
    if sender.is_empty() {
        return Ok(Some(Skip::NullSender));
    }
    let Some(msg) = MessageParser::default().parse_headers(raw) else {
        return Ok(Some(Skip::NotAddressed));
    };
    if let Some(skip) = automatic(&msg, sender) {
        return Ok(Some(skip));
    }
    let Ok(to) = Mailbox::parse(&reply.to) else {
        return Ok(Some(Skip::SenderNotDeliverable));
    };
    let ctx = acceptor.ctx;
    let recipients = match resolve_recipient(ctx, &to.normalized(), true, acceptor.routing).await? {
        RcptOutcome::Accept(r) => r,
        _ => return Ok(Some(Skip::SenderNotDeliverable)),
    };
    // The handle names "the same response" (RFC 5230 §4.2): a claim per
    // sender and handle, in the store the JMAP response uses.
    let version = handle_version(&reply.handle);
    let (s, now, period_ms) = (reply.to.clone(), now_ms(), reply.period_s.max(1) * 1000);
    let claimed = ctx
        .db
        .run("sieve_vacation_claim", move |txn| {
            let s = s.clone();
            async move { jmap::claim_vacation_reply(&txn, account, &s, version, now, period_ms).await }
        })
        .await?;
    if !claimed {
        return Ok(Some(Skip::AlreadyAnswered));
    }
    let v = jmap::Vacation {
        is_enabled: true,
        subject: reply.subject.clone(),
        text_body: Some(reply.reason.clone()),
        ..Default::default()
    };
    // RFC 5230 §4.4: `:from` only if the account may send as it (own
    // address, subaddress, alias), else the account's own address.
    let from = match reply.from.as_deref().and_then(|f| Mailbox::parse(f).ok()) {
        Some(f) if sender_allowed(ctx, account_email, &f.to_string(), acceptor.routing).await? => f.to_string(),
        _ => account_email.to_string(),
    };
    let from = from.as_str();
    send(
        acceptor,
        recipients,
        build_reply(acceptor.hostname, &v, &msg, from, &reply.to, now),
    )
    .await;
    Ok(None)
}

/// A stable number for a handle (the claim record's version field). High
/// bit set so it never equals a JMAP response's version, which counts up
/// from 0.
fn handle_version(handle: &str) -> u64 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(handle.as_bytes());
    u64::from_be_bytes(d[..8].try_into().unwrap_or_default()) | (1 << 63)
}

/// Enabled, and now within [fromDate, toDate) when they are given.
fn in_period(v: &jmap::Vacation, now_ms: u64) -> bool {
    let now_s = (now_ms / 1000) as i64;
    let at = |d: &Option<String>| {
        d.as_deref()
            .and_then(mail_parser::DateTime::parse_rfc3339)
            .map(|t| t.to_timestamp())
    };
    v.is_enabled && at(&v.from_date).is_none_or(|f| now_s >= f) && at(&v.to_date).is_none_or(|t| now_s < t)
}

/// Automatic or list mail, which must not be answered (RFC 3834 §2, RFC
/// 5230 §4.6): Auto-Submitted other than "no", Precedence bulk/list/junk,
/// any List-* header, and the usual robot senders.
fn automatic(msg: &Message<'_>, sender: &str) -> Option<Skip> {
    let text = |name: &str| {
        msg.header_raw(HeaderName::parse(name.to_string())?)
            .map(|v| v.trim().to_ascii_lowercase())
    };
    if let Some(a) = text("Auto-Submitted")
        && a.split(';').next().map(str::trim) != Some("no")
    {
        return Some(Skip::AutoSubmitted);
    }
    if text("Precedence").is_some_and(|p| ["bulk", "list", "junk"].contains(&p.as_str())) {
        return Some(Skip::List);
    }
    let list_header = msg.headers().iter().any(|h| {
        let n = h.name.as_str().to_ascii_lowercase();
        n.starts_with("list-")
    });
    if list_header {
        return Some(Skip::List);
    }
    let local = sender.rsplit_once('@').map_or(sender, |(l, _)| l).to_ascii_lowercase();
    if local == "mailer-daemon" || local.starts_with("owner-") || local.ends_with("-request") {
        return Some(Skip::AutoSubmitted);
    }
    None
}

/// One of the account's addresses (its own, a subaddress, an alias that
/// delivers only to it) is in To, Cc, Bcc, Resent-To or Resent-Cc: mail
/// that reached the account only as a blind or list copy is not answered.
async fn addressed_to_account(
    acceptor: Acceptor<'_>,
    msg: &Message<'_>,
    account_email: &str,
) -> Result<bool, StorageError> {
    let mut addresses = Vec::new();
    for name in [
        HeaderName::To,
        HeaderName::Cc,
        HeaderName::Bcc,
        HeaderName::ResentTo,
        HeaderName::ResentCc,
    ] {
        for v in msg.header_values(name) {
            if let Some(list) = v.as_address() {
                addresses.extend(list.iter().filter_map(|a| a.address()).map(str::to_string));
            }
        }
    }
    for a in addresses.iter().take(RECIPIENTS_CHECKED_MAX) {
        if sender_allowed(acceptor.ctx, account_email, a, acceptor.routing).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The reply: from the account, to the sender, threaded under the message.
fn build_reply(
    hostname: &str,
    v: &jmap::Vacation,
    msg: &Message<'_>,
    account_email: &str,
    sender: &str,
    now_ms: u64,
) -> Vec<u8> {
    let subject = match &v.subject {
        Some(s) if !s.trim().is_empty() => s.clone(),
        _ => {
            let original: String = msg
                .subject()
                .unwrap_or_default()
                .chars()
                .take(SUBJECT_CHARS_MAX)
                .collect();
            format!("Auto: {original}")
        }
    };
    let mut b = MessageBuilder::new()
        .from(account_email.to_string())
        .to(sender.to_string())
        .subject(subject)
        .date((now_ms / 1000) as i64)
        .message_id(format!(
            "{}@{hostname}",
            meshmail_storage::model::id_to_string(&new_id())
        ))
        .header("Auto-Submitted", mail_builder::headers::raw::Raw::new("auto-replied"));
    if let Some(id) = msg.message_id() {
        let mut refs: Vec<String> = msg
            .references()
            .as_text_list()
            .map(|l| l.iter().map(|s| s.to_string()).collect())
            .or_else(|| msg.references().as_text().map(|s| vec![s.to_string()]))
            .unwrap_or_default();
        refs.push(id.to_string());
        b = b.in_reply_to(id.to_string()).references(refs);
    }
    let text = v.text_body.clone().filter(|t| !t.is_empty());
    match (text, &v.html_body) {
        (Some(t), Some(h)) => b = b.text_body(t).html_body(h.clone()),
        (Some(t), None) => b = b.text_body(t),
        (None, Some(h)) => b = b.html_body(h.clone()),
        (None, None) => b = b.text_body("I am away and will read your message later."),
    }
    b.write_to_vec().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> Message<'_> {
        MessageParser::default().parse_headers(raw.as_bytes()).unwrap()
    }

    #[test]
    fn automatic_and_list_mail_is_not_answered() {
        let plain = "From: a@x.test\r\nTo: b@y.test\r\nSubject: hi\r\n\r\nbody\r\n";
        assert_eq!(automatic(&parsed(plain), "a@x.test"), None);
        let no = "Auto-Submitted: no\r\nFrom: a@x.test\r\n\r\nbody\r\n";
        assert_eq!(automatic(&parsed(no), "a@x.test"), None);
        for (raw, want) in [
            (
                "Auto-Submitted: auto-replied\r\nFrom: a@x.test\r\n\r\nb\r\n",
                Skip::AutoSubmitted,
            ),
            (
                "Auto-Submitted: auto-generated; x=y\r\nFrom: a@x.test\r\n\r\nb\r\n",
                Skip::AutoSubmitted,
            ),
            ("Precedence: Bulk\r\nFrom: a@x.test\r\n\r\nb\r\n", Skip::List),
            ("List-Id: <l.x.test>\r\nFrom: a@x.test\r\n\r\nb\r\n", Skip::List),
        ] {
            assert_eq!(automatic(&parsed(raw), "a@x.test"), Some(want), "{raw}");
        }
        assert_eq!(
            automatic(&parsed(plain), "owner-list@x.test"),
            Some(Skip::AutoSubmitted)
        );
        assert_eq!(
            automatic(&parsed(plain), "MAILER-DAEMON@x.test"),
            Some(Skip::AutoSubmitted)
        );
    }

    #[test]
    fn the_period_is_from_date_to_date() {
        let mut v = jmap::Vacation {
            is_enabled: true,
            ..Default::default()
        };
        let now = 1_700_000_000_000;
        assert!(in_period(&v, now));
        v.from_date = Some("2030-01-01T00:00:00Z".into());
        assert!(!in_period(&v, now));
        v.from_date = Some("2020-01-01T00:00:00Z".into());
        v.to_date = Some("2021-01-01T00:00:00Z".into());
        assert!(!in_period(&v, now));
        v.to_date = None;
        v.is_enabled = false;
        assert!(!in_period(&v, now));
    }

    #[test]
    fn the_reply_is_threaded_and_marked_automatic() {
        let original = parsed(
            "From: a@x.test\r\nTo: b@y.test\r\nSubject: Lunch\r\nMessage-ID: <m1@x.test>\r\nReferences: <m0@x.test>\r\n\r\nbody\r\n",
        );
        let v = jmap::Vacation {
            is_enabled: true,
            text_body: Some("Away until Monday.".into()),
            ..Default::default()
        };
        let raw = build_reply("mx.y.test", &v, &original, "b@y.test", "a@x.test", 1_700_000_000_000);
        let text = String::from_utf8(raw).unwrap();
        assert!(text.contains("Auto-Submitted: auto-replied\r\n"), "{text}");
        assert!(text.contains("In-Reply-To: <m1@x.test>"), "{text}");
        assert!(text.contains("References: <m0@x.test> <m1@x.test>"), "{text}");
        assert!(text.contains("Subject: Auto: Lunch"), "{text}");
        assert!(text.contains("Away until Monday."), "{text}");
    }
}
