//! Where mail for a domain goes (RFC 5321 §5.1): its MX hosts in preference
//! order, each resolved to addresses; no MX record at all means the domain's
//! own A/AAAA ("implicit MX"); a null MX (RFC 7505: one record, preference
//! 0, exchange ".") means the domain accepts no mail.

use std::net::{IpAddr, SocketAddr};

use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::RData;

use crate::dns::Dns;

/// MX hosts tried per delivery, and addresses per host: bounds on how long
/// one attempt can take when every host is down.
pub const MX_HOSTS_MAX: usize = 5;
pub const ADDRS_PER_HOST_MAX: usize = 2;

/// One host to try, with its addresses in the order to try them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub host: String,
    pub addrs: Vec<SocketAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// RFC 7505: the domain says it takes no mail (permanent, 5.1.10).
    #[error("the domain publishes a null MX: it accepts no mail")]
    NullMx,
    /// NXDOMAIN, or no MX and no address (permanent, 5.1.2).
    #[error("no such domain or no mail host: {0}")]
    NoSuchDomain(String),
    /// Timeouts, SERVFAIL: try again later.
    #[error("DNS lookup failed: {0}")]
    Temporary(String),
}

fn classify(e: &NetError, what: &str) -> Result<(), RouteError> {
    match e {
        NetError::Dns(DnsError::NoRecordsFound(nr)) if nr.response_code == ResponseCode::NXDomain => {
            Err(RouteError::NoSuchDomain(format!("{what}: NXDOMAIN")))
        }
        // NOERROR with no answer of this type: not an error here.
        NetError::Dns(DnsError::NoRecordsFound(_)) => Ok(()),
        other => Err(RouteError::Temporary(format!("{what}: {other}"))),
    }
}

/// The MX host names of `domain`, most preferred first (ties keep the
/// server's order), or the domain itself when it has no MX.
pub async fn mx_hosts(dns: &Dns, domain: &str) -> Result<Vec<String>, RouteError> {
    let fqdn = format!("{}.", domain.trim_end_matches('.'));
    let mut mx: Vec<(u16, String)> = match dns.resolver().mx_lookup(fqdn.as_str()).await {
        Ok(lookup) => lookup
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::MX(m) => Some((m.preference, m.exchange.to_ascii())),
                _ => None,
            })
            .collect(),
        Err(e) => {
            classify(&e, &format!("MX {domain}"))?;
            Vec::new()
        }
    };
    if mx.iter().any(|(_, host)| host == "." || host.is_empty()) {
        // RFC 7505 §3: a null MX, alone or (wrongly) with others, means no mail.
        return Err(RouteError::NullMx);
    }
    if mx.is_empty() {
        return Ok(vec![domain.trim_end_matches('.').to_string()]);
    }
    mx.sort_by_key(|(pref, _)| *pref);
    Ok(mx
        .into_iter()
        .map(|(_, h)| h.trim_end_matches('.').to_ascii_lowercase())
        .take(MX_HOSTS_MAX)
        .collect())
}

/// The addresses of one host (A and AAAA), at most [`ADDRS_PER_HOST_MAX`].
pub async fn host_addrs(dns: &Dns, host: &str, port: u16) -> Result<Vec<SocketAddr>, RouteError> {
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let fqdn = format!("{}.", host.trim_end_matches('.'));
    match dns.resolver().lookup_ip(fqdn.as_str()).await {
        Ok(ips) => Ok(ips
            .iter()
            .take(ADDRS_PER_HOST_MAX)
            .map(|ip| SocketAddr::new(ip, port))
            .collect()),
        Err(e) => {
            classify(&e, &format!("A/AAAA {host}"))?;
            Ok(Vec::new())
        }
    }
}

/// The hops for `domain`: MX hosts with their addresses. A host whose
/// lookup fails is skipped; only when none is left does the error count
/// (temporary unless every answer said the name does not exist).
pub async fn route(dns: &Dns, domain: &str, port: u16) -> Result<Vec<Hop>, RouteError> {
    let hosts = mx_hosts(dns, domain).await?;
    let mut hops = Vec::new();
    let mut last_err = None;
    for host in hosts {
        match host_addrs(dns, &host, port).await {
            Ok(addrs) if !addrs.is_empty() => hops.push(Hop { host, addrs }),
            Ok(_) => last_err = Some(RouteError::NoSuchDomain(format!("{host} has no address"))),
            Err(e) => last_err = Some(e),
        }
    }
    if hops.is_empty() {
        return Err(last_err.unwrap_or_else(|| RouteError::NoSuchDomain(domain.to_string())));
    }
    Ok(hops)
}
