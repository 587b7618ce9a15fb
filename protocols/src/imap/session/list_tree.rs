//! Which names a LIST or LSUB answers, with which attributes: pure code
//! over the account's mailboxes and subscriptions.
//!
//! - Plain LIST (RFC 3501 §6.3.8): existing mailboxes, and the missing
//!   superiors of a hierarchy (`a` of `a/b`) as `\Noselect \HasChildren`.
//! - LSUB (§6.3.9): subscribed names; a name matching `%` whose inferiors
//!   are subscribed but which is not itself gets `\Noselect`.
//! - LIST-EXTENDED (RFC 5258): `SUBSCRIBED` lists subscribed names, those
//!   whose mailbox is gone as `\NonExistent`; with `RECURSIVEMATCH`, a
//!   matching name with subscribed inferiors that do not match carries
//!   `CHILDINFO ("SUBSCRIBED")`, subscribed itself or not (then listed for
//!   that alone, without `\Subscribed`); missing superiors are
//!   `\NonExistent`.

use std::collections::{BTreeMap, BTreeSet};

use crate::imap::wire::types::ListCommand;
use crate::imap::wire::utf7::list_pattern_matches;

/// A mailbox as LIST needs it.
pub struct Existing<'a> {
    pub name: &'a str,
    pub special_use: Option<&'a str>,
}

/// One answer line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub attributes: Vec<String>,
    pub child_subscribed: bool,
    /// The mailbox exists (STATUS may be asked of it).
    pub exists: bool,
}

/// What LIST or LSUB (`lsub`) answers, in name order (INBOX first).
pub fn entries(
    cmd: &ListCommand,
    lsub: bool,
    existing: &[Existing<'_>],
    subscribed: &BTreeSet<String>,
    delimiter: char,
) -> Vec<Entry> {
    let tree = Tree {
        cmd,
        lsub,
        subscribed,
        delimiter,
        patterns: cmd.patterns.iter().map(|p| format!("{}{}", cmd.reference, p)).collect(),
        specials: existing.iter().map(|m| (m.name, m.special_use)).collect(),
        all: with_superiors(
            existing
                .iter()
                .map(|m| m.name.to_string())
                .chain(subscribed.iter().cloned()),
            delimiter,
        ),
    };
    let mut out: Vec<Entry> = tree.all.iter().filter_map(|name| tree.entry(name)).collect();
    // INBOX first, as clients expect.
    out.sort_by_key(|e| e.name != "INBOX");
    out
}

/// Every name with a meaning: the names given (mailboxes, subscriptions)
/// and all their superiors.
fn with_superiors(names: impl Iterator<Item = String>, delimiter: char) -> BTreeSet<String> {
    let mut all: BTreeSet<String> = BTreeSet::new();
    for name in names {
        let mut prefix = String::new();
        for (i, piece) in name.split(delimiter).enumerate() {
            if i > 0 {
                prefix.push(delimiter);
            }
            prefix.push_str(piece);
            all.insert(prefix.clone());
        }
    }
    all
}

/// One LIST or LSUB over the account's names.
struct Tree<'a> {
    cmd: &'a ListCommand,
    lsub: bool,
    subscribed: &'a BTreeSet<String>,
    delimiter: char,
    /// The patterns, each with the reference prefixed.
    patterns: Vec<String>,
    /// Existing mailboxes and their special use.
    specials: BTreeMap<&'a str, Option<&'a str>>,
    all: BTreeSet<String>,
}

impl Tree<'_> {
    fn matches(&self, name: &str) -> bool {
        self.patterns
            .iter()
            .any(|p| list_pattern_matches(p, name, Some(self.delimiter)))
    }

    fn inferiors(&self, name: &str) -> impl Iterator<Item = &String> {
        let prefix = format!("{name}{}", self.delimiter);
        self.all
            .range(prefix.clone()..)
            .take_while(move |n| n.starts_with(&prefix))
    }

    /// The entry for `name`, None when the command does not list it.
    fn entry(&self, name: &str) -> Option<Entry> {
        let (cmd, lsub) = (self.cmd, self.lsub);
        let exists = self.specials.contains_key(name);
        let is_subscribed = self.subscribed.contains(name);
        let has_children = self.inferiors(name).any(|n| self.specials.contains_key(n.as_str()));
        let mut attributes: Vec<String> = Vec::new();
        let mut child_subscribed = false;
        if !self.matches(name) {
            return None;
        }
        if lsub || cmd.select_subscribed {
            let (noselect, childinfo) = self.by_subscription(name, is_subscribed)?;
            if noselect {
                attributes.push("\\Noselect".into());
            }
            child_subscribed = childinfo;
        } else if !exists && !has_children {
            return None;
        }
        if !exists && !lsub {
            if cmd.extended {
                attributes.push("\\NonExistent".into());
            } else if !attributes.iter().any(|a| a == "\\Noselect") {
                attributes.push("\\Noselect".into());
            }
        }
        // LSUB and \NonExistent names say nothing of children (RFC 5258
        // §3.4 does not require it); others always do.
        if !lsub && (exists || has_children) {
            attributes.push(
                if has_children {
                    "\\HasChildren"
                } else {
                    "\\HasNoChildren"
                }
                .into(),
            );
        }
        if is_subscribed && !lsub && (cmd.return_subscribed || cmd.select_subscribed) {
            attributes.push("\\Subscribed".into());
        }
        if let Some(Some(s)) = self.specials.get(name) {
            attributes.push((*s).to_string());
        }
        if cmd.select_special_use && !self.specials.get(name).is_some_and(|s| s.is_some()) {
            return None;
        }
        Some(Entry {
            name: name.to_string(),
            attributes,
            child_subscribed,
            exists,
        })
    }

    /// LSUB or LIST (SUBSCRIBED): whether `name` is listed, and if so
    /// whether as \Noselect and whether with CHILDINFO SUBSCRIBED.
    fn by_subscription(&self, name: &str, is_subscribed: bool) -> Option<(bool, bool)> {
        let (cmd, lsub) = (self.cmd, self.lsub);
        // A subscribed inferior the pattern does not reach: only this
        // name can tell the client of it (RFC 5258 §3, example 9 of
        // §5: `eps2` subscribed with CHILDINFO for `eps2/mamba` under
        // "*2", `baz2` not listed, its subscribed inferiors all match).
        let hidden_subscribed = self
            .inferiors(name)
            .any(|n| self.subscribed.contains(n) && !self.matches(n));
        if !is_subscribed {
            // LSUB `%` shows such a superior as \Noselect (RFC 3501
            // §6.3.9); RECURSIVEMATCH shows it with CHILDINFO.
            if !(hidden_subscribed && (lsub || cmd.select_recursive_match)) {
                return None;
            }
            return Some(if lsub { (true, false) } else { (false, true) });
        }
        Some((false, cmd.select_recursive_match && hidden_subscribed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(pattern: &str, subscribed: bool, recursive: bool) -> ListCommand {
        ListCommand {
            reference: String::new(),
            patterns: vec![pattern.to_string()],
            select_subscribed: subscribed,
            select_remote: false,
            select_recursive_match: recursive,
            select_special_use: false,
            return_subscribed: false,
            return_children: false,
            return_special_use: false,
            return_status: None,
            extended: subscribed || recursive,
        }
    }

    fn names_of(e: &[Entry]) -> Vec<String> {
        e.iter()
            .map(|e| {
                let child = if e.child_subscribed { " CHILDINFO" } else { "" };
                format!("{} ({}){child}", e.name, e.attributes.join(" "))
            })
            .collect()
    }

    fn setup() -> (Vec<Existing<'static>>, BTreeSet<String>) {
        let existing = vec![
            Existing {
                name: "INBOX",
                special_use: None,
            },
            Existing {
                name: "a/b/c",
                special_use: None,
            },
            Existing {
                name: "Sent",
                special_use: Some("\\Sent"),
            },
        ];
        let subs = ["INBOX", "a/b/c", "gone"].iter().map(|s| s.to_string()).collect();
        (existing, subs)
    }

    #[test]
    fn plain_list_shows_missing_superiors_as_noselect() {
        let (ex, subs) = setup();
        assert_eq!(
            names_of(&entries(&cmd("%", false, false), false, &ex, &subs, '/')),
            vec![
                "INBOX (\\HasNoChildren)",
                "Sent (\\HasNoChildren \\Sent)",
                "a (\\Noselect \\HasChildren)"
            ]
        );
        assert_eq!(
            names_of(&entries(&cmd("*", false, false), false, &ex, &subs, '/')),
            vec![
                "INBOX (\\HasNoChildren)",
                "Sent (\\HasNoChildren \\Sent)",
                "a (\\Noselect \\HasChildren)",
                "a/b (\\Noselect \\HasChildren)",
                "a/b/c (\\HasNoChildren)"
            ]
        );
    }

    #[test]
    fn lsub_percent_shows_superiors_of_subscriptions() {
        let (ex, subs) = setup();
        assert_eq!(
            names_of(&entries(&cmd("%", false, false), true, &ex, &subs, '/')),
            vec!["INBOX ()", "a (\\Noselect)", "gone ()"]
        );
    }

    #[test]
    fn subscribed_selection_and_recursive_match() {
        let (ex, subs) = setup();
        assert_eq!(
            names_of(&entries(&cmd("*", true, false), false, &ex, &subs, '/')),
            vec![
                "INBOX (\\HasNoChildren \\Subscribed)",
                "a/b/c (\\HasNoChildren \\Subscribed)",
                "gone (\\NonExistent \\Subscribed)"
            ]
        );
        assert_eq!(
            names_of(&entries(&cmd("%", true, true), false, &ex, &subs, '/')),
            vec![
                "INBOX (\\HasNoChildren \\Subscribed)",
                "a (\\NonExistent \\HasChildren) CHILDINFO",
                "gone (\\NonExistent \\Subscribed)"
            ]
        );
    }

    #[test]
    fn recursive_match_follows_rfc5258_example_9() {
        let names = [
            "foo2",
            "foo2/bar1",
            "foo2/bar2",
            "baz2",
            "baz2/bar2",
            "baz2/bar22",
            "baz2/bar222",
            "eps2",
            "eps2/mamba",
            "qux2/bar2",
        ];
        let ex: Vec<Existing<'_>> = names
            .iter()
            .map(|name| Existing {
                name,
                special_use: None,
            })
            .collect();
        let subs: BTreeSet<String> = names
            .iter()
            .filter(|n| !["foo2", "baz2"].contains(n))
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            names_of(&entries(&cmd("*2", true, true), false, &ex, &subs, '/')),
            vec![
                "baz2/bar2 (\\HasNoChildren \\Subscribed)",
                "baz2/bar22 (\\HasNoChildren \\Subscribed)",
                "baz2/bar222 (\\HasNoChildren \\Subscribed)",
                "eps2 (\\HasChildren \\Subscribed) CHILDINFO",
                "foo2 (\\HasChildren) CHILDINFO",
                "foo2/bar2 (\\HasNoChildren \\Subscribed)",
                "qux2/bar2 (\\HasNoChildren \\Subscribed)",
            ]
        );
        assert_eq!(
            names_of(&entries(&cmd("%", true, true), false, &ex, &subs, '/')),
            vec![
                "baz2 (\\HasChildren) CHILDINFO",
                "eps2 (\\HasChildren \\Subscribed) CHILDINFO",
                "foo2 (\\HasChildren) CHILDINFO",
                "qux2 (\\NonExistent \\HasChildren) CHILDINFO",
            ]
        );
        // LSUB: a subscribed name once; an unsubscribed superior of
        // subscribed names the pattern does not reach as \Noselect.
        assert_eq!(
            names_of(&entries(&cmd("%", false, false), true, &ex, &subs, '/')),
            vec!["baz2 (\\Noselect)", "eps2 ()", "foo2 (\\Noselect)", "qux2 (\\Noselect)"]
        );
    }
}
