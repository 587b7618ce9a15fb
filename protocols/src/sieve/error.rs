//! What can go wrong with a script: at upload ([`SieveError`], with the
//! line:column at fault) and at delivery ([`RuntimeError`], after which
//! the message is kept in INBOX).

use std::fmt;

/// A place in the script, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Why a script was refused when it was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SieveError {
    #[error("the script is {size} bytes, the limit is {max}")]
    TooLarge { size: usize, max: usize },
    #[error("{pos}: the script is not valid UTF-8")]
    InvalidUtf8 { pos: Pos },
    #[error("{pos}: {what}")]
    Syntax { pos: Pos, what: String },
    #[error("{pos}: blocks and tests nest deeper than {max}")]
    TooDeep { pos: Pos, max: usize },
    #[error("{pos}: unsupported extension {name:?}")]
    UnknownExtension { pos: Pos, name: String },
    #[error("{pos}: {name:?} needs `require \"{extension}\"`")]
    NotRequired { pos: Pos, name: String, extension: String },
    #[error("{pos}: unknown command {name:?}")]
    UnknownCommand { pos: Pos, name: String },
    #[error("{pos}: unknown test {name:?}")]
    UnknownTest { pos: Pos, name: String },
    #[error("{pos}: {command}: {what}")]
    Argument { pos: Pos, command: String, what: String },
    #[error("{pos}: redirect to the account's own address {address:?} would loop")]
    RedirectToSelf { pos: Pos, address: String },
}

impl SieveError {
    /// Where the script is at fault (None: the whole script, too large).
    pub fn pos(&self) -> Option<Pos> {
        match self {
            SieveError::TooLarge { .. } => None,
            SieveError::InvalidUtf8 { pos }
            | SieveError::Syntax { pos, .. }
            | SieveError::TooDeep { pos, .. }
            | SieveError::UnknownExtension { pos, .. }
            | SieveError::NotRequired { pos, .. }
            | SieveError::UnknownCommand { pos, .. }
            | SieveError::UnknownTest { pos, .. }
            | SieveError::Argument { pos, .. }
            | SieveError::RedirectToSelf { pos, .. } => Some(*pos),
        }
    }
}

/// Why a run stopped; the delivery keeps the message in INBOX and
/// records this (`meshmail_sieve_errors_total{kind}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("the script ran out of its budget of {0} steps")]
    Budget(u64),
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("include of {0:?}: no such script")]
    IncludeMissing(String),
    #[error("include nesting deeper than {0} (or an include loop)")]
    IncludeTooDeep(usize),
    #[error("include of {name:?}: {error}")]
    IncludeInvalid { name: String, error: SieveError },
    #[error("{0}")]
    Conflict(String),
    #[error("invalid {what}: {value:?}")]
    Invalid { what: &'static str, value: String },
}

impl RuntimeError {
    /// The metrics label.
    pub fn kind(&self) -> &'static str {
        match self {
            RuntimeError::Budget(_) => "budget",
            RuntimeError::TooManyRedirects(_) => "redirects",
            RuntimeError::IncludeMissing(_) | RuntimeError::IncludeTooDeep(_) | RuntimeError::IncludeInvalid { .. } => {
                "include"
            }
            RuntimeError::Conflict(_) => "conflict",
            RuntimeError::Invalid { .. } => "invalid",
        }
    }
}
