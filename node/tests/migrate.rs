//! `meshmail migrate` (issue 42 item 4) from Debian's Dovecot, started on
//! loopback with a throwaway config (`py/dovecot_peer.py`, the peer of the
//! differential IMAP tests), filled over IMAP APPEND with a few thousand
//! generated messages in nested folders (Dovecot's separator is `.`), with
//! flags, a keyword and distinct internal dates. Then, as an operator
//! would: a migration SIGKILLed half-way and run again; both servers
//! compared folder by folder (BODY[] hash, FLAGS, INTERNALDATE; the dump of
//! `py/export_import.py`), so a duplicate or a missing message fails; a
//! third run copies nothing; five new messages make a run copy exactly
//! five; a folder recreated on the source (new UIDVALIDITY) is read again
//! and nothing of it copied twice; and plaintext to a non-loopback address
//! is refused before anything is sent. TLS and STARTTLS are tested against
//! meshmail's own listeners (the Dovecot peer runs without TLS).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Node, meshmail, python_script, setup_account};

const USER: &str = "source@example.org";
const PASSWORD: &str = "source secret";
const ACCOUNT: &str = "dest@example.org";
/// Generated messages (plus two identical twins `migrate.py` adds).
const MESSAGES: usize = 2_400;
/// Copied messages after which the first run is killed: inside a batch
/// (folders hold 200, a batch is 200, progress lines come every 50), so
/// the rerun finds messages stored after the last checkpoint.
const KILL_AFTER: usize = 1_050;
/// What the checkpoints said when the run was killed (five folders).
const CHECKPOINTED: usize = 1_000;

/// Dovecot, stopped when its script's stdin closes (on drop).
struct Dovecot {
    child: Child,
    port: String,
}

impl Dovecot {
    fn start(work: &std::path::Path) -> Dovecot {
        let mut child = Command::new("python3")
            .arg(format!("{}/tests/py/migrate.py", env!("CARGO_MANIFEST_DIR")))
            .args(["serve", work.to_str().unwrap(), USER, PASSWORD])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        // The script gives Dovecot 30 s to greet, then exits (EOF here).
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("dovecot ")
            .unwrap_or_else(|| panic!("Dovecot did not start: {line:?}"))
            .trim()
            .to_string();
        Dovecot { child, port }
    }

    fn script(&self, args: &[&str]) -> String {
        let mut all = vec![args[0], "127.0.0.1", &self.port, USER, PASSWORD];
        all.extend(&args[1..]);
        let (ok, out) = python_script("migrate.py", &all);
        assert!(ok, "{out}");
        out
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn dump(host_port: &str, user: &str, password: &str) -> serde_json::Value {
    let (host, port) = host_port.rsplit_once(':').unwrap();
    let (ok, out) = python_script("export_import.py", &["dump", host, port, user, password]);
    assert!(ok, "{out}");
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

fn migrate_cmd(node: &Node, url: &str, plaintext: bool) -> Command {
    let mut cmd = meshmail(&node.data_dir);
    cmd.args(["migrate", url, "--account", ACCOUNT, "--password-stdin"])
        .args(["--node", node.addr("http")])
        .args(plaintext.then_some("--plaintext-on-loopback"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn migrate(node: &Node, url: &str) -> Output {
    feed_password(migrate_cmd(node, url, true).spawn().unwrap())
}

fn feed_password(mut child: Child) -> Output {
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The summary's "migrated N messages" and "S skipped".
fn counts(out: &Output) -> (usize, usize) {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("migrated "))
        .unwrap_or_else(|| panic!("no summary: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let num = |after: &str| -> usize {
        let w: Vec<&str> = line.split_whitespace().collect();
        let i = w.iter().position(|x| *x == after).unwrap();
        w[i - 1].parse().unwrap()
    };
    (num("messages"), num("skipped"))
}

/// Runs a migration and SIGKILLs it once its progress lines report at
/// least `after` messages copied; returns how many it had reported.
fn migrate_killed(node: &Node, url: &str, after: usize) -> usize {
    let mut child = migrate_cmd(node, url, true).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .unwrap();
    let started = Instant::now();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Bounded by the migration's own output: it ends when the process does.
    let reported = lines
        .map(|line| {
            let line = line.unwrap();
            assert!(started.elapsed() < Duration::from_secs(300), "no progress in 300 s");
            match line.strip_prefix("progress: ") {
                Some(rest) => rest.split_whitespace().next().unwrap().parse::<usize>().unwrap(),
                None => 0,
            }
        })
        .find(|&copied| copied >= after);
    child.kill().unwrap();
    child.wait().unwrap();
    reported.unwrap_or_else(|| panic!("the migration ended before {after} copies"))
}

#[test]
fn migrates_from_dovecot_resumes_after_a_kill_and_copies_nothing_twice() {
    if !common::client_available("dovecot", "dovecot-imapd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    setup_account(&data, ACCOUNT, "dest pw");
    let node = Node::start(&data, &["--allow-plaintext-auth-on-loopback"], &[]);
    let dovecot = Dovecot::start(&dir.path().join("dovecot"));
    let out = dovecot.script(&["populate", &MESSAGES.to_string()]);
    assert!(out.contains(&format!("populated {}", MESSAGES + 2)), "{out}");
    let source = format!("127.0.0.1:{}", dovecot.port);
    let url = format!("imap://{USER}@{source}");

    // TLS is the default: this Dovecot offers no STARTTLS, so without
    // --plaintext-on-loopback nothing is sent (no LOGIN in clear).
    let out = feed_password(migrate_cmd(&node, &url, false).spawn().unwrap());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("does not offer STARTTLS"), "{e}");

    let reported = migrate_killed(&node, &url, KILL_AFTER);
    let second = migrate(&node, &url);
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    let (copied, skipped) = counts(&second);
    eprintln!("killed after {reported} reported copies; the rerun copied {copied}, skipped {skipped}");
    // The rerun read everything above the checkpoints, and skipped the
    // messages of the interrupted batch that were already stored.
    assert_eq!(copied + skipped, MESSAGES + 2 - CHECKPOINTED, "{copied} + {skipped}");
    assert!(
        skipped >= KILL_AFTER - CHECKPOINTED,
        "the kill landed inside a batch: {skipped}"
    );

    let want = dump(&source, USER, PASSWORD);
    let got = dump(node.addr("imap"), ACCOUNT, "dest pw");
    assert_eq!(want.as_object().unwrap().len(), 12, "the source's folder tree: {want}");
    assert_eq!(got, want, "meshmail differs from Dovecot after the migration");
    let total: usize = got
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_array().unwrap().len())
        .sum();
    assert_eq!(total, MESSAGES + 2);

    let third = migrate(&node, &url);
    assert!(third.status.success());
    assert_eq!(
        counts(&third),
        (0, 0),
        "a run with nothing new copies and reads nothing"
    );

    dovecot.script(&["add", "5", "new"]);
    let fourth = migrate(&node, &url);
    assert_eq!(counts(&fourth), (5, 0), "{}", String::from_utf8_lossy(&fourth.stdout));
    dovecot.script(&["recreate", "Work/Projects"]);
    let fifth = migrate(&node, &url);
    let text = String::from_utf8_lossy(&fifth.stdout).into_owned();
    assert!(text.contains("UIDVALIDITY changed"), "{text}");
    let (copied, skipped) = counts(&fifth);
    assert_eq!(copied, 0, "a new UIDVALIDITY copies nothing already there: {text}");
    assert!(skipped > 200, "{text}");
    assert_eq!(
        dump(node.addr("imap"), ACCOUNT, "dest pw"),
        dump(&source, USER, PASSWORD)
    );
}

#[test]
fn plaintext_is_refused_off_loopback_and_tls_is_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = meshmail(dir.path())
            .arg("migrate")
            .args(args)
            .args(["--account", ACCOUNT, "--password-stdin", "--node", "127.0.0.1:9"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["imap://u@192.0.2.1:143", "--plaintext-on-loopback"]);
    assert!(
        e.contains("plaintext IMAP is refused for 192.0.2.1 (192.0.2.1:143 is not a loopback address)"),
        "{e}"
    );
    let e = run(&["imaps://u@127.0.0.1", "--plaintext-on-loopback"]);
    assert!(e.contains("does not go with imaps://"), "{e}");
    let e = run(&["mail.example.org"]);
    assert!(e.contains("is not imap://USER@HOST[:PORT]"), "{e}");
}

/// TLS, the default, against meshmail's own listeners (its self-signed
/// certificate names `localhost`): implicit TLS on the IMAPS port and
/// STARTTLS on the IMAP port, verified against `--tls-ca`; without it the
/// certificate is refused. The source account holds `export_import.py`'s
/// messages (flags, keywords, dates, twins, an LF-only message).
#[test]
fn migrates_over_tls_and_starttls_and_refuses_an_unknown_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for user in ["src", "viatls", "viastarttls"] {
        setup_account(&data, &format!("{user}@example.org"), "pw");
    }
    let node = Node::start(&data, &["--allow-plaintext-auth-on-loopback"], &[]);
    let (host, port) = node.addr("imap").rsplit_once(':').unwrap();
    let (ok, out) = python_script("export_import.py", &["populate", host, port, "src@example.org", "pw"]);
    assert!(ok, "{out}");
    let ca = data.join("tls/self-signed.pem");
    let run = |scheme: &str, listener: &str, account: &str, ca: Option<&std::path::Path>| {
        let port = node.addr(listener).rsplit_once(':').unwrap().1;
        let mut cmd = meshmail(&data);
        cmd.args(["migrate", &format!("{scheme}://src@example.org@localhost:{port}")])
            .args(["--account", account, "--password-stdin", "--node", node.addr("http")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(ca) = ca {
            cmd.arg("--tls-ca").arg(ca);
        }
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"pw\n").unwrap();
        child.wait_with_output().unwrap()
    };
    let refused = run("imaps", "imaps", "viatls@example.org", None);
    let e = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && e.contains("UnknownIssuer"), "{e}");
    let want = dump(node.addr("imap"), "src@example.org", "pw");
    for (scheme, listener, account) in [
        ("imaps", "imaps", "viatls@example.org"),
        ("imap", "imap", "viastarttls@example.org"),
    ] {
        let out = run(scheme, listener, account, Some(&ca));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(counts(&out), (9, 0), "{}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(dump(node.addr("imap"), account, "pw"), want, "{scheme}");
    }
}
