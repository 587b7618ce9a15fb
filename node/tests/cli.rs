//! The binary as a newcomer meets it: admin commands against the embedded
//! default, and `serve` over a real socket.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{Node, http_get, meshmail, run_ok};

#[test]
fn accounts_survive_a_restart_and_serve_answers() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(meshmail(dir.path()).args(["domain", "add", "Example.org"]), None);
    let out = run_ok(
        meshmail(dir.path()).args(["account", "add", "alice@example.org", "--password-stdin"]),
        Some("s3cret\n"),
    );
    assert!(out.contains("added account alice@example.org"), "{out}");

    let mut node = Node::start(dir.path(), &[], &[]);
    let http = node.addr("http").to_string();
    assert!(http_get(&http, "/health").contains("200 OK"));
    let status = http_get(&http, "/status");
    assert!(status.contains("\"generation\":1"), "{status}");
    assert!(http_get(&http, "/metrics").contains("meshmail_node_generation"));
    node.kill();

    // After the node is gone (killed, not stopped), the account is still there.
    let list = run_ok(meshmail(dir.path()).args(["account", "list"]), None);
    assert!(list.contains("alice@example.org"), "{list}");
    let node = Node::start(dir.path(), &[], &[]);
    assert!(
        http_get(node.addr("http"), "/status").contains("\"generation\":2"),
        "generation grows per start"
    );
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = meshmail(dir.path())
        .args(["account", "add", "bob@nowhere.example", "--password-stdin"])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = meshmail(dir.path())
        .args(["account", "add", "bob@example.org"])
        .output()
        .unwrap();
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("--password-stdin"));
    let mut child = meshmail(dir.path())
        .args(["account", "add", "bob@nowhere.example", "--password-stdin"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"pw\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("domain nowhere.example"));
}
