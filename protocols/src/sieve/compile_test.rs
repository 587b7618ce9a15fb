//! Tests (RFC 5228 §5 and the extensions'), their match types,
//! comparators, address parts and `:index`, compiled into [`Test`].

use super::args::{Args, Takes};
use super::ast::Node;
use super::compile::Compiler;
use super::error::SieveError;
use super::program::{
    AddressPart, BodyTransform, Comparator, Duplicate, Index, MatchKind, MatchSpec, RelOp, Test, Zone,
};

/// The tags every matching test takes.
pub(super) const MATCH_TAGS: &[(&str, Takes)] = &[
    ("comparator", Takes::String),
    ("is", Takes::Nothing),
    ("contains", Takes::Nothing),
    ("matches", Takes::Nothing),
    ("regex", Takes::Nothing),
    ("value", Takes::String),
    ("count", Takes::String),
];

const ADDRESS_TAGS: &[(&str, Takes)] = &[
    ("all", Takes::Nothing),
    ("localpart", Takes::Nothing),
    ("domain", Takes::Nothing),
    ("user", Takes::Nothing),
    ("detail", Takes::Nothing),
];

const INDEX_TAGS: &[(&str, Takes)] = &[("index", Takes::Number), ("last", Takes::Nothing)];

fn spec(parts: &[&[(&'static str, Takes)]]) -> Vec<(&'static str, Takes)> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

impl Compiler<'_> {
    pub(super) fn test(&mut self, node: &Node) -> Result<Test, SieveError> {
        self.nodes += 1;
        if node.block.is_some() {
            return Err(SieveError::Syntax {
                pos: node.pos,
                what: "a test takes no block".into(),
            });
        }
        let nested = matches!(node.name.as_str(), "not" | "allof" | "anyof");
        if !nested && !node.tests.is_empty() {
            return Err(SieveError::Syntax {
                pos: node.pos,
                what: format!("{} takes no test", node.name),
            });
        }
        match node.name.as_str() {
            "true" | "false" | "not" | "allof" | "anyof" => self.logical(node),
            "exists" => {
                let mut args = Args::split(node, &[])?;
                let names = args.strings("the header names")?;
                args.done()?;
                Ok(Test::Exists(self.strs(names)))
            }
            "size" => Self::size(node),
            "header" | "address" | "envelope" => self.header_like(node),
            "body" => self.body(node),
            "date" | "currentdate" => self.date(node),
            "string" => self.string(node),
            "hasflag" => self.hasflag(node),
            "duplicate" => self.duplicate(node),
            "mailboxexists" => {
                self.need(node.pos, "mailboxexists", "mailbox")?;
                let mut args = Args::split(node, &[])?;
                let names = args.strings("the mailbox names")?;
                args.done()?;
                Ok(Test::MailboxExists(self.strs(names)))
            }
            _ => Err(SieveError::UnknownTest {
                pos: node.pos,
                name: node.name.clone(),
            }),
        }
    }

    /// `true`, `false`, `not`, `allof` and `anyof`: the tests that hold tests.
    fn logical(&mut self, node: &Node) -> Result<Test, SieveError> {
        Args::split(node, &[])?.done()?;
        match node.name.as_str() {
            "true" => Ok(Test::True),
            "false" => Ok(Test::False),
            "not" => match node.tests.as_slice() {
                [t] => Ok(Test::Not(Box::new(self.test(t)?))),
                _ => Err(SieveError::Syntax {
                    pos: node.pos,
                    what: "not takes one test".into(),
                }),
            },
            _ => {
                let tests = node.tests.iter().map(|t| self.test(t)).collect::<Result<Vec<_>, _>>()?;
                if tests.is_empty() {
                    return Err(SieveError::Syntax {
                        pos: node.pos,
                        what: format!("{} needs tests", node.name),
                    });
                }
                Ok(if node.name == "allof" {
                    Test::AllOf(tests)
                } else {
                    Test::AnyOf(tests)
                })
            }
        }
    }

    fn size(node: &Node) -> Result<Test, SieveError> {
        let mut args = Args::split(node, &[("over", Takes::Nothing), ("under", Takes::Nothing)])?;
        let limit = args.number("the size")?;
        args.done()?;
        if args.has("over") == args.has("under") {
            return Err(args.err(node.pos, "size needs exactly one of :over and :under"));
        }
        Ok(Test::Size {
            over: args.has("over"),
            limit,
        })
    }

    /// `header`, `address` and `envelope`: names and keys, with a match
    /// type; address parts for the latter two, `:index` for the first two.
    fn header_like(&mut self, node: &Node) -> Result<Test, SieveError> {
        let kind = node.name.as_str();
        if kind == "envelope" {
            self.need(node.pos, "envelope", "envelope")?;
        }
        let tags = match kind {
            "header" => spec(&[MATCH_TAGS, INDEX_TAGS]),
            "address" => spec(&[MATCH_TAGS, ADDRESS_TAGS, INDEX_TAGS]),
            _ => spec(&[MATCH_TAGS, ADDRESS_TAGS]),
        };
        let mut args = Args::split(node, &tags)?;
        let names = args.strings(if kind == "envelope" {
            "the envelope parts"
        } else {
            "the header names"
        })?;
        let keys = args.strings("the keys")?;
        args.done()?;
        if kind == "envelope" {
            for n in &names {
                if !["from", "to"].contains(&n.to_ascii_lowercase().as_str()) {
                    return Err(args.err(node.pos, format!("unsupported envelope part {n:?}")));
                }
            }
        }
        let m = self.match_spec(&args)?;
        let (names, keys) = (self.strs(names), self.strs(keys));
        if kind == "envelope" {
            let part = self.address_part(&args)?;
            return Ok(Test::Envelope { part, names, keys, m });
        }
        let index = self.index(&args)?;
        if kind == "header" {
            return Ok(Test::Header { names, keys, m, index });
        }
        Ok(Test::Address {
            part: self.address_part(&args)?,
            names,
            keys,
            m,
            index,
        })
    }

    fn string(&mut self, node: &Node) -> Result<Test, SieveError> {
        self.need(node.pos, "string", "variables")?;
        let mut args = Args::split(node, MATCH_TAGS)?;
        let sources = args.strings("the source strings")?;
        let keys = args.strings("the keys")?;
        args.done()?;
        Ok(Test::String {
            sources: self.strs(sources),
            keys: self.strs(keys),
            m: self.match_spec(&args)?,
        })
    }

    fn hasflag(&mut self, node: &Node) -> Result<Test, SieveError> {
        self.need(node.pos, "hasflag", "imap4flags")?;
        let mut args = Args::split(node, MATCH_TAGS)?;
        let first = args.strings("the flags")?;
        let (vars, keys) = if args.remaining() > 0 {
            (first, args.strings("the flags")?)
        } else {
            (Vec::new(), first)
        };
        args.done()?;
        Ok(Test::HasFlag {
            vars: self.strs(vars),
            keys: self.strs(keys),
            m: self.match_spec(&args)?,
        })
    }

    pub(super) fn match_spec(&self, args: &Args) -> Result<MatchSpec, SieveError> {
        let mut kind = None;
        for (pos, tag) in args.tags() {
            let k = match tag {
                "is" => MatchKind::Is,
                "contains" => MatchKind::Contains,
                "matches" => MatchKind::Matches,
                "regex" => {
                    return Err(SieveError::UnknownExtension {
                        pos,
                        name: "regex".into(),
                    });
                }
                "value" | "count" => {
                    self.need(pos, tag, "relational")?;
                    let op = args.tag_string(tag).unwrap_or_default();
                    let op = rel_op(&op).ok_or_else(|| args.err(pos, format!("invalid relational operator {op:?}")))?;
                    if tag == "value" {
                        MatchKind::Value(op)
                    } else {
                        MatchKind::Count(op)
                    }
                }
                _ => continue,
            };
            if kind.replace(k).is_some() {
                return Err(args.err(pos, "more than one match type"));
            }
        }
        let comparator = match args.tag_string("comparator") {
            None => Comparator::AsciiCasemap,
            Some(c) => {
                let pos = args.flag("comparator").unwrap_or(args.pos);
                match c.to_ascii_lowercase().as_str() {
                    "i;octet" => Comparator::Octet,
                    "i;ascii-casemap" => Comparator::AsciiCasemap,
                    "i;ascii-numeric" => {
                        self.need(pos, "i;ascii-numeric", "comparator-i;ascii-numeric")?;
                        Comparator::AsciiNumeric
                    }
                    _ => return Err(args.err(pos, format!("unknown comparator {c:?}"))),
                }
            }
        };
        let kind = kind.unwrap_or(MatchKind::Is);
        // RFC 4790 §9.1: i;ascii-numeric offers equality and ordering only.
        if comparator == Comparator::AsciiNumeric && matches!(kind, MatchKind::Contains | MatchKind::Matches) {
            return Err(args.err(args.pos, "i;ascii-numeric supports no substring match"));
        }
        Ok(MatchSpec { comparator, kind })
    }

    pub(super) fn index(&self, args: &Args) -> Result<Option<Index>, SieveError> {
        let Some(pos) = args.flag("index") else {
            if let Some(p) = args.flag("last") {
                return Err(args.err(p, ":last needs :index"));
            }
            return Ok(None);
        };
        self.need(pos, ":index", "index")?;
        let n = args.tag_number("index").unwrap_or(0);
        if n == 0 {
            return Err(args.err(pos, ":index counts from 1"));
        }
        Ok(Some(Index {
            n,
            last: args.has("last"),
        }))
    }

    fn address_part(&self, args: &Args) -> Result<AddressPart, SieveError> {
        let mut part = None;
        for (pos, tag) in args.tags() {
            let p = match tag {
                "all" => AddressPart::All,
                "localpart" => AddressPart::LocalPart,
                "domain" => AddressPart::Domain,
                "user" | "detail" => {
                    self.need(pos, tag, "subaddress")?;
                    if tag == "user" {
                        AddressPart::User
                    } else {
                        AddressPart::Detail
                    }
                }
                _ => continue,
            };
            if part.replace(p).is_some() {
                return Err(args.err(pos, "more than one address part"));
            }
        }
        Ok(part.unwrap_or(AddressPart::All))
    }

    fn body(&mut self, node: &Node) -> Result<Test, SieveError> {
        self.need(node.pos, "body", "body")?;
        let tags = spec(&[
            MATCH_TAGS,
            &[
                ("raw", Takes::Nothing),
                ("text", Takes::Nothing),
                ("content", Takes::Strings),
            ],
        ]);
        let mut args = Args::split(node, &tags)?;
        let keys = args.strings("the keys")?;
        args.done()?;
        if args.has("content") {
            return Err(args.err(node.pos, ":content is not supported (use :text)"));
        }
        let transform = if args.has("raw") {
            BodyTransform::Raw
        } else {
            BodyTransform::Text
        };
        Ok(Test::Body {
            transform,
            keys: self.strs(keys),
            m: self.match_spec(&args)?,
        })
    }

    fn date(&mut self, node: &Node) -> Result<Test, SieveError> {
        self.need(node.pos, &node.name, "date")?;
        let current = node.name == "currentdate";
        let mut tags = spec(&[MATCH_TAGS, &[("zone", Takes::String)]]);
        if !current {
            tags.extend_from_slice(&[("originalzone", Takes::Nothing)]);
            tags.extend_from_slice(INDEX_TAGS);
        }
        let mut args = Args::split(node, &tags)?;
        let header = if current {
            None
        } else {
            Some(args.string("the header name")?)
        };
        let part = args.string("the date part")?;
        let keys = args.strings("the keys")?;
        args.done()?;
        if !super::date::PARTS.contains(&part.to_ascii_lowercase().as_str()) {
            return Err(args.err(node.pos, format!("unknown date part {part:?}")));
        }
        let zone = match (args.tag_string("zone"), args.has("originalzone")) {
            (Some(_), true) => return Err(args.err(node.pos, ":zone and :originalzone together")),
            (Some(z), false) => Zone::Fixed(self.str(z)),
            (None, true) => Zone::Original,
            (None, false) => Zone::Local,
        };
        let (m, part, keys) = (
            self.match_spec(&args)?,
            self.str(part.to_ascii_lowercase()),
            self.strs(keys),
        );
        Ok(match header {
            None => Test::CurrentDate { zone, part, keys, m },
            Some(h) => Test::Date {
                header: self.str(h),
                zone,
                part,
                keys,
                m,
                index: self.index(&args)?,
            },
        })
    }

    fn duplicate(&mut self, node: &Node) -> Result<Test, SieveError> {
        self.need(node.pos, "duplicate", "duplicate")?;
        let tags = [
            ("handle", Takes::String),
            ("header", Takes::String),
            ("uniqueid", Takes::String),
            ("seconds", Takes::Number),
            ("last", Takes::Nothing),
        ];
        let args = Args::split(node, &tags)?;
        args.done()?;
        if args.has("header") && args.has("uniqueid") {
            return Err(args.err(node.pos, ":header and :uniqueid together"));
        }
        Ok(Test::Duplicate(Box::new(Duplicate {
            handle: args.tag_string("handle").map(|s| self.str(s)),
            header: args.tag_string("header").map(|s| self.str(s)),
            uniqueid: args.tag_string("uniqueid").map(|s| self.str(s)),
            seconds: args.tag_number("seconds"),
            last: args.has("last"),
        })))
    }
}

fn rel_op(s: &str) -> Option<RelOp> {
    Some(match s.to_ascii_lowercase().as_str() {
        "gt" => RelOp::Gt,
        "ge" => RelOp::Ge,
        "lt" => RelOp::Lt,
        "le" => RelOp::Le,
        "eq" => RelOp::Eq,
        "ne" => RelOp::Ne,
        _ => return None,
    })
}
