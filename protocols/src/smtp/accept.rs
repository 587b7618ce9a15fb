//! What happens to a message once its body is read: the Received header,
//! the one-time parse into the stored summary, the body write, and one
//! delivery (with its own acceptance id) per recipient — local ones through
//! their shard actors, remote ones (submission) into the outbound queue.
//! The replies say 250 only for what is durable.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use meshmail_actors::delivery::{DeliveryError, DeliveryRequest, deliver};
use meshmail_actors::faults;
use meshmail_actors::node::NodeCtx;
use meshmail_storage::blob::{self, PreparedBody};
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::outbound::{self, DsnParams, OutboundItem};
use meshmail_storage::model::{directory, domains, id_to_string, jmap, new_id, now_ms, quota, secrets};
use meshmail_storage::{StorageError, Txn};

use super::address::Mailbox;
use super::command::{DsnRet, RcptDsn, ReversePath};
use super::rcpt_cache::{Cached, RcptCache};
use super::reply::Reply;
use super::routing::{self, Route, RoutingConfig, SRS_SECRET, Target};
use super::session::SmtpShared;
use super::srs;
use crate::ingest::{Ingested, ingest};

/// One final recipient of a message: the router's targets are exactly what
/// acceptance delivers (local) or queues (remote, `forwarded_by` the alias's
/// domain whose SRS sender the copy gets).
pub use super::routing::Target as Recipient;

pub struct Accepted {
    pub from: ReversePath,
    pub recipients: Vec<Recipient>,
    pub helo: String,
    pub peer: SocketAddr,
    pub tls: bool,
    pub authenticated: Option<String>,
    pub lmtp: bool,
    /// The `Authentication-Results` header of the MX checks, added below
    /// the Received header.
    pub auth_results: Option<String>,
    /// File into Junk instead of INBOX (DMARC quarantine).
    pub junk: bool,
    /// MAIL's and RCPT's parameters that outbound delivery honours
    /// (`Default` when there are none: JMAP submission, tests).
    pub envelope: EnvelopeParams,
    /// Local accounts known to have no vacation response on (read at RCPT,
    /// [`RcptCheck`]): no vacation lookup after their delivery. Others
    /// (empty: JMAP submission, vacation replies) are looked up.
    pub vacation_off: Vec<AccountId>,
}

/// What the outbound queue keeps of the SMTP envelope besides the addresses:
/// DSN parameters (RFC 3461), SMTPUTF8 and 8BITMIME (what the next hop must
/// offer) and REQUIRETLS (RFC 8689).
#[derive(Debug, Clone, Default)]
pub struct EnvelopeParams {
    pub ret: Option<DsnRet>,
    pub envid: Option<String>,
    pub smtputf8: bool,
    pub eight_bit: bool,
    pub require_tls: bool,
    /// The message carries `TLS-Required: No` (RFC 8689 §5); set from the
    /// header at acceptance.
    pub tls_optional: bool,
    /// One per recipient, in the order of `Accepted::recipients` (missing
    /// entries mean no parameters).
    pub rcpt_dsn: Vec<RcptDsn>,
}

pub async fn is_local_domain(ctx: &NodeCtx, domain: &str) -> Result<bool, StorageError> {
    let domain = domain.to_string();
    ctx.db
        .read("smtp_domain", move |txn| {
            let domain = domain.clone();
            async move {
                match domains::get(&txn, &domain).await {
                    Err(StorageError::Model(_)) => Ok(false),
                    other => other.map(|d| d.is_some()),
                }
            }
        })
        .await
}

/// What a RCPT address comes to.
#[derive(Debug, Clone)]
pub enum RcptOutcome {
    /// Deliver to these (an alias may stand for several).
    Accept(Vec<Recipient>),
    /// No such address in a local domain: 550 5.1.1.
    Unknown,
    /// A foreign domain and no right to relay: 550 5.7.1.
    RelayDenied,
    /// Aliases that loop or explode: 550, the operator must fix them.
    Misconfigured(&'static str),
}

/// Routes a RCPT address (accounts, aliases, subaddresses, catch-alls;
/// see [`routing`]); remote addresses are relayed for authenticated
/// submission and for alias targets (forwarding), refused otherwise.
pub async fn resolve_recipient(
    ctx: &NodeCtx,
    mailbox: &Mailbox,
    submission: bool,
    routing: &RoutingConfig,
) -> Result<RcptOutcome, StorageError> {
    let address = mailbox.to_string();
    let cfg = routing.clone();
    let route = ctx
        .db
        .read("smtp_rcpt", move |txn| {
            let (address, cfg) = (address.clone(), cfg.clone());
            async move { routing::route(&txn, &address, &cfg).await }
        })
        .await?;
    Ok(outcome_of(route, mailbox, submission))
}

/// What an SMTP session's RCPT learns from the store, in one read
/// transaction: where the address goes, whether every target is a local
/// account already at its quota, and which local accounts have no vacation
/// response on (delivery then skips the vacation lookup for them). Three
/// reads of the store per recipient were three snapshots; one is enough.
#[derive(Debug)]
pub struct RcptCheck {
    pub outcome: RcptOutcome,
    /// Every target is a local account at its quota (RFC 9208 limits
    /// reached): refused at RCPT with 552 5.2.2. A message that would only
    /// exceed the quota is refused at DATA by the delivery.
    pub all_over_quota: bool,
    /// Local targets whose vacation response was disabled at RCPT.
    pub vacation_off: Vec<AccountId>,
}

/// [`resolve_recipient`], the quota check and the vacation flags of the
/// local targets, in one read transaction (see [`RcptCheck`]), or from
/// the node's [`RcptCache`] when it holds the address and the store's
/// directory has not changed since.
pub async fn check_recipient(
    ctx: &NodeCtx,
    mailbox: &Mailbox,
    submission: bool,
    routing: &RoutingConfig,
    cache: Option<&RcptCache>,
) -> Result<RcptCheck, StorageError> {
    let address = mailbox.to_string();
    if let Some(cache) = cache {
        cache.confirm(&ctx.db).await?;
        if let Some(hit) = cache.get(&address) {
            return Ok(RcptCheck {
                outcome: outcome_of(hit.route, mailbox, submission),
                all_over_quota: false,
                vacation_off: hit.vacation_off,
            });
        }
    }
    let cfg = routing.clone();
    let read_address = address.clone();
    let (route, quota, vacation_off, version) = ctx
        .db
        .read("smtp_rcpt", move |txn| {
            let (address, cfg) = (read_address.clone(), cfg.clone());
            async move {
                let route = routing::route(&txn, &address, &cfg).await?;
                let Route::Targets { targets, .. } = &route else {
                    return Ok((route, QuotaState::Unlimited, Vec::new(), None));
                };
                let locals: Vec<AccountId> = targets
                    .iter()
                    .filter_map(|t| match t {
                        Recipient::Local { account, .. } => Some(*account),
                        Recipient::Remote { .. } => None,
                    })
                    .collect();
                let mut vacation_off = Vec::new();
                for &a in &locals {
                    if !jmap::get_vacation(&txn, a).await?.is_enabled {
                        vacation_off.push(a);
                    }
                }
                let all_local = locals.len() == targets.len();
                let quota = quota_state(&txn, &locals, all_local).await?;
                // Read in this snapshot, so the answer is known to hold
                // at this version (only worth reading when it may be kept).
                let version = if cache.is_some() && quota == QuotaState::Unlimited {
                    Some(directory::version(&txn).await?)
                } else {
                    None
                };
                Ok::<_, StorageError>((route, quota, vacation_off, version))
            }
        })
        .await?;
    if let (Some(cache), Some(version)) = (cache, version) {
        let cached = Cached {
            route: route.clone(),
            vacation_off: vacation_off.clone(),
        };
        cache.put(&address, version, cached);
    }
    Ok(RcptCheck {
        outcome: outcome_of(route, mailbox, submission),
        all_over_quota: quota == QuotaState::AllFull,
        vacation_off,
    })
}

fn outcome_of(route: Route, mailbox: &Mailbox, submission: bool) -> RcptOutcome {
    match route {
        Route::Targets { targets, via_alias, .. } => {
            if via_alias {
                metrics::counter!("meshmail_smtp_alias_expansions_total").increment(1);
            }
            RcptOutcome::Accept(targets)
        }
        Route::Foreign if submission => RcptOutcome::Accept(vec![Recipient::Remote {
            address: mailbox.to_string(),
            forwarded_by: None,
        }]),
        Route::Foreign => RcptOutcome::RelayDenied,
        Route::Unknown => RcptOutcome::Unknown,
        Route::Misconfigured(why) => RcptOutcome::Misconfigured(why),
    }
}

/// The local targets' quotas, as RCPT sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuotaState {
    /// No local target has limits: the answer may be cached.
    Unlimited,
    /// Some have limits and one at least has room (or a target is remote).
    Room,
    /// Every target is a local account at its quota: 552 at RCPT.
    AllFull,
}

async fn quota_state(txn: &Txn, accounts: &[AccountId], all_local: bool) -> Result<QuotaState, StorageError> {
    let mut state = QuotaState::Unlimited;
    let mut all_full = all_local && !accounts.is_empty();
    for &a in accounts {
        let q = quota::get(txn, a).await?;
        if q.is_unlimited() {
            all_full = false;
            continue;
        }
        state = QuotaState::Room;
        // Usage is read only where it can change the answer.
        if all_full && !quota::is_full(&q, &quota::usage(txn, a).await?) {
            all_full = false;
        }
    }
    Ok(if all_full { QuotaState::AllFull } else { state })
}

/// Whether the account may use `address` as its sender: its own address,
/// a subaddress of it (`alice+lists@`), or an alias that delivers to it
/// (and only to it, directly or through other aliases). JMAP Identity and
/// EmailSubmission ask the same question.
pub async fn sender_allowed(
    ctx: &NodeCtx,
    account_email: &str,
    address: &str,
    routing: &RoutingConfig,
) -> Result<bool, StorageError> {
    if address.eq_ignore_ascii_case(account_email) {
        return Ok(true);
    }
    let (address, cfg) = (address.to_string(), routing.clone());
    let route = ctx
        .db
        .read("smtp_sender", move |txn| {
            let (address, cfg) = (address.clone(), cfg.clone());
            async move { routing::route(&txn, &address, &cfg).await }
        })
        .await?;
    Ok(match route {
        // A catch-all would make every address of the domain "owned".
        Route::Targets {
            targets, via_catch_all, ..
        } => {
            !via_catch_all
                && matches!(targets.as_slice(), [Target::Local { address, .. }] if address.eq_ignore_ascii_case(account_email))
        }
        _ => false,
    })
}

fn received_header(shared: &SmtpShared, m: &Accepted, id: &str) -> String {
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
        shared.hostname,
    )
}

/// HELO names end up in a header: keep them to printable ASCII.
fn sanitize(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_graphic()).take(255).collect()
}

/// Stores the message for every recipient; one reply per recipient.
pub async fn accept_message(shared: &Arc<SmtpShared>, m: Accepted, body: Vec<u8>) -> Vec<Reply> {
    if shared.sink {
        return m.recipients.iter().map(|_| Reply::message_accepted("sink")).collect();
    }
    let ids: Vec<[u8; 16]> = m.recipients.iter().map(|_| new_id()).collect();
    let mut raw = received_header(shared, &m, &id_to_string(&ids[0])).into_bytes();
    if let Some(h) = &m.auth_results {
        raw.extend_from_slice(h.as_bytes());
    }
    raw.extend_from_slice(&body);
    drop(body);
    let fault = faults::requested_fault(&raw);
    let raw = Bytes::from(raw);
    let ctx = &shared.ctx;
    let Ingested {
        body: mut prepared,
        summary,
    } = match ingest(ctx, raw.clone()).await {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "could not store a message body");
            let full = matches!(e, StorageError::Unwritable { full: true, .. });
            let reply = if full {
                Reply::insufficient_storage()
            } else {
                Reply::local_error()
            };
            return m.recipients.iter().map(|_| reply.clone()).collect();
        }
    };
    let sender = match &m.from {
        ReversePath::Null => String::new(),
        ReversePath::Mailbox(mb) => mb.to_string(),
    };
    let mut queue_envelope = m.envelope.clone();
    queue_envelope.tls_optional = crate::outbound::tls_required_no(&raw);
    let mut replies = Vec::with_capacity(m.recipients.len());
    for (i, (rcpt, id)) in m.recipients.iter().zip(ids).enumerate() {
        let mut outcome = Err(DeliveryError::BodySwept);
        // A body swept between prepare and commit is written again (rare).
        for _ in 0..3 {
            outcome = match rcpt {
                Recipient::Local { account, address } => {
                    let req = DeliveryRequest {
                        acceptance_id: id,
                        account: *account,
                        recipient: address.clone(),
                        mailbox: if m.junk { "Junk".into() } else { "INBOX".into() },
                        body: prepared.clone(),
                        flags: Vec::new(),
                        internal_date_ms: now_ms() as i64,
                        summary: summary.clone(),
                        fault,
                        from_quarantine: None,
                        deadline: meshmail_actors::delivery::deadline_in(shared.delivery_timeout),
                    };
                    deliver(ctx, req).await.map(|_| ())
                }
                Recipient::Remote { address, forwarded_by } => {
                    let sender = match forwarded_by {
                        Some(domain) if !sender.is_empty() => match srs_sender(ctx, &sender, domain).await {
                            Ok(s) => s,
                            Err(e) => {
                                outcome = Err(e);
                                break;
                            }
                        },
                        _ => sender.clone(),
                    };
                    let rcpt_dsn = m.envelope.rcpt_dsn.get(i).cloned().unwrap_or_default();
                    queue_remote(ctx, id, &sender, address, &prepared, &queue_envelope, rcpt_dsn).await
                }
            };
            if outcome != Err(DeliveryError::BodySwept) {
                break;
            }
            match ctx.blobs.prepare(&ctx.db, raw.clone()).await {
                Ok(p) => prepared = p,
                Err(e) => {
                    outcome = Err(DeliveryError::from(e));
                    break;
                }
            }
        }
        if outcome.is_ok()
            && !m.junk
            && let Recipient::Local { account, address } = rcpt
            && !m.vacation_off.contains(account)
        {
            super::vacation::after_delivery(shared, *account, address, &sender, &raw).await;
        }
        replies.push(match outcome {
            Ok(()) => Reply::message_accepted(&id_to_string(&id)),
            Err(DeliveryError::Permanent(why)) => Reply::transaction_failed(&why),
            Err(DeliveryError::OverQuota) => Reply::over_quota(),
            Err(DeliveryError::StorageFull(why)) => {
                tracing::warn!(error = %why, "delivery failed: the store's disk is full, answering 452");
                Reply::insufficient_storage()
            }
            Err(e) => {
                tracing::warn!(error = %e, "delivery failed: answering 451");
                Reply::local_error()
            }
        });
    }
    replies
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

/// One SMTP reply for a whole transaction: 250 only if every recipient's copy
/// is durable; otherwise a temporary failure wins over a permanent one, so
/// the client retries rather than bounces what could still be delivered.
pub fn combine(replies: Vec<Reply>) -> Reply {
    if let Some(r) = replies.iter().find(|r| r.is_transient()) {
        return r.clone();
    }
    if let Some(r) = replies.iter().find(|r| r.is_permanent()) {
        return r.clone();
    }
    replies.into_iter().next().unwrap_or_else(Reply::ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_failure_wins() {
        let r = combine(vec![
            Reply::message_accepted("a"),
            Reply::local_error(),
            Reply::transaction_failed("x"),
        ]);
        assert_eq!(r.code, 451);
        assert_eq!(combine(vec![Reply::message_accepted("a")]).code, 250);
    }
}
