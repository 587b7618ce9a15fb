//! `[auth]`: limits on failed logins, shared by SMTP AUTH, IMAP and JMAP.

use std::time::Duration;

use meshmail_actors::auth::AuthLimits;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// Failed logins from one client address (IPv6: /64) per window, to
    /// any accounts, before the address is refused.
    #[serde(default = "d_per_ip")]
    pub failures_per_ip_max: u32,
    /// Failed logins for one account from one client address per window
    /// before that account is refused from that address. Other addresses
    /// keep logging in: an account refused everywhere was a lockout anyone
    /// could cause (issue 40 item 5); its failures from anywhere slow down
    /// its failure answers instead (`meshmail_actors::auth_limits`).
    #[serde(default = "d_per_account")]
    pub failures_per_account_max: u32,
    /// The window, from its first failure; refusals say how much is left.
    #[serde(default = "d_window")]
    pub failure_window_s: u64,
}

impl Default for AuthSection {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl AuthSection {
    /// The limits as the authenticator takes them (ranges checked by
    /// `Config::validate()`).
    pub fn limits(&self) -> AuthLimits {
        AuthLimits {
            failures_per_ip_max: self.failures_per_ip_max,
            failures_per_account_max: self.failures_per_account_max,
            failure_window: Duration::from_secs(self.failure_window_s),
        }
    }
}

fn d_per_ip() -> u32 {
    AuthLimits::default().failures_per_ip_max
}
fn d_per_account() -> u32 {
    AuthLimits::default().failures_per_account_max
}
fn d_window() -> u64 {
    AuthLimits::default().failure_window.as_secs()
}
