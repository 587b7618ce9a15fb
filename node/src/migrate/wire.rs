//! The client side of IMAP's response grammar, as much as `meshmail
//! migrate` reads: a response is split into tokens (atoms, quoted strings,
//! parentheses, literals), and LIST, status-code and FETCH answers are read
//! from the tokens. The server side's parser (`protocols::imap::wire`)
//! reads commands, not responses, so only its date and mailbox-name
//! decoders are shared.

use meshmail_protocols::imap::wire::{parse_date_time, utf7};

/// One token of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// An atom, including `\Flags`, `BODY[]` and a bracketed `[CODE ...]`.
    Atom(Vec<u8>),
    Quoted(Vec<u8>),
    Literal(Vec<u8>),
    /// A literal over the size limit: read and dropped, only its size kept.
    Skipped(u64),
    Open,
    Close,
}

impl Token {
    pub fn is_atom(&self, word: &str) -> bool {
        matches!(self, Token::Atom(a) if a.eq_ignore_ascii_case(word.as_bytes()))
    }

    /// An atom, quoted string or literal as text (`NIL` stays `NIL`).
    pub fn text(&self) -> Option<String> {
        match self {
            Token::Atom(b) | Token::Quoted(b) | Token::Literal(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    fn number(&self) -> Option<u32> {
        match self {
            Token::Atom(a) => std::str::from_utf8(a).ok()?.parse().ok(),
            _ => None,
        }
    }
}

/// Splits `text` (a line without its CRLF and without a trailing literal
/// announcement) into tokens. Lenient: an unterminated quoted string ends
/// at the end of the line (human text after a status code may hold one).
pub fn tokenize(text: &[u8], out: &mut Vec<Token>) {
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b' ' => i += 1,
            b'(' => {
                out.push(Token::Open);
                i += 1;
            }
            b')' => {
                out.push(Token::Close);
                i += 1;
            }
            b'"' => {
                let mut s = Vec::new();
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    if text[i] == b'\\' && i + 1 < text.len() {
                        i += 1;
                    }
                    s.push(text[i]);
                    i += 1;
                }
                i += 1;
                out.push(Token::Quoted(s));
            }
            _ => {
                let start = i;
                let mut depth = 0usize;
                while i < text.len() {
                    match text[i] {
                        b'[' => depth += 1,
                        b']' => depth = depth.saturating_sub(1),
                        b' ' | b'(' | b')' if depth == 0 => break,
                        _ => {}
                    }
                    i += 1;
                }
                out.push(Token::Atom(text[start..i].to_vec()));
            }
        }
    }
}

/// The size a line announces as a literal at its end (`{123}`, `{123+}`).
pub fn literal_at_end(line: &[u8]) -> Option<(usize, u64)> {
    let body = line.strip_suffix(b"}")?;
    let open = body.iter().rposition(|&b| b == b'{')?;
    let digits = body[open + 1..].strip_suffix(b"+").unwrap_or(&body[open + 1..]);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some((open, std::str::from_utf8(digits).ok()?.parse().ok()?))
}

/// One folder of a LIST answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The name on the wire (modified UTF-7), to SELECT it by.
    pub wire: String,
    /// The name decoded to UTF-8, with the server's separator.
    pub name: String,
    pub delimiter: Option<char>,
    /// `\Noselect` or `\NonExistent`: a node of the tree holding no mail.
    pub noselect: bool,
}

/// `* LIST (attrs) "delim" name`; None for any other response.
pub fn list_item(t: &[Token]) -> Option<Listed> {
    if !(t.len() >= 2 && t[0].is_atom("*") && t[1].is_atom("LIST")) {
        return None;
    }
    let close = t.iter().position(|x| *x == Token::Close)?;
    let attrs = &t[3..close];
    let noselect = attrs
        .iter()
        .any(|a| a.is_atom("\\Noselect") || a.is_atom("\\NonExistent"));
    let delimiter = match t.get(close + 1)? {
        Token::Quoted(d) if d.len() == 1 => Some(d[0] as char),
        _ => None,
    };
    let wire = t.get(close + 2)?.text()?;
    // Servers that announced UTF8=ACCEPT send UTF-8; modified UTF-7 is
    // plain ASCII, so decoding it either way reads both.
    let name = utf7::decode(wire.as_bytes()).unwrap_or_else(|_| wire.clone());
    Some(Listed {
        wire,
        name,
        delimiter,
        noselect,
    })
}

/// The number of a response code (`* OK [UIDVALIDITY 3857529045] ...`).
pub fn code_number(t: &[Token], code: &str) -> Option<u32> {
    t.iter().find_map(|tok| {
        let Token::Atom(a) = tok else { return None };
        let inner = a.strip_prefix(b"[")?.strip_suffix(b"]")?;
        let s = std::str::from_utf8(inner).ok()?;
        let (name, value) = s.split_once(' ')?;
        name.eq_ignore_ascii_case(code).then(|| value.trim().parse().ok())?
    })
}

/// `* n EXISTS`: how many messages the selected folder holds.
pub fn exists(t: &[Token]) -> Option<u32> {
    match t {
        [star, n, word] if star.is_atom("*") && word.is_atom("EXISTS") => n.number(),
        _ => None,
    }
}

/// One message of a FETCH answer; fields absent when not in this answer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub uid: Option<u32>,
    pub flags: Option<Vec<String>>,
    pub internal_date_ms: Option<i64>,
    pub size: Option<u64>,
    pub body: Option<Body>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Bytes(Vec<u8>),
    /// Over the limit: not kept.
    TooBig(u64),
}

/// `* n FETCH (item value ...)`; None for any other response. Items this
/// client did not ask for (an unsolicited FLAGS update carries only FLAGS)
/// are read past.
pub fn fetch_item(t: Vec<Token>) -> Option<Fetched> {
    if !(t.len() >= 4 && t[0].is_atom("*") && t[2].is_atom("FETCH") && t[3] == Token::Open) {
        return None;
    }
    let mut it = t.into_iter().skip(4).peekable();
    let mut f = Fetched::default();
    while let Some(key) = it.next() {
        if key == Token::Close {
            break;
        }
        let Token::Atom(key) = key else { return None };
        match key.to_ascii_uppercase().as_slice() {
            b"UID" => f.uid = it.next()?.number(),
            b"RFC822.SIZE" => f.size = it.next()?.number().map(u64::from),
            b"INTERNALDATE" => {
                let raw = it.next()?.text()?;
                f.internal_date_ms = parse_date_time(raw.as_bytes()).map(|d| d.unix_ms);
            }
            b"FLAGS" => {
                if it.next()? != Token::Open {
                    return None;
                }
                let mut flags = Vec::new();
                for tok in it.by_ref() {
                    match tok {
                        Token::Close => break,
                        other => flags.push(other.text()?),
                    }
                }
                f.flags = Some(flags);
            }
            b"BODY[]" | b"RFC822" => {
                f.body = match it.next()? {
                    Token::Literal(b) | Token::Quoted(b) => Some(Body::Bytes(b)),
                    Token::Skipped(n) => Some(Body::TooBig(n)),
                    _ => None,
                }
            }
            _ => skip_value(&mut it)?,
        }
    }
    Some(f)
}

/// Reads past one value (a token, or a parenthesised list of any depth).
fn skip_value(it: &mut impl Iterator<Item = Token>) -> Option<()> {
    if it.next()? != Token::Open {
        return Some(());
    }
    let mut depth = 1usize;
    for tok in it {
        match tok {
            Token::Open => depth += 1,
            Token::Close => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return Some(());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(line: &str) -> Vec<Token> {
        let mut out = Vec::new();
        tokenize(line.as_bytes(), &mut out);
        out
    }

    #[test]
    fn list_answers_give_names_separators_and_noselect() {
        let l = list_item(&tokens(r#"* LIST (\HasChildren \Noselect) "." Archive"#)).unwrap();
        assert_eq!((l.name.as_str(), l.delimiter, l.noselect), ("Archive", Some('.'), true));
        let l = list_item(&tokens(r#"* LIST (\HasNoChildren) "/" "&AMk-t&AOk-/Q1""#)).unwrap();
        assert_eq!((l.name.as_str(), l.wire.as_str()), ("Été/Q1", "&AMk-t&AOk-/Q1"));
        let mut t = tokens(r#"* LIST () NIL"#);
        t.push(Token::Literal(b"odd name".to_vec()));
        let l = list_item(&t).unwrap();
        assert_eq!((l.name.as_str(), l.delimiter), ("odd name", None));
        assert!(list_item(&tokens("* 3 EXISTS")).is_none());
    }

    #[test]
    fn status_codes_are_read() {
        let t = tokens("* OK [UIDVALIDITY 3857529045] UIDs valid");
        assert_eq!(code_number(&t, "UIDVALIDITY"), Some(3_857_529_045));
        assert_eq!(code_number(&t, "UIDNEXT"), None);
        assert_eq!(
            code_number(&tokens("* OK [UIDNEXT 7] don't \"quote"), "uidnext"),
            Some(7)
        );
        assert_eq!(exists(&tokens("* 0 EXISTS")), Some(0));
        assert_eq!(exists(&tokens("* 3 RECENT")), None);
    }

    #[test]
    fn fetch_answers_in_any_order() {
        let mut t =
            tokens(r#"* 12 FETCH (FLAGS (\Seen $Label1) UID 34 INTERNALDATE "01-Feb-2024 10:00:00 +0100" BODY[]"#);
        t.push(Token::Literal(b"Subject: x\r\n\r\nbody\r\n".to_vec()));
        t.extend(tokens(" MODSEQ (5))"));
        let f = fetch_item(t).unwrap();
        assert_eq!(f.uid, Some(34));
        assert_eq!(f.flags.unwrap(), vec!["\\Seen", "$Label1"]);
        assert_eq!(f.internal_date_ms, Some(1_706_778_000_000));
        assert_eq!(f.body, Some(Body::Bytes(b"Subject: x\r\n\r\nbody\r\n".to_vec())));
        let mut t = tokens("* 1 FETCH (UID 2 RFC822.SIZE 99 BODY[]");
        t.push(Token::Skipped(99));
        t.push(Token::Close);
        let f = fetch_item(t).unwrap();
        assert_eq!((f.size, f.body), (Some(99), Some(Body::TooBig(99))));
        assert!(fetch_item(tokens("* 3 EXPUNGE")).is_none());
    }

    #[test]
    fn literal_announcements() {
        assert_eq!(literal_at_end(b"* 1 FETCH (BODY[] {123}"), Some((18, 123)));
        assert_eq!(literal_at_end(b"a {5+}"), Some((2, 5)));
        assert_eq!(literal_at_end(b"a {x}"), None);
        assert_eq!(literal_at_end(b"* OK done"), None);
    }
}
