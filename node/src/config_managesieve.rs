//! `[managesieve]`: the ManageSieve listener (RFC 5804), where mail
//! clients upload and activate their Sieve scripts.
//!
//! Off unless configured, like POP3: a node upgraded in place opens no
//! new port. `meshmail up` serves it at 4190 + 10·i for node i; production
//! uses 4190 (`ops/config/production.toml`). There is only `listen`:
//! RFC 5804 defines STARTTLS on 4190 and no implicit-TLS port.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManageSieveSection {
    /// ManageSieve with STARTTLS, e.g. "0.0.0.0:4190"; "off" (the
    /// default) starts no listener.
    #[serde(default, with = "crate::config::opt_addr")]
    pub listen: Option<SocketAddr>,
    /// Allow AUTHENTICATE PLAIN without TLS from loopback clients (dev and
    /// tests only; `--allow-plaintext-auth-on-loopback` sets it too).
    #[serde(default)]
    pub allow_plaintext_auth_on_loopback: bool,
    /// Concurrent connections to the listener.
    #[serde(default = "d_max_connections")]
    pub max_connections: usize,
    /// Seconds of silence before a session is closed.
    #[serde(default = "d_idle_timeout_s")]
    pub idle_timeout_s: u64,
}

impl Default for ManageSieveSection {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl ManageSieveSection {
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_s)
    }
}

fn d_max_connections() -> usize {
    500
}
fn d_idle_timeout_s() -> u64 {
    meshmail_protocols::managesieve::session::IDLE_TIMEOUT_DEFAULT.as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_parsed_when_set() {
        let d = ManageSieveSection::default();
        assert_eq!(d.listen, None);
        assert_eq!(d.idle_timeout(), Duration::from_secs(900));
        let s: ManageSieveSection = toml::from_str("listen = \"0.0.0.0:4190\"\n").unwrap();
        assert_eq!(s.listen.unwrap().port(), 4190);
        let off: ManageSieveSection = toml::from_str("listen = \"off\"\n").unwrap();
        assert_eq!(off.listen, None);
        assert!(toml::from_str::<ManageSieveSection>("listen_tls = \"0.0.0.0:5190\"\n").is_err());
    }
}
