//! `[pop3]`: the POP3 listeners and their limits (RFC 1939 on INBOX).
//!
//! Both listeners are off unless configured: POP3 is a download-and-delete
//! protocol an operator opts into, and a node upgraded in place must not
//! open a port it did not open before. `meshmail up` turns them on at its
//! dev ports (1110 and 1995, plus 10·i for node i); production uses 110
//! and 995 (`ops/config/production.toml`).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pop3Section {
    /// POP3 with STLS (RFC 2595), e.g. "0.0.0.0:110"; "off" (the default)
    /// starts no listener.
    #[serde(default, with = "crate::config::opt_addr")]
    pub listen: Option<SocketAddr>,
    /// POP3 over implicit TLS (RFC 8314), e.g. "0.0.0.0:995"; off unless set.
    #[serde(default, with = "crate::config::opt_addr")]
    pub listen_tls: Option<SocketAddr>,
    /// Allow USER/PASS and AUTH without TLS from loopback clients (dev and
    /// tests only; `--allow-plaintext-auth-on-loopback` sets it too).
    #[serde(default)]
    pub allow_plaintext_auth_on_loopback: bool,
    /// Logged-in POP3 sessions one account may hold at once (apart from
    /// IMAP's: a phone polling by POP3 does not crowd out IMAP clients).
    #[serde(default = "d_sessions_per_account")]
    pub max_sessions_per_account: usize,
    /// Concurrent connections per POP3 listener.
    #[serde(default = "d_max_connections")]
    pub max_connections: usize,
    /// Seconds of silence before a session is closed without the UPDATE
    /// state (nothing is deleted). RFC 1939 §3 asks for at least 10
    /// minutes, so values under 600 are refused by validation.
    #[serde(default = "d_idle_timeout_s")]
    pub idle_timeout_s: u64,
}

impl Default for Pop3Section {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl Pop3Section {
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_s)
    }
}

fn d_sessions_per_account() -> usize {
    10
}
fn d_max_connections() -> usize {
    2_000
}
fn d_idle_timeout_s() -> u64 {
    600
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_parsed_when_set() {
        let d = Pop3Section::default();
        assert_eq!((d.listen, d.listen_tls), (None, None));
        assert_eq!(d.idle_timeout(), Duration::from_secs(600));
        let s: Pop3Section = toml::from_str("listen = \"0.0.0.0:110\"\nlisten_tls = \"0.0.0.0:995\"\n").unwrap();
        assert_eq!(s.listen.unwrap().port(), 110);
        assert_eq!(s.listen_tls.unwrap().port(), 995);
        let off: Pop3Section = toml::from_str("listen = \"off\"\n").unwrap();
        assert_eq!(off.listen, None);
        assert!(toml::from_str::<Pop3Section>("port = 110\n").is_err());
    }
}
