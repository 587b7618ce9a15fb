//! MTA-STS policies (RFC 8461) of remote domains, cached in the store so
//! every node of a mesh applies the same policy to a domain (a node that
//! fetched it spares the others the HTTPS fetch), and so a policy survives
//! restarts: RFC 8461 §5.1 keeps applying a cached, unexpired policy when
//! a new one cannot be fetched (the defence against an attacker who blocks
//! the fetch).

use serde::{Deserialize, Serialize};

use super::{get_record, put_record};
use crate::error::Result;
use crate::keyspace;
use crate::kv::Txn;

/// Patterns kept per policy at most (a policy body is ≤ 64 KiB; real ones
/// list a handful).
pub const MX_PATTERNS_MAX: usize = 64;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum StsMode {
    /// Deliver only to matching MX hosts over verified TLS.
    Enforce,
    /// Report (log, count) what enforce would refuse, deliver anyway.
    Testing,
    /// The domain withdrew its policy.
    None,
}

impl StsMode {
    pub fn label(self) -> &'static str {
        match self {
            StsMode::Enforce => "enforce",
            StsMode::Testing => "testing",
            StsMode::None => "none",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StsPolicy {
    /// The domain (lower-case) the policy is for.
    pub domain: String,
    /// The `id=` of the `_mta-sts` TXT record when it was fetched: a
    /// different id means the domain published a new policy.
    pub id: String,
    pub mode: StsMode,
    /// `mx:` patterns, lower-case: a host name or `*.` + a domain.
    pub mx: Vec<String>,
    pub max_age_s: u64,
    pub fetched_ms: u64,
}

impl StsPolicy {
    /// Whether the policy still applies at `now_ms` (RFC 8461 §3.2 max_age).
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        now_ms < self.fetched_ms.saturating_add(self.max_age_s.saturating_mul(1000))
    }
}

pub fn put(txn: &Txn, policy: &StsPolicy) -> Result<()> {
    put_record(
        txn,
        &keyspace::mta_sts_policy(&policy.domain.to_ascii_lowercase()),
        policy,
    )
}

pub async fn get(txn: &Txn, domain: &str) -> Result<Option<StsPolicy>> {
    get_record(
        txn,
        &keyspace::mta_sts_policy(&domain.to_ascii_lowercase()),
        "mta-sts policy",
    )
    .await
}
