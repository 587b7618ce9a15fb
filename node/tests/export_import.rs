//! `meshmail export` and `meshmail import` (issue 42 item 3), as an
//! operator runs them against a running node: messages delivered over
//! SMTP and APPENDed over IMAP (imaplib) into nested folders with flags,
//! keywords and dates; exported as maildir and as mbox; imported into
//! fresh accounts, which IMAP then shows with the same folders, FLAGS,
//! INTERNALDATE and BODY[] hashes; a second import adds nothing; an export
//! of the imported account has the same bytes; and bad input (a truncated
//! mbox, a folder name that is not UTF-8, a message over the size limit, a
//! message without a header) is reported message by message while the
//! rest goes in.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use common::{Node, meshmail, python_script, run_ok, setup_account, smtp_send};
use meshmail_storage::blob::content_hash;

/// Every folder with its messages' (BODY[] hash, FLAGS, INTERNALDATE), as
/// IMAP shows them (see py/export_import.py).
fn imap_dump(imap: &str, user: &str, password: &str) -> String {
    let (host, port) = imap.rsplit_once(':').unwrap();
    let (ok, out) = python_script("export_import.py", &["dump", host, port, user, password]);
    assert!(ok, "{out}");
    out.lines().last().unwrap().to_string()
}

fn import(node: &Node, account: &str, dir: &Path) -> Output {
    meshmail(&node.data_dir)
        .args(["import", account])
        .arg(dir)
        .args(["--node", node.addr("http")])
        .output()
        .unwrap()
}

fn export(data_dir: &Path, account: &str, format: &str, dir: &Path) -> String {
    run_ok(
        meshmail(data_dir)
            .args(["export", account, "--format", format])
            .arg(dir),
        None,
    )
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every message file under `dir` (maildir `cur/` and `new/`): its
/// folder directory and flags (the name's info part), its bytes' hash.
fn maildir_hashes(dir: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if d.ends_with("cur") || d.ends_with("new") {
                let folder = d.parent().unwrap().strip_prefix(dir).unwrap().display().to_string();
                let info = name.rsplit_once(':').map(|(_, i)| i.to_string()).unwrap_or_default();
                out.entry(folder)
                    .or_default()
                    .push((content_hash(&std::fs::read(&p).unwrap()), info));
            }
        }
    }
    out.values_mut().for_each(|v| v.sort());
    out
}

/// Every file under `dir` by its path and hash (mbox exports).
fn file_hashes(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, content_hash(&std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

const MESSAGES: usize = 12;
const FOLDERS: usize = 10;

#[test]
fn a_round_trip_keeps_folders_flags_dates_and_bytes_and_a_rerun_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for user in ["alice", "bob", "carol", "dave"] {
        setup_account(&data, &format!("{user}@example.org"), "pw");
    }
    let node = Node::start(&data, &["--allow-plaintext-auth-on-loopback"], &[]);
    let imap = node.addr("imap").to_string();
    for i in 0..3 {
        let msg =
            format!("From: s@example.net\r\nSubject: smtp {i}\r\nMessage-ID: <s{i}@example.net>\r\n\r\nhello {i}\r\n");
        let (code, reply) = smtp_send(node.addr("smtp"), "s@example.net", "alice@example.org", &msg);
        assert_eq!(code, 250, "{reply}");
    }
    let (host, port) = imap.rsplit_once(':').unwrap();
    let (ok, out) = python_script("export_import.py", &["populate", host, port, "alice@example.org", "pw"]);
    assert!(ok, "{out}");
    let alice = imap_dump(&imap, "alice@example.org", "pw");
    assert!(alice.contains("\\\\Deleted") && alice.contains("$Label1"), "{alice}");

    let (maildir, mbox) = (dir.path().join("alice.maildir"), dir.path().join("alice.mbox"));
    let out = export(&data, "alice@example.org", "maildir", &maildir);
    assert!(out.contains(&format!("exported {MESSAGES} messages")), "{out}");
    let out = export(&data, "alice@example.org", "mbox", &mbox);
    assert!(out.contains(&format!("exported {MESSAGES} messages")), "{out}");

    let first = format!("imported {MESSAGES} messages into {FOLDERS} folders, 0 skipped (already present), 0 errors");
    for (account, source) in [("bob@example.org", &maildir), ("carol@example.org", &mbox)] {
        let got = import(&node, account, source);
        let (stdout, stderr) = text(&got);
        assert!(got.status.success() && stdout.contains(&first), "{stdout}{stderr}");
        assert_eq!(
            imap_dump(&imap, account, "pw"),
            alice,
            "{account} from {}",
            source.display()
        );
    }

    // Run twice: nothing is duplicated, the twins in Work/Projects stay two.
    let again = format!("imported 0 messages into {FOLDERS} folders, {MESSAGES} skipped (already present), 0 errors");
    for (account, source) in [("bob@example.org", &maildir), ("carol@example.org", &mbox)] {
        let (stdout, stderr) = text(&import(&node, account, source));
        assert!(stdout.contains(&again), "{stdout}{stderr}");
        assert_eq!(imap_dump(&imap, account, "pw"), alice);
    }

    // Export again: the same bytes (maildir: per folder, with the same
    // flags; mbox: the same files, From lines and status fields included).
    let (maildir2, mbox2) = (dir.path().join("bob.maildir"), dir.path().join("carol.mbox"));
    export(&data, "bob@example.org", "maildir", &maildir2);
    export(&data, "carol@example.org", "mbox", &mbox2);
    assert_eq!(maildir_hashes(&maildir2), maildir_hashes(&maildir));
    assert_eq!(file_hashes(&mbox2), file_hashes(&mbox));
    assert_eq!(maildir_hashes(&maildir).values().map(Vec::len).sum::<usize>(), MESSAGES);

    // A folder of .eml files (the maildir's message files, renamed).
    let eml = dir.path().join("eml");
    std::fs::create_dir_all(&eml).unwrap();
    for (i, e) in std::fs::read_dir(maildir.join("cur")).unwrap().enumerate() {
        std::fs::copy(e.unwrap().path(), eml.join(format!("{i}.eml"))).unwrap();
    }
    let (stdout, stderr) = text(&import(&node, "dave@example.org", &eml));
    assert!(
        stdout.contains("imported 5 messages into 1 folders, 0 skipped"),
        "{stdout}{stderr}"
    );

    let verify = run_ok(meshmail(&data).args(["verify", "ledger"]), None);
    assert!(verify.contains("discrepancies:  0"), "{verify}");
}

/// A maildir tree with one good message per folder and the bad cases.
fn bad_maildir(root: &Path) {
    use std::os::unix::ffi::OsStrExt;
    for sub in ["cur", "Good/cur"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("cur/1.a.host:2,S"), "Subject: fine\r\n\r\nfine\r\n").unwrap();
    std::fs::write(root.join("cur/2.b.host:2,"), "no header at all, just text\r\n").unwrap();
    let mut big = b"Subject: sixty megabytes\r\n\r\n".to_vec();
    big.resize(60 * 1024 * 1024, b'x');
    std::fs::write(root.join("cur/3.c.host:2,"), big).unwrap();
    std::fs::write(root.join("Good/cur/4.d.host:2,F"), "Subject: good\r\n\r\ngood\r\n").unwrap();
    let bad = root.join(std::ffi::OsStr::from_bytes(b"Caf\xe9")).join("cur");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("5.e.host:2,"), "Subject: lost folder\r\n\r\nx\r\n").unwrap();
}

#[test]
fn bad_input_is_an_error_for_that_message_and_the_rest_goes_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    setup_account(&data, "erin@example.org", "pw");
    let node = Node::start(&data, &["--allow-plaintext-auth-on-loopback"], &[]);

    let tree = dir.path().join("tree");
    bad_maildir(&tree);
    let got = import(&node, "erin@example.org", &tree);
    let (stdout, stderr) = text(&got);
    assert!(!got.status.success(), "errors make the exit status 1");
    assert!(
        stdout.contains("imported 2 messages into 2 folders, 0 skipped (already present), 3 errors"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("has no header fields"), "{stderr}");
    assert!(
        stderr.contains("62914560 bytes, over the limit of 52428800 bytes"),
        "{stderr}"
    );
    assert!(
        stderr.contains("folder name is not UTF-8 (\"Caf\u{fffd}\")"),
        "{stderr}"
    );

    // An mbox cut in the middle of its last message.
    let mbox = dir.path().join("cut.mbox");
    std::fs::write(
        &mbox,
        "From a Thu Jan  1 00:00:01 1970\nSubject: one\n\n1\n\nFrom b Thu Jan  1 00:00:02 1970\nSubject: two\n\n2\n\n\
         From c Thu Jan  1 00:00:03 1970\nSubject: three\n\nthe file ends in the mid",
    )
    .unwrap();
    let got = import(&node, "erin@example.org", &mbox);
    let (stdout, stderr) = text(&got);
    assert!(
        stdout.contains("imported 2 messages into 1 folders, 0 skipped (already present), 1 errors"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("message 3 is cut short"), "{stderr}");

    let dump = imap_dump(node.addr("imap"), "erin@example.org", "pw");
    let folders: serde_json::Value = serde_json::from_str(&dump).unwrap();
    assert_eq!(folders["INBOX"].as_array().unwrap().len(), 3, "{dump}");
    assert_eq!(folders["Good"].as_array().unwrap().len(), 1, "{dump}");
    assert_eq!(folders["Good"][0][1], serde_json::json!(["\\Flagged"]), "{dump}");
}
