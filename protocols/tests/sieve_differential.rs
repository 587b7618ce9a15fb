//! Differential test against Pigeonhole (issue 43 item 6): every script
//! of `corpus/sieve/scripts` on every message of `corpus/sieve/messages`,
//! run by `sieve-test` (Debian dovecot-sieve, through
//! `corpus/sieve/pigeonhole.py`) and by meshmail's interpreter; the
//! normalised action lists (keep, fileinto targets and flags, redirect
//! targets, reject text, vacation or not, discard, errors) must be equal
//! except for the pairs `corpus/sieve-allowed-differences.txt` lists, each
//! with its RFC citation. An allowed difference that no longer occurs
//! fails the test too, so the file stays true.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use meshmail_protocols::sieve::{self, Action, Context, Env, Envelope, Script, SieveError};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/sieve")
}

struct CorpusEnv {
    own: Vec<String>,
}

impl Env for CorpusEnv {
    /// A fresh sieve-test maildir holds INBOX only.
    fn mailbox_exists(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case("INBOX")
    }
    fn duplicate_seen(&self, _: &str) -> bool {
        false
    }
    fn script(&self, _: bool, name: &str) -> Option<Result<Arc<Script>, SieveError>> {
        let src = std::fs::read(corpus().join("include").join(format!("{name}.sieve"))).ok()?;
        Some(sieve::compile(&src, &Context::default()).map(Arc::new))
    }
    fn now_s(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }
    fn own_addresses(&self) -> &[String] {
        &self.own
    }
}

/// The same strings `pigeonhole.py` prints.
fn normalise(a: &Action) -> String {
    let flags = |f: &[String]| {
        let mut f: Vec<String> = f.iter().map(|x| x.to_ascii_lowercase()).collect();
        f.sort();
        f.join(" ")
    };
    match a {
        Action::Keep { flags: f } => format!("store INBOX [{}]", flags(f)),
        Action::FileInto {
            mailbox,
            flags: f,
            create,
        } => {
            let mailbox = if mailbox.eq_ignore_ascii_case("INBOX") {
                "INBOX"
            } else {
                mailbox
            };
            format!("store {mailbox} [{}]{}", flags(f), if *create { " create" } else { "" })
        }
        Action::Redirect { address } => format!("redirect {}", address.to_ascii_lowercase()),
        // sieve-test prints a line break in the reason as "??".
        Action::Reject { reason, .. } => format!("reject {}", reason.replace("\r\n", "??")),
        Action::Discard => "discard".into(),
        Action::Vacation(v) => format!("vacation {}", v.period_s),
    }
}

fn ours(script: &[u8], message: &[u8], envelope: &Envelope) -> String {
    let script = match sieve::compile(script, &Context::default()) {
        Ok(s) => s,
        Err(_) => return "compile-error".into(),
    };
    let to = envelope.to.to_ascii_lowercase();
    let env = CorpusEnv {
        own: vec![to.clone(), sieve::address::without_detail(&to)],
    };
    let set: BTreeSet<String> = match sieve::run(&script, message, envelope.clone(), &env) {
        Ok(o) => o.actions.iter().map(normalise).collect(),
        Err(_) => ["error".to_string(), "store INBOX []".to_string()].into(),
    };
    set.into_iter().collect::<Vec<_>>().join("; ")
}

fn envelopes() -> HashMap<String, Envelope> {
    let text = std::fs::read_to_string(corpus().join("messages/envelopes.txt")).expect("envelopes.txt");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            let [m, from, to] = p.as_slice() else { return None };
            let from = if *from == "<>" { String::new() } else { from.to_string() };
            Some((
                m.to_string(),
                Envelope {
                    from,
                    to: to.to_string(),
                },
            ))
        })
        .collect()
}

/// `script message` pairs (`*` for every message), each with its reason.
fn allowed() -> BTreeMap<(String, String), String> {
    let path = corpus().parent().expect("corpus").join("sieve-allowed-differences.txt");
    let text = std::fs::read_to_string(path).expect("sieve-allowed-differences.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut p = l.splitn(3, char::is_whitespace);
            let (s, m, why) = (p.next().unwrap_or(""), p.next().unwrap_or(""), p.next().unwrap_or(""));
            assert!(why.contains("RFC"), "an allowed difference needs an RFC citation: {l}");
            ((s.to_string(), m.to_string()), why.to_string())
        })
        .collect()
}

/// Pigeonhole's answers: `MESHMAIL_SIEVE_REFERENCE` (a saved run) or a
/// fresh run of sieve-test.
fn reference() -> String {
    if let Ok(path) = std::env::var("MESHMAIL_SIEVE_REFERENCE") {
        return std::fs::read_to_string(path).expect("reference file");
    }
    let found = Command::new("sieve-test").arg("--help").output();
    assert!(
        found.is_ok(),
        "sieve-test not found: install Debian's dovecot-sieve (.ci/run does)"
    );
    let out = Command::new("python3")
        .arg(corpus().join("pigeonhole.py"))
        .output()
        .expect("run pigeonhole.py");
    assert!(
        out.status.success(),
        "pigeonhole.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn meshmail_agrees_with_pigeonhole() {
    let envelopes = envelopes();
    let allowed = allowed();
    let reference = reference();
    let (mut pairs, mut agree, mut used) = (0, 0, BTreeSet::new());
    let mut scripts = BTreeSet::new();
    let mut messages = BTreeSet::new();
    let mut bad = Vec::new();
    for line in reference.lines() {
        let mut p = line.splitn(3, '\t');
        let (s, m, theirs) = (p.next().unwrap_or(""), p.next().unwrap_or(""), p.next().unwrap_or(""));
        let script = std::fs::read(corpus().join("scripts").join(s)).expect("script");
        let message = std::fs::read(corpus().join("messages").join(m)).expect("message");
        let envelope = envelopes.get(m).cloned().expect("an envelope for every message");
        let mine = ours(&script, &message, &envelope);
        pairs += 1;
        scripts.insert(s.to_string());
        messages.insert(m.to_string());
        if mine == theirs {
            agree += 1;
            continue;
        }
        let key = [(s, m), (s, "*")]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .find(|k| allowed.contains_key(k));
        match key {
            Some(k) => {
                used.insert(k);
            }
            None => bad.push(format!("{s} {m}\n  pigeonhole: {theirs}\n  meshmail:   {mine}")),
        }
    }
    println!(
        "{} scripts x {} messages = {pairs} pairs: {agree} agree, {} allowed differences ({} entries)",
        scripts.len(),
        messages.len(),
        pairs - agree - bad.len(),
        used.len()
    );
    assert!(scripts.len() >= 60 && messages.len() >= 30, "the corpus is too small");
    assert!(bad.is_empty(), "{} pairs differ:\n{}", bad.len(), bad.join("\n"));
    let stale: Vec<_> = allowed.keys().filter(|k| !used.contains(*k)).collect();
    assert!(stale.is_empty(), "allowed differences that no longer occur: {stale:?}");
}
