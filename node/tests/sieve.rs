//! Sieve at delivery (issue 43), end to end: scripts installed with
//! `meshmail sieve put … --activate`, mail sent over SMTP, the result
//! read back over IMAP (imaplib): fileinto :create with addflag, discard,
//! reject (550 5.7.1 at DATA), redirect to another local account, and a
//! script that fails at run time delivering to INBOX.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Node, meshmail, run_ok, setup_account, smtp_send};

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";
const PW: &str = "secret";

const SORTING: &str = r#"require ["fileinto", "imap4flags", "reject", "mailbox"];
if header :contains "subject" "report" {
    addflag "\\Flagged";
    fileinto :create "Reports";
    stop;
}
if header :contains "subject" "spam" { discard; stop; }
if header :contains "subject" "nope" { reject "not wanted here"; stop; }
if header :contains "subject" "forward" { redirect "bob@example.test"; }
"#;

/// A script that compiles but fails at every run: the include is missing.
const BROKEN: &str = "require \"include\";\ninclude \"missing\";\n";

/// (message count, FLAGS of each message) of `user`'s `mailbox` over IMAP.
fn mailbox(imap: &str, user: &str, mailbox: &str) -> (usize, String) {
    let (host, port) = imap.rsplit_once(':').unwrap();
    let script = format!(
        "import imaplib\n\
         c = imaplib.IMAP4('{host}', {port})\n\
         c.login('{user}', '{PW}')\n\
         typ, data = c.select('\"{mailbox}\"')\n\
         if typ != 'OK':\n    print('0 -'); raise SystemExit\n\
         n = int(data[0])\n\
         flags = c.fetch('1:*', '(FLAGS)')[1] if n else []\n\
         print(n, ' '.join(f.decode() for f in flags) or '-')\n"
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (n, flags) = text.trim().split_once(' ').unwrap();
    (n.parse().unwrap(), flags.to_string())
}

fn put(dir: &Path, name: &str, source: &str, activate: bool) -> std::process::Output {
    put_for(dir, ALICE, name, source, activate)
}

fn put_for(dir: &Path, account: &str, name: &str, source: &str, activate: bool) -> std::process::Output {
    let file = dir.join(format!("{name}.sieve"));
    std::fs::write(&file, source).unwrap();
    let mut cmd = meshmail(dir);
    cmd.args(["sieve", "put", account, name, file.to_str().unwrap()]);
    if activate {
        cmd.arg("--activate");
    }
    cmd.output().unwrap()
}

fn mail(subject: &str) -> String {
    format!(
        "From: {BOB}\r\nTo: {ALICE}\r\nSubject: {subject}\r\nMessage-ID: <{}@example.test>\r\n\r\nHello.\r\n",
        subject.replace(' ', ".")
    )
}

#[test]
fn the_active_script_sorts_discards_rejects_redirects_and_falls_back_to_inbox() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    // A syntax error is refused with FILE:line:column and stores nothing.
    let bad = put(dir.path(), "bad", "require \"fileinto\";\nfileinto \"x\"\n", true);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(err.contains("bad.sieve:2:10: expected"), "{err}");
    let out = put(dir.path(), "sorting", SORTING, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list = run_ok(meshmail(dir.path()).args(["sieve", "list", ALICE]), None);
    assert!(list.contains("* sorting"), "{list}");
    assert!(!list.contains("bad"), "{list}");

    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (smtp, imap) = (node.addr("smtp"), node.addr("imap"));
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("monthly report")).0, 250);
    let (n, flags) = mailbox(imap, ALICE, "Reports");
    assert_eq!(n, 1, "fileinto :create made Reports and filed into it");
    assert!(flags.contains("\\Flagged"), "{flags}");
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 0);

    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("spam offer")).0, 250);
    let (code, text) = smtp_send(smtp, BOB, ALICE, &mail("nope"));
    assert_eq!(code, 550, "{text}");
    assert!(text.contains("5.7.1") && text.contains("not wanted here"), "{text}");
    assert_eq!(
        mailbox(imap, ALICE, "INBOX").0,
        0,
        "discarded and rejected: stored nowhere"
    );

    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("forward this")).0, 250);
    assert_eq!(mailbox(imap, BOB, "INBOX").0, 1, "redirected to Bob");
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 0, "redirect cancels the implicit keep");
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("hello")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 1, "implicit keep");

    // A script failing at run time: the message is kept in INBOX.
    let out = put(dir.path(), "broken", BROKEN, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("spam again")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 2);
    let metrics = common::http_get(node.addr("http"), "/metrics");
    assert_eq!(
        common::metric_in(&metrics, "meshmail_sieve_errors_total{kind=\"include\"}"),
        1.0
    );
    assert_eq!(
        common::metric_in(&metrics, "meshmail_sieve_actions_total{action=\"discard\"}"),
        1.0
    );
    // Two scripts ran over six deliveries: each was compiled once.
    assert_eq!(
        common::metric_in(&metrics, "meshmail_sieve_compiles_total{result=\"compiled\"}"),
        2.0
    );
}

/// The header fields of `user`'s INBOX messages, over IMAP.
fn inbox_headers(imap: &str, user: &str) -> String {
    let (host, port) = imap.rsplit_once(':').unwrap();
    let script = format!(
        "import imaplib\n\
         c = imaplib.IMAP4('{host}', {port})\n\
         c.login('{user}', '{PW}')\n\
         n = int(c.select('INBOX')[1][0])\n\
         for item in (c.fetch('1:*', '(BODY.PEEK[HEADER])')[1] if n else []):\n    \
             print(item[1].decode() if isinstance(item, tuple) else '')\n"
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn redirect_loops_end_duplicates_are_remembered_and_edited_headers_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let alice = r#"require ["duplicate", "editheader"];
if duplicate { discard; stop; }
addheader "X-Sorted" "by alice";
if header :contains "subject" "forward" { redirect "bob@example.test"; }
"#;
    let bob = "redirect \"alice@example.test\";\n";
    for (account, source) in [(ALICE, alice), (BOB, bob)] {
        let out = put_for(dir.path(), account, "main", source, true);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (smtp, imap) = (node.addr("smtp"), node.addr("imap"));
    // Alice -> Bob -> Alice: the copy carrying Alice's loop header is kept.
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("forward me")).0, 250);
    assert_eq!(mailbox(imap, BOB, "INBOX").0, 0, "Bob redirected it on");
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 1, "back at Alice, kept");
    let headers = inbox_headers(imap, ALICE);
    assert!(
        headers.contains("X-Meshmail-Sieve-Loop: alice@example.test"),
        "{headers}"
    );
    assert!(headers.contains("X-Meshmail-Sieve-Loop: bob@example.test"), "{headers}");
    assert!(
        headers.contains("X-Sorted: by alice"),
        "the edited message is stored: {headers}"
    );

    // The same Message-ID again: the duplicate test saw it (recorded at the
    // first delivery) and discards it.
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("hello")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 2);
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("hello")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 2, "a duplicate is discarded");
}

#[test]
fn a_vacation_action_answers_once_per_period_from_an_allowed_address() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let script =
        "require \"vacation\";\nvacation :days 1 :from \"mallory@elsewhere.test\" :subject \"Away\" \"Back soon.\";\n";
    let out = put(dir.path(), "away", script, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (smtp, imap) = (node.addr("smtp"), node.addr("imap"));
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("question one")).0, 250);
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("question two")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 2, "vacation keeps the message");
    assert_eq!(mailbox(imap, BOB, "INBOX").0, 1, "one reply per period");
    let headers = inbox_headers(imap, BOB);
    assert!(headers.contains("Subject: Away"), "{headers}");
    assert!(headers.contains("Auto-Submitted: auto-replied"), "{headers}");
    assert!(
        headers.contains("From: <alice@example.test>") || headers.contains("From: alice@example.test"),
        "a :from the account may not use is replaced by its own: {headers}"
    );
}

/// `mailboxexists` and `fileinto` are answered from the store at each
/// delivery (by name, not from a list read once): a folder created over
/// IMAP between two deliveries changes the next one's outcome, and a
/// `fileinto` without `:create` to a missing folder keeps in INBOX.
#[test]
fn mailbox_tests_see_folders_created_between_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let script = "require [\"fileinto\", \"mailbox\", \"imap4flags\"];\n\
        if mailboxexists [\"Clients\", \"Projects\"] { fileinto \"Projects\"; stop; }\n\
        if header :contains \"subject\" \"plain\" { fileinto \"Elsewhere\"; stop; }\n\
        addflag \"\\\\Flagged\";\n";
    let out = put(dir.path(), "exists", script, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (smtp, imap) = (node.addr("smtp"), node.addr("imap"));
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("first")).0, 250);
    let (n, flags) = mailbox(imap, ALICE, "INBOX");
    assert_eq!(n, 1, "no Projects yet: kept");
    assert!(flags.contains("\\Flagged"), "{flags}");
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("plain")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 2, "fileinto a missing folder keeps");

    let (host, port) = imap.rsplit_once(':').unwrap();
    let create = format!(
        "import imaplib\nc = imaplib.IMAP4('{host}', {port})\nc.login('{ALICE}', '{PW}')\n\
         for m in ('Clients', 'Projects'):\n    assert c.create(m)[0] == 'OK'\n"
    );
    let out = Command::new("python3").args(["-c", &create]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(smtp_send(smtp, BOB, ALICE, &mail("second")).0, 250);
    assert_eq!(mailbox(imap, ALICE, "Projects").0, 1, "both folders exist now");
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 2);
}

/// An account with no active script costs its deliveries no Sieve read:
/// RCPT learned it (and its cache keeps it until the directory changes),
/// so delivery neither reads the active record nor runs anything. Once a
/// script is activated, the next delivery through the node runs it.
#[test]
fn accounts_without_a_script_cost_no_sieve_read() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (smtp, imap) = (node.addr("smtp"), node.addr("imap"));
    for i in 0..3 {
        assert_eq!(smtp_send(smtp, BOB, ALICE, &mail(&format!("plain {i}"))).0, 250);
    }
    assert_eq!(mailbox(imap, ALICE, "INBOX").0, 3);
    let metrics = common::http_get(node.addr("http"), "/metrics");
    let reads = common::metric_in(&metrics, "meshmail_kv_txn_seconds_count{op=\"sieve_active\"}");
    assert_eq!(reads, 0.0, "deliveries read the active script's record");

    let out = put(dir.path(), "sorting", SORTING, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The admin command is another process: this node sees the change
    // when its RCPT cache next reads the directory version (250 ms).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut subject = 0;
    while mailbox(imap, ALICE, "Reports").0 == 0 {
        assert!(std::time::Instant::now() < deadline, "the activated script never ran");
        subject += 1;
        assert_eq!(smtp_send(smtp, BOB, ALICE, &mail(&format!("report {subject}"))).0, 250);
    }
}
