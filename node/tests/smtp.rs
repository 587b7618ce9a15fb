//! SMTP, LMTP and submission over real sockets: Python's smtplib suite and
//! swaks against a node started on port 0.

mod common;

use std::process::Command;

use common::{Node, setup_account, write_config};

const USER: &str = "alice@example.org";
const PASSWORD: &str = "correct horse battery staple";

fn node(dir: &std::path::Path) -> Node {
    setup_account(dir, USER, PASSWORD);
    // The submission test queues mail for friend@remote.example: the queue
    // runner's DNS goes to a closed loopback port (never off the machine),
    // so the item stays queued with a temporary error.
    let cfg = write_config(
        dir,
        "[smtp]\nidle_timeout_s = 2\nmax_message_bytes = 200000\n[dns]\nresolver = \"127.0.0.1:9\"\ntimeout_ms = 200\n",
    );
    Node::start(dir, &["--config", cfg.to_str().unwrap()], &[])
}

#[test]
fn smtplib_suite() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/smtp_suite.py"))
        .args([n.addr("smtp"), n.addr("submission"), n.addr("lmtp"), USER, PASSWORD])
        .output()
        .expect("python3");
    let report = String::from_utf8_lossy(&out.stderr);
    eprintln!("{report}");
    assert!(out.status.success(), "smtplib suite failed");
    assert!(report.contains("OK"), "{report}");
    // What was accepted is reconciled by the ledger verifier.
    let verify = common::meshmail(dir.path())
        .args(["verify", "ledger"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{text}");
    assert!(text.contains("discrepancies:  0"), "{text}");
    assert!(
        text.contains("queued:         1"),
        "the remote recipient of the submission test is queued: {text}"
    );
    let queue = common::run_ok(common::meshmail(dir.path()).args(["queue", "list"]), None);
    assert!(queue.contains("friend@remote.example"), "{queue}");
}

fn swaks(args: &[&str]) -> (bool, String) {
    let out = Command::new("swaks")
        .args(args)
        .output()
        .expect("swaks is installed (apt install swaks)");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn swaks_delivery_relay_and_submission() {
    if !common::client_available("swaks", "swaks") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let smtp = n.addr("smtp").to_string();
    let (ok, out) = swaks(&[
        "--server",
        &smtp,
        "--to",
        USER,
        "--from",
        "x@remote.example",
        "--body",
        "hi",
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("<-  250 2.0.0"), "{out}");
    let (ok, out) = swaks(&[
        "--server",
        &smtp,
        "--to",
        "x@elsewhere.example",
        "--from",
        "x@remote.example",
    ]);
    assert!(!ok, "relay must be refused: {out}");
    assert!(out.contains("550 5.7.1"), "{out}");
    let (ok, out) = swaks(&["--server", &smtp, "--to", USER, "--pipeline", "--body", "piped"]);
    assert!(ok, "{out}");
    let sub = n.addr("submission").to_string();
    let (ok, out) = swaks(&[
        "--server",
        &sub,
        "--tls",
        "--auth",
        "PLAIN",
        "--auth-user",
        USER,
        "--auth-password",
        PASSWORD,
        "--from",
        USER,
        "--to",
        USER,
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("235 2.7.0"), "{out}");
    let subs = n.addr("submissions").to_string();
    let (ok, out) = swaks(&[
        "--server",
        &subs,
        "--tlsc",
        "--auth",
        "LOGIN",
        "--auth-user",
        USER,
        "--auth-password",
        PASSWORD,
        "--from",
        USER,
        "--to",
        USER,
    ]);
    assert!(ok, "implicit TLS submission: {out}");
}

/// Past its connection bound a listener answers 421 and closes, and serves
/// again once a slot frees up.
#[test]
fn connection_bound_refuses_with_421() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, PASSWORD);
    let cfg = write_config(dir.path(), "[listen]\nsmtp_max_connections = 2\n");
    let n = Node::start(dir.path(), &["--config", cfg.to_str().unwrap()], &[]);
    let greet = |s: &std::net::TcpStream| {
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line
    };
    let a = std::net::TcpStream::connect(n.addr("smtp")).unwrap();
    assert!(greet(&a).starts_with("220"));
    let b = std::net::TcpStream::connect(n.addr("smtp")).unwrap();
    assert!(greet(&b).starts_with("220"));
    let c = std::net::TcpStream::connect(n.addr("smtp")).unwrap();
    let refused = greet(&c);
    assert!(refused.starts_with("421 4.7.0"), "{refused}");
    (&a).write_all(b"QUIT\r\n").unwrap();
    drop(a);
    // The slot frees when the first session ends.
    let mut ok = false;
    for _ in 0..50 {
        let d = std::net::TcpStream::connect(n.addr("smtp")).unwrap();
        if greet(&d).starts_with("220") {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ok, "a freed slot serves again");
}

/// A delivery's commit is timed stage by stage: SQLite's apply, and inside
/// it the WAL run's write and the fsync, each with its own histogram (what
/// an operator reads when commits slow down: the disk or the B-tree).
#[test]
fn a_commit_times_its_wal_write_and_fsync_apart() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let names = [
        "meshmail_kv_sqlite_apply_seconds_count",
        "meshmail_kv_sqlite_wal_write_seconds_count",
        "meshmail_kv_sqlite_wal_sync_seconds_count",
        "meshmail_kv_sqlite_wal_sync_seconds_sum",
    ];
    let read = || {
        let text = common::http_get(n.addr("http"), "/metrics");
        names.map(|name| common::metric_in(&text, name))
    };
    let before = read();
    let (code, reply) = common::smtp_send(n.addr("smtp"), "x@remote.example", USER, "Subject: t\r\n\r\nhi\r\n");
    assert_eq!(code, 250, "{reply}");
    let after = read();
    for (i, name) in names.iter().enumerate().take(3) {
        assert!(
            after[i] >= before[i] + 1.0,
            "{name}: {} before the delivery, {} after",
            before[i],
            after[i]
        );
    }
    assert!(
        after[3] > before[3],
        "the delivery's fsync took no time: {before:?} -> {after:?}"
    );
}

/// RCPT answers come from the node's cache, and a change made by an admin
/// command in another process (an alias removed, a quota set) is answered
/// within the cache's validation period (250 ms), not the entry's life
/// (60 s).
#[test]
fn rcpt_answers_are_cached_until_the_directory_changes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = node(d);
    common::run_ok(
        common::meshmail(d).args(["alias", "add", "sales@example.org", USER]),
        None,
    );
    let smtp = n.addr("smtp");
    let hits = || {
        let text = common::http_get(n.addr("http"), "/metrics");
        common::metric_in(&text, "meshmail_smtp_rcpt_cache_total{result=\"hit\"}")
    };
    let before = hits();
    for _ in 0..5 {
        let (code, reply) = common::smtp_rcpt(smtp, "x@remote.example", "sales@example.org");
        assert_eq!(code, 250, "{reply}");
    }
    assert!(
        hits() >= before + 4.0,
        "5 RCPTs of one address: {} hits",
        hits() - before
    );

    common::run_ok(common::meshmail(d).args(["alias", "remove", "sales@example.org"]), None);
    let limit = std::time::Duration::from_secs(5);
    common::wait_for("RCPT to the removed alias refused", limit, || {
        common::smtp_rcpt(smtp, "x@remote.example", "sales@example.org").0 == 550
    });

    let (code, reply) = common::smtp_send(smtp, "x@remote.example", USER, "Subject: one\r\n\r\nhi\r\n");
    assert_eq!(code, 250, "{reply}");
    let (code, reply) = common::smtp_rcpt(smtp, "x@remote.example", USER);
    assert_eq!(code, 250, "{reply}");
    common::run_ok(
        common::meshmail(d).args(["quota", "set", USER, "--messages", "1"]),
        None,
    );
    common::wait_for("RCPT to a full mailbox refused", limit, || {
        common::smtp_rcpt(smtp, "x@remote.example", USER).0 == 552
    });
}
