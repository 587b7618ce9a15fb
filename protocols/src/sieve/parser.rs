//! RFC 5228 §8.2's grammar over the lexer's tokens, into [`Node`]s.
//! Nesting (blocks and test lists together) is bounded so a hostile script
//! cannot exhaust the stack.

use super::ast::{Arg, Node};
use super::error::{Pos, SieveError};
use super::lexer::Token;

/// Blocks and test lists, counted together.
pub const NESTING_MAX: usize = 32;

pub fn parse(tokens: Vec<(Pos, Token)>) -> Result<Vec<Node>, SieveError> {
    let end = tokens.last().map(|(p, _)| *p).unwrap_or_default();
    let mut p = Parser { tokens, at: 0, end };
    let commands = p.commands(0)?;
    if let Some((pos, _)) = p.tokens.get(p.at) {
        return Err(syntax(*pos, "unexpected '}'"));
    }
    Ok(commands)
}

fn syntax(pos: Pos, what: impl Into<String>) -> SieveError {
    SieveError::Syntax { pos, what: what.into() }
}

struct Parser {
    tokens: Vec<(Pos, Token)>,
    at: usize,
    end: Pos,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(_, t)| t)
    }

    fn pos(&self) -> Pos {
        self.tokens.get(self.at).map(|(p, _)| *p).unwrap_or(self.end)
    }

    fn take(&mut self) -> Option<(Pos, Token)> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn expect(&mut self, want: &Token, what: &str) -> Result<(), SieveError> {
        let pos = self.pos();
        match self.take() {
            Some((_, t)) if &t == want => Ok(()),
            _ => Err(syntax(pos, format!("expected {what}"))),
        }
    }

    fn commands(&mut self, depth: usize) -> Result<Vec<Node>, SieveError> {
        let mut out = Vec::new();
        while let Some(Token::Identifier(_)) = self.peek() {
            out.push(self.command(depth)?);
        }
        Ok(out)
    }

    fn command(&mut self, depth: usize) -> Result<Node, SieveError> {
        let mut node = self.test_or_command(depth)?;
        let pos = self.pos();
        match self.take() {
            Some((_, Token::Semicolon)) => {}
            Some((_, Token::LeftBrace)) => {
                if depth + 1 > NESTING_MAX {
                    return Err(SieveError::TooDeep { pos, max: NESTING_MAX });
                }
                node.block = Some(self.commands(depth + 1)?);
                self.expect(&Token::RightBrace, "'}'")?;
            }
            _ => return Err(syntax(pos, "expected ';' or a block")),
        }
        Ok(node)
    }

    /// `identifier arguments`, where arguments end in a test or test list.
    fn test_or_command(&mut self, depth: usize) -> Result<Node, SieveError> {
        let pos = self.pos();
        let name = match self.take() {
            Some((_, Token::Identifier(n))) => n,
            _ => return Err(syntax(pos, "expected a command or test name")),
        };
        let mut node = Node {
            name,
            pos,
            args: Vec::new(),
            tests: Vec::new(),
            block: None,
        };
        loop {
            let pos = self.pos();
            match self.peek() {
                Some(Token::Tag(_)) | Some(Token::Number(_)) => {
                    let arg = match self.take() {
                        Some((_, Token::Tag(t))) => Arg::Tag(t),
                        Some((_, Token::Number(n))) => Arg::Number(n),
                        _ => unreachable!("peeked"),
                    };
                    node.args.push((pos, arg));
                }
                Some(Token::String(_)) | Some(Token::LeftBracket) => {
                    let arg = self.strings()?;
                    node.args.push((pos, arg));
                }
                _ => break,
            }
        }
        match self.peek() {
            Some(Token::Identifier(_)) => node.tests.push(self.nested_test(depth)?),
            Some(Token::LeftParen) => {
                self.take();
                loop {
                    node.tests.push(self.nested_test(depth)?);
                    let pos = self.pos();
                    match self.take() {
                        Some((_, Token::Comma)) => {}
                        Some((_, Token::RightParen)) => break,
                        _ => return Err(syntax(pos, "expected ',' or ')' in a test list")),
                    }
                }
            }
            _ => {}
        }
        Ok(node)
    }

    fn nested_test(&mut self, depth: usize) -> Result<Node, SieveError> {
        if depth + 1 > NESTING_MAX {
            return Err(SieveError::TooDeep {
                pos: self.pos(),
                max: NESTING_MAX,
            });
        }
        self.test_or_command(depth + 1)
    }

    fn strings(&mut self) -> Result<Arg, SieveError> {
        let pos = self.pos();
        match self.take() {
            Some((_, Token::String(s))) => Ok(Arg::Strings {
                values: vec![s],
                list: false,
            }),
            Some((_, Token::LeftBracket)) => {
                let mut values = Vec::new();
                loop {
                    let pos = self.pos();
                    match self.take() {
                        Some((_, Token::String(s))) => values.push(s),
                        _ => return Err(syntax(pos, "expected a string in a string list")),
                    }
                    let pos = self.pos();
                    match self.take() {
                        Some((_, Token::Comma)) => {}
                        Some((_, Token::RightBracket)) => break,
                        _ => return Err(syntax(pos, "expected ',' or ']' in a string list")),
                    }
                }
                Ok(Arg::Strings { values, list: true })
            }
            _ => Err(syntax(pos, "expected a string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokenize;
    use super::*;

    fn parsed(src: &str) -> Result<Vec<Node>, SieveError> {
        parse(tokenize(src)?)
    }

    #[test]
    fn commands_tests_and_blocks() {
        let n = parsed("if anyof (true, header :is \"a\" [\"b\", \"c\"]) { keep; } else { discard; }").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].name, "if");
        assert_eq!(n[0].tests[0].name, "anyof");
        assert_eq!(n[0].tests[0].tests.len(), 2);
        assert_eq!(n[1].block.as_ref().unwrap()[0].name, "discard");
    }

    #[test]
    fn bad_scripts_say_where() {
        assert_eq!(parsed("keep").unwrap_err().to_string(), "1:1: expected ';' or a block");
        assert_eq!(
            parsed("if true {\n keep;\n").unwrap_err().to_string(),
            "2:6: expected '}'"
        );
        let deep = "if true {".repeat(40) + &"}".repeat(40);
        assert!(matches!(parsed(&deep), Err(SieveError::TooDeep { .. })));
        let deep_tests = format!("if {} true{} {{}}", "not ".repeat(40), "");
        assert!(matches!(parsed(&deep_tests), Err(SieveError::TooDeep { .. })));
    }
}
