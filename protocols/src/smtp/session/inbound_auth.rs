//! Inbound message authentication on the MX listener: SPF (RFC 7208), DKIM
//! (RFC 6376), ARC (RFC 8617) and DMARC (RFC 7489), with `mail-auth` over
//! the node's one resolver. The outcome is an `Authentication-Results`
//! header (RFC 8601) added before the message is stored, and a verdict for
//! DMARC: a failing message whose domain publishes `p=reject` is refused
//! with 550 at DATA (or filed into Junk, by config), `p=quarantine` goes to
//! Junk.
//!
//! DNS trouble never stalls or crashes a session: every lookup is bounded by
//! the resolver's timeout, the whole check by [`AUTH_TIMEOUT_DEFAULT`], and
//! a check that runs out records `temperror` and accepts the message.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use mail_auth::common::headers::HeaderWriter;
use mail_auth::dmarc::Policy;
use mail_auth::dmarc::verify::DmarcParameters;
use mail_auth::spf::verify::SpfParameters;
use mail_auth::{AuthenticatedMessage, AuthenticationResults, DkimResult, DmarcResult, SpfResult};

use crate::dns::Dns;

/// The whole check (SPF + DKIM + ARC + DMARC, several lookups each).
pub const AUTH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(20);

/// What a DMARC failure under `p=reject` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RejectAction {
    /// 550 at DATA (the default; the sender gets its own bounce).
    Reject,
    /// Accept and file into the recipient's Junk mailbox.
    Junk,
}

/// The MX listener's settings for the checks.
#[derive(Debug, Clone)]
pub struct InboundAuthConfig {
    pub on_reject: RejectAction,
    /// Clients in these networks are trusted relays or local injectors
    /// (like Postfix's `mynetworks`): their mail is not checked.
    pub skip_networks: Vec<ipnet::IpNet>,
}

impl InboundAuthConfig {
    pub fn applies_to(&self, ip: IpAddr) -> bool {
        !self.skip_networks.iter().any(|n| n.contains(&ip))
    }
}

/// Where the message goes, by its DMARC outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    Inbox,
    Junk,
    /// Refused with 550 5.7.1 and this text.
    Reject(String),
}

#[derive(Debug, Clone)]
pub struct Verdict {
    /// `Authentication-Results: ...\r\n`, ready to prepend.
    pub header: String,
    pub disposition: Disposition,
}

/// The SMTP facts the checks need.
pub struct Peer<'a> {
    pub ip: IpAddr,
    pub helo: &'a str,
    /// The envelope sender (empty for `<>`).
    pub mail_from: &'a str,
    /// Our name: the authserv-id of the header.
    pub hostname: &'a str,
}

pub async fn authenticate(dns: &Dns, raw: &[u8], peer: &Peer<'_>, on_reject: RejectAction) -> Verdict {
    let started = Instant::now();
    let verdict = match tokio::time::timeout(AUTH_TIMEOUT_DEFAULT, check(dns, raw, peer, on_reject)).await {
        Ok(v) => v,
        Err(_) => {
            metrics::counter!("meshmail_smtp_inbound_auth_timeouts_total").increment(1);
            Verdict {
                header: format!(
                    "Authentication-Results: {};\r\n\tspf=temperror; dkim=temperror; dmarc=temperror\r\n",
                    header_safe(peer.hostname)
                ),
                disposition: Disposition::Inbox,
            }
        }
    };
    metrics::histogram!("meshmail_smtp_inbound_auth_seconds").record(started.elapsed().as_secs_f64());
    verdict
}

async fn check(dns: &Dns, raw: &[u8], peer: &Peer<'_>, on_reject: RejectAction) -> Verdict {
    let auth = dns.authenticator();
    let helo = if peer.helo.is_empty() { "unknown" } else { peer.helo };
    let spf = auth
        .verify_spf(SpfParameters::verify(peer.ip, helo, peer.hostname, peer.mail_from))
        .await;
    count("spf", spf_label(spf.result()));
    let mail_from_domain = match peer.mail_from.rsplit_once('@') {
        Some((_, d)) => d.to_string(),
        None => helo.to_string(),
    };
    let Some(message) = AuthenticatedMessage::parse(raw) else {
        // Not even a header block: nothing to verify beyond SPF.
        let header = AuthenticationResults::new(peer.hostname)
            .with_spf_mailfrom_result(&spf, peer.ip, peer.mail_from, helo)
            .to_header();
        return Verdict {
            header,
            disposition: Disposition::Inbox,
        };
    };
    let dkim = auth.verify_dkim(&message).await;
    for d in &dkim {
        count("dkim", dkim_label(d.result()));
    }
    let arc = auth.verify_arc(&message).await;
    count("arc", dkim_label(arc.result()));
    let dmarc = auth
        .verify_dmarc(DmarcParameters::new(&message, &dkim, &mail_from_domain, &spf))
        .await;
    let dmarc_result = dmarc.result();
    count("dmarc", dmarc_label(&dmarc_result));
    let header_from = message.from().to_string();
    let header = AuthenticationResults::new(peer.hostname)
        .with_dkim_results(&dkim, &header_from)
        .with_spf_mailfrom_result(&spf, peer.ip, peer.mail_from, helo)
        .with_arc_result(&arc, peer.ip)
        .with_dmarc_result(&dmarc)
        .to_header();
    // mail-auth writes nothing for an unsigned message; RFC 8601 §2.7.1
    // has `dkim=none` for it, which filters and clients read.
    let lead = format!("Authentication-Results: {}", peer.hostname);
    let header = match header.strip_prefix(lead.as_str()) {
        Some(rest) if dkim.is_empty() => format!("{lead};\r\n\tdkim=none{rest}"),
        _ => header,
    };
    let failed = matches!(dmarc_result, DmarcResult::Fail(_));
    let disposition = match (failed, dmarc.policy()) {
        (true, Policy::Reject) if on_reject == RejectAction::Reject => Disposition::Reject(format!(
            "DMARC policy of {} rejects this message (RFC 7489)",
            header_safe(dmarc.domain())
        )),
        (true, Policy::Reject) | (true, Policy::Quarantine) => Disposition::Junk,
        _ => Disposition::Inbox,
    };
    Verdict { header, disposition }
}

fn count(method: &'static str, result: &'static str) {
    metrics::counter!("meshmail_smtp_inbound_auth_results_total", "method" => method, "result" => result).increment(1);
}

fn spf_label(r: SpfResult) -> &'static str {
    match r {
        SpfResult::Pass => "pass",
        SpfResult::Fail => "fail",
        SpfResult::SoftFail => "softfail",
        SpfResult::Neutral => "neutral",
        SpfResult::TempError => "temperror",
        SpfResult::PermError => "permerror",
        SpfResult::None => "none",
    }
}

fn dkim_label(r: &DkimResult) -> &'static str {
    match r {
        DkimResult::Pass => "pass",
        DkimResult::Neutral(_) => "neutral",
        DkimResult::Fail(_) => "fail",
        DkimResult::PermError(_) => "permerror",
        DkimResult::TempError(_) => "temperror",
        DkimResult::None => "none",
    }
}

fn dmarc_label(r: &DmarcResult) -> &'static str {
    match r {
        DmarcResult::Pass => "pass",
        DmarcResult::Fail(_) => "fail",
        DmarcResult::TempError(_) => "temperror",
        DmarcResult::PermError(_) => "permerror",
        DmarcResult::None => "none",
    }
}

/// Names from the network end up in headers and replies: printable ASCII only.
fn header_safe(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_graphic()).take(255).collect()
}
