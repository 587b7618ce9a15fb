//! The mesh over real sockets and real processes: three `meshmail serve`
//! nodes on one shared store, QUIC links between them on 127.0.0.1, SMTP
//! and IMAP clients on whichever node the test picks. Every wait polls a
//! condition with a deadline; nothing sleeps and hopes.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Node, converged, http_get, meshmail, run_ok, setup_account, smtp_send, status, wait_for};
use serde_json::Value;

const EMAIL: &str = "mesh@example.test";
const PASSWORD: &str = "pw";
const SHARDS: u32 = 1024;

fn cluster(dir: &Path, names: &[&str]) {
    run_ok(meshmail(dir).args(["cluster", "init"]), None);
    for n in names {
        run_ok(meshmail(dir).args(["cluster", "cert", n]), None);
    }
}

fn start(dir: &Path, name: &str, seeds: &str) -> Node {
    common::start_mesh_node(dir, name, seeds, &[("MESHMAIL_FAULT_HOOKS", "1")])
}

/// Three nodes on one store: A alone first, then B and C with A as their
/// only seed (they learn each other from A's announcements); returns once
/// the mesh has converged.
fn three_nodes(dir: &Path) -> (Node, Node, Node, String) {
    setup_account(dir, EMAIL, PASSWORD);
    cluster(dir, &["node-a", "node-b", "node-c"]);
    let a = start(dir, "node-a", "");
    let seed = format!("node-a@{}", a.addr("mesh"));
    let b = start(dir, "node-b", &seed);
    let c = start(dir, "node-c", &seed);
    let took = wait_for("the three nodes to converge", Duration::from_secs(60), || {
        converged(u64::from(SHARDS), &[&a, &b, &c])
    });
    eprintln!("converged in {took:?}");
    (a, b, c, seed)
}

fn generation(node: &Node) -> u64 {
    node.endpoints["generation"].parse().unwrap()
}

fn account_shard(dir: &Path) -> u32 {
    let db = common::open_store(dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let account = rt
        .block_on(db.read("test", |txn| async move {
            meshmail_storage::model::accounts::get(&txn, EMAIL).await
        }))
        .unwrap()
        .expect("account");
    meshmail_storage::model::shard_of(account.id, SHARDS)
}

/// (owner name, generation, epoch) of `shard` as `node` sees it.
fn lease_of(node: &Node, shard: u32) -> (String, u64, u64) {
    let s = status(node);
    let l = s["leases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["shard"] == shard)
        .expect("shard has an owner")
        .clone();
    (
        l["node"].as_str().unwrap().to_string(),
        l["generation"].as_u64().unwrap(),
        l["epoch"].as_u64().unwrap(),
    )
}

fn metric(node: &Node, name_and_labels: &str) -> f64 {
    http_get(node.addr("http"), "/metrics")
        .lines()
        .find_map(|l| {
            l.strip_prefix(name_and_labels)
                .map(|v| v.trim().parse::<f64>().unwrap())
        })
        .unwrap_or(0.0)
}

/// A tiny IMAP client: enough for LOGIN, SELECT, IDLE, FETCH, STORE.
struct Imap {
    r: BufReader<TcpStream>,
    w: TcpStream,
    n: u32,
}

impl Imap {
    fn connect(addr: &str) -> Imap {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut c = Imap {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
            n: 0,
        };
        assert!(c.line().starts_with("* OK"));
        c
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("IMAP read");
        l
    }

    /// Sends a command; returns every line up to and including the tagged one.
    fn cmd(&mut self, cmd: &str) -> String {
        self.n += 1;
        let tag = format!("t{}", self.n);
        write!(self.w, "{tag} {cmd}\r\n").unwrap();
        let mut out = String::new();
        loop {
            let l = self.line();
            assert!(!l.is_empty(), "connection closed during {cmd}");
            out.push_str(&l);
            if l.starts_with(&format!("{tag} ")) {
                return out;
            }
        }
    }
}

fn ok(resp: &str) -> &str {
    let last = resp.lines().last().unwrap();
    assert!(last.split_whitespace().nth(1) == Some("OK"), "{resp}");
    resp
}

#[test]
fn three_nodes_deliver_on_one_read_and_idle_on_another() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, b, c, _) = three_nodes(dir);
    let nodes = [&a, &b, &c];

    // Roles by placement: the owner of the account's shard, a node that
    // accepts the mail, and a third that serves the reader.
    let shard = account_shard(dir);
    let (owner_name, _, _) = lease_of(&a, shard);
    let owner = nodes.iter().find(|n| status(n)["node"] == owner_name.as_str()).unwrap();
    let others: Vec<&&Node> = nodes
        .iter()
        .filter(|n| status(n)["node"] != owner_name.as_str())
        .collect();
    let (via, reader) = (others[0], others[1]);

    let mut idle = Imap::connect(reader.addr("imap"));
    ok(&idle.cmd(&format!("LOGIN {EMAIL} {PASSWORD}")));
    ok(&idle.cmd("SELECT INBOX"));
    write!(idle.w, "t99 IDLE\r\n").unwrap();
    assert!(idle.line().starts_with('+'), "IDLE continuation");
    // The reader's node registers its watch with the owner when the
    // session subscribes; give that one round trip before delivering.
    wait_for("the watch to reach the owner", Duration::from_secs(10), || {
        metric(owner, "meshmail_remote_watched_accounts") >= 1.0
    });

    let (code, reply) = smtp_send(
        via.addr("smtp"),
        "sender@remote.test",
        EMAIL,
        "Subject: across the mesh\r\n\r\ndelivered on one node, stored by another\r\n",
    );
    assert_eq!(code, 250, "{reply}");
    let started = Instant::now();
    loop {
        let l = idle.line();
        assert!(!l.is_empty(), "IDLE connection closed");
        if l.contains("EXISTS") {
            assert!(l.starts_with("* 1 EXISTS"), "{l}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "no EXISTS pushed in IDLE");
    }
    eprintln!("IDLE push across nodes after {:?}", started.elapsed());
    write!(idle.w, "DONE\r\n").unwrap();
    // Untagged updates may precede the tagged OK (an IMAP4rev1 session is
    // told the arrival is \Recent).
    let mut l = idle.line();
    while l.starts_with("* ") {
        l = idle.line();
    }
    assert!(l.starts_with("t99 OK"), "{l}");

    let body = ok(&idle.cmd("FETCH 1 BODY[]")).to_string();
    assert!(body.contains("delivered on one node, stored by another"), "{body}");
    // A write from the reader's node goes to the owner's shard actor.
    let stored = ok(&idle.cmd("UID STORE 1 +FLAGS (\\Flagged)")).to_string();
    assert!(stored.contains("\\Flagged"), "{stored}");

    // It really crossed the mesh: a node that does not own the shard
    // delivers remotely and the owner commits locally. On a loaded machine
    // a lease may move mid-test (a missed heartbeat, a rebalance), which
    // changes who is who; such an attempt proves nothing and is repeated
    // with the roles of the moment.
    let mut crossed = false;
    for attempt in 1..=5 {
        if delivered_across(&nodes, shard, attempt) {
            crossed = true;
            break;
        }
        eprintln!("the shard's lease moved during attempt {attempt}; trying again");
    }
    assert!(crossed, "the lease kept moving; no delivery with stable roles");
}

/// Sends one message through a node that does not own `shard` and, if the
/// lease stayed put meanwhile, asserts the accepting node delivered
/// remotely and the owner locally (metric deltas). Returns false when the
/// lease moved, leaving the roles unproven.
fn delivered_across(nodes: &[&Node; 3], shard: u32, attempt: u32) -> bool {
    let before = lease_of(nodes[0], shard);
    let owner = *nodes.iter().find(|n| status(n)["node"] == before.0.as_str()).unwrap();
    let via = *nodes.iter().find(|n| status(n)["node"] != before.0.as_str()).unwrap();
    let remote = "meshmail_delivery_seconds_count{route=\"remote\"}";
    let local = "meshmail_delivery_seconds_count{route=\"local\"}";
    let (via_remote, via_local, owner_local) = (metric(via, remote), metric(via, local), metric(owner, local));
    let (code, reply) = smtp_send(
        via.addr("smtp"),
        "sender@remote.test",
        EMAIL,
        &format!("Subject: route check {attempt}\r\n\r\naccepted by a node that does not own the shard\r\n"),
    );
    assert_eq!(code, 250, "{reply}");
    if lease_of(nodes[0], shard) != before || lease_of(via, shard) != before {
        return false;
    }
    assert!(
        metric(via, remote) > via_remote,
        "the accepting node did not deliver remotely"
    );
    assert_eq!(metric(via, local), via_local, "the accepting node committed locally");
    assert!(metric(owner, local) > owner_local, "the owner did not commit");
    true
}

/// Reads a node's `/mesh/events` stream into a channel of (kind, node, generation).
fn observe(node: &Node) -> mpsc::Receiver<(String, String, u64)> {
    let mut s = TcpStream::connect(node.addr("http")).unwrap();
    write!(s, "GET /mesh/events HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(s);
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Ok(v) = serde_json::from_str::<Value>(line.trim())
                && v["kind"] != "hello"
            {
                let _ = tx.send((
                    v["kind"].as_str().unwrap_or("").into(),
                    v["node"].as_str().unwrap_or("").into(),
                    v["generation"].as_u64().unwrap_or(0),
                ));
            }
            line.clear();
        }
    });
    rx
}

#[test]
fn restarted_node_has_a_higher_generation_and_a_stale_one_is_fenced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, mut b, c, seed) = three_nodes(dir);
    let events = observe(&a);

    // SIGKILL B and start it again: a higher generation, down before up.
    let old_gen = generation(&b);
    b.kill();
    let b2 = start(dir, "node-b", &seed);
    let new_gen = generation(&b2);
    assert!(new_gen > old_gen, "generation {new_gen} after {old_gen}");
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains(&("up".to_string(), "node-b".to_string(), new_gen)) {
        let left = deadline.saturating_duration_since(Instant::now());
        seen.push(events.recv_timeout(left).expect("node-b's new incarnation came up"));
    }
    let down = seen
        .iter()
        .position(|e| e == &("down".to_string(), "node-b".to_string(), old_gen));
    let up = seen
        .iter()
        .position(|e| e == &("up".to_string(), "node-b".to_string(), new_gen));
    assert!(down.is_some() && down < up, "down before up: {seen:?}");
    wait_for("convergence after the restart", Duration::from_secs(60), || {
        converged(u64::from(SHARDS), &[&a, &b2, &c])
    });

    // A stale incarnation: pause C, start its successor, resume C.
    let c_gen = generation(&c);
    let (shard, epoch) = {
        let s = status(&a);
        let l = s["leases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["node"] == "node-c")
            .expect("node-c owns shards")
            .clone();
        (l["shard"].as_u64().unwrap(), l["epoch"].as_u64().unwrap())
    };
    let probe = format!("/admin/faults/fence-probe?shard={shard}&epoch={epoch}");
    // While it owns the shard, the probe commits: the check can pass.
    assert_eq!(common::http_post(c.addr("http"), &probe).0, 200);
    let c_pid = c.child.id() as i32;
    // SAFETY: signalling a child process of this test.
    unsafe { libc::kill(c_pid, libc::SIGSTOP) };
    let c2 = start(dir, "node-c", &seed);
    assert!(generation(&c2) > c_gen);
    wait_for("the successor to hold the shard", Duration::from_secs(30), || {
        let (node, g, _) = lease_of(&a, shard as u32);
        node == "node-c" && g == generation(&c2)
    });
    unsafe { libc::kill(c_pid, libc::SIGCONT) };
    // The resumed stale incarnation cannot commit a single write.
    let (code, body) = common::http_post(c.addr("http"), &probe);
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("fenced"), "{body}");
    // Nor link: its peers saw a higher generation of its name.
    let mut c = c;
    let exited = wait_for("the stale incarnation to exit", Duration::from_secs(30), || {
        c.child.try_wait().unwrap().is_some()
    });
    let code = c.child.try_wait().unwrap().unwrap().code();
    assert_eq!(code, Some(75), "a superseded node exits with EX_TEMPFAIL");
    eprintln!("stale incarnation exited {exited:?} after SIGCONT");
    wait_for("convergence with the successor", Duration::from_secs(60), || {
        converged(u64::from(SHARDS), &[&a, &b2, &c2])
    });
}

/// Does this node of three see links up to both others?
fn both_links_up(n: &Node) -> bool {
    status(n)["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["link"] == "up")
        .count()
        == 2
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn dropped_links_reconnect_and_a_drained_node_hands_everything_over() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, b, c, _) = three_nodes(dir);
    let nodes = [&a, &b, &c];

    let mut times = Vec::new();
    for i in 0..20 {
        let victim = nodes[i % 3];
        let (code, body) = common::http_post(victim.addr("http"), "/admin/faults/drop-links");
        assert_eq!(code, 200, "{body}");
        let started = Instant::now();
        wait_for("links to come back", Duration::from_secs(15), || {
            nodes.iter().all(|n| both_links_up(n))
        });
        times.push(started.elapsed());
    }
    times.sort();
    eprintln!(
        "link drop -> every link up again over {} drops: p50 {:?}, p99 {:?}, max {:?}",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().unwrap()
    );
    // Drops are not deaths: the mesh settles back to full ownership (read
    // again until it does: right after the last drop one status snapshot
    // can still show a link a peer has not re-announced; seen once on a
    // loaded CI machine).
    wait_for("ownership to settle after the drops", Duration::from_secs(15), || {
        converged(u64::from(SHARDS), &nodes)
    });

    // Drain B: it hands every shard over and mail through it still lands.
    run_ok(
        meshmail(dir).args(["node", "drain", "--node", b.addr("http"), "--timeout-s", "60"]),
        None,
    );
    assert_eq!(status(&b)["shards_owned"], 0);
    assert_eq!(status(&b)["leases_held"], 0);
    // Other nodes see it at their next lease scan (one control round).
    wait_for("the others to see node-b own nothing", Duration::from_secs(10), || {
        status(&a)["owners"].get("node-b").is_none()
    });
    let (code, reply) = smtp_send(
        b.addr("smtp"),
        "x@remote.test",
        EMAIL,
        "Subject: via drained\r\n\r\nx\r\n",
    );
    assert_eq!(code, 250, "{reply}");
}

/// Issue 13: a SIGKILLed node (not restarted) is found dead by silence —
/// nothing heard on its link, which QUIC still holds for its 4 s idle
/// timeout — and the survivors take its shards in a few batched
/// transactions. The sharp check is the detection histogram (the verdict
/// came after under 3 s of silence, before the idle timeout could fire);
/// the whole failover's bound is for a debug build beside four more
/// three-node tests on two cores (it took 4.0 s once in a clean-clone CI
/// run, against the 3.5 s bound of then).
#[test]
fn a_killed_node_is_found_dead_by_silence_and_its_shards_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, mut b, c, _) = three_nodes(dir);
    let owned = |n: &Node| status(n)["shards_owned"].as_u64().unwrap();
    b.kill();
    let started = Instant::now();
    let took = wait_for("the survivors to own every shard", Duration::from_secs(30), || {
        let s = status(&a);
        s["owners"].get("node-b").is_none() && owned(&a) + owned(&c) == u64::from(SHARDS)
    });
    eprintln!("kill -> every shard owned by the survivors: {took:?}");
    assert!(
        took < Duration::from_secs(6),
        "failover took {took:?}: detection or takeover stalled?"
    );
    // The survivors saw it die while its link could still be up, and
    // timed the detection and the takeover.
    let detections =
        metric(&a, "meshmail_mesh_detection_seconds_count") + metric(&c, "meshmail_mesh_detection_seconds_count");
    assert!(detections >= 2.0, "each survivor records one detection ({detections})");
    let detected_s = metric(&a, "meshmail_mesh_detection_seconds_sum");
    assert!(
        detected_s > 0.5 && detected_s < 3.0,
        "silence at the verdict: {detected_s} s"
    );
    let takeovers =
        metric(&a, "meshmail_mesh_takeover_seconds_count") + metric(&c, "meshmail_mesh_takeover_seconds_count");
    assert!(takeovers >= 1.0, "a takeover was timed ({takeovers})");
    let b_seen = status(&a)["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["node"] == "node-b")
        .cloned()
        .unwrap();
    assert_eq!(b_seen["status"], "dead", "{b_seen}");
    eprintln!("total {:?} since the kill", started.elapsed());
}

/// Issue 13: after a partition heals, links come back at once, not when a
/// redial backoff grown during the partition says so. The bound leaves room
/// for a debug build's TLS handshakes with other tests' nodes on the same
/// two cores (1.5 s held alone, 4-6 s with four more 3-node tests running);
/// a release measurement is still owed (soak/reports/failover-2026-12-01.md).
#[test]
fn links_come_back_promptly_after_a_partition_heals() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, b, c, _) = three_nodes(dir);
    let nodes = [&a, &b, &c];
    let mut times = Vec::new();
    for (i, ms) in [(0usize, 2500u64), (1, 3000), (2, 2500)] {
        let victim = nodes[i];
        let (code, body) = common::http_post(victim.addr("http"), &format!("/admin/faults/partition?ms={ms}"));
        assert_eq!(code, 200, "{body}");
        let heal = Instant::now() + Duration::from_millis(ms);
        wait_for("the partition to take effect", Duration::from_secs(5), || {
            !both_links_up(victim)
        });
        while Instant::now() < heal {
            std::thread::sleep(Duration::from_millis(10));
        }
        wait_for("links back after the heal", Duration::from_secs(15), || {
            nodes.iter().all(|n| both_links_up(n))
        });
        times.push(heal.elapsed());
    }
    eprintln!("partition heal -> every link up: {times:?}");
    for t in &times {
        assert!(*t < Duration::from_secs(8), "links back {t:?} after the heal");
    }
    wait_for("ownership to settle after the heals", Duration::from_secs(30), || {
        converged(u64::from(SHARDS), &nodes)
    });
}
