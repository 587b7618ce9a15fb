//! ManageSieve (RFC 5804): uploading and managing an account's Sieve
//! scripts over TCP port 4190, in two layers:
//!
//! - [`wire`]: commands across lines and literals, script names, status
//!   responses and the capability list. Pure code, no I/O; never names
//!   [`session`].
//! - [`session`]: the connection (STARTTLS, AUTHENTICATE PLAIN through
//!   the node's authenticator, with IMAP's and POP3's failure limits) and
//!   the script commands on the store, compiling with [`crate::sieve`]
//!   before anything is stored: the same records `meshmail sieve put`
//!   writes and delivery runs.

pub mod session;
pub mod wire;
