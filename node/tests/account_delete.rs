//! `meshmail account delete` against a running node, as an operator uses
//! it: the account's mail, mailboxes and token go, mail to it is refused
//! and its login fails at once, its neighbour is untouched, the ledger
//! verifies, and the address can be created again, empty.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Node, inbox_count, meshmail, run_ok, setup_account, smtp_rcpt, smtp_send, wait_for};

fn imap_login_fails(imap: &str, user: &str, password: &str) -> bool {
    let (host, port) = imap.rsplit_once(':').unwrap();
    let out = Command::new("python3")
        .args(["-c", &format!(
            "import imaplib\nc=imaplib.IMAP4('{host}',{port})\ntry:\n c.login('{user}','{password}')\n print('ok')\nexcept imaplib.IMAP4.error:\n print('refused')"
        )])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "refused"
}

#[test]
fn a_deleted_account_is_gone_and_its_neighbour_stays() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), "alice@example.org", "pw-alice");
    setup_account(dir.path(), "bob@example.org", "pw-bob");
    run_ok(
        meshmail(dir.path()).args(["token", "create", "alice@example.org"]),
        None,
    );
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (smtp, imap) = (node.addr("smtp").to_string(), node.addr("imap").to_string());
    for (i, to) in [
        "alice@example.org",
        "alice@example.org",
        "alice@example.org",
        "bob@example.org",
    ]
    .iter()
    .enumerate()
    {
        let data = format!("Subject: m{i}\r\nMessage-ID: <m{i}@example.net>\r\n\r\nbody {i}\r\n");
        let (code, text) = smtp_send(&smtp, "sender@example.net", to, &data);
        assert_eq!(code, 250, "{text}");
    }
    assert_eq!(inbox_count(&imap, "alice@example.org", "pw-alice"), 3);

    let refused = meshmail(dir.path())
        .args(["account", "delete", "alice@example.org"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    assert_eq!(
        inbox_count(&imap, "alice@example.org", "pw-alice"),
        3,
        "nothing went without --yes"
    );

    let out = run_ok(
        meshmail(dir.path()).args(["account", "delete", "alice@example.org", "--yes"]),
        None,
    );
    assert!(out.contains("deleted account alice@example.org"), "{out}");
    assert!(out.contains(": 3 messages, 6 mailboxes, 1 tokens"), "{out}");

    wait_for(
        "RCPT to the deleted address to be refused",
        Duration::from_secs(10),
        || smtp_rcpt(&smtp, "sender@example.net", "alice@example.org").0 == 550,
    );
    assert!(imap_login_fails(&imap, "alice@example.org", "pw-alice"));
    assert_eq!(inbox_count(&imap, "bob@example.org", "pw-bob"), 1);
    let list = run_ok(meshmail(dir.path()).args(["account", "list"]), None);
    assert!(!list.contains("alice@"), "{list}");
    let verify = run_ok(meshmail(dir.path()).args(["verify", "ledger"]), None);
    assert!(verify.contains("expunged:       3"), "{verify}");
    assert!(verify.contains("discrepancies:  0"), "{verify}");

    let again = meshmail(dir.path())
        .args(["account", "delete", "alice@example.org", "--yes"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no such account"));

    // The address again: a new, empty account.
    setup_account(dir.path(), "alice@example.org", "pw-new");
    assert_eq!(inbox_count(&imap, "alice@example.org", "pw-new"), 0);
}
