//! Concurrent IMAP state tracking: 20 sessions share two mailboxes of one
//! account for 30 s of random STORE/EXPUNGE/APPEND/FETCH/COPY, each checked
//! the way a state-tracking client sees it (`py/imap_state_stress.py`).
//! The second test runs the same checker against a node whose sessions
//! leave out the untagged FLAGS for new keywords (a test-only fault hook)
//! and requires it to go red: the checker can fail.

mod common;

use common::{Node, setup_account};

const PASSWORD: &str = "state secret";

fn stress(env: &[(&str, &str)], sessions: &str, seconds: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let user = "state@example.org";
    setup_account(dir.path(), user, PASSWORD);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], env);
    common::python_script(
        "imap_state_stress.py",
        &[node.addr("imap"), user, PASSWORD, sessions, seconds],
    )
}

#[test]
fn twenty_sessions_on_shared_mailboxes_see_a_consistent_state() {
    let (ok, text) = stress(&[], "20", "30");
    assert!(text.contains("state stress: 20 sessions"), "the run finished");
    assert!(ok, "state-tracking errors (see ERROR lines)");
}

#[test]
fn the_checker_catches_a_missing_untagged_flags() {
    let (ok, text) = stress(
        &[
            ("MESHMAIL_FAULT_HOOKS", "1"),
            ("MESHMAIL_FAULT_IMAP", "no-flags-update"),
        ],
        "8",
        "8",
    );
    assert!(!ok, "the checker must fail when FLAGS updates are suppressed");
    assert!(text.contains("never announced by FLAGS"), "{text}");
}
