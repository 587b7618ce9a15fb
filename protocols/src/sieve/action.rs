//! What a run decides: the typed actions delivery carries out, and the
//! duplicate ids it must remember.

/// One action of a finished run. Delivery maps each onto the store, the
/// outbound queue or the SMTP/LMTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Store in INBOX (explicit `keep` or the implicit keep).
    Keep {
        flags: Vec<String>,
    },
    FileInto {
        mailbox: String,
        flags: Vec<String>,
        create: bool,
    },
    Redirect {
        address: String,
    },
    /// Refuse the message (RFC 5429): SMTP/LMTP 550 5.7.1 with `reason`.
    Reject {
        reason: String,
        extended: bool,
    },
    /// Explicit `discard`: stored nowhere, still acknowledged.
    Discard,
    Vacation(Box<VacationReply>),
}

impl Action {
    /// The metrics label.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Keep { .. } => "keep",
            Action::FileInto { .. } => "fileinto",
            Action::Redirect { .. } => "redirect",
            Action::Reject { .. } => "reject",
            Action::Discard => "discard",
            Action::Vacation(_) => "vacation",
        }
    }
}

/// A vacation reply the script asks for (RFC 5230); whether it goes out
/// once per period is delivery's to decide (the shared vacation state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacationReply {
    /// The envelope sender the reply goes to.
    pub to: String,
    pub reason: String,
    pub subject: Option<String>,
    pub from: Option<String>,
    pub mime: bool,
    /// Identifies "the same response" (RFC 5230 §4.2).
    pub handle: String,
    pub period_s: u64,
}

/// An id seen by a `duplicate` test, recorded when the run succeeds (RFC
/// 7352 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateMark {
    pub id: String,
    pub expiry_s: u64,
    /// `:last`: the expiry restarts at every sighting.
    pub last: bool,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    pub actions: Vec<Action>,
    pub duplicates: Vec<DuplicateMark>,
    /// The message with its header section edited (editheader), when it was.
    pub edited: Option<Vec<u8>>,
    /// Steps charged to the budget.
    pub steps: u64,
}
