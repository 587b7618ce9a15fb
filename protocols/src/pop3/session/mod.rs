//! The POP3 session: one per connection, run by a session actor. RFC 1939's
//! states are the [`Phase`]: AUTHORIZATION (greeting, CAPA, STLS, USER/PASS,
//! AUTH PLAIN), TRANSACTION (the commands on a [`Maildrop`] snapshot of
//! INBOX) and UPDATE, which is QUIT's work in the TRANSACTION state
//! ([`Maildrop::update`]). A connection that ends any other way — the
//! client gone, the idle timer, the node stopping — never reaches UPDATE,
//! so nothing is deleted (RFC 1939 §6).
//!
//! This folder is POP3's session layer: it may use `pop3::wire`,
//! [`crate::net`], the store (reads) and the actors (logins through the
//! node's authenticator, every write through the account's shard actor).
//!
//! [`Maildrop`]: maildrop::Maildrop
//! [`Maildrop::update`]: maildrop::Maildrop::update

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::NodeCtx;
use meshmail_actors::session::{Ended, Session};
use meshmail_storage::ids::AccountId;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

mod auth;
pub mod maildrop;
mod transaction;

use self::auth::AccountSlot;
use self::maildrop::Maildrop;
use crate::net::{Conn, ConnError, Line, Stream};
use crate::pop3::wire::response::{self, CapaState, Code};
use crate::pop3::wire::{COMMAND_TEXT_MAX, Command, parse_command};

/// RFC 1939 §3: an autologout timer "MUST be of at least 10 minutes'
/// duration"; the config may raise it, never lower it below this.
pub const IDLE_TIMEOUT_MIN: Duration = Duration::from_secs(10 * 60);
/// Lines that fail to parse in one session before it is closed (without
/// the UPDATE state): room for a confused client to recover, none for a
/// probe to feed the parser forever. Dovecot's login process is stricter
/// (3 before login); a refused but well-formed command does not count.
const BAD_COMMANDS_MAX: u32 = 20;

/// What the sessions of one POP3 listener share.
pub struct Pop3Shared {
    pub ctx: Arc<NodeCtx>,
    pub auth: Arc<Authenticator>,
    pub tls: Option<TlsAcceptor>,
    /// POP3S (port 995): TLS from the first byte (RFC 8314).
    pub implicit_tls: bool,
    pub allow_plaintext_auth_on_loopback: bool,
    /// Silence after which the connection is closed, without a word and
    /// without the UPDATE state (RFC 1939 §3). At least [`IDLE_TIMEOUT_MIN`].
    pub idle_timeout: Duration,
    pub max_sessions_per_account: usize,
    pub sessions_per_account: Mutex<HashMap<AccountId, usize>>,
}

pub struct Pop3Session {
    shared: Arc<Pop3Shared>,
    stream: TcpStream,
    peer: SocketAddr,
}

impl Pop3Session {
    pub fn new(shared: Arc<Pop3Shared>, stream: TcpStream, peer: SocketAddr) -> Self {
        Pop3Session { shared, stream, peer }
    }
}

/// RFC 1939 §3's states. UPDATE has no variant: it runs inside QUIT and
/// the session ends with it.
enum Phase {
    /// The name USER gave, waiting for PASS.
    Authorization {
        user: Option<String>,
    },
    Transaction(Box<Transaction>),
}

/// A logged-in session: its maildrop, counted against the account's
/// session cap while it lives.
struct Transaction {
    drop: Maildrop,
    _slot: AccountSlot,
}

/// What a command asks of the loop.
enum Next {
    Continue,
    Quit,
}

struct Pop3 {
    shared: Arc<Pop3Shared>,
    peer: SocketAddr,
    phase: Phase,
    login_failures: u32,
}

#[async_trait]
impl Session for Pop3Session {
    fn kind(&self) -> &'static str {
        "pop3_session"
    }

    async fn run(self: Box<Self>) -> Ended {
        let Pop3Session { shared, stream, peer } = *self;
        let listener = if shared.implicit_tls { "pop3s" } else { "pop3" };
        metrics::counter!("meshmail_pop3_sessions_total", "listener" => listener).increment(1);
        let mut conn = Conn::new(Stream::Plain(stream), shared.idle_timeout.max(IDLE_TIMEOUT_MIN));
        if shared.implicit_tls {
            let Some(tls) = &shared.tls else { return Ended::Closed };
            if conn.start_tls(tls).await.is_err() {
                return Ended::Closed;
            }
        }
        let mut pop = Pop3 {
            shared,
            peer,
            phase: Phase::Authorization { user: None },
            login_failures: 0,
        };
        conn.send(&response::ok("meshmail POP3 ready."));
        match pop.converse(&mut conn).await {
            Ok(()) => {}
            // RFC 1939 §3: the timer closes the connection without a
            // response, and without entering the UPDATE state.
            Err(ConnError::TimedOut) => metrics::counter!("meshmail_pop3_timeouts_total").increment(1),
            Err(ConnError::Io(e)) => tracing::debug!(peer = %pop.peer, error = %e, "pop3 connection error"),
            Err(ConnError::Closed) => {}
        }
        conn.shutdown().await;
        Ended::Closed
    }
}

/// Queues `-ERR [code] text` and counts it under the command's name.
fn refuse(conn: &mut Conn, command: &'static str, code: Option<Code>, text: &str) {
    metrics::counter!("meshmail_pop3_errors_total", "command" => command).increment(1);
    conn.send(&response::err(code, text));
}

impl Pop3 {
    fn auth_allowed(&self, conn: &Conn) -> bool {
        conn.is_tls() || (self.shared.allow_plaintext_auth_on_loopback && self.peer.ip().is_loopback())
    }

    fn capa(&self, conn: &Conn) -> Vec<&'static str> {
        response::capabilities(CapaState {
            stls: self.shared.tls.is_some() && !conn.is_tls(),
            login: self.auth_allowed(conn),
            authenticated: matches!(self.phase, Phase::Transaction(_)),
        })
    }

    /// Reads and runs commands until QUIT or an error.
    async fn converse(&mut self, conn: &mut Conn) -> Result<(), ConnError> {
        let mut bad = 0u32;
        loop {
            let parsed = match conn.read_line(COMMAND_TEXT_MAX).await? {
                Line::Complete(line) => parse_command(&line),
                Line::TooLong => Err(crate::pop3::wire::ParseError::TooLong),
            };
            let cmd = match parsed {
                Ok(cmd) => cmd,
                Err(e) => {
                    bad += 1;
                    metrics::counter!("meshmail_pop3_bad_commands_total").increment(1);
                    refuse(conn, "unparsed", None, &e.to_string());
                    if bad >= BAD_COMMANDS_MAX {
                        conn.send(&response::err(None, "Too many bad commands."));
                        return Ok(());
                    }
                    continue;
                }
            };
            let (name, started) = (cmd.name(), Instant::now());
            metrics::counter!("meshmail_pop3_commands_total", "command" => name).increment(1);
            let next = self.dispatch(conn, cmd).await?;
            metrics::histogram!("meshmail_pop3_command_seconds", "command" => name)
                .record(started.elapsed().as_secs_f64());
            if let Next::Quit = next {
                return Ok(());
            }
        }
    }

    async fn dispatch(&mut self, conn: &mut Conn, cmd: Command) -> Result<Next, ConnError> {
        let name = cmd.name();
        match (&mut self.phase, cmd) {
            (_, Command::Capa) => conn.send(&response::multi_line("Capability list follows", &self.capa(conn))),
            (Phase::Authorization { .. }, Command::Quit) => {
                conn.send(&response::ok("meshmail POP3 signing off."));
                return Ok(Next::Quit);
            }
            (Phase::Transaction(t), Command::Quit) => {
                self::transaction::quit(&self.shared.ctx, conn, &t.drop).await;
                return Ok(Next::Quit);
            }
            (Phase::Authorization { .. }, cmd) => return Box::pin(self.authorization(conn, cmd)).await,
            (Phase::Transaction(_), Command::Stls) => refuse(conn, name, None, "STLS only before logging in."),
            (Phase::Transaction(_), Command::User(_) | Command::Pass(_) | Command::Auth { .. } | Command::Apop) => {
                refuse(conn, name, None, "Already logged in.")
            }
            (Phase::Transaction(t), cmd) => {
                let (ctx, drop) = (&self.shared.ctx, &mut t.drop);
                Box::pin(self::transaction::run(ctx, conn, drop, cmd)).await?;
            }
        }
        Ok(Next::Continue)
    }
}
