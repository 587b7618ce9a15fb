//! What a recipient address comes to, asked at SMTP RCPT, before a JMAP
//! submission and before a vacation reply; and which senders an account
//! may use (SMTP submission's MAIL FROM, JMAP Identity and
//! EmailSubmission).

use meshmail_actors::node::NodeCtx;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::{directory, domains, jmap, quota, sieve};
use meshmail_storage::{StorageError, Txn};

use super::Recipient;
use super::rcpt_cache::{Cached, RcptCache};
use super::routing::{self, Route, RoutingConfig, Target};
use crate::envelope::Mailbox;

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
    /// No such address in a local domain (SMTP: 550 5.1.1).
    Unknown,
    /// A foreign domain and no right to relay (SMTP: 550 5.7.1).
    RelayDenied,
    /// Aliases that loop or explode (SMTP: 550); the operator must fix them.
    Misconfigured(&'static str),
}

/// Routes a RCPT address (accounts, aliases, subaddresses, catch-alls;
/// see [`routing`](super::routing)); remote addresses are relayed for authenticated
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
/// response on or no active Sieve script (delivery then skips those
/// lookups, [`LearnedAtRcpt`]). Separate reads of the store per recipient
/// were as many snapshots; one is enough.
#[derive(Debug)]
pub struct RcptCheck {
    pub outcome: RcptOutcome,
    /// Every target is a local account at its quota (RFC 9208 limits
    /// reached): refused at RCPT with 552 5.2.2. A message that would only
    /// exceed the quota is refused at DATA by the delivery.
    pub all_over_quota: bool,
    /// What RCPT learned of the local targets for delivery.
    pub learned: LearnedAtRcpt,
}

/// What RCPT learned of its local targets that delivery would otherwise
/// read again, per message: accounts with no vacation response on and
/// accounts with no active Sieve script. Empty (nothing learned: JMAP
/// submission, vacation replies, redirects) makes delivery read each for
/// itself. A plain delivery read the active script's record once per
/// message, ~5 % of `bench smtp`'s rate and 10 % of its CPU per message
/// (the A/B in `soak/reports/ab-restructuring-2026-12-07.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LearnedAtRcpt {
    pub vacation_off: Vec<AccountId>,
    pub sieve_off: Vec<AccountId>,
}

impl LearnedAtRcpt {
    pub fn extend(&mut self, other: LearnedAtRcpt) {
        self.vacation_off.extend(other.vacation_off);
        self.sieve_off.extend(other.sieve_off);
    }

    /// Reads what there is to learn of `accounts` in `txn`.
    async fn read(txn: &Txn, accounts: &[AccountId]) -> Result<LearnedAtRcpt, StorageError> {
        let mut learned = LearnedAtRcpt::default();
        for &a in accounts {
            if !jmap::get_vacation(txn, a).await?.is_enabled {
                learned.vacation_off.push(a);
            }
            if sieve::active_ref(txn, a).await?.is_none() {
                learned.sieve_off.push(a);
            }
        }
        Ok(learned)
    }
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
                learned: hit.learned,
            });
        }
    }
    let cfg = routing.clone();
    let read_address = address.clone();
    let (route, quota, learned, version) = ctx
        .db
        .read("smtp_rcpt", move |txn| {
            let (address, cfg) = (read_address.clone(), cfg.clone());
            async move {
                let route = routing::route(&txn, &address, &cfg).await?;
                let Route::Targets { targets, .. } = &route else {
                    return Ok((route, QuotaState::Unlimited, LearnedAtRcpt::default(), None));
                };
                let locals: Vec<AccountId> = targets
                    .iter()
                    .filter_map(|t| match t {
                        Recipient::Local { account, .. } => Some(*account),
                        Recipient::Remote { .. } => None,
                    })
                    .collect();
                let learned = LearnedAtRcpt::read(&txn, &locals).await?;
                let all_local = locals.len() == targets.len();
                let quota = quota_state(&txn, &locals, all_local).await?;
                // Read in this snapshot, so the answer is known to hold
                // at this version (only worth reading when it may be kept).
                let version = if cache.is_some() && quota == QuotaState::Unlimited {
                    Some(directory::version(&txn).await?)
                } else {
                    None
                };
                Ok::<_, StorageError>((route, quota, learned, version))
            }
        })
        .await?;
    if let (Some(cache), Some(version)) = (cache, version) {
        let cached = Cached {
            route: route.clone(),
            learned: learned.clone(),
        };
        cache.put(&address, version, cached);
    }
    Ok(RcptCheck {
        outcome: outcome_of(route, mailbox, submission),
        all_over_quota: quota == QuotaState::AllFull,
        learned,
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
