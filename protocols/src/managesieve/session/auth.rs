//! STARTTLS (RFC 5804 §2.2) and AUTHENTICATE PLAIN (§2.1, RFC 4616),
//! with IMAP's and POP3's login-failure limits (the node's one
//! [`Authenticator`]).
//!
//! [`Authenticator`]: meshmail_actors::auth::Authenticator

use meshmail_actors::auth::AuthOutcome;

use super::{ManageSieve, Next, Read, User, read_sasl_response};
use crate::managesieve::wire::response::{self, Code, Status};
use crate::managesieve::wire::{SaslError, decode_plain};
use crate::net::{Conn, ConnError};

/// Failed logins before the connection is closed (as IMAP and POP3).
const LOGIN_FAILURES_MAX: u32 = 3;

impl ManageSieve {
    fn auth_failure(&self, reason: &'static str) {
        metrics::counter!("meshmail_managesieve_auth_failures_total", "reason" => reason).increment(1);
    }

    pub(super) async fn starttls(&mut self, conn: &mut Conn) -> Result<Next, ConnError> {
        let Some(tls) = self.shared.tls.clone() else {
            self.reply(conn, Status::No, None, "TLS is not available.");
            return Ok(Next::Continue);
        };
        if conn.is_tls() || self.user.is_some() {
            self.reply(conn, Status::No, None, "STARTTLS only once, before logging in.");
            return Ok(Next::Continue);
        }
        self.reply(conn, Status::Ok, None, "Begin TLS negotiation now.");
        // Drops whatever plaintext followed STARTTLS (command injection).
        conn.start_tls(&tls).await?;
        // §2.2: the server MUST send the capabilities again after TLS,
        // now with SASL PLAIN.
        let mut out = self.capability_lines(conn);
        out.extend(response::status(Status::Ok, None, "TLS negotiation successful."));
        conn.send(&out);
        Ok(Next::Continue)
    }

    /// AUTHENTICATE "PLAIN", with an initial response or after an empty
    /// server challenge (`""`), which the client answers with a string
    /// (`"*"` cancels).
    pub(super) async fn authenticate(
        &mut self,
        conn: &mut Conn,
        mechanism: &str,
        initial: Option<Vec<u8>>,
    ) -> Result<Next, ConnError> {
        if self.user.is_some() {
            self.reply(conn, Status::No, None, "Already authenticated.");
            return Ok(Next::Continue);
        }
        if mechanism != "PLAIN" {
            self.reply(conn, Status::No, None, "Unsupported authentication mechanism.");
            return Ok(Next::Continue);
        }
        if !self.auth_allowed(conn) {
            self.auth_failure("plaintext");
            let text = "Plaintext authentication disallowed on non-secure connections; STARTTLS first.";
            self.reply(conn, Status::No, Some(Code::EncryptNeeded), text);
            return Ok(Next::Continue);
        }
        let answer = match initial {
            Some(ir) => ir,
            None => {
                conn.send(b"\"\"\r\n");
                match read_sasl_response(conn).await? {
                    Ok(Ok(bytes)) => bytes,
                    Ok(Err(e)) => {
                        self.reply(conn, Status::No, None, &e.to_string());
                        return Ok(Next::Continue);
                    }
                    Err(Read::LineTooLong | Read::LiteralTooLong(_) | Read::Command(_)) => {
                        self.reply(conn, Status::Bye, None, "Authentication response too long.");
                        return Ok(Next::Close);
                    }
                }
            }
        };
        let plain = match decode_plain(&answer) {
            Ok(p) => p,
            Err(e @ (SaslError::Cancelled | SaslError::NotBase64 | SaslError::Malformed)) => {
                self.reply(conn, Status::No, None, &e.to_string());
                return Ok(Next::Continue);
            }
        };
        if !plain.authzid.is_empty() && !plain.authzid.eq_ignore_ascii_case(&plain.authcid) {
            self.reply(conn, Status::No, None, "Proxy login is not supported.");
            return Ok(Next::Continue);
        }
        self.login(conn, &plain.authcid, &plain.password).await
    }

    async fn login(&mut self, conn: &mut Conn, user: &str, password: &str) -> Result<Next, ConnError> {
        match self.shared.auth.authenticate(user, password, self.peer.ip()).await {
            AuthOutcome::Ok(account) => {
                self.user = Some(User {
                    account: account.id,
                    email: account.email,
                });
                self.reply(conn, Status::Ok, None, "Logged in.");
            }
            AuthOutcome::Failed => {
                self.auth_failure("failed");
                self.login_failures += 1;
                if self.login_failures >= LOGIN_FAILURES_MAX {
                    self.reply(conn, Status::Bye, None, "Too many failed logins.");
                    return Ok(Next::Close);
                }
                self.reply(conn, Status::No, None, "Authentication failed.");
            }
            AuthOutcome::RateLimited { retry_after } => {
                self.auth_failure("rate_limited");
                let text = format!("Too many failed attempts; try again in {} s.", retry_after.as_secs());
                self.reply(conn, Status::No, Some(Code::TryLater), &text);
            }
            AuthOutcome::Unavailable(_) => {
                self.auth_failure("unavailable");
                let text = "Authentication temporarily unavailable.";
                self.reply(conn, Status::No, Some(Code::TryLater), text);
            }
        }
        Ok(Next::Continue)
    }
}
