//! The compiled script: typed commands and tests, checked against the
//! script's `require`s. Built once when a script is stored (and cached per
//! node by version); each delivery only runs it.

/// A string argument; `vars` when it holds `${` and the variables
/// extension is on, so it is expanded at run time (RFC 5229 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str {
    pub text: String,
    pub vars: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparator {
    Octet,
    AsciiCasemap,
    AsciiNumeric,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelOp {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    Is,
    Contains,
    Matches,
    /// RFC 5231 `:value`.
    Value(RelOp),
    /// RFC 5231 `:count`.
    Count(RelOp),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchSpec {
    pub comparator: Comparator,
    pub kind: MatchKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPart {
    All,
    LocalPart,
    Domain,
    /// RFC 5233.
    User,
    Detail,
}

/// RFC 5260 §4: the `n`th occurrence, counted from the end with `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Index {
    pub n: u64,
    pub last: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyTransform {
    Raw,
    Text,
}

/// Where a date test reads its time zone (RFC 5260 §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zone {
    /// The server's zone (UTC here).
    Local,
    Original,
    Fixed(Str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    True,
    False,
    Not(Box<Test>),
    AllOf(Vec<Test>),
    AnyOf(Vec<Test>),
    Exists(Vec<Str>),
    Size {
        over: bool,
        limit: u64,
    },
    Header {
        names: Vec<Str>,
        keys: Vec<Str>,
        m: MatchSpec,
        index: Option<Index>,
    },
    Address {
        part: AddressPart,
        names: Vec<Str>,
        keys: Vec<Str>,
        m: MatchSpec,
        index: Option<Index>,
    },
    Envelope {
        part: AddressPart,
        names: Vec<Str>,
        keys: Vec<Str>,
        m: MatchSpec,
    },
    Body {
        transform: BodyTransform,
        keys: Vec<Str>,
        m: MatchSpec,
    },
    Date {
        header: Str,
        zone: Zone,
        part: Str,
        keys: Vec<Str>,
        m: MatchSpec,
        index: Option<Index>,
    },
    CurrentDate {
        zone: Zone,
        part: Str,
        keys: Vec<Str>,
        m: MatchSpec,
    },
    String {
        sources: Vec<Str>,
        keys: Vec<Str>,
        m: MatchSpec,
    },
    HasFlag {
        vars: Vec<Str>,
        keys: Vec<Str>,
        m: MatchSpec,
    },
    Duplicate(Box<Duplicate>),
    MailboxExists(Vec<Str>),
}

/// RFC 7352's test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    pub handle: Option<Str>,
    pub header: Option<Str>,
    pub uniqueid: Option<Str>,
    pub seconds: Option<u64>,
    pub last: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagOp {
    Set,
    Add,
    Remove,
}

/// RFC 5229 §4 modifiers, kept in the order they apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modifier {
    Lower,
    Upper,
    LowerFirst,
    UpperFirst,
    QuoteWildcard,
    Length,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vacation {
    pub days: Option<u64>,
    pub seconds: Option<u64>,
    pub subject: Option<Str>,
    pub from: Option<Str>,
    pub addresses: Vec<Str>,
    pub mime: bool,
    pub handle: Option<Str>,
    pub reason: Str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    If {
        branches: Vec<(Test, Vec<Command>)>,
        otherwise: Option<Vec<Command>>,
    },
    Stop,
    Keep {
        flags: Option<Vec<Str>>,
    },
    Discard,
    FileInto {
        mailbox: Str,
        flags: Option<Vec<Str>>,
        copy: bool,
        create: bool,
    },
    Redirect {
        address: Str,
        copy: bool,
    },
    Reject {
        reason: Str,
        extended: bool,
    },
    Vacation(Box<Vacation>),
    Set {
        name: String,
        value: Str,
        modifiers: Vec<Modifier>,
    },
    Flags {
        op: FlagOp,
        var: Option<Str>,
        flags: Vec<Str>,
    },
    AddHeader {
        last: bool,
        name: Str,
        value: Str,
    },
    DeleteHeader {
        index: Option<Index>,
        m: MatchSpec,
        name: Str,
        patterns: Option<Vec<Str>>,
    },
    Include {
        personal: bool,
        name: String,
        once: bool,
        optional: bool,
    },
    Return,
    Global(Vec<String>),
}

/// A compiled script.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    pub commands: Vec<Command>,
    /// Whether `${...}` in strings is expanded (RFC 5229 on).
    pub variables: bool,
    /// How many command and test nodes it holds (the size of a run).
    pub nodes: usize,
}
