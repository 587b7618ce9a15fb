//! The SMTP wire layer: command lines, replies and the message body after
//! DATA/BDAT. Pure code, no I/O: the session (state machine, sockets,
//! timeouts) is built on top of it and decides what is allowed when; this
//! layer only says what the bytes mean.
//!
//! - [`command`]: `parse_command` for one command line.
//! - [`data`]: `DataDecoder` (DATA, streaming, linear) and `BdatReader`.
//! - [`reply`]: `Reply` and the replies a server sends.
//! - Addresses are [`crate::envelope::address`], shared with acceptance
//!   and JMAP.
//!
//! What it may touch: [`crate::envelope`] and [`crate::summary`] (pure),
//! the standard library and parsing crates. Never `smtp::session`,
//! [`crate::accept`], [`crate::net`] or the store
//! (`protocols/tests/layers.rs` fails if it does).

pub mod command;
pub mod data;
pub mod reply;

/// Entry points shared by the cargo-fuzz targets (`protocols/fuzz`) and the
/// stable test that runs them on random inputs.
#[doc(hidden)]
pub mod fuzz;
/// The naive DATA decoder used as the oracle of differential tests.
#[doc(hidden)]
pub mod reference;
