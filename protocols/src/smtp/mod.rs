//! SMTP, submission and LMTP, in two layers:
//!
//! - [`wire`]: what the bytes mean — command lines, replies, the message
//!   body after DATA/BDAT. Pure code, no I/O, fuzzed (`protocols/fuzz`);
//!   it may use [`crate::envelope`] (mailboxes, DSN parameters) and
//!   [`crate::summary`] (fuzz entries), never [`session`] or
//!   [`crate::accept`].
//! - [`session`]: the RFC 5321 state machine of the three listeners over
//!   [`crate::net`], SASL, the MX's SPF/DKIM/ARC/DMARC checks, and the map
//!   from acceptance's typed outcomes ([`crate::accept::Outcome`]) to SMTP
//!   and LMTP replies.
//!
//! What happens to a message once read (routing, aliases, SRS, quota,
//! vacation, the store call) is [`crate::accept`], shared with JMAP
//! submission; it answers in its own types, not in SMTP reply codes.

pub mod session;
pub mod wire;

pub use crate::envelope::{AddressError, AddressLiteral, Mailbox};
pub use wire::command::{
    AUTH_LINE_MAX, BodyType, COMMAND_LINE_MAX, Command, ForwardPath, Host, MailAuth, MailParams, Param, RcptDsn,
    ReversePath, SyntaxError, parse_command, parse_rcpt_dsn,
};
pub use wire::data::{BdatError, BdatReader, DATA_LINE_MAX, DataDecoder, DataError, DataLimits, Feed};
pub use wire::reply::{Enhanced, Reply};
