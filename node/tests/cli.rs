//! The binary as a newcomer meets it: admin commands against the embedded
//! default, and `serve` over a real socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

fn meshmail(data_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meshmail"));
    cmd.arg("--data-dir").arg(data_dir).env("MESHMAIL_LOG", "warn");
    cmd
}

fn run_ok(cmd: &mut Command, stdin: Option<&str>) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Starts `serve` on port 0 and waits for its ready line (never sleeps).
fn serve(data_dir: &std::path::Path) -> (Child, String) {
    let mut child = meshmail(data_dir)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("ready line").unwrap();
    assert!(ready.starts_with("meshmail ready:"), "{ready}");
    let http = ready.rsplit("http=").next().unwrap().to_string();
    (child, http)
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn accounts_survive_a_restart_and_serve_answers() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(meshmail(dir.path()).args(["domain", "add", "Example.org"]), None);
    let out = run_ok(
        meshmail(dir.path()).args(["account", "add", "alice@example.org", "--password-stdin"]),
        Some("s3cret\n"),
    );
    assert!(out.contains("added account alice@example.org"), "{out}");

    let (mut node, http) = serve(dir.path());
    assert!(http_get(&http, "/health").contains("200 OK"));
    let status = http_get(&http, "/status");
    assert!(status.contains("\"generation\":1"), "{status}");
    assert!(http_get(&http, "/metrics").contains("meshmail_node_generation"));
    node.kill().unwrap();
    node.wait().unwrap();

    // After the node is gone (killed, not stopped), the account is still there.
    let list = run_ok(meshmail(dir.path()).args(["account", "list"]), None);
    assert!(list.contains("alice@example.org"), "{list}");
    let (mut node, http) = serve(dir.path());
    assert!(
        http_get(&http, "/status").contains("\"generation\":2"),
        "generation grows per start"
    );
    node.kill().unwrap();
    node.wait().unwrap();
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
