//! Server-side Sieve (RFC 5228) with fileinto, reject/ereject, envelope,
//! body, variables, imap4flags, relational, subaddress, copy, date/index,
//! vacation(-seconds), include, editheader, duplicate and mailbox.
//!
//! A pure layer: source bytes in, a compiled [`Script`] out
//! ([`compile()`], at upload: every syntax or `require` error is found
//! there, with line:column); then a compiled script and one message in,
//! typed [`Action`]s out ([`run`]). It does no I/O: what it needs of the
//! store (mailbox existence, duplicate ids, included scripts) comes
//! through [`Env`], which delivery (`accept::sieve`) fills beforehand.
//! `protocols/tests/layers.rs` keeps it pure.
//!
//! - [`lexer`], [`parser`], [`ast`]: RFC 5228 §8's grammar.
//! - [`compile()`](compile::compile), [`compile_test`], [`args`]: typed program ([`program`]).
//! - [`interp`], [`eval`], [`matching`], [`variables`], [`date`],
//!   [`address`], [`edit`], [`message`]: running it.

pub mod action;
pub mod address;
pub mod args;
pub mod ast;
pub mod compile;
pub mod compile_test;
pub mod date;
pub mod edit;
pub mod error;
pub mod eval;
pub mod fuzz;
pub mod interp;
pub mod lexer;
pub mod matching;
pub mod message;
pub mod parser;
pub mod program;
pub mod variables;

pub use action::{Action, DuplicateMark, Outcome, VacationReply};
pub use compile::{Context, SCRIPT_BYTES_MAX, compile};
pub use error::{Pos, RuntimeError, SieveError};
pub use interp::{Env, run};
pub use message::Envelope;
pub use program::Script;

#[cfg(test)]
mod tests;
