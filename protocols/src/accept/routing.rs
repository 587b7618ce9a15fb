//! Address routing at RCPT time: which mailboxes (local accounts) and which
//! remote addresses one recipient address stands for.
//!
//! Order, first match wins (what operators of Postfix/Dovecot expect):
//! 1. an account with exactly this address;
//! 2. an alias with exactly this address (its targets are resolved in turn);
//! 3. subaddressing (RFC 5233): `user+tag@dom` is `user@dom` (account or
//!    alias); the separator is `[smtp] subaddress_separator`, "" turns it off;
//! 4. an SRS0 address of ours (a bounce of mail we forwarded, see [`srs`]):
//!    routed back to the original sender when its hash verifies;
//! 5. the domain's catch-all alias `@dom`;
//! 6. an address of a foreign domain is remote: relayed when it is the
//!    target of an alias (forwarding) or the client is an authenticated
//!    submission client; refused otherwise.
//!
//! Everything is decided in one read transaction before the RCPT reply, so
//! an unknown address gets 550 at RCPT and never a later bounce (no
//! backscatter). Expansion is bounded: at most [`DEPTH_MAX`] alias levels
//! and [`EXPANSION_MAX`] resulting recipients; a loop or an explosion is a
//! configuration error answered with 550 5.4.6 / 5.5.3, never a stall.

use meshmail_storage::ids::AccountId;
use meshmail_storage::model::{accounts, aliases, domains, secrets};

use super::srs;

/// The name of the SRS hash key among the store's secrets.
pub const SRS_SECRET: &str = "srs";
use meshmail_storage::{StorageError, Txn};

/// Alias levels followed (`a` → `b` → `c` is two).
pub const DEPTH_MAX: usize = 8;
/// Recipients one address may expand to.
pub const EXPANSION_MAX: usize = 100;

/// The routing settings (from `[smtp]`).
#[derive(Debug, Clone)]
pub struct RoutingConfig {
    /// RFC 5233 subaddress separator; `None` disables subaddressing.
    pub subaddress_separator: Option<char>,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            subaddress_separator: Some('+'),
        }
    }
}

/// One final recipient of an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Local {
        account: AccountId,
        address: String,
    },
    /// `forwarded_by`: the local domain whose alias (or SRS address) sent it
    /// on; `None` for a foreign address given directly (submission).
    Remote {
        address: String,
        forwarded_by: Option<String>,
    },
}

/// What one RCPT address stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Delivered to these (one or more; `via_alias` if expanded,
    /// `via_catch_all` if a catch-all was among the rules used).
    Targets {
        targets: Vec<Target>,
        via_alias: bool,
        via_catch_all: bool,
    },
    /// No such address in a local domain.
    Unknown,
    /// A foreign domain, not an alias target.
    Foreign,
    /// The aliases loop or expand too far: the operator must fix them.
    Misconfigured(&'static str),
}

/// Resolves one address (already lower-cased where case is irrelevant).
pub async fn route(txn: &Txn, address: &str, cfg: &RoutingConfig) -> Result<Route, StorageError> {
    let mut walk = Walk::default();
    match expand(txn, address, cfg, 0, &mut walk, None).await? {
        Step::Done => {}
        Step::Unknown => return Ok(Route::Unknown),
        Step::Foreign => return Ok(Route::Foreign),
        Step::Misconfigured(why) => return Ok(Route::Misconfigured(why)),
    }
    Ok(Route::Targets {
        targets: walk.out,
        via_alias: walk.via_alias,
        via_catch_all: walk.via_catch_all,
    })
}

/// The state of one expansion.
#[derive(Default)]
struct Walk {
    out: Vec<Target>,
    via_alias: bool,
    via_catch_all: bool,
}

enum Step {
    Done,
    Unknown,
    Foreign,
    Misconfigured(&'static str),
}

/// Depth-first expansion (boxed: async recursion).
fn expand<'a>(
    txn: &'a Txn,
    address: &'a str,
    cfg: &'a RoutingConfig,
    depth: usize,
    walk: &'a mut Walk,
    via: Option<&'a str>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Step, StorageError>> + Send + 'a>> {
    Box::pin(async move {
        if depth > DEPTH_MAX {
            return Ok(Step::Misconfigured("alias loop or too deep"));
        }
        // SRS addresses (bounces of mail we forwarded) may exceed the 64
        // octets `normalize` allows a local part: look at them first.
        if let Some((local, domain)) = address.rsplit_once('@')
            && srs::is_srs0(local)
        {
            let domain = domain.to_ascii_lowercase();
            if !is_local_domain(txn, &domain).await? {
                return Ok(if depth == 0 { Step::Foreign } else { Step::Unknown });
            }
            let key = secrets::get(txn, SRS_SECRET).await?;
            return match key.and_then(|k| srs::reverse(&k, local, srs::today())) {
                Some(original) => {
                    walk.via_alias = true;
                    push(
                        &mut walk.out,
                        Target::Remote {
                            address: original,
                            forwarded_by: Some(domain),
                        },
                    )
                }
                None => Ok(Step::Unknown),
            };
        }
        let Ok((local, domain)) = accounts::normalize(address) else {
            return Ok(Step::Unknown);
        };
        let address = format!("{local}@{domain}");
        if !is_local_domain(txn, &domain).await? {
            if depth == 0 {
                return Ok(Step::Foreign);
            }
            return push(
                &mut walk.out,
                Target::Remote {
                    address,
                    forwarded_by: via.map(str::to_string),
                },
            );
        }
        if let Some(step) = exact(txn, &address, &domain, cfg, depth, walk).await? {
            return Ok(step);
        }
        if let Some(sep) = cfg.subaddress_separator
            && let Some((base, _tag)) = local.split_once(sep)
            && !base.is_empty()
            && let Some(step) = exact(txn, &format!("{base}@{domain}"), &domain, cfg, depth, walk).await?
        {
            return Ok(step);
        }
        if let Some(catch_all) = aliases::get(txn, &format!("@{domain}")).await? {
            walk.via_catch_all = true;
            return follow(txn, &catch_all.targets, cfg, depth, walk, &domain).await;
        }
        Ok(Step::Unknown)
    })
}

/// An account or an alias with exactly this address (in a local `domain`).
async fn exact(
    txn: &Txn,
    address: &str,
    domain: &str,
    cfg: &RoutingConfig,
    depth: usize,
    walk: &mut Walk,
) -> Result<Option<Step>, StorageError> {
    if let Some(acc) = get_account(txn, address).await? {
        let local = Target::Local {
            account: acc.id,
            address: acc.email,
        };
        return push(&mut walk.out, local).map(Some);
    }
    match aliases::get(txn, address).await? {
        Some(alias) => follow(txn, &alias.targets, cfg, depth, walk, domain).await.map(Some),
        None => Ok(None),
    }
}

/// Resolves an alias's targets; `domain` is the alias's (local) domain, the
/// one a forwarded copy leaves under.
#[allow(clippy::too_many_arguments)]
async fn follow(
    txn: &Txn,
    targets: &[String],
    cfg: &RoutingConfig,
    depth: usize,
    walk: &mut Walk,
    domain: &str,
) -> Result<Step, StorageError> {
    walk.via_alias = true;
    let mut any = false;
    for t in targets {
        match expand(txn, t, cfg, depth + 1, walk, Some(domain)).await? {
            Step::Done => any = true,
            // A dead target (account deleted) does not sink the others.
            Step::Unknown | Step::Foreign => {}
            m @ Step::Misconfigured(_) => return Ok(m),
        }
    }
    Ok(if any { Step::Done } else { Step::Unknown })
}

fn push(out: &mut Vec<Target>, t: Target) -> Result<Step, StorageError> {
    // Two aliases naming one mailbox deliver one copy.
    if !out.contains(&t) {
        if out.len() >= EXPANSION_MAX {
            return Ok(Step::Misconfigured("alias expands to too many recipients"));
        }
        out.push(t);
    }
    Ok(Step::Done)
}

async fn get_account(txn: &Txn, address: &str) -> Result<Option<accounts::Account>, StorageError> {
    match accounts::get(txn, address).await {
        Err(StorageError::Model(_)) => Ok(None),
        other => other,
    }
}

async fn is_local_domain(txn: &Txn, domain: &str) -> Result<bool, StorageError> {
    match domains::get(txn, domain).await {
        Err(StorageError::Model(_)) => Ok(false),
        other => other.map(|d| d.is_some()),
    }
}
