//! IMAP command parsing (RFC 9051 / RFC 3501 grammar with the extensions
//! listed in [`super`]).
//!
//! The session frames a command with [`super::literal_announcement`] (one line at
//! a time) and hands the whole of it, lines joined with CRLF and literal
//! bytes inline, to [`parse_command`]. Parsing never panics, allocates in
//! proportion to the input and recurses at most [`MAX_SEARCH_DEPTH`] levels.
//! It is lenient about spacing (runs of spaces, spaces inside parentheses,
//! trailing spaces and an optional final CRLF are accepted) and about 8-bit
//! bytes in atoms and quoted strings; it is strict about everything else.
//! Error reasons never echo client bytes.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::parser_fetch::{fetch, store};
use super::parser_reader::is_tag_char;
pub(super) use super::parser_reader::{R, Reader, err};
use super::types::*;

/// Deepest nesting of search keys (parentheses, NOT, OR).
pub const MAX_SEARCH_DEPTH: usize = 64;

/// What the parser must know about the session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// UTF8=ACCEPT is enabled: mailbox names are UTF-8, not modified UTF-7.
    pub utf8_accept: bool,
}

/// A command that does not parse. Answer `TAG BAD reason` when the tag was
/// read, `* BAD reason` otherwise ([`ParseError::response`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub tag: Option<String>,
    pub reason: String,
}

impl ParseError {
    /// The response line, CRLF included: BAD, except for a mailbox name
    /// that is not valid modified UTF-7 — well-formed syntax naming no
    /// possible mailbox, which gets `NO [CANNOT]` (as Dovecot answers).
    pub fn response(&self) -> Vec<u8> {
        let tag = self.tag.as_deref().unwrap_or("*");
        match self.reason.strip_prefix(super::parser_reader::BAD_NAME) {
            Some(why) if self.tag.is_some() => format!("{tag} NO [CANNOT] Invalid mailbox name: {why}\r\n"),
            _ => format!("{tag} BAD {}\r\n", self.reason),
        }
        .into_bytes()
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for ParseError {}

/// Parses a command with default options (modified UTF-7 mailbox names).
pub fn parse_command(input: &[u8]) -> Result<Command, ParseError> {
    parse_command_with(input, ParseOptions::default())
}

/// Parses one complete command.
pub fn parse_command_with(input: &[u8], options: ParseOptions) -> Result<Command, ParseError> {
    let tag_len = input.iter().take_while(|&&b| is_tag_char(b)).count();
    if tag_len == 0 || input.get(tag_len) != Some(&b' ') {
        return Err(ParseError {
            tag: None,
            reason: "missing or invalid tag".into(),
        });
    }
    // Tag characters are printable ASCII.
    let tag = String::from_utf8_lossy(&input[..tag_len]).into_owned();
    let mut r = Reader::new(input, tag_len, options.utf8_accept);
    match r
        .sp()
        .and_then(|_| command(&mut r))
        .and_then(|kind| r.end().map(|_| kind))
    {
        Ok(kind) => Ok(Command { tag, kind }),
        Err(reason) => Err(ParseError {
            tag: Some(tag),
            reason: reason.0,
        }),
    }
}

/// The command after the tag: its name, then its arguments (one function
/// per command whose arguments take more than a line to read).
fn command(r: &mut Reader<'_>) -> R<CommandKind> {
    use CommandKind as C;
    let name = r.word()?;
    Ok(match name.as_str() {
        "CAPABILITY" => C::Capability,
        "NOOP" => C::Noop,
        "LOGOUT" => C::Logout,
        "STARTTLS" => C::StartTls,
        "NAMESPACE" => C::Namespace,
        "IDLE" => C::Idle,
        "CHECK" => C::Check,
        "CLOSE" => C::Close,
        "UNSELECT" => C::Unselect,
        "EXPUNGE" => C::Expunge,
        "AUTHENTICATE" => authenticate(r)?,
        "LOGIN" => login(r)?,
        "COMPRESS" => {
            r.sp()?;
            C::Compress(r.word()?)
        }
        "ENABLE" => enable(r)?,
        "ID" => id(r)?,
        "SELECT" | "EXAMINE" => select(r, &name)?,
        "CREATE" => create(r)?,
        "DELETE" | "SUBSCRIBE" | "UNSUBSCRIBE" | "GETQUOTAROOT" => {
            r.sp()?;
            let mailbox = r.mailbox()?;
            match name.as_str() {
                "DELETE" => C::Delete(mailbox),
                "SUBSCRIBE" => C::Subscribe(mailbox),
                "UNSUBSCRIBE" => C::Unsubscribe(mailbox),
                _ => C::GetQuotaRoot(mailbox),
            }
        }
        "RENAME" => {
            r.sp()?;
            let from = r.mailbox()?;
            r.sp()?;
            C::Rename { from, to: r.mailbox()? }
        }
        "LIST" => C::List(list(r)?),
        "LSUB" => lsub(r)?,
        "STATUS" => {
            r.sp()?;
            let mailbox = r.mailbox()?;
            r.sp()?;
            let items = status_items(r)?;
            C::Status { mailbox, items }
        }
        "APPEND" => append(r)?,
        "SEARCH" | "SORT" | "THREAD" | "FETCH" | "STORE" | "COPY" | "MOVE" => uid_command(r, &name, false)?,
        "UID" => uid(r)?,
        "GETQUOTA" => {
            r.sp()?;
            C::GetQuota(r.text()?)
        }
        "SETQUOTA" => setquota(r)?,
        _ => return err("unknown command"),
    })
}

/// `AUTHENTICATE mechanism [initial-response]` (RFC 4959: `=` is empty).
fn authenticate(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let mechanism = r.word()?;
    let initial_response = if r.more() {
        r.sp()?;
        let ir = r.take_while(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
        Some(if ir == b"=" {
            Vec::new()
        } else {
            STANDARD.decode(ir).or(err("invalid base64 initial response"))?
        })
    } else {
        None
    };
    Ok(CommandKind::Authenticate {
        mechanism,
        initial_response,
    })
}

fn login(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let username = String::from_utf8(r.astring()?).or(err("user name is not UTF-8"))?;
    r.sp()?;
    let password = String::from_utf8(r.astring()?).or(err("password is not UTF-8"))?;
    Ok(CommandKind::Login { username, password })
}

fn enable(r: &mut Reader<'_>) -> R<CommandKind> {
    let mut caps = Vec::new();
    while r.more() {
        r.sp()?;
        caps.push(r.word()?);
    }
    if caps.is_empty() {
        return err("ENABLE needs at least one capability");
    }
    Ok(CommandKind::Enable(caps))
}

/// `ID NIL` or `ID (key value ...)`, at most 30 fields (RFC 2971 §3.3).
fn id(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    if r.eat_word("NIL") {
        return Ok(CommandKind::Id(None));
    }
    let items = r.list(|r| {
        let key = String::from_utf8_lossy(&r.string()?).into_owned();
        r.sp()?;
        Ok((key, r.nstring()?.map(|v| String::from_utf8_lossy(&v).into_owned())))
    })?;
    if items.len() > 30 {
        return err("too many ID fields");
    }
    Ok(CommandKind::Id(Some(items)))
}

/// `SELECT`/`EXAMINE mailbox [(params)]`.
fn select(r: &mut Reader<'_>, name: &str) -> R<CommandKind> {
    r.sp()?;
    let mailbox = r.mailbox()?;
    let params = if r.more() {
        r.sp()?;
        select_params(r)?
    } else {
        SelectParams::default()
    };
    Ok(if name == "SELECT" {
        CommandKind::Select { mailbox, params }
    } else {
        CommandKind::Examine { mailbox, params }
    })
}

/// `CREATE mailbox [(USE (special-use ...))]` (RFC 6154 §3).
fn create(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let mailbox = r.mailbox()?;
    let mut special_use = Vec::new();
    if r.more() {
        r.sp()?;
        r.list(|r| {
            if !r.eat_word("USE") {
                return err("unsupported CREATE parameter");
            }
            r.sp()?;
            special_use.extend(r.flag_list()?.iter().map(|f| f.as_str().to_string()));
            Ok(())
        })?;
    }
    Ok(CommandKind::Create { mailbox, special_use })
}

fn lsub(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let reference = r.mailbox()?;
    r.sp()?;
    Ok(CommandKind::Lsub {
        reference,
        pattern: r.list_mailbox()?,
    })
}

/// `UID EXPUNGE set`, or `UID` before a command that takes UIDs.
fn uid(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let sub = r.word()?;
    if sub == "EXPUNGE" {
        r.sp()?;
        return Ok(CommandKind::UidExpunge(r.sequence_set()?));
    }
    if matches!(
        sub.as_str(),
        "SEARCH" | "SORT" | "THREAD" | "FETCH" | "STORE" | "COPY" | "MOVE"
    ) {
        return uid_command(r, &sub, true);
    }
    err("unknown UID command")
}

/// `SETQUOTA root (resource limit ...)` (RFC 9208 §4.2).
fn setquota(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let root = r.text()?;
    r.sp()?;
    let limits = r.list(|r| {
        let resource = r.word()?;
        r.sp()?;
        Ok((resource, r.number64()?))
    })?;
    Ok(CommandKind::SetQuota { root, limits })
}

fn status_items(r: &mut Reader<'_>) -> R<Vec<StatusItem>> {
    let items = r.list(|r| StatusItem::from_name(&r.word()?).ok_or_else(|| "unknown status item".into()))?;
    if items.is_empty() {
        return err("empty status item list");
    }
    Ok(items)
}

fn select_params(r: &mut Reader<'_>) -> R<SelectParams> {
    let mut params = SelectParams::default();
    r.list(|r| {
        if r.eat_word("CONDSTORE") {
            params.condstore = true;
            return Ok(());
        }
        if !r.eat_word("QRESYNC") {
            return err("unknown SELECT parameter");
        }
        r.sp()?;
        r.expect(b'(', "expected QRESYNC parameters")?;
        let uidvalidity = r.nz_number()?;
        r.sp()?;
        let modseq = r.number64()?;
        let mut q = Qresync {
            uidvalidity,
            modseq,
            known_uids: None,
            seq_match: None,
        };
        if r.eat(b' ') {
            r.skip_sp();
            if r.peek() != Some(b')') {
                q.known_uids = Some(r.sequence_set()?);
                if r.eat(b' ') {
                    r.skip_sp();
                    if r.peek() != Some(b')') {
                        r.expect(b'(', "expected sequence match data")?;
                        let seqs = r.sequence_set()?;
                        r.sp()?;
                        let uids = r.sequence_set()?;
                        r.expect(b')', "expected ')'")?;
                        q.seq_match = Some((seqs, uids));
                        r.skip_sp();
                    }
                }
            }
        }
        r.expect(b')', "expected ')' after QRESYNC parameters")?;
        params.qresync = Some(q);
        Ok(())
    })?;
    Ok(params)
}

fn list(r: &mut Reader<'_>) -> R<ListCommand> {
    let mut cmd = ListCommand::default();
    r.sp()?;
    if r.peek() == Some(b'(') {
        cmd.extended = true;
        r.list(|r| {
            match r.word()?.as_str() {
                "SUBSCRIBED" => cmd.select_subscribed = true,
                "REMOTE" => cmd.select_remote = true,
                "RECURSIVEMATCH" => cmd.select_recursive_match = true,
                "SPECIAL-USE" => cmd.select_special_use = true,
                _ => return err("unknown LIST selection option"),
            }
            Ok(())
        })?;
        if cmd.select_recursive_match && !(cmd.select_subscribed || cmd.select_special_use) {
            return err("RECURSIVEMATCH needs another selection option");
        }
        r.sp()?;
    }
    cmd.reference = r.mailbox()?;
    r.sp()?;
    if r.peek() == Some(b'(') {
        cmd.extended = true;
        cmd.patterns = r.list(Reader::list_mailbox)?;
        if cmd.patterns.is_empty() {
            return err("empty pattern list");
        }
    } else {
        cmd.patterns = vec![r.list_mailbox()?];
    }
    if r.more() {
        r.sp()?;
        if !r.eat_word("RETURN") {
            return err("expected RETURN");
        }
        cmd.extended = true;
        r.sp()?;
        r.list(|r| {
            match r.word()?.as_str() {
                "SUBSCRIBED" => cmd.return_subscribed = true,
                "CHILDREN" => cmd.return_children = true,
                "SPECIAL-USE" => cmd.return_special_use = true,
                "STATUS" => {
                    r.sp()?;
                    cmd.return_status = Some(status_items(r)?);
                }
                _ => return err("unknown LIST return option"),
            }
            Ok(())
        })?;
    }
    Ok(cmd)
}

fn append(r: &mut Reader<'_>) -> R<CommandKind> {
    r.sp()?;
    let mailbox = r.mailbox()?;
    let mut messages = Vec::new();
    while messages.is_empty() || r.more() {
        r.sp()?;
        let mut flags = Vec::new();
        if r.peek() == Some(b'(') {
            flags = r.flag_list()?;
            r.sp()?;
        }
        let mut date = None;
        if r.peek() == Some(b'"') {
            date = Some(r.date_time()?);
            r.sp()?;
        }
        // RFC 6855 §4: `UTF8 (literal8)`, a message with UTF-8 headers,
        // only after ENABLE UTF8=ACCEPT.
        let utf8_data = r.eat_word("UTF8");
        if utf8_data {
            if !r.utf8_accept() {
                return err("APPEND UTF8 needs ENABLE UTF8=ACCEPT first");
            }
            r.sp()?;
            r.expect(b'(', "expected ( after UTF8")?;
            if r.peek() != Some(b'~') {
                return err("APPEND UTF8 takes a literal8 (~{n})");
            }
        }
        if !matches!(r.peek(), Some(b'{' | b'~')) {
            return err("expected the message as a literal");
        }
        let (data, binary) = r.literal()?;
        if utf8_data {
            r.expect(b')', "expected ) after the UTF8 literal")?;
        }
        messages.push(AppendMessage {
            flags,
            date,
            data,
            binary,
        });
    }
    Ok(CommandKind::Append { mailbox, messages })
}

fn uid_command(r: &mut Reader<'_>, name: &str, uid: bool) -> R<CommandKind> {
    r.sp()?;
    if name == "SEARCH" {
        return super::search::parse_search(r, uid).map(CommandKind::Search);
    }
    if name == "SORT" {
        return super::sort::parse_sort(r, uid).map(CommandKind::Sort);
    }
    if name == "THREAD" {
        return super::thread::parse_thread(r, uid).map(CommandKind::Thread);
    }
    let set = r.sequence_set()?;
    r.sp()?;
    Ok(match name {
        "FETCH" => CommandKind::Fetch(fetch(r, uid, set)?),
        "STORE" => CommandKind::Store(store(r, uid, set)?),
        "COPY" => CommandKind::Copy {
            uid,
            set,
            mailbox: r.mailbox()?,
        },
        _ => CommandKind::Move {
            uid,
            set,
            mailbox: r.mailbox()?,
        },
    })
}
