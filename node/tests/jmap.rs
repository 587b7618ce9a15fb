//! JMAP on one node, driven by a third-party client (`jmap-client`) over
//! real sockets, and the protocol errors a client library would never send,
//! over raw HTTP.

mod common;
mod jmap_common;

use common::{Node, setup_account, smtp_send, write_config};
use jmap_client::client::Client;
use jmap_client::core::query::Filter;
use jmap_client::email::{self, Property};
use jmap_client::mailbox::Role;
use jmap_common::{api, basic, http};
use serde_json::json;

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";
const PW: &str = "secret";

fn start(dir: &std::path::Path, extra: &[&str]) -> Node {
    setup_account(dir, ALICE, PW);
    setup_account(dir, BOB, PW);
    Node::start(dir, &[&["--allow-plaintext-auth-on-loopback"], extra].concat(), &[])
}

async fn connect(node: &Node, user: &str) -> Client {
    Client::new()
        .credentials((user, PW))
        .connect(&format!("http://{}", node.addr("http")))
        .await
        .expect("jmap-client connects")
}

async fn inbox(client: &Client) -> String {
    let q = client
        .mailbox_query(
            Some(jmap_client::mailbox::query::Filter::role(Role::Inbox)),
            None::<Vec<_>>,
        )
        .await
        .unwrap();
    q.ids()[0].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jmap_client_reads_flags_imports_uploads_and_submits() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), &[]);
    let (code, _) = smtp_send(
        node.addr("smtp"),
        "carol@remote.test",
        ALICE,
        "From: Carol <carol@remote.test>\r\nTo: alice@example.test\r\nSubject: Lunch?\r\nMessage-ID: <lunch@remote.test>\r\n\r\nAt noon.\r\n",
    );
    assert_eq!(code, 250);

    let alice = connect(&node, ALICE).await;
    assert_eq!(alice.session().username(), ALICE);
    let inbox_id = inbox(&alice).await;
    let mb = alice.mailbox_get(&inbox_id, None::<Vec<_>>).await.unwrap().unwrap();
    assert_eq!((mb.total_emails(), mb.unread_emails()), (1, 1));

    let state_before = alice.email_changes("s", None).await.unwrap().new_state().to_string();
    let ids = alice
        .email_query(Some(email::query::Filter::in_mailbox(&inbox_id)), None::<Vec<_>>)
        .await
        .unwrap()
        .take_ids();
    assert_eq!(ids.len(), 1);
    let e = alice
        .email_get(
            &ids[0],
            Some([Property::Subject, Property::From, Property::Preview, Property::ThreadId]),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.subject(), Some("Lunch?"));
    assert_eq!(e.from().unwrap()[0].email(), "carol@remote.test");
    assert_eq!(e.preview(), Some("At noon."));

    // Email/set keywords goes through the shard actor: the unread count drops.
    alice.email_set_keyword(&ids[0], "$seen", true).await.unwrap();
    let e = alice
        .email_get(&ids[0], Some([Property::Keywords]))
        .await
        .unwrap()
        .unwrap();
    assert!(e.keywords().contains(&"$seen"), "{:?}", e.keywords());
    let mb = alice.mailbox_get(&inbox_id, None::<Vec<_>>).await.unwrap().unwrap();
    assert_eq!(mb.unread_emails(), 0);
    let changes = alice.email_changes(&state_before, None).await.unwrap();
    assert_eq!(changes.updated(), &[ids[0].clone()]);

    // Upload and download round-trip; import of the uploaded bytes.
    let raw =
        b"From: alice@example.test\r\nTo: alice@example.test\r\nSubject: imported\r\n\r\nfrom a blob\r\n".to_vec();
    let up = alice.upload(None, raw.clone(), Some("message/rfc822")).await.unwrap();
    assert_eq!(alice.download(up.blob_id()).await.unwrap(), raw);
    let imported = alice
        .email_import(raw.clone(), [inbox_id.clone()], Some(["$flagged"]), None)
        .await
        .unwrap();
    let got = alice
        .email_get(
            imported.id().unwrap(),
            Some([Property::Subject, Property::Keywords, Property::BlobId]),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.subject(), Some("imported"));
    assert!(got.keywords().contains(&"$flagged"));
    assert_eq!(alice.download(got.blob_id().unwrap()).await.unwrap(), raw);

    // EmailSubmission/set reaches Bob's inbox through the SMTP acceptance path.
    let outgoing = b"From: alice@example.test\r\nTo: bob@example.test\r\nBcc: alice@example.test\r\nSubject: Re: Lunch?\r\nIn-Reply-To: <lunch@remote.test>\r\n\r\nYes!\r\n".to_vec();
    let sent = alice
        .email_import(outgoing, [inbox_id.clone()], None::<Vec<&str>>, None)
        .await
        .unwrap();
    let identity = alice.identity_get("i0", None).await.unwrap().unwrap();
    assert_eq!(identity.email(), Some(ALICE));
    let sub = alice.email_submission_create(sent.id().unwrap(), "i0").await.unwrap();
    assert!(sub.id().is_some());

    let bob = connect(&node, BOB).await;
    let bob_inbox = inbox(&bob).await;
    let bob_ids = bob
        .email_query(Some(email::query::Filter::in_mailbox(&bob_inbox)), None::<Vec<_>>)
        .await
        .unwrap()
        .take_ids();
    assert_eq!(bob_ids.len(), 1, "the submission reached Bob");
    let m = bob
        .email_get(&bob_ids[0], Some([Property::Subject, Property::Bcc]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.subject(), Some("Re: Lunch?"));
    assert!(m.bcc().is_none(), "Bcc is not sent: {:?}", m.bcc());

    // Sending as someone else is refused.
    let forged = b"From: bob@example.test\r\nTo: bob@example.test\r\nSubject: forged\r\n\r\nx\r\n".to_vec();
    let forged = alice
        .email_import(forged, [inbox_id.clone()], None::<Vec<&str>>, None)
        .await
        .unwrap();
    let refused = alice.email_submission_create(forged.id().unwrap(), "i0").await;
    assert!(refused.is_err(), "a user sends only as themselves");

    // Threads: the reply joined the original's thread in Alice's account.
    let thread_of = |id: String| {
        let alice = &alice;
        async move {
            alice
                .email_get(&id, Some([Property::ThreadId]))
                .await
                .unwrap()
                .unwrap()
                .thread_id()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(
        thread_of(ids[0].clone()).await,
        thread_of(sent.id().unwrap().to_string()).await
    );
    let filter: Option<Filter<email::query::Filter>> = None;
    let all = alice.email_query(filter, None::<Vec<_>>).await.unwrap();
    // Lunch?, imported, the reply, the forged one, and the reply's Bcc copy.
    assert_eq!(all.ids().len(), 5);
}

/// A thread's messages delivered since their mailbox was last indexed
/// (the delivery writes no thread-membership key, `model::unindexed`) are
/// listed by Thread/get, oldest first, and still once each after one of
/// them moved to another mailbox (the move indexes both).
#[tokio::test(flavor = "multi_thread")]
async fn thread_get_lists_every_delivered_message_of_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), &[]);
    let mails = [
        "Message-ID: <root@remote.test>\r\nSubject: Plan",
        "Message-ID: <r1@remote.test>\r\nIn-Reply-To: <root@remote.test>\r\nSubject: Re: Plan",
        "Message-ID: <other@remote.test>\r\nSubject: Unrelated",
        "Message-ID: <r2@remote.test>\r\nReferences: <root@remote.test> <r1@remote.test>\r\nSubject: Re: Re: Plan",
    ];
    for head in mails {
        let data = format!("From: carol@remote.test\r\nTo: {ALICE}\r\n{head}\r\n\r\nbody\r\n");
        let (code, reply) = smtp_send(node.addr("smtp"), "carol@remote.test", ALICE, &data);
        assert_eq!(code, 250, "{reply}");
    }
    let alice = connect(&node, ALICE).await;
    let filter: Option<Filter<email::query::Filter>> = None;
    let all = alice.email_query(filter, None::<Vec<_>>).await.unwrap();
    let mut by_subject = std::collections::HashMap::new();
    for id in all.ids() {
        let m = alice
            .email_get(id, Some([Property::Subject, Property::ThreadId]))
            .await
            .unwrap()
            .unwrap();
        by_subject.insert(
            m.subject().unwrap().to_string(),
            (id.to_string(), m.thread_id().unwrap().to_string()),
        );
    }
    let (root, thread) = by_subject["Plan"].clone();
    let (r1, r1_thread) = by_subject["Re: Plan"].clone();
    let (r2, r2_thread) = by_subject["Re: Re: Plan"].clone();
    assert_eq!((&r1_thread, &r2_thread), (&thread, &thread), "replies join the thread");
    assert_ne!(by_subject["Unrelated"].1, thread);
    let members = || async {
        alice
            .thread_get(&thread)
            .await
            .unwrap()
            .expect("the thread exists")
            .email_ids()
            .to_vec()
    };
    assert_eq!(members().await, vec![root.clone(), r1.clone(), r2.clone()]);
    let archive = alice
        .mailbox_create("Kept", None::<String>, Role::None)
        .await
        .unwrap()
        .id()
        .unwrap()
        .to_string();
    alice.email_set_mailboxes(&r1, [archive]).await.unwrap();
    let after = members().await;
    assert_eq!(after.len(), 3, "each message once: {after:?}");
    assert_eq!(after[0], root);
    assert_eq!(after[2], r2);
}

fn calls(auth: &str, node: &Node, calls: serde_json::Value) -> serde_json::Value {
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"], "methodCalls": calls});
    let (status, v) = api(node.addr("http"), auth, &body.to_string());
    assert_eq!(status, 200, "{v}");
    v["methodResponses"].clone()
}

#[test]
fn protocol_errors_get_the_rfc_error_types_never_a_500() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[jmap]\nmax_size_request_bytes = 20000\nmax_calls_in_request = 4\nmax_objects_in_get = 3\n",
    );
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let node = Node::start(
        dir.path(),
        &["--allow-plaintext-auth-on-loopback"],
        &[("MESHMAIL_CONFIG", config.to_str().unwrap())],
    );
    let addr = node.addr("http");
    let auth = basic(ALICE, PW);
    let problem = |body: &[u8]| {
        let (status, text) = http(addr, "POST", "/jmap/api", Some(&auth), body);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {status} {text}"));
        (status, v["type"].as_str().unwrap_or_default().to_string(), v)
    };

    let (s, t, _) = problem(b"{\"using\": [");
    assert_eq!((s, t.as_str()), (400, "urn:ietf:params:jmap:error:notJSON"));
    let (s, t, _) = problem(b"{\"using\": [], \"calls\": []}");
    assert_eq!((s, t.as_str()), (400, "urn:ietf:params:jmap:error:notRequest"));
    let (s, t, _) = problem(br#"{"using": ["urn:example:nope"], "methodCalls": []}"#);
    assert_eq!((s, t.as_str()), (400, "urn:ietf:params:jmap:error:unknownCapability"));
    let five = json!({"using": ["urn:ietf:params:jmap:core"], "methodCalls": (0..5).map(|i| json!(["Core/echo", {}, format!("c{i}")])).collect::<Vec<_>>()});
    let (s, t, v) = problem(five.to_string().as_bytes());
    assert_eq!(
        (s, t.as_str(), v["limit"].as_str()),
        (400, "urn:ietf:params:jmap:error:limit", Some("maxCallsInRequest"))
    );
    let big = json!({"using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Core/echo", {"pad": "x".repeat(30_000)}, "c"]]});
    let (s, t, v) = problem(big.to_string().as_bytes());
    assert_eq!(
        (s, t.as_str(), v["limit"].as_str()),
        (400, "urn:ietf:params:jmap:error:limit", Some("maxSizeRequest"))
    );

    let r = calls(
        &auth,
        &node,
        json!([
            ["Nope/nothing", {}, "a"],
            ["Mailbox/get", {"accountId": "a999"}, "b"],
            ["Email/get", {"accountId": "a1", "#ids": {"resultOf": "zz", "name": "Email/query", "path": "/ids"}}, "c"],
            ["Email/get", {"accountId": "a1", "ids": ["e1_1", "e1_2", "e1_3", "e1_4"]}, "d"],
        ]),
    );
    let kinds: Vec<&str> = r
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x[1]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "unknownMethod",
            "accountNotFound",
            "invalidResultReference",
            "requestTooLarge"
        ],
        "{r}"
    );
    let r = calls(
        &auth,
        &node,
        json!([
            ["Email/query", {"accountId": "a1", "filter": {"inMailbox": "m1"}}, "q"],
            ["Email/get", {"accountId": "a1", "#ids": {"resultOf": "q", "name": "Email/query", "path": "/nope"}}, "g"],
            ["Email/get", {"accountId": "a1", "ids": [], "bogus": 1}, "h"],
        ]),
    );
    assert_eq!(r[1][1]["type"], "invalidResultReference", "{r}");
    assert_eq!(r[2][1]["type"], "invalidArguments", "{r}");
    // Bob's account is not Alice's to read (his id is a2).
    let r = calls(&auth, &node, json!([["Email/query", {"accountId": "a2"}, "x"]]));
    assert_eq!(r[0][1]["type"], "accountNotFound");
    // A method of a capability the request does not use is unknown to it.
    let (_, v) = api(
        addr,
        &auth,
        &json!({"using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Mailbox/get", {"accountId": "a1"}, "m"]]})
            .to_string(),
    );
    assert_eq!(v["methodResponses"][0][1]["type"], "unknownMethod");

    let (s, _) = http(addr, "POST", "/jmap/api", None, b"{}");
    assert_eq!(s, 401);
    let (s, _) = http(addr, "POST", "/jmap/api", Some(&basic(ALICE, "wrong")), b"{}");
    assert_eq!(s, 401);
    let (s, _) = http(addr, "GET", "/jmap/download/a2/b1_1/x", Some(&auth), b"");
    assert_eq!(s, 404, "another account's blob");
    let (s, _) = http(addr, "GET", "/jmap/download/a1/b1_999/x", Some(&auth), b"");
    assert_eq!(s, 404);
    // The node is still healthy after all that.
    let (s, _) = http(addr, "GET", "/health", None, b"");
    assert_eq!(s, 200);
}

#[test]
fn credentials_over_plaintext_need_loopback_and_the_flag_and_tokens_work() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    let node = Node::start(dir.path(), &[], &[]);
    let (s, body) = http(
        node.addr("http"),
        "GET",
        "/.well-known/jmap",
        Some(&basic(ALICE, PW)),
        b"",
    );
    assert_eq!(s, 403, "plaintext Basic without the loopback flag: {body}");
    drop(node);

    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let token = common::run_ok(common::meshmail(dir.path()).args(["token", "create", ALICE]), None);
    let token = token.trim();
    let (s, body) = http(
        node.addr("http"),
        "GET",
        "/.well-known/jmap",
        Some(&format!("Bearer {token}")),
        b"",
    );
    assert_eq!(s, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["username"], ALICE);
    assert!(v["apiUrl"].as_str().unwrap().ends_with("/jmap/api"));
    let (s, _) = http(
        node.addr("http"),
        "GET",
        "/.well-known/jmap",
        Some("Bearer not-a-token"),
        b"",
    );
    assert_eq!(s, 401);
}
