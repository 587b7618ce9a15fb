//! THREAD (RFC 5256 §3): ORDEREDSUBJECT and REFERENCES over the messages a
//! search found, and the `* THREAD` answer. Pure code: the session loads
//! the messages and hands over what threading reads of each.
//!
//! This threading is per mailbox and per search, as the RFC defines it; it
//! is not JMAP's threadId (which is per account and fixed at delivery).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::parser_reader::{R, Reader, err};
use super::sort::{base_subject_marked, parse_charset_and_keys};
use super::types::{ThreadAlgorithm, ThreadCommand};

/// Messages threaded in one command at most (a bound on the work; more
/// is answered NO by the session). Each costs a few hundred bytes here.
pub const THREAD_MESSAGES_MAX: usize = 200_000;

/// `THREAD algorithm charset search-keys` after the command name.
pub(super) fn parse_thread(r: &mut Reader<'_>, uid: bool) -> R<ThreadCommand> {
    let algorithm = match r.word()?.as_str() {
        "ORDEREDSUBJECT" => ThreadAlgorithm::OrderedSubject,
        "REFERENCES" => ThreadAlgorithm::References,
        _ => return err("unknown threading algorithm"),
    };
    r.sp()?;
    Ok(ThreadCommand {
        uid,
        algorithm,
        search: parse_charset_and_keys(r, uid)?,
    })
}

/// What threading reads of one message.
#[derive(Debug, Clone)]
pub struct ThreadMessage {
    /// The number printed: the UID or the sequence number.
    pub id: u32,
    /// The sequence number (ties in sent date are ordered by it).
    pub seq: u32,
    /// The sent date (RFC 5256 §2.2), ms.
    pub date_ms: i64,
    /// The decoded Subject.
    pub subject: String,
    pub message_id: Option<String>,
    pub references: Option<String>,
    pub in_reply_to: Option<String>,
}

/// A thread (sub)tree; `msg` is None for a dummy (a message referred to
/// but not among the found ones), which only remains at the top level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub msg: Option<usize>,
    pub children: Vec<Thread>,
}

/// Threads the messages (given in sequence order).
pub fn thread(algorithm: ThreadAlgorithm, msgs: &[ThreadMessage]) -> Vec<Thread> {
    match algorithm {
        ThreadAlgorithm::OrderedSubject => ordered_subject(msgs),
        ThreadAlgorithm::References => references(msgs),
    }
}

/// The `* THREAD ...` line (with CRLF).
pub fn thread_line(threads: &[Thread], msgs: &[ThreadMessage]) -> Vec<u8> {
    let mut out = String::from("* THREAD");
    if !threads.is_empty() {
        out.push(' ');
    }
    for t in threads {
        out.push('(');
        render(t, msgs, &mut out);
        out.push(')');
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// A node's members: `3 6 (4 23)(44 7 96)`: a single child continues the
/// list, several children are each parenthesised (RFC 5256 §4).
fn render(t: &Thread, msgs: &[ThreadMessage], out: &mut String) {
    if let Some(i) = t.msg {
        out.push_str(&msgs[i].id.to_string());
        if !t.children.is_empty() {
            out.push(' ');
        }
    }
    if let ([only], Some(_)) = (t.children.as_slice(), t.msg) {
        render(only, msgs, out);
        return;
    }
    for c in &t.children {
        out.push('(');
        render(c, msgs, out);
        out.push(')');
    }
}

/// The order of sent dates, ties by sequence number.
fn by_date(msgs: &[ThreadMessage], a: usize, b: usize) -> Ordering {
    let (x, y) = (&msgs[a], &msgs[b]);
    x.date_ms.cmp(&y.date_ms).then(x.seq.cmp(&y.seq))
}

/// ORDEREDSUBJECT: messages grouped by base subject, each group in sent
/// date order with the first as the parent of all others; groups ordered
/// by their first message's sent date.
fn ordered_subject(msgs: &[ThreadMessage]) -> Vec<Thread> {
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        groups.entry(base_subject_marked(&m.subject).0).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    for g in &mut groups {
        g.sort_by(|a, b| by_date(msgs, *a, *b));
    }
    groups.sort_by(|a, b| by_date(msgs, a[0], b[0]));
    groups
        .into_iter()
        .map(|g| Thread {
            msg: Some(g[0]),
            children: g[1..].iter().map(|&i| leaf(i)).collect(),
        })
        .collect()
}

fn leaf(i: usize) -> Thread {
    Thread {
        msg: Some(i),
        children: Vec::new(),
    }
}

/// The message IDs (`<...>`, without the brackets) in a header value, in
/// order. A token without `@` or with spaces inside is not a valid one.
pub fn message_ids(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let Some(end) = after.find(['>', '<']) else { break };
        let id = &after[..end];
        if after[end..].starts_with('>') && id.contains('@') && !id.contains(char::is_whitespace) {
            out.push(id.to_string());
        }
        rest = &after[end..];
        if let Some(r) = rest.strip_prefix('>') {
            rest = r;
        }
    }
    out
}

/// A container of step 1: a found message or a dummy.
struct Node {
    msg: Option<usize>,
    parent: Option<usize>,
    children: Vec<usize>,
}

/// The id table and containers of REFERENCES step 1.
struct Containers {
    nodes: Vec<Node>,
    by_id: HashMap<String, usize>,
}

impl Containers {
    fn new() -> Self {
        Containers {
            nodes: Vec::new(),
            by_id: HashMap::new(),
        }
    }

    fn add(&mut self, msg: Option<usize>) -> usize {
        self.nodes.push(Node {
            msg,
            parent: None,
            children: Vec::new(),
        });
        self.nodes.len() - 1
    }

    /// The container of a referenced id (a dummy when not seen yet).
    fn referenced(&mut self, id: &str) -> usize {
        if let Some(&n) = self.by_id.get(id) {
            return n;
        }
        let n = self.add(None);
        self.by_id.insert(id.to_string(), n);
        n
    }

    /// Whether `a` is `b` or below it.
    fn descends_from(&self, mut a: usize, b: usize) -> bool {
        // Bounded by the depth: links never make a loop (checked here).
        loop {
            if a == b {
                return true;
            }
            match self.nodes[a].parent {
                Some(p) => a = p,
                None => return false,
            }
        }
    }

    fn unlink(&mut self, child: usize) {
        if let Some(p) = self.nodes[child].parent.take() {
            self.nodes[p].children.retain(|&c| c != child);
        }
    }

    /// Makes `parent` the parent of `child` unless that would make a loop.
    fn link(&mut self, parent: usize, child: usize) {
        if self.descends_from(parent, child) {
            return;
        }
        self.unlink(child);
        self.nodes[child].parent = Some(parent);
        self.nodes[parent].children.push(child);
    }

    /// The tree under container `n`.
    fn tree(&self, n: usize) -> Thread {
        Thread {
            msg: self.nodes[n].msg,
            children: self.nodes[n].children.iter().map(|&c| self.tree(c)).collect(),
        }
    }
}

/// REFERENCES, steps 1 to 7 of RFC 5256 §3.
fn references(msgs: &[ThreadMessage]) -> Vec<Thread> {
    // (1) Containers linked by References (or In-Reply-To).
    let mut c = Containers::new();
    for (i, m) in msgs.iter().enumerate() {
        let own = m.message_id.as_deref().and_then(|v| message_ids(v).into_iter().next());
        // A duplicate Message ID (or none) gets a unique one: the first
        // message keeps it.
        let me = match own {
            Some(id) => match c.by_id.get(&id) {
                Some(&n) if c.nodes[n].msg.is_none() => {
                    c.nodes[n].msg = Some(i);
                    n
                }
                Some(_) => c.add(Some(i)),
                None => {
                    let n = c.add(Some(i));
                    c.by_id.insert(id, n);
                    n
                }
            },
            None => c.add(Some(i)),
        };
        let mut refs = m.references.as_deref().map(message_ids).unwrap_or_default();
        if refs.is_empty() {
            refs = m
                .in_reply_to
                .as_deref()
                .map(message_ids)
                .unwrap_or_default()
                .into_iter()
                .take(1)
                .collect();
        }
        let refs: Vec<usize> = refs.iter().map(|id| c.referenced(id)).collect();
        // (1.A) each reference the parent of the next, keeping existing
        // links.
        for pair in refs.windows(2) {
            let (parent, child) = (pair[0], pair[1]);
            if c.nodes[child].parent.is_none() {
                c.link(parent, child);
            }
        }
        // (1.B) the last reference is this message's parent (replacing a
        // parent from a truncated References line).
        match refs.last() {
            Some(&last) if c.nodes[me].parent != Some(last) => c.link(last, me),
            _ => {}
        }
    }
    // (2, 3) The root set.
    let roots: Vec<usize> = (0..c.nodes.len()).filter(|&n| c.nodes[n].parent.is_none()).collect();
    let mut threads: Vec<Thread> = roots.iter().map(|&n| c.tree(n)).collect();
    drop(c);
    // (4) Dummies pruned.
    threads = prune(threads, true);
    // (5) The top level in sent date order.
    for t in &mut threads {
        sort_siblings(&mut t.children, msgs);
    }
    threads.sort_by(|a, b| by_date(msgs, first_msg(a), first_msg(b)));
    // (6) Threads with the same base subject merged.
    threads = merge_subjects(threads, msgs);
    // (7) Every set of siblings in sent date order, deepest first.
    sort_siblings(&mut threads, msgs);
    threads
}

/// Step 4: a dummy without children goes; one with children gives them to
/// its parent, except at the top level where that needs a single child.
fn prune(list: Vec<Thread>, top: bool) -> Vec<Thread> {
    let mut out = Vec::with_capacity(list.len());
    for mut t in list {
        t.children = prune(std::mem::take(&mut t.children), false);
        match t.msg {
            Some(_) => out.push(t),
            None if t.children.is_empty() => {}
            None if !top || t.children.len() == 1 => out.append(&mut t.children),
            None => out.push(t),
        }
    }
    out
}

/// The message a thread sorts and is named by: itself, or a dummy's first
/// child (children already sorted).
fn first_msg(t: &Thread) -> usize {
    match t.msg {
        Some(i) => i,
        // A dummy has children after pruning; descend to the first.
        None => t.children.first().map_or(0, first_msg),
    }
}

/// Sorts siblings by sent date, their own children first.
fn sort_siblings(list: &mut [Thread], msgs: &[ThreadMessage]) {
    for t in list.iter_mut() {
        sort_siblings(&mut t.children, msgs);
    }
    list.sort_by(|a, b| by_date(msgs, first_msg(a), first_msg(b)));
}

/// Step 6: top-level threads with the same (non-empty) base subject.
fn merge_subjects(threads: Vec<Thread>, msgs: &[ThreadMessage]) -> Vec<Thread> {
    let subject = |t: &Thread| base_subject_marked(&msgs[first_msg(t)].subject);
    let is_dummy = |t: &Thread| t.msg.is_none();
    // (6.A-C) The subject table: for each base subject, the thread that
    // others join.
    let mut table: HashMap<String, usize> = HashMap::new();
    for (i, t) in threads.iter().enumerate() {
        let (base, reply) = subject(t);
        if base.is_empty() {
            continue;
        }
        match table.get(&base) {
            None => {
                table.insert(base, i);
            }
            Some(&held) => {
                let held_t = &threads[held];
                let held_reply = subject(held_t).1;
                if (is_dummy(t) && !is_dummy(held_t)) || (held_reply && !reply && !is_dummy(held_t)) {
                    table.insert(base, i);
                }
            }
        }
    }
    // (6.D) Merging.
    let subjects: Vec<(String, bool)> = threads.iter().map(subject).collect();
    let mut slots: Vec<Option<Thread>> = threads.into_iter().map(Some).collect();
    for i in 0..slots.len() {
        let (base, reply) = &subjects[i];
        let Some(&held) = table.get(base) else { continue };
        if held == i || base.is_empty() {
            continue;
        }
        let (Some(cur), Some(target)) = (slots[i].take(), slots[held].take()) else {
            continue;
        };
        // `reply` of the held thread as the table saw it (it may since
        // have become a dummy, which the dummy cases cover).
        let held_reply = subjects[held].1;
        let merged = match (is_dummy(&cur), is_dummy(&target)) {
            (true, true) => {
                let mut target = target;
                target.children.extend(cur.children);
                target
            }
            (false, true) => {
                let mut target = target;
                target.children.push(cur);
                target
            }
            (false, false) if *reply && !held_reply => {
                let mut target = target;
                target.children.push(cur);
                target
            }
            _ => Thread {
                msg: None,
                children: vec![target, cur],
            },
        };
        slots[held] = Some(merged);
    }
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u32, date: i64, subject: &str, mid: Option<&str>, refs: Option<&str>) -> ThreadMessage {
        ThreadMessage {
            id,
            seq: id,
            date_ms: date,
            subject: subject.into(),
            message_id: mid.map(|s| format!("<{s}>")),
            references: refs.map(str::to_string),
            in_reply_to: None,
        }
    }

    fn line(alg: ThreadAlgorithm, msgs: &[ThreadMessage]) -> String {
        String::from_utf8(thread_line(&thread(alg, msgs), msgs)).unwrap()
    }

    #[test]
    fn message_ids_are_read_in_order() {
        assert_eq!(message_ids("<a@b> junk <c@d>"), ["a@b", "c@d"]);
        assert_eq!(message_ids("<no-at> <x y@z> <<e@f>"), ["e@f"]);
        assert!(message_ids("").is_empty());
    }

    #[test]
    fn references_chains_and_dummies() {
        let msgs = [
            m(1, 10, "topic", Some("a@x"), None),
            m(2, 20, "Re: topic", Some("b@x"), Some("<a@x>")),
            m(3, 30, "Re: topic", Some("c@x"), Some("<a@x> <b@x>")),
            m(4, 25, "Re: topic", Some("d@x"), Some("<a@x>")),
            // Two replies to a missing parent: a dummy with two children
            // stays at the top level.
            m(5, 40, "other", Some("e@x"), Some("<gone@x>")),
            m(6, 50, "unrelated", Some("f@x"), Some("<gone@x>")),
            // A reply to a missing parent alone: the dummy is replaced.
            m(7, 5, "lonely", Some("g@x"), Some("<gone2@x>")),
        ];
        assert_eq!(
            line(ThreadAlgorithm::References, &msgs),
            "* THREAD (7)(1 (2 3)(4))((5)(6))\r\n"
        );
    }

    #[test]
    fn references_merges_subjects_and_ignores_loops() {
        let msgs = [
            m(1, 10, "hello", Some("a@x"), None),
            m(2, 20, "Re: hello", Some("b@x"), None),
            m(3, 30, "hello", Some("c@x"), None),
            // Loop: d refers to e, e refers to d.
            m(4, 40, "loop", Some("d@x"), Some("<e@x>")),
            m(5, 50, "loop2", Some("e@x"), Some("<d@x>")),
            // A duplicate Message-ID is a message of its own.
            m(6, 60, "dup", Some("a@x"), None),
        ];
        assert_eq!(
            line(ThreadAlgorithm::References, &msgs),
            "* THREAD ((1 2)(3))(5 4)(6)\r\n"
        );
    }

    #[test]
    fn ordered_subject_groups() {
        let msgs = [
            m(1, 30, "b", None, None),
            m(2, 10, "Re: a", None, None),
            m(3, 20, "a", None, None),
            m(4, 40, "b", None, None),
            m(5, 50, "A", None, None),
        ];
        assert_eq!(
            line(ThreadAlgorithm::OrderedSubject, &msgs),
            "* THREAD (2 (3)(5))(1 4)\r\n"
        );
        assert_eq!(line(ThreadAlgorithm::OrderedSubject, &[]), "* THREAD\r\n");
    }
}
