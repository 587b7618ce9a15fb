//! The ManageSieve session: one per connection, run by a session actor.
//! The greeting is the capability list and `OK`; before a login only
//! CAPABILITY, STARTTLS, AUTHENTICATE, NOOP and LOGOUT are served
//! ([`auth`]), after it the script commands ([`scripts`]).
//!
//! This folder is ManageSieve's session layer: it may use
//! `managesieve::wire`, [`crate::net`], [`crate::sieve`] (compiling at
//! upload), the store and the actors' authenticator. Scripts are
//! per-account records outside every mailbox, written in one store
//! transaction each, as `meshmail sieve put` writes them; no shard actor
//! owns them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::NodeCtx;
use meshmail_actors::session::{Ended, Session};
use meshmail_storage::ids::AccountId;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

mod auth;
mod scripts;

use crate::managesieve::wire::response::{self, CapaState, Code, Status};
use crate::managesieve::wire::{Assembler, Command, LINE_MAX, LITERAL_DISCARD_MAX, LITERAL_MAX, Need, ParseError};
use crate::net::{Conn, ConnError, Line, Stream};

/// Lines that fail to parse in one session before it is closed: room for
/// a confused client, none for a probe feeding the parser forever (as
/// POP3's limit). A refused but well-formed command does not count.
const BAD_COMMANDS_MAX: u32 = 20;
/// Silence before the connection is closed; RFC 5804 sets no autologout
/// time, this is IMAP's (RFC 9051 §5.4: at least 30 minutes) halved, as
/// a script editor is never left open without a command for long.
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(15 * 60);

/// What the sessions of one ManageSieve listener share.
pub struct ManageSieveShared {
    pub ctx: Arc<NodeCtx>,
    pub auth: Arc<Authenticator>,
    pub tls: Option<TlsAcceptor>,
    pub allow_plaintext_auth_on_loopback: bool,
    pub idle_timeout: Duration,
}

pub struct ManageSieveSession {
    shared: Arc<ManageSieveShared>,
    stream: TcpStream,
    peer: SocketAddr,
}

impl ManageSieveSession {
    pub fn new(shared: Arc<ManageSieveShared>, stream: TcpStream, peer: SocketAddr) -> Self {
        ManageSieveSession { shared, stream, peer }
    }
}

/// The logged-in account.
struct User {
    account: AccountId,
    email: String,
}

/// What a command asks of the loop.
enum Next {
    Continue,
    Close,
}

/// One command read off the wire, or why the session cannot go on.
enum Read {
    Command(Result<Command, ParseError>),
    /// The line was longer than [`LINE_MAX`]: the literal it may announce
    /// is lost, so the session cannot stay in step.
    LineTooLong,
    /// A literal over [`LITERAL_DISCARD_MAX`].
    LiteralTooLong(u64),
}

struct ManageSieve {
    shared: Arc<ManageSieveShared>,
    peer: SocketAddr,
    user: Option<User>,
    login_failures: u32,
    /// The status of the last response sent (the metrics' outcome).
    last: Status,
}

#[async_trait]
impl Session for ManageSieveSession {
    fn kind(&self) -> &'static str {
        "managesieve_session"
    }

    async fn run(self: Box<Self>) -> Ended {
        let ManageSieveSession { shared, stream, peer } = *self;
        metrics::counter!("meshmail_managesieve_sessions_total").increment(1);
        let mut conn = Conn::new(Stream::Plain(stream), shared.idle_timeout);
        let mut ms = ManageSieve {
            shared,
            peer,
            user: None,
            login_failures: 0,
            last: Status::Ok,
        };
        let mut greeting = ms.capability_lines(&conn);
        greeting.extend(response::status(Status::Ok, None, "meshmail ManageSieve ready."));
        conn.send(&greeting);
        match ms.converse(&mut conn).await {
            Ok(()) => {}
            Err(ConnError::TimedOut) => {
                metrics::counter!("meshmail_managesieve_timeouts_total").increment(1);
                conn.send(&response::status(Status::Bye, None, "Disconnected for inactivity."));
                let _ = conn.flush().await;
            }
            Err(ConnError::Io(e)) => tracing::debug!(peer = %ms.peer, error = %e, "managesieve connection error"),
            Err(ConnError::Closed) => {}
        }
        conn.shutdown().await;
        Ended::Closed
    }
}

impl ManageSieve {
    fn auth_allowed(&self, conn: &Conn) -> bool {
        conn.is_tls() || (self.shared.allow_plaintext_auth_on_loopback && self.peer.ip().is_loopback())
    }

    fn capability_lines(&self, conn: &Conn) -> Vec<u8> {
        response::capabilities(&CapaState {
            starttls: self.shared.tls.is_some() && !conn.is_tls() && self.user.is_none(),
            plain: self.auth_allowed(conn) && self.user.is_none(),
            extensions: crate::sieve::compile::EXTENSIONS,
            max_redirects: crate::sieve::interp::REDIRECTS_MAX,
            owner: self.user.as_ref().map(|u| u.email.as_str()),
        })
    }

    /// Queues a final response and remembers its status for the metrics.
    fn reply(&mut self, conn: &mut Conn, status: Status, code: Option<Code>, text: &str) {
        self.last = status;
        conn.send(&response::status(status, code.as_ref(), text));
    }

    /// Reads and runs commands until LOGOUT, BYE or an error.
    async fn converse(&mut self, conn: &mut Conn) -> Result<(), ConnError> {
        let mut bad = 0u32;
        loop {
            let parsed = match read_command(conn).await? {
                Read::Command(parsed) => parsed,
                Read::LineTooLong => {
                    metrics::counter!("meshmail_managesieve_bad_commands_total").increment(1);
                    self.reply(conn, Status::Bye, None, "Command line too long.");
                    return Ok(());
                }
                Read::LiteralTooLong(n) => {
                    metrics::counter!("meshmail_managesieve_bad_commands_total").increment(1);
                    let text = format!("Literal of {n} bytes is too large.");
                    self.reply(conn, Status::Bye, Some(Code::MaxSize), &text);
                    return Ok(());
                }
            };
            let cmd = match parsed {
                Ok(cmd) => cmd,
                // Well-formed, only too large: the script's fault, not the
                // client's grammar.
                Err(e @ ParseError::TooLarge(_)) => {
                    self.count("PUTSCRIPT", Status::No);
                    self.reply(conn, Status::No, Some(Code::MaxSize), &e.to_string());
                    continue;
                }
                Err(e) => {
                    bad += 1;
                    metrics::counter!("meshmail_managesieve_bad_commands_total").increment(1);
                    if bad >= BAD_COMMANDS_MAX {
                        self.reply(conn, Status::Bye, None, "Too many invalid commands.");
                        return Ok(());
                    }
                    self.reply(conn, Status::No, None, &e.to_string());
                    continue;
                }
            };
            let (name, started) = (cmd.name(), Instant::now());
            let next = self.dispatch(conn, cmd).await?;
            self.count(name, self.last);
            metrics::histogram!("meshmail_managesieve_command_seconds", "command" => name)
                .record(started.elapsed().as_secs_f64());
            if let Next::Close = next {
                return Ok(());
            }
        }
    }

    fn count(&self, name: &'static str, status: Status) {
        metrics::counter!("meshmail_managesieve_commands_total", "command" => name, "outcome" => status.label())
            .increment(1);
    }

    async fn dispatch(&mut self, conn: &mut Conn, cmd: Command) -> Result<Next, ConnError> {
        match cmd {
            Command::Capability => {
                conn.send(&self.capability_lines(conn));
                self.reply(conn, Status::Ok, None, "Capability completed.");
            }
            Command::Logout => {
                self.reply(conn, Status::Ok, None, "Logout completed.");
                return Ok(Next::Close);
            }
            // RFC 5804 §2.13: the tag comes back as a TAG response code.
            Command::Noop { tag } => self.reply(conn, Status::Ok, tag.map(Code::Tag), "Done."),
            Command::StartTls => return self.starttls(conn).await,
            Command::Authenticate { mechanism, initial } => return self.authenticate(conn, &mechanism, initial).await,
            cmd => match self.user.as_ref().map(|u| (u.account, u.email.clone())) {
                Some((account, email)) => self.script_command(conn, account, &email, cmd).await,
                None => self.reply(conn, Status::No, None, "Authenticate first."),
            },
        }
        Ok(Next::Continue)
    }
}

/// Reads one command's lines and literals: a line, and for each literal
/// it announces the literal's bytes and the line that follows.
async fn read_assembled(conn: &mut Conn) -> Result<Result<Assembler, Read>, ConnError> {
    let mut a = Assembler::new();
    let mut literal_bytes = 0u64;
    loop {
        let line = match conn.read_line(LINE_MAX).await? {
            Line::Complete(line) => line,
            Line::TooLong => return Ok(Err(Read::LineTooLong)),
        };
        match a.line(&line) {
            Need::Done => return Ok(Ok(a)),
            Need::Literal(n) => {
                literal_bytes = literal_bytes.saturating_add(n);
                if literal_bytes > LITERAL_DISCARD_MAX {
                    return Ok(Err(Read::LiteralTooLong(n)));
                }
                // Clients write the literal and its CRLF separately.
                conn.ack_now();
                let bytes = conn.read_exact_capped(n, LITERAL_MAX).await?;
                a.literal(bytes, n);
            }
        }
    }
}

async fn read_command(conn: &mut Conn) -> Result<Read, ConnError> {
    Ok(match read_assembled(conn).await? {
        Ok(a) => Read::Command(a.finish()),
        Err(read) => read,
    })
}

/// A SASL response's bytes or why it is refused; `Err(read)`: the
/// session cannot go on.
type SaslResponse = Result<Result<Vec<u8>, ParseError>, Read>;

/// Reads a SASL client response (RFC 5804 §2.1): one string, quoted or
/// a literal.
async fn read_sasl_response(conn: &mut Conn) -> Result<SaslResponse, ConnError> {
    Ok(read_assembled(conn).await?.map(|a| {
        a.into_tokens()
            .and_then(crate::managesieve::wire::command::sasl_response)
    }))
}
