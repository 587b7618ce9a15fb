//! The golden invariant under SIGKILL: many connections deliver while the
//! node is killed at a random moment. After a restart, the ledger verifier
//! passes and every message the client saw a 250 for is stored exactly once.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Node, setup_account};
use meshmail_storage::blob::{BlobConfig, BlobStore};
use meshmail_storage::model::{accounts, mailboxes, messages};

const USER: &str = "crash@example.org";

/// Sends messages on one connection until `deadline` or an error, recording
/// each test id the moment it gets a 250; returns how many it sent.
fn client(addr: String, worker: usize, round: usize, deadline: Instant, acked: &Mutex<Vec<String>>) -> usize {
    let mut sent = 0;
    let Ok(stream) = TcpStream::connect(&addr) else {
        return sent;
    };
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    let mut reply = || -> Option<u16> {
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if line.as_bytes().get(3) != Some(&b'-') {
                return line.get(..3)?.parse().ok();
            }
        }
    };
    if reply() != Some(220) {
        return sent;
    }
    if w.write_all(b"EHLO load.example\r\n").is_err() || reply() != Some(250) {
        return sent;
    }
    let mut n = 0;
    while Instant::now() < deadline {
        let id = format!("w{worker}-r{round}-m{n}");
        n += 1;
        let msg = format!(
            "MAIL FROM:<load@remote.example>\r\nRCPT TO:<{USER}>\r\nDATA\r\n\
             X-Test-Id: {id}\r\nSubject: crash {id}\r\n\r\nbody of {id}\r\n.\r\n"
        );
        if w.write_all(msg.as_bytes()).is_err() {
            return sent;
        }
        sent += 1;
        let codes = [reply(), reply(), reply(), reply()];
        match codes {
            [Some(250), Some(250), Some(354), Some(250)] => acked.lock().unwrap().push(id),
            [_, _, _, None] | [None, ..] => return sent,
            _ => {}
        }
    }
    sent
}

#[test]
fn sigkill_during_deliveries_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, "pw");
    let mut node = Node::start(dir.path(), &[], &[]);
    let addr = node.addr("smtp").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..16)
        .map(|w| {
            let (addr, acked) = (addr.clone(), acked.clone());
            std::thread::spawn(move || {
                // A new connection every 50 messages until the node dies
                // or the deadline: many connections.
                let mut round = 0;
                while Instant::now() < deadline {
                    let per_conn = Instant::now() + Duration::from_millis(500);
                    let sent = client(addr.clone(), w, round, per_conn.min(deadline), &acked);
                    round += 1;
                    if sent == 0 && TcpStream::connect(&addr).is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    // Kill once enough mail is flowing, at a random moment after that.
    let kill_after = rand::random_range(0..1500u64);
    let wait_started = Instant::now();
    while acked.lock().unwrap().len() < 1500 && wait_started.elapsed() < Duration::from_secs(25) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(kill_after));
    node.kill(); // SIGKILL
    for w in workers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 1500,
        "only {} messages acknowledged before the kill",
        acked.len()
    );

    // Restart: the node comes back on the same store, and the ledger is whole.
    let node = Node::start(dir.path(), &[], &[]);
    drop(node);
    let verify = common::meshmail(dir.path())
        .args(["verify", "ledger"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "verify ledger failed:\n{text}");

    // Every acknowledged id is stored exactly once.
    let stored = stored_test_ids(dir.path());
    let mut missing = 0;
    let mut duplicated = 0;
    for id in &acked {
        match stored.get(id) {
            None => missing += 1,
            Some(n) if *n > 1 => duplicated += 1,
            _ => {}
        }
    }
    eprintln!(
        "crash test: {} acknowledged, {} stored, kill after {kill_after} ms past 1500 acks",
        acked.len(),
        stored.len()
    );
    assert_eq!(missing, 0, "acknowledged messages lost");
    assert_eq!(duplicated, 0, "acknowledged messages stored twice");
}

/// X-Test-Id → number of stored copies, read straight from the store.
fn stored_test_ids(data_dir: &std::path::Path) -> HashMap<String, usize> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = common::open_store(data_dir);
        let blobs = BlobStore::open(
            &BlobConfig::Local {
                dir: data_dir.join("blobs"),
            },
            65536,
        )
        .await
        .unwrap();
        let (account, inbox) = db
            .read("t", |txn| async move {
                let a = accounts::get(&txn, USER).await?.unwrap();
                let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
                Ok::<_, meshmail_storage::StorageError>((a.id, inbox.id))
            })
            .await
            .unwrap();
        let mut out = HashMap::new();
        let mut from = 1u32;
        loop {
            let page = db
                .read("t", move |txn| async move {
                    messages::list(&txn, account, inbox, from, 500).await
                })
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            from = last.uid + 1;
            for m in &page {
                let body = blobs.get(&db, &m.body).await.unwrap();
                let text = String::from_utf8_lossy(&body);
                let id = text
                    .lines()
                    .find_map(|l| l.strip_prefix("X-Test-Id: "))
                    .expect("test id header")
                    .trim()
                    .to_string();
                *out.entry(id).or_insert(0) += 1;
            }
        }
        out
    })
}
