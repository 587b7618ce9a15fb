//! Leaving the not-authenticated phase: STARTTLS, LOGIN and AUTHENTICATE
//! PLAIN, with the per-account session cap and the login-failure limits.

use std::sync::Arc;

use meshmail_actors::auth::AuthOutcome;
use meshmail_actors::shard::subscribe;
use meshmail_storage::ids::AccountId;

use super::{AUTOLOGOUT, COMMAND_LINE_MAX, Imap, ImapShared, Login, Next, Phase, State};
use crate::imap::wire::response::{self, Status};
use crate::net::{Conn, ConnError, Line};

/// Failed logins before the connection is closed.
const LOGIN_FAILURES_MAX: u32 = 3;

/// Counts a logged-in session against its account's cap while it lives.
pub(super) struct AccountSlot {
    shared: Arc<ImapShared>,
    account: AccountId,
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

impl State {
    pub(super) async fn starttls(&mut self, conn: &mut Conn, tag: &str) -> Result<Next, ConnError> {
        let Some(tls) = self.shared.tls.clone() else {
            self.tagged(conn, tag, Status::No, None, "TLS is not available");
            return Ok(Next::Continue);
        };
        if conn.is_tls() {
            self.tagged(conn, tag, Status::Bad, None, "TLS already active");
            return Ok(Next::Continue);
        }
        self.tagged(conn, tag, Status::Ok, None, "Begin TLS negotiation now");
        conn.start_tls(&tls).await?;
        Ok(Next::Continue)
    }
}

impl Imap {
    pub(super) async fn login(
        &mut self,
        conn: &mut Conn,
        tag: &str,
        user: &str,
        password: &str,
    ) -> Result<Next, ConnError> {
        if !self.st.auth_allowed(conn) {
            self.st
                .tagged(conn, tag, Status::No, Some("PRIVACYREQUIRED"), "Use STARTTLS first");
            return Ok(Next::Continue);
        }
        self.finish_auth(conn, tag, user, password).await
    }

    pub(super) async fn authenticate(
        &mut self,
        conn: &mut Conn,
        tag: &str,
        mech: &str,
        initial: Option<Vec<u8>>,
    ) -> Result<Next, ConnError> {
        if !mech.eq_ignore_ascii_case("PLAIN") {
            self.st
                .tagged(conn, tag, Status::No, Some("CANNOT"), "Only PLAIN is supported");
            return Ok(Next::Continue);
        }
        if !self.st.auth_allowed(conn) {
            self.st
                .tagged(conn, tag, Status::No, Some("PRIVACYREQUIRED"), "Use STARTTLS first");
            return Ok(Next::Continue);
        }
        let data = match initial {
            Some(d) => d,
            None => {
                conn.send(&response::continuation(""));
                let line = match conn.read_line(COMMAND_LINE_MAX).await? {
                    Line::Complete(l) => l,
                    Line::TooLong => Vec::new(),
                };
                match crate::imap::wire::parse_sasl_response(&line) {
                    Ok(crate::imap::wire::SaslResponse::Data(d)) => d,
                    Ok(crate::imap::wire::SaslResponse::Cancel) => {
                        self.st.tagged(conn, tag, Status::Bad, None, "Authentication cancelled");
                        return Ok(Next::Continue);
                    }
                    Err(why) => {
                        self.st.tagged(conn, tag, Status::Bad, None, why);
                        return Ok(Next::Continue);
                    }
                }
            }
        };
        let parts: Vec<&[u8]> = data.split(|b| *b == 0).collect();
        let [authz, authc, pass] = parts.as_slice() else {
            self.st.tagged(conn, tag, Status::Bad, None, "Malformed PLAIN response");
            return Ok(Next::Continue);
        };
        let (authz, authc, pass) = (
            String::from_utf8_lossy(authz),
            String::from_utf8_lossy(authc),
            String::from_utf8_lossy(pass),
        );
        if !authz.is_empty() && !authz.eq_ignore_ascii_case(&authc) {
            self.st.tagged(
                conn,
                tag,
                Status::No,
                Some("AUTHORIZATIONFAILED"),
                "Proxy login is not supported",
            );
            return Ok(Next::Continue);
        }
        self.finish_auth(conn, tag, &authc, &pass).await
    }

    async fn finish_auth(&mut self, conn: &mut Conn, tag: &str, user: &str, password: &str) -> Result<Next, ConnError> {
        match self
            .st
            .shared
            .auth
            .authenticate(user, password, self.st.peer.ip())
            .await
        {
            AuthOutcome::Ok(account) => {
                {
                    let mut m = self.st.shared.sessions_per_account.lock().expect("sessions map");
                    let n = m.entry(account.id).or_insert(0);
                    if *n >= self.st.shared.max_sessions_per_account {
                        drop(m);
                        self.st.tagged(
                            conn,
                            tag,
                            Status::No,
                            Some("LIMIT"),
                            "Too many sessions for this account",
                        );
                        return Ok(Next::Continue);
                    }
                    *n += 1;
                }
                let slot = AccountSlot {
                    shared: self.st.shared.clone(),
                    account: account.id,
                };
                self.st.hints = Some(subscribe(&self.st.shared.ctx, account.id));
                conn.set_idle_timeout(AUTOLOGOUT);
                self.phase = Phase::Authenticated(Login { account, _slot: slot });
                let caps = format!("CAPABILITY {}", self.st.capabilities(conn, true).join(" "));
                self.st.tagged(conn, tag, Status::Ok, Some(&caps), "Logged in");
                Ok(Next::Continue)
            }
            AuthOutcome::Failed => {
                self.st.login_failures += 1;
                self.st.tagged(
                    conn,
                    tag,
                    Status::No,
                    Some("AUTHENTICATIONFAILED"),
                    "Invalid credentials",
                );
                if self.st.login_failures >= LOGIN_FAILURES_MAX {
                    conn.send(&response::untagged(Status::Bye, None, "Too many failed logins"));
                    return Ok(Next::Logout);
                }
                Ok(Next::Continue)
            }
            AuthOutcome::RateLimited { retry_after } => {
                let text = format!("Too many failed attempts; try again in {} s", retry_after.as_secs());
                self.st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), &text);
                Ok(Next::Continue)
            }
            AuthOutcome::Unavailable(_) => {
                self.st.tagged(
                    conn,
                    tag,
                    Status::No,
                    Some("UNAVAILABLE"),
                    "Authentication temporarily unavailable",
                );
                Ok(Next::Continue)
            }
        }
    }
}
