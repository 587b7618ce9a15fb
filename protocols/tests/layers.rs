//! The protocols crate's layers, checked from its sources (issue 41 item 1).
//!
//! Every `use` path and every inline `crate::`/`super::`/`self::` path of
//! `protocols/src` is resolved to the module it names and classified into
//! a layer (`smtp::wire`, `smtp::session`, `accept`, …). The test fails
//! when a layer names one it must not (the wire layers name no session,
//! acceptance no protocol, outbound no SMTP session), or when the layers'
//! graph has a cycle. Run with `--nocapture` to see the graph.
//!
//! It reads text, not the compiler's resolution: comments are skipped,
//! inline modules (`mod tests { … }`, rustfmt'd) are followed for
//! `super::`, and re-exports count where they are written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A path named in the sources, where, and the layers on both ends.
#[derive(Debug)]
struct Reference {
    file: String,
    line: usize,
    from: &'static str,
    to: &'static str,
    path: String,
    /// An outside crate (`tokio`, `meshmail_actors`...) or a type named
    /// bare (`Txn`, `NodeCtx`): the first segment.
    external: bool,
}

/// The layer a module path (`crate::a::b…`) belongs to.
fn layer(path: &[String]) -> &'static str {
    let seg = |i: usize| path.get(i).map(String::as_str).unwrap_or("");
    match (seg(1), seg(2)) {
        ("smtp", "wire") => "smtp::wire",
        ("smtp", "session") => "smtp::session",
        ("smtp", _) => "smtp",
        ("imap", "wire") => "imap::wire",
        ("imap", "session") => "imap::session",
        ("imap", _) => "imap",
        ("pop3", "wire") => "pop3::wire",
        ("pop3", "session") => "pop3::session",
        ("pop3", _) => "pop3",
        ("managesieve", "wire") => "managesieve::wire",
        ("managesieve", "session") => "managesieve::session",
        ("managesieve", _) => "managesieve",
        ("jmap", "wire") => "jmap::wire",
        // The dispatcher calls the methods and the methods take its `Call`:
        // one layer, JMAP's session side.
        ("jmap", _) => "jmap::methods",
        ("accept", _) => "accept",
        ("sieve", _) => "sieve",
        ("envelope", _) => "envelope",
        ("outbound", _) => "outbound",
        ("net", _) => "net",
        ("dns", _) => "dns",
        ("ingest", _) => "ingest",
        ("summary" | "summary_raw", _) => "summary",
        ("", _) => "crate",
        _ => "other",
    }
}

/// The module path of a source file: `src/smtp/wire/command.rs` is
/// `crate::smtp::wire::command`, `src/imap/mod.rs` `crate::imap`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut out = vec!["crate".to_string()];
    for c in rel.components() {
        let c = c.as_os_str().to_string_lossy();
        match c.strip_suffix(".rs") {
            Some("mod" | "lib") => {}
            Some(stem) => out.push(stem.to_string()),
            None => out.push(c.to_string()),
        }
    }
    out
}

/// `crate::x`, `super::x`, `self::x` or `x` (an outside crate or a name in
/// scope) as an absolute path from module `here`.
fn resolve(here: &[String], path: &str) -> Option<Vec<String>> {
    let mut segs = path.split("::").map(str::trim).filter(|s| !s.is_empty());
    let first = segs.next()?;
    let mut out: Vec<String> = match first {
        "crate" => vec!["crate".into()],
        "self" => here.to_vec(),
        "super" => here[..here.len().saturating_sub(1)].to_vec(),
        _ => return None,
    };
    for s in segs {
        if s == "super" {
            out.pop();
        } else {
            out.push(s.to_string());
        }
    }
    Some(out)
}

/// Expands a `use` tree (`a::{b, c::{d, self}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    // `x as y` names x; then whitespace means nothing.
    let mut words: Vec<&str> = Vec::new();
    let mut it = tree.split_whitespace().peekable();
    while let Some(w) = it.next() {
        if w == "as" {
            let alias = it.next().unwrap_or("");
            // Keep what follows the alias (`,` or `}`).
            words.push(alias.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_'));
        } else {
            words.push(w);
        }
    }
    let tree: String = words.concat();
    let Some(open) = tree.find('{') else {
        return vec![tree.trim_end_matches("::self").to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .flat_map(|i| {
            expand(i)
                .into_iter()
                .map(|p| {
                    if p == "self" {
                        prefix.trim_end_matches("::").to_string()
                    } else {
                        format!("{prefix}{p}")
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every path one file names, with the module it is named from.
fn references(src: &Path, file: &Path) -> Vec<Reference> {
    let text = std::fs::read_to_string(file).expect("read a source file");
    let module = module_of(src, file);
    let from = layer(&module);
    let name = file.strip_prefix(src).expect("under src").display().to_string();
    let mut out = Vec::new();
    // Inline modules: (indent of `mod x {`, name).
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut pending_use = String::new();
    let mut pending_line = 0;
    for (n, raw) in text.lines().enumerate() {
        let indent = raw.len() - raw.trim_start().len();
        let line = raw.trim();
        if line.starts_with("//") {
            continue;
        }
        let code = match line.find(" // ") {
            Some(i) => &line[..i],
            None => line,
        };
        if let Some((i, _)) = inline.last()
            && *i == indent
            && code == "}"
        {
            inline.pop();
            continue;
        }
        for ext in ["tokio", "meshmail_actors", "Txn", "NodeCtx", "Database"] {
            if code.contains(ext) {
                out.push(Reference {
                    file: name.clone(),
                    line: n + 1,
                    from,
                    to: "external",
                    path: ext.trim_end_matches(':').to_string(),
                    external: true,
                });
            }
        }
        let here: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, m)| m.clone()))
            .collect();
        if let Some(rest) = code.strip_prefix("mod ").or_else(|| code.strip_prefix("pub mod "))
            && let Some(m) = rest.strip_suffix(" {")
        {
            inline.push((indent, m.trim().to_string()));
            continue;
        }
        // `use` statements, possibly over several lines.
        let start = code
            .strip_prefix("use ")
            .or_else(|| code.strip_prefix("pub use "))
            .or_else(|| code.strip_prefix("pub(crate) use "))
            .or_else(|| code.strip_prefix("pub(super) use "));
        if pending_use.is_empty()
            && let Some(s) = start
        {
            pending_use = s.to_string();
            pending_line = n + 1;
        } else if !pending_use.is_empty() {
            pending_use.push_str(code);
        }
        if !pending_use.is_empty() {
            if !pending_use.ends_with(';') {
                continue;
            }
            let tree = pending_use.trim_end_matches(';').to_string();
            pending_use.clear();
            for p in expand(&tree) {
                out.push(reference(src, &name, pending_line, from, &here, &p));
            }
            continue;
        }
        // Inline paths in code: `crate::a::b`, `super::x`, `self::y`.
        for key in ["crate::", "super::", "self::"] {
            let mut rest = code;
            while let Some(i) = rest.find(key) {
                let boundary = i == 0 || !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(tail.len());
                if boundary {
                    out.push(reference(
                        src,
                        &name,
                        n + 1,
                        from,
                        &here,
                        tail[..end].trim_end_matches(':'),
                    ));
                }
                rest = &tail[end.max(1)..];
            }
        }
    }
    out
}

fn reference(src: &Path, file: &str, line: usize, from: &'static str, here: &[String], path: &str) -> Reference {
    // A bare first segment is a child module when its file exists
    // (`pub use wire::reply::Reply` in `smtp/mod.rs`), else an outside crate.
    let first = path.split("::").next().unwrap_or(path);
    let dir = here[1..].iter().fold(src.to_path_buf(), |d, s| d.join(s));
    let child = dir.join(format!("{first}.rs")).exists() || dir.join(first).join("mod.rs").exists();
    let path = if child {
        format!("self::{path}")
    } else {
        path.to_string()
    };
    let path = path.as_str();
    match resolve(here, path) {
        Some(abs) => Reference {
            file: file.to_string(),
            line,
            from,
            to: layer(&abs),
            path: abs.join("::"),
            external: false,
        },
        None => Reference {
            file: file.to_string(),
            line,
            from,
            to: "external",
            path: path.split("::").next().unwrap_or(path).to_string(),
            external: true,
        },
    }
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_references() -> Vec<Reference> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    files.iter().flat_map(|f| references(&src, f)).collect()
}

/// What a layer must not name: other layers, and for the pure layers the
/// outside crates and types that do I/O.
fn forbidden(from: &str, r: &Reference) -> bool {
    const IO: &[&str] = &["tokio", "meshmail_actors", "Txn", "NodeCtx", "Database"];
    const SESSIONS: &[&str] = &[
        "smtp::session",
        "imap::session",
        "pop3::session",
        "managesieve::session",
        "jmap::methods",
        "accept",
        "outbound",
        "net",
        "dns",
        "ingest",
    ];
    if r.external {
        let pure = matches!(
            from,
            "smtp::wire" | "imap::wire" | "pop3::wire" | "managesieve::wire" | "jmap::wire" | "envelope" | "sieve"
        );
        return pure && IO.contains(&r.path.as_str());
    }
    match from {
        // Pure layers: no session, no acceptance, no I/O module; envelope
        // not even SMTP's wire (it is below it).
        "smtp::wire" | "imap::wire" | "pop3::wire" | "jmap::wire" => {
            SESSIONS.contains(&r.to) || matches!(r.to, "smtp" | "imap" | "pop3" | "managesieve")
        }
        // ManageSieve's wire layer borrows POP3's SASL PLAIN decoder and
        // the Sieve layer's limits (both pure), nothing with I/O.
        "managesieve::wire" => {
            SESSIONS.contains(&r.to) || matches!(r.to, "smtp" | "imap" | "pop3" | "managesieve" | "accept")
        }
        // Sieve is pure: source and a message in, actions out. It names no
        // other layer of this crate (acceptance calls it, not the reverse).
        "sieve" => r.to != "sieve" && r.to != "crate",
        // One protocol's session never reaches into another's: what they
        // share (net, accept, ingest) sits below both.
        "pop3::session" => r.to.starts_with("imap") || r.to.starts_with("smtp") || r.to.starts_with("jmap"),
        "managesieve::session" => {
            r.to.starts_with("imap") || r.to.starts_with("smtp") || r.to.starts_with("jmap") || r.to == "pop3::session"
        }
        "envelope" => {
            SESSIONS.contains(&r.to)
                || ["smtp", "imap", "pop3", "managesieve", "jmap"]
                    .iter()
                    .any(|p| r.to.starts_with(p))
        }
        // Protocols depend on acceptance, never the other way round.
        "accept" => {
            r.to.starts_with("smtp")
                || r.to.starts_with("imap")
                || r.to.starts_with("pop3")
                || r.to.starts_with("managesieve")
                || r.to.starts_with("jmap")
                || matches!(r.to, "net" | "outbound")
        }
        // The queue runner hands DSNs to acceptance, not to SMTP's session.
        "outbound" => matches!(
            r.to,
            "smtp::session" | "smtp" | "imap::session" | "pop3::session" | "jmap::methods"
        ),
        _ => false,
    }
}

#[test]
fn layers_name_only_what_they_may() {
    let refs = all_references();
    assert!(
        refs.len() > 500,
        "the scan found too few paths ({}): is it reading src?",
        refs.len()
    );
    let violations: Vec<String> = refs
        .iter()
        .filter(|r| forbidden(r.from, r))
        .map(|r| format!("{}:{}: {} names {} ({})", r.file, r.line, r.from, r.to, r.path))
        .collect();
    assert!(violations.is_empty(), "layer violations:\n{}", violations.join("\n"));
}

#[test]
fn the_layers_graph_has_no_cycle() {
    let mut edges: BTreeMap<&'static str, BTreeSet<&'static str>> = BTreeMap::new();
    for r in all_references().iter().filter(|r| !r.external && r.from != r.to) {
        edges.entry(r.from).or_default().insert(r.to);
    }
    for (from, to) in &edges {
        println!("{from} -> {}", to.iter().copied().collect::<Vec<_>>().join(", "));
    }
    // Depth-first search; a node met again on the current path is a cycle.
    fn visit<'a>(
        n: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Result<(), String> {
        if let Some(i) = path.iter().position(|p| *p == n) {
            return Err(format!("{} -> {n}", path[i..].join(" -> ")));
        }
        if done.contains(n) {
            return Ok(());
        }
        path.push(n);
        for m in edges.get(n).into_iter().flatten() {
            visit(m, edges, path, done)?;
        }
        path.pop();
        done.insert(n);
        Ok(())
    }
    let mut done = BTreeSet::new();
    for n in edges.keys() {
        if let Err(cycle) = visit(n, &edges, &mut Vec::new(), &mut done) {
            panic!("the layers import each other: {cycle}");
        }
    }
}

/// The checks see what they must: a made-up wire file that imports a
/// session, and an acceptance file that imports SMTP, are both caught.
#[test]
fn the_scan_catches_a_violation() {
    let dir = std::env::temp_dir().join(format!("meshmail-layers-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("smtp/wire")).expect("mkdir");
    std::fs::create_dir_all(src.join("accept")).expect("mkdir");
    std::fs::create_dir_all(src.join("pop3/wire")).expect("mkdir");
    std::fs::write(
        src.join("pop3/wire/bad.rs"),
        "use crate::pop3::session::Pop3Shared;\nfn f() -> super::super::session::maildrop::Maildrop { todo!() }\n",
    )
    .expect("write");
    std::fs::write(
        src.join("smtp/wire/bad.rs"),
        "use crate::smtp::session::SmtpShared;\nuse super::super::super::accept::{Outcome, store::{self, accept_message}};\n\
         fn f() { let _ = tokio::spawn(async {}); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    )
    .expect("write");
    std::fs::write(src.join("accept/bad.rs"), "pub use crate::smtp::wire::reply::Reply;\n").expect("write");
    std::fs::create_dir_all(src.join("sieve")).expect("mkdir");
    std::fs::write(
        src.join("sieve/bad.rs"),
        "use crate::accept::Outcome;\nuse super::lexer::Token;\nfn f() { let _ = tokio::spawn(async {}); }\n",
    )
    .expect("write");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let refs: Vec<Reference> = files.iter().flat_map(|f| references(&src, f)).collect();
    let bad: Vec<String> = refs
        .iter()
        .filter(|r| forbidden(r.from, r))
        .map(|r| format!("{} {}", r.from, r.path))
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        bad,
        [
            "accept crate::smtp::wire::reply::Reply",
            "pop3::wire crate::pop3::session::Pop3Shared",
            "pop3::wire crate::pop3::session::maildrop::Maildrop",
            "sieve crate::accept::Outcome",
            "sieve tokio",
            "smtp::wire crate::smtp::session::SmtpShared",
            "smtp::wire crate::accept::Outcome",
            "smtp::wire crate::accept::store",
            "smtp::wire crate::accept::store::accept_message",
            "smtp::wire tokio",
        ]
    );
}
