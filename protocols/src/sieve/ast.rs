//! The generic syntax tree of RFC 5228 §8.2: every command and test is a
//! name with arguments, tests and a block. [`super::compile`] turns it
//! into the typed program; nothing else reads it.

use super::error::Pos;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Tag(String),
    Number(u64),
    /// A single string (`list == false`) or a bracketed string list.
    Strings {
        values: Vec<String>,
        list: bool,
    },
}

/// A command (`block` is `Some` for `if`/`elsif`/`else`) or a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub pos: Pos,
    pub args: Vec<(Pos, Arg)>,
    pub tests: Vec<Node>,
    pub block: Option<Vec<Node>>,
}
