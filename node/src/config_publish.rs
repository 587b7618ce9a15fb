//! `[publish]`: what the node tells the world about itself — the DNS
//! records `meshmail dns records` prints, the Thunderbird autoconfig file
//! and the MTA-STS policy the HTTP listener serves. Ports default to the
//! `[listen]` ports; set them where clients reach the node on others
//! (a port forward or a load balancer in front).

use serde::Deserialize;

use crate::config::Config;

/// MTA-STS policy mode (RFC 8461 §5): start with `testing`, move to
/// `enforce` once the TLS reports (TLS-RPT) show nothing fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MtaStsMode {
    Enforce,
    Testing,
    None,
}

impl MtaStsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MtaStsMode::Enforce => "enforce",
            MtaStsMode::Testing => "testing",
            MtaStsMode::None => "none",
        }
    }
}

/// RFC 8461 §3.2: `max_age` at most 31557600 s (about a year).
pub const MTA_STS_MAX_AGE_S_MAX: u64 = 31_557_600;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishSection {
    /// MX hosts for the domains (preference 10, 20, …); default: `hostname`.
    #[serde(default)]
    pub mx_hosts: Vec<String>,
    /// The SPF record's value.
    #[serde(default = "d_spf")]
    pub spf: String,
    /// DMARC policy (`p=`): none, quarantine or reject.
    #[serde(default = "d_dmarc_policy")]
    pub dmarc_policy: String,
    /// Where aggregate DMARC and TLS reports go; default postmaster@DOMAIN.
    #[serde(default)]
    pub report_address: Option<String>,
    #[serde(default = "d_mode")]
    pub mta_sts_mode: MtaStsMode,
    /// How long senders may cache the MTA-STS policy.
    #[serde(default = "d_max_age")]
    pub mta_sts_max_age_s: u64,
    /// Public ports, when not the `[listen]` ones.
    #[serde(default)]
    pub imap_port: Option<u16>,
    #[serde(default)]
    pub imaps_port: Option<u16>,
    #[serde(default)]
    pub pop3_port: Option<u16>,
    #[serde(default)]
    pub pop3s_port: Option<u16>,
    #[serde(default)]
    pub submission_port: Option<u16>,
    #[serde(default)]
    pub submissions_port: Option<u16>,
    /// JMAP's public HTTPS port (default: `[listen] https`'s). Set, it is
    /// published even with `https` off: a TLS proxy in front of the HTTP
    /// listener is the usual way to serve JMAP.
    #[serde(default)]
    pub jmap_port: Option<u16>,
}

impl Default for PublishSection {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

fn d_spf() -> String {
    "v=spf1 mx -all".into()
}
fn d_dmarc_policy() -> String {
    "quarantine".into()
}
fn d_mode() -> MtaStsMode {
    MtaStsMode::Testing
}
fn d_max_age() -> u64 {
    604_800
}

/// The public face, resolved from the config: hostnames and the ports of
/// the listeners that are on (None: not served).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicFace {
    pub hostname: String,
    pub mx_hosts: Vec<String>,
    pub spf: String,
    pub dmarc_policy: String,
    pub report_address: Option<String>,
    pub mta_sts_mode: MtaStsMode,
    pub mta_sts_max_age_s: u64,
    pub imap: Option<u16>,
    pub imaps: Option<u16>,
    pub pop3: Option<u16>,
    pub pop3s: Option<u16>,
    pub submission: Option<u16>,
    pub submissions: Option<u16>,
    pub jmap: Option<u16>,
}

impl Config {
    pub fn public_face(&self) -> PublicFace {
        let p = &self.publish;
        let l = &self.listen;
        let port = |over: Option<u16>, addr: Option<std::net::SocketAddr>| addr.map(|a| over.unwrap_or(a.port()));
        PublicFace {
            hostname: self.hostname.clone(),
            mx_hosts: if p.mx_hosts.is_empty() {
                vec![self.hostname.clone()]
            } else {
                p.mx_hosts.clone()
            },
            spf: p.spf.clone(),
            dmarc_policy: p.dmarc_policy.clone(),
            report_address: p.report_address.clone(),
            mta_sts_mode: p.mta_sts_mode,
            mta_sts_max_age_s: p.mta_sts_max_age_s,
            imap: port(p.imap_port, l.imap),
            imaps: port(p.imaps_port, l.imaps),
            pop3: port(p.pop3_port, self.pop3.listen),
            pop3s: port(p.pop3s_port, self.pop3.listen_tls),
            submission: port(p.submission_port, l.submission),
            submissions: port(p.submissions_port, l.submissions),
            jmap: p.jmap_port.or(l.https.map(|a| a.port())),
        }
    }
}
