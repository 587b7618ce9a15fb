//! IMAP over real sockets: Python's imaplib suite, the IDLE push latency,
//! and a real client (mbsync) round trip with 1,000 varied messages.

mod common;

use common::{Node, setup_account};

const PASSWORD: &str = "imap secret";

fn node(dir: &std::path::Path, user: &str) -> Node {
    setup_account(dir, user, PASSWORD);
    Node::start(dir, &["--allow-plaintext-auth-on-loopback"], &[])
}

fn python(script: &str, args: &[&str]) -> String {
    let (ok, text) = common::python_script(script, args);
    assert!(ok, "{script} failed");
    text
}

#[test]
fn imaplib_suite() {
    let dir = tempfile::tempdir().unwrap();
    let user = "ivy@example.org";
    let n = node(dir.path(), user);
    python("imap_suite.py", &[n.addr("smtp"), n.addr("imap"), user, PASSWORD]);
    let verify = common::meshmail(dir.path())
        .args(["verify", "ledger"])
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}

#[test]
fn idle_push_latency_over_1000_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let user = "idle@example.org";
    let n = node(dir.path(), user);
    let out = python(
        "idle_latency.py",
        &[n.addr("smtp"), n.addr("imap"), user, PASSWORD, "1000"],
    );
    assert!(out.contains("idle push: 1000 deliveries"), "{out}");
    let metrics = common::http_get(n.addr("http"), "/metrics");
    assert!(
        metrics.contains("meshmail_imap_idle_push_seconds_count"),
        "server-side push histogram exported"
    );
}

#[test]
fn mbsync_round_trip_with_1000_varied_messages() {
    if !common::client_available("mbsync", "isync") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let user = "sync@example.org";
    let n = node(dir.path(), user);
    let out = python(
        "mbsync_roundtrip.py",
        &[
            n.addr("smtp"),
            n.addr("imap"),
            user,
            PASSWORD,
            work.path().to_str().unwrap(),
            "1000",
        ],
    );
    assert!(out.contains("bytes identical"), "{out}");
    assert!(out.contains("synced back"), "{out}");
}
