//! The runner's network namespaces leave nothing behind: a short run with a
//! namespace partition and a netem fault ends with no namespace or host veth
//! of its (and removes a stale one a "crashed" runner left); a run
//! interrupted by SIGINT mid-fault-phase, while its namespaces demonstrably
//! exist, ends the same way. Needs root, `ip netns`, `tc` and iptables:
//! prints `SKIPPED:` without them, unless MESHMAIL_REQUIRE_CLIENTS=1.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use meshmail_chaos::netns;

fn available() -> bool {
    match netns::unavailable() {
        None => true,
        Some(why) if std::env::var("MESHMAIL_REQUIRE_CLIENTS").as_deref() == Ok("1") => {
            panic!("network namespaces required (MESHMAIL_REQUIRE_CLIENTS=1): {why}")
        }
        Some(why) => {
            eprintln!("SKIPPED: network namespaces unavailable: {why}");
            false
        }
    }
}

fn scenario(base_port: u16, duration_s: u32) -> String {
    format!(
        r#"name = "netns-leftovers"
nodes = 2
duration_s = {duration_s}
warmup_s = 2
settle_s = 1
base_port = {base_port}
sample_every_s = 1
recovery_limit_s = 15

[netns]
enabled = true
require = true

[load]
accounts = 2
smtp_connections = 1
smtp_rate = 10
idle_sessions = 1
imap_readers = 1

[kills]
enabled = false

[link_drops]
enabled = false

[[schedule]]
fault = "netns_partition"
node = "node-1"
at_s = [0.5]
duration_s = 1.5

[[schedule]]
fault = "netns_netem"
node = "node-0"
at_s = [2.5]
duration_s = 1
delay_ms = 20
loss_pct = 10
"#
    )
}

/// Our namespaces and host links belonging to runner `pid`.
fn leftovers(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = netns::our_namespaces()
        .into_iter()
        .filter(|(_, p)| *p == pid)
        .map(|(n, _)| n)
        .collect();
    v.extend(
        netns::our_links()
            .into_iter()
            .filter(|(_, p)| *p == pid)
            .map(|(n, _)| n),
    );
    v
}

fn runner(dir: &std::path::Path, text: &str) -> Command {
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    let meshmail = meshmail_soak::cluster::find_meshmail(None).expect("the meshmail binary");
    let mut c = Command::new(env!("CARGO_BIN_EXE_meshmail-chaos"));
    c.arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--meshmail")
        .arg(meshmail);
    c
}

#[test]
fn nothing_left_after_a_run_or_sigint() {
    if !available() {
        return;
    }
    // A stale setup of a runner that is gone (no such pid): removed at start.
    let stale = format!("{}4000000-br", netns::NS_PREFIX);
    let _ = Command::new("ip").args(["netns", "add", &stale]).status();
    assert!(netns::our_namespaces().iter().any(|(n, _)| *n == stale));

    let dir = tempfile::tempdir().unwrap();
    let out = runner(dir.path(), &scenario(24000, 4)).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(
        stdout.contains("netns_partition: 1"),
        "the partition ran in a namespace"
    );
    assert!(stdout.contains("netns_netem: 1"), "the netem fault ran");
    assert!(stdout.contains("lost: 0"), "nothing lost");
    assert!(
        !netns::our_namespaces().iter().any(|(n, _)| *n == stale),
        "the stale namespace was removed"
    );
    assert!(
        !dir.path().join("out/data").exists(),
        "OUT/data deleted without --keep-data"
    );
    // The runner is gone; its pid is known only through the report.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/report.json")).unwrap()).unwrap();
    assert_eq!(report["schema_version"], 1);
    assert!(
        report["summary"]["network"].as_str().unwrap_or("").starts_with("netns"),
        "{}",
        report["summary"]["network"]
    );
    let all: Vec<String> = netns::our_namespaces()
        .into_iter()
        .map(|x| x.0)
        .chain(netns::our_links().into_iter().map(|x| x.0))
        .collect();
    assert!(all.is_empty(), "left behind after a run: {all:?}");

    // SIGINT in the fault phase, while the namespaces exist.
    let dir = tempfile::tempdir().unwrap();
    let mut child = runner(dir.path(), &scenario(24100, 60))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("runner ended before its fault phase");
        }
        eprint!("{line}");
        if line.contains("netns_partition") {
            break;
        }
    }
    // Keep draining, so the runner never blocks on a full pipe while it tears down.
    let drain = std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::stderr()));
    let before = leftovers(pid);
    assert!(before.len() >= 3, "namespaces exist mid-run: {before:?}");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    let _ = drain.join();
    assert_eq!(status.code(), Some(130), "interrupted exit status");
    let after = leftovers(pid);
    assert!(after.is_empty(), "left behind after SIGINT: {after:?}");
}
