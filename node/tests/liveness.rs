//! Honest liveness and one cluster truth: a node whose root supervisor dies
//! exits non-zero instead of answering without actors; `/health` (alive)
//! and `/ready` (serving) are separate; a node configured with another
//! shard count than the cluster's refuses to start; a build refuses a store
//! that a newer build's format has marked, and a running node stops once
//! one does.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{LISTENERS_ON_PORT_0, Node, http_get, meshmail, write_config};

/// Kills a supervisor through the fault endpoint and waits (bounded) for
/// the node to exit non-zero.
fn killed_supervisor_takes_the_node_down(path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::start(dir.path(), &[], &[("MESHMAIL_FAULT_HOOKS", "1")]);
    let http = node.addr("http").to_string();
    assert!(http_get(&http, "/health").contains("200 OK"));
    let ready = http_get(&http, "/ready");
    assert!(ready.contains("200 OK") && ready.contains("ready"), "{ready}");

    let (code, killed) = common::http_post(&http, path);
    assert_eq!(code, 200, "{killed}");
    let status = exit_within(&mut node, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the node must exit once a vital supervisor is gone ({path})"));
    assert!(
        !status.success(),
        "crash-only: the exit status says it failed ({status})"
    );
}

/// Waits (bounded, on another thread: no sleeping poll) for the node to
/// exit; None (and the node killed) if it is still running after `limit`.
fn exit_within(node: &mut Node, limit: Duration) -> Option<std::process::ExitStatus> {
    let mut child = std::mem::replace(&mut node.child, std::process::Command::new("true").spawn().unwrap());
    let pid = child.id().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(limit) {
        Ok(status) => Some(status.unwrap()),
        Err(_) => {
            let _ = std::process::Command::new("kill").args(["-9", &pid]).status();
            None
        }
    }
}

#[test]
fn a_dead_root_supervisor_takes_the_node_down_non_zero() {
    killed_supervisor_takes_the_node_down("/admin/faults/kill-supervisor");
}

#[test]
fn a_dead_outbound_runner_supervisor_takes_the_node_down_non_zero() {
    killed_supervisor_takes_the_node_down("/admin/faults/kill-supervisor?which=outbound");
}

/// Runs `serve` on `data_dir` (with `global` arguments before it), which
/// must refuse to start: exits non-zero before its ready line. Its stderr.
fn refused_serve(data_dir: &std::path::Path, global: &[&str]) -> String {
    let mut child = meshmail(data_dir)
        .args(global)
        .arg("serve")
        .args(LISTENERS_ON_PORT_0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first stdout line would be the ready line if it (wrongly) started.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first_line = String::new();
    stdout.read_line(&mut first_line).unwrap();
    if first_line.starts_with("meshmail ready:") {
        let _ = child.kill();
        panic!("the node started: {first_line}");
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "the node must not start: {stderr}");
    stderr
}

#[test]
fn a_node_with_another_shard_count_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    // The first start fixes the cluster's count (the default, 1024).
    let mut first = Node::start(dir.path(), &[], &[]);
    first.kill();

    let cfg = write_config(dir.path(), "shard_count = 64\n");
    let stderr = refused_serve(dir.path(), &["--config", cfg.to_str().unwrap()]);
    assert!(
        stderr.contains("shard_count = 1024") && stderr.contains("shard_count = 64"),
        "the refusal names both counts: {stderr}"
    );

    // The same count still starts.
    let cfg = write_config(dir.path(), "shard_count = 1024\n");
    let again = Node::start(dir.path(), &["--config", cfg.to_str().unwrap()], &[]);
    assert!(http_get(again.addr("http"), "/health").contains("200 OK"));
}

/// Sets the store's recorded format, as a build of that format would.
fn mark_store_format(data_dir: &std::path::Path, format: u32) {
    let db = common::open_store(data_dir);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(db.run("t", move |txn| async move {
            meshmail_storage::model::cluster::mark_store_format(&txn, format)
        }))
        .unwrap();
}

#[test]
fn a_store_a_newer_build_has_opened_is_refused() {
    use meshmail_storage::model::cluster::STORE_FORMAT;
    let dir = tempfile::tempdir().unwrap();
    let mut first = Node::start(dir.path(), &[], &[]);
    first.kill();
    let newer = STORE_FORMAT + 1;
    mark_store_format(dir.path(), newer);

    let stderr = refused_serve(dir.path(), &[]);
    assert!(
        stderr.contains(&format!("the store has format {newer}"))
            && stderr.contains(&format!("knows formats up to {STORE_FORMAT}")),
        "the refusal names both formats: {stderr}"
    );

    // The admin commands write to the store too: refused alike.
    let out = meshmail(dir.path())
        .args(["domain", "add", "example.test"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("the store has format {newer}")), "{stderr}");

    // A store of this build's format (or an earlier one) still opens.
    mark_store_format(dir.path(), STORE_FORMAT - 1);
    let again = Node::start(dir.path(), &[], &[]);
    assert!(http_get(again.addr("http"), "/health").contains("200 OK"));
}

#[test]
fn a_running_node_stops_once_a_newer_build_marks_the_store() {
    use meshmail_storage::model::cluster::STORE_FORMAT;
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::start(dir.path(), &[], &[]);
    assert!(http_get(node.addr("http"), "/health").contains("200 OK"));
    // A newer build opened the store meanwhile (a rolling upgrade).
    mark_store_format(dir.path(), STORE_FORMAT + 1);

    let status =
        exit_within(&mut node, Duration::from_secs(30)).expect("the node kept running on a store of a newer format");
    assert!(
        !status.success(),
        "crash-only: the exit status says it failed ({status})"
    );
}
