//! Operator commands against real nodes: the typed `/status` and
//! `meshmail status --node`, and `meshmail node forget`.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{Node, http_get, meshmail, run_ok};
use meshmail_mesh::status::{LinkState, MemberStatus, NodeStatus};

const SHARDS: u64 = 1024;

fn status(node: &Node) -> NodeStatus {
    let response = http_get(node.addr("http"), "/status");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("/status is not a NodeStatus: {e}: {response}"))
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn output(dir: &Path, args: &[&str]) -> Output {
    meshmail(dir).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn status_parses_into_the_shared_struct_and_the_cli_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(dir.path(), &["--node-name", "solo"], &[]);
    wait_for("the node to hold every shard", Duration::from_secs(30), || {
        status(&node).leases_held == SHARDS
    });
    let s = status(&node);
    let backend = if meshmail_storage::open::KvConfig::testing_on_fdb() {
        "fdb"
    } else {
        "sqlite"
    };
    assert_eq!(
        (s.node.as_str(), s.generation, s.backend.as_str()),
        ("solo", 1, backend)
    );
    assert_eq!(u64::from(s.shard_count), SHARDS);
    assert_eq!(s.owners.get("solo"), Some(&SHARDS));
    assert_eq!(s.unowned, 0);
    assert_eq!(s.leases.len() as u64, SHARDS);
    let me = &s.members[0];
    assert_eq!((me.link, me.status), (LinkState::Local, MemberStatus::Local));

    let out = run_ok(meshmail(dir.path()).args(["status", "--node", node.addr("http")]), None);
    assert!(out.contains("live view of solo#1"), "{out}");
    assert!(out.contains(&format!("backend {backend}")), "{out}");
    assert!(
        out.contains(&format!(
            "shards owned (of {SHARDS}): this node runs {SHARDS}, holds {SHARDS} leases"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("  solo         {SHARDS}")), "{out}");
    // The store-side view: the node is alive (it writes a sign of life).
    assert!(out.contains("last seen"), "{out}");
}

#[test]
fn status_cli_refuses_a_document_that_is_not_a_node_status() {
    // An HTTP server answering /status with JSON missing the fields: the
    // command fails naming the problem instead of printing zeros.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let body = r#"{"node":"x","generation":1}"#;
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let dir = tempfile::tempdir().unwrap();
    let o = output(dir.path(), &["status", "--node", &addr]);
    server.join().unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("not a meshmail /status document") && t.contains("missing field"),
        "{t}"
    );
}

fn start_mesh_node(dir: &Path, name: &str, seeds: &str) -> Node {
    let mut args = vec!["--node-name", name, "--mesh", "127.0.0.1:0"];
    if !seeds.is_empty() {
        args.extend(["--seeds", seeds]);
    }
    Node::start(dir, &args, &[])
}

#[test]
fn a_forgotten_node_stops_counting_against_quorum() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    run_ok(meshmail(dir).args(["cluster", "init"]), None);
    for n in ["node-a", "node-b"] {
        run_ok(meshmail(dir).args(["cluster", "cert", n]), None);
    }
    let a = start_mesh_node(dir, "node-a", "");
    let seed = format!("node-a@{}", a.addr("mesh"));
    let mut b = start_mesh_node(dir, "node-b", &seed);
    wait_for("both nodes to own shards", Duration::from_secs(60), || {
        let s = status(&a);
        s.owners.len() == 2 && s.owners.values().sum::<u64>() == SHARDS
    });

    // Running nodes are refused, and so is a name never registered.
    let o = output(dir, &["node", "forget", "node-a"]);
    assert!(!o.status.success() && text(&o).contains("was alive"), "{}", text(&o));
    let o = output(dir, &["node", "forget", "node-zz"]);
    assert!(
        !o.status.success() && text(&o).contains("no node named node-zz"),
        "{}",
        text(&o)
    );

    // B dies for good. Just killed, its last sign of life is recent, so
    // forget refuses.
    b.kill();
    let o = output(dir, &["node", "forget", "node-b"]);
    assert!(!o.status.success(), "forgetting a node seen a moment ago: {}", text(&o));
    assert!(text(&o).contains("was alive"), "{}", text(&o));
    // A alone is 1 of 2 known: no quorum, so it must not take B's shards
    // over (it might be the minority side of a partition).
    wait_for("A to find B dead", Duration::from_secs(30), || {
        status(&a)
            .members
            .iter()
            .any(|m| m.node == "node-b" && m.status == MemberStatus::Dead)
    });
    let b_shards = *status(&a).owners.get("node-b").expect("B's leases");
    assert!(b_shards > 0);
    std::thread::sleep(Duration::from_secs(1)); // not readiness: a round would take over now
    assert_eq!(
        status(&a).owners.get("node-b"),
        Some(&b_shards),
        "no takeover without quorum"
    );

    // Once B has been quiet for the silence asked (3 s), forget accepts.
    let mut forgot = None;
    wait_for("forget to accept B", Duration::from_secs(20), || {
        let o = output(dir, &["node", "forget", "node-b", "--silence-s", "3"]);
        if o.status.success() {
            forgot = Some(text(&o));
        }
        o.status.success()
    });
    let forgot = forgot.unwrap();
    assert!(forgot.contains("forgot node-b#1"), "{forgot}");
    assert!(
        forgot.contains(&format!("still held {b_shards} shard leases")),
        "{forgot}"
    );

    // A now has quorum alone and takes every shard; B is gone from its view.
    wait_for("A to take B's shards over", Duration::from_secs(30), || {
        let s = status(&a);
        s.owners.get("node-a") == Some(&SHARDS) && s.members.iter().all(|m| m.node != "node-b")
    });
    let o = output(dir, &["node", "forget", "node-b"]);
    assert!(
        !o.status.success() && text(&o).contains("already forgotten"),
        "{}",
        text(&o)
    );
    let listing = run_ok(meshmail(dir).args(["status"]), None);
    assert!(listing.contains("forgotten (left for good)"), "{listing}");

    // Starting the name again undoes it: B rejoins and gets shards back.
    let b = start_mesh_node(dir, "node-b", &seed);
    wait_for("B to rejoin and own shards", Duration::from_secs(60), || {
        let s = status(&a);
        s.owners.len() == 2 && s.owners.values().sum::<u64>() == SHARDS && status(&b).leases_held > 0
    });
}

#[test]
fn an_invalid_config_is_refused_with_every_problem_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::write_config(
        dir.path(),
        "[mesh]\nkeep_alive_ms = 500\ndead_after_ms = 1000\n[listen]\nimap = \"127.0.0.1:2525\"\nsmtp = \"127.0.0.1:2525\"\n",
    );
    let o = meshmail(dir.path())
        .arg("--config")
        .arg(&cfg)
        .args(["serve", "--node-name", "Bad_Name"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "invalid configuration",
        "[mesh] dead_after_ms = 1000 is under 3 x keep_alive_ms = 1500",
        "[listen] imap = \"127.0.0.1:2525\": the same address as smtp",
        "node_name = \"Bad_Name\"",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("meshmail ready"),
        "it must not start"
    );
    // Admin commands read the same file and refuse it the same way.
    let o = meshmail(dir.path())
        .arg("--config")
        .arg(&cfg)
        .args(["domain", "list"])
        .output()
        .unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("dead_after_ms = 1000"));
}
