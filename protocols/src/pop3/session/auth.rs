//! The AUTHORIZATION state: STLS (RFC 2595 §4), USER/PASS (RFC 1939 §7),
//! AUTH PLAIN (RFC 5034), with the per-account session cap and the same
//! login-failure limits as IMAP (the node's one [`Authenticator`]).
//!
//! [`Authenticator`]: meshmail_actors::auth::Authenticator

use std::sync::Arc;

use meshmail_actors::auth::AuthOutcome;
use meshmail_storage::ids::AccountId;

use super::maildrop::{LoadError, Maildrop};
use super::{Next, Phase, Pop3, Pop3Shared, Transaction, refuse};
use crate::net::{Conn, ConnError, Line};
use crate::pop3::wire::Command;
use crate::pop3::wire::response::{self, Code};
use crate::pop3::wire::sasl::{self, SASL_LINE_MAX, SaslError};

/// Failed logins before the connection is closed (as IMAP).
const LOGIN_FAILURES_MAX: u32 = 3;
/// RFC 2595 §4 leaves the text free; Dovecot's words, which clients and
/// their users have seen for years.
const PLAINTEXT_REFUSED: &str = "Plaintext authentication disallowed on non-secure (SSL/TLS) connections.";

/// Counts a logged-in session against its account's cap while it lives.
pub(super) struct AccountSlot {
    shared: Arc<Pop3Shared>,
    account: AccountId,
}

impl AccountSlot {
    /// A slot for `account`, or None when it has its cap of sessions.
    fn take(shared: &Arc<Pop3Shared>, account: AccountId) -> Option<AccountSlot> {
        let mut m = shared.sessions_per_account.lock().expect("sessions map");
        let n = m.entry(account).or_insert(0);
        if *n >= shared.max_sessions_per_account {
            return None;
        }
        *n += 1;
        Some(AccountSlot {
            shared: shared.clone(),
            account,
        })
    }
}

impl Drop for AccountSlot {
    fn drop(&mut self) {
        let mut m = self.shared.sessions_per_account.lock().expect("sessions map");
        if let Some(n) = m.get_mut(&self.account) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.account);
            }
        }
    }
}

impl Pop3 {
    /// A command in the AUTHORIZATION state (QUIT and CAPA are the
    /// dispatcher's).
    pub(super) async fn authorization(&mut self, conn: &mut Conn, cmd: Command) -> Result<Next, ConnError> {
        let name = cmd.name();
        let pending_user = match &mut self.phase {
            Phase::Authorization { user } => user.take(),
            Phase::Transaction(_) => None,
        };
        match cmd {
            Command::Stls => return self.stls(conn).await,
            Command::Apop => refuse(conn, name, None, "APOP is not supported."),
            _ if matches!(cmd, Command::User(_) | Command::Pass(_) | Command::Auth { .. })
                && !self.auth_allowed(conn) =>
            {
                metrics::counter!("meshmail_pop3_auth_failures_total", "reason" => "plaintext").increment(1);
                refuse(conn, name, Some(Code::Auth), PLAINTEXT_REFUSED)
            }
            Command::User(user) => {
                self.phase = Phase::Authorization { user: Some(user) };
                conn.send(&response::ok("Send your password."));
            }
            Command::Pass(password) => match pending_user {
                Some(user) => return self.login(conn, name, &user, &password).await,
                None => refuse(conn, name, None, "No username given."),
            },
            Command::Auth { mechanism: None, .. } => conn.send(&response::multi_line("Mechanisms follow", &["PLAIN"])),
            Command::Auth {
                mechanism: Some(mech),
                initial_response,
            } => return self.auth_plain(conn, &mech, initial_response).await,
            _ => refuse(conn, name, None, "Log in first."),
        }
        Ok(Next::Continue)
    }

    async fn stls(&mut self, conn: &mut Conn) -> Result<Next, ConnError> {
        let Some(tls) = self.shared.tls.clone() else {
            refuse(conn, "STLS", None, "TLS is not available.");
            return Ok(Next::Continue);
        };
        if conn.is_tls() {
            refuse(conn, "STLS", None, "TLS is already active.");
            return Ok(Next::Continue);
        }
        conn.send(&response::ok("Begin TLS negotiation now."));
        // Discards whatever plaintext followed STLS (RFC 2595 §4 and the
        // command injection of CVE-2011-0411's kind).
        conn.start_tls(&tls).await?;
        Ok(Next::Continue)
    }

    /// AUTH PLAIN, with an initial response or after a `+ ` continuation.
    async fn auth_plain(&mut self, conn: &mut Conn, mech: &str, initial: Option<String>) -> Result<Next, ConnError> {
        if mech != "PLAIN" {
            refuse(conn, "AUTH", None, "Unsupported authentication mechanism.");
            return Ok(Next::Continue);
        }
        let line = match initial {
            Some(ir) => ir.into_bytes(),
            None => {
                conn.send(&response::continuation(""));
                match conn.read_line(SASL_LINE_MAX).await? {
                    Line::Complete(l) => l,
                    Line::TooLong => {
                        refuse(conn, "AUTH", None, "Authentication response too long.");
                        return Ok(Next::Continue);
                    }
                }
            }
        };
        let plain = match sasl::decode_plain(&line) {
            Ok(p) => p,
            Err(e @ (SaslError::Cancelled | SaslError::NotBase64 | SaslError::Malformed)) => {
                refuse(conn, "AUTH", None, &e.to_string());
                return Ok(Next::Continue);
            }
        };
        if !plain.authzid.is_empty() && !plain.authzid.eq_ignore_ascii_case(&plain.authcid) {
            refuse(conn, "AUTH", Some(Code::Auth), "Proxy login is not supported.");
            return Ok(Next::Continue);
        }
        self.login(conn, "AUTH", &plain.authcid, &plain.password).await
    }

    /// Checks the credentials, takes a session slot and opens the
    /// maildrop: the TRANSACTION state, or an answer saying why not.
    async fn login(
        &mut self,
        conn: &mut Conn,
        name: &'static str,
        user: &str,
        password: &str,
    ) -> Result<Next, ConnError> {
        let outcome = self.shared.auth.authenticate(user, password, self.peer.ip()).await;
        let account = match outcome {
            AuthOutcome::Ok(account) => account,
            AuthOutcome::Failed => {
                metrics::counter!("meshmail_pop3_auth_failures_total", "reason" => "failed").increment(1);
                self.login_failures += 1;
                refuse(conn, name, Some(Code::Auth), "Authentication failed.");
                if self.login_failures >= LOGIN_FAILURES_MAX {
                    conn.send(&response::err(None, "Too many failed logins."));
                    return Ok(Next::Quit);
                }
                return Ok(Next::Continue);
            }
            // Not [AUTH]: the password may be right, and a client told it
            // is wrong asks its user for another (RFC 3206 §4).
            AuthOutcome::RateLimited { retry_after } => {
                metrics::counter!("meshmail_pop3_auth_failures_total", "reason" => "rate_limited").increment(1);
                let text = format!("Too many failed attempts; try again in {} s.", retry_after.as_secs());
                refuse(conn, name, Some(Code::SysTemp), &text);
                return Ok(Next::Continue);
            }
            AuthOutcome::Unavailable(_) => {
                metrics::counter!("meshmail_pop3_auth_failures_total", "reason" => "unavailable").increment(1);
                refuse(
                    conn,
                    name,
                    Some(Code::SysTemp),
                    "Authentication temporarily unavailable.",
                );
                return Ok(Next::Continue);
            }
        };
        let Some(slot) = AccountSlot::take(&self.shared, account.id) else {
            refuse(conn, name, Some(Code::InUse), "Too many sessions for this account.");
            return Ok(Next::Continue);
        };
        match Maildrop::load(&self.shared.ctx.db, account.id).await {
            Ok(drop) => {
                let (count, octets) = drop.stat();
                self.phase = Phase::Transaction(Box::new(Transaction { drop, _slot: slot }));
                conn.send(&response::ok(&format!(
                    "Logged in; maildrop has {count} messages ({octets} octets)."
                )));
            }
            Err(LoadError::NoInbox) => refuse(conn, name, Some(Code::SysPerm), "The account has no INBOX."),
            Err(LoadError::Store(e)) => {
                tracing::warn!(error = %e, "pop3: opening the maildrop failed");
                refuse(
                    conn,
                    name,
                    Some(Code::SysTemp),
                    "Unable to open the maildrop; try again later.",
                );
            }
        }
        Ok(Next::Continue)
    }
}
