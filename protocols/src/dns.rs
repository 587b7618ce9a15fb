//! The node's one DNS resolver, shared by outbound delivery (MX, A/AAAA,
//! MTA-STS) and inbound authentication (SPF, DKIM, DMARC, ARC).
//!
//! It is `mail-auth`'s `MessageAuthenticator`, which wraps a hickory
//! `TokioResolver`: the authentication checks use it directly and the MX
//! lookups go through [`Dns::resolver`], so both see the same cache and the
//! same servers. `[dns] resolver = "IP:PORT"` points it at one server (tests,
//! private DNS); without it the system's `/etc/resolv.conf` is read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use mail_auth::MessageAuthenticator;

/// Every lookup is bounded: a DNS failure is a temporary result, never a
/// stalled session.
pub const DNS_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("DNS resolver setup: {0}")]
    Setup(String),
}

/// A cheap handle (an `Arc`) to the node's resolver.
#[derive(Clone)]
pub struct Dns {
    auth: Arc<MessageAuthenticator>,
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dns")
    }
}

impl Dns {
    /// `server`: one name server to ask over UDP and TCP (tests, private
    /// DNS); `None` reads the system configuration.
    pub fn new(server: Option<SocketAddr>, timeout: Duration) -> Result<Dns, DnsError> {
        let (config, mut opts) = match server {
            Some(addr) => {
                let mut udp = ConnectionConfig::udp();
                udp.port = addr.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = addr.port();
                let ns = NameServerConfig::new(addr.ip(), true, vec![udp, tcp]);
                (ResolverConfig::from_name_servers(vec![ns]), ResolverOpts::default())
            }
            None => hickory_resolver::system_conf::read_system_conf().map_err(|e| DnsError::Setup(e.to_string()))?,
        };
        opts.timeout = timeout;
        // Two tries per server: a lost UDP datagram is retried once, then
        // the caller sees a temporary failure.
        opts.attempts = 2;
        // Names in mail are always absolute: never append a search domain.
        opts.ndots = 0;
        let auth = MessageAuthenticator::new(config, opts).map_err(|e| DnsError::Setup(e.to_string()))?;
        Ok(Dns { auth: Arc::new(auth) })
    }

    /// The authentication checks (SPF, DKIM, DMARC, ARC) run on this.
    pub fn authenticator(&self) -> &MessageAuthenticator {
        &self.auth
    }

    /// Plain lookups (MX, A/AAAA, TXT for MTA-STS).
    pub fn resolver(&self) -> &hickory_resolver::TokioResolver {
        self.auth.resolver()
    }
}
