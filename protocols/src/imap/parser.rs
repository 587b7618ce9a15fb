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

use super::sequence::SequenceSet;
use super::types::*;
use super::utf7::decode_mailbox;

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
    /// The BAD response line, CRLF included.
    pub fn response(&self) -> Vec<u8> {
        format!("{} BAD {}\r\n", self.tag.as_deref().unwrap_or("*"), self.reason).into_bytes()
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
    let mut r = Reader {
        buf: input,
        pos: tag_len,
        utf8: options.utf8_accept,
    };
    match r
        .sp()
        .and_then(|_| command(&mut r))
        .and_then(|kind| r.end().map(|_| kind))
    {
        Ok(kind) => Ok(Command { tag, kind }),
        Err(reason) => Err(ParseError { tag: Some(tag), reason }),
    }
}

pub(super) type R<T> = Result<T, String>;

pub(super) fn err<T>(reason: &str) -> R<T> {
    Err(reason.to_string())
}

fn is_atom_char(b: u8) -> bool {
    b > b' ' && b != 0x7f && !b"(){%*\"\\]".contains(&b)
}

fn is_astring_char(b: u8) -> bool {
    is_atom_char(b) || b == b']'
}

fn is_tag_char(b: u8) -> bool {
    is_astring_char(b) && b != b'+' && b.is_ascii()
}

fn is_list_char(b: u8) -> bool {
    is_astring_char(b) || b == b'%' || b == b'*'
}

pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    utf8: bool,
}

impl<'a> Reader<'a> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    pub(super) fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }

    pub(super) fn expect(&mut self, b: u8, reason: &str) -> R<()> {
        if self.eat(b) { Ok(()) } else { err(reason) }
    }

    /// One or more spaces.
    pub(super) fn sp(&mut self) -> R<()> {
        self.expect(b' ', "expected a space")?;
        self.skip_sp();
        Ok(())
    }

    pub(super) fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }

    /// Another argument follows (spaces then something other than CRLF).
    pub(super) fn more(&self) -> bool {
        let rest = &self.buf[self.pos..];
        let rest = &rest[rest.iter().take_while(|&&b| b == b' ').count()..];
        !rest.is_empty() && rest != b"\r\n"
    }

    pub(super) fn end(&mut self) -> R<()> {
        self.skip_sp();
        let _ = self.eat(b'\r') && self.eat(b'\n');
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            err("unexpected characters at the end of the command")
        }
    }

    pub(super) fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a [u8] {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        &self.buf[start..self.pos]
    }

    pub(super) fn atom(&mut self) -> R<&'a [u8]> {
        let a = self.take_while(is_atom_char);
        if a.is_empty() { err("expected an atom") } else { Ok(a) }
    }

    /// An atom, upper-cased (command names, keywords of the grammar).
    pub(super) fn word(&mut self) -> R<String> {
        Ok(String::from_utf8_lossy(self.atom()?).to_ascii_uppercase())
    }

    /// Reads the next word if it is `w` (any case); otherwise reads nothing.
    pub(super) fn eat_word(&mut self, w: &str) -> bool {
        let save = self.pos;
        let hit = self
            .take_while(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            .eq_ignore_ascii_case(w.as_bytes())
            && !self.peek().is_some_and(is_atom_char);
        if !hit {
            self.pos = save;
        }
        hit
    }

    pub(super) fn astring(&mut self) -> R<Vec<u8>> {
        match self.peek() {
            Some(b'"' | b'{') => self.string(),
            _ => {
                let a = self.take_while(is_astring_char);
                if a.is_empty() {
                    err("expected a string")
                } else {
                    Ok(a.to_vec())
                }
            }
        }
    }

    pub(super) fn string(&mut self) -> R<Vec<u8>> {
        match self.peek() {
            Some(b'"') => self.quoted(),
            Some(b'{') => self.literal().map(|(data, _)| data),
            _ => err("expected a quoted string or a literal"),
        }
    }

    pub(super) fn nstring(&mut self) -> R<Option<Vec<u8>>> {
        if self.eat_word("NIL") {
            Ok(None)
        } else {
            self.string().map(Some)
        }
    }

    pub(super) fn quoted(&mut self) -> R<Vec<u8>> {
        self.expect(b'"', "expected a quoted string")?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\r' | b'\n' | 0) => return err("unterminated quoted string"),
                Some(b'"') => break,
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c @ (b'"' | b'\\')) => out.push(c),
                        _ => return err("invalid escape in a quoted string"),
                    }
                }
                Some(c) => out.push(c),
            }
            self.pos += 1;
        }
        self.pos += 1;
        Ok(out)
    }

    /// `{n}`, `{n+}` or (returned as binary) `~{n}`, then CRLF and n bytes.
    pub(super) fn literal(&mut self) -> R<(Vec<u8>, bool)> {
        let binary = self.eat(b'~');
        self.expect(b'{', "expected a literal")?;
        let len = self.number64()?;
        let _ = self.eat(b'+');
        self.expect(b'}', "invalid literal announcement")?;
        if !(self.eat(b'\r') && self.eat(b'\n')) {
            return err("a literal announcement must end the line");
        }
        let rest = self.buf.len() - self.pos;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= rest)
            .ok_or("literal longer than the data")?;
        let data = self.buf[self.pos..self.pos + len].to_vec();
        self.pos += len;
        Ok((data, binary))
    }

    pub(super) fn digits(&mut self) -> R<&'a [u8]> {
        let d = self.take_while(|b| b.is_ascii_digit());
        if d.is_empty() { err("expected a number") } else { Ok(d) }
    }

    /// number64: 0..=2^63-1.
    pub(super) fn number64(&mut self) -> R<u64> {
        let d = self.digits()?;
        d.iter()
            .try_fold(0u64, |acc, &c| acc.checked_mul(10)?.checked_add(u64::from(c - b'0')))
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| "number too large".to_string())
    }

    pub(super) fn number(&mut self) -> R<u32> {
        u32::try_from(self.number64()?).map_err(|_| "number too large".to_string())
    }

    pub(super) fn nz_number(&mut self) -> R<u32> {
        match self.number()? {
            0 => err("zero is not allowed here"),
            n => Ok(n),
        }
    }

    /// `(` item *(SP item) `)`, possibly empty.
    pub(super) fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        self.expect(b'(', "expected a parenthesized list")?;
        let mut out = Vec::new();
        loop {
            self.skip_sp();
            if self.eat(b')') {
                return Ok(out);
            }
            if !out.is_empty() && self.buf.get(self.pos.wrapping_sub(1)) != Some(&b' ') {
                return err("expected a space between list items");
            }
            out.push(item(self)?);
        }
    }

    pub(super) fn mailbox(&mut self) -> R<String> {
        let raw = self.astring()?;
        decode_mailbox(&raw, self.utf8).map_err(|e| e.to_string())
    }

    pub(super) fn list_mailbox(&mut self) -> R<String> {
        let raw = match self.peek() {
            Some(b'"' | b'{') => self.string()?,
            _ => match self.take_while(is_list_char) {
                [] => return err("expected a mailbox pattern"),
                a => a.to_vec(),
            },
        };
        decode_mailbox(&raw, self.utf8).map_err(|e| e.to_string())
    }

    pub(super) fn text(&mut self) -> R<String> {
        Ok(String::from_utf8_lossy(&self.astring()?).into_owned())
    }

    pub(super) fn sequence_set(&mut self) -> R<SequenceSet> {
        let token = self.take_while(|b| b.is_ascii_digit() || b":,*$".contains(&b));
        SequenceSet::parse(token).ok_or_else(|| "invalid sequence set".to_string())
    }

    pub(super) fn flag(&mut self) -> R<Flag> {
        let backslash = self.eat(b'\\');
        let name = self.atom()?;
        if !name.is_ascii() {
            return err("flags must be ASCII");
        }
        let name = String::from_utf8_lossy(name);
        Ok(Flag::from_name(&if backslash {
            format!("\\{name}")
        } else {
            name.into_owned()
        }))
    }

    pub(super) fn flag_list(&mut self) -> R<Vec<Flag>> {
        self.list(Self::flag)
    }

    pub(super) fn date(&mut self) -> R<Date> {
        let quoted = self.eat(b'"');
        let day = self.digits()?;
        let parsed = (|| {
            let day = std::str::from_utf8(day).ok().filter(|d| d.len() <= 2)?.parse().ok()?;
            let month = (self.eat(b'-')).then(|| self.take_while(|b| b.is_ascii_alphabetic()))?;
            let month = Date::month_from_name(month)?;
            let year = self.eat(b'-').then(|| self.take_while(|b| b.is_ascii_digit()))?;
            let year = std::str::from_utf8(year).ok().filter(|y| y.len() == 4)?.parse().ok()?;
            Date::new(year, month, day)
        })();
        let date = parsed.ok_or("invalid date")?;
        if quoted {
            self.expect(b'"', "invalid date")?;
        }
        Ok(date)
    }

    /// `"dd-Mon-yyyy hh:mm:ss +zzzz"` (APPEND).
    pub(super) fn date_time(&mut self) -> R<DateTime> {
        let raw = self.quoted()?;
        parse_date_time(&raw).ok_or_else(|| "invalid date-time".to_string())
    }
}

/// `dd-Mon-yyyy hh:mm:ss +zzzz`, the day maybe space-padded or one digit.
fn parse_date_time(raw: &[u8]) -> Option<DateTime> {
    let s = std::str::from_utf8(raw).ok()?.trim_start();
    let (date, rest) = s.split_once(' ')?;
    let (time, zone) = rest.split_once(' ')?;
    let mut d = date.split('-');
    let day: u32 = d.next().filter(|x| (1..=2).contains(&x.len()))?.parse().ok()?;
    let month = Date::month_from_name(d.next()?.as_bytes())?;
    let year: i32 = d.next().filter(|y| y.len() == 4)?.parse().ok()?;
    let date = Date::new(year, month, day).filter(|_| d.next().is_none())?;
    let two = |x: &str, max: i64| {
        let digits = x.len() == 2 && x.bytes().all(|b| b.is_ascii_digit());
        x.parse::<i64>().ok().filter(|&v| digits && v <= max)
    };
    let mut t = time.split(':');
    let (h, m, sec) = (two(t.next()?, 23)?, two(t.next()?, 59)?, two(t.next()?, 60)?);
    if t.next().is_some() {
        return None;
    }
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let z = zone
        .get(1..)
        .filter(|z| z.len() == 4 && z.bytes().all(|b| b.is_ascii_digit()))?;
    let offset = sign * (two(&z[..2], 99)? * 60 + two(&z[2..], 59)?);
    let local = date.days_since_epoch() * 86_400 + h * 3600 + m * 60 + sec;
    Some(DateTime {
        unix_ms: (local - offset * 60) * 1000,
        offset_minutes: offset as i32,
    })
}

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
        "AUTHENTICATE" => {
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
            C::Authenticate {
                mechanism,
                initial_response,
            }
        }
        "LOGIN" => {
            r.sp()?;
            let username = String::from_utf8(r.astring()?).or(err("user name is not UTF-8"))?;
            r.sp()?;
            let password = String::from_utf8(r.astring()?).or(err("password is not UTF-8"))?;
            C::Login { username, password }
        }
        "ENABLE" => {
            let mut caps = Vec::new();
            while r.more() {
                r.sp()?;
                caps.push(r.word()?);
            }
            if caps.is_empty() {
                return err("ENABLE needs at least one capability");
            }
            C::Enable(caps)
        }
        "ID" => {
            r.sp()?;
            if r.eat_word("NIL") {
                C::Id(None)
            } else {
                let items = r.list(|r| {
                    let key = String::from_utf8_lossy(&r.string()?).into_owned();
                    r.sp()?;
                    Ok((key, r.nstring()?.map(|v| String::from_utf8_lossy(&v).into_owned())))
                })?;
                if items.len() > 30 {
                    return err("too many ID fields");
                }
                C::Id(Some(items))
            }
        }
        "SELECT" | "EXAMINE" => {
            r.sp()?;
            let mailbox = r.mailbox()?;
            let params = if r.more() {
                r.sp()?;
                select_params(r)?
            } else {
                SelectParams::default()
            };
            if name == "SELECT" {
                C::Select { mailbox, params }
            } else {
                C::Examine { mailbox, params }
            }
        }
        "CREATE" => {
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
            C::Create { mailbox, special_use }
        }
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
        "LSUB" => {
            r.sp()?;
            let reference = r.mailbox()?;
            r.sp()?;
            C::Lsub {
                reference,
                pattern: r.list_mailbox()?,
            }
        }
        "STATUS" => {
            r.sp()?;
            let mailbox = r.mailbox()?;
            r.sp()?;
            let items = status_items(r)?;
            C::Status { mailbox, items }
        }
        "APPEND" => append(r)?,
        "SEARCH" | "FETCH" | "STORE" | "COPY" | "MOVE" => uid_command(r, &name, false)?,
        "UID" => {
            r.sp()?;
            let sub = r.word()?;
            if sub == "EXPUNGE" {
                r.sp()?;
                C::UidExpunge(r.sequence_set()?)
            } else if matches!(sub.as_str(), "SEARCH" | "FETCH" | "STORE" | "COPY" | "MOVE") {
                uid_command(r, &sub, true)?
            } else {
                return err("unknown UID command");
            }
        }
        "GETQUOTA" => {
            r.sp()?;
            C::GetQuota(r.text()?)
        }
        "SETQUOTA" => {
            r.sp()?;
            let root = r.text()?;
            r.sp()?;
            let limits = r.list(|r| {
                let resource = r.word()?;
                r.sp()?;
                Ok((resource, r.number64()?))
            })?;
            C::SetQuota { root, limits }
        }
        _ => return err("unknown command"),
    })
}

fn status_items(r: &mut Reader<'_>) -> R<Vec<StatusItem>> {
    let items = r.list(|r| StatusItem::from_name(&r.word()?).ok_or_else(|| "unknown status item".to_string()))?;
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
        if !matches!(r.peek(), Some(b'{' | b'~')) {
            return err("expected the message as a literal");
        }
        let (data, binary) = r.literal()?;
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

fn fetch(r: &mut Reader<'_>, uid: bool, set: SequenceSet) -> R<FetchCommand> {
    use FetchAttr as A;
    let mut attrs = if r.peek() == Some(b'(') {
        let attrs = r.list(fetch_attr)?;
        if attrs.is_empty() {
            return err("empty FETCH item list");
        }
        attrs
    } else if r.eat_word("ALL") {
        vec![A::Flags, A::InternalDate, A::Rfc822Size, A::Envelope]
    } else if r.eat_word("FAST") {
        vec![A::Flags, A::InternalDate, A::Rfc822Size]
    } else if r.eat_word("FULL") {
        vec![A::Flags, A::InternalDate, A::Rfc822Size, A::Envelope, A::Body]
    } else {
        vec![fetch_attr(r)?]
    };
    let (mut changed_since, mut vanished) = (None, false);
    if r.more() {
        r.sp()?;
        r.list(|r| {
            if r.eat_word("CHANGEDSINCE") {
                r.sp()?;
                changed_since = Some(r.number64()?);
            } else if r.eat_word("VANISHED") {
                vanished = true;
            } else {
                return err("unknown FETCH modifier");
            }
            Ok(())
        })?;
    }
    if vanished && !(uid && changed_since.is_some()) {
        return err("VANISHED needs UID FETCH and CHANGEDSINCE");
    }
    if uid && !attrs.contains(&A::Uid) {
        attrs.insert(0, A::Uid);
    }
    if changed_since.is_some() && !attrs.contains(&A::ModSeq) {
        attrs.push(A::ModSeq);
    }
    Ok(FetchCommand {
        uid,
        set,
        attrs,
        changed_since,
        vanished,
    })
}

fn fetch_attr(r: &mut Reader<'_>) -> R<FetchAttr> {
    use FetchAttr as A;
    let name = r
        .take_while(|b| b.is_ascii_alphanumeric() || b == b'.')
        .to_ascii_uppercase();
    let partial = |r: &mut Reader<'_>| -> R<Option<Partial>> {
        if !r.eat(b'<') {
            return Ok(None);
        }
        let offset = r.number64()?;
        r.expect(b'.', "expected '.' in a partial range")?;
        let count = r.number64()?;
        r.expect(b'>', "expected '>'")?;
        if count == 0 {
            return err("a partial range cannot be empty");
        }
        Ok(Some(Partial { offset, count }))
    };
    Ok(match name.as_slice() {
        b"ENVELOPE" => A::Envelope,
        b"FLAGS" => A::Flags,
        b"INTERNALDATE" => A::InternalDate,
        b"RFC822" => A::Rfc822,
        b"RFC822.HEADER" => A::Rfc822Header,
        b"RFC822.SIZE" => A::Rfc822Size,
        b"RFC822.TEXT" => A::Rfc822Text,
        b"BODYSTRUCTURE" => A::BodyStructure,
        b"UID" => A::Uid,
        b"MODSEQ" => A::ModSeq,
        b"BODY" if r.peek() != Some(b'[') => A::Body,
        b"BODY" | b"BODY.PEEK" => A::BodySection {
            peek: name.len() > 4,
            section: section(r)?,
            partial: partial(r)?,
        },
        b"BINARY" | b"BINARY.PEEK" => A::Binary {
            peek: name.len() > 6,
            part: binary_part(r)?,
            partial: partial(r)?,
        },
        b"BINARY.SIZE" => A::BinarySize { part: binary_part(r)? },
        _ => return err("unknown FETCH item"),
    })
}

fn section(r: &mut Reader<'_>) -> R<Section> {
    r.expect(b'[', "expected '['")?;
    let mut s = Section::default();
    while r.peek() != Some(b']') {
        if r.peek().is_some_and(|b| b.is_ascii_digit()) {
            s.part.push(r.nz_number()?);
            if r.eat(b'.') {
                continue;
            }
            break;
        }
        let text = r
            .take_while(|b| b.is_ascii_alphabetic() || b == b'.')
            .to_ascii_uppercase();
        s.text = Some(match text.as_slice() {
            b"HEADER" => SectionText::Header,
            b"HEADER.FIELDS" => SectionText::HeaderFields(fields(r)?),
            b"HEADER.FIELDS.NOT" => SectionText::HeaderFieldsNot(fields(r)?),
            b"TEXT" => SectionText::Text,
            b"MIME" if !s.part.is_empty() => SectionText::Mime,
            _ => return err("invalid section"),
        });
        break;
    }
    r.expect(b']', "expected ']'")?;
    Ok(s)
}

fn fields(r: &mut Reader<'_>) -> R<Vec<String>> {
    r.sp()?;
    let names = r.list(Reader::text)?;
    if names.is_empty() {
        err("empty header field list")
    } else {
        Ok(names)
    }
}

fn binary_part(r: &mut Reader<'_>) -> R<Vec<u32>> {
    r.expect(b'[', "expected '['")?;
    let mut part = Vec::new();
    while r.peek() != Some(b']') {
        if !part.is_empty() {
            r.expect(b'.', "expected '.' between part numbers")?;
        }
        part.push(r.nz_number()?);
    }
    r.expect(b']', "expected ']'")?;
    Ok(part)
}

fn store(r: &mut Reader<'_>, uid: bool, set: SequenceSet) -> R<StoreCommand> {
    let mut unchanged_since = None;
    if r.peek() == Some(b'(') {
        r.list(|r| {
            if !r.eat_word("UNCHANGEDSINCE") {
                return err("unknown STORE modifier");
            }
            r.sp()?;
            unchanged_since = Some(r.number64()?);
            Ok(())
        })?;
        r.sp()?;
    }
    let action = r
        .take_while(|b| b.is_ascii_alphabetic() || b"+-.".contains(&b))
        .to_ascii_uppercase();
    let (mode, rest) = match action.split_first() {
        Some((b'+', rest)) => (StoreMode::Add, rest),
        Some((b'-', rest)) => (StoreMode::Remove, rest),
        _ => (StoreMode::Replace, &action[..]),
    };
    let silent = match rest {
        b"FLAGS" => false,
        b"FLAGS.SILENT" => true,
        _ => return err("expected FLAGS, +FLAGS or -FLAGS"),
    };
    r.sp()?;
    let flags = if r.peek() == Some(b'(') {
        r.flag_list()?
    } else {
        let mut flags = vec![r.flag()?];
        while r.more() {
            r.sp()?;
            flags.push(r.flag()?);
        }
        flags
    };
    Ok(StoreCommand {
        uid,
        set,
        unchanged_since,
        mode,
        silent,
        flags,
    })
}
