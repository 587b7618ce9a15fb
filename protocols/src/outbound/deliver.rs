//! One delivery job: the claimed items of one destination domain, grouped
//! into messages (one SMTP transaction each, over one reused connection).
//! Every item ends its attempt with exactly one fenced `finish`: relayed,
//! retry later, or bounced (after its DSN went out, so a crash between the
//! two repeats the DSN under the same acceptance id rather than losing it).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use meshmail_storage::model::now_ms;
use meshmail_storage::model::outbound::{self, Fence, Finish, OutboundItem};
use rand::Rng;

use super::client::{ClientError, Envelope, RcptSpec, SmtpClient, SmtpReply, TlsState, TxnOutcome};
use super::downgrade::{self, DowngradeError, Target};
use super::dsn::{Action, Report, status_of};
use super::mta_sts;
use super::mx::{self, Hop, RouteError};
use super::notify::send_dsn;
use super::tls_policy::{STS_STATUS, TlsPolicy};
use super::{InFlight, Outbound};

/// The recipients of one domain that share a message (sender, body, options).
pub struct Message {
    pub items: Vec<(Fence, OutboundItem, InFlight)>,
}

pub struct Job {
    pub domain: String,
    pub messages: Vec<Message>,
}

/// How one recipient's attempt ended.
#[derive(Debug, Clone)]
enum Verdict {
    Relayed {
        host: String,
        tls: TlsState,
    },
    Temporary {
        error: String,
        remote: Option<String>,
        /// The DSN status when this failure outlives the message (default
        /// 4.4.7), e.g. 4.7.5 for an MTA-STS refusal.
        expiry_status: Option<&'static str>,
    },
    Permanent {
        status: String,
        diagnostic: String,
        remote: Option<String>,
    },
}

fn temporary(error: impl std::fmt::Display) -> Verdict {
    Verdict::Temporary {
        error: error.to_string(),
        remote: None,
        expiry_status: None,
    }
}

/// A refusal by the destination's TLS policy (MTA-STS): retried like any
/// temporary failure, bounced as 4.7.5 at expiry.
fn policy_refusal(error: impl std::fmt::Display) -> Verdict {
    Verdict::Temporary {
        error: error.to_string(),
        remote: None,
        expiry_status: Some(STS_STATUS),
    }
}

fn permanent(status: &str, diagnostic: impl std::fmt::Display) -> Verdict {
    Verdict::Permanent {
        status: status.to_string(),
        diagnostic: diagnostic.to_string(),
        remote: None,
    }
}

pub async fn deliver_job(o: &Arc<Outbound>, job: Job) {
    let mut pending: Vec<Message> = Vec::new();
    // Operator bounces first: no connection needed.
    for mut m in job.messages {
        let (bounce, keep): (Vec<_>, Vec<_>) = m.items.drain(..).partition(|(_, i, _)| i.bounce_requested.is_some());
        let bounce: Vec<_> = bounce
            .into_iter()
            .map(|(fence, item, guard)| {
                let why = item.bounce_requested.clone().unwrap_or_default();
                let v = permanent("5.0.0", format!("x-meshmail; bounced by the operator: {why}"));
                (fence, item, guard, v)
            })
            .collect();
        if !bounce.is_empty() {
            settle_message(o, bounce, None).await;
        }
        if !keep.is_empty() {
            pending.push(Message { items: keep });
        }
    }
    if pending.is_empty() {
        return;
    }
    let started = Instant::now();
    let hops = route(o, &job.domain).await;
    metrics::histogram!("meshmail_outbound_stage_seconds", "stage" => "route").record(started.elapsed().as_secs_f64());
    let hops = match hops {
        Ok(h) => h,
        Err(v) => {
            for m in pending {
                settle_all(o, m, &v, None).await;
            }
            return;
        }
    };
    // Messages that say `TLS-Required: No` go without the domain's
    // MTA-STS policy (and on their own connections); the others under it.
    let (optional, bound): (Vec<Message>, Vec<Message>) = pending.into_iter().partition(|m| m.items[0].1.tls_optional);
    let sts = if !bound.is_empty() && o.config.relay.is_none() && o.config.mta_sts.enabled {
        mta_sts::policy_for(o, &job.domain).await
    } else {
        None
    };
    for (messages, policy) in [
        (
            bound,
            TlsPolicy {
                sts,
                tls_optional: false,
            },
        ),
        (
            optional,
            TlsPolicy {
                sts: None,
                tls_optional: true,
            },
        ),
    ] {
        if messages.is_empty() {
            continue;
        }
        match policy.filter_hops(hops.clone()) {
            Ok(allowed) => deliver_over(o, &job.domain, &allowed, &policy, messages).await,
            Err(why) => {
                let v = policy_refusal(format!("x-meshmail; {why}"));
                for m in messages {
                    settle_all(o, m, &v, None).await;
                }
            }
        }
    }
}

/// The messages of one domain over reused connections to `hops`.
async fn deliver_over(o: &Arc<Outbound>, domain: &str, hops: &[Hop], policy: &TlsPolicy, pending: Vec<Message>) {
    // Kept connections are reused only under the policy they were opened with.
    let key = format!(
        "{domain}|{}|{}",
        policy.tls_optional,
        policy.sts.as_ref().map_or("", |p| p.id.as_str())
    );
    let idle_timeout = o.config.connection_idle_timeout;
    let mut client: Option<SmtpClient> = None;
    let mut last_connect_error = ConnectError::default();
    // Transactions on the current connection: the reused ones start with RSET.
    let mut used = 0u32;
    for m in pending {
        if client.is_none()
            && !idle_timeout.is_zero()
            && let Some(c) = o.pool.take(&key, idle_timeout)
        {
            metrics::counter!("meshmail_outbound_pool_reuses_total").increment(1);
            client = Some(c);
            used = 1; // a kept connection starts with RSET
        }
        if used > 0
            && let Some(c) = client.as_mut()
            && let Err(e) = c.rset().await
        {
            tracing::debug!(error = %e, "outbound: reused connection failed RSET; reconnecting");
            client = None;
        }
        if client.is_none() {
            used = 0;
            match connect(o, hops, policy).await {
                Ok(c) => client = Some(c),
                Err(e) => last_connect_error = e,
            }
        }
        let Some(c) = client.as_mut() else {
            let why = format!("no MX of {domain} could be reached: {}", last_connect_error.detail);
            let v = if last_connect_error.policy {
                policy_refusal(format!("x-meshmail; {why}"))
            } else {
                temporary(why)
            };
            settle_all(o, m, &v, None).await;
            continue;
        };
        let keep = transact(o, c, m).await;
        used += 1;
        metrics::counter!("meshmail_outbound_transactions_total", "connection" => if used > 1 { "reused" } else { "new" })
            .increment(1);
        if !keep && let Some(c) = client.take() {
            c.quit().await;
        }
    }
    if let Some(c) = client {
        if idle_timeout.is_zero() {
            c.quit().await;
        } else {
            o.pool.put(&key, c);
        }
    }
}

/// The hops for a domain (or the relay), as a verdict on failure.
async fn route(o: &Arc<Outbound>, domain: &str) -> Result<Vec<Hop>, Verdict> {
    if let Some(relay) = &o.config.relay {
        return match mx::host_addrs(&o.dns, &relay.host, relay.port).await {
            Ok(addrs) if !addrs.is_empty() => Ok(vec![Hop {
                host: relay.host.clone(),
                addrs,
            }]),
            Ok(_) => Err(temporary(format!("relay {} has no address", relay.host))),
            Err(e) => Err(temporary(format!("relay {}: {e}", relay.host))),
        };
    }
    match mx::route(&o.dns, domain, o.config.mx_port).await {
        Ok(h) => Ok(h),
        Err(RouteError::NullMx) => Err(permanent(
            "5.1.10",
            format!("x-meshmail; {domain} publishes a null MX (RFC 7505): it accepts no mail"),
        )),
        Err(RouteError::NoSuchDomain(why)) => Err(permanent(
            "5.1.2",
            format!("x-meshmail; no mail host for {domain}: {why}"),
        )),
        Err(RouteError::Temporary(why)) => Err(temporary(why)),
    }
}

/// Why no session could be had; `policy`: some host was refused by the
/// TLS policy (and none was usable otherwise).
#[derive(Debug, Default)]
struct ConnectError {
    detail: String,
    policy: bool,
}

/// Tries every address of every hop in order until one session is up that
/// the TLS policy accepts.
async fn connect(o: &Arc<Outbound>, hops: &[Hop], policy: &TlsPolicy) -> Result<SmtpClient, ConnectError> {
    let mut errors = Vec::new();
    let mut refused_by_policy = false;
    let started = Instant::now();
    for hop in hops {
        for addr in &hop.addrs {
            let mut attempt =
                SmtpClient::connect(*addr, &hop.host, &o.config.hostname, o.config.timeouts, o.tls.as_ref()).await;
            if policy.tls_optional
                && let Err(
                    e @ (ClientError::Tls(_)
                    | ClientError::Timeout("TLS handshake")
                    | ClientError::Rejected { stage: "STARTTLS", .. }),
                ) = &attempt
            {
                // RFC 8689 §5: the sender prefers delivery to TLS.
                tracing::info!(host = %hop.host, error = %e, "STARTTLS failed; TLS-Required: No, so trying plaintext");
                metrics::counter!("meshmail_outbound_tls_fallbacks_total").increment(1);
                attempt = SmtpClient::connect(*addr, &hop.host, &o.config.hostname, o.config.timeouts, None).await;
            }
            match attempt {
                Ok(mut c) => {
                    if let Err(why) = policy.check_session(&hop.host, c.tls) {
                        refused_by_policy = true;
                        errors.push(why.to_string());
                        c.quit().await;
                        continue;
                    }
                    metrics::counter!("meshmail_outbound_connections_total", "tls" => c.tls.label()).increment(1);
                    metrics::histogram!("meshmail_outbound_stage_seconds", "stage" => "connect")
                        .record(started.elapsed().as_secs_f64());
                    if let Some(relay) = &o.config.relay
                        && let Some((user, password)) = &relay.auth
                    {
                        // Credentials never cross a network in the clear.
                        if c.tls == TlsState::None && !addr.ip().is_loopback() {
                            errors.push(format!("{}: relay offers no TLS for AUTH", hop.host));
                            continue;
                        }
                        if let Err(e) = c.auth_plain(user, password).await {
                            errors.push(format!("{}: {e}", hop.host));
                            continue;
                        }
                    }
                    return Ok(c);
                }
                Err(e) => {
                    metrics::counter!("meshmail_outbound_connect_failures_total").increment(1);
                    errors.push(format!("{} ({addr}): {e}", hop.host));
                }
            }
        }
    }
    Err(ConnectError {
        detail: errors.join("; "),
        policy: refused_by_policy,
    })
}

/// Whether a message needs SMTPUTF8 of the peer (RFC 6531 §3.2).
fn needs_smtputf8(items: &[(Fence, OutboundItem, InFlight)]) -> bool {
    items
        .iter()
        .any(|(_, i, _)| i.smtputf8 || !i.sender.is_ascii() || !i.recipient.is_ascii())
}

/// One message over `c`; returns whether the connection can be reused.
async fn transact(o: &Arc<Outbound>, c: &mut SmtpClient, m: Message) -> bool {
    let (fence, first) = (&m.items[0].0, &m.items[0].1);
    // The lease may have moved since the claim (a hand-off that outwaited
    // its drain, a takeover): then the next owner runs these items, and
    // this node must not send them too. They stay claimed under our fence,
    // which the new owner takes over; nothing is committed here.
    if o.ctx.lease_epoch(first.shard) != Some(fence.epoch) {
        metrics::counter!("meshmail_outbound_lease_lost_total").increment(m.items.len() as u64);
        tracing::debug!(
            shard = first.shard,
            "outbound: lease moved; leaving the message to the new owner"
        );
        return true;
    }
    let host = c.host.clone();
    if let Some(v) = peer_refusal(c, &m, &host) {
        settle_all(o, m, &v, None).await;
        return true;
    }
    let body = match o.ctx.blobs.get(&o.ctx.db, &first.body).await {
        Ok(b) => b,
        Err(e) => {
            settle_all(o, m, &temporary(format!("reading the body: {e}")), None).await;
            return true;
        }
    };
    let sent = match convert_for_peer(&body, c, &host) {
        Ok(sent) => sent,
        Err(v) => {
            settle_all(o, m, &v, Some(body)).await;
            return true;
        }
    };
    // Signed after the conversion: the signature covers what is sent.
    let wire = prepare_body(o, first, &sent, c).await;
    let env = envelope_of(&m, wire.len(), sent.iter().any(|b| *b >= 0x80));
    let started = Instant::now();
    let result = c.send_mail(&env, &wire).await;
    metrics::histogram!("meshmail_outbound_stage_seconds", "stage" => "transaction")
        .record(started.elapsed().as_secs_f64());
    let (verdicts, keep) = verdicts_of(result, m.items.len(), &host, c.tls);
    let items = m
        .items
        .into_iter()
        .zip(verdicts)
        .map(|((f, i, g), v)| (f, i, g, v))
        .collect();
    settle_message(o, items, Some(&body)).await;
    keep
}

/// A policy that fails the whole message on this peer: REQUIRETLS without
/// verified TLS and the peer's REQUIRETLS, or SMTPUTF8 needed and missing.
fn peer_refusal(c: &SmtpClient, m: &Message, host: &str) -> Option<Verdict> {
    let first = &m.items[0].1;
    if first.require_tls && (c.tls != TlsState::Verified || !c.caps.requiretls) {
        return Some(permanent(
            "5.7.30",
            format!("x-meshmail; REQUIRETLS: {host} does not offer REQUIRETLS over verified TLS"),
        ));
    }
    if needs_smtputf8(&m.items) && !c.caps.smtputf8 {
        return Some(permanent(
            "5.6.7",
            format!("x-meshmail; the message needs SMTPUTF8, which {host} does not offer"),
        ));
    }
    None
}

/// What goes out to this peer: the stored message, or its 7-bit (no
/// 8BITMIME) or text-only (always: this client sends with DATA)
/// conversion; a permanent verdict when it cannot be converted or is
/// larger than the peer's SIZE.
fn convert_for_peer(body: &Bytes, c: &SmtpClient, host: &str) -> Result<Bytes, Verdict> {
    let target = if c.caps.eight_bit_mime {
        Target::EightBit
    } else {
        Target::SevenBit
    };
    let sent = match downgrade::downgrade(body, target) {
        Ok(None) => body.clone(),
        Ok(Some(converted)) => {
            metrics::counter!("meshmail_outbound_downgrades_total", "to" => target.label()).increment(1);
            Bytes::from(converted)
        }
        Err(e) => {
            let status = if e == DowngradeError::HeaderEightBit {
                "5.6.7"
            } else {
                "5.6.3"
            };
            let missing = if c.caps.eight_bit_mime {
                "BINARYMIME"
            } else {
                "8BITMIME"
            };
            return Err(permanent(
                status,
                format!("x-meshmail; {host} does not offer {missing}, and the message cannot be converted: {e}"),
            ));
        }
    };
    if let Some(max) = c.caps.size
        && max > 0
        && sent.len() as u64 > max
    {
        return Err(permanent(
            "5.3.4",
            format!(
                "x-meshmail; the message ({} bytes) is larger than {host} accepts ({max})",
                sent.len()
            ),
        ));
    }
    Ok(sent)
}

/// The SMTP envelope of one message: its sender, every recipient with its
/// DSN parameters, and what the body needs of the peer.
fn envelope_of(m: &Message, size: usize, eight_bit: bool) -> Envelope {
    let first = &m.items[0].1;
    Envelope {
        from: first.sender.clone(),
        rcpts: m
            .items
            .iter()
            .map(|(_, i, _)| RcptSpec {
                address: i.recipient.clone(),
                notify: i.dsn.notify,
                orcpt: i.dsn.orcpt.clone(),
            })
            .collect(),
        size: size as u64,
        eight_bit,
        smtputf8: needs_smtputf8(&m.items),
        require_tls: first.require_tls,
        ret: first.dsn.ret,
        envid: first.dsn.envid.clone(),
    }
}

/// Each recipient's verdict from the transaction's result, and whether
/// the connection can be reused (not after a transport error).
fn verdicts_of(
    result: Result<TxnOutcome, ClientError>,
    rcpts: usize,
    host: &str,
    tls: TlsState,
) -> (Vec<Verdict>, bool) {
    let remote = Some(host.to_string());
    let all = |v: Verdict| (0..rcpts).map(|_| v.clone()).collect::<Vec<_>>();
    match result {
        Ok(outcome) => (
            outcome.rcpts.iter().map(|r| reply_verdict(r, host, tls)).collect(),
            true,
        ),
        Err(ClientError::Rejected { reply, stage }) if reply.is_permanent() => (
            all(Verdict::Permanent {
                status: status_of(reply.code, reply.enhanced().as_deref()),
                diagnostic: format!("smtp; {reply} (at {stage})"),
                remote,
            }),
            true,
        ),
        Err(e @ ClientError::Rejected { .. }) => (
            all(Verdict::Temporary {
                error: format!("{host}: {e}"),
                remote,
                expiry_status: None,
            }),
            true,
        ),
        Err(e) => (
            all(Verdict::Temporary {
                error: format!("{host}: {e}"),
                remote,
                expiry_status: None,
            }),
            false,
        ),
    }
}

fn reply_verdict(r: &SmtpReply, host: &str, tls: TlsState) -> Verdict {
    if r.is_positive() {
        Verdict::Relayed {
            host: host.to_string(),
            tls,
        }
    } else if r.is_permanent() {
        Verdict::Permanent {
            status: status_of(r.code, r.enhanced().as_deref()),
            diagnostic: format!("smtp; {r}"),
            remote: Some(host.to_string()),
        }
    } else {
        Verdict::Temporary {
            error: format!("{host}: {r}"),
            remote: Some(host.to_string()),
            expiry_status: None,
        }
    }
}

/// The bytes that go on the wire: a trace header saying how this hop was
/// protected (the receiving side sees it), the DKIM signature of the
/// sender's domain when the store has a key for it, then the message.
async fn prepare_body(o: &Arc<Outbound>, item: &OutboundItem, body: &Bytes, c: &SmtpClient) -> Vec<u8> {
    // `claim=` names the attempt (node/generation/lease epoch@claim time):
    // a receiver that logs it can tell two attempts of one message apart,
    // which is how the chaos runner checks that no two nodes ever held a
    // claim on one message at once (chaos/README.md).
    let claim = item.claim.as_ref().map_or_else(String::new, |cl| {
        format!(
            "; claim={}/{}/{}@{}",
            cl.fence.node, cl.fence.generation, cl.fence.epoch, cl.started_ms
        )
    });
    let mut head = format!(
        "X-Meshmail-Outbound: tls={}; mx={}; by={}{claim}\r\n",
        c.tls.label(),
        c.host,
        o.config.hostname
    );
    if o.config.dkim_sign
        && let Some((_, domain)) = item.sender.rsplit_once('@')
    {
        match o.keys.key(&o.ctx.db, domain).await {
            Ok(Some(key)) => match super::dkim::sign(&key, body) {
                Ok(sig) => {
                    metrics::counter!("meshmail_outbound_dkim_signed_total").increment(1);
                    head.push_str(&sig);
                }
                Err(e) => tracing::warn!(domain, error = %e, "DKIM signing failed; sending unsigned"),
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(domain, error = %e, "DKIM key lookup failed; sending unsigned"),
        }
    }
    let mut wire = head.into_bytes();
    wire.extend_from_slice(body);
    wire
}

async fn settle_all(o: &Arc<Outbound>, m: Message, v: &Verdict, body: Option<Bytes>) {
    let items = m.items.into_iter().map(|(f, i, g)| (f, i, g, v.clone())).collect();
    settle_message(o, items, body.as_ref()).await;
}

/// How one item's attempt ends: the commit, and the DSN it asks for.
struct Settled {
    fence: Fence,
    item: OutboundItem,
    guard: InFlight,
    how: Finish,
    outcome: &'static str,
    report: Option<Report>,
}

/// What `v` means for `item` at `now`: an expired temporary failure is a
/// permanent one (4.4.7); each kind of end asks for its DSN when the
/// sender wants it (RFC 3461 NOTIFY) and is not `<>`.
fn decide(
    cfg: &super::OutboundConfig,
    item: &OutboundItem,
    v: Verdict,
    now: u64,
) -> (Finish, &'static str, Option<Report>) {
    let expires_ms = item.queued_ms + cfg.max_lifetime.as_millis() as u64;
    let v = match v {
        Verdict::Temporary {
            error,
            remote,
            expiry_status,
        } if now >= expires_ms => Verdict::Permanent {
            status: expiry_status.unwrap_or("4.4.7").into(),
            diagnostic: format!(
                "x-meshmail; gave up after {} attempts over {} s: {error}",
                item.attempts,
                (now - item.queued_ms) / 1000
            ),
            remote,
        },
        other => other,
    };
    let has_sender = !item.sender.is_empty();
    match v {
        Verdict::Relayed { host, tls } => {
            metrics::histogram!("meshmail_outbound_delivery_seconds")
                .record(now.saturating_sub(item.queued_ms) as f64 / 1000.0);
            // The peer may not report delivery itself (we do not know
            // whether it passed NOTIFY on), so say it was relayed.
            let report = (item.dsn.wants_success() && has_sender).then(|| Report {
                action: Action::Relayed,
                status: "2.0.0".into(),
                remote_mta: Some(host.clone()),
                diagnostic: "smtp; 250 accepted".into(),
                last_attempt_ms: now,
                retry_until_ms: None,
            });
            let how = Finish::Relayed {
                host,
                tls: tls != TlsState::None,
            };
            (how, "relayed", report)
        }
        Verdict::Temporary { error, remote, .. } => retry(cfg, item, now, error, remote),
        Verdict::Permanent {
            status,
            diagnostic,
            remote,
        } => {
            let report = (item.dsn.wants_failure() && has_sender).then(|| Report {
                action: Action::Failed,
                status,
                remote_mta: remote,
                diagnostic: diagnostic.clone(),
                last_attempt_ms: now,
                retry_until_ms: None,
            });
            (Finish::Bounced { reason: diagnostic }, "bounced", report)
        }
    }
}

/// A temporary failure: the next attempt after the configured delay (plus
/// up to a tenth of it, so retries of a burst spread out), never past the
/// message's expiry; and a delay DSN once, when the sender asked for one
/// and the message has waited long enough.
fn retry(
    cfg: &super::OutboundConfig,
    item: &OutboundItem,
    now: u64,
    error: String,
    remote: Option<String>,
) -> (Finish, &'static str, Option<Report>) {
    let expires_ms = item.queued_ms + cfg.max_lifetime.as_millis() as u64;
    let has_sender = !item.sender.is_empty();
    let delay = cfg.retry_delay(item.attempts);
    let jitter_ms = rand::rng().random_range(0..=delay.as_millis() as u64 / 10);
    let next_ms = (now + delay.as_millis() as u64 + jitter_ms).min(expires_ms.max(now + 1000));
    let report = cfg
        .delay_warning
        .filter(|warn_after| {
            !item.delay_warned
                && has_sender
                && item.dsn.wants_delay()
                && now.saturating_sub(item.queued_ms) >= warn_after.as_millis() as u64
        })
        .map(|_| Report {
            action: Action::Delayed,
            status: "4.4.7".into(),
            remote_mta: remote.clone(),
            diagnostic: format!("x-meshmail; {error}"),
            last_attempt_ms: now,
            retry_until_ms: Some(expires_ms),
        });
    let how = Finish::Retry {
        next_ms,
        error,
        delay_warned: false,
    };
    (how, "retry", report)
}

/// Ends one attempt of one message: one DSN per kind (failed, delayed,
/// relayed) with a block for each recipient it concerns, sent before the
/// commits, then one fenced `finish` per item. A failure DSN that cannot
/// be sent keeps its items queued (retried in a minute), so no bounce is
/// ever recorded without its DSN; its acceptance id is the smallest
/// `dsn_id` of its items, fixed at their first claim, so a repeat after a
/// crash is recognised by the ledger.
async fn settle_message(o: &Arc<Outbound>, items: Vec<(Fence, OutboundItem, InFlight, Verdict)>, body: Option<&Bytes>) {
    let now = now_ms();
    let mut s: Vec<Settled> = items
        .into_iter()
        .map(|(fence, item, guard, v)| {
            let (how, outcome, report) = decide(&o.config, &item, v, now);
            Settled {
                fence,
                item,
                guard,
                how,
                outcome,
                report,
            }
        })
        .collect();
    for action in [Action::Failed, Action::Delayed, Action::Relayed] {
        let idx: Vec<usize> = (0..s.len())
            .filter(|&i| s[i].report.as_ref().is_some_and(|r| r.action == action))
            .collect();
        if idx.is_empty() {
            continue;
        }
        let dsn_id = match action {
            Action::Failed => idx.iter().filter_map(|&i| s[i].item.dsn_id).min(),
            _ => None,
        }
        .unwrap_or_else(meshmail_storage::model::new_id);
        let sent = {
            let entries: Vec<(&OutboundItem, &Report)> = idx
                .iter()
                .filter_map(|&i| Some((&s[i].item, s[i].report.as_ref()?)))
                .collect();
            send_dsn(o, &entries, dsn_id, body).await
        };
        match (action, sent) {
            (Action::Failed, Err(e)) => {
                // Not bounced without its DSN: retried (and failing the same
                // way) a minute from now.
                tracing::warn!(error = %e, "could not send a failure DSN; retrying the items");
                for &i in &idx {
                    s[i].how = Finish::Retry {
                        next_ms: now + 60_000,
                        error: format!("bounce pending, DSN not delivered yet: {e}"),
                        delay_warned: false,
                    };
                    s[i].outcome = "retry";
                }
            }
            (Action::Delayed, Ok(())) => {
                for &i in &idx {
                    if let Finish::Retry { delay_warned, .. } = &mut s[i].how {
                        *delay_warned = true;
                    }
                }
            }
            (_, Err(e)) => tracing::warn!(error = %e, ?action, "could not send a DSN"),
            (_, Ok(())) => {}
        }
    }
    for x in s {
        commit(o, &x.fence, &x.item, x.how, x.outcome).await;
        drop(x.guard);
    }
}

async fn commit(o: &Arc<Outbound>, fence: &Fence, item: &OutboundItem, how: Finish, outcome: &'static str) {
    metrics::counter!("meshmail_outbound_attempts_total", "outcome" => outcome).increment(1);
    let (f, id, h) = (fence.clone(), item.id, how.clone());
    let done = o
        .ctx
        .db
        .run("outbound_finish", move |txn| {
            let (f, h) = (f.clone(), h.clone());
            async move { outbound::finish(&txn, &id, &f, &h).await }
        })
        .await;
    match done {
        Ok(_) => {
            tracing::debug!(id = %meshmail_storage::model::id_to_string(&item.id), outcome, "outbound attempt ended")
        }
        // Fenced or claim lost: the new owner (or the operator) decides;
        // the item stays queued, so at worst it goes out twice.
        Err(e) => {
            metrics::counter!("meshmail_outbound_finish_refused_total").increment(1);
            tracing::warn!(error = %e, ?how, "outbound attempt could not be recorded");
        }
    }
}
