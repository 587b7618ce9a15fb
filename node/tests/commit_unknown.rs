//! `commit_unknown_result` (FDB's 1021: the commit may or may not have
//! applied) never turns one acceptance into two stored messages. The
//! node's fault endpoint makes the store's next commits apply and then
//! report an unknown outcome, through the backend's own hook (SQLite in
//! the default pass; FoundationDB's, compiled with `fault-hooks`, in the
//! FDB pass); mail sent meanwhile is answered 250 once each, stored once
//! each, and the ledger holds one acceptance each.

mod common;

use common::{Node, http_post, metric_in, run_ok, setup_account, smtp_send};

const USER: &str = "once@example.org";
const MESSAGES: usize = 5;

#[test]
fn an_unknown_commit_outcome_stores_each_message_once() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, "pw");
    let node = Node::start(
        dir.path(),
        &["--allow-plaintext-auth-on-loopback"],
        &[("MESHMAIL_FAULT_HOOKS", "1")],
    );
    // Enough that every delivery's commit meets it, whatever background
    // commits (leases, signs of life) take first.
    let (code, body) = http_post(node.addr("http"), "/admin/faults/commit-unknown?n=200");
    assert_eq!(code, 200, "{body}");
    for i in 0..MESSAGES {
        let (code, text) = smtp_send(
            node.addr("smtp"),
            "a@example.net",
            USER,
            &format!("Subject: once {i}\r\n\r\nbody {i}\r\n"),
        );
        assert_eq!(code, 250, "message {i}: {text}");
    }
    let metrics = common::http_get(node.addr("http"), "/metrics");
    let unknown = metric_in(
        &metrics,
        "meshmail_kv_retries_total{op=\"deliver_batch\",reason=\"commit_unknown\"}",
    );
    assert!(unknown >= 1.0, "no delivery met the unknown outcome:\n{metrics}");
    assert_eq!(
        common::inbox_count(node.addr("imap"), USER, "pw"),
        MESSAGES,
        "each message stored once"
    );
    let report = run_ok(common::meshmail(dir.path()).args(["verify", "ledger"]), None);
    assert!(report.contains(&format!("ledger entries: {MESSAGES}")), "{report}");
    assert!(report.contains(&format!("delivered:      {MESSAGES}")), "{report}");
}
