//! `[dns]` and `[outbound]`: the resolver shared by outbound delivery and
//! inbound authentication, and the outbound queue's runner and SMTP client
//! (retries, timeouts, per-destination limits, MTA-STS).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

/// The resolver shared by outbound delivery and inbound authentication.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsSection {
    /// One name server "IP:PORT" (tests, private DNS); default: the
    /// system's `/etc/resolv.conf`.
    #[serde(default)]
    pub resolver: Option<SocketAddr>,
    /// Per-query timeout; a lookup that runs out is a temporary failure.
    #[serde(default = "d_dns_timeout")]
    pub timeout_ms: u64,
}

impl Default for DnsSection {
    fn default() -> Self {
        DnsSection {
            resolver: None,
            timeout_ms: d_dns_timeout(),
        }
    }
}

fn d_dns_timeout() -> u64 {
    5000
}

/// Outbound delivery (`[outbound]`): the queue runner and its SMTP client.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundSection {
    /// Seconds before retry 1, 2, ...; the last one repeats. Up to 10%
    /// jitter is added so retries of many messages spread out.
    #[serde(default = "d_retry_schedule")]
    pub retry_schedule_s: Vec<u64>,
    /// A message not delivered this long after it was queued is bounced.
    #[serde(default = "d_max_lifetime")]
    pub max_lifetime_s: u64,
    /// A delay DSN goes to the sender once a message waited this long;
    /// 0 turns delay warnings off.
    #[serde(default = "d_delay_warning")]
    pub delay_warning_s: u64,
    /// A smarthost "host:port" every message is relayed through instead of
    /// the recipients' MX hosts.
    #[serde(default)]
    pub relay: Option<String>,
    /// AUTH PLAIN to the relay (sent only over TLS, or to a loopback relay).
    #[serde(default)]
    pub relay_username: Option<String>,
    #[serde(default)]
    pub relay_password: Option<String>,
    /// Port of the remote MX hosts (25; tests point it at a local server).
    #[serde(default = "d_mx_port")]
    pub mx_port: u16,
    /// Concurrent connections per destination domain.
    #[serde(default = "d_per_destination")]
    pub per_destination_max: usize,
    #[serde(default = "d_connect_timeout")]
    pub connect_timeout_s: u64,
    /// The greeting and the EHLO answer.
    #[serde(default = "d_greeting_timeout")]
    pub greeting_timeout_s: u64,
    /// MAIL, RCPT, DATA, STARTTLS, AUTH and each body write.
    #[serde(default = "d_command_timeout")]
    pub command_timeout_s: u64,
    /// The reply to the end of data.
    #[serde(default = "d_data_timeout")]
    pub data_timeout_s: u64,
    /// How often each node looks for due items of the shards it owns.
    #[serde(default = "d_scan_interval")]
    pub scan_interval_ms: u64,
    /// Items in flight per node at most.
    #[serde(default = "d_in_flight")]
    pub in_flight_max: usize,
    /// Extra trusted CA certificates (PEM) for the SMTP client's TLS, on
    /// top of the system's roots (a private CA; tests).
    #[serde(default)]
    pub tls_ca_file: Option<PathBuf>,
    /// Sign mail from local domains that have a DKIM key (`meshmail dkim generate`).
    #[serde(default = "crate::config::d_true")]
    pub dkim_sign: bool,
    /// Apply MTA-STS policies (RFC 8461) of recipient domains (never with
    /// a relay: the smarthost is then responsible).
    #[serde(default = "crate::config::d_true")]
    pub mta_sts: bool,
    /// The HTTPS port policies are fetched from (`mta-sts.<domain>`); 443
    /// outside tests. The certificate must verify against the system's
    /// roots plus `tls_ca_file`.
    #[serde(default = "d_mta_sts_port")]
    pub mta_sts_port: u16,
    /// The whole policy fetch: connect, TLS, request and answer.
    #[serde(default = "d_mta_sts_timeout")]
    pub mta_sts_timeout_s: u64,
    /// A connection to a destination is kept this long after its messages
    /// are done, for the next scan's messages there (RSET before reuse);
    /// 0: close it at once.
    #[serde(default = "d_connection_idle")]
    pub connection_idle_timeout_s: u64,
    /// Run the queue runner on this node. Off: mail for remote recipients
    /// is accepted and stays queued until a node that runs it owns it.
    #[serde(default = "crate::config::d_true")]
    pub enabled: bool,
}

impl Default for OutboundSection {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

fn d_retry_schedule() -> Vec<u64> {
    vec![60, 300, 900, 1800, 3600, 7200, 14400]
}
fn d_max_lifetime() -> u64 {
    5 * 24 * 3600
}
fn d_delay_warning() -> u64 {
    4 * 3600
}
fn d_mx_port() -> u16 {
    25
}
fn d_per_destination() -> usize {
    20
}
fn d_connect_timeout() -> u64 {
    30
}
fn d_greeting_timeout() -> u64 {
    300
}
fn d_command_timeout() -> u64 {
    300
}
fn d_data_timeout() -> u64 {
    600
}
fn d_connection_idle() -> u64 {
    5
}
fn d_mta_sts_port() -> u16 {
    443
}
fn d_mta_sts_timeout() -> u64 {
    20
}
fn d_scan_interval() -> u64 {
    1000
}
fn d_in_flight() -> usize {
    1000
}

impl OutboundSection {
    /// The runtime settings; fails on a relay that is not host:port.
    pub fn runtime(&self, hostname: &str) -> anyhow::Result<meshmail_protocols::outbound::OutboundConfig> {
        use std::time::Duration;

        use meshmail_protocols::outbound::client::Timeouts;
        use meshmail_protocols::outbound::{OutboundConfig, Relay};
        if self.retry_schedule_s.is_empty() {
            anyhow::bail!("[outbound] retry_schedule_s needs at least one delay");
        }
        let relay = match &self.relay {
            None => None,
            Some(r) => {
                let (host, port) = r
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h.trim_start_matches('[').trim_end_matches(']'), p.parse::<u16>().ok()?)))
                    .filter(|(h, _)| !h.is_empty())
                    .with_context(|| format!("[outbound] relay = {r:?} is not \"host:port\""))?;
                let auth = match (&self.relay_username, &self.relay_password) {
                    (Some(u), Some(p)) => Some((u.clone(), p.clone())),
                    (None, None) => None,
                    _ => anyhow::bail!("[outbound] relay_username and relay_password go together"),
                };
                Some(Relay {
                    host: host.to_string(),
                    port,
                    auth,
                })
            }
        };
        let s = |n: u64| Duration::from_secs(n.max(1));
        Ok(OutboundConfig {
            hostname: hostname.to_string(),
            retry_schedule: self.retry_schedule_s.iter().map(|&n| s(n)).collect(),
            max_lifetime: s(self.max_lifetime_s),
            delay_warning: (self.delay_warning_s > 0).then(|| s(self.delay_warning_s)),
            relay,
            mx_port: self.mx_port,
            per_destination_max: self.per_destination_max.max(1),
            timeouts: Timeouts {
                connect: s(self.connect_timeout_s),
                greeting: s(self.greeting_timeout_s),
                command: s(self.command_timeout_s),
                data_end: s(self.data_timeout_s),
            },
            scan_interval: Duration::from_millis(self.scan_interval_ms.max(50)),
            in_flight_max: self.in_flight_max.max(1),
            dkim_sign: self.dkim_sign,
            mta_sts: meshmail_protocols::outbound::MtaStsConfig {
                enabled: self.mta_sts,
                port: self.mta_sts_port,
                fetch_timeout: s(self.mta_sts_timeout_s),
            },
            connection_idle_timeout: Duration::from_secs(self.connection_idle_timeout_s),
            ..OutboundConfig::default()
        })
    }
}
