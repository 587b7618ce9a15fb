//! What a Sieve run's actions do to one recipient's copy (RFC 5228 §4):
//! keep and fileinto deliver through the shard actor (with the
//! imap4flags flags, the editheader-edited text), discard stores nothing,
//! reject refuses the recipient (550 5.7.1), redirect hands a copy back
//! to acceptance for the new address, vacation answers once per period.
//!
//! Whatever cannot be done (a missing mailbox without `:create`, a
//! redirect that loops or cannot be routed) falls back to INBOX: a
//! script never loses a message (RFC 5228 §2.10.6).

use bytes::Bytes;
use meshmail_actors::delivery::DeliveryError;
use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::op_error::OpError;
use meshmail_storage::blob::PreparedBody;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::{mailboxes, new_id};

use super::sieve::Decision;
use super::store::{Copy, Placement, outcome_of, store_one};
use super::{Accepted, Acceptor, Outcome, Recipient, Refusal};
use crate::ingest::{Ingested, ingest};
use crate::sieve::{Action, VacationReply};

/// The header a redirected copy carries: a copy that comes back to the
/// same account with it is kept, not redirected again (loop protection
/// beyond the run's own redirect limit).
pub const LOOP_HEADER: &str = "X-Meshmail-Sieve-Loop";
/// Sieve redirects one message may have gone through, all accounts
/// together.
const REDIRECT_HOPS_MAX: usize = 8;
/// Characters of a reject reason put in the SMTP reply.
const REASON_CHARS_MAX: usize = 200;

/// Carries out `d` for the copy of recipient `i`; one [`Outcome`] for it,
/// `Stored` under `id` once every copy it asked for is durable.
pub(super) async fn carry_out(
    acceptor: Acceptor<'_>,
    m: &Accepted,
    copy: &Copy<'_>,
    (i, rcpt, id): (usize, &Recipient, [u8; 16]),
    prepared: &mut PreparedBody,
    d: Decision,
) -> Outcome {
    let Recipient::Local { account, address } = rcpt else {
        return outcome_of(id, store_one(acceptor, m, copy, (i, rcpt, id), prepared, None).await);
    };
    let account = *account;
    if let Some(reason) = d.actions.iter().find_map(|a| match a {
        Action::Reject { reason, .. } => Some(reason.clone()),
        _ => None,
    }) {
        return Outcome::Refused(Refusal::Rejected(reply_text(&reason)));
    }
    // The edited message (editheader) is what every copy stores.
    let edited = match &d.edited {
        Some(text) => match ingest(acceptor.ctx, Bytes::from(text.clone())).await {
            Ok(i) => Some((Bytes::from(text.clone()), i)),
            Err(e) => return outcome_of(id, Err(DeliveryError::from(e))),
        },
        None => None,
    };
    let (raw, mut body, summary) = match edited {
        Some((raw, Ingested { body, summary })) => (raw, body, summary),
        None => (copy.raw.clone(), prepared.clone(), copy.summary.clone()),
    };
    let local = Copy {
        raw: &raw,
        summary: &summary,
        fault: copy.fault,
        sender: copy.sender,
        queue_envelope: copy.queue_envelope,
    };
    let mut placements = Vec::new();
    for a in &d.actions {
        match a {
            Action::Keep { flags } => placements.push(inbox(flags)),
            Action::FileInto { mailbox, flags, create } => {
                placements.push(file_into(acceptor, account, &d, mailbox, flags, *create).await)
            }
            Action::Redirect { address: to } => {
                if !redirect(acceptor, m, account, address, to, &raw).await {
                    placements.push(inbox(&[]));
                }
            }
            Action::Vacation(reply) => vacation(acceptor, account, address, copy.sender, &raw, reply).await,
            Action::Discard | Action::Reject { .. } => {}
        }
    }
    // fileinto the same mailbox twice, or keep and fileinto INBOX: one
    // copy (RFC 5228 §2.10.3), the first one's flags.
    let mut seen = std::collections::HashSet::new();
    placements.retain(|p| seen.insert(p.mailbox.clone()));
    let mut result = Ok(());
    for (n, p) in placements.iter().enumerate() {
        // The ledger makes an acceptance id idempotent: each extra copy
        // of this recipient needs its own.
        let copy_id = if n == 0 { id } else { new_id() };
        result = store_one(acceptor, m, &local, (i, rcpt, copy_id), &mut body, Some(p)).await;
        if result.is_err() {
            break;
        }
    }
    if result.is_ok()
        && let Err(e) = super::sieve::record_duplicates(acceptor, account, d.duplicates).await
    {
        // The copy is durable; a lost mark only means a later duplicate
        // is not recognised as one.
        tracing::warn!(account, error = %e, "sieve: could not record duplicate ids");
    }
    outcome_of(id, result)
}

/// The script's reason as one line of an SMTP reply: printable ASCII
/// only (a CR LF in it would end the reply early), bounded.
fn reply_text(reason: &str) -> String {
    let text: String = reason
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { ' ' })
        .take(REASON_CHARS_MAX)
        .collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        "Rejected by the recipient's filter".into()
    } else {
        text
    }
}

fn inbox(flags: &[String]) -> Placement {
    Placement {
        mailbox: "INBOX".into(),
        flags: flags.to_vec(),
    }
}

/// The placement for `fileinto`: the mailbox if it exists or `:create`
/// made it, else INBOX with the reason logged (RFC 5228 §4.1).
async fn file_into(
    acceptor: Acceptor<'_>,
    account: AccountId,
    d: &Decision,
    mailbox: &str,
    flags: &[String],
    create: bool,
) -> Placement {
    let name = mailboxes::canonical_name(mailbox);
    if d.mailboxes.contains(&name) {
        return Placement {
            mailbox: name,
            flags: flags.to_vec(),
        };
    }
    if !create {
        tracing::warn!(account, mailbox = %name, "sieve fileinto: no such mailbox; kept in INBOX");
        metrics::counter!("meshmail_sieve_errors_total", "kind" => "mailbox").increment(1);
        return inbox(flags);
    }
    // The same path as IMAP CREATE and JMAP Mailbox/set: the shard actor.
    let op = MailboxOp::Create {
        name: name.clone(),
        special_use: None,
    };
    match mailbox_ops::request(acceptor.ctx, account, op).await {
        Ok(_) | Err(OpError::AlreadyExists(_)) => Placement {
            mailbox: name,
            flags: flags.to_vec(),
        },
        Err(e) => {
            tracing::warn!(account, mailbox = %name, error = %e, "sieve fileinto :create failed; kept in INBOX");
            metrics::counter!("meshmail_sieve_errors_total", "kind" => "mailbox").increment(1);
            inbox(flags)
        }
    }
}

/// Whether the header section already has our loop header for `address`,
/// or [`REDIRECT_HOPS_MAX`] of them for anyone: a chain through many
/// accounts (each seeing only its own mark) stays bounded too.
fn looped(raw: &[u8], address: &str) -> bool {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let prefix = format!("{LOOP_HEADER}:").to_ascii_lowercase();
    let needle = format!("{prefix} {address}");
    let header = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let marks: Vec<&str> = header.split("\r\n").filter(|l| l.starts_with(&prefix)).collect();
    marks.len() >= REDIRECT_HOPS_MAX || marks.iter().any(|l| l.trim_end() == needle)
}

/// Hands a copy for `to` back to acceptance (local or the outbound queue),
/// with the envelope sender kept (RFC 5228 §4.2). False when it was not
/// taken: the caller keeps the message instead.
async fn redirect(
    acceptor: Acceptor<'_>,
    m: &Accepted,
    account: AccountId,
    address: &str,
    to: &str,
    raw: &[u8],
) -> bool {
    let own = address.to_ascii_lowercase();
    if looped(raw, &own) {
        tracing::warn!(
            account,
            to,
            "sieve redirect: the message was already redirected by this account; kept"
        );
        metrics::counter!("meshmail_sieve_errors_total", "kind" => "loop").increment(1);
        return false;
    }
    let Ok(mailbox) = crate::envelope::Mailbox::parse(to) else {
        return false;
    };
    let recipients = match super::resolve_recipient(acceptor.ctx, &mailbox.normalized(), true, acceptor.routing).await {
        Ok(super::RcptOutcome::Accept(r)) => r,
        other => {
            tracing::warn!(account, to, answer = ?other.map(|_| ()), "sieve redirect: address not routable; kept");
            metrics::counter!("meshmail_sieve_errors_total", "kind" => "redirect").increment(1);
            return false;
        }
    };
    let mut text = format!("{LOOP_HEADER}: {own}\r\n").into_bytes();
    text.extend_from_slice(raw);
    let accepted = Accepted {
        from: m.from.clone(),
        recipients,
        helo: acceptor.hostname.to_string(),
        peer: m.peer,
        tls: m.tls,
        authenticated: None,
        lmtp: false,
        auth_results: None,
        junk: false,
        envelope: Default::default(),
        learned: Default::default(),
    };
    // Boxed: acceptance calls this, which calls acceptance again (one
    // level per redirect; the loop header ends a cycle).
    let outcomes = Box::pin(super::accept_message(acceptor, accepted, text)).await;
    let all = outcomes.iter().all(Outcome::is_stored);
    if !all {
        tracing::warn!(account, to, "sieve redirect: a copy was not accepted; kept");
        metrics::counter!("meshmail_sieve_errors_total", "kind" => "redirect").increment(1);
    }
    all
}

async fn vacation(
    acceptor: Acceptor<'_>,
    account: AccountId,
    address: &str,
    sender: &str,
    raw: &[u8],
    reply: &VacationReply,
) {
    super::vacation::sieve_reply(acceptor, account, address, sender, raw, reply).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_one_safe_line_and_loops_are_seen() {
        assert_eq!(reply_text("no\r\n250 ok"), "no 250 ok");
        assert_eq!(reply_text("\r\n"), "Rejected by the recipient's filter");
        assert_eq!(reply_text(&"x".repeat(500)).len(), REASON_CHARS_MAX);
        let raw = b"X-Meshmail-Sieve-Loop: a@x.test\r\nSubject: s\r\n\r\nX-Meshmail-Sieve-Loop: b@x.test\r\n";
        assert!(looped(raw, "a@x.test"));
        assert!(!looped(raw, "b@x.test"), "only the header section counts");
        let chain: String = (0..REDIRECT_HOPS_MAX)
            .map(|n| format!("{LOOP_HEADER}: u{n}@x.test\r\n"))
            .collect();
        assert!(
            looped(format!("{chain}\r\nbody").as_bytes(), "c@x.test"),
            "a long chain ends"
        );
    }
}
