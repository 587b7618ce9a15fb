//! What one group of messages asks of the TLS to their destination: the
//! domain's MTA-STS policy (RFC 8461 §4/§5), unless the messages say
//! `TLS-Required: No` (RFC 8689 §5), which also lets a failed STARTTLS
//! fall back to plaintext. In `enforce` mode only MX hosts that match the
//! policy are tried, and only a session whose certificate verified is
//! used; in `testing` mode the same checks only log and count.

use meshmail_storage::model::mta_sts::{StsMode, StsPolicy};

use super::client::TlsState;
use super::mta_sts::host_allowed;
use super::mx::Hop;

/// The enhanced status of a policy refusal (RFC 3463 X.7.5, cryptographic
/// failure: the secure channel the domain asked for is not there); used in
/// the DSN when such a refusal outlives the message's lifetime.
pub const STS_STATUS: &str = "4.7.5";

/// Why an enforced MTA-STS policy refuses a delivery (the DSN's
/// diagnostic says it, after `x-meshmail; `). `policy` names the policy:
/// domain, mode and id.
#[derive(Debug, thiserror::Error)]
pub enum PolicyRefusal {
    #[error("{policy}: no MX host matches its mx patterns {patterns} (MX: {mx})")]
    NoMatchingMx {
        policy: String,
        patterns: String,
        mx: String,
    },
    #[error("{policy}: {host} offered no TLS with a certificate that verifies (tls={tls})")]
    Unverified {
        policy: String,
        host: String,
        tls: &'static str,
    },
}

fn describe(p: &StsPolicy) -> String {
    format!("MTA-STS policy of {} ({}, id {})", p.domain, p.mode.label(), p.id)
}

#[derive(Debug, Clone, Default)]
pub struct TlsPolicy {
    pub sts: Option<StsPolicy>,
    /// `TLS-Required: No`: no MTA-STS, plaintext after a failed STARTTLS.
    pub tls_optional: bool,
}

impl TlsPolicy {
    fn enforcing(&self) -> Option<&StsPolicy> {
        self.sts.as_ref().filter(|p| p.mode == StsMode::Enforce)
    }

    /// The hops allowed to receive the mail, or why none is.
    pub fn filter_hops(&self, hops: Vec<Hop>) -> Result<Vec<Hop>, PolicyRefusal> {
        let Some(p) = self.sts.as_ref() else {
            return Ok(hops);
        };
        let (allowed, refused): (Vec<Hop>, Vec<Hop>) = hops.into_iter().partition(|h| host_allowed(p, &h.host));
        for h in &refused {
            metrics::counter!("meshmail_outbound_mta_sts_refused_total", "mode" => p.mode.label(), "reason" => "mx")
                .increment(1);
            tracing::warn!(host = %h.host, policy = ?p.mx, mode = p.mode.label(), "MX host not in the MTA-STS policy");
        }
        if p.mode != StsMode::Enforce {
            let mut all = allowed;
            all.extend(refused);
            return Ok(all);
        }
        if allowed.is_empty() {
            let names: Vec<&str> = refused.iter().map(|h| h.host.as_str()).collect();
            return Err(PolicyRefusal::NoMatchingMx {
                policy: describe(p),
                patterns: format!("{:?}", p.mx),
                mx: names.join(", "),
            });
        }
        Ok(allowed)
    }

    /// Whether a session with `host` may carry the mail; `Err` says why not.
    pub fn check_session(&self, host: &str, tls: TlsState) -> Result<(), PolicyRefusal> {
        let Some(p) = self.sts.as_ref() else {
            return Ok(());
        };
        if tls == TlsState::Verified {
            return Ok(());
        }
        metrics::counter!("meshmail_outbound_mta_sts_refused_total", "mode" => p.mode.label(), "reason" => "tls")
            .increment(1);
        tracing::warn!(
            host,
            tls = tls.label(),
            mode = p.mode.label(),
            "MTA-STS needs verified TLS"
        );
        match self.enforcing() {
            Some(p) => Err(PolicyRefusal::Unverified {
                policy: describe(p),
                host: host.into(),
                tls: tls.label(),
            }),
            None => Ok(()),
        }
    }
}
