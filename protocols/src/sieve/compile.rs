//! Upload-time checks and the typed program: script size, UTF-8,
//! `require` of known extensions only (an unknown one is an error here,
//! never at delivery), each command's arguments, and redirects to the
//! account's own address. Tests are compiled in [`super::compile_test`].

use std::collections::HashSet;

use super::args::{Args, Takes};
use super::ast::Node;
use super::error::{Pos, SieveError};
use super::program::{Command, FlagOp, Modifier, Script, Str, Vacation};
use super::{lexer, parser};

/// Scripts are stored whole in one store value (FDB's value limit is
/// 100 KB): 64 KiB is far above what hand-written rules need.
pub const SCRIPT_BYTES_MAX: usize = 64 * 1024;

/// The extensions `require` accepts.
pub const EXTENSIONS: &[&str] = &[
    "fileinto",
    "reject",
    "ereject",
    "envelope",
    "body",
    "variables",
    "imap4flags",
    "relational",
    "subaddress",
    "copy",
    "date",
    "index",
    "vacation",
    "vacation-seconds",
    "include",
    "editheader",
    "duplicate",
    "mailbox",
    "comparator-i;octet",
    "comparator-i;ascii-casemap",
    "comparator-i;ascii-numeric",
];

/// What the compiler knows of the account (for the redirect-to-self check).
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The account's own addresses, lowercase.
    pub own_addresses: Vec<String>,
}

/// Compiles a script's source; every error names the line:column at fault.
pub fn compile(source: &[u8], ctx: &Context) -> Result<Script, SieveError> {
    if source.len() > SCRIPT_BYTES_MAX {
        return Err(SieveError::TooLarge {
            size: source.len(),
            max: SCRIPT_BYTES_MAX,
        });
    }
    let text = std::str::from_utf8(source).map_err(|e| SieveError::InvalidUtf8 {
        pos: pos_at(source, e.valid_up_to()),
    })?;
    let nodes = parser::parse(lexer::tokenize(text)?)?;
    let mut c = Compiler {
        extensions: HashSet::new(),
        nodes: 0,
        ctx,
    };
    let commands = c.block(&nodes, true)?;
    Ok(Script {
        commands,
        variables: c.extensions.contains("variables"),
        nodes: c.nodes,
    })
}

fn pos_at(source: &[u8], at: usize) -> Pos {
    let before = &source[..at];
    let line = before.iter().filter(|&&c| c == b'\n').count() as u32 + 1;
    let start = before.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() as u32 + 1;
    Pos { line, col }
}

pub(super) struct Compiler<'a> {
    pub(super) extensions: HashSet<String>,
    pub(super) nodes: usize,
    ctx: &'a Context,
}

impl Compiler<'_> {
    pub(super) fn need(&self, pos: Pos, name: &str, extension: &str) -> Result<(), SieveError> {
        if self.extensions.contains(extension) {
            return Ok(());
        }
        Err(SieveError::NotRequired {
            pos,
            name: name.to_string(),
            extension: extension.to_string(),
        })
    }

    pub(super) fn str(&self, text: String) -> Str {
        let vars = self.extensions.contains("variables") && text.contains("${");
        Str { text, vars }
    }

    pub(super) fn strs(&self, v: Vec<String>) -> Vec<Str> {
        v.into_iter().map(|s| self.str(s)).collect()
    }

    fn block(&mut self, nodes: &[Node], top: bool) -> Result<Vec<Command>, SieveError> {
        let mut out = Vec::new();
        let mut requires_allowed = top;
        let mut i = 0;
        while i < nodes.len() {
            let node = &nodes[i];
            self.nodes += 1;
            if node.name == "require" {
                if !requires_allowed {
                    return Err(SieveError::Syntax {
                        pos: node.pos,
                        what: "require must come before any other command".into(),
                    });
                }
                self.require(node)?;
                i += 1;
                continue;
            }
            requires_allowed = false;
            if node.name == "if" {
                let (cmd, used) = self.if_chain(&nodes[i..])?;
                out.push(cmd);
                i += used;
                continue;
            }
            if matches!(node.name.as_str(), "elsif" | "else") {
                return Err(SieveError::Syntax {
                    pos: node.pos,
                    what: format!("{} without if", node.name),
                });
            }
            out.push(self.command(node)?);
            i += 1;
        }
        Ok(out)
    }

    fn require(&mut self, node: &Node) -> Result<(), SieveError> {
        let mut args = Args::split(node, &[])?;
        for name in args.strings("the extension list")? {
            let known = EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(&name));
            if !known {
                return Err(SieveError::UnknownExtension { pos: node.pos, name });
            }
            // RFC 6131 §2: vacation-seconds implies vacation.
            if name.eq_ignore_ascii_case("vacation-seconds") {
                self.extensions.insert("vacation".into());
            }
            self.extensions.insert(name.to_ascii_lowercase());
        }
        args.done()
    }

    /// `if` with its `elsif`s and `else`; how many nodes it used.
    fn if_chain(&mut self, nodes: &[Node]) -> Result<(Command, usize), SieveError> {
        let mut branches = Vec::new();
        let mut otherwise = None;
        let mut used = 0;
        for (i, node) in nodes.iter().enumerate() {
            let keyword = node.name.as_str();
            let continues = (i == 0 && keyword == "if") || (i > 0 && matches!(keyword, "elsif" | "else"));
            if !continues {
                break;
            }
            if i > 0 {
                self.nodes += 1;
            }
            used += 1;
            let Some(block) = &node.block else {
                return Err(SieveError::Syntax {
                    pos: node.pos,
                    what: format!("{keyword} needs a block"),
                });
            };
            let body = self.block(block, false)?;
            if keyword == "else" {
                if !node.tests.is_empty() || !node.args.is_empty() {
                    return Err(SieveError::Syntax {
                        pos: node.pos,
                        what: "else takes no test".into(),
                    });
                }
                otherwise = Some(body);
                break;
            }
            if node.tests.len() != 1 || !node.args.is_empty() {
                return Err(SieveError::Syntax {
                    pos: node.pos,
                    what: format!("{keyword} needs one test"),
                });
            }
            branches.push((self.test(&node.tests[0])?, body));
        }
        Ok((Command::If { branches, otherwise }, used))
    }

    fn no_tests(node: &Node) -> Result<(), SieveError> {
        if node.tests.is_empty() && node.block.is_none() {
            return Ok(());
        }
        Err(SieveError::Syntax {
            pos: node.pos,
            what: format!("{} takes no test or block", node.name),
        })
    }

    fn command(&mut self, node: &Node) -> Result<Command, SieveError> {
        Self::no_tests(node)?;
        let pos = node.pos;
        let cmd = match node.name.as_str() {
            "stop" => {
                Args::split(node, &[])?.done()?;
                Command::Stop
            }
            "discard" => {
                Args::split(node, &[])?.done()?;
                Command::Discard
            }
            "keep" => {
                let args = Args::split(node, &[("flags", Takes::Strings)])?;
                args.done()?;
                self.flags_tag(&args)?;
                Command::Keep {
                    flags: self.flags_of(&args),
                }
            }
            "fileinto" => self.fileinto(node)?,
            "redirect" => self.redirect(node)?,
            "reject" | "ereject" => {
                self.need(pos, &node.name, &node.name)?;
                let mut args = Args::split(node, &[])?;
                let reason = self.str(args.string("the reason")?);
                args.done()?;
                Command::Reject {
                    reason,
                    extended: node.name == "ereject",
                }
            }
            "vacation" => self.vacation(node)?,
            "set" => self.set(node)?,
            "setflag" | "addflag" | "removeflag" => self.flag_command(node)?,
            "addheader" => {
                self.need(pos, "addheader", "editheader")?;
                let mut args = Args::split(node, &[("last", Takes::Nothing)])?;
                let name = args.string("the header name")?;
                let value = args.string("the header value")?;
                args.done()?;
                if !valid_header_name(&name) {
                    return Err(args.err(pos, format!("invalid header name {name:?}")));
                }
                Command::AddHeader {
                    last: args.has("last"),
                    name: self.str(name),
                    value: self.str(value),
                }
            }
            "deleteheader" => self.deleteheader(node)?,
            "include" => self.include(node)?,
            "return" => {
                self.need(pos, "return", "include")?;
                Args::split(node, &[])?.done()?;
                Command::Return
            }
            "global" => {
                self.need(pos, "global", "include")?;
                self.need(pos, "global", "variables")?;
                let mut args = Args::split(node, &[])?;
                let names = args.strings("the variable names")?;
                args.done()?;
                Command::Global(names.into_iter().map(|n| n.to_ascii_lowercase()).collect())
            }
            _ => {
                return Err(SieveError::UnknownCommand {
                    pos,
                    name: node.name.clone(),
                });
            }
        };
        Ok(cmd)
    }

    fn flags_tag(&self, args: &Args) -> Result<(), SieveError> {
        match args.flag("flags") {
            Some(pos) => self.need(pos, ":flags", "imap4flags"),
            None => Ok(()),
        }
    }

    fn flags_of(&self, args: &Args) -> Option<Vec<Str>> {
        args.tag_strings("flags").map(|v| self.strs(v))
    }

    fn fileinto(&mut self, node: &Node) -> Result<Command, SieveError> {
        self.need(node.pos, "fileinto", "fileinto")?;
        let spec = [
            ("flags", Takes::Strings),
            ("copy", Takes::Nothing),
            ("create", Takes::Nothing),
        ];
        let mut args = Args::split(node, &spec)?;
        let mailbox = args.string("the mailbox")?;
        args.done()?;
        self.flags_tag(&args)?;
        if let Some(p) = args.flag("copy") {
            self.need(p, ":copy", "copy")?;
        }
        if let Some(p) = args.flag("create") {
            self.need(p, ":create", "mailbox")?;
        }
        if mailbox.is_empty() {
            return Err(args.err(node.pos, "empty mailbox name"));
        }
        Ok(Command::FileInto {
            mailbox: self.str(mailbox),
            flags: self.flags_of(&args),
            copy: args.has("copy"),
            create: args.has("create"),
        })
    }

    fn redirect(&mut self, node: &Node) -> Result<Command, SieveError> {
        let mut args = Args::split(node, &[("copy", Takes::Nothing)])?;
        let address = args.string("the address")?;
        args.done()?;
        if let Some(p) = args.flag("copy") {
            self.need(p, ":copy", "copy")?;
        }
        let address = self.str(address);
        if !address.vars {
            let Some(addr) = super::address::parse_single(&address.text) else {
                return Err(args.err(node.pos, format!("invalid address {:?}", address.text)));
            };
            let lower = addr.to_ascii_lowercase();
            let base = super::address::without_detail(&lower);
            if self.ctx.own_addresses.iter().any(|o| *o == lower || *o == base) {
                return Err(SieveError::RedirectToSelf {
                    pos: node.pos,
                    address: addr,
                });
            }
        }
        Ok(Command::Redirect {
            address,
            copy: args.has("copy"),
        })
    }

    fn vacation(&mut self, node: &Node) -> Result<Command, SieveError> {
        self.need(node.pos, "vacation", "vacation")?;
        let spec = [
            ("days", Takes::Number),
            ("seconds", Takes::Number),
            ("subject", Takes::String),
            ("from", Takes::String),
            ("addresses", Takes::Strings),
            ("mime", Takes::Nothing),
            ("handle", Takes::String),
        ];
        let mut args = Args::split(node, &spec)?;
        let reason = args.string("the reason")?;
        args.done()?;
        if let Some(p) = args.flag("seconds") {
            self.need(p, ":seconds", "vacation-seconds")?;
            if args.has("days") {
                return Err(args.err(p, ":days and :seconds together"));
            }
        }
        Ok(Command::Vacation(Box::new(Vacation {
            days: args.tag_number("days"),
            seconds: args.tag_number("seconds"),
            subject: args.tag_string("subject").map(|s| self.str(s)),
            from: args.tag_string("from").map(|s| self.str(s)),
            addresses: self.strs(args.tag_strings("addresses").unwrap_or_default()),
            mime: args.has("mime"),
            handle: args.tag_string("handle").map(|s| self.str(s)),
            reason: self.str(reason),
        })))
    }

    fn set(&mut self, node: &Node) -> Result<Command, SieveError> {
        self.need(node.pos, "set", "variables")?;
        let spec = [
            ("lower", Takes::Nothing),
            ("upper", Takes::Nothing),
            ("lowerfirst", Takes::Nothing),
            ("upperfirst", Takes::Nothing),
            ("quotewildcard", Takes::Nothing),
            ("length", Takes::Nothing),
        ];
        let mut args = Args::split(node, &spec)?;
        let name = args.string("the variable name")?;
        let value = args.string("the value")?;
        args.done()?;
        if !super::variables::valid_name(&name) {
            return Err(args.err(node.pos, format!("invalid variable name {name:?}")));
        }
        // RFC 5229 §4: higher precedence first; :length (10) last.
        let order = [
            ("lower", Modifier::Lower),
            ("upper", Modifier::Upper),
            ("lowerfirst", Modifier::LowerFirst),
            ("upperfirst", Modifier::UpperFirst),
            ("quotewildcard", Modifier::QuoteWildcard),
            ("length", Modifier::Length),
        ];
        if args.has("lower") && args.has("upper") || args.has("lowerfirst") && args.has("upperfirst") {
            return Err(args.err(node.pos, "conflicting modifiers"));
        }
        let modifiers = order.iter().filter(|(t, _)| args.has(t)).map(|(_, m)| *m).collect();
        Ok(Command::Set {
            name: name.to_ascii_lowercase(),
            value: self.str(value),
            modifiers,
        })
    }

    fn flag_command(&mut self, node: &Node) -> Result<Command, SieveError> {
        self.need(node.pos, &node.name, "imap4flags")?;
        let mut args = Args::split(node, &[])?;
        let first = args.strings("the flags")?;
        let (var, flags) = if args.remaining() > 0 {
            let var = first.into_iter().next().unwrap_or_default();
            self.need(node.pos, "a flag variable", "variables")?;
            (Some(self.str(var)), args.strings("the flags")?)
        } else {
            (None, first)
        };
        args.done()?;
        let op = match node.name.as_str() {
            "setflag" => FlagOp::Set,
            "addflag" => FlagOp::Add,
            _ => FlagOp::Remove,
        };
        Ok(Command::Flags {
            op,
            var,
            flags: self.strs(flags),
        })
    }

    fn deleteheader(&mut self, node: &Node) -> Result<Command, SieveError> {
        self.need(node.pos, "deleteheader", "editheader")?;
        let mut spec = super::compile_test::MATCH_TAGS.to_vec();
        spec.extend_from_slice(&[("index", Takes::Number), ("last", Takes::Nothing)]);
        let mut args = Args::split(node, &spec)?;
        let name = args.string("the header name")?;
        let patterns = if args.remaining() > 0 {
            Some(args.strings("the value patterns")?)
        } else {
            None
        };
        args.done()?;
        let m = self.match_spec(&args)?;
        let index = self.index(&args)?;
        Ok(Command::DeleteHeader {
            index,
            m,
            name: self.str(name),
            patterns: patterns.map(|p| self.strs(p)),
        })
    }

    fn include(&mut self, node: &Node) -> Result<Command, SieveError> {
        self.need(node.pos, "include", "include")?;
        let spec = [
            ("personal", Takes::Nothing),
            ("global", Takes::Nothing),
            ("once", Takes::Nothing),
            ("optional", Takes::Nothing),
        ];
        let mut args = Args::split(node, &spec)?;
        let name = args.string("the script name")?;
        args.done()?;
        if args.has("personal") && args.has("global") {
            return Err(args.err(node.pos, ":personal and :global together"));
        }
        if name.is_empty() || name.contains('/') {
            return Err(args.err(node.pos, format!("invalid script name {name:?}")));
        }
        Ok(Command::Include {
            personal: !args.has("global"),
            name,
            once: args.has("once"),
            optional: args.has("optional"),
        })
    }
}

/// RFC 5322 field-name: printable ASCII but ':'.
pub(super) fn valid_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| (33..=126).contains(&c) && c != b':')
}
