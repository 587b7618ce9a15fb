//! Prometheus' own checker on what we ship and serve: `promtool check
//! rules` on ops/prometheus/meshmail-rules.yml, and `promtool check
//! metrics` on a live node's /metrics after it took mail. SKIPPED without
//! promtool (Debian package `prometheus`) unless MESHMAIL_REQUIRE_CLIENTS=1.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Node, client_available, http_get, setup_account, smtp_send};

fn rules_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("ops/prometheus/meshmail-rules.yml")
}

#[test]
fn promtool_accepts_the_shipped_rules() {
    if !client_available("promtool", "prometheus") {
        return;
    }
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules_path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool check rules failed:\n{text}");
    assert!(text.contains("SUCCESS"), "{text}");
}

/// The lint problems promtool reports for an exposition, one per line
/// (`name problem`); a parse error makes it fail outright.
fn promtool_metrics(exposition: &str) -> (Option<i32>, Vec<String>) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(exposition.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text.lines().map(str::to_string).collect())
}

#[test]
fn promtool_lints_a_live_nodes_metrics() {
    if !client_available("promtool", "prometheus") {
        return;
    }
    // The checker itself: a counter without `_total` is a finding.
    let (_, bad) = promtool_metrics("# HELP foo x\n# TYPE foo counter\nfoo 1\n");
    assert!(bad.iter().any(|l| l.contains("_total")), "{bad:?}");

    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), "prom@example.test", "pw");
    let node = Node::start(dir.path(), &[], &[]);
    let (code, text) = smtp_send(
        node.addr("smtp"),
        "a@remote.example",
        "prom@example.test",
        "Subject: metrics\r\n\r\nhello",
    );
    assert_eq!(code, 250, "{text}");
    let response = http_get(node.addr("http"), "/metrics");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(body.contains("meshmail_smtp_accept_seconds_bucket"), "{body}");

    let (code, findings) = promtool_metrics(body);
    // Exit 3 is "lint problems"; anything else but 0 is a parse failure.
    assert!(
        matches!(code, Some(0) | Some(3)),
        "promtool could not parse /metrics: {findings:?}"
    );
    // Every finding fails: naming, units, types, and a family without a
    // HELP line (node/src/metrics_help.rs describes every metric).
    assert!(
        findings.is_empty(),
        "promtool check metrics on /metrics:\n{findings:#?}"
    );
    assert_eq!(code, Some(0), "{findings:?}");
}
