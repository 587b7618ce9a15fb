//! JMAP across a three-node mesh: a client on node A sees, through
//! `*/changes`, what an IMAP client changed on node C (and IMAP sees JMAP's
//! changes), and its EventSource and WebSocket pushes arrive within 50 ms
//! of a delivery made through node B's SMTP.

mod common;
mod jmap_common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Node, http_get, meshmail, run_ok, setup_account, smtp_send};
use futures::StreamExt;
use jmap_client::DataType;
use jmap_client::client::Client;
use jmap_client::email::Property;
use jmap_common::Imap;

const ALICE: &str = "alice@example.test";
const PW: &str = "secret";
const PUSH_LATENCY_MAX: Duration = Duration::from_millis(50);

fn start(dir: &Path, name: &str, seeds: &str) -> Node {
    common::start_mesh_node(dir, name, seeds, &[])
}

fn converged(nodes: &[&Node]) -> bool {
    nodes.iter().all(|n| {
        let r = http_get(n.addr("http"), "/status");
        let Some((_, body)) = r.split_once("\r\n\r\n") else {
            return false;
        };
        let Ok(s) = serde_json::from_str::<serde_json::Value>(body) else {
            return false;
        };
        let up = s["members"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["link"] == "up").count());
        let owned: u64 = s["owners"]
            .as_object()
            .map_or(0, |o| o.values().filter_map(|v| v.as_u64()).sum());
        up == nodes.len() - 1 && owned == 1024 && s["owners"].as_object().is_some_and(|o| o.len() == nodes.len())
    })
}

fn deliver(node: &Node, subject: &str) {
    let data = format!("From: dan@remote.test\r\nTo: {ALICE}\r\nSubject: {subject}\r\n\r\nhello\r\n");
    let (code, text) = smtp_send(node.addr("smtp"), "dan@remote.test", ALICE, &data);
    assert_eq!(code, 250, "{text}");
}

/// Delivers through `via`'s SMTP and returns how long after the 250 the
/// next push (as timestamped by `pushes`) arrived (zero if before).
async fn push_latency(
    via: &Node,
    subject: &str,
    pushes: &mut tokio::sync::mpsc::UnboundedReceiver<Instant>,
) -> Duration {
    while pushes.try_recv().is_ok() {}
    let smtp = via.addr("smtp").to_string();
    let subject = subject.to_string();
    let acked = tokio::task::spawn_blocking(move || {
        let data = format!("From: dan@remote.test\r\nTo: {ALICE}\r\nSubject: {subject}\r\n\r\nhello\r\n");
        let (code, text) = smtp_send(&smtp, "dan@remote.test", ALICE, &data);
        assert_eq!(code, 250, "{text}");
        Instant::now()
    })
    .await
    .unwrap();
    let pushed = tokio::time::timeout(Duration::from_secs(10), pushes.recv())
        .await
        .expect("a push within 10 s")
        .expect("push stream open");
    pushed.saturating_duration_since(acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_and_pushes_cross_nodes_and_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    setup_account(dir, ALICE, PW);
    run_ok(meshmail(dir).args(["cluster", "init"]), None);
    for n in ["node-a", "node-b", "node-c"] {
        run_ok(meshmail(dir).args(["cluster", "cert", n]), None);
    }
    let a = start(dir, "node-a", "");
    let seed = format!("node-a@{}", a.addr("mesh"));
    let b = start(dir, "node-b", &seed);
    let c = start(dir, "node-c", &seed);
    let started = Instant::now();
    while !converged(&[&a, &b, &c]) {
        assert!(started.elapsed() < Duration::from_secs(60), "mesh did not converge");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let client = Client::new()
        .credentials((ALICE, PW))
        .connect(&format!("http://{}", a.addr("http")))
        .await
        .unwrap();

    // EventSource on node A, timestamps every StateChange with new mail.
    let mut events = client
        .event_source(Some([DataType::EmailDelivery]), false, Some(30), None)
        .await
        .unwrap();
    let (tx, mut es_pushes) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Ok(jmap_client::event_source::PushNotification::StateChange(ch)) => {
                    if ch.has_type(DataType::EmailDelivery) {
                        let _ = tx.send(Instant::now());
                    }
                }
                Ok(_) => {}
                Err(_) => break, // the nodes stopped at the end
            }
        }
    });
    // The first push proves the stream (and node A's watch on the
    // account's owner) is up; then measure.
    push_latency(&b, "warm-up", &mut es_pushes).await;
    let mut es = Vec::new();
    for i in 0..5 {
        es.push(push_latency(&b, &format!("es {i}"), &mut es_pushes).await);
    }
    es.sort();
    eprintln!("EventSource push after SMTP 250 via another node: {es:?}");
    assert!(*es.last().unwrap() <= PUSH_LATENCY_MAX, "EventSource pushes: {es:?}");

    // The same over WebSocket (RFC 8887) with push enabled.
    let mut ws_client = Client::new()
        .credentials((ALICE, PW))
        .connect(&format!("http://{}", a.addr("http")))
        .await
        .unwrap();
    let mut ws = ws_client.connect_ws().await.unwrap();
    ws_client
        .enable_push_ws(None::<Vec<DataType>>, None::<String>)
        .await
        .unwrap();
    let (wtx, mut ws_pushes) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(m)) = ws.next().await {
            if let jmap_client::client_ws::WebSocketMessage::PushNotification(jmap_client::PushObject::StateChange {
                changed,
            }) = m
                && changed.values().any(|t| t.contains_key(&DataType::EmailDelivery))
            {
                let _ = wtx.send(Instant::now());
            }
        }
    });
    push_latency(&b, "ws warm-up", &mut ws_pushes).await;
    let mut wsl = Vec::new();
    for i in 0..5 {
        wsl.push(push_latency(&b, &format!("ws {i}"), &mut ws_pushes).await);
    }
    wsl.sort();
    eprintln!("WebSocket push after SMTP 250 via another node: {wsl:?}");
    assert!(*wsl.last().unwrap() <= PUSH_LATENCY_MAX, "WebSocket pushes: {wsl:?}");
    let _ = &mut ws_client;

    // IMAP on node C changes a flag; JMAP on node A sees it in Email/changes.
    let state = client.email_changes("s", None).await.unwrap().new_state().to_string();
    let mut imap = Imap::login(c.addr("imap"), ALICE, PW);
    imap.cmd("SELECT INBOX");
    let out = imap.cmd("UID STORE 1 +FLAGS (\\Flagged)");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let changes = client.email_changes(&state, None).await.unwrap();
    assert_eq!(
        changes.updated(),
        &["e1_1".to_string()],
        "IMAP STORE on C shows in JMAP on A"
    );
    assert!(changes.created().is_empty() && changes.destroyed().is_empty());

    // JMAP on node A changes keywords; IMAP on node C sees them.
    client.email_set_keyword("e1_2", "$seen", true).await.unwrap();
    let out = imap.cmd("UID FETCH 2 (FLAGS)");
    assert!(
        out.iter().any(|l| l.contains("\\Seen")),
        "JMAP write on A shows in IMAP on C: {out:?}"
    );
    // And an IMAP expunge is a JMAP destroy.
    let state = client
        .email_changes(changes.new_state(), None)
        .await
        .unwrap()
        .new_state()
        .to_string();
    imap.cmd("UID STORE 3 +FLAGS (\\Deleted)");
    imap.cmd("EXPUNGE");
    let changes = client.email_changes(&state, None).await.unwrap();
    assert_eq!(changes.destroyed(), &["e1_3".to_string()]);
    let gone = client.email_get("e1_3", Some([Property::Id])).await.unwrap();
    assert!(gone.is_none());
    deliver(&c, "last");
}
