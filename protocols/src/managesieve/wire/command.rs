//! What a ManageSieve command means (RFC 5804 §2, grammar in §4): a
//! command is atoms, quoted strings and literals, spread over one line or
//! several when a literal (`{n+}` or `{n}`) carries CRLFs. The session
//! feeds an [`Assembler`] one line at a time and the literal bytes it
//! asks for, then [`Assembler::finish`] gives the [`Command`].
//!
//! Both literal forms are taken without a continuation: ManageSieve has
//! no "+ go ahead" response, so a `{n}` from an older client is read like
//! `{n+}` (RFC 5804 §4 only defines the non-synchronizing one from the
//! client; Dovecot accepts both the same way).

use super::name::{NameError, script_name};

/// Longest command line kept, CRLF and literals excluded. The longest
/// legal line is two quoted 1,024-octet names and a command word.
pub const LINE_MAX: usize = 8 * 1024;
/// Longest literal kept: a script at the Sieve layer's limit.
pub const LITERAL_MAX: u64 = crate::sieve::SCRIPT_BYTES_MAX as u64;
/// Longest literal read and dropped (answered `NO (QUOTA/MAXSIZE)`) so the
/// session stays in step; a longer one ends the session with BYE rather
/// than reading megabytes nobody keeps.
pub const LITERAL_DISCARD_MAX: u64 = 1024 * 1024;
/// Tokens in one command: RENAMESCRIPT has three, AUTHENTICATE at most
/// three; room for a few extra before the command is refused.
const TOKENS_MAX: usize = 8;
/// RFC 5804 §4: a quoted string is at most 1,024 octets.
const QUOTED_MAX: usize = 1024;

/// One element of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A bare word (command name, number, `PLAIN` without quotes).
    Atom(Vec<u8>),
    /// A quoted string or a literal, unescaped.
    Str(Vec<u8>),
    /// A literal longer than [`LITERAL_MAX`], read and dropped.
    Dropped(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Authenticate {
        mechanism: String,
        initial: Option<Vec<u8>>,
    },
    StartTls,
    Logout,
    Capability,
    HaveSpace {
        name: String,
        size: u64,
    },
    PutScript {
        name: String,
        script: Vec<u8>,
    },
    CheckScript {
        script: Vec<u8>,
    },
    ListScripts,
    /// `None`: `SETACTIVE ""`, no script active.
    SetActive {
        name: Option<String>,
    },
    GetScript {
        name: String,
    },
    DeleteScript {
        name: String,
    },
    RenameScript {
        old: String,
        new: String,
    },
    Noop {
        tag: Option<Vec<u8>>,
    },
}

impl Command {
    /// The metrics label.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Authenticate { .. } => "AUTHENTICATE",
            Command::StartTls => "STARTTLS",
            Command::Logout => "LOGOUT",
            Command::Capability => "CAPABILITY",
            Command::HaveSpace { .. } => "HAVESPACE",
            Command::PutScript { .. } => "PUTSCRIPT",
            Command::CheckScript { .. } => "CHECKSCRIPT",
            Command::ListScripts => "LISTSCRIPTS",
            Command::SetActive { .. } => "SETACTIVE",
            Command::GetScript { .. } => "GETSCRIPT",
            Command::DeleteScript { .. } => "DELETESCRIPT",
            Command::RenameScript { .. } => "RENAMESCRIPT",
            Command::Noop { .. } => "NOOP",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("Empty command")]
    Empty,
    #[error("Unknown command")]
    Unknown,
    #[error("Wrong number or kind of arguments")]
    Arguments,
    #[error("Unterminated or overlong quoted string")]
    BadQuoted,
    #[error("Invalid literal")]
    BadLiteral,
    #[error("Too many arguments")]
    TooManyTokens,
    #[error("Invalid number")]
    BadNumber,
    #[error("Invalid script name: {0}")]
    BadName(#[from] NameError),
    /// A literal over [`LITERAL_MAX`]: the command is refused, not the
    /// session (`NO (QUOTA/MAXSIZE)`).
    #[error("The script is {0} bytes, larger than the limit of {LITERAL_MAX}")]
    TooLarge(u64),
}

/// What the session must do after a line: read a literal of `len` bytes
/// (then call [`Assembler::literal`] and feed the next line), or finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Literal(u64),
    Done,
}

/// Collects one command's tokens across lines and literals.
#[derive(Debug, Default)]
pub struct Assembler {
    tokens: Vec<Token>,
    error: Option<ParseError>,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans one line (CRLF removed). A scan error is kept and reported by
    /// [`finish`](Self::finish), after a trailing literal is still read:
    /// the client sends it whatever we think of the line.
    pub fn line(&mut self, line: &[u8]) -> Need {
        let mut i = 0;
        while i < line.len() {
            match line[i] {
                b' ' | b'\t' => i += 1,
                b'"' => match quoted(&line[i + 1..]) {
                    Some((s, used)) => {
                        self.push(Token::Str(s));
                        i += 1 + used;
                    }
                    None => return self.fail(ParseError::BadQuoted, line),
                },
                b'{' => {
                    let Some(len) = literal_header(&line[i..]) else {
                        return self.fail(ParseError::BadLiteral, line);
                    };
                    return Need::Literal(len);
                }
                _ => {
                    let end = line[i..]
                        .iter()
                        .position(|b| matches!(b, b' ' | b'\t' | b'"' | b'{'))
                        .map_or(line.len(), |p| i + p);
                    self.push(Token::Atom(line[i..end].to_vec()));
                    i = end;
                }
            }
        }
        Need::Done
    }

    /// The bytes of the literal the last [`line`](Self::line) announced,
    /// or `None` when it was longer than [`LITERAL_MAX`] and dropped.
    pub fn literal(&mut self, bytes: Option<Vec<u8>>, len: u64) {
        match bytes {
            Some(b) => self.push(Token::Str(b)),
            None => self.push(Token::Dropped(len)),
        }
    }

    /// The tokens, for a SASL response (one string, no command word).
    pub fn into_tokens(self) -> Result<Vec<Token>, ParseError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.tokens),
        }
    }

    pub fn finish(self) -> Result<Command, ParseError> {
        parse(self.into_tokens()?)
    }

    fn push(&mut self, t: Token) {
        if self.tokens.len() >= TOKENS_MAX {
            self.error.get_or_insert(ParseError::TooManyTokens);
        } else {
            self.tokens.push(t);
        }
    }

    /// Keeps the first error; a literal announced at the end of the line
    /// is still read, or its bytes would be taken for commands.
    fn fail(&mut self, e: ParseError, line: &[u8]) -> Need {
        self.error.get_or_insert(e);
        let tail = line.iter().rposition(|&b| b == b'{').map(|p| &line[p..]);
        match tail.and_then(literal_header) {
            Some(n) => Need::Literal(n),
            None => Need::Done,
        }
    }
}

/// A quoted string's content after its opening quote: the unescaped
/// bytes and how many bytes it took, closing quote included.
fn quoted(s: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() && out.len() <= QUOTED_MAX {
        match s[i] {
            b'"' => return Some((out, i + 1)),
            // RFC 5804 §4: QUOTED-SPECIALS are the only escapes.
            b'\\' => match s.get(i + 1) {
                Some(&c @ (b'"' | b'\\')) => {
                    out.push(c);
                    i += 2;
                }
                _ => return None,
            },
            b'\r' | b'\n' | 0 => return None,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

/// `{n+}` or `{n}`, which must end the line.
fn literal_header(s: &[u8]) -> Option<u64> {
    let inner = s.strip_prefix(b"{")?.strip_suffix(b"}")?;
    let digits = inner.strip_suffix(b"+").unwrap_or(inner);
    if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A string argument: quoted or literal, never an atom (RFC 5804 §4).
fn string(t: &Token) -> Result<&[u8], ParseError> {
    match t {
        Token::Str(s) => Ok(s),
        Token::Dropped(n) => Err(ParseError::TooLarge(*n)),
        Token::Atom(_) => Err(ParseError::Arguments),
    }
}

fn name(t: &Token) -> Result<String, ParseError> {
    Ok(script_name(string(t)?)?)
}

fn number(t: &Token) -> Result<u64, ParseError> {
    match t {
        Token::Atom(a) if !a.is_empty() && a.len() <= 10 && a.iter().all(u8::is_ascii_digit) => std::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(ParseError::BadNumber),
        _ => Err(ParseError::BadNumber),
    }
}

/// The command the tokens spell.
pub fn parse(tokens: Vec<Token>) -> Result<Command, ParseError> {
    let Some((Token::Atom(word), args)) = tokens.split_first() else {
        return Err(if tokens.is_empty() {
            ParseError::Empty
        } else {
            ParseError::Unknown
        });
    };
    let word = word.to_ascii_uppercase();
    let cmd = match (word.as_slice(), args) {
        (b"AUTHENTICATE", [mech, rest @ ..]) if rest.len() <= 1 => Command::Authenticate {
            mechanism: mechanism(mech)?,
            initial: rest.first().map(string).transpose()?.map(<[u8]>::to_vec),
        },
        (b"STARTTLS", []) => Command::StartTls,
        (b"LOGOUT", []) => Command::Logout,
        (b"CAPABILITY", []) => Command::Capability,
        (b"HAVESPACE", [n, size]) => Command::HaveSpace {
            name: name(n)?,
            size: number(size)?,
        },
        (b"PUTSCRIPT", [n, s]) => Command::PutScript {
            name: name(n)?,
            script: string(s)?.to_vec(),
        },
        (b"CHECKSCRIPT", [s]) => Command::CheckScript {
            script: string(s)?.to_vec(),
        },
        (b"LISTSCRIPTS", []) => Command::ListScripts,
        (b"SETACTIVE", [n]) if string(n)?.is_empty() => Command::SetActive { name: None },
        (b"SETACTIVE", [n]) => Command::SetActive { name: Some(name(n)?) },
        (b"GETSCRIPT", [n]) => Command::GetScript { name: name(n)? },
        (b"DELETESCRIPT", [n]) => Command::DeleteScript { name: name(n)? },
        (b"RENAMESCRIPT", [old, new]) => Command::RenameScript {
            old: name(old)?,
            new: name(new)?,
        },
        (b"NOOP", []) => Command::Noop { tag: None },
        (b"NOOP", [tag]) => Command::Noop {
            tag: Some(string(tag)?.to_vec()),
        },
        (
            b"AUTHENTICATE" | b"STARTTLS" | b"LOGOUT" | b"CAPABILITY" | b"HAVESPACE" | b"PUTSCRIPT" | b"CHECKSCRIPT"
            | b"LISTSCRIPTS" | b"SETACTIVE" | b"GETSCRIPT" | b"DELETESCRIPT" | b"RENAMESCRIPT" | b"NOOP",
            _,
        ) => return Err(ParseError::Arguments),
        _ => return Err(ParseError::Unknown),
    };
    Ok(cmd)
}

/// The SASL mechanism: a string (clients quote it) or an atom, upper-cased.
fn mechanism(t: &Token) -> Result<String, ParseError> {
    let raw = match t {
        Token::Atom(a) | Token::Str(a) => a,
        Token::Dropped(_) => return Err(ParseError::Arguments),
    };
    if raw.is_empty()
        || raw.len() > 20
        || !raw
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    {
        return Err(ParseError::Arguments);
    }
    Ok(String::from_utf8_lossy(raw).to_ascii_uppercase())
}

/// A SASL client response (RFC 5804 §2.1): one string.
pub fn sasl_response(tokens: Vec<Token>) -> Result<Vec<u8>, ParseError> {
    match tokens.as_slice() {
        [t] => Ok(string(t)?.to_vec()),
        _ => Err(ParseError::Arguments),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `lines`, answering each literal with the next entry.
    fn assemble(parts: &[&[u8]]) -> Result<Command, ParseError> {
        let mut a = Assembler::new();
        let mut it = parts.iter();
        while let Some(line) = it.next() {
            match a.line(line) {
                Need::Done => break,
                Need::Literal(n) => {
                    let lit = it.next().expect("literal");
                    assert_eq!(lit.len() as u64, n);
                    a.literal(Some(lit.to_vec()), n);
                }
            }
        }
        a.finish()
    }

    #[test]
    fn commands_with_quoted_strings_and_literals() {
        assert_eq!(assemble(&[b"capability"]), Ok(Command::Capability));
        assert_eq!(
            assemble(&[b"PUTSCRIPT \"a \\\"b\\\"\" {6+}", b"keep;\n", b""]),
            Ok(Command::PutScript {
                name: "a \"b\"".into(),
                script: b"keep;\n".to_vec()
            })
        );
        assert_eq!(
            assemble(&[b"RENAMESCRIPT {1}", b"a", b" \"b\""]),
            Ok(Command::RenameScript {
                old: "a".into(),
                new: "b".into()
            })
        );
        assert_eq!(assemble(&[b"SETACTIVE \"\""]), Ok(Command::SetActive { name: None }));
        assert_eq!(
            assemble(&[b"HAVESPACE \"x\" 4096"]),
            Ok(Command::HaveSpace {
                name: "x".into(),
                size: 4096
            })
        );
        assert_eq!(
            assemble(&[b"AUTHENTICATE \"PLAIN\" \"AGEAYg==\""]),
            Ok(Command::Authenticate {
                mechanism: "PLAIN".into(),
                initial: Some(b"AGEAYg==".to_vec())
            })
        );
        assert_eq!(
            assemble(&[b"NOOP \"STARTTLS-SYNC-42\""]),
            Ok(Command::Noop {
                tag: Some(b"STARTTLS-SYNC-42".to_vec())
            })
        );
    }

    #[test]
    fn bad_input_is_refused() {
        assert_eq!(assemble(&[b""]), Err(ParseError::Empty));
        assert_eq!(assemble(&[b"FROB"]), Err(ParseError::Unknown));
        assert_eq!(assemble(&[b"\"LOGOUT\""]), Err(ParseError::Unknown));
        assert_eq!(assemble(&[b"GETSCRIPT"]), Err(ParseError::Arguments));
        assert_eq!(assemble(&[b"GETSCRIPT x"]), Err(ParseError::Arguments));
        assert_eq!(assemble(&[b"GETSCRIPT \"x"]), Err(ParseError::BadQuoted));
        assert_eq!(assemble(&[b"GETSCRIPT \"\\n\""]), Err(ParseError::BadQuoted));
        assert_eq!(assemble(&[b"GETSCRIPT {x+}"]), Err(ParseError::BadLiteral));
        assert_eq!(assemble(&[b"HAVESPACE \"x\" -1"]), Err(ParseError::BadNumber));
        assert!(matches!(assemble(&[b"GETSCRIPT \"\""]), Err(ParseError::BadName(_))));
        assert!(matches!(
            assemble(&[b"GETSCRIPT {2+}", b"\xff\xfe", b""]),
            Err(ParseError::BadName(NameError::NotUtf8))
        ));
        let long = format!("NOOP \"{}\"", "x".repeat(QUOTED_MAX + 1));
        assert_eq!(assemble(&[long.as_bytes()]), Err(ParseError::BadQuoted));
        assert_eq!(assemble(&[b"NOOP a b c d e f g h i"]), Err(ParseError::TooManyTokens));
        let mut a = Assembler::new();
        assert_eq!(a.line(b"PUTSCRIPT \"x\" {99999999+}"), Need::Literal(99_999_999));
        a.literal(None, 99_999_999);
        assert_eq!(a.line(b""), Need::Done);
        assert_eq!(a.finish(), Err(ParseError::TooLarge(99_999_999)));
    }
}
