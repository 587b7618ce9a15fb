//! Fencing under clock skew, over real processes: three `meshmail serve`
//! nodes on one store; node-c's wall clock jumps an hour ahead (far more
//! than any period the code knows: peers declare a silent node dead after
//! `dead_after_ms` = 1 s, outbound claims last 30 min), then node-c is cut
//! off from the mesh until its peers have taken its shards over. Its clock
//! and its lease cache still say it holds the shard it held; the store
//! refuses its write under that stale epoch all the same, because the fence
//! compares epochs, never times. When the partition heals, the leases
//! node-c takes back carry its skewed `acquired_ms`: proof that the lease
//! path really reads the one skewable clock.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Node, converged, http_get, meshmail, run_ok, setup_account, status, wait_for};

const SHARDS: u64 = 1024;
/// Beyond every period: 1 h (claims 30 min, stale sweep markers 15 min, death 1 s).
const JUMP_S: u64 = 3600;

fn start(dir: &Path, name: &str, seeds: &str) -> Node {
    common::start_mesh_node(dir, name, seeds, &[("MESHMAIL_FAULT_HOOKS", "1")])
}

/// (owner, epoch) of `shard` in `node`'s last lease scan.
fn lease_of(node: &Node, shard: u64) -> Option<(String, u64)> {
    status(node)["leases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["shard"] == shard)
        .map(|l| (l["node"].as_str().unwrap().to_string(), l["epoch"].as_u64().unwrap()))
}

/// The leases in the store: (shard, node, epoch, acquired_ms).
fn stored_leases(dir: &Path) -> Vec<(u32, String, u64, u64)> {
    let db = common::open_store(dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(db.read("test", |txn| async move {
        meshmail_storage::model::nodes::list_leases(&txn, 0, 10_000).await
    }))
    .unwrap()
    .into_iter()
    .filter(|l| !l.released)
    .map(|l| (l.shard, l.node, l.epoch, l.acquired_ms))
    .collect()
}

#[test]
fn a_node_whose_clock_jumped_past_the_lease_period_cannot_write_under_a_lost_lease() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    setup_account(dir, "skew@example.test", "pw");
    run_ok(meshmail(dir).args(["cluster", "init"]), None);
    for n in ["node-a", "node-b", "node-c"] {
        run_ok(meshmail(dir).args(["cluster", "cert", n]), None);
    }
    let a = start(dir, "node-a", "");
    let seed = format!("node-a@{}", a.addr("mesh"));
    let b = start(dir, "node-b", &seed);
    let c = start(dir, "node-c", &seed);
    wait_for("the three nodes to converge", Duration::from_secs(60), || {
        converged(SHARDS, &[&a, &b, &c])
    });

    // A shard node-c holds, and the epoch it fences its writes with.
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
    // While it holds the lease its write commits: the check below can pass or fail.
    assert_eq!(common::http_post(c.addr("http"), &probe).0, 200);

    // node-c's clock jumps an hour ahead.
    let real_before = meshmail_storage::clock::system_now_ms();
    let (code, body) = common::http_post(c.addr("http"), &format!("/admin/faults/clock-jump?offset_s={JUMP_S}"));
    assert_eq!(code, 200, "{body}");
    let skewed_now: u64 = body.rsplit("now_ms ").next().unwrap().trim().parse().unwrap();
    assert!(
        skewed_now >= real_before + JUMP_S * 1000,
        "node-c reads {skewed_now}, real {real_before}"
    );
    let metrics = http_get(c.addr("http"), "/metrics");
    assert!(
        metrics.contains(&format!("meshmail_clock_offset_seconds {JUMP_S}")),
        "{metrics}"
    );

    // Cut it off until its peers have taken the shard over (a higher epoch).
    let (code, body) = common::http_post(c.addr("http"), "/admin/faults/partition?ms=6000");
    assert_eq!(code, 200, "{body}");
    let took = wait_for("node-c's shard to be taken over", Duration::from_secs(30), || {
        lease_of(&a, shard).is_some_and(|(node, e)| node != "node-c" && e > epoch)
    });
    eprintln!("shard {shard} taken over {took:?} after the partition began");

    // node-c still believes, by its lease cache and its clock, that it holds
    // the shard at `epoch`; the store refuses the write anyway.
    let (code, body) = common::http_post(c.addr("http"), &probe);
    assert_eq!(
        code, 409,
        "a write under a lost lease committed on the skewed node: {body}"
    );
    assert!(body.contains("fenced"), "{body}");
    let fenced: f64 = http_get(c.addr("http"), "/metrics")
        .lines()
        .find(|l| l.starts_with("meshmail_lease_fenced_total"))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
        .unwrap_or(0.0);
    assert!(fenced >= 1.0, "the refusal is counted: {fenced}");

    // After the heal node-c takes shards back, stamped by its skewed clock.
    wait_for("convergence after the heal", Duration::from_secs(90), || {
        converged(SHARDS, &[&a, &b, &c])
    });
    let skewed: Vec<_> = stored_leases(dir)
        .into_iter()
        .filter(|l| l.1 == "node-c" && l.3 >= real_before + (JUMP_S - 60) * 1000)
        .collect();
    assert!(!skewed.is_empty(), "no lease of node-c carries its skewed acquired_ms");
    // The old epoch stays fenced after the heal too.
    assert_eq!(common::http_post(c.addr("http"), &probe).0, 409);
    let (code, _) = common::http_post(c.addr("http"), "/admin/faults/clock-jump?offset_s=0");
    assert_eq!(code, 200);
}
