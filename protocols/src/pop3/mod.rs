//! POP3 (RFC 1939, with RFC 2449 CAPA and response codes, RFC 2595 STLS,
//! RFC 5034 SASL PLAIN), in two layers:
//!
//! - [`wire`]: command parsing, status and multi-line answers, the
//!   byte-stuffing encoder of RETR and TOP, SASL PLAIN. Pure code, no I/O.
//!   Never names [`session`].
//! - [`session`]: the AUTHORIZATION → TRANSACTION → UPDATE state machine
//!   over [`crate::net::Conn`], logins through the node's authenticator
//!   (the same failure limits as IMAP), INBOX read from the store, and the
//!   UPDATE state's expunge and `\Seen` written through the shard actor.
//!
//! APOP is not offered: the store keeps password hashes, and APOP needs
//! the shared secret in the clear on the server (RFC 1939 §7).

pub mod session;
pub mod wire;
