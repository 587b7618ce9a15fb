//! SMTP command lines (RFC 5321 §4.1 with ESMTP extensions: SIZE RFC 1870,
//! 8BITMIME RFC 6152, BINARYMIME/CHUNKING RFC 3030, SMTPUTF8 RFC 6531,
//! AUTH RFC 4954, STARTTLS RFC 3207, DSN RFC 3461 parameters kept generic).
//!
//! [`parse_command`] takes one line without its CRLF and never panics.
//! It checks syntax only; whether a command is allowed now (sequence,
//! SMTPUTF8 requested, parameter advertised) is the session's business.

use super::reply::Reply;
use crate::envelope::address::{self, AddressError, AddressLiteral, Mailbox, PATH_MAX};
pub use crate::envelope::{DsnNotify, DsnRet, RcptDsn};

/// RFC 5321 §4.5.3.1.4: a command line is at most 512 octets including
/// CRLF. The caller enforces its read limit; [`parse_command`] refuses a
/// longer line handed to it.
pub const COMMAND_LINE_MAX: usize = 512;
/// RFC 4954 §4: an AUTH command line (with its initial response) may be up
/// to 12288 octets including CRLF.
pub const AUTH_LINE_MAX: usize = 12288;

/// The argument of EHLO/HELO/LHLO, or a mailbox domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Domain(String),
    Literal(AddressLiteral),
}

/// The argument of MAIL FROM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReversePath {
    /// `<>`: bounces and other messages that must not be answered.
    Null,
    Mailbox(Mailbox),
}

/// The argument of RCPT TO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardPath {
    /// `<Postmaster>` without a domain (any case): the local postmaster.
    Postmaster,
    Mailbox(Mailbox),
}

/// BODY= of MAIL (RFC 6152, RFC 3030).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    SevenBit,
    EightBitMime,
    BinaryMime,
}

/// AUTH= of MAIL (RFC 4954 §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailAuth {
    /// `AUTH=<>`: the submitter is not known or not trusted.
    Unknown,
    /// The xtext-decoded identity.
    Identity(String),
}

/// An ESMTP parameter kept as written: keyword uppercased, value as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub keyword: String,
    pub value: Option<String>,
}

/// MAIL FROM parameters. The ones a server acts upon are decoded (RET and
/// ENVID of DSN, RFC 3461; REQUIRETLS, RFC 8689); every other lands in
/// `other` and the session answers 555 for those it did not advertise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailParams {
    /// SIZE=n; a value too large for u64 saturates (it is too big anyway).
    pub size: Option<u64>,
    pub body: Option<BodyType>,
    pub smtputf8: bool,
    pub auth: Option<MailAuth>,
    pub ret: Option<DsnRet>,
    /// ENVID, xtext-decoded (at most 100 octets, RFC 3461 §4.4).
    pub envid: Option<String>,
    pub requiretls: bool,
    pub other: Vec<Param>,
}

/// Decodes NOTIFY and ORCPT from RCPT's parameters; everything else is
/// left to the caller (`unknown` lists the keywords it did not decode).
pub fn parse_rcpt_dsn(params: &[Param]) -> Result<(RcptDsn, Vec<String>), SyntaxError> {
    let mut out = RcptDsn::default();
    let mut unknown = Vec::new();
    for p in params {
        match (p.keyword.as_str(), p.value.as_deref()) {
            ("NOTIFY", Some(v)) => {
                if out.notify.is_some() {
                    return Err(SyntaxError::Parameters("duplicate parameter"));
                }
                let mut n = DsnNotify::default();
                for word in v.split(',') {
                    match word.to_ascii_uppercase().as_str() {
                        "NEVER" => n.never = true,
                        "SUCCESS" => n.success = true,
                        "FAILURE" => n.failure = true,
                        "DELAY" => n.delay = true,
                        _ => return Err(SyntaxError::Parameters("NOTIFY takes NEVER or SUCCESS,FAILURE,DELAY")),
                    }
                }
                // §4.1: NEVER stands alone.
                if n.never && (n.success || n.failure || n.delay) {
                    return Err(SyntaxError::Parameters("NOTIFY=NEVER takes no other value"));
                }
                out.notify = Some(n);
            }
            ("ORCPT", Some(v)) => {
                if out.orcpt.is_some() {
                    return Err(SyntaxError::Parameters("duplicate parameter"));
                }
                let (kind, addr) = v
                    .split_once(';')
                    .filter(|(k, a)| !k.is_empty() && !a.is_empty())
                    .ok_or(SyntaxError::Parameters("ORCPT needs addr-type;address"))?;
                let addr = decode_xtext(addr).ok_or(SyntaxError::Parameters("ORCPT is not xtext"))?;
                if addr.len() > 500 {
                    return Err(SyntaxError::Parameters("ORCPT is too long"));
                }
                out.orcpt = Some(format!("{kind};{addr}"));
            }
            ("NOTIFY" | "ORCPT", None) => return Err(SyntaxError::Parameters("parameter needs a value")),
            (k, _) => unknown.push(k.to_string()),
        }
    }
    Ok((out, unknown))
}

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Ehlo(Host),
    Helo(Host),
    /// LMTP's greeting (RFC 2033); an SMTP session answers 500 to it.
    Lhlo(Host),
    Mail {
        from: ReversePath,
        params: MailParams,
    },
    Rcpt {
        to: ForwardPath,
        params: Vec<Param>,
    },
    Data,
    Bdat {
        size: u64,
        last: bool,
    },
    Rset,
    Noop(Option<String>),
    Quit,
    Vrfy(String),
    Expn(String),
    Help(Option<String>),
    StartTls,
    Auth {
        /// Uppercased SASL mechanism name.
        mechanism: String,
        /// Base64 text as sent (`=` means an empty response); not decoded.
        initial_response: Option<String>,
    },
}

/// Why a line is not a valid command. [`SyntaxError::reply`] is what the
/// session should answer; details are static so a reply never echoes
/// client bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("command unrecognized")]
    UnrecognizedCommand,
    #[error("line too long")]
    LineTooLong,
    #[error("NUL, CR or LF inside the command line")]
    ForbiddenCharacter,
    #[error("invalid UTF-8 in the command line")]
    InvalidUtf8,
    #[error("syntax error in parameters: {0}")]
    Parameters(&'static str),
    #[error("bad sender address: {0}")]
    BadSender(AddressError),
    #[error("bad recipient address: {0}")]
    BadRecipient(AddressError),
}

impl SyntaxError {
    /// The reply to send for this error.
    pub fn reply(&self) -> Reply {
        match self {
            SyntaxError::UnrecognizedCommand => Reply::command_unrecognized(),
            SyntaxError::LineTooLong => Reply::new(500, Some((5, 5, 2)), "Line too long"),
            SyntaxError::ForbiddenCharacter => Reply::new(
                500,
                Some((5, 5, 2)),
                "Syntax error, forbidden character in command line",
            ),
            SyntaxError::InvalidUtf8 => Reply::new(500, Some((5, 5, 2)), "Syntax error, invalid UTF-8"),
            SyntaxError::Parameters(detail) => {
                Reply::new(501, Some((5, 5, 4)), format!("Syntax error in parameters: {detail}"))
            }
            SyntaxError::BadSender(e) => Reply::new(501, Some((5, 1, 7)), format!("Bad sender address syntax: {e}")),
            SyntaxError::BadRecipient(e) => Reply::new(
                501,
                Some((5, 1, 3)),
                format!("Bad destination mailbox address syntax: {e}"),
            ),
        }
    }
}

/// Parses one command line, given without its CRLF.
pub fn parse_command(line: &[u8]) -> Result<Command, SyntaxError> {
    // AUTH may be longer than other commands; look at the verb first so the
    // right limit applies.
    let verb_end = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
    let verb = &line[..verb_end];
    let limit = if verb.eq_ignore_ascii_case(b"AUTH") {
        AUTH_LINE_MAX
    } else {
        COMMAND_LINE_MAX
    };
    if line.len() + 2 > limit {
        return Err(SyntaxError::LineTooLong);
    }
    if line.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(SyntaxError::ForbiddenCharacter);
    }
    if !verb.is_ascii() {
        return Err(SyntaxError::UnrecognizedCommand);
    }
    let rest = std::str::from_utf8(&line[verb_end..]).map_err(|_| SyntaxError::InvalidUtf8)?;
    // Tolerate runs of spaces and trailing white space (common in the wild).
    let args = rest.trim_start_matches(' ').trim_end_matches([' ', '\t']);
    let verb = verb.to_ascii_uppercase();
    match verb.as_slice() {
        b"EHLO" => parse_host_arg(args).map(Command::Ehlo),
        b"HELO" => parse_host_arg(args).map(Command::Helo),
        b"LHLO" => parse_host_arg(args).map(Command::Lhlo),
        b"MAIL" => parse_mail(args),
        b"RCPT" => parse_rcpt(args),
        b"DATA" => no_args(args, Command::Data),
        b"BDAT" => parse_bdat(args),
        b"RSET" => no_args(args, Command::Rset),
        b"QUIT" => no_args(args, Command::Quit),
        b"STARTTLS" => no_args(args, Command::StartTls),
        b"NOOP" => Ok(Command::Noop(optional(args))),
        b"HELP" => Ok(Command::Help(optional(args))),
        b"VRFY" => required(args).map(Command::Vrfy),
        b"EXPN" => required(args).map(Command::Expn),
        b"AUTH" => parse_auth(args),
        _ => Err(SyntaxError::UnrecognizedCommand),
    }
}

fn no_args(args: &str, command: Command) -> Result<Command, SyntaxError> {
    if args.is_empty() {
        Ok(command)
    } else {
        Err(SyntaxError::Parameters("this command takes no argument"))
    }
}

fn optional(args: &str) -> Option<String> {
    (!args.is_empty()).then(|| args.to_string())
}

fn required(args: &str) -> Result<String, SyntaxError> {
    optional(args).ok_or(SyntaxError::Parameters("argument required"))
}

fn parse_host_arg(args: &str) -> Result<Host, SyntaxError> {
    if args.is_empty() {
        return Err(SyntaxError::Parameters("domain or address literal required"));
    }
    parse_host(args, true).map_err(|_| SyntaxError::Parameters("invalid domain or address literal"))
}

fn parse_bdat(args: &str) -> Result<Command, SyntaxError> {
    let mut words = args.split(' ').filter(|w| !w.is_empty());
    let size = words
        .next()
        .filter(|w| w.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|w| w.parse::<u64>().ok())
        .ok_or(SyntaxError::Parameters("BDAT needs a chunk size"))?;
    let last = match words.next() {
        None => false,
        Some(w) if w.eq_ignore_ascii_case("LAST") => true,
        Some(_) => return Err(SyntaxError::Parameters("BDAT size [LAST]")),
    };
    if words.next().is_some() {
        return Err(SyntaxError::Parameters("BDAT size [LAST]"));
    }
    Ok(Command::Bdat { size, last })
}

fn parse_auth(args: &str) -> Result<Command, SyntaxError> {
    let mut words = args.split(' ').filter(|w| !w.is_empty());
    let mechanism = words
        .next()
        .filter(|m| {
            // sasl-mech: 1*20 of upper-case letters, digits, "-" and "_"
            // (RFC 4422 §3.1); accepted in any case.
            (1..=20).contains(&m.len()) && m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .ok_or(SyntaxError::Parameters("AUTH needs a mechanism"))?;
    let initial_response = match words.next() {
        None => None,
        Some(r)
            if r == "="
                || r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')) =>
        {
            Some(r.to_string())
        }
        Some(_) => return Err(SyntaxError::Parameters("initial response is not base64")),
    };
    if words.next().is_some() {
        return Err(SyntaxError::Parameters("AUTH mechanism [initial-response]"));
    }
    Ok(Command::Auth {
        mechanism: mechanism.to_ascii_uppercase(),
        initial_response,
    })
}

/// Strips a case-insensitive `FROM:`/`TO:` and the spaces some clients put
/// after the colon (`MAIL FROM: <a@b>`), which RFC 5321 does not allow but
/// which is too common to refuse.
fn strip_keyword<'a>(args: &'a str, keyword: &str) -> Option<&'a str> {
    let head = args.get(..keyword.len())?;
    head.eq_ignore_ascii_case(keyword)
        .then(|| args[keyword.len()..].trim_start_matches(' '))
}

fn parse_mail(args: &str) -> Result<Command, SyntaxError> {
    let rest = strip_keyword(args, "FROM:").ok_or(SyntaxError::Parameters("expected MAIL FROM:<address>"))?;
    let (path, params) = parse_path(rest, false).map_err(SyntaxError::BadSender)?;
    let from = match path {
        Path::Null => ReversePath::Null,
        Path::Mailbox(m) => ReversePath::Mailbox(m),
        // Only asked for RCPT; a bare "Postmaster" is no sender.
        Path::Postmaster => return Err(SyntaxError::BadSender(AddressError::MissingDomain)),
    };
    let params = parse_mail_params(params)?;
    Ok(Command::Mail { from, params })
}

fn parse_rcpt(args: &str) -> Result<Command, SyntaxError> {
    let rest = strip_keyword(args, "TO:").ok_or(SyntaxError::Parameters("expected RCPT TO:<address>"))?;
    let (path, params) = parse_path(rest, true).map_err(SyntaxError::BadRecipient)?;
    let to = match path {
        Path::Postmaster => ForwardPath::Postmaster,
        Path::Mailbox(m) => ForwardPath::Mailbox(m),
        Path::Null => return Err(SyntaxError::BadRecipient(AddressError::EmptyLocalPart)),
    };
    let params = parse_params(params)?;
    Ok(Command::Rcpt { to, params })
}

enum Path {
    Null,
    Postmaster,
    Mailbox(Mailbox),
}

/// Parses `<path>` at the start of `s`, returning it and what follows
/// (the parameters, leading spaces removed). A source route
/// (`<@a,@b:user@c>`, RFC 5321 §4.1.2 obs) is checked and dropped, as
/// §3.3 and appendix C allow.
fn parse_path(s: &str, allow_postmaster: bool) -> Result<(Path, &str), AddressError> {
    let inner = s.strip_prefix('<').ok_or(AddressError::MissingBrackets)?;
    let (path, used) = if inner.starts_with('>') {
        (Path::Null, 0)
    } else if allow_postmaster && inner.get(..11).is_some_and(|p| p.eq_ignore_ascii_case("postmaster>")) {
        (Path::Postmaster, 10)
    } else {
        let mut start = 0;
        if inner.starts_with('@') {
            let colon = inner.find(':').ok_or(AddressError::InvalidDomain)?;
            for hop in inner[..colon].split(',') {
                let domain = hop.strip_prefix('@').ok_or(AddressError::InvalidDomain)?;
                parse_host(domain, false)?;
            }
            start = colon + 1;
        }
        let (mailbox, used) = address::parse_mailbox_prefix(&inner[start..], |c| c == '>')?;
        (Path::Mailbox(mailbox), start + used)
    };
    let after = inner[used..]
        .strip_prefix('>')
        .ok_or(AddressError::TrailingCharacters)?;
    // 1 for '<', `used` for the inside, 1 for '>'.
    if used + 2 > PATH_MAX {
        return Err(AddressError::PathTooLong);
    }
    if !after.is_empty() && !after.starts_with(' ') {
        return Err(AddressError::TrailingCharacters);
    }
    Ok((path, after.trim_start_matches(' ')))
}

/// Parses space-separated `keyword[=value]` parameters (RFC 5321 §4.1.2
/// esmtp-param; RFC 6531 allows UTF-8 in values).
fn parse_params(s: &str) -> Result<Vec<Param>, SyntaxError> {
    let mut params = Vec::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let (keyword, value) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (word, None),
        };
        let keyword_ok = keyword.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && keyword.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !keyword_ok {
            return Err(SyntaxError::Parameters("invalid parameter keyword"));
        }
        if let Some(v) = value
            && (v.is_empty() || !v.chars().all(|c| matches!(c, '!'..='<' | '>'..='~') || !c.is_ascii()))
        {
            return Err(SyntaxError::Parameters("invalid parameter value"));
        }
        params.push(Param {
            keyword: keyword.to_ascii_uppercase(),
            value: value.map(str::to_string),
        });
    }
    Ok(params)
}

fn parse_mail_params(s: &str) -> Result<MailParams, SyntaxError> {
    let mut out = MailParams::default();
    let mut seen_smtputf8 = false;
    for p in parse_params(s)? {
        let dup = SyntaxError::Parameters("duplicate parameter");
        match (p.keyword.as_str(), p.value) {
            ("SIZE", Some(v)) => set_once(&mut out.size, || size_value(&v))?,
            ("BODY", Some(v)) => set_once(&mut out.body, || body_value(&v))?,
            ("SMTPUTF8", None) => {
                if seen_smtputf8 {
                    return Err(dup);
                }
                seen_smtputf8 = true;
                out.smtputf8 = true;
            }
            ("AUTH", Some(v)) => set_once(&mut out.auth, || auth_value(&v))?,
            ("RET", Some(v)) => set_once(&mut out.ret, || ret_value(&v))?,
            ("ENVID", Some(v)) => set_once(&mut out.envid, || envid_value(&v))?,
            ("REQUIRETLS", None) => {
                if out.requiretls {
                    return Err(dup);
                }
                out.requiretls = true;
            }
            ("REQUIRETLS", Some(_)) => return Err(SyntaxError::Parameters("REQUIRETLS takes no value")),
            ("SIZE" | "BODY" | "AUTH" | "RET" | "ENVID", None) => {
                return Err(SyntaxError::Parameters("parameter needs a value"));
            }
            ("SMTPUTF8", Some(_)) => return Err(SyntaxError::Parameters("SMTPUTF8 takes no value")),
            (_, value) => out.other.push(Param {
                keyword: p.keyword,
                value,
            }),
        }
    }
    Ok(out)
}

/// Sets a parameter that may be given once: a second is refused before its
/// value is looked at.
fn set_once<T>(slot: &mut Option<T>, value: impl FnOnce() -> Result<T, SyntaxError>) -> Result<(), SyntaxError> {
    if slot.is_some() {
        return Err(SyntaxError::Parameters("duplicate parameter"));
    }
    *slot = Some(value()?);
    Ok(())
}

fn size_value(v: &str) -> Result<u64, SyntaxError> {
    if !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SyntaxError::Parameters("SIZE needs a number"));
    }
    // All digits: only overflow can fail, and an overflowing
    // size is simply too big.
    Ok(v.parse::<u64>().unwrap_or(u64::MAX))
}

fn body_value(v: &str) -> Result<BodyType, SyntaxError> {
    Ok(match v.to_ascii_uppercase().as_str() {
        "7BIT" => BodyType::SevenBit,
        "8BITMIME" => BodyType::EightBitMime,
        "BINARYMIME" => BodyType::BinaryMime,
        _ => return Err(SyntaxError::Parameters("BODY must be 7BIT, 8BITMIME or BINARYMIME")),
    })
}

/// AUTH= (RFC 4954 §5): `<>` when the submitter is not known.
fn auth_value(v: &str) -> Result<MailAuth, SyntaxError> {
    Ok(if v == "<>" {
        MailAuth::Unknown
    } else {
        MailAuth::Identity(decode_xtext(v).ok_or(SyntaxError::Parameters("AUTH= is not xtext"))?)
    })
}

fn ret_value(v: &str) -> Result<DsnRet, SyntaxError> {
    Ok(match v.to_ascii_uppercase().as_str() {
        "FULL" => DsnRet::Full,
        "HDRS" => DsnRet::Hdrs,
        _ => return Err(SyntaxError::Parameters("RET must be FULL or HDRS")),
    })
}

/// ENVID (RFC 3461 §4.4): xtext, at most 100 characters.
fn envid_value(v: &str) -> Result<String, SyntaxError> {
    let id = decode_xtext(v).ok_or(SyntaxError::Parameters("ENVID is not xtext"))?;
    if id.len() > 100 {
        return Err(SyntaxError::Parameters("ENVID is longer than 100 characters"));
    }
    Ok(id)
}

/// RFC 3461 §4 xtext: `+XX` is the octet XX (upper-case hex).
fn decode_xtext(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'+' {
            let hex = s.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses a domain or an address literal (the argument of EHLO/HELO, the
/// part after `@`). With `helo`, `_` is tolerated in labels.
fn parse_host(s: &str, helo: bool) -> Result<Host, AddressError> {
    if s.starts_with('[') {
        return address::parse_address_literal(s).map(Host::Literal);
    }
    address::check_domain(s, helo)?;
    Ok(Host::Domain(s.to_string()))
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
