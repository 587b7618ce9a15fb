//! The SMTP wire layer: command lines, replies, addresses and the message
//! body after DATA/BDAT. Pure code, no I/O: the session (state machine,
//! sockets, timeouts) is built on top of it and decides what is allowed
//! when; this layer only says what the bytes mean.
//!
//! - [`command`]: [`parse_command`] for one command line.
//! - [`address`]: [`Mailbox`], domain and address-literal validation.
//! - [`data`]: [`DataDecoder`] (DATA, streaming, linear) and [`BdatReader`].
//! - [`reply`]: [`Reply`] and the replies a server sends.

pub mod accept;
pub mod address;
mod auth;
pub mod command;
pub mod data;
pub mod inbound_auth;
pub mod rcpt_cache;
pub mod reply;
pub mod routing;
pub mod session;
pub mod srs;
pub mod vacation;

/// Entry points shared by the cargo-fuzz targets (`protocols/fuzz`) and the
/// stable test that runs them on random inputs.
#[doc(hidden)]
pub mod fuzz;
/// The naive DATA decoder used as the oracle of differential tests.
#[doc(hidden)]
pub mod reference;

pub use address::{AddressError, AddressLiteral, Mailbox};
pub use command::{
    AUTH_LINE_MAX, BodyType, COMMAND_LINE_MAX, Command, ForwardPath, Host, MailAuth, MailParams, Param, RcptDsn,
    ReversePath, SyntaxError, parse_command, parse_rcpt_dsn,
};
pub use data::{BdatError, BdatReader, DATA_LINE_MAX, DataDecoder, DataError, DataLimits, Feed};
pub use reply::{Enhanced, Reply};
