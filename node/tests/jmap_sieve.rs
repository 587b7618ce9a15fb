//! JMAP Sieve (RFC 9661) over real sockets: the capability in the
//! Session, SieveScript/set create with an uploaded blob and activation,
//! /get, /query, /validate, new text, rename, destroy (never the active
//! script), /changes, the script's blob downloading byte-identical, a
//! script made over JMAP filing the next SMTP delivery and listed over
//! ManageSieve (and one put over ManageSieve seen over JMAP), and two
//! nodes of a mesh sharing the scripts.
//!
//! jmap-client 0.4 speaks the draft's error names (`invalidScript`,
//! `scriptIsActive`) where RFC 9661 registers `invalidSieve` and
//! `sieveIsActive`, and reads the Sieve limits from the Session-level
//! capability where the RFC puts them in `accountCapabilities`: those
//! checks are made over raw JSON; the rest goes through jmap-client.

mod common;
mod jmap_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Node, meshmail, run_ok, setup_account, smtp_send};
use jmap_client::client::Client;
use jmap_client::sieve::query::{Comparator, Filter};
use jmap_common::{api, basic, http};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";
const PW: &str = "secret";
const USING: [&str; 3] = [
    "urn:ietf:params:jmap:core",
    "urn:ietf:params:jmap:mail",
    "urn:ietf:params:jmap:sieve",
];

/// Files invoices into a folder it creates; CRLF and a trailing comment
/// so a byte-exact download is a real check.
const FILING: &str = "require [\"fileinto\", \"mailbox\"];\r\n\
if header :contains \"subject\" \"invoice\" {\r\n    fileinto :create \"Invoices\";\r\n}\r\n# end\r\n";
const FILING_V2: &str = "require [\"fileinto\", \"mailbox\"];\r\n\
if header :contains \"subject\" \"receipt\" {\r\n    fileinto :create \"Receipts\";\r\n}\r\n";
/// Fails at line 2, column 1: an unknown command.
const BAD: &str = "keep;\nfrobnicate;\n";

fn calls(addr: &str, calls: Value) -> Vec<Value> {
    let body = json!({"using": USING, "methodCalls": calls});
    let (status, v) = api(addr, &basic(ALICE, PW), &body.to_string());
    assert_eq!(status, 200, "{v}");
    v["methodResponses"].as_array().cloned().unwrap_or_default()
}

fn call(addr: &str, method: &str, args: Value) -> Value {
    let r = calls(addr, json!([[method, args, "c"]]));
    assert_eq!(r[0][0], method, "{}", r[0]);
    r[0][1].clone()
}

/// A node with Alice's account, JMAP and ManageSieve on loopback.
fn start_node() -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    let node = Node::start(
        dir.path(),
        &["--allow-plaintext-auth-on-loopback", "--managesieve", "127.0.0.1:0"],
        &[],
    );
    (dir, node)
}

async fn connect(addr: &str) -> Client {
    Client::new()
        .credentials((ALICE, PW))
        .connect(&format!("http://{addr}"))
        .await
        .expect("jmap-client connects")
}

/// Uploads `bytes` over raw HTTP; returns the blob id.
fn upload(addr: &str, bytes: &str) -> String {
    let (status, text) = http(
        addr,
        "POST",
        "/jmap/upload/a1/",
        Some(&basic(ALICE, PW)),
        bytes.as_bytes(),
    );
    assert_eq!(status, 201, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    v["blobId"].as_str().unwrap().to_string()
}

fn check_session(addr: &str) {
    let (status, text) = http(addr, "GET", "/.well-known/jmap", Some(&basic(ALICE, PW)), b"");
    assert_eq!(status, 200, "{text}");
    let s: Value = serde_json::from_str(&text).unwrap();
    let cap = "urn:ietf:params:jmap:sieve";
    assert_eq!(s["capabilities"][cap]["implementation"], "meshmail", "{s}");
    let acc = &s["accounts"]["a1"]["accountCapabilities"][cap];
    assert_eq!(acc["maxSizeScript"], 64 * 1024, "{acc}");
    assert_eq!(acc["maxNumberScripts"], 32, "{acc}");
    assert_eq!(acc["maxNumberRedirects"], 4, "{acc}");
    assert_eq!(acc["maxSizeScriptName"], 512, "{acc}");
    assert!(
        acc["notificationMethods"].is_null() && acc["externalLists"].is_null(),
        "{acc}"
    );
    let exts = acc["sieveExtensions"].as_array().unwrap();
    for e in ["fileinto", "mailbox", "vacation", "imap4flags"] {
        assert!(exts.iter().any(|x| x == e), "{e} in {acc}");
    }
    assert_eq!(s["primaryAccounts"][cap], "a1", "{s}");
}

/// A ManageSieve session logged in as Alice (AUTHENTICATE PLAIN).
struct Sieve {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Sieve {
    fn login(addr: &str) -> Sieve {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut m = Sieve {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        };
        m.until_status();
        let plain = b64(format!("\0{ALICE}\0{PW}").as_bytes());
        let out = m.cmd(&format!("AUTHENTICATE \"PLAIN\" \"{plain}\""));
        assert!(out.last().unwrap().starts_with("OK"), "{out:?}");
        m
    }

    /// Lines up to and with the status line (OK/NO/BYE), literals inlined.
    fn until_status(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "connection closed after {lines:?}");
            if let Some(n) = line.trim_end().strip_prefix('{').and_then(|l| l.strip_suffix('}')) {
                let mut buf = vec![0; n.parse().unwrap()];
                self.r.read_exact(&mut buf).unwrap();
                lines.push(String::from_utf8(buf).unwrap());
                continue;
            }
            let done = ["OK", "NO", "BYE"].iter().any(|s| line.starts_with(s));
            lines.push(line.trim_end().to_string());
            if done {
                return lines;
            }
        }
    }

    fn cmd(&mut self, command: &str) -> Vec<String> {
        self.w.write_all(format!("{command}\r\n").as_bytes()).unwrap();
        self.until_status()
    }
}

fn b64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Messages in Alice's mailbox `name` (0 if it does not exist).
fn count_in(addr: &str, name: &str) -> u64 {
    let r = calls(
        addr,
        json!([
            ["Mailbox/query", {"accountId": "a1", "filter": {"name": name}}, "m"],
            ["Mailbox/get", {"accountId": "a1", "#ids": {"resultOf": "m", "name": "Mailbox/query", "path": "/ids"}}, "g"]
        ]),
    );
    r[1][1]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .map_or(0, |m| m["totalEmails"].as_u64().unwrap())
}

fn deliver(smtp: &str, subject: &str) {
    let data = format!("From: dan@remote.test\r\nTo: {ALICE}\r\nSubject: {subject}\r\n\r\nhello\r\n");
    let (code, text) = smtp_send(smtp, "dan@remote.test", ALICE, &data);
    assert_eq!(code, 250, "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn scripts_over_jmap_are_managesieves_and_run_at_delivery() {
    let (_dir, node) = start_node();
    let addr = node.addr("http").to_string();
    check_session(&addr);
    let client = connect(&addr).await;

    // Upload + create + activate (jmap-client: one upload, one /set with
    // onSuccessActivateScript "#c0"); the activation shows in `created`.
    let created = client.sieve_script_create("filing", FILING, true).await.unwrap();
    let id = created.id().unwrap().to_string();
    assert!(created.is_active(), "{created:?}");
    let got = client.sieve_script_get(&id, None::<Vec<_>>).await.unwrap().unwrap();
    assert_eq!((got.name(), got.is_active()), (Some("filing"), true));
    let blob = got.blob_id().unwrap().to_string();
    assert_eq!(
        client.download(&blob).await.unwrap(),
        FILING.as_bytes(),
        "byte-identical"
    );
    let other = client.sieve_script_create("other", "keep;\n", false).await.unwrap();
    let other_id = other.id().unwrap().to_string();

    // Query: filter and sort.
    let q = client
        .sieve_script_query(Some(Filter::is_active(true)), None::<Vec<_>>)
        .await
        .unwrap();
    assert_eq!(q.ids(), [id.as_str()]);
    let q = client
        .sieve_script_query(Some(Filter::name("OTH")), None::<Vec<_>>)
        .await
        .unwrap();
    assert_eq!(q.ids(), [other_id.as_str()]);
    let q = client
        .sieve_script_query(None::<Filter>, Some([Comparator::name()]))
        .await
        .unwrap();
    assert_eq!(q.ids(), [id.as_str(), other_id.as_str()]);
    let q = client
        .sieve_script_query(None::<Filter>, Some([Comparator::is_active().descending()]))
        .await
        .unwrap();
    assert_eq!(q.ids()[0], id, "the active script first");

    // Validate: a good script is fine through jmap-client; a bad one is
    // invalidSieve with its line and column (raw JSON: see the top).
    client.sieve_script_validate(FILING_V2).await.unwrap();
    let bad_blob = upload(&addr, BAD);
    let v = call(
        &addr,
        "SieveScript/validate",
        json!({"accountId": "a1", "blobId": bad_blob}),
    );
    assert_eq!(v["error"]["type"], "invalidSieve", "{v}");
    assert!(
        v["error"]["description"]
            .as_str()
            .unwrap()
            .starts_with("line 2, column 1:"),
        "{v}"
    );
    let v = call(
        &addr,
        "SieveScript/validate",
        json!({"accountId": "a1", "blobId": upload(&addr, "keep;")}),
    );
    assert!(v["error"].is_null(), "{v}");
    let state = call(&addr, "SieveScript/get", json!({"accountId": "a1", "ids": []}))["state"].clone();

    // The active script files the next delivery.
    deliver(node.addr("smtp"), "your invoice 42");
    assert_eq!(count_in(&addr, "Invoices"), 1, "filed by the JMAP script");

    // Errors of /set, over raw JSON.
    let r = call(
        &addr,
        "SieveScript/set",
        json!({"accountId": "a1",
            "create": {"dup": {"name": "other", "blobId": upload(&addr, "keep;")},
                       "bad": {"name": "bad", "blobId": bad_blob},
                       "act": {"name": "x", "blobId": upload(&addr, "keep;"), "isActive": true},
                       "nob": {"name": "y", "blobId": "U0000"}},
            "destroy": [id.clone()]}),
    );
    assert_eq!(r["notCreated"]["dup"]["type"], "alreadyExists", "{r}");
    assert_eq!(r["notCreated"]["dup"]["existingId"], other_id.as_str(), "{r}");
    assert_eq!(r["notCreated"]["bad"]["type"], "invalidSieve", "{r}");
    assert!(
        r["notCreated"]["bad"]["description"]
            .as_str()
            .unwrap()
            .contains("line 2, column 1"),
        "{r}"
    );
    assert_eq!(r["notCreated"]["act"]["type"], "invalidProperties", "{r}");
    assert_eq!(r["notCreated"]["nob"]["type"], "blobNotFound", "{r}");
    assert_eq!(r["notDestroyed"][id.as_str()]["type"], "sieveIsActive", "{r}");

    // New text, then a rename: same id, still active, new blob.
    client.sieve_script_replace(&id, FILING_V2, false).await.unwrap();
    client.sieve_script_rename(&id, "renamed", false).await.unwrap();
    let got = client.sieve_script_get(&id, None::<Vec<_>>).await.unwrap().unwrap();
    assert_eq!((got.name(), got.is_active()), (Some("renamed"), true));
    assert_ne!(got.blob_id().unwrap(), blob);
    assert_eq!(
        client.download(got.blob_id().unwrap()).await.unwrap(),
        FILING_V2.as_bytes()
    );
    deliver(node.addr("smtp"), "a receipt");
    assert_eq!(count_in(&addr, "Receipts"), 1, "the new text runs");

    // ManageSieve sees JMAP's scripts; JMAP sees ManageSieve's.
    let mut ms = Sieve::login(node.addr("managesieve"));
    let list = ms.cmd("LISTSCRIPTS");
    assert!(list.contains(&"\"renamed\" ACTIVE".to_string()), "{list:?}");
    assert!(list.contains(&"\"other\"".to_string()), "{list:?}");
    let text = ms.cmd("GETSCRIPT \"renamed\"");
    assert_eq!(text[0], FILING_V2, "{text:?}");
    let from_ms = "discard;\r\n";
    let put = ms.cmd(&format!("PUTSCRIPT \"from-ms\" {{{}+}}\r\n{from_ms}", from_ms.len()));
    assert!(put.last().unwrap().starts_with("OK"), "{put:?}");
    let q = client
        .sieve_script_query(Some(Filter::name("from-ms")), None::<Vec<_>>)
        .await
        .unwrap();
    let ms_script = client
        .sieve_script_get(q.ids()[0].as_ref(), None::<Vec<_>>)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        client.download(ms_script.blob_id().unwrap()).await.unwrap(),
        from_ms.as_bytes()
    );

    // /changes since the state read before the edits.
    let ch = call(
        &addr,
        "SieveScript/changes",
        json!({"accountId": "a1", "sinceState": state}),
    );
    assert_eq!(ch["created"], json!([ms_script.id().unwrap()]), "{ch}");
    assert_eq!(ch["updated"], json!([id.clone()]), "{ch}");

    // Deactivate, then the script may go.
    client.sieve_script_deactivate().await.unwrap();
    assert!(
        !client
            .sieve_script_get(&id, None::<Vec<_>>)
            .await
            .unwrap()
            .unwrap()
            .is_active()
    );
    client.sieve_script_destroy(&id).await.unwrap();
    assert!(client.sieve_script_get(&id, None::<Vec<_>>).await.unwrap().is_none());
    let list = ms.cmd("LISTSCRIPTS");
    assert!(!list.iter().any(|l| l.contains("renamed")), "{list:?}");

    let metrics = common::http_get(&addr, "/metrics");
    assert!(
        common::metric_in(
            &metrics,
            "meshmail_jmap_calls_total{method=\"SieveScript/set\",result=\"ok\"}"
        ) >= 5.0,
        "per-method counts"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_set_on_one_node_runs_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    setup_account(dir, ALICE, PW);
    run_ok(meshmail(dir).args(["cluster", "init"]), None);
    for n in ["node-a", "node-b"] {
        run_ok(meshmail(dir).args(["cluster", "cert", n]), None);
    }
    let a = common::start_mesh_node(dir, "node-a", "", &[]);
    let seed = format!("node-a@{}", a.addr("mesh"));
    let b = common::start_mesh_node(dir, "node-b", &seed, &[]);
    common::wait_for("the mesh", Duration::from_secs(60), || {
        common::converged(1024, &[&a, &b])
    });

    let (a_http, b_http) = (a.addr("http").to_string(), b.addr("http").to_string());
    let r = call(
        &a_http,
        "SieveScript/set",
        json!({"accountId": "a1",
            "create": {"s": {"name": "mesh", "blobId": upload(&a_http, FILING)}},
            "onSuccessActivateScript": "#s"}),
    );
    assert_eq!(r["created"]["s"]["isActive"], true, "{r}");
    let id = r["created"]["s"]["id"].as_str().unwrap().to_string();
    let got = call(&b_http, "SieveScript/get", json!({"accountId": "a1", "ids": [id]}));
    assert_eq!(got["list"][0]["isActive"], true, "node B sees node A's script: {got}");
    let blob = got["list"][0]["blobId"].as_str().unwrap();
    let (status, text) = http(
        &b_http,
        "GET",
        &format!("/jmap/download/a1/{blob}/s"),
        Some(&basic(ALICE, PW)),
        b"",
    );
    assert_eq!((status, text.as_str()), (200, FILING));
    deliver(b.addr("smtp"), "invoice via b");
    assert_eq!(
        count_in(&a_http, "Invoices"),
        1,
        "filed by a script set through another node"
    );
}

/// Push (RFC 8620 §7.3) carries `SieveScript` state changes: a client
/// subscribed to that type alone hears of a script created over JMAP and
/// of one activated over ManageSieve, each within 10 s (in practice at
/// once: the write publishes a hint on the account).
#[tokio::test(flavor = "multi_thread")]
async fn script_changes_are_pushed() {
    use jmap_client::DataType;
    use jmap_client::event_source::PushNotification;
    let (_dir, node) = start_node();
    let addr = node.addr("http").to_string();
    let client = connect(&addr).await;
    let mut events = client
        .event_source(Some([DataType::SieveScript]), false, Some(30), None)
        .await
        .unwrap();
    let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        use futures::StreamExt;
        while let Some(event) = events.next().await {
            match event {
                Ok(PushNotification::StateChange(ch)) if ch.has_type(DataType::SieveScript) => {
                    let _ = tx.send(());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    let next_push = async |pushes: &mut tokio::sync::mpsc::UnboundedReceiver<()>, what: &str| {
        tokio::time::timeout(Duration::from_secs(10), pushes.recv())
            .await
            .unwrap_or_else(|_| panic!("no SieveScript push after {what}"))
            .expect("the stream ended");
    };
    // The node answers the EventSource request once the stream has
    // subscribed: every write from here on is pushed.
    client.sieve_script_create("pushed", "keep;\n", false).await.unwrap();
    next_push(&mut pushes, "SieveScript/set create").await;
    let addr_ms = node.addr("managesieve").to_string();
    tokio::task::spawn_blocking(move || {
        let mut ms = Sieve::login(&addr_ms);
        let out = ms.cmd("SETACTIVE \"pushed\"");
        assert!(out.last().unwrap().starts_with("OK"), "{out:?}");
    })
    .await
    .unwrap();
    next_push(&mut pushes, "ManageSieve SETACTIVE").await;
}
