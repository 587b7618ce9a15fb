//! Acceptance: what happens to a message once a protocol has read it,
//! whatever that protocol is. SMTP and LMTP (`smtp::session`), JMAP
//! EmailSubmission (`jmap::methods::submission`), vacation replies and the
//! outbound queue's DSNs hand messages in here; each maps the typed answer
//! to its own replies.
//!
//! - [`recipient`]: what a recipient address stands for, at RCPT time or
//!   before a submission ([`resolve_recipient`], [`check_recipient`] with
//!   the quota and vacation flags in one read), and which senders an
//!   account may use ([`sender_allowed`]).
//! - [`routing`]: accounts, aliases, `+tag` subaddresses, SRS bounce
//!   addresses, catch-alls, in one read transaction, bounded.
//! - [`rcpt_cache`]: the node's cache of those answers, trusted while the
//!   store's directory version is unchanged.
//! - [`srs`]: the envelope sender of forwarded copies (SRS0) and the check
//!   of bounces coming back.
//! - [`store`]: [`accept_message`] — the Received header, the one-time
//!   parse, the body write, one delivery per recipient through its shard
//!   actor (or the outbound queue for remote ones), each answered with an
//!   [`Outcome`].
//! - [`sieve`], [`sieve_actions`]: the account's active Sieve script at
//!   delivery (compiled once per node, run with the store's answers
//!   fetched first) and what its actions do.
//! - [`vacation`]: the automatic reply after a delivery (RFC 5230/3834),
//!   itself handed back to [`accept_message`].
//!
//! IMAP APPEND does not come through here: it stores into the user's own
//! mailbox, with the user's flags and date, through the shard actor
//! (`MailboxOp`/`delivery::deliver` from `imap::session`), with no
//! routing, aliases, SRS or vacation to apply. JMAP Email/import and
//! Email/set do the same. The quota is checked in the delivery transaction
//! itself for all of them (`DeliveryError::OverQuota`).
//!
//! What it may touch: the store and the actors (`meshmail-storage`,
//! `meshmail-actors`), [`crate::ingest`], [`crate::summary`], the
//! envelope's types ([`crate::envelope`]) and the pure Sieve layer
//! ([`crate::sieve`]). Never `smtp`, `imap`, `jmap`,
//! `net` or `outbound`: protocols depend on acceptance, not the other way
//! round (`protocols/tests/layers.rs` fails if it does).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use meshmail_actors::node::NodeCtx;

use crate::envelope::{DsnRet, Mailbox, RcptDsn};

pub mod rcpt_cache;
pub mod recipient;
pub mod routing;
pub mod sieve;
pub mod sieve_actions;
pub mod srs;
pub mod store;
pub mod vacation;

pub use recipient::{
    LearnedAtRcpt, RcptCheck, RcptOutcome, check_recipient, is_local_domain, resolve_recipient, sender_allowed,
};
pub use store::{accept_message, queue_remote, tls_required_no};

/// One final recipient of a message: the router's targets are exactly what
/// acceptance delivers (local) or queues (remote, `forwarded_by` the alias's
/// domain whose SRS sender the copy gets).
pub use routing::Target as Recipient;

/// What acceptance needs of the listener that hands it a message: the
/// store and actors, this node's name (Received header, vacation replies),
/// the routing rules and the delivery deadline. Borrowed from the SMTP
/// listener's settings (`SmtpShared::acceptor`); JMAP submission uses the
/// submission listener's.
#[derive(Clone, Copy)]
pub struct Acceptor<'a> {
    pub ctx: &'a Arc<NodeCtx>,
    pub hostname: &'a str,
    pub routing: &'a routing::RoutingConfig,
    /// How long a delivery waits for the store to commit before it is
    /// [`Refusal::Temporary`]; nothing is stored after that answer.
    pub delivery_timeout: Duration,
    /// Benchmark mode: every recipient is [`Outcome::Stored`] with the id
    /// `sink` and nothing is kept. Never in production.
    pub sink: bool,
}

/// What became of one recipient's copy. `Stored` only once it is durable:
/// committed to the mailbox by the shard actor, or in the outbound queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Durable under this acceptance id (`sink` in benchmark sink mode).
    Stored {
        id: String,
    },
    Refused(Refusal),
}

impl Outcome {
    pub fn is_stored(&self) -> bool {
        matches!(self, Outcome::Stored { .. })
    }
}

/// Why a copy was not stored. Nothing is half-written in any case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The delivery will never succeed as it is (the shard actor said so).
    #[error("{0}")]
    Permanent(String),
    /// The recipient's Sieve script refused it (`reject`/`ereject`, RFC
    /// 5429): SMTP/LMTP 550 5.7.1 with the script's reason.
    #[error("{0}")]
    Rejected(String),
    /// The recipient's quota (RFC 9208 limits) has no room for it.
    #[error("over quota")]
    OverQuota,
    /// The store's disk is full: try again later.
    #[error("insufficient storage")]
    StorageFull,
    /// Anything else (timeout, lost lease, store error): try again later.
    #[error("temporary local error")]
    Temporary,
}

impl Refusal {
    /// The sender may retry and succeed (SMTP 4xx, JMAP `serverFail`).
    pub fn is_temporary(&self) -> bool {
        matches!(self, Refusal::StorageFull | Refusal::Temporary)
    }
}

/// A message handed to acceptance: its envelope, where it came from (for
/// the Received header) and what the handing protocol already decided.
pub struct Accepted {
    /// The envelope sender; `None` is the null reverse path (`<>`:
    /// bounces, vacation replies), which nothing answers.
    pub from: Option<Mailbox>,
    pub recipients: Vec<Recipient>,
    /// The trace fields of the Received header: the client's HELO name (or
    /// this node's, for JMAP and vacation), its address, TLS, the
    /// authenticated user, and whether it came over LMTP.
    pub helo: String,
    pub peer: SocketAddr,
    pub tls: bool,
    pub authenticated: Option<String>,
    pub lmtp: bool,
    /// The `Authentication-Results` header of the MX checks, added below
    /// the Received header.
    pub auth_results: Option<String>,
    /// File into Junk instead of INBOX (DMARC quarantine).
    pub junk: bool,
    /// MAIL's and RCPT's parameters that outbound delivery honours
    /// (`Default` when there are none: JMAP submission, tests).
    pub envelope: EnvelopeParams,
    /// What RCPT learned of the local targets ([`LearnedAtRcpt`]): no
    /// vacation lookup after delivery for accounts with none on, no Sieve
    /// run for accounts with no active script. Empty (JMAP submission,
    /// vacation replies): each is looked up.
    pub learned: LearnedAtRcpt,
}

/// What the outbound queue keeps of the envelope besides the addresses:
/// DSN parameters (RFC 3461), SMTPUTF8 and 8BITMIME (what the next hop must
/// offer) and REQUIRETLS (RFC 8689).
#[derive(Debug, Clone, Default)]
pub struct EnvelopeParams {
    pub ret: Option<DsnRet>,
    pub envid: Option<String>,
    pub smtputf8: bool,
    pub eight_bit: bool,
    pub require_tls: bool,
    /// The message carries `TLS-Required: No` (RFC 8689 §5); set from the
    /// header at acceptance.
    pub tls_optional: bool,
    /// One per recipient, in the order of `Accepted::recipients` (missing
    /// entries mean no parameters).
    pub rcpt_dsn: Vec<RcptDsn>,
}
