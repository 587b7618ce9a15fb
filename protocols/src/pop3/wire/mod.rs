//! The POP3 wire layer: what a command line means ([`command`]), how the
//! answers are written, multi-line answers byte-stuffed ([`response`]),
//! and SASL PLAIN ([`sasl`]). Pure code, no I/O: the session decides what
//! is allowed when; this layer only says what the bytes mean. Fuzz-friendly:
//! every entry point takes bytes and never panics (`proptest`s below each).
//!
//! What it may touch: the standard library and parsing crates. Never
//! `pop3::session`, [`crate::net`], the actors or the store
//! (`protocols/tests/layers.rs` fails if it does).

pub mod command;
pub mod response;
pub mod sasl;

pub use command::{COMMAND_LINE_MAX, COMMAND_TEXT_MAX, Command, MessageNumber, ParseError, parse_command};
pub use response::{CapaState, Code, Stuffer};
