//! IMAP answers compared with a reference server: the corpus under
//! `protocols/tests/corpus/` (353 varied messages, 24 of them reply chains
//! for THREAD) is APPENDed to meshmail and to Dovecot (Debian's
//! `dovecot-imapd`, started on loopback with a throwaway config by
//! `py/dovecot_peer.py`), and FETCH items, SEARCH queries, SORT and THREAD
//! answers must agree except where `allowed-differences.txt` says, with the
//! RFC section, why meshmail is right. The session phases (which commands
//! each state accepts) are compared the same way (`py/imap_phases.py`).

mod common;

use common::{Node, setup_account};

/// A node with `user`'s account, and a work directory for the Dovecot
/// peer the script starts; None (skipped) when Dovecot is not installed.
fn with_dovecot(user: &str, password: &str) -> Option<(tempfile::TempDir, Node, String)> {
    if !common::client_available("dovecot", "dovecot-imapd") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), user, password);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let work = dir.path().join("dovecot-work").to_string_lossy().into_owned();
    Some((dir, node, work))
}

#[test]
fn fetch_and_search_agree_with_dovecot() {
    let (user, password) = ("diff@example.org", "differential secret");
    let Some((_dir, node, work)) = with_dovecot(user, password) else {
        return;
    };
    let corpus = format!("{}/../protocols/tests/corpus", env!("CARGO_MANIFEST_DIR"));
    let allowed = format!("{corpus}/allowed-differences.txt");
    let (ok, text) = common::python_script(
        "imap_differential.py",
        &[node.addr("imap"), user, password, &corpus, &allowed, &work],
    );
    assert!(
        text.contains("differential: 353 messages"),
        "the run compared the whole corpus"
    );
    assert!(ok, "meshmail and Dovecot disagree (see the DIFF lines)");
}

#[test]
fn session_phases_agree_with_dovecot() {
    let (user, password) = ("phases@example.org", "phases secret");
    let Some((_dir, node, work)) = with_dovecot(user, password) else {
        return;
    };
    let (ok, text) = common::python_script("imap_phases.py", &[node.addr("imap"), user, password, &work]);
    assert!(text.contains("phases: "), "the script ran: {text}");
    assert!(ok, "a command was accepted or refused in the wrong phase:\n{text}");
}
