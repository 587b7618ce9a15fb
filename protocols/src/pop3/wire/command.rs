//! POP3 command lines (RFC 1939 §§4–7, RFC 2449 CAPA, RFC 2595 STLS,
//! RFC 5034 AUTH): one line without its CRLF in, a [`Command`] or a typed
//! [`ParseError`] out. Never panics, whatever the bytes (fuzzed through
//! [`parse_command`] by the tests below and `protocols/fuzz`).

/// Longest command line, CRLF included (RFC 2449 §4: "the maximum length
/// of a command line is 255 octets, including the terminating CRLF").
pub const COMMAND_LINE_MAX: usize = 255;
/// The same without the CRLF: what a line reader may hand the parser.
pub const COMMAND_TEXT_MAX: usize = COMMAND_LINE_MAX - 2;
/// Longest keyword (RFC 2449 §3: keywords are 3 or 4 characters; longer
/// ones are unknown without looking further).
const KEYWORD_MAX: usize = 4;

/// A message number as the client wrote it: 1-based, never 0 (RFC 1939
/// §6: "message-number ... 1 through n").
pub type MessageNumber = u32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Capa,
    Quit,
    Stls,
    User(String),
    /// The rest of the line: a password may contain spaces (RFC 1939 §7
    /// notes servers may take the whole remainder).
    Pass(String),
    /// APOP is not offered (no shared secrets are stored, only password
    /// hashes); parsed so that it is refused as such rather than unknown.
    Apop,
    /// `AUTH` alone lists the mechanisms (RFC 1734 practice, which RFC
    /// 5034 keeps for clients that probe); else a mechanism, and an
    /// initial response (`=` for an empty one, RFC 5034 §4).
    Auth {
        mechanism: Option<String>,
        initial_response: Option<String>,
    },
    Stat,
    List(Option<MessageNumber>),
    Retr(MessageNumber),
    Dele(MessageNumber),
    Noop,
    Rset,
    /// TOP msg n: the headers and the first n lines of the body.
    Top(MessageNumber, u32),
    Uidl(Option<MessageNumber>),
}

impl Command {
    /// The keyword, for metrics and logs (a bounded set of labels).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Capa => "CAPA",
            Command::Quit => "QUIT",
            Command::Stls => "STLS",
            Command::User(_) => "USER",
            Command::Pass(_) => "PASS",
            Command::Apop => "APOP",
            Command::Auth { .. } => "AUTH",
            Command::Stat => "STAT",
            Command::List(_) => "LIST",
            Command::Retr(_) => "RETR",
            Command::Dele(_) => "DELE",
            Command::Noop => "NOOP",
            Command::Rset => "RSET",
            Command::Top(..) => "TOP",
            Command::Uidl(_) => "UIDL",
        }
    }
}

/// Why a line is not a command the server can run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("Empty command")]
    Empty,
    #[error("Command line too long")]
    TooLong,
    #[error("Command line is not UTF-8")]
    NotUtf8,
    #[error("Unknown command")]
    Unknown,
    #[error("{command}: {why}")]
    BadArgs { command: &'static str, why: &'static str },
}

/// Parses one command line (without CRLF).
pub fn parse_command(line: &[u8]) -> Result<Command, ParseError> {
    if line.len() > COMMAND_TEXT_MAX {
        return Err(ParseError::TooLong);
    }
    let text = std::str::from_utf8(line).map_err(|_| ParseError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    // RFC 1939 §3: keyword and arguments are separated by a single space;
    // the keyword is case-insensitive.
    let (keyword, rest) = match text.split_once(' ') {
        Some((k, r)) => (k, Some(r)),
        None => (text, None),
    };
    if keyword.len() > KEYWORD_MAX || !keyword.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(ParseError::Unknown);
    }
    let upper = keyword.to_ascii_uppercase();
    let args: Vec<&str> = rest.map(|r| r.split(' ').collect()).unwrap_or_default();
    let bad = |command: &'static str, why: &'static str| Err(ParseError::BadArgs { command, why });
    match upper.as_str() {
        "CAPA" | "QUIT" | "STLS" | "STAT" | "NOOP" | "RSET" => {
            if rest.is_some() {
                return bad(static_name(&upper), "takes no arguments");
            }
            Ok(match upper.as_str() {
                "CAPA" => Command::Capa,
                "QUIT" => Command::Quit,
                "STLS" => Command::Stls,
                "STAT" => Command::Stat,
                "NOOP" => Command::Noop,
                _ => Command::Rset,
            })
        }
        "USER" => match args.as_slice() {
            [name] if !name.is_empty() => Ok(Command::User((*name).to_string())),
            _ => bad("USER", "expects one name"),
        },
        "PASS" => match rest {
            Some(p) if !p.is_empty() => Ok(Command::Pass(p.to_string())),
            _ => bad("PASS", "expects a password"),
        },
        "APOP" => Ok(Command::Apop),
        "AUTH" => auth(&args),
        "LIST" => optional_number("LIST", &args).map(Command::List),
        "UIDL" => optional_number("UIDL", &args).map(Command::Uidl),
        "RETR" => one_number("RETR", &args).map(Command::Retr),
        "DELE" => one_number("DELE", &args).map(Command::Dele),
        "TOP" => match args.as_slice() {
            [msg, lines] => {
                let msg = message_number(msg).ok_or(ParseError::BadArgs {
                    command: "TOP",
                    why: "invalid message number",
                })?;
                let lines = decimal(lines).ok_or(ParseError::BadArgs {
                    command: "TOP",
                    why: "invalid number of lines",
                })?;
                Ok(Command::Top(msg, lines))
            }
            _ => bad("TOP", "expects a message number and a number of lines"),
        },
        _ => Err(ParseError::Unknown),
    }
}

/// The `&'static` keyword of an argument-less command (for error texts).
fn static_name(upper: &str) -> &'static str {
    ["CAPA", "QUIT", "STLS", "STAT", "NOOP", "RSET"]
        .into_iter()
        .find(|k| *k == upper)
        .unwrap_or("COMMAND")
}

fn auth(args: &[&str]) -> Result<Command, ParseError> {
    let bad = |why| ParseError::BadArgs { command: "AUTH", why };
    match args {
        [] => Ok(Command::Auth {
            mechanism: None,
            initial_response: None,
        }),
        [mech] | [mech, _] if mech.is_empty() || !mech.bytes().all(is_sasl_name_char) => {
            Err(bad("invalid mechanism name"))
        }
        [mech] => Ok(Command::Auth {
            mechanism: Some(mech.to_ascii_uppercase()),
            initial_response: None,
        }),
        [mech, initial] if !initial.is_empty() => Ok(Command::Auth {
            mechanism: Some(mech.to_ascii_uppercase()),
            initial_response: Some((*initial).to_string()),
        }),
        _ => Err(bad("expects a mechanism and at most one initial response")),
    }
}

/// RFC 4422 §3.1 mechanism names: upper-case letters, digits, `-`, `_`
/// (lower case accepted and folded).
fn is_sasl_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn optional_number(command: &'static str, args: &[&str]) -> Result<Option<MessageNumber>, ParseError> {
    match args {
        [] => Ok(None),
        [n] => message_number(n).map(Some).ok_or(ParseError::BadArgs {
            command,
            why: "invalid message number",
        }),
        _ => Err(ParseError::BadArgs {
            command,
            why: "expects at most one message number",
        }),
    }
}

fn one_number(command: &'static str, args: &[&str]) -> Result<MessageNumber, ParseError> {
    match args {
        [n] => message_number(n).ok_or(ParseError::BadArgs {
            command,
            why: "invalid message number",
        }),
        _ => Err(ParseError::BadArgs {
            command,
            why: "expects one message number",
        }),
    }
}

/// A message number: decimal digits only, 1..=u32::MAX. Whether it names
/// a message of the maildrop is the session's question.
fn message_number(s: &str) -> Option<MessageNumber> {
    decimal(s).filter(|n| *n > 0)
}

/// Plain decimal digits (no sign, no spaces), at most 10 of them.
fn decimal(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Command, ParseError> {
        parse_command(s.as_bytes())
    }

    #[test]
    fn commands_parse_case_insensitively() {
        assert_eq!(p("capa"), Ok(Command::Capa));
        assert_eq!(p("QuIt"), Ok(Command::Quit));
        assert_eq!(
            p("USER alice@example.org"),
            Ok(Command::User("alice@example.org".into()))
        );
        assert_eq!(p("PASS two words "), Ok(Command::Pass("two words ".into())));
        assert_eq!(p("LIST"), Ok(Command::List(None)));
        assert_eq!(p("list 7"), Ok(Command::List(Some(7))));
        assert_eq!(p("UIDL 4294967295"), Ok(Command::Uidl(Some(u32::MAX))));
        assert_eq!(p("RETR 1"), Ok(Command::Retr(1)));
        assert_eq!(p("DELE 2"), Ok(Command::Dele(2)));
        assert_eq!(p("TOP 3 0"), Ok(Command::Top(3, 0)));
        assert_eq!(p("STLS"), Ok(Command::Stls));
        assert_eq!(p("APOP alice 0123"), Ok(Command::Apop));
        assert_eq!(
            p("AUTH plain AGFAYg=="),
            Ok(Command::Auth {
                mechanism: Some("PLAIN".into()),
                initial_response: Some("AGFAYg==".into())
            })
        );
        assert_eq!(
            p("AUTH"),
            Ok(Command::Auth {
                mechanism: None,
                initial_response: None
            })
        );
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        assert_eq!(p(""), Err(ParseError::Empty));
        assert_eq!(p("   "), Err(ParseError::Empty));
        assert_eq!(p("XYZZY"), Err(ParseError::Unknown));
        assert_eq!(p("RETRIEVE 1"), Err(ParseError::Unknown));
        assert_eq!(p("RE1R 1"), Err(ParseError::Unknown));
        assert!(matches!(p("RETR"), Err(ParseError::BadArgs { command: "RETR", .. })));
        assert!(matches!(p("RETR 0"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("RETR -1"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("RETR +1"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("RETR 1 2"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("RETR 4294967296"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(
            p("RETR 99999999999999999999"),
            Err(ParseError::BadArgs { .. })
        ));
        assert!(matches!(p("DELE x"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("LIST 1 2"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("TOP 1"), Err(ParseError::BadArgs { command: "TOP", .. })));
        assert!(matches!(p("TOP 1 -1"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("STAT 1"), Err(ParseError::BadArgs { command: "STAT", .. })));
        assert!(matches!(p("USER"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("USER a b"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("PASS"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("AUTH PL@IN"), Err(ParseError::BadArgs { .. })));
        assert!(matches!(p("AUTH PLAIN a b"), Err(ParseError::BadArgs { .. })));
        // Two spaces: RFC 1939 separates by a single space.
        assert!(matches!(p("RETR  1"), Err(ParseError::BadArgs { .. })));
    }

    #[test]
    fn line_length_follows_rfc_2449() {
        let fits = format!("USER {}", "a".repeat(COMMAND_TEXT_MAX - 5));
        assert_eq!(fits.len(), COMMAND_TEXT_MAX);
        assert!(p(&fits).is_ok());
        let over = format!("USER {}", "a".repeat(COMMAND_TEXT_MAX - 4));
        assert_eq!(p(&over), Err(ParseError::TooLong));
        assert_eq!(parse_command(&vec![b'x'; 100_000]), Err(ParseError::TooLong));
    }

    #[test]
    fn invalid_utf8_is_refused() {
        assert_eq!(parse_command(b"USER \xff\xfe"), Err(ParseError::NotUtf8));
        assert_eq!(parse_command(b"PASS \xc3\x28"), Err(ParseError::NotUtf8));
        assert_eq!(parse_command(b"\x80"), Err(ParseError::NotUtf8));
        // Valid UTF-8 beyond ASCII is a name like any other.
        assert_eq!(
            parse_command("USER jörg@example.org".as_bytes()),
            Ok(Command::User("jörg@example.org".into()))
        );
    }

    #[test]
    fn control_bytes_and_nul_never_name_a_command() {
        assert_eq!(parse_command(b"RE\0R 1"), Err(ParseError::Unknown));
        assert_eq!(parse_command(b"\tSTAT"), Err(ParseError::Unknown));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = parse_command(&bytes);
        }

        #[test]
        fn numbers_round_trip(n in 1u32..) {
            proptest::prop_assert_eq!(p(&format!("RETR {n}")), Ok(Command::Retr(n)));
            proptest::prop_assert_eq!(p(&format!("TOP {n} {n}")), Ok(Command::Top(n, n)));
        }
    }
}
