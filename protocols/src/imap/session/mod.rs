//! The IMAP session (IMAP4rev2, compatible with IMAP4rev1 clients): one per
//! connection, run by a session actor. Reads commands (with literals), runs
//! them against the store (reads) and the shard actor (every write), and
//! sends untagged updates at the points the RFC allows.
//!
//! This folder is IMAP's session layer, everything that does I/O or keeps
//! state across commands: the state machine and IDLE (here), the first
//! phase ([`auth`]), parking an idle IDLE ([`park`], [`uid_runs`]), the
//! commands ([`commands`], [`messages`], [`search`]), the selected
//! mailbox's view ([`view`]), LIST's answer ([`list_tree`]) and the per-node
//! caches ([`envelope_cache`], [`hot_row_cache`], [`mailbox_lru`]). It may
//! use `imap::wire`, [`crate::net`], [`crate::ingest`], the store (reads)
//! and the actors (every write, through the account's shard actor). IMAP
//! APPEND stores through the shard actor too, not through
//! [`crate::accept`]: it files into the user's own mailbox with the user's
//! flags and date, with no routing, aliases, SRS or vacation to apply.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::NodeCtx;
use meshmail_actors::session::{Ended, Session};
use meshmail_actors::shard::Subscription;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::accounts::Account;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

mod auth;
mod commands;
pub mod envelope_cache;
mod fetch;
pub mod hot_row_cache;
mod list_tree;
mod mailbox_lru;
mod messages;
mod park;
mod search;
mod uid_runs;
pub mod view;

use self::auth::AccountSlot;
use self::view::Selected;
use crate::imap::wire::parser::{ParseOptions, parse_command_with};
use crate::imap::wire::response::{self, Status};
use crate::imap::wire::sequence::IdSet;
use crate::imap::wire::types::{Command, CommandKind};
use crate::imap::wire::{is_done, literal_announcement};
use crate::net::{Conn, ConnError, Line, Stream};

/// Longest command line (without literals) accepted.
pub const COMMAND_LINE_MAX: usize = 64 * 1024;
/// Autologout: RFC 9051 §5.4 asks for at least 30 minutes.
pub const AUTOLOGOUT: Duration = Duration::from_secs(30 * 60);
/// Before login, a much shorter leash.
pub const PREAUTH_TIMEOUT: Duration = Duration::from_secs(60);
/// Commands that fail to parse before the connection is closed.
const BAD_COMMANDS_MAX: u32 = 30;

/// What the sessions of one IMAP listener share.
pub struct ImapShared {
    pub ctx: Arc<NodeCtx>,
    pub auth: Arc<Authenticator>,
    pub tls: Option<TlsAcceptor>,
    pub implicit_tls: bool,
    pub hostname: String,
    pub allow_plaintext_auth_on_loopback: bool,
    /// Largest literal (APPEND) accepted.
    pub max_literal_bytes: u64,
    pub max_sessions_per_account: usize,
    pub sessions_per_account: Mutex<HashMap<AccountId, usize>>,
    /// Envelopes for SEARCH, SORT and THREAD, node-wide (None: off).
    pub envelopes: Option<Arc<self::envelope_cache::EnvelopeCache>>,
    /// Hot rows for FETCH of flags, sizes and dates, node-wide (None: off).
    pub hot_rows: Option<Arc<self::hot_row_cache::HotRowCache>>,
    /// How long an IDLE with nothing happening keeps its session actor
    /// before the session parks (None: never parks). See `park`.
    pub park_idle_after: Option<Duration>,
}

pub struct ImapSession {
    start: Start,
}

/// Where a session's run begins.
enum Start {
    /// A new connection: greet the client.
    Fresh {
        shared: Arc<ImapShared>,
        stream: TcpStream,
        peer: SocketAddr,
    },
    /// A parked IDLE that woke up: carry on with it.
    Resumed(Box<self::park::ParkedImap>, self::park::Wake),
}

impl ImapSession {
    pub fn new(shared: Arc<ImapShared>, stream: TcpStream, peer: SocketAddr) -> Self {
        ImapSession {
            start: Start::Fresh { shared, stream, peer },
        }
    }

    fn resumed(parked: Box<self::park::ParkedImap>, wake: self::park::Wake) -> Self {
        ImapSession {
            start: Start::Resumed(parked, wake),
        }
    }
}

/// How long a SELECT or sync waits for the shard actor to claim `\Recent`.
const RECENT_CLAIM_TIMEOUT: Duration = Duration::from_secs(2);

/// What a session keeps whatever its phase: the listener's shared parts,
/// the peer, and what ENABLE and SEARCH RETURN (SAVE) set.
struct State {
    pub shared: Arc<ImapShared>,
    pub peer: SocketAddr,
    pub utf8: bool,
    pub condstore: bool,
    pub qresync: bool,
    /// ENABLE IMAP4rev2: no `\Recent` (RFC 9051 dropped it).
    pub rev2: bool,
    pub saved: Option<IdSet>,
    /// The account's change hints (IDLE, and draining before a sync).
    pub hints: Option<Subscription>,
    pub login_failures: u32,
}

/// The session's place in RFC 9051 §3's state diagram. A `Selected` lives
/// only inside `Phase::Selected`, next to its `Login`: the commands of the
/// selected state are handed it from there, so none can run without one.
enum Phase {
    NotAuthenticated,
    Authenticated(Login),
    Selected(Login, Box<Selected>),
}

/// A logged-in account, counted against its session cap while it lives.
struct Login {
    pub account: Account,
    _slot: AccountSlot,
}

/// What a command does to the phase once it has answered.
enum Transition {
    Stay,
    /// SELECT/EXAMINE succeeded.
    Select(Box<Selected>),
    /// CLOSE, UNSELECT, a failed SELECT, DELETE of the selected mailbox.
    Deselect,
}

/// The phase a command needs (RFC 9051 §6).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    Any,
    NotAuthenticated,
    Authenticated,
    Selected,
}

fn needs(kind: &CommandKind) -> Needs {
    use CommandKind as K;
    match kind {
        K::Capability | K::Noop | K::Logout | K::Id(_) => Needs::Any,
        K::StartTls | K::Authenticate { .. } | K::Login { .. } => Needs::NotAuthenticated,
        K::Check
        | K::Close
        | K::Unselect
        | K::Expunge
        | K::UidExpunge(_)
        | K::Search(_)
        | K::Sort(_)
        | K::Thread(_)
        | K::Fetch(_)
        | K::Store(_)
        | K::Copy { .. }
        | K::Move { .. } => Needs::Selected,
        _ => Needs::Authenticated,
    }
}

impl Phase {
    fn is_authenticated(&self) -> bool {
        !matches!(self, Phase::NotAuthenticated)
    }

    fn selected_mut(&mut self) -> Option<&mut Selected> {
        match self {
            Phase::Selected(_, sel) => Some(sel.as_mut()),
            _ => None,
        }
    }

    fn apply(&mut self, t: Transition) {
        let old = std::mem::replace(self, Phase::NotAuthenticated);
        *self = match (old, t) {
            (old, Transition::Stay) => old,
            (Phase::Authenticated(l) | Phase::Selected(l, _), Transition::Select(sel)) => Phase::Selected(l, sel),
            (Phase::Authenticated(l) | Phase::Selected(l, _), Transition::Deselect) => Phase::Authenticated(l),
            (Phase::NotAuthenticated, _) => Phase::NotAuthenticated,
        };
    }
}

/// One connection's conversation: the state every phase shares, and the
/// phase. Kept apart so a command borrows both at once.
struct Imap {
    pub st: State,
    pub phase: Phase,
}

/// What a command asks of the loop.
enum Next {
    Continue,
    Logout,
    /// IDLE went quiet: park the session (the tag is IDLE's).
    Park(String),
}

#[async_trait]
impl Session for ImapSession {
    fn kind(&self) -> &'static str {
        "imap_session"
    }

    async fn run(self: Box<Self>) -> Ended {
        let (mut imap, mut conn, outcome) = match self.start {
            Start::Fresh { shared, stream, peer } => {
                metrics::counter!("meshmail_imap_sessions_total").increment(1);
                let mut conn = Conn::new(Stream::Plain(stream), PREAUTH_TIMEOUT);
                if shared.implicit_tls {
                    let Some(tls) = &shared.tls else {
                        return Ended::Closed;
                    };
                    if conn.start_tls(tls).await.is_err() {
                        return Ended::Closed;
                    }
                }
                let imap = Imap::new(shared, peer);
                let greeting = format!(
                    "[CAPABILITY {}] meshmail ready",
                    imap.st.capabilities(&conn, false).join(" ")
                );
                conn.send(&response::untagged(Status::Ok, None, &greeting));
                (imap, conn, Ok(Next::Continue))
            }
            Start::Resumed(parked, wake) => {
                let (mut imap, mut conn, tag) = parked.unpack();
                let outcome = imap.resume_idle(&mut conn, &tag, wake).await;
                (imap, conn, outcome)
            }
        };
        let outcome = match outcome {
            Ok(Next::Continue) => imap.converse(&mut conn).await,
            other => other,
        };
        match outcome {
            Ok(Next::Park(tag)) => return Ended::Parked(self::park::ParkedImap::pack(imap, conn, tag)),
            Err(ConnError::TimedOut) => {
                conn.send(&response::untagged(Status::Bye, None, "Autologout; idle for too long"));
            }
            Err(ConnError::Io(e)) => tracing::debug!(peer = %imap.st.peer, error = %e, "imap connection error"),
            _ => {}
        }
        conn.shutdown().await;
        Ended::Closed
    }
}

impl State {
    pub fn tagged(&self, conn: &mut Conn, tag: &str, status: Status, code: Option<&str>, text: &str) {
        metrics::counter!("meshmail_imap_responses_total", "status" => status.as_str()).increment(1);
        conn.send(&response::tagged(tag, status, code, text));
    }

    pub fn auth_allowed(&self, conn: &Conn) -> bool {
        conn.is_tls() || (self.shared.allow_plaintext_auth_on_loopback && self.peer.ip().is_loopback())
    }

    pub fn capabilities(&self, conn: &Conn, authenticated: bool) -> Vec<&'static str> {
        let mut caps = vec!["IMAP4rev2", "IMAP4rev1"];
        if !authenticated {
            if self.shared.tls.is_some() && !conn.is_tls() {
                caps.push("STARTTLS");
            }
            if self.auth_allowed(conn) {
                caps.extend(["AUTH=PLAIN", "SASL-IR"]);
            } else {
                caps.push("LOGINDISABLED");
            }
        }
        caps.extend([
            "LITERAL+",
            "ENABLE",
            "ID",
            "IDLE",
            "NAMESPACE",
            "UIDPLUS",
            "MOVE",
            "SORT",
            "THREAD=ORDEREDSUBJECT",
            "THREAD=REFERENCES",
            "UNSELECT",
            "CHILDREN",
            "LIST-EXTENDED",
            "LIST-STATUS",
            "SPECIAL-USE",
            "CREATE-SPECIAL-USE",
            "ESEARCH",
            "SEARCHRES",
            "CONDSTORE",
            "QRESYNC",
            "QUOTA",
            "QUOTA=RES-STORAGE",
            "QUOTA=RES-MESSAGE",
            "COMPRESS=DEFLATE",
            "OBJECTID",
            "BINARY",
            "UTF8=ACCEPT",
            "STATUS=SIZE",
        ]);
        caps
    }

    /// One whole command: its lines and literals. `None` when it was refused
    /// (too long, literal too large) and already answered.
    async fn read_command(&mut self, conn: &mut Conn) -> Result<Option<Vec<u8>>, ConnError> {
        let mut buf = Vec::new();
        loop {
            let line = match conn.read_line(COMMAND_LINE_MAX).await? {
                Line::Complete(l) => l,
                Line::TooLong => {
                    conn.send(&response::untagged(Status::Bad, None, "Command line too long"));
                    return Ok(None);
                }
            };
            let literal = literal_announcement(&line);
            buf.extend_from_slice(&line);
            let Some(lit) = literal else { return Ok(Some(buf)) };
            let tag = String::from_utf8_lossy(buf.split(|b| *b == b' ').next().unwrap_or(b"*")).into_owned();
            if lit.len > self.shared.max_literal_bytes {
                if lit.sync {
                    // Refused before the client sends it (RFC 9051 §7.1).
                    self.tagged(conn, &tag, Status::No, Some("TOOBIG"), "Literal too large");
                    return Ok(None);
                }
                // LITERAL+: the bytes are coming anyway; read and drop them.
                conn.read_exact_capped(lit.len, 0).await?;
                self.tagged(conn, &tag, Status::No, Some("TOOBIG"), "Literal too large");
                let _ = conn.read_line(COMMAND_LINE_MAX).await?;
                return Ok(None);
            }
            if lit.sync {
                conn.send(&response::continuation("Ready for literal data"));
                conn.flush().await?;
            }
            let data = conn.read_exact_capped(lit.len, lit.len).await?.unwrap_or_default();
            // The rest of the command line may be held by the client's
            // Nagle until this literal is acknowledged.
            conn.ack_now();
            buf.extend_from_slice(b"\r\n");
            buf.extend_from_slice(&data);
        }
    }

    /// ENABLE (RFC 5161): answers with what it turned on.
    fn enable(&mut self, conn: &mut Conn, tag: &str, caps: &[String]) {
        let mut enabled = Vec::new();
        for c in caps {
            match c.to_ascii_uppercase().as_str() {
                "CONDSTORE" => {
                    self.condstore = true;
                    enabled.push("CONDSTORE");
                }
                "QRESYNC" => {
                    self.condstore = true;
                    self.qresync = true;
                    enabled.push("QRESYNC");
                }
                "UTF8=ACCEPT" => {
                    self.utf8 = true;
                    enabled.push("UTF8=ACCEPT");
                }
                "IMAP4REV2" => {
                    self.rev2 = true;
                    enabled.push("IMAP4rev2");
                }
                _ => {}
            }
        }
        conn.send(&response::enabled_line(&enabled));
        self.tagged(conn, tag, Status::Ok, None, "ENABLE completed");
    }

    /// Untagged updates for the selected mailbox, if any (and drains
    /// stale hints).
    pub async fn sync(&mut self, conn: &mut Conn, sel: Option<&mut Selected>, allow_expunge: bool) {
        if let Some(h) = self.hints.as_ref() {
            h.clear();
        }
        let Some(sel) = sel else { return };
        let db = self.shared.ctx.db.clone();
        match sel.sync(&db, allow_expunge, self.condstore, self.qresync).await {
            Ok(out) => conn.send(&out),
            Err(e) => tracing::warn!(error = %e, "imap sync failed"),
        }
        if let Some(line) = self.settle_recent(sel, false).await {
            conn.send(line.as_bytes());
        }
    }

    /// RFC 7162 §3.1: a command that uses MODSEQ (FETCH MODSEQ or
    /// CHANGEDSINCE, SEARCH MODSEQ, STORE UNCHANGEDSINCE) makes the session
    /// CONDSTORE-aware. The first time, the client learns the mailbox's
    /// HIGHESTMODSEQ in an untagged OK (§3.1.2.1) before the command's own
    /// responses, as after SELECT (CONDSTORE); Dovecot does the same.
    pub fn condstore_by_use(&mut self, conn: &mut Conn, sel: &Selected) {
        if self.condstore {
            return;
        }
        self.condstore = true;
        let code = format!("HIGHESTMODSEQ {}", sel.known_modseq);
        conn.send(&response::untagged(Status::Ok, Some(&code), "Highest"));
    }

    /// IMAP4rev1 `\Recent` for the messages of the selected mailbox this
    /// session has not settled yet: a read-write session claims them
    /// through the shard actor (recent in one session only, whichever
    /// node it is on); a read-only one sees them recent without claiming.
    /// Returns the `* n RECENT` line when something was settled, or when
    /// `selecting` (SELECT and EXAMINE always report RECENT to rev1).
    pub async fn settle_recent(&mut self, sel: &mut Selected, selecting: bool) -> Option<String> {
        if self.rev2 {
            return None;
        }
        let (account, mailbox, read_only, top) = (sel.account, sel.id, sel.read_only, sel.max_uid());
        let checked = if selecting { 0 } else { sel.recent_checked };
        if top <= checked && !selecting {
            return None;
        }
        let (from, to) = if read_only {
            let mb = self
                .shared
                .ctx
                .db
                .read("imap_recent", move |txn| async move {
                    meshmail_storage::model::mailboxes::get(&txn, account, mailbox).await
                })
                .await
                .ok()
                .flatten()?;
            (mb.recent_uid.max(checked), top)
        } else {
            // \Recent is advisory: while the shard moves between nodes a
            // SELECT must not wait for it, so the claim is bounded and a
            // failure leaves these messages not recent in this session.
            let op = meshmail_actors::mailbox_ops::MailboxOp::ClaimRecent { mailbox };
            let claim = meshmail_actors::mailbox_ops::request(&self.shared.ctx, account, op);
            match tokio::time::timeout(RECENT_CLAIM_TIMEOUT, claim).await {
                Ok(Ok(r)) => r.recent.unwrap_or((top, top)),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "imap: claiming \\Recent failed");
                    (top, top)
                }
                Err(_) => {
                    metrics::counter!("meshmail_imap_recent_claim_timeouts_total").increment(1);
                    (top, top)
                }
            }
        };
        sel.take_recent(from.max(checked), to);
        sel.recent_checked = top.max(to);
        let count = sel.uids.iter().filter(|u| sel.recent.contains(u)).count();
        Some(format!("* {count} RECENT\r\n"))
    }
}

impl Imap {
    fn new(shared: Arc<ImapShared>, peer: SocketAddr) -> Imap {
        Imap {
            st: State {
                shared,
                peer,
                utf8: false,
                condstore: false,
                qresync: false,
                rev2: false,
                saved: None,
                hints: None,
                login_failures: 0,
            },
            phase: Phase::NotAuthenticated,
        }
    }

    /// Reads and runs commands until LOGOUT, a parked IDLE, or an error.
    async fn converse(&mut self, conn: &mut Conn) -> Result<Next, ConnError> {
        let mut bad = 0u32;
        loop {
            let Some(bytes) = self.st.read_command(conn).await? else {
                continue;
            };
            let parsed = parse_command_with(
                &bytes,
                ParseOptions {
                    utf8_accept: self.st.utf8,
                },
            );
            let cmd = match parsed {
                Ok(c) => c,
                Err(e) => {
                    bad += 1;
                    metrics::counter!("meshmail_imap_responses_total", "status" => "BAD").increment(1);
                    conn.send(&e.response());
                    if bad >= BAD_COMMANDS_MAX {
                        conn.send(&response::untagged(Status::Bye, None, "Too many invalid commands"));
                        return Ok(Next::Logout);
                    }
                    continue;
                }
            };
            let name = cmd.kind.name();
            let started = Instant::now();
            let next = self.dispatch(conn, cmd).await?;
            match next {
                Next::Continue => metrics::histogram!("meshmail_imap_command_seconds", "command" => name)
                    .record(started.elapsed().as_secs_f64()),
                // A parked IDLE has not ended: its time is not a command's.
                Next::Park(_) => return Ok(next),
                Next::Logout => return Ok(next),
            }
        }
    }

    /// Runs one command. Every command but IDLE runs in a future boxed for
    /// its duration: an async fn's state is as large as its largest await,
    /// and a session spends nearly all its life idle (waiting for a line
    /// or in IDLE), so the large states of FETCH, SEARCH or APPEND must not
    /// be carried by every idle connection (issue 15: <= 8 KB per idle
    /// session).
    async fn dispatch(&mut self, conn: &mut Conn, cmd: Command) -> Result<Next, ConnError> {
        use CommandKind as K;
        let tag = cmd.tag.clone();
        let need = needs(&cmd.kind);
        let refusal = match (need, &self.phase) {
            (Needs::NotAuthenticated, Phase::Authenticated(_) | Phase::Selected(..)) => Some("Already authenticated"),
            (Needs::Authenticated | Needs::Selected, Phase::NotAuthenticated) => Some("Log in first"),
            (Needs::Selected, Phase::Authenticated(_)) => Some("No mailbox selected"),
            _ => None,
        };
        if let Some(why) = refusal {
            self.st.tagged(conn, &tag, Status::Bad, None, why);
            return Ok(Next::Continue);
        }
        metrics::counter!("meshmail_imap_commands_total", "command" => cmd.kind.name()).increment(1);
        let st = &mut self.st;
        match cmd.kind {
            K::Capability => {
                conn.send(&response::capability_line(
                    &st.capabilities(conn, self.phase.is_authenticated()),
                ));
                st.tagged(conn, &tag, Status::Ok, None, "CAPABILITY completed");
            }
            K::Noop => {
                Box::pin(st.sync(conn, self.phase.selected_mut(), true)).await;
                st.tagged(conn, &tag, Status::Ok, None, "Completed");
            }
            K::Logout => {
                conn.send(&response::untagged(Status::Bye, None, "meshmail logging out"));
                st.tagged(conn, &tag, Status::Ok, None, "LOGOUT completed");
                return Ok(Next::Logout);
            }
            K::Id(_) => {
                conn.send(&response::id_line(&[
                    ("name", "meshmail"),
                    ("version", env!("CARGO_PKG_VERSION")),
                ]));
                st.tagged(conn, &tag, Status::Ok, None, "ID completed");
            }
            K::StartTls => return Box::pin(st.starttls(conn, &tag)).await,
            K::Login { username, password } => {
                return Box::pin(self.login(conn, &tag, &username, &password)).await;
            }
            K::Authenticate {
                mechanism,
                initial_response,
            } => return Box::pin(self.authenticate(conn, &tag, &mechanism, initial_response)).await,
            K::Compress(mechanism) => {
                if conn.is_compressed() {
                    st.tagged(conn, &tag, Status::No, Some("COMPRESSIONACTIVE"), "DEFLATE is active");
                } else if mechanism != "DEFLATE" {
                    st.tagged(conn, &tag, Status::Bad, None, "Only COMPRESS DEFLATE is supported");
                } else {
                    st.tagged(conn, &tag, Status::Ok, None, "DEFLATE active");
                    conn.start_deflate().await?;
                    metrics::counter!("meshmail_imap_compress_sessions_total").increment(1);
                }
            }
            K::Enable(caps) => st.enable(conn, &tag, &caps),
            K::Idle => return self.idle(conn, &tag).await,
            other => {
                let transition = match &mut self.phase {
                    Phase::Selected(_, sel) if need == Needs::Selected => {
                        Box::pin(self::messages::run(st, sel, conn, &tag, other)).await?
                    }
                    Phase::Selected(login, sel) => {
                        Box::pin(self::commands::run(st, login, Some(sel.as_mut()), conn, &tag, other)).await?
                    }
                    Phase::Authenticated(login) => {
                        Box::pin(self::commands::run(st, login, None, conn, &tag, other)).await?
                    }
                    // Refused above.
                    Phase::NotAuthenticated => Transition::Stay,
                };
                self.phase.apply(transition);
            }
        }
        Ok(Next::Continue)
    }

    /// IDLE: waits on the socket (for DONE) and on the shard actor's hints,
    /// pushing untagged updates as they come. Refreshes the autologout timer.
    async fn idle(&mut self, conn: &mut Conn, tag: &str) -> Result<Next, ConnError> {
        Box::pin(self.st.sync(conn, self.phase.selected_mut(), true)).await;
        conn.send(&response::continuation("idling"));
        conn.flush().await?;
        self.idle_wait(conn, tag).await
    }

    /// IDLE after the continuation: until DONE, or until nothing has
    /// happened for `park_idle_after` and the session parks.
    async fn idle_wait(&mut self, conn: &mut Conn, tag: &str) -> Result<Next, ConnError> {
        enum Event {
            Hint(meshmail_actors::shard::ChangeHint),
            Line(Result<Line, ConnError>),
            Quiet,
        }
        loop {
            let event = {
                let hints = self.st.hints.as_ref();
                let hint = async move {
                    match hints {
                        Some(h) => h.recv().await,
                        None => std::future::pending().await,
                    }
                };
                let park_after = self.st.shared.park_idle_after;
                let quiet = async move {
                    match park_after {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                };
                // All three are cancel-safe: an unfinished line stays buffered.
                tokio::select! {
                    h = hint => Event::Hint(h),
                    l = conn.read_line(COMMAND_LINE_MAX) => Event::Line(l),
                    () = quiet => Event::Quiet,
                }
            };
            match event {
                Event::Hint(hint) => self.push_changes(conn, hint).await?,
                Event::Quiet => {
                    // Half a line buffered, or bytes inside TLS: stay awake.
                    if conn.try_park() {
                        return Ok(Next::Park(tag.to_string()));
                    }
                }
                Event::Line(line) => {
                    let done = matches!(line?, Line::Complete(l) if is_done(&l));
                    if done {
                        self.st.tagged(conn, tag, Status::Ok, None, "IDLE terminated");
                    } else {
                        self.st.tagged(conn, tag, Status::Bad, None, "Expected DONE");
                    }
                    return Ok(Next::Continue);
                }
            }
        }
    }

    /// Untagged updates for a change hint, sent at once (IDLE).
    async fn push_changes(
        &mut self,
        conn: &mut Conn,
        hint: meshmail_actors::shard::ChangeHint,
    ) -> Result<(), ConnError> {
        Box::pin(self.st.sync(conn, self.phase.selected_mut(), true)).await;
        conn.flush().await?;
        metrics::histogram!("meshmail_imap_idle_push_seconds").record(hint.committed_at.elapsed().as_secs_f64());
        Ok(())
    }
}
