//! The envelope's vocabulary, shared by every protocol that hands mail to
//! acceptance: RFC 5321 mailboxes (with RFC 6531 UTF-8) in [`address`], and
//! the RFC 3461 DSN parameters a recipient carries ([`RcptDsn`]; `RET` and
//! `NOTIFY` are the store's own types, kept in the outbound queue).
//!
//! What it may touch: nothing but `meshmail-storage`'s plain types. Pure
//! code, no I/O; the SMTP wire layer (`smtp::wire`) parses into these
//! types, acceptance (`crate::accept`) and JMAP submission use them, and
//! none of those is imported here.

pub mod address;

pub use address::{AddressError, AddressLiteral, Mailbox};
pub use meshmail_storage::model::outbound::{DsnNotify, DsnRet};

/// The DSN parameters of one RCPT (RFC 3461 §4.1, §4.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RcptDsn {
    pub notify: Option<DsnNotify>,
    /// ORCPT: `addr-type;address`, the address xtext-decoded.
    pub orcpt: Option<String>,
}
