//! The SMTP/LMTP/submission session: the RFC 5321 state machine over a
//! [`Conn`], one per connection, run by a session actor.
//!
//! What each listener allows: the MX listener accepts RCPT only for local
//! domains and existing accounts; submission requires AUTH (only over TLS
//! unless loopback plaintext is allowed by config) and a sender the account
//! owns, and queues remote recipients; LMTP (behind another MTA) answers
//! once per recipient after the message.
//!
//! This folder is SMTP's session layer: the state machine (here), SASL
//! ([`auth`]), the MX's SPF/DKIM/ARC/DMARC checks ([`inbound_auth`]) and the
//! map from acceptance's outcomes to SMTP/LMTP replies ([`replies`]). It may
//! use `smtp::wire`, [`crate::net`], [`crate::accept`] and the actors; the
//! message itself is stored by [`crate::accept::accept_message`], never here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::NodeCtx;
use meshmail_actors::session::{Ended, Session};
use meshmail_storage::model::accounts::Account;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

mod auth;
pub mod inbound_auth;
pub mod replies;

use self::auth::{AuthStep, sasl_auth};
use self::inbound_auth::{Disposition, Peer, authenticate};
use self::replies::{combine, reply_of};
use super::wire::command::{
    AUTH_LINE_MAX, BodyType, COMMAND_LINE_MAX, Command, ForwardPath, Host, MailParams, Param, RcptDsn, ReversePath,
    parse_command, parse_rcpt_dsn,
};
use super::wire::data::{BdatReader, DataDecoder, DataError, DataLimits};
use super::wire::reply::Reply;
use crate::accept::{
    Accepted, Acceptor, EnvelopeParams, LearnedAtRcpt, RcptCheck, RcptOutcome, Recipient, accept_message,
    check_recipient, sender_allowed,
};
use crate::envelope::Mailbox;
use crate::net::{Conn, ConnError, Line, Stream};

/// Which listener a session belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Inbound MX (port 25): local recipients only, no AUTH.
    Mx,
    /// Submission (587 with STARTTLS, 465 with implicit TLS): AUTH required.
    Submission { implicit_tls: bool },
    /// LMTP (RFC 2033): LHLO, one reply per recipient after DATA.
    Lmtp,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Mx => "smtp",
            Mode::Submission { implicit_tls: false } => "submission",
            Mode::Submission { implicit_tls: true } => "submissions",
            Mode::Lmtp => "lmtp",
        }
    }
}

/// Everything the sessions of one listener share.
pub struct SmtpShared {
    pub ctx: Arc<NodeCtx>,
    pub auth: Arc<Authenticator>,
    pub tls: Option<TlsAcceptor>,
    pub hostname: String,
    pub mode: Mode,
    pub max_message_bytes: u64,
    pub max_recipients: usize,
    pub allow_plaintext_auth_on_loopback: bool,
    pub idle_timeout: Duration,
    /// How long DATA waits for the store to commit before answering 451
    /// (`[smtp] delivery_timeout_s`); nothing is stored after that answer.
    pub delivery_timeout: Duration,
    /// The node's resolver (inbound authentication; outbound shares it).
    pub dns: crate::dns::Dns,
    /// Aliases, subaddressing, catch-alls.
    pub routing: crate::accept::routing::RoutingConfig,
    /// The node's RCPT answers (one cache for every SMTP/LMTP listener);
    /// `None` when `[smtp] rcpt_cache_entries = 0`.
    pub rcpt_cache: Option<Arc<crate::accept::rcpt_cache::RcptCache>>,
    /// SPF/DKIM/ARC/DMARC on the MX listener (an Authentication-Results
    /// header on every message); `None` turns the checks off.
    pub inbound_auth: Option<inbound_auth::InboundAuthConfig>,
    /// Benchmark mode: answer 250 without storing anything. Never in
    /// production: it acknowledges mail it does not keep.
    pub sink: bool,
}

impl SmtpShared {
    /// What acceptance needs of this listener's settings (SMTP and LMTP
    /// messages, JMAP submission through the submission listener's).
    pub fn acceptor(&self) -> Acceptor<'_> {
        Acceptor {
            ctx: &self.ctx,
            hostname: &self.hostname,
            routing: &self.routing,
            delivery_timeout: self.delivery_timeout,
            sink: self.sink,
        }
    }
}

pub struct SmtpSession {
    shared: Arc<SmtpShared>,
    stream: Option<TcpStream>,
    peer: SocketAddr,
}

impl SmtpSession {
    pub fn new(shared: Arc<SmtpShared>, stream: TcpStream, peer: SocketAddr) -> Self {
        SmtpSession {
            shared,
            stream: Some(stream),
            peer,
        }
    }
}

#[async_trait]
impl Session for SmtpSession {
    fn kind(&self) -> &'static str {
        "smtp_session"
    }

    async fn run(mut self: Box<Self>) -> Ended {
        let label = self.shared.mode.label();
        metrics::counter!("meshmail_smtp_sessions_total", "listener" => label).increment(1);
        let Some(tcp) = self.stream.take() else {
            return Ended::Closed;
        };
        let mut conn = Conn::new(Stream::Plain(tcp), self.shared.idle_timeout);
        if let Mode::Submission { implicit_tls: true } = self.shared.mode {
            let Some(tls) = &self.shared.tls else {
                return Ended::Closed;
            };
            if conn.start_tls(tls).await.is_err() {
                return Ended::Closed;
            }
        }
        let mut st = State::new(self.shared.clone(), self.peer);
        let result = st.converse(&mut conn).await;
        match result {
            Err(ConnError::TimedOut) => {
                send(&mut conn, &Reply::timeout(&self.shared.hostname), label);
                metrics::counter!("meshmail_smtp_timeouts_total", "listener" => label).increment(1);
            }
            Err(ConnError::Closed) | Ok(()) => {}
            Err(ConnError::Io(e)) => tracing::debug!(peer = %self.peer, error = %e, "smtp connection error"),
        }
        conn.shutdown().await;
        Ended::Closed
    }
}

fn send(conn: &mut Conn, reply: &Reply, listener: &'static str) {
    metrics::counter!("meshmail_smtp_replies_total", "listener" => listener, "code" => reply.code.to_string())
        .increment(1);
    conn.send(&reply.to_bytes());
}

/// One mail transaction (MAIL .. end of data).
struct MailTxn {
    from: ReversePath,
    smtputf8: bool,
    /// What the outbound queue needs of MAIL's parameters (submission).
    envelope: EnvelopeParams,
    recipients: Vec<Recipient>,
    /// LMTP: how many of `recipients` each accepted RCPT stands for (an
    /// alias may stand for several), so each RCPT gets its one reply.
    rcpt_groups: Vec<usize>,
    /// What RCPT learned of the local targets.
    learned: LearnedAtRcpt,
    bdat: Option<BdatReader>,
    /// A BDAT transaction that already failed: chunks are read and dropped.
    bdat_failed: Option<Reply>,
}

struct State {
    shared: Arc<SmtpShared>,
    peer: SocketAddr,
    helo: Option<String>,
    esmtp: bool,
    account: Option<Account>,
    txn: Option<MailTxn>,
    auth_failures: u32,
}

/// Failed AUTH attempts before the session is closed.
const AUTH_FAILURES_MAX: u32 = 3;
/// Commands that were not understood before the session is closed.
const BAD_COMMANDS_MAX: u32 = 20;

impl State {
    fn new(shared: Arc<SmtpShared>, peer: SocketAddr) -> Self {
        State {
            shared,
            peer,
            helo: None,
            esmtp: false,
            account: None,
            txn: None,
            auth_failures: 0,
        }
    }

    fn label(&self) -> &'static str {
        self.shared.mode.label()
    }

    fn reply(&self, conn: &mut Conn, r: Reply) {
        send(conn, &r, self.label());
    }

    async fn converse(&mut self, conn: &mut Conn) -> Result<(), ConnError> {
        let banner = if self.shared.mode == Mode::Lmtp {
            "LMTP meshmail"
        } else {
            "ESMTP meshmail"
        };
        self.reply(conn, Reply::greeting(&self.shared.hostname, banner));
        let mut bad = 0u32;
        loop {
            let line = match conn.read_line(AUTH_LINE_MAX).await? {
                Line::Complete(l) => l,
                Line::TooLong => {
                    self.reply(conn, Reply::new(500, Some((5, 5, 2)), "Line too long"));
                    continue;
                }
            };
            let cmd = match parse_command(&line) {
                // AUTH lines carry SASL data and may be longer (RFC 4954 §4).
                Ok(c) if !matches!(c, Command::Auth { .. }) && line.len() > COMMAND_LINE_MAX => {
                    self.reply(conn, Reply::new(500, Some((5, 5, 2)), "Line too long"));
                    continue;
                }
                Ok(c) => c,
                Err(e) => {
                    bad += 1;
                    self.reply(conn, e.reply());
                    if bad >= BAD_COMMANDS_MAX {
                        self.reply(conn, Reply::new(421, Some((4, 7, 0)), "Too many errors, closing"));
                        return Ok(());
                    }
                    continue;
                }
            };
            metrics::counter!("meshmail_smtp_commands_total", "listener" => self.label(), "verb" => verb(&cmd))
                .increment(1);
            if !self.command(conn, cmd).await? {
                return Ok(());
            }
        }
    }

    /// Handles one command; false ends the session.
    async fn command(&mut self, conn: &mut Conn, cmd: Command) -> Result<bool, ConnError> {
        let lmtp = self.shared.mode == Mode::Lmtp;
        match cmd {
            Command::Lhlo(_) if !lmtp => self.reply(conn, Reply::command_unrecognized()),
            Command::Ehlo(_) | Command::Helo(_) if lmtp => {
                self.reply(conn, Reply::new(500, Some((5, 5, 1)), "This is LMTP: use LHLO"))
            }
            Command::Ehlo(host) | Command::Lhlo(host) => {
                self.greeted(host, true);
                let caps = self.capabilities(conn);
                self.reply(
                    conn,
                    Reply::ehlo(&self.shared.hostname, self.helo.as_deref().unwrap_or(""), &caps),
                );
            }
            Command::Helo(host) => {
                self.greeted(host, false);
                self.reply(conn, Reply::helo(&self.shared.hostname));
            }
            Command::Mail { from, params } => self.mail(conn, from, params).await,
            Command::Rcpt { to, params } => self.rcpt(conn, to, params).await,
            Command::Data => self.data(conn).await?,
            Command::Bdat { size, last } => self.bdat(conn, size, last).await?,
            Command::Rset => {
                self.txn = None;
                self.reply(conn, Reply::ok());
            }
            Command::Noop(_) => self.reply(conn, Reply::ok()),
            Command::Quit => {
                self.reply(conn, Reply::closing(&self.shared.hostname));
                return Ok(false);
            }
            Command::Vrfy(_) => self.reply(conn, Reply::cannot_verify()),
            Command::Expn(_) => self.reply(conn, Reply::new(502, Some((5, 5, 1)), "EXPN is not supported")),
            Command::Help(_) => self.reply(
                conn,
                Reply::help("Commands: EHLO HELO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY HELP STARTTLS AUTH"),
            ),
            Command::StartTls => return self.starttls(conn).await,
            Command::Auth {
                mechanism,
                initial_response,
            } => return self.auth(conn, &mechanism, initial_response).await,
        }
        Ok(true)
    }

    fn greeted(&mut self, host: Host, esmtp: bool) {
        self.helo = Some(match host {
            Host::Domain(d) => d,
            Host::Literal(l) => l.to_string(),
        });
        self.esmtp = esmtp;
        self.txn = None;
    }

    fn auth_allowed(&self, conn: &Conn) -> bool {
        matches!(self.shared.mode, Mode::Submission { .. })
            && (conn.is_tls() || (self.shared.allow_plaintext_auth_on_loopback && self.peer.ip().is_loopback()))
    }

    fn capabilities(&self, conn: &Conn) -> Vec<String> {
        let mut caps = vec![
            "PIPELINING".to_string(),
            "8BITMIME".to_string(),
            format!("SIZE {}", self.shared.max_message_bytes),
            "ENHANCEDSTATUSCODES".to_string(),
            "SMTPUTF8".to_string(),
            "CHUNKING".to_string(),
        ];
        if self.shared.tls.is_some() && !conn.is_tls() && self.shared.mode != Mode::Lmtp {
            caps.push("STARTTLS".to_string());
        }
        if self.auth_allowed(conn) && self.account.is_none() {
            caps.push("AUTH PLAIN LOGIN".to_string());
        }
        if matches!(self.shared.mode, Mode::Submission { .. }) {
            // RFC 3461 parameters are kept with each queued recipient;
            // REQUIRETLS (RFC 8689) only means something over TLS.
            caps.push("DSN".to_string());
            if conn.is_tls() {
                caps.push("REQUIRETLS".to_string());
            }
        }
        caps
    }

    async fn mail(&mut self, conn: &mut Conn, from: ReversePath, params: MailParams) {
        if self.helo.is_none() {
            return self.reply(conn, Reply::new(503, Some((5, 5, 1)), "Say EHLO first"));
        }
        if self.txn.is_some() {
            return self.reply(conn, Reply::new(503, Some((5, 5, 1)), "Nested MAIL command"));
        }
        if matches!(self.shared.mode, Mode::Submission { .. }) {
            let Some(account) = &self.account else {
                return self.reply(conn, Reply::auth_required());
            };
            let owned = match &from {
                ReversePath::Null => Ok(false),
                ReversePath::Mailbox(m) => {
                    let address = m.normalized().to_string();
                    sender_allowed(&self.shared.ctx, &account.email, &address, &self.shared.routing).await
                }
            };
            let owned = match owned {
                Ok(o) => o,
                Err(_) => return self.reply(conn, Reply::local_error()),
            };
            if !owned {
                return self.reply(
                    conn,
                    Reply::new(
                        553,
                        Some((5, 7, 1)),
                        format!("Sender address is not owned by {}", account.email),
                    ),
                );
            }
        }
        if params.size.is_some_and(|s| s > self.shared.max_message_bytes) {
            return self.reply(conn, Reply::message_too_big());
        }
        if params.smtputf8 && !self.esmtp {
            return self.reply(conn, Reply::parameter_not_implemented());
        }
        if let ReversePath::Mailbox(m) = &from
            && !m.is_ascii()
            && !params.smtputf8
        {
            return self.reply(conn, Reply::utf8_address_without_smtputf8());
        }
        if params.requiretls && !(conn.is_tls() && matches!(self.shared.mode, Mode::Submission { .. })) {
            return self.reply(conn, Reply::parameter_not_implemented());
        }
        let envelope = EnvelopeParams {
            ret: params.ret,
            envid: params.envid.clone(),
            smtputf8: params.smtputf8,
            eight_bit: matches!(params.body, Some(BodyType::EightBitMime | BodyType::BinaryMime)),
            require_tls: params.requiretls,
            tls_optional: false,
            rcpt_dsn: Vec::new(),
        };
        self.txn = Some(MailTxn {
            from,
            smtputf8: params.smtputf8,
            envelope,
            recipients: Vec::new(),
            rcpt_groups: Vec::new(),
            learned: LearnedAtRcpt::default(),
            bdat: None,
            bdat_failed: None,
        });
        self.reply(conn, Reply::sender_ok());
    }

    async fn rcpt(&mut self, conn: &mut Conn, to: ForwardPath, params: Vec<Param>) {
        let Some(txn) = &self.txn else {
            return self.reply(conn, Reply::new(503, Some((5, 5, 1)), "Need MAIL before RCPT"));
        };
        // DSN parameters (RFC 3461) are honoured on submission, where DSN is advertised.
        let dsn = match parse_rcpt_dsn(&params) {
            Ok((dsn, _)) if matches!(self.shared.mode, Mode::Submission { .. }) => dsn,
            Ok(_) => Default::default(),
            Err(e) => return self.reply(conn, e.reply()),
        };
        if txn.recipients.len() >= self.shared.max_recipients {
            return self.reply(conn, Reply::too_many_recipients());
        }
        let mailbox = match to {
            ForwardPath::Mailbox(m) => m.normalized(),
            ForwardPath::Postmaster => Mailbox {
                local: "postmaster".into(),
                domain: self.shared.hostname.to_ascii_lowercase(),
            },
        };
        if !mailbox.is_ascii() && !txn.smtputf8 {
            return self.reply(conn, Reply::utf8_address_without_smtputf8());
        }
        let checked = self.recipient_check(&mailbox).await;
        let reply = match checked.map(|c| (c.outcome, c.all_over_quota, c.learned)) {
            Ok((RcptOutcome::Accept(_), true, _)) => {
                metrics::counter!("meshmail_smtp_rcpt_over_quota_total").increment(1);
                Reply::over_quota()
            }
            Ok((RcptOutcome::Accept(found), false, learned)) => {
                self.add_recipients(found, learned, &dsn);
                Reply::recipient_ok()
            }
            Ok((RcptOutcome::Unknown, ..)) => Reply::unknown_user(),
            Ok((RcptOutcome::RelayDenied, ..)) => Reply::relay_denied(),
            Ok((RcptOutcome::Misconfigured(why), ..)) => {
                tracing::warn!(recipient = %mailbox, why, "alias configuration error");
                Reply::new(550, Some((5, 4, 6)), "Routing loop or alias expansion too large")
            }
            Err(_) => Reply::local_error(),
        };
        self.reply(conn, reply);
    }

    /// The recipient check, bounded like DATA's commit: a store that cannot
    /// be read (FDB unreachable: each attempt waits out its 5 s timeout,
    /// the retry budget is 20 s) is a 451 within the delivery timeout, not
    /// a client left waiting on RCPT.
    async fn recipient_check(&self, mailbox: &Mailbox) -> Result<RcptCheck, meshmail_storage::StorageError> {
        let submission = matches!(self.shared.mode, Mode::Submission { .. });
        tokio::time::timeout(
            self.shared.delivery_timeout,
            check_recipient(
                &self.shared.ctx,
                mailbox,
                submission,
                &self.shared.routing,
                self.shared.rcpt_cache.as_deref(),
            ),
        )
        .await
        .unwrap_or_else(|_| {
            metrics::counter!("meshmail_smtp_rcpt_store_timeouts_total").increment(1);
            Err(meshmail_storage::StorageError::Unavailable(
                "the store did not answer RCPT's read in time".into(),
            ))
        })
    }

    /// Adds an accepted RCPT's targets to the transaction, each with the
    /// RCPT's DSN parameters.
    fn add_recipients(&mut self, found: Vec<Recipient>, learned: LearnedAtRcpt, dsn: &RcptDsn) {
        let lmtp = self.shared.mode == Mode::Lmtp;
        let txn = self.txn.as_mut().expect("checked");
        txn.learned.extend(learned);
        if lmtp {
            // One reply per RCPT after the data: keep each RCPT's own.
            txn.rcpt_groups.push(found.len());
            for r in found {
                txn.recipients.push(r);
                txn.envelope.rcpt_dsn.push(dsn.clone());
            }
        } else {
            // Two addresses of one mailbox (an alias and the account,
            // or two aliases) deliver one copy.
            for r in found {
                if !txn.recipients.iter().any(|have| same_target(have, &r)) {
                    txn.recipients.push(r);
                    txn.envelope.rcpt_dsn.push(dsn.clone());
                }
            }
        }
    }

    async fn data(&mut self, conn: &mut Conn) -> Result<(), ConnError> {
        let refusal = match &self.txn {
            None => Some(Reply::new(503, Some((5, 5, 1)), "Need MAIL and RCPT first")),
            Some(t) if t.bdat.is_some() => Some(Reply::new(503, Some((5, 5, 1)), "DATA during a BDAT transaction")),
            Some(t) if t.recipients.is_empty() => Some(Reply::no_valid_recipients()),
            Some(_) => None,
        };
        if let Some(r) = refusal {
            self.reply(conn, r);
            return Ok(());
        }
        self.reply(conn, Reply::start_mail_input());
        let limits = DataLimits::new(self.shared.max_message_bytes as usize);
        let mut decoder = DataDecoder::new(limits);
        let mut chunk = conn.take_buffered();
        loop {
            let fed = decoder.feed(&chunk);
            if fed.done {
                conn.unread(&chunk[fed.consumed..]);
                break;
            }
            chunk = conn.read_some().await?;
        }
        metrics::counter!("meshmail_smtp_data_bytes_total", "listener" => self.label())
            .increment(decoder.decoded_len());
        let result = decoder.finish();
        self.finish_message(conn, result).await;
        Ok(())
    }

    async fn bdat(&mut self, conn: &mut Conn, size: u64, last: bool) -> Result<(), ConnError> {
        let max = self.shared.max_message_bytes as usize;
        // The chunk must be read whatever the verdict, to stay in step.
        let mut refusal: Option<Reply> = match &self.txn {
            None => Some(Reply::new(503, Some((5, 5, 1)), "Need MAIL and RCPT first")),
            Some(t) if t.recipients.is_empty() => Some(Reply::no_valid_recipients()),
            Some(t) => t.bdat_failed.clone(),
        };
        let mut reader = self
            .txn
            .as_mut()
            .and_then(|t| t.bdat.take())
            .unwrap_or_else(|| BdatReader::new(max));
        if refusal.is_none() && reader.begin_chunk(size, last).is_err() {
            refusal = Some(Reply::bad_sequence());
        }
        let mut remaining = size;
        let mut chunk = conn.take_buffered();
        loop {
            let take = (remaining as usize).min(chunk.len());
            if refusal.is_none() {
                reader.feed(&chunk[..take]);
            }
            remaining -= take as u64;
            if remaining == 0 {
                conn.unread(&chunk[take..]);
                break;
            }
            chunk = conn.read_some().await?;
        }
        metrics::counter!("meshmail_smtp_data_bytes_total", "listener" => self.label()).increment(size);
        if let Some(r) = refusal {
            if let Some(t) = self.txn.as_mut() {
                t.bdat_failed = Some(r.clone());
            }
            if last {
                self.txn = None;
            }
            self.reply(conn, r);
            return Ok(());
        }
        if !last {
            if reader.is_oversize() {
                // Keep reading chunks, refuse at the end (no buffering).
                if let Some(t) = self.txn.as_mut() {
                    t.bdat_failed = Some(Reply::message_too_big());
                }
            }
            if let Some(t) = self.txn.as_mut() {
                t.bdat = Some(reader);
            }
            self.reply(
                conn,
                Reply::new(250, Some((2, 0, 0)), format!("{size} octets received")),
            );
            return Ok(());
        }
        let result = reader.finish();
        self.finish_message(conn, result).await;
        Ok(())
    }

    /// Stores an accepted message (or refuses it) and replies; ends the transaction.
    async fn finish_message(&mut self, conn: &mut Conn, body: Result<Vec<u8>, DataError>) {
        let txn = self.txn.take().expect("a transaction is open");
        let raw = match body {
            Ok(raw) => raw,
            Err(e) => {
                let reply = e.reply();
                if self.shared.mode == Mode::Lmtp {
                    for _ in &txn.rcpt_groups {
                        self.reply(conn, reply.clone());
                    }
                } else {
                    self.reply(conn, reply);
                }
                return;
            }
        };
        let started = Instant::now();
        let mut auth_results = None;
        let mut junk = false;
        if let (Mode::Mx, Some(checks)) = (self.shared.mode, &self.shared.inbound_auth)
            && checks.applies_to(self.peer.ip())
        {
            let mail_from = match &txn.from {
                ReversePath::Null => String::new(),
                ReversePath::Mailbox(m) => m.to_string(),
            };
            let peer = Peer {
                ip: self.peer.ip(),
                helo: self.helo.as_deref().unwrap_or(""),
                mail_from: &mail_from,
                hostname: &self.shared.hostname,
            };
            let verdict = authenticate(&self.shared.dns, &raw, &peer, checks.on_reject).await;
            match verdict.disposition {
                Disposition::Reject(why) => {
                    tracing::info!(peer = %self.peer, from = %mail_from, "refused by DMARC policy");
                    return self.reply(conn, Reply::new(550, Some((5, 7, 1)), why));
                }
                Disposition::Junk => junk = true,
                Disposition::Inbox => {}
            }
            auth_results = Some(verdict.header);
        }
        let txn_groups = txn.rcpt_groups;
        let accepted = Accepted {
            from: match txn.from {
                ReversePath::Null => None,
                ReversePath::Mailbox(m) => Some(m),
            },
            recipients: txn.recipients,
            helo: self.helo.clone().unwrap_or_default(),
            peer: self.peer,
            tls: conn.is_tls(),
            authenticated: self.account.as_ref().map(|a| a.email.clone()),
            lmtp: self.shared.mode == Mode::Lmtp,
            auth_results,
            junk,
            envelope: txn.envelope,
            learned: txn.learned,
        };
        let outcomes = accept_message(self.shared.acceptor(), accepted, raw).await;
        metrics::histogram!("meshmail_smtp_accept_seconds", "listener" => self.label())
            .record(started.elapsed().as_secs_f64());
        let replies: Vec<Reply> = outcomes.iter().map(reply_of).collect();
        if self.shared.mode == Mode::Lmtp {
            let mut replies = replies.into_iter();
            for n in txn_groups {
                let group: Vec<Reply> = replies.by_ref().take(n).collect();
                self.reply(conn, combine(group));
            }
        } else {
            self.reply(conn, combine(replies));
        }
    }

    async fn starttls(&mut self, conn: &mut Conn) -> Result<bool, ConnError> {
        let Some(tls) = self.shared.tls.clone() else {
            self.reply(conn, Reply::tls_not_available());
            return Ok(true);
        };
        if conn.is_tls() || self.shared.mode == Mode::Lmtp {
            self.reply(conn, Reply::new(503, Some((5, 5, 1)), "TLS already active"));
            return Ok(true);
        }
        self.reply(conn, Reply::ready_to_start_tls());
        conn.start_tls(&tls).await?;
        // RFC 3207 §4.2: forget everything learned before TLS.
        self.helo = None;
        self.esmtp = false;
        self.txn = None;
        self.account = None;
        Ok(true)
    }

    async fn auth(&mut self, conn: &mut Conn, mechanism: &str, initial: Option<String>) -> Result<bool, ConnError> {
        if !matches!(self.shared.mode, Mode::Submission { .. }) {
            self.reply(conn, Reply::not_implemented());
            return Ok(true);
        }
        if !self.auth_allowed(conn) {
            self.reply(conn, Reply::encryption_required());
            return Ok(true);
        }
        if self.account.is_some() || self.txn.is_some() || self.helo.is_none() {
            self.reply(conn, Reply::bad_sequence());
            return Ok(true);
        }
        let label = self.label();
        match sasl_auth(conn, &self.shared.auth, self.peer.ip(), mechanism, initial, label).await? {
            AuthStep::Ok(account) => {
                tracing::info!(peer = %self.peer, user = %account.email, "smtp auth ok");
                self.account = Some(account);
                self.reply(conn, Reply::auth_succeeded());
            }
            AuthStep::Reply(r) => {
                if r.code == 535 {
                    self.auth_failures += 1;
                }
                self.reply(conn, r);
                if self.auth_failures >= AUTH_FAILURES_MAX {
                    self.reply(
                        conn,
                        Reply::new(421, Some((4, 7, 0)), "Too many failed authentications"),
                    );
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

fn same_target(a: &Recipient, b: &Recipient) -> bool {
    match (a, b) {
        (Recipient::Local { account: x, .. }, Recipient::Local { account: y, .. }) => x == y,
        (Recipient::Remote { address: x, .. }, Recipient::Remote { address: y, .. }) => x.eq_ignore_ascii_case(y),
        _ => false,
    }
}

fn verb(cmd: &Command) -> &'static str {
    match cmd {
        Command::Ehlo(_) => "EHLO",
        Command::Helo(_) => "HELO",
        Command::Lhlo(_) => "LHLO",
        Command::Mail { .. } => "MAIL",
        Command::Rcpt { .. } => "RCPT",
        Command::Data => "DATA",
        Command::Bdat { .. } => "BDAT",
        Command::Rset => "RSET",
        Command::Noop(_) => "NOOP",
        Command::Quit => "QUIT",
        Command::Vrfy(_) => "VRFY",
        Command::Expn(_) => "EXPN",
        Command::Help(_) => "HELP",
        Command::StartTls => "STARTTLS",
        Command::Auth { .. } => "AUTH",
    }
}
