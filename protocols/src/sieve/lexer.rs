//! Sieve's tokens (RFC 5228 §8.1): identifiers, `:tags`, numbers with
//! K/M/G quantifiers, quoted and `text:` multi-line strings, comments and
//! the punctuation of the grammar. Positions are 1-based line:column so an
//! upload error points at the character at fault.

use super::error::{Pos, SieveError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Identifier(String),
    Tag(String),
    Number(u64),
    String(String),
    LeftBracket,
    RightBracket,
    LeftBrace,
    RightBrace,
    LeftParen,
    RightParen,
    Comma,
    Semicolon,
}

/// The whole script's tokens with where each starts.
pub fn tokenize(src: &str) -> Result<Vec<(Pos, Token)>, SieveError> {
    let mut lx = Lexer {
        bytes: src.as_bytes(),
        src,
        at: 0,
        line: 1,
        line_start: 0,
    };
    let mut out = Vec::new();
    while let Some(tok) = lx.next()? {
        out.push(tok);
    }
    Ok(out)
}

struct Lexer<'a> {
    bytes: &'a [u8],
    src: &'a str,
    at: usize,
    line: u32,
    line_start: usize,
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        let col = self.src[self.line_start..self.at].chars().count() as u32 + 1;
        Pos { line: self.line, col }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        if c == b'\n' {
            self.line += 1;
            self.line_start = self.at;
        }
        Some(c)
    }

    fn err(&self, pos: Pos, what: impl Into<String>) -> SieveError {
        SieveError::Syntax { pos, what: what.into() }
    }

    fn next(&mut self) -> Result<Option<(Pos, Token)>, SieveError> {
        self.skip_blank()?;
        let pos = self.pos();
        let Some(c) = self.peek() else { return Ok(None) };
        let single = match c {
            b'[' => Some(Token::LeftBracket),
            b']' => Some(Token::RightBracket),
            b'{' => Some(Token::LeftBrace),
            b'}' => Some(Token::RightBrace),
            b'(' => Some(Token::LeftParen),
            b')' => Some(Token::RightParen),
            b',' => Some(Token::Comma),
            b';' => Some(Token::Semicolon),
            _ => None,
        };
        if let Some(t) = single {
            self.bump();
            return Ok(Some((pos, t)));
        }
        let tok = match c {
            b'"' => Token::String(self.quoted(pos)?),
            b':' => {
                self.bump();
                match self.peek() {
                    Some(c) if c.is_ascii_alphabetic() || c == b'_' => Token::Tag(self.word()),
                    _ => return Err(self.err(pos, "a tag needs a name after ':'")),
                }
            }
            b'0'..=b'9' => Token::Number(self.number(pos)?),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let word = self.word();
                if word.eq_ignore_ascii_case("text") && self.peek() == Some(b':') {
                    self.bump();
                    Token::String(self.multiline(pos)?)
                } else {
                    Token::Identifier(word)
                }
            }
            _ => {
                let ch = self.src[self.at..].chars().next().unwrap_or('?');
                return Err(self.err(pos, format!("unexpected character {ch:?}")));
            }
        };
        Ok(Some((pos, tok)))
    }

    /// Whitespace, `# line` and `/* bracket */` comments.
    fn skip_blank(&mut self) -> Result<(), SieveError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => {
                    self.bump();
                }
                Some(b'#') => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.bump();
                    }
                }
                Some(b'/') if self.bytes.get(self.at + 1) == Some(&b'*') => {
                    let pos = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => return Err(self.err(pos, "unterminated /* comment")),
                            Some(b'*') if self.peek() == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            self.bump();
        }
        self.src[start..self.at].to_ascii_lowercase()
    }

    fn number(&mut self, pos: Pos) -> Result<u64, SieveError> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        let n: u64 = self.src[start..self.at]
            .parse()
            .map_err(|_| self.err(pos, "number too large"))?;
        let scale: u64 = match self.peek() {
            Some(b'K' | b'k') => 1 << 10,
            Some(b'M' | b'm') => 1 << 20,
            Some(b'G' | b'g') => 1 << 30,
            _ => 1,
        };
        if scale > 1 {
            self.bump();
        }
        n.checked_mul(scale).ok_or_else(|| self.err(pos, "number too large"))
    }

    /// `"..."`: `\` escapes the next character (RFC 5228 §2.4.2: only `\\`
    /// and `\"` are defined; any other pair stands for its second char).
    fn quoted(&mut self, pos: Pos) -> Result<String, SieveError> {
        self.bump();
        let mut out = Vec::new();
        loop {
            match self.bump() {
                None => return Err(self.err(pos, "unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => match self.bump() {
                    None => return Err(self.err(pos, "unterminated string")),
                    Some(c) => out.push(c),
                },
                Some(c) => out.push(c),
            }
        }
        Ok(crlf(String::from_utf8(out).unwrap_or_default()))
    }

    /// `text:` to a line holding a lone `.`; a leading `..` is one dot.
    fn multiline(&mut self, pos: Pos) -> Result<String, SieveError> {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.bump();
        }
        if self.peek() == Some(b'#') {
            while self.peek().is_some_and(|c| c != b'\n') {
                self.bump();
            }
        }
        if self.peek() == Some(b'\r') {
            self.bump();
        }
        if self.bump() != Some(b'\n') {
            return Err(self.err(pos, "text: must be followed by a line break"));
        }
        let mut out = String::new();
        loop {
            let start = self.at;
            while self.peek().is_some_and(|c| c != b'\n') {
                self.bump();
            }
            if self.peek().is_none() {
                return Err(self.err(pos, "unterminated text: string (no line with a lone '.')"));
            }
            let line = self.src[start..self.at].trim_end_matches('\r');
            self.bump();
            if line == "." {
                return Ok(out);
            }
            out.push_str(line.strip_prefix('.').filter(|l| l.starts_with('.')).unwrap_or(line));
            out.push_str("\r\n");
        }
    }
}

/// Line breaks inside strings are CRLF (RFC 5228 §2.4.2.4 for text:; the
/// same for quoted strings keeps both forms alike).
fn crlf(s: String) -> String {
    if !s.contains('\n') {
        return s;
    }
    s.replace("\r\n", "\n").replace('\n', "\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Token> {
        tokenize(src).unwrap().into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn tokens_of_a_small_script() {
        assert_eq!(
            toks("if size :over 10K { discard; } # c\n/* x */"),
            vec![
                Token::Identifier("if".into()),
                Token::Identifier("size".into()),
                Token::Tag("over".into()),
                Token::Number(10240),
                Token::LeftBrace,
                Token::Identifier("discard".into()),
                Token::Semicolon,
                Token::RightBrace,
            ]
        );
        assert_eq!(toks(r#""a\"b\\c\d""#), vec![Token::String("a\"b\\cd".into())]);
        assert_eq!(
            toks("text: # c\r\nline one\r\n..dot\r\n.\r\n"),
            vec![Token::String("line one\r\n.dot\r\n".into())]
        );
    }

    #[test]
    fn errors_say_where() {
        let e = tokenize("keep;\n  \"open").unwrap_err();
        assert_eq!(e.to_string(), "2:3: unterminated string");
        let e = tokenize("keep;\n @").unwrap_err();
        assert_eq!(e.to_string(), "2:2: unexpected character '@'");
    }
}
