//! The SMTP route cache over real sockets: repeated RCPTs are answered from
//! it (its hit counter moves), a new account is reachable at once (unknown
//! addresses are never cached), and a removed alias stops routing although
//! other lookups keep the cache confirmed (the admin command bumps the
//! store's directory version, which every miss reads).

mod common;

use std::time::{Duration, Instant};

use common::{Node, http_get, meshmail, run_ok, setup_account, smtp_send};

const USER: &str = "alice@example.org";

fn hits(node: &Node) -> f64 {
    http_get(node.addr("http"), "/metrics")
        .lines()
        .filter(|l| l.starts_with("meshmail_smtp_route_cache_total") && l.contains("result=\"hit\""))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn routes_are_cached_and_changes_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, "pw");
    run_ok(
        meshmail(dir.path()).args(["alias", "add", "team@example.org", USER]),
        None,
    );
    let node = Node::start(dir.path(), &[], &[]);
    let smtp = node.addr("smtp").to_string();
    let send = |to: &str| smtp_send(&smtp, "x@remote.example", to, "Subject: t\r\n\r\nhi").0;

    for _ in 0..5 {
        assert_eq!(send(USER), 250);
        assert_eq!(send("team@example.org"), 250);
    }
    assert!(hits(&node) > 0.0, "repeated RCPTs were answered from the cache");

    // Unknown, then created while the node runs: reachable at once.
    assert_eq!(send("bob@example.org"), 550);
    run_ok(
        meshmail(dir.path()).args(["account", "add", "bob@example.org", "--password-stdin"]),
        Some("pw\n"),
    );
    assert_eq!(send("bob@example.org"), 250);

    // A cached alias, removed by the admin command (another process).
    run_ok(meshmail(dir.path()).args(["alias", "remove", "team@example.org"]), None);
    let removed = Instant::now();
    loop {
        // A miss (unknown addresses are never cached) reads the directory
        // version and confirms the cache: without the version bump of the
        // admin command, the cached alias would be served from then on.
        assert_eq!(send("nobody@example.org"), 550);
        match send("team@example.org") {
            550 => break,
            250 => assert!(
                removed.elapsed() < Duration::from_secs(3),
                "the removed alias still routes after {:?}",
                removed.elapsed()
            ),
            other => panic!("unexpected reply {other}"),
        }
    }
}
