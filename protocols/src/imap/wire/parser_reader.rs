//! The token layer of the IMAP command parser: the [`Reader`] cursor over
//! a command's bytes (atoms, strings, literals, numbers, lists, mailbox
//! names, flags, dates), the character classes of the grammar, and the
//! `R`/`err` result helpers shared by [`super::parser`],
//! `parser_fetch` and [`super::search`].

use super::sequence::SequenceSet;
use super::types::{Date, DateTime, Flag};
use super::utf7::decode_mailbox;

/// Why a command does not parse: the text its BAD (or, for a mailbox
/// name, NO) answer gives ([`super::ParseError`] carries it out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct Syntax(pub(super) String);

impl From<String> for Syntax {
    fn from(reason: String) -> Syntax {
        Syntax(reason)
    }
}

impl From<&str> for Syntax {
    fn from(reason: &str) -> Syntax {
        Syntax(reason.to_string())
    }
}

pub(super) type R<T> = Result<T, Syntax>;

/// Starts the reason of a mailbox name that is not valid modified UTF-7:
/// [`super::ParseError::response`] answers NO for it, not BAD.
pub(super) const BAD_NAME: &str = "invalid mailbox name: ";

pub(super) fn err<T>(reason: &str) -> R<T> {
    Err(reason.into())
}

fn is_atom_char(b: u8) -> bool {
    b > b' ' && b != 0x7f && !b"(){%*\"\\]".contains(&b)
}

fn is_astring_char(b: u8) -> bool {
    is_atom_char(b) || b == b']'
}

pub(super) fn is_tag_char(b: u8) -> bool {
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
    /// A reader over `buf` starting at `pos`; `utf8` as in [`super::ParseOptions`].
    pub(super) fn new(buf: &'a [u8], pos: usize, utf8: bool) -> Self {
        Reader { buf, pos, utf8 }
    }

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
    /// Whether UTF8=ACCEPT is enabled for this parse.
    pub(super) fn utf8_accept(&self) -> bool {
        self.utf8
    }

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
            .ok_or_else(|| Syntax::from("number too large"))
    }

    pub(super) fn number(&mut self) -> R<u32> {
        u32::try_from(self.number64()?).map_err(|_| Syntax::from("number too large"))
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
        decode_mailbox(&raw, self.utf8).map_err(|e| Syntax(format!("{BAD_NAME}{e}")))
    }

    pub(super) fn list_mailbox(&mut self) -> R<String> {
        let raw = match self.peek() {
            Some(b'"' | b'{') => self.string()?,
            _ => match self.take_while(is_list_char) {
                [] => return err("expected a mailbox pattern"),
                a => a.to_vec(),
            },
        };
        // A pattern that is not valid modified UTF-7 names no mailbox: it
        // matches nothing (NUL is in no name), as in Dovecot, not BAD.
        Ok(decode_mailbox(&raw, self.utf8).unwrap_or_else(|_| "\0".to_string()))
    }

    pub(super) fn text(&mut self) -> R<String> {
        Ok(String::from_utf8_lossy(&self.astring()?).into_owned())
    }

    pub(super) fn sequence_set(&mut self) -> R<SequenceSet> {
        let token = self.take_while(|b| b.is_ascii_digit() || b":,*$".contains(&b));
        SequenceSet::parse(token).ok_or_else(|| Syntax::from("invalid sequence set"))
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
        parse_date_time(&raw).ok_or_else(|| Syntax::from("invalid date-time"))
    }
}

/// `dd-Mon-yyyy hh:mm:ss +zzzz`, the day maybe space-padded or one digit
/// (APPEND's date, and INTERNALDATE as a client reads it).
pub fn parse_date_time(raw: &[u8]) -> Option<DateTime> {
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
