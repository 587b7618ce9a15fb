//! `meshmail up --store fdb --fdb-bin DIR`: `up` starts a FoundationDB
//! cluster of its own in the data directory, runs the nodes on it (mail in
//! over SMTP, out over IMAP), stops the cluster on SIGTERM, and a second
//! `up` finds the same database again. Needs a build with `--features fdb`
//! and `MESHMAIL_FDB_BIN` (the directory of `fdbserver` and `fdbcli`, which
//! `.ci/fdb.sh start` exports); without them it says SKIPPED, except in the
//! FDB test pass (`MESHMAIL_TEST_STORE=fdb`), where that is a failure.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{meshmail, wait_for};
use meshmail_storage::open::KvConfig;

fn fdb_bin() -> Option<String> {
    let bin = std::env::var("MESHMAIL_FDB_BIN").ok().filter(|_| cfg!(feature = "fdb"));
    if bin.is_none() {
        assert!(
            !KvConfig::testing_on_fdb(),
            "the FDB test pass needs MESHMAIL_FDB_BIN and a build with --features fdb"
        );
        eprintln!(
            "SKIPPED: `up --store fdb` needs a build with --features fdb and MESHMAIL_FDB_BIN \
             (eval \"$(.ci/fdb.sh start)\" exports it)"
        );
    }
    bin
}

/// Starts `up` and waits for its endpoint table (the demo account line).
fn up(dir: &std::path::Path, bin: &str, offset: u32) -> Child {
    let mut cmd = meshmail(dir);
    // The test pass's own store must not leak into `up`: `--store fdb` alone.
    cmd.env_remove("MESHMAIL_STORE").env_remove("MESHMAIL_FDB_KEY_PREFIX");
    let mut child = cmd
        .args(["up", "--nodes", "1", "--demo", "--store", "fdb", "--fdb-bin", bin])
        .args(["--base-port-offset", &offset.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("up exited before its table").unwrap();
        if line.starts_with("demo account:") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    child
}

fn stop(mut up: Child) {
    let pid = up.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = up.wait().unwrap();
    assert!(status.success(), "up exited with {status}");
}

fn fdbserver_running(dir: &std::path::Path) -> bool {
    let needle = dir.join("fdb").to_string_lossy().into_owned();
    std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
        std::fs::read(p.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(&needle) && String::from_utf8_lossy(&c).contains("fdbserver"))
            .unwrap_or(false)
    })
}

#[test]
fn up_runs_the_mesh_on_a_foundationdb_cluster_of_its_own() {
    let Some(bin) = fdb_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let offset = meshmail_soak::cluster::free_up_offset(1, std::process::id()).expect("a free port offset");
    let (smtp, imap) = (
        format!("127.0.0.1:{}", 2525 + offset),
        format!("127.0.0.1:{}", 1143 + offset),
    );

    let first = up(dir.path(), &bin, offset);
    assert!(
        fdbserver_running(dir.path()),
        "up started no fdbserver in its data directory"
    );
    let (code, text) = common::smtp_send(
        &smtp,
        "a@example.net",
        "demo@example.test",
        "Subject: on fdb\r\n\r\nhi\r\n",
    );
    assert_eq!(code, 250, "{text}");
    assert_eq!(common::inbox_count(&imap, "demo@example.test", "demo"), 1);
    assert!(
        !dir.path().join("meshmail.sqlite").exists(),
        "the nodes opened SQLite instead of the cluster"
    );
    stop(first);
    wait_for("up's fdbserver to stop", Duration::from_secs(15), || {
        !fdbserver_running(dir.path())
    });

    // The second run starts the same database again: the message is there.
    let second = up(dir.path(), &bin, offset);
    assert_eq!(common::inbox_count(&imap, "demo@example.test", "demo"), 1);
    stop(second);
}
