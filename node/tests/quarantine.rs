//! Poison quarantine: a message that crashes the commit batcher three times
//! is quarantined (durably, with its reason) while the node keeps serving
//! other mail; an operator lists, shows, redelivers and drops items.

mod common;

use common::{Node, meshmail, run_ok, setup_account, smtp_send};

const USER: &str = "carol@example.org";

fn poison(n: u32) -> String {
    format!("X-Meshmail-Fault: panic\r\nSubject: poison {n}\r\n\r\nthis message crashes its handler")
}

fn metric(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn poison_is_quarantined_and_the_node_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, "pw");
    let node = Node::start(dir.path(), &[], &[("MESHMAIL_FAULT_HOOKS", "1")]);
    let smtp = node.addr("smtp").to_string();

    // Good mail flows while the poison message crashes the batcher.
    let good: Vec<_> = (0..8)
        .map(|i| {
            let smtp = smtp.clone();
            std::thread::spawn(move || {
                (0..10)
                    .map(|j| {
                        smtp_send(
                            &smtp,
                            "a@remote.example",
                            USER,
                            &format!("Subject: good {i}-{j}\r\n\r\nfine"),
                        )
                        .0
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let (code, text) = smtp_send(&smtp, "a@remote.example", USER, &poison(1));
    assert_eq!(code, 250, "a quarantined message is accepted (a final state): {text}");
    for g in good {
        assert!(g.join().unwrap().iter().all(|c| *c == 250), "good mail was refused");
    }
    // A second poison message, to be dropped later.
    assert_eq!(smtp_send(&smtp, "a@remote.example", USER, &poison(2)).0, 250);

    let metrics = common::http_get(node.addr("http"), "/metrics");
    assert!(
        metric(&metrics, "meshmail_actor_restarts_total{kind=\"commit_batcher\"}") >= 6.0,
        "three crashes each"
    );
    assert_eq!(metric(&metrics, "meshmail_quarantined_total"), 2.0);

    let list = run_ok(meshmail(dir.path()).args(["quarantine", "list"]), None);
    assert!(list.starts_with("2 item(s)"), "{list}");
    assert!(list.contains("handler crashed 3 times"), "{list}");
    let ids: Vec<String> = list
        .lines()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let show = run_ok(meshmail(dir.path()).args(["quarantine", "show", &ids[0]]), None);
    assert!(show.contains(USER), "{show}");

    let verify = run_ok(meshmail(dir.path()).args(["verify", "ledger"]), None);
    assert!(verify.contains("quarantined:    2"), "{verify}");
    assert!(verify.contains("delivered:      80"), "{verify}");

    // Redeliver one (through the running node's shard actor), drop the other.
    let out = run_ok(
        meshmail(dir.path()).args(["quarantine", "redeliver", &ids[0], "--node", node.addr("http")]),
        None,
    );
    assert!(out.contains("Delivered"), "{out}");
    run_ok(meshmail(dir.path()).args(["quarantine", "drop", &ids[1]]), None);
    let list = run_ok(meshmail(dir.path()).args(["quarantine", "list"]), None);
    assert!(list.starts_with("0 item(s)"), "{list}");
    let verify = run_ok(meshmail(dir.path()).args(["verify", "ledger"]), None);
    assert!(verify.contains("delivered:      81"), "{verify}");
    assert!(verify.contains("bounced:        1"), "{verify}");
    assert!(verify.contains("discrepancies:  0"), "{verify}");
}
