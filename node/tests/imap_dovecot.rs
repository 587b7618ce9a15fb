//! IMAP answers compared with a reference server: the corpus under
//! `protocols/tests/corpus/` (320 varied messages) is APPENDed to meshmail
//! and to Dovecot (Debian's `dovecot-imapd`, started on loopback with a
//! throwaway config by `py/dovecot_peer.py`), and FETCH items and SEARCH
//! queries must agree except where `allowed-differences.txt` says, with
//! the RFC section, why meshmail is right.

mod common;

use std::process::Command;

use common::{Node, setup_account};

#[test]
fn fetch_and_search_agree_with_dovecot() {
    if !common::client_available("dovecot", "dovecot-imapd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (user, password) = ("diff@example.org", "differential secret");
    setup_account(dir.path(), user, password);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let corpus = format!("{}/../protocols/tests/corpus", env!("CARGO_MANIFEST_DIR"));
    let work = dir.path().join("dovecot-work");
    let out = Command::new("python3")
        .arg(format!("{}/tests/py/imap_differential.py", env!("CARGO_MANIFEST_DIR")))
        .args([node.addr("imap"), user, password, &corpus])
        .arg(format!("{corpus}/allowed-differences.txt"))
        .arg(&work)
        .output()
        .expect("python3");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(
        text.contains("differential: 320 messages"),
        "the run compared the whole corpus"
    );
    assert!(
        out.status.success(),
        "meshmail and Dovecot disagree (see the DIFF lines)"
    );
}
