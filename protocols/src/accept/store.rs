//! The store call: what happens to a message once its body is read — the
//! Received header, the one-time parse into the stored summary, the body
//! write, and one delivery (with its own acceptance id) per recipient:
//! local ones through their shard actors, remote ones into the outbound
//! queue. Each recipient's [`Outcome`] is `Stored` only for what is
//! durable.

use bytes::Bytes;
use meshmail_actors::delivery::{DeliveryError, DeliveryRequest, deliver};
use meshmail_actors::faults::{self, Fault};
use meshmail_actors::node::NodeCtx;
use meshmail_storage::blob::{self, PreparedBody};
use meshmail_storage::model::outbound::{self, DsnParams, OutboundItem};
use meshmail_storage::model::{id_to_string, new_id, now_ms, secrets};
use meshmail_storage::{StorageError, Txn};

use super::routing::SRS_SECRET;
use super::{Accepted, Acceptor, EnvelopeParams, Outcome, Recipient, Refusal, srs};
use crate::envelope::{Mailbox, RcptDsn};
use crate::ingest::{Ingested, ingest};
use crate::summary::Summary;

fn received_header(acceptor: &Acceptor<'_>, m: &Accepted, id: &str) -> String {
    let with = match (m.lmtp, m.tls, m.authenticated.is_some()) {
        (true, _, _) => "LMTP",
        (false, true, true) => "ESMTPSA",
        (false, false, true) => "ESMTPA",
        (false, true, false) => "ESMTPS",
        (false, false, false) => "ESMTP",
    };
    let date = mail_parser::DateTime::from_timestamp((now_ms() / 1000) as i64).to_rfc822();
    let for_clause = match m.recipients.as_slice() {
        [Recipient::Local { address, .. }] | [Recipient::Remote { address, .. }] => format!("\r\n\tfor <{address}>"),
        _ => String::new(),
    };
    format!(
        "Received: from {} ({})\r\n\tby {} (meshmail) with {with} id {id}{for_clause};\r\n\t{date}\r\n",
        sanitize(&m.helo),
        m.peer.ip(),
        acceptor.hostname,
    )
}

/// HELO names end up in a header: keep them to printable ASCII.
fn sanitize(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_graphic()).take(255).collect()
}

/// Stores the message for every recipient; one [`Outcome`] per recipient,
/// in the order of `m.recipients`.
pub async fn accept_message(acceptor: Acceptor<'_>, m: Accepted, body: Vec<u8>) -> Vec<Outcome> {
    if acceptor.sink {
        return m
            .recipients
            .iter()
            .map(|_| Outcome::Stored { id: "sink".into() })
            .collect();
    }
    let ids: Vec<[u8; 16]> = m.recipients.iter().map(|_| new_id()).collect();
    let mut raw = received_header(&acceptor, &m, &id_to_string(&ids[0])).into_bytes();
    if let Some(h) = &m.auth_results {
        raw.extend_from_slice(h.as_bytes());
    }
    raw.extend_from_slice(&body);
    drop(body);
    let fault = faults::requested_fault(&raw);
    let raw = Bytes::from(raw);
    let ctx = acceptor.ctx;
    let Ingested {
        body: mut prepared,
        summary,
    } = match ingest(ctx, raw.clone()).await {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "could not store a message body");
            let full = matches!(e, StorageError::Unwritable { full: true, .. });
            let refusal = if full { Refusal::StorageFull } else { Refusal::Temporary };
            return m.recipients.iter().map(|_| Outcome::Refused(refusal.clone())).collect();
        }
    };
    let sender = m.from.as_ref().map(Mailbox::to_string).unwrap_or_default();
    let mut queue_envelope = m.envelope.clone();
    queue_envelope.tls_optional = tls_required_no(&raw);
    let copy = Copy {
        raw: &raw,
        summary: &summary,
        fault,
        sender: &sender,
        queue_envelope: &queue_envelope,
    };
    let mut outcomes = Vec::with_capacity(m.recipients.len());
    for (i, (rcpt, id)) in m.recipients.iter().zip(ids).enumerate() {
        let outcome = deliver_one(acceptor, &m, &copy, (i, rcpt, id), &mut prepared).await;
        if outcome.is_stored()
            && !m.junk
            && let Recipient::Local { account, address } = rcpt
            && !m.learned.vacation_off.contains(account)
        {
            super::vacation::after_delivery(acceptor, *account, address, &sender, &raw).await;
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// One recipient's copy: a local account's active Sieve script decides
/// where it goes (`accept::sieve`); without one, or for remote
/// recipients, the usual delivery. Mail that DMARC quarantined goes to
/// Junk whatever a script says: the script is the user's sorting, not a
/// way around the domain owner's policy.
async fn deliver_one(
    acceptor: Acceptor<'_>,
    m: &Accepted,
    copy: &Copy<'_>,
    (i, rcpt, id): (usize, &Recipient, [u8; 16]),
    prepared: &mut PreparedBody,
) -> Outcome {
    if let Recipient::Local { account, address } = rcpt
        && !m.junk
        && !m.learned.sieve_off.contains(account)
    {
        // The script's store reads are bounded by the delivery's own
        // deadline: with the store down they would otherwise wait out the
        // whole retry budget (20 s on FoundationDB) before the delivery
        // even began to wait for its commit. A store that cannot answer
        // them cannot keep the message either: 4xx at once.
        let decided = tokio::time::timeout(
            acceptor.delivery_timeout,
            super::sieve::decide(acceptor, *account, address, copy.sender, copy.raw),
        )
        .await;
        match decided {
            Err(_) => {
                tracing::warn!(account, "sieve: the store did not answer within the delivery timeout");
                metrics::counter!("meshmail_sieve_errors_total", "kind" => "timeout").increment(1);
                return Outcome::Refused(Refusal::Temporary);
            }
            Ok(Some(d)) => {
                return super::sieve_actions::carry_out(acceptor, m, copy, (i, rcpt, id), prepared, d).await;
            }
            Ok(None) => {}
        }
    }
    outcome_of(id, store_one(acceptor, m, copy, (i, rcpt, id), prepared, None).await)
}

/// What every recipient's copy of one message shares.
pub(super) struct Copy<'a> {
    pub raw: &'a Bytes,
    pub summary: &'a Summary,
    pub fault: Option<Fault>,
    /// The envelope sender, `""` for the null reverse path.
    pub sender: &'a str,
    pub queue_envelope: &'a EnvelopeParams,
}

/// Where a local copy goes when a Sieve script chose: the mailbox and the
/// flags (imap4flags) instead of INBOX without flags.
pub(super) struct Placement {
    pub mailbox: String,
    pub flags: Vec<String>,
}

/// Delivers (local) or queues (remote) the copy of the `i`th recipient
/// under acceptance id `id`. A body swept between prepare and commit is
/// written again (rare), at most twice; `prepared` is the new one after.
pub(super) async fn store_one(
    acceptor: Acceptor<'_>,
    m: &Accepted,
    copy: &Copy<'_>,
    (i, rcpt, id): (usize, &Recipient, [u8; 16]),
    prepared: &mut PreparedBody,
    placement: Option<&Placement>,
) -> Result<(), DeliveryError> {
    let ctx = acceptor.ctx;
    let mut outcome = Err(DeliveryError::BodySwept);
    for _ in 0..3 {
        outcome = match rcpt {
            Recipient::Local { account, address } => {
                let req = DeliveryRequest {
                    acceptance_id: id,
                    account: *account,
                    recipient: address.clone(),
                    mailbox: match placement {
                        Some(p) => p.mailbox.clone(),
                        None if m.junk => "Junk".into(),
                        None => "INBOX".into(),
                    },
                    body: prepared.clone(),
                    flags: placement.map(|p| p.flags.clone()).unwrap_or_default(),
                    internal_date_ms: now_ms() as i64,
                    summary: copy.summary.clone(),
                    fault: copy.fault,
                    from_quarantine: None,
                    deadline: meshmail_actors::delivery::deadline_in(acceptor.delivery_timeout),
                };
                deliver(ctx, req).await.map(|_| ())
            }
            Recipient::Remote { address, forwarded_by } => {
                let sender = match forwarded_by {
                    Some(domain) if !copy.sender.is_empty() => srs_sender(ctx, copy.sender, domain).await?,
                    _ => copy.sender.to_string(),
                };
                let rcpt_dsn = m.envelope.rcpt_dsn.get(i).cloned().unwrap_or_default();
                queue_remote(ctx, id, &sender, address, prepared, copy.queue_envelope, rcpt_dsn).await
            }
        };
        if outcome != Err(DeliveryError::BodySwept) {
            break;
        }
        *prepared = ctx
            .blobs
            .prepare(&ctx.db, copy.raw.clone())
            .await
            .map_err(DeliveryError::from)?;
    }
    outcome
}

/// The typed answer for one recipient's delivery.
pub(super) fn outcome_of(id: [u8; 16], delivered: Result<(), DeliveryError>) -> Outcome {
    let refusal = match delivered {
        Ok(()) => return Outcome::Stored { id: id_to_string(&id) },
        Err(DeliveryError::Permanent(why)) => Refusal::Permanent(why),
        Err(DeliveryError::OverQuota) => Refusal::OverQuota,
        Err(DeliveryError::StorageFull(why)) => {
            tracing::warn!(error = %why, "delivery failed: the store's disk is full (storage full)");
            Refusal::StorageFull
        }
        Err(e) => {
            tracing::warn!(error = %e, "delivery failed (temporary)");
            Refusal::Temporary
        }
    };
    Outcome::Refused(refusal)
}

/// The envelope sender of a forwarded copy (SRS0 under our domain), so the
/// remote MX's SPF check sees a domain that allows us.
async fn srs_sender(ctx: &NodeCtx, sender: &str, domain: &str) -> Result<String, DeliveryError> {
    let key = ctx
        .db
        .run("srs_key", |txn| async move {
            secrets::get_or_create(&txn, SRS_SECRET).await
        })
        .await
        .map_err(DeliveryError::from)?;
    metrics::counter!("meshmail_smtp_srs_rewrites_total").increment(1);
    Ok(srs::forward(&key, sender, domain, srs::today()))
}

/// Puts the mail for one remote recipient in the outbound queue. Public
/// for the queue runner, which queues DSNs to remote senders this way.
pub async fn queue_remote(
    ctx: &NodeCtx,
    id: [u8; 16],
    sender: &str,
    to: &str,
    body: &PreparedBody,
    envelope: &EnvelopeParams,
    rcpt_dsn: RcptDsn,
) -> Result<(), DeliveryError> {
    let item = OutboundItem {
        id: new_id(),
        acceptance_id: id,
        sender: sender.to_string(),
        recipient: to.to_string(),
        body: body.body.clone(),
        queued_ms: now_ms(),
        attempts: 0,
        last_error: None,
        shard: outbound::outbound_shard(sender, &body.body.hash, ctx.shard_count),
        next_attempt_ms: 0,
        last_attempt_ms: None,
        dsn: DsnParams {
            ret: envelope.ret,
            envid: envelope.envid.clone(),
            notify: rcpt_dsn.notify,
            orcpt: rcpt_dsn.orcpt,
        },
        smtputf8: envelope.smtputf8,
        eight_bit: envelope.eight_bit,
        require_tls: envelope.require_tls,
        // RFC 8689 §5: REQUIRETLS wins over the header.
        tls_optional: envelope.tls_optional && !envelope.require_tls,
        delay_warned: false,
        claim: None,
        bounce_requested: None,
        dsn_id: None,
    };
    let body = body.clone();
    ctx.db
        .run("outbound_enqueue", move |txn: Txn| {
            let (item, body) = (item.clone(), body.clone());
            async move {
                if meshmail_storage::model::ledger::get(&txn, &item.acceptance_id)
                    .await?
                    .is_some()
                {
                    return Ok(()); // An earlier attempt committed.
                }
                blob::reference(&txn, &body).await?;
                outbound::enqueue(&txn, &item)
            }
        })
        .await
        .map_err(DeliveryError::from)
}

/// Whether the message's header says `TLS-Required: No` (RFC 8689 §5):
/// the sender prefers delivery over TLS policies (MTA-STS, a failed
/// STARTTLS). Only the header section is read.
pub fn tls_required_no(raw: &[u8]) -> bool {
    let mut lines = raw.split(|&c| c == b'\n').peekable();
    while let Some(line) = lines.next() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return false;
        }
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        if !line[..colon].trim_ascii().eq_ignore_ascii_case(b"TLS-Required") {
            continue;
        }
        // The value, unfolded.
        let mut value = line[colon + 1..].to_vec();
        while let Some(next) = lines
            .peek()
            .filter(|l| l.first().is_some_and(|c| *c == b' ' || *c == b'\t'))
        {
            value.extend_from_slice(next.strip_suffix(b"\r").unwrap_or(next));
            lines.next();
        }
        return value.trim_ascii().eq_ignore_ascii_case(b"No");
    }
    false
}
