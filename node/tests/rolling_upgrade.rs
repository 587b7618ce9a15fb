//! Issue 42 item 1: a rolling upgrade without downtime. Three nodes of the
//! previous store format (format 3) take SMTP, IMAP and JMAP load; each is
//! drained, stopped and started again on this build's newest format, one
//! at a time. The store stays at format 3 (what the old nodes read) until
//! the last node runs the new build; then it switches to format 4 on its
//! own, and a node of the old format can no longer join.
//!
//! "The previous format" is this binary pinned to it (`--pin-store-format
//! 3`), not a second build of the previous release: the pin makes a node
//! refuse newer stores, advertise only format 3 and never switch, which is
//! everything the upgrade path depends on, and CI builds one binary
//! instead of two (a build of the previous commit would double the node's
//! compile time and disk). The same scenario against a real build of the
//! previous release is `chaos/scenarios/rolling-upgrade.toml` (its
//! `old_binary`), run by hand and reported in `soak/reports/`.

mod common;
mod jmap_common;
mod upgrade_load;

use std::path::Path;
use std::time::Duration;

use common::{LISTENERS_ON_PORT_0, Node, converged, meshmail, run_ok, status, wait_for};
use upgrade_load::{Endpoints, Load, Slots};

const EMAIL: &str = "upgrade@example.test";
const PASSWORD: &str = "pw";
const SHARDS: u32 = 1024;
const NAMES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// Admin commands as a build of format 3 would run them (a new store they
/// start is then of format 3, as the previous release's would be).
fn old_admin(dir: &Path, args: &[&str], stdin: Option<&str>) -> String {
    run_ok(meshmail(dir).args(["--pin-store-format", "3"]).args(args), stdin)
}

fn start(dir: &Path, name: &str, seeds: &str, old: bool) -> Node {
    let env: &[(&str, &str)] = if old {
        &[("MESHMAIL_PIN_STORE_FORMAT", "3")]
    } else {
        &[]
    };
    common::start_mesh_node(dir, name, seeds, env)
}

fn endpoints(n: &Node) -> Endpoints {
    Endpoints {
        smtp: n.addr("smtp").to_string(),
        imap: n.addr("imap").to_string(),
        http: n.addr("http").to_string(),
    }
}

fn store_format(dir: &Path) -> Option<u32> {
    let db = common::open_store(dir);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        db.read("t", |txn| async move {
            meshmail_storage::model::cluster::store_format(&txn).await
        })
        .await
        .unwrap()
    })
}

/// The version (first byte) of every INBOX row, counted.
fn row_versions(dir: &Path) -> std::collections::BTreeMap<u8, u64> {
    use meshmail_storage::model::{accounts, mailboxes, message_reads};
    let db = common::open_store(dir);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        db.read("t", |txn| async move {
            let account = accounts::get(&txn, EMAIL).await?.expect("the account").id;
            let inbox = mailboxes::find(&txn, account, "INBOX").await?.expect("INBOX").id;
            message_reads::row_versions(&txn, account, inbox).await
        })
        .await
        .unwrap()
    })
}

/// Drains `node` (it hands its shards over), stops it and starts it again
/// on this build's newest format.
fn upgrade(dir: &Path, slots: &Slots, i: usize, node: &mut Node, seed: &str) {
    slots.set(i, None);
    run_ok(
        meshmail(dir).args(["node", "drain", "--node", node.addr("http"), "--timeout-s", "60"]),
        None,
    );
    node.kill();
    *node = start(dir, NAMES[i], seed, false);
    let s = status(node);
    assert_eq!(s["formats"]["max"], 4, "{s}");
    slots.set(i, Some(endpoints(node)));
}

#[test]
fn three_nodes_upgrade_one_at_a_time_under_load_and_the_store_switches_after_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    old_admin(dir, &["domain", "add", "example.test"], None);
    old_admin(dir, &["account", "add", EMAIL, "--password-stdin"], Some(PASSWORD));
    old_admin(dir, &["cluster", "init"], None);
    for n in NAMES {
        old_admin(dir, &["cluster", "cert", n], None);
    }
    assert_eq!(store_format(dir), Some(3), "a store the previous release started");

    let a = start(dir, NAMES[0], "", true);
    let seed = format!("{}@{}", NAMES[0], a.addr("mesh"));
    let mut nodes = [a, start(dir, NAMES[1], &seed, true), start(dir, NAMES[2], &seed, true)];
    wait_for("the old mesh to converge", Duration::from_secs(60), || {
        converged(u64::from(SHARDS), &nodes.iter().collect::<Vec<_>>())
    });
    let slots = Slots::new(3);
    for (i, n) in nodes.iter().enumerate() {
        slots.set(i, Some(endpoints(n)));
    }
    let load = Load::start(slots.clone(), EMAIL, PASSWORD, 20_000, Duration::from_secs(240));
    let progressed = |from: u64| {
        let sent = load.sent.clone();
        wait_for("mail to flow", Duration::from_secs(60), move || {
            sent.load(std::sync::atomic::Ordering::SeqCst) >= from + 30
        });
    };
    progressed(0);

    for i in 0..3 {
        let seed = if i == 0 {
            format!("{}@{}", NAMES[1], nodes[1].addr("mesh"))
        } else {
            format!("{}@{}", NAMES[0], nodes[0].addr("mesh"))
        };
        upgrade(dir, &slots, i, &mut nodes[i], &seed);
        wait_for("the mesh to converge again", Duration::from_secs(60), || {
            converged(u64::from(SHARDS), &nodes.iter().collect::<Vec<_>>())
        });
        progressed(load.sent.load(std::sync::atomic::Ordering::SeqCst));
        if i < 2 {
            // Old nodes still run: nothing they cannot read is written.
            assert_eq!(store_format(dir), Some(3), "after upgrading {} node(s)", i + 1);
            assert_eq!(status(&nodes[i])["store_format"], 3);
            assert_eq!(row_versions(dir).get(&4), None, "no version-4 row while old nodes run");
        }
    }
    // Every node now supports format 4: one of them switches the store
    // (each tries every 5 s), and all write it from their next read.
    let took = wait_for("the store to switch to format 4", Duration::from_secs(30), || {
        store_format(dir) == Some(4) && nodes.iter().all(|n| status(n)["store_format"] == 4)
    });
    eprintln!("switched {took:?} after the last upgrade");
    let before = load.sent.load(std::sync::atomic::Ordering::SeqCst);
    progressed(before);
    let retried: Vec<u64> = load.retried.lock().unwrap().keys().copied().collect();
    let tallies = load.finish();
    let acked = tallies["smtp"].ok;
    eprintln!("load: {tallies:#?}");

    let versions = row_versions(dir);
    eprintln!("INBOX rows by version: {versions:?}");
    assert!(
        versions.get(&4).copied().unwrap_or(0) > 0,
        "new mail is written as version 4: {versions:?}"
    );
    assert!(
        versions.get(&2).copied().unwrap_or(0) > 0,
        "rows of before the switch stay readable: {versions:?}"
    );

    // 0 lost: every acknowledged message is there once (a message is there
    // twice only if its first try failed after it was kept).
    let subjects = inbox_subjects(nodes[2].addr("imap"));
    for n in 0..acked {
        let copies = subjects.get(&n).copied().unwrap_or(0);
        assert!(copies >= 1, "message {n} was acknowledged and is missing");
        assert!(
            copies == 1 || retried.contains(&n),
            "message {n} is there {copies} times"
        );
    }
    let out = run_ok(meshmail(dir).args(["verify", "ledger"]), None);
    eprintln!("{out}");
    for (kind, t) in &tallies {
        assert_eq!(t.errors, 0, "{kind} clients saw errors on nodes that stayed up: {t:?}");
        assert!(t.ok > 10, "{kind} did work: {t:?}");
    }

    // A node of the previous format can no longer join, and says why.
    let refused = refused_old_node(dir);
    assert!(
        refused.contains("the store has format 4") && refused.contains("knows formats up to 3"),
        "the refusal names both formats: {refused}"
    );
    let out = run_ok(meshmail(dir).arg("status"), None);
    assert!(out.contains("store format: 4"), "{out}");
    assert!(out.contains("formats 1..=4"), "{out}");
}

fn refused_old_node(dir: &Path) -> String {
    let out = meshmail(dir)
        .args(["--pin-store-format", "3", "serve", "--node-name", "node-old"])
        .args(LISTENERS_ON_PORT_0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "a node of format 3 must not start: {stderr}");
    stderr
}

/// Subject number → copies in INBOX.
fn inbox_subjects(imap: &str) -> std::collections::BTreeMap<u64, usize> {
    let mut c = jmap_common::Imap::login(imap, EMAIL, PASSWORD);
    c.cmd("SELECT INBOX");
    let lines = c.cmd("FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
    let mut out = std::collections::BTreeMap::new();
    for l in &lines {
        if let Some(rest) = l.split("upgrade-").nth(1) {
            let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            *out.entry(n.parse().unwrap()).or_default() += 1;
        }
    }
    out
}
