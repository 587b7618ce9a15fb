//! The checker can fail: tiny chaos runs against a real node, one clean
//! (must pass), one where the server acknowledges a message it drops (must
//! report exactly `lost: 1` and exit non-zero), one where it reuses a UID
//! (must report `uid_reused` ≥ 1 and exit non-zero). The faults come from
//! the server's `MESHMAIL_FAULT_HOOKS=1` hooks, which the runner turns on.

use std::process::Command;

/// A one-node scenario of about 15 s; `extra` is appended as TOML.
fn scenario(base_port: u16, kills: bool, extra: &str) -> String {
    format!(
        r#"name = "checker"
nodes = 1
duration_s = 8
warmup_s = 3
settle_s = 1
time_scale = 0.05
base_port = {base_port}
sample_every_s = 1
recovery_limit_s = 20

[load]
accounts = 2
skew = "uniform"
smtp_connections = 2
smtp_rate = 25
idle_sessions = 1
imap_readers = 1
reader_interval_ms = 300
fault_at = 0.3

[kills]
enabled = {kills}
restart_delay = {{ p10 = 0.2, p50 = 0.5, p90 = 1 }}

[link_drops]
enabled = false
{extra}"#
    )
}

/// Runs the chaos binary on a scenario; returns (exit code, stdout).
fn run(name: &str, text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write scenario");
    let meshmail = meshmail_soak::cluster::find_meshmail(None)
        .expect("the meshmail binary (cargo build -p meshmail-node; cargo test --workspace builds it)");
    let out = Command::new(env!("CARGO_BIN_EXE_meshmail-chaos"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("report"))
        .arg("--meshmail")
        .arg(meshmail)
        .output()
        .expect("run meshmail-chaos");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "--- {name} stdout\n{stdout}--- {name} stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), stdout)
}

/// The value printed on the `name: value ...` check line.
fn value(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no `{name}:` line in\n{stdout}"))
}

#[test]
fn clean_run_passes() {
    let (code, out) = run("clean", &scenario(23000, true, ""));
    assert_eq!(code, 0, "a clean run must pass:\n{out}");
    assert_eq!(value(&out, "lost"), 0);
    assert!(value(&out, "acked") > 0);
    assert!(value(&out, "kills") >= 1);
}

#[test]
fn dropped_ack_is_exactly_one_lost() {
    let (code, out) = run("drop-ack", &scenario(23100, false, "[faults]\ndrop_ack_messages = 1\n"));
    assert_eq!(value(&out, "lost"), 1, "{out}");
    assert_eq!(code, 1, "{out}");
}

#[test]
fn reused_uid_is_found() {
    let (code, out) = run(
        "reuse-uid",
        &scenario(23200, false, "[faults]\nreuse_uid_messages = 1\n"),
    );
    assert!(value(&out, "uid_reused") >= 1, "{out}");
    assert_eq!(code, 1, "{out}");
}
