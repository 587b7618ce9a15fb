//! Splits a command's or test's arguments into its tagged arguments (with
//! their values) and its positional ones, checking each against what the
//! command accepts.

use std::collections::VecDeque;

use super::ast::{Arg, Node};
use super::error::{Pos, SieveError};

/// What follows a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Nothing,
    String,
    Strings,
    Number,
}

pub struct Args {
    pub command: String,
    pub pos: Pos,
    tags: Vec<(Pos, String, Option<Arg>)>,
    positional: VecDeque<(Pos, Arg)>,
}

impl Args {
    pub fn split(node: &Node, spec: &[(&str, Takes)]) -> Result<Args, SieveError> {
        let mut args = Args {
            command: node.name.clone(),
            pos: node.pos,
            tags: Vec::new(),
            positional: VecDeque::new(),
        };
        let mut it = node.args.iter().peekable();
        while let Some((pos, arg)) = it.next() {
            let Arg::Tag(tag) = arg else {
                args.positional.push_back((*pos, arg.clone()));
                continue;
            };
            if !args.positional.is_empty() {
                return Err(args.err(*pos, format!("tag :{tag} after a positional argument")));
            }
            let Some((_, takes)) = spec.iter().find(|(n, _)| n == tag) else {
                return Err(args.err(*pos, format!("unknown tag :{tag}")));
            };
            if args.tags.iter().any(|(_, t, _)| t == tag) {
                return Err(args.err(*pos, format!("tag :{tag} given twice")));
            }
            let value = match takes {
                Takes::Nothing => None,
                want => match it.next() {
                    Some((_, v @ Arg::Number(_))) if *want == Takes::Number => Some(v.clone()),
                    Some((_, v @ Arg::Strings { list: false, .. })) if *want == Takes::String => Some(v.clone()),
                    Some((_, v @ Arg::Strings { .. })) if *want == Takes::Strings => Some(v.clone()),
                    _ => return Err(args.err(*pos, format!("tag :{tag} needs a {}", name_of(*want)))),
                },
            };
            args.tags.push((*pos, tag.clone(), value));
        }
        Ok(args)
    }

    pub fn err(&self, pos: Pos, what: impl Into<String>) -> SieveError {
        SieveError::Argument {
            pos,
            command: self.command.clone(),
            what: what.into(),
        }
    }

    /// The tag's position when it was given.
    pub fn flag(&self, tag: &str) -> Option<Pos> {
        self.tags.iter().find(|(_, t, _)| t == tag).map(|(p, _, _)| *p)
    }

    pub fn has(&self, tag: &str) -> bool {
        self.flag(tag).is_some()
    }

    /// The tags given, in order, with their positions.
    pub fn tags(&self) -> impl Iterator<Item = (Pos, &str)> {
        self.tags.iter().map(|(p, t, _)| (*p, t.as_str()))
    }

    pub fn tag_strings(&self, tag: &str) -> Option<Vec<String>> {
        self.tags
            .iter()
            .find(|(_, t, _)| t == tag)
            .and_then(|(_, _, v)| match v {
                Some(Arg::Strings { values, .. }) => Some(values.clone()),
                _ => None,
            })
    }

    pub fn tag_string(&self, tag: &str) -> Option<String> {
        self.tag_strings(tag).and_then(|v| v.into_iter().next())
    }

    pub fn tag_number(&self, tag: &str) -> Option<u64> {
        self.tags
            .iter()
            .find(|(_, t, _)| t == tag)
            .and_then(|(_, _, v)| match v {
                Some(Arg::Number(n)) => Some(*n),
                _ => None,
            })
    }

    pub fn strings(&mut self, what: &str) -> Result<Vec<String>, SieveError> {
        match self.positional.pop_front() {
            Some((_, Arg::Strings { values, .. })) => Ok(values),
            Some((pos, _)) => Err(self.err(pos, format!("expected {what} (a string list)"))),
            None => Err(self.err(self.pos, format!("missing {what}"))),
        }
    }

    pub fn string(&mut self, what: &str) -> Result<String, SieveError> {
        match self.positional.pop_front() {
            Some((
                _,
                Arg::Strings {
                    mut values,
                    list: false,
                },
            )) => Ok(values.remove(0)),
            Some((pos, _)) => Err(self.err(pos, format!("expected {what} (a string)"))),
            None => Err(self.err(self.pos, format!("missing {what}"))),
        }
    }

    pub fn number(&mut self, what: &str) -> Result<u64, SieveError> {
        match self.positional.pop_front() {
            Some((_, Arg::Number(n))) => Ok(n),
            Some((pos, _)) => Err(self.err(pos, format!("expected {what} (a number)"))),
            None => Err(self.err(self.pos, format!("missing {what}"))),
        }
    }

    /// Whether a positional argument is left (optional ones).
    pub fn remaining(&self) -> usize {
        self.positional.len()
    }

    pub fn done(&self) -> Result<(), SieveError> {
        match self.positional.front() {
            Some((pos, _)) => Err(self.err(*pos, "too many arguments")),
            None => Ok(()),
        }
    }
}

fn name_of(t: Takes) -> &'static str {
    match t {
        Takes::Nothing => "nothing",
        Takes::String => "string",
        Takes::Strings => "string list",
        Takes::Number => "number",
    }
}
