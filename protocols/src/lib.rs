//! The mail protocols, each with its wire layer apart from its session
//! logic: [`smtp`] (SMTP, LMTP and submission: `command`/`data`/`reply`/
//! `address` are the pure wire layer, `session` the state machine, `accept`
//! what happens to a message once read), [`net`] (line I/O with STARTTLS and
//! pipelining), and [`summary`] (the one-time parse of a message into the
//! envelope and body structure stored with it), [`imap`], and [`dns`] (the
//! one resolver outbound delivery and inbound authentication share).
//!
//! Architecture invariant: a protocol session never writes to the store
//! directly; every write to a mailbox goes through that mailbox's shard
//! actor (`meshmail-actors`). Parsers never panic on network input and are
//! fuzzed (`protocols/fuzz`).

pub mod accept;
pub mod dns;
pub mod envelope;
pub mod imap;
pub mod ingest;
pub mod jmap;
pub mod managesieve;
pub mod net;
pub mod outbound;
pub mod pop3;
pub mod sieve;
pub mod smtp;
pub mod summary;
pub mod summary_raw;
