//! VacationResponse replies, over SMTP: a local sender gets the reply in
//! their INBOX, a remote one through the outbound queue (to a relay this
//! test runs), once per sender per period; automatic, list, null-sender and
//! blind-copy mail gets none.

mod common;
mod jmap_common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use common::{Node, setup_account, smtp_send, write_config};
use jmap_common::{api, basic};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";
const PW: &str = "secret";

fn calls(addr: &str, user: &str, calls: Value) -> Vec<Value> {
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail", "urn:ietf:params:jmap:vacationresponse"], "methodCalls": calls});
    let (status, v) = api(addr, &basic(user, PW), &body.to_string());
    assert_eq!(status, 200, "{v}");
    v["methodResponses"].as_array().cloned().unwrap_or_default()
}

/// The INBOX of Bob (account a2).
fn inbox(addr: &str, user: &str) -> Vec<Value> {
    let r = calls(
        addr,
        user,
        json!([
            ["Email/query", {"accountId": "a2", "filter": {"inMailbox": "m1"}, "sort": [{"property": "receivedAt", "isAscending": true}]}, "q"],
            ["Email/get", {"accountId": "a2", "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}, "properties": ["subject", "from", "inReplyTo", "header:Auto-Submitted:asText"]}, "g"]
        ]),
    );
    r[1][1]["list"].as_array().cloned().unwrap_or_default()
}

/// The replies counted by result (`meshmail_vacation_replies_total`).
fn replies(addr: &str, result: &str) -> u64 {
    let m = common::http_get(addr, "/metrics");
    let needle = format!("meshmail_vacation_replies_total{{result=\"{result}\"}} ");
    m.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A one-message SMTP relay: sends (MAIL FROM, RCPT TO, data) when done.
fn relay() -> (String, mpsc::Receiver<(String, String, String)>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut w) = conn else { return };
            w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut r = BufReader::new(w.try_clone().unwrap());
            let _ = w.write_all(b"220 relay.test\r\n");
            let (mut from, mut to, mut data) = (String::new(), String::new(), String::new());
            let mut line = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let upper = line.to_ascii_uppercase();
                let answer: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                    b"250 relay.test\r\n"
                } else if upper.starts_with("MAIL FROM:") {
                    from = line.trim_end().to_string();
                    b"250 ok\r\n"
                } else if upper.starts_with("RCPT TO:") {
                    to = line.trim_end().to_string();
                    b"250 ok\r\n"
                } else if upper.starts_with("DATA") {
                    let _ = w.write_all(b"354 go\r\n");
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 || line == ".\r\n" {
                            break;
                        }
                        data.push_str(&line);
                    }
                    let _ = tx.send((from.clone(), to.clone(), data.clone()));
                    b"250 queued\r\n"
                } else if upper.starts_with("QUIT") {
                    let _ = w.write_all(b"221 bye\r\n");
                    break;
                } else {
                    b"250 ok\r\n"
                };
                let _ = w.write_all(answer);
            }
        }
    });
    (addr, rx)
}

#[test]
fn a_vacation_response_answers_each_sender_once_and_never_automatic_mail() {
    let dir = tempfile::tempdir().unwrap();
    let (relay_addr, relayed) = relay();
    let config = write_config(
        dir.path(),
        &format!("[outbound]\nrelay = \"{relay_addr}\"\nretry_schedule_s = [1]\n"),
    );
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let node = Node::start(
        dir.path(),
        &["--allow-plaintext-auth-on-loopback"],
        &[("MESHMAIL_CONFIG", config.to_str().unwrap())],
    );
    let (http, smtp) = (node.addr("http"), node.addr("smtp"));
    let r = calls(
        http,
        ALICE,
        json!([["VacationResponse/set", {"accountId": "a1", "update": {"singleton": {"isEnabled": true, "subject": "Away", "textBody": "Back on Monday."}}}, "v"]]),
    );
    assert!(r[0][1]["updated"].get("singleton").is_some(), "{r:?}");

    let mail = |from: &str, extra: &str, to_header: &str, id: &str| {
        format!(
            "From: {from}\r\nTo: {to_header}\r\nSubject: Question {id}\r\nMessage-ID: <{id}@example.test>\r\n{extra}\r\nHello.\r\n"
        )
    };
    // A local sender: the reply is in Bob's INBOX when the 250 comes.
    let (code, _) = smtp_send(smtp, BOB, ALICE, &mail(BOB, "", ALICE, "q1"));
    assert_eq!(code, 250);
    let got = inbox(http, BOB);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["subject"], "Away");
    assert_eq!(got[0]["from"][0]["email"], ALICE);
    assert_eq!(got[0]["inReplyTo"], json!(["q1@example.test"]));
    assert_eq!(got[0]["header:Auto-Submitted:asText"], "auto-replied");
    // Once per sender per period (the address compared without case).
    let (code, _) = smtp_send(smtp, "Bob@example.test", ALICE, &mail(BOB, "", ALICE, "q2"));
    assert_eq!(code, 250);
    assert_eq!(inbox(http, BOB).len(), 1);
    assert_eq!(replies(http, "already_answered"), 1);

    // Mail that must not be answered.
    let remote = "carol@remote.test";
    for (from, extra, to_header, why) in [
        (remote, "Auto-Submitted: auto-generated\r\n", ALICE, "auto_submitted"),
        (remote, "Precedence: bulk\r\n", ALICE, "list"),
        (remote, "List-Id: <team.remote.test>\r\n", ALICE, "list"),
        (remote, "", "team@remote.test", "not_addressed"),
        ("", "", ALICE, "null_sender"),
    ] {
        let before = replies(http, why);
        let (code, _) = smtp_send(smtp, from, ALICE, &mail(remote, extra, to_header, "n"));
        assert_eq!(code, 250);
        assert_eq!(replies(http, why), before + 1, "{why}");
    }
    assert_eq!(replies(http, "sent"), 1);
    assert!(relayed.try_recv().is_err(), "nothing relayed yet");

    // A remote sender: through the outbound queue, from the null path.
    let (code, _) = smtp_send(smtp, remote, ALICE, &mail(remote, "", ALICE, "q3"));
    assert_eq!(code, 250);
    let (from, to, data) = relayed
        .recv_timeout(Duration::from_secs(60))
        .expect("the reply is relayed");
    assert!(from.starts_with("MAIL FROM:<>"), "{from}");
    assert!(to.contains(remote), "{to}");
    assert!(data.contains("Auto-Submitted: auto-replied\r\n"), "{data}");
    assert!(data.contains("In-Reply-To: <q3@example.test>"), "{data}");
    assert!(data.contains("Back on Monday."), "{data}");
    assert_eq!(replies(http, "sent"), 2);

    // Turned off: no more replies.
    calls(
        http,
        ALICE,
        json!([["VacationResponse/set", {"accountId": "a1", "update": {"singleton": {"isEnabled": false}}}, "v"]]),
    );
    let (code, _) = smtp_send(
        smtp,
        "dave@remote.test",
        ALICE,
        &mail("dave@remote.test", "", ALICE, "q4"),
    );
    assert_eq!(code, 250);
    assert_eq!(replies(http, "sent"), 2);
}
