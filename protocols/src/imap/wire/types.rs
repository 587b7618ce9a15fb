//! The IMAP command AST: what [`super::parse_command`] returns.
//!
//! Everything here is owned and validated: numbers are in range, mailbox
//! names are decoded to UTF-8 (see [`super::ParseOptions`]) with INBOX
//! normalized to upper case, keywords and capability names keep the case
//! the client used unless a comment says otherwise. Whether a command is
//! allowed in the current state, or whether an extension it uses was
//! enabled, is the session's business.

use super::sequence::SequenceSet;

/// One parsed command line (with its literals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub tag: String,
    pub kind: CommandKind,
}

/// The commands, one variant each. `uid: true` is the `UID` prefixed form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandKind {
    Capability,
    Noop,
    Logout,
    StartTls,
    /// `AUTHENTICATE mech [initial-response]` (RFC 4959 SASL-IR).
    Authenticate {
        /// Upper-cased mechanism name.
        mechanism: String,
        /// The decoded initial response; `=` gives `Some(vec![])`.
        initial_response: Option<Vec<u8>>,
    },
    Login {
        username: String,
        password: String,
    },
    /// Upper-cased capability names.
    Enable(Vec<String>),
    /// `COMPRESS mechanism` (RFC 4978), upper-cased.
    Compress(String),
    /// `ID NIL` is `None`; otherwise the field/value pairs (RFC 2971).
    Id(Option<Vec<(String, Option<String>)>>),
    Select {
        mailbox: String,
        params: SelectParams,
    },
    Examine {
        mailbox: String,
        params: SelectParams,
    },
    Create {
        mailbox: String,
        /// `(USE (\Drafts ...))` of RFC 6154, as written (with the backslash).
        special_use: Vec<String>,
    },
    Delete(String),
    Rename {
        from: String,
        to: String,
    },
    Subscribe(String),
    Unsubscribe(String),
    List(ListCommand),
    Lsub {
        reference: String,
        pattern: String,
    },
    Namespace,
    Status {
        mailbox: String,
        items: Vec<StatusItem>,
    },
    /// One message, or several with MULTIAPPEND (RFC 3502), all-or-nothing.
    Append {
        mailbox: String,
        messages: Vec<AppendMessage>,
    },
    /// The session then reads lines until [`super::is_done`].
    Idle,
    Check,
    Close,
    Unselect,
    Expunge,
    /// `UID EXPUNGE set` (UIDPLUS).
    UidExpunge(SequenceSet),
    Search(SearchCommand),
    Sort(SortCommand),
    Thread(ThreadCommand),
    Fetch(FetchCommand),
    Store(StoreCommand),
    Copy {
        uid: bool,
        set: SequenceSet,
        mailbox: String,
    },
    Move {
        uid: bool,
        set: SequenceSet,
        mailbox: String,
    },
    /// `GETQUOTA root` (the root is an astring, not decoded as a mailbox).
    GetQuota(String),
    GetQuotaRoot(String),
    /// `SETQUOTA root (RESOURCE limit ...)`; resource names upper-cased.
    SetQuota {
        root: String,
        limits: Vec<(String, u64)>,
    },
}

impl CommandKind {
    /// The command name as a client would write it (for logs and metrics).
    pub fn name(&self) -> &'static str {
        use CommandKind::*;
        match self {
            Capability => "CAPABILITY",
            Noop => "NOOP",
            Logout => "LOGOUT",
            StartTls => "STARTTLS",
            Authenticate { .. } => "AUTHENTICATE",
            Login { .. } => "LOGIN",
            Enable(_) => "ENABLE",
            Compress(_) => "COMPRESS",
            Id(_) => "ID",
            Select { .. } => "SELECT",
            Examine { .. } => "EXAMINE",
            Create { .. } => "CREATE",
            Delete(_) => "DELETE",
            Rename { .. } => "RENAME",
            Subscribe(_) => "SUBSCRIBE",
            Unsubscribe(_) => "UNSUBSCRIBE",
            List(_) => "LIST",
            Lsub { .. } => "LSUB",
            Namespace => "NAMESPACE",
            Status { .. } => "STATUS",
            Append { .. } => "APPEND",
            Idle => "IDLE",
            Check => "CHECK",
            Close => "CLOSE",
            Unselect => "UNSELECT",
            Expunge => "EXPUNGE",
            UidExpunge(_) => "UID EXPUNGE",
            Search(s) if s.uid => "UID SEARCH",
            Search(_) => "SEARCH",
            Sort(s) if s.uid => "UID SORT",
            Sort(_) => "SORT",
            Thread(t) if t.uid => "UID THREAD",
            Thread(_) => "THREAD",
            Fetch(f) if f.uid => "UID FETCH",
            Fetch(_) => "FETCH",
            Store(s) if s.uid => "UID STORE",
            Store(_) => "STORE",
            Copy { uid: true, .. } => "UID COPY",
            Copy { .. } => "COPY",
            Move { uid: true, .. } => "UID MOVE",
            Move { .. } => "MOVE",
            GetQuota(_) => "GETQUOTA",
            GetQuotaRoot(_) => "GETQUOTAROOT",
            SetQuota { .. } => "SETQUOTA",
        }
    }
}

/// SELECT/EXAMINE parameters (RFC 7162).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectParams {
    pub condstore: bool,
    pub qresync: Option<Qresync>,
}

/// `QRESYNC (uidvalidity modseq [known-uids [(known-seqs known-uids)]])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qresync {
    pub uidvalidity: u32,
    pub modseq: u64,
    pub known_uids: Option<SequenceSet>,
    /// `(known-sequence-set known-uid-set)`.
    pub seq_match: Option<(SequenceSet, SequenceSet)>,
}

/// LIST, basic or extended (RFC 5258, 5819, 6154). The basic form
/// `LIST ref pattern` has one pattern, no options and `extended: false`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListCommand {
    pub reference: String,
    /// Mailbox patterns with `*` and `%` wildcards, decoded like names.
    pub patterns: Vec<String>,
    pub select_subscribed: bool,
    pub select_remote: bool,
    /// Only with another selection option (checked by the parser).
    pub select_recursive_match: bool,
    pub select_special_use: bool,
    pub return_subscribed: bool,
    pub return_children: bool,
    pub return_special_use: bool,
    /// `RETURN (STATUS (...))` of RFC 5819.
    pub return_status: Option<Vec<StatusItem>>,
    /// Any extended syntax was used (selection options, several patterns
    /// or RETURN): the answer then follows RFC 5258 (no LSUB semantics,
    /// CHILDINFO, \NonExistent...).
    pub extended: bool,
}

/// STATUS data items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusItem {
    Messages,
    UidNext,
    UidValidity,
    Unseen,
    Deleted,
    Size,
    HighestModSeq,
    Recent,
    /// The mailbox's OBJECTID (RFC 8474 §4.2), the JMAP Mailbox id.
    MailboxId,
    /// Bytes an EXPUNGE would free (RFC 9208 §4.2.5).
    DeletedStorage,
}

/// A STATUS value: most are numbers, MAILBOXID a parenthesized id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusValue {
    Number(u64),
    ObjectId(String),
}

impl StatusItem {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusItem::Messages => "MESSAGES",
            StatusItem::UidNext => "UIDNEXT",
            StatusItem::UidValidity => "UIDVALIDITY",
            StatusItem::Unseen => "UNSEEN",
            StatusItem::Deleted => "DELETED",
            StatusItem::Size => "SIZE",
            StatusItem::HighestModSeq => "HIGHESTMODSEQ",
            StatusItem::Recent => "RECENT",
            StatusItem::MailboxId => "MAILBOXID",
            StatusItem::DeletedStorage => "DELETED-STORAGE",
        }
    }

    /// Case-insensitive.
    pub fn from_name(name: &str) -> Option<StatusItem> {
        let all = [
            StatusItem::Messages,
            StatusItem::UidNext,
            StatusItem::UidValidity,
            StatusItem::Unseen,
            StatusItem::Deleted,
            StatusItem::Size,
            StatusItem::HighestModSeq,
            StatusItem::Recent,
            StatusItem::MailboxId,
            StatusItem::DeletedStorage,
        ];
        all.into_iter().find(|i| i.as_str().eq_ignore_ascii_case(name))
    }
}

/// A message flag. System flags are recognized in any case and rendered
/// canonically; keywords keep the client's spelling (they compare
/// case-insensitively).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Flag {
    Answered,
    Flagged,
    Deleted,
    Seen,
    Draft,
    /// A keyword (`$Forwarded`, `Junk`...).
    Keyword(String),
    /// Another `\Word` (including `\Recent`, which STORE may not set:
    /// the session refuses or ignores it).
    Extension(String),
}

impl Flag {
    /// `\Seen` (any case), `\Other` or `keyword`. The caller has checked
    /// the characters (atom chars).
    pub fn from_name(name: &str) -> Flag {
        let Some(rest) = name.strip_prefix('\\') else {
            return Flag::Keyword(name.to_string());
        };
        match rest.to_ascii_uppercase().as_str() {
            "ANSWERED" => Flag::Answered,
            "FLAGGED" => Flag::Flagged,
            "DELETED" => Flag::Deleted,
            "SEEN" => Flag::Seen,
            "DRAFT" => Flag::Draft,
            _ => Flag::Extension(name.to_string()),
        }
    }

    /// The canonical spelling (`\Seen`), as stored and rendered.
    pub fn as_str(&self) -> &str {
        match self {
            Flag::Answered => "\\Answered",
            Flag::Flagged => "\\Flagged",
            Flag::Deleted => "\\Deleted",
            Flag::Seen => "\\Seen",
            Flag::Draft => "\\Draft",
            Flag::Keyword(k) | Flag::Extension(k) => k,
        }
    }
}

/// One message of APPEND.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendMessage {
    pub flags: Vec<Flag>,
    pub date: Option<DateTime>,
    pub data: Vec<u8>,
    /// Sent as a `~{n}` literal8 (RFC 3516): may hold NUL and binary parts.
    pub binary: bool,
}

/// A calendar day (SEARCH dates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: i32,
    /// 1..=12
    pub month: u32,
    /// 1..=31, valid for the month.
    pub day: u32,
}

pub(crate) const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl Date {
    /// A valid date or None.
    pub fn new(year: i32, month: u32, day: u32) -> Option<Date> {
        (1..=12)
            .contains(&month)
            .then_some(())
            .filter(|_| day >= 1 && day <= days_in_month(year, month))
            .map(|_| Date { year, month, day })
    }

    /// Days since 1970-01-01 (negative before), proleptic Gregorian.
    pub fn days_since_epoch(self) -> i64 {
        // Count from a year starting in March so that the leap day is last.
        let (m, d) = (i64::from(self.month), i64::from(self.day));
        let y = i64::from(self.year) - i64::from(m <= 2);
        let cycle = y.div_euclid(400);
        let year_in_cycle = y - cycle * 400;
        let month_from_march = (m + 9) % 12;
        let day_in_year = (153 * month_from_march + 2) / 5 + d - 1;
        let day_in_cycle = year_in_cycle * 365 + year_in_cycle / 4 - year_in_cycle / 100 + day_in_year;
        cycle * 146_097 + day_in_cycle - 719_468
    }

    /// The inverse of [`Date::days_since_epoch`].
    pub fn from_days(days: i64) -> Date {
        let z = days + 719_468;
        let cycle = z.div_euclid(146_097);
        let day_in_cycle = z - cycle * 146_097;
        let year_in_cycle = (day_in_cycle - day_in_cycle / 1460 + day_in_cycle / 36_524 - day_in_cycle / 146_096) / 365;
        let day_in_year = day_in_cycle - (365 * year_in_cycle + year_in_cycle / 4 - year_in_cycle / 100);
        let month_from_march = (5 * day_in_year + 2) / 153;
        let day = day_in_year - (153 * month_from_march + 2) / 5 + 1;
        let month = if month_from_march < 10 {
            month_from_march + 3
        } else {
            month_from_march - 9
        };
        let year = year_in_cycle + cycle * 400 + i64::from(month <= 2);
        Date {
            year: year.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
            month: month as u32,
            day: day as u32,
        }
    }

    /// The UTC day of a Unix time in milliseconds.
    pub fn from_unix_ms(ms: i64) -> Date {
        Date::from_days(ms.div_euclid(86_400_000))
    }

    /// `Jan`..`Dec` (case-insensitive) to 1..=12.
    pub fn month_from_name(name: &[u8]) -> Option<u32> {
        MONTHS
            .iter()
            .position(|m| m.as_bytes().eq_ignore_ascii_case(name))
            .map(|i| i as u32 + 1)
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// An APPEND date-time: the instant and the zone it was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    pub unix_ms: i64,
    /// East of UTC, in minutes (`-0500` is -300).
    pub offset_minutes: i32,
}

/// SEARCH / UID SEARCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchCommand {
    pub uid: bool,
    /// `RETURN (...)` (RFC 4731 ESEARCH): the answer is `* ESEARCH`.
    pub ret: Option<SearchReturn>,
    /// Upper-cased CHARSET; the session answers NO [BADCHARSET (UTF-8
    /// US-ASCII)] for others (strings are kept as lossy UTF-8).
    pub charset: Option<String>,
    /// Several top-level keys are folded into one [`SearchKey::And`].
    pub key: SearchKey,
}

/// SORT (RFC 5256): criteria, then a search program (with its charset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortCommand {
    pub uid: bool,
    pub criteria: Vec<SortCriterion>,
    pub search: SearchCommand,
}

/// THREAD (RFC 5256): an algorithm, then a search program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCommand {
    pub uid: bool,
    pub algorithm: ThreadAlgorithm,
    pub search: SearchCommand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadAlgorithm {
    OrderedSubject,
    References,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortCriterion {
    pub reverse: bool,
    pub key: SortKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Arrival,
    Cc,
    Date,
    From,
    Size,
    Subject,
    To,
}

/// RETURN options; `RETURN ()` means ALL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchReturn {
    pub min: bool,
    pub max: bool,
    pub all: bool,
    pub count: bool,
    /// RFC 5182: remember the result for `$`.
    pub save: bool,
}

/// One search criterion (RFC 9051 §6.4.4, RFC 7162 MODSEQ, RFC 5182 `$`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchKey {
    All,
    Answered,
    Bcc(String),
    Before(Date),
    Body(String),
    Cc(String),
    Deleted,
    Draft,
    Flagged,
    From(String),
    /// Field name, substring (an empty substring matches any message
    /// having the field).
    Header(String, String),
    Keyword(String),
    Larger(u64),
    New,
    Not(Box<SearchKey>),
    Old,
    On(Date),
    Or(Box<SearchKey>, Box<SearchKey>),
    Recent,
    Seen,
    SentBefore(Date),
    SentOn(Date),
    SentSince(Date),
    Since(Date),
    Smaller(u64),
    Subject(String),
    Text(String),
    To(String),
    /// `UID set`; `$` is [`SequenceSet::Saved`].
    Uid(SequenceSet),
    Unanswered,
    Undeleted,
    Undraft,
    Unflagged,
    Unkeyword(String),
    Unseen,
    /// A bare sequence set (message numbers), or `$`.
    Sequence(SequenceSet),
    /// `MODSEQ ["/flags/x" priv|shared|all] n`: the entry is kept but
    /// matching uses the message's MODSEQ only.
    ModSeq {
        entry: Option<(String, String)>,
        modseq: u64,
    },
    /// `EMAILID id` / `THREADID id` (RFC 8474 §6): the JMAP ids.
    EmailId(String),
    ThreadId(String),
    /// A parenthesized list, or several keys at top level.
    And(Vec<SearchKey>),
}

/// FETCH / UID FETCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchCommand {
    pub uid: bool,
    pub set: SequenceSet,
    /// Macros (ALL, FAST, FULL) are expanded. The parser adds `Uid` to a
    /// UID FETCH and `ModSeq` when CHANGEDSINCE is given, as the RFCs
    /// require those in the answer; no duplicates are removed otherwise.
    pub attrs: Vec<FetchAttr>,
    pub changed_since: Option<u64>,
    /// `VANISHED` (QRESYNC): only accepted on UID FETCH with CHANGEDSINCE.
    pub vanished: bool,
}

/// A FETCH data item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAttr {
    Envelope,
    Flags,
    InternalDate,
    /// RFC822: the whole message, answered as `RFC822`; sets \Seen.
    Rfc822,
    /// RFC822.HEADER (like `BODY.PEEK[HEADER]`, answered as RFC822.HEADER).
    Rfc822Header,
    Rfc822Size,
    /// RFC822.TEXT (like `BODY[TEXT]`; sets \Seen).
    Rfc822Text,
    /// BODY without a section: the non-extensible BODYSTRUCTURE.
    Body,
    BodyStructure,
    Uid,
    ModSeq,
    /// OBJECTID (RFC 8474): the JMAP Email id and Thread id of the message.
    EmailId,
    ThreadId,
    /// `BODY[section]<partial>` / `BODY.PEEK[...]`.
    BodySection {
        peek: bool,
        section: Section,
        partial: Option<Partial>,
    },
    /// `BINARY[part]<partial>` / `BINARY.PEEK[...]` (RFC 3516).
    Binary {
        peek: bool,
        part: Vec<u32>,
        partial: Option<Partial>,
    },
    /// `BINARY.SIZE[part]`.
    BinarySize {
        part: Vec<u32>,
    },
}

impl FetchAttr {
    /// Fetching this item sets \Seen (unless the mailbox is read-only).
    pub fn sets_seen(&self) -> bool {
        matches!(
            self,
            FetchAttr::Rfc822
                | FetchAttr::Rfc822Text
                | FetchAttr::BodySection { peek: false, .. }
                | FetchAttr::Binary { peek: false, .. }
        )
    }
}

/// `<offset.count>` of a partial fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    pub offset: u64,
    pub count: u64,
}

/// A body section: part numbers (`1.2.3`, empty for the whole message) and
/// what of that part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    pub part: Vec<u32>,
    pub text: Option<SectionText>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectionText {
    Header,
    /// Field names as the client wrote them (matched case-insensitively).
    HeaderFields(Vec<String>),
    HeaderFieldsNot(Vec<String>),
    Text,
    /// Only after part numbers.
    Mime,
}

/// STORE / UID STORE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCommand {
    pub uid: bool,
    pub set: SequenceSet,
    /// `(UNCHANGEDSINCE n)` of RFC 7162.
    pub unchanged_since: Option<u64>,
    pub mode: StoreMode,
    /// `.SILENT`: no untagged FETCH for the change (but see RFC 7162 §3.2).
    pub silent: bool,
    pub flags: Vec<Flag>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// `FLAGS`
    Replace,
    /// `+FLAGS`
    Add,
    /// `-FLAGS`
    Remove,
}
