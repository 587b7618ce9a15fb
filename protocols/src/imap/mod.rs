//! IMAP (IMAP4rev2, RFC 9051, and IMAP4rev1, RFC 3501, with the extensions
//! listed in [`wire`]), in two layers:
//!
//! - [`wire`]: what the bytes mean — command framing and parsing into the
//!   AST of [`wire::types`], the response writers (ENVELOPE, BODYSTRUCTURE,
//!   sections), sequence sets, modified UTF-7, search matching over a
//!   [`MessageView`], SORT and THREAD. Pure code, no I/O, fuzzed
//!   (`protocols/fuzz`). May use [`crate::summary`]; never [`session`].
//! - [`session`]: the state machine and IDLE, parking idle sessions, the
//!   commands' reads from the store and writes through the shard actors,
//!   the selected mailbox's view, and the per-node envelope and hot-row
//!   caches. May use [`wire`], [`crate::net`], the store and the actors.
//!
//! The items most callers need are re-exported here from [`wire`].

pub mod session;
pub mod wire;

pub use wire::types::*;
pub use wire::{
    FetchResponse, IdSet, Literal, MAX_SEARCH_DEPTH, MessageView, ParseError, ParseOptions, SaslResponse,
    SearchContext, SeqNumber, SequenceSet, Status, fuzz_command, is_done, list_pattern_matches, literal_announcement,
    matches, needs_body, needs_headers, parse_command, parse_command_with, parse_sasl_response,
};
