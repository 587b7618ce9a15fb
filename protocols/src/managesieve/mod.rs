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
//! - [`scripts`]: the script operations themselves (compile, then one
//!   store transaction), protocol-neutral: the session above and JMAP's
//!   SieveScript methods (RFC 9661) both call them, so a script stored by
//!   either is checked the same way and seen by the other.

pub mod scripts;
pub mod session;
pub mod wire;
