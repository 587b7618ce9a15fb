//! RFC 8620 §5.1: every /get returns each object's `id`, whether
//! `properties` is omitted, lists `id`, or leaves it out. One test per
//! type, through `jmap-client` (what a general client sends) and raw HTTP
//! (the property lists the client cannot express).

mod common;
mod jmap_common;

use common::{Node, setup_account, smtp_send};
use jmap_client::client::Client;
use jmap_client::mailbox::Role;
use jmap_common::{api, basic};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";
const PW: &str = "secret";

const USING: [&str; 4] = [
    "urn:ietf:params:jmap:core",
    "urn:ietf:params:jmap:mail",
    "urn:ietf:params:jmap:submission",
    "urn:ietf:params:jmap:vacationresponse",
];

fn start(dir: &std::path::Path) -> Node {
    setup_account(dir, ALICE, PW);
    setup_account(dir, BOB, PW);
    Node::start(dir, &["--allow-plaintext-auth-on-loopback"], &[])
}

async fn connect(node: &Node) -> Client {
    Client::new()
        .credentials((ALICE, PW))
        .connect(&format!("http://{}", node.addr("http")))
        .await
        .expect("jmap-client connects")
}

fn deliver(node: &Node, subject: &str) {
    let data = format!("From: carol@remote.test\r\nTo: {ALICE}\r\nSubject: {subject}\r\n\r\nbody\r\n");
    let (code, reply) = smtp_send(node.addr("smtp"), "carol@remote.test", ALICE, &data);
    assert_eq!(code, 250, "{reply}");
}

/// `{method}` of `[id]` over raw HTTP, once per property list; each answer
/// must list exactly the object asked for, under its own id.
fn assert_raw_ids(node: &Node, method: &str, id: &str, other_property: &str) {
    let shapes = [
        None,
        Some(json!(["id"])),
        Some(json!(["id", other_property])),
        Some(json!([other_property, "id"])),
        Some(json!([other_property])),
    ];
    for properties in shapes {
        let mut args = json!({"accountId": "a1", "ids": [id]});
        if let Some(p) = &properties {
            args["properties"] = p.clone();
        }
        let body = json!({"using": USING, "methodCalls": [[method, args, "g"]]});
        let (status, v) = api(node.addr("http"), &basic(ALICE, PW), &body.to_string());
        assert_eq!(status, 200, "{v}");
        let resp = &v["methodResponses"][0];
        assert_eq!(resp[0], method, "{v}");
        let list = resp[1]["list"].as_array().unwrap_or_else(|| panic!("no list: {v}"));
        assert_eq!(list.len(), 1, "{method} {properties:?}: {v}");
        assert_eq!(
            list[0]["id"],
            Value::from(id),
            "{method} properties {properties:?}: {v}"
        );
        assert_eq!(resp[1]["notFound"], json!([]), "{v}");
    }
}

/// The inbox id, through the client.
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

async fn first_email(client: &Client) -> String {
    let filter: Option<jmap_client::core::query::Filter<jmap_client::email::query::Filter>> = None;
    client
        .email_query(filter, None::<Vec<_>>)
        .await
        .unwrap()
        .ids()
        .first()
        .expect("one email")
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn email_get_returns_the_id_asked_for_with_any_property_list() {
    use jmap_client::email::Property;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    deliver(&node, "ids");
    let alice = connect(&node).await;
    let id = first_email(&alice).await;
    let got = alice.email_get(&id, None::<Vec<Property>>).await.unwrap().unwrap();
    assert_eq!(got.id(), Some(id.as_str()), "properties omitted (the default list)");
    assert_eq!(got.subject(), Some("ids"));
    let got = alice
        .email_get(&id, Some([Property::Id, Property::Subject]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), Some(id.as_str()), "properties [id, subject]");
    assert_raw_ids(&node, "Email/get", &id, "subject");
}

#[tokio::test(flavor = "multi_thread")]
async fn mailbox_get_returns_the_id_asked_for_with_any_property_list() {
    use jmap_client::mailbox::Property;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let alice = connect(&node).await;
    let id = inbox(&alice).await;
    let got = alice.mailbox_get(&id, None::<Vec<Property>>).await.unwrap().unwrap();
    assert_eq!(got.id(), Some(id.as_str()), "properties omitted");
    let got = alice
        .mailbox_get(&id, Some([Property::Id, Property::Name]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), Some(id.as_str()), "properties [id, name]");
    assert_eq!(got.name(), Some("INBOX"));
    assert_raw_ids(&node, "Mailbox/get", &id, "name");
}

#[tokio::test(flavor = "multi_thread")]
async fn thread_get_returns_the_id_asked_for_with_any_property_list() {
    use jmap_client::email::Property;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    deliver(&node, "thread");
    let alice = connect(&node).await;
    let email = first_email(&alice).await;
    let thread = alice
        .email_get(&email, Some([Property::ThreadId]))
        .await
        .unwrap()
        .unwrap()
        .thread_id()
        .expect("a thread id")
        .to_string();
    let got = alice.thread_get(&thread).await.unwrap().expect("the thread");
    assert_eq!(got.id(), thread);
    assert_raw_ids(&node, "Thread/get", &thread, "emailIds");
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_get_returns_the_id_asked_for_with_any_property_list() {
    use jmap_client::identity::Property;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let alice = connect(&node).await;
    let got = alice.identity_get("i0", None).await.unwrap().unwrap();
    assert_eq!(got.id(), Some("i0"), "properties omitted");
    let got = alice
        .identity_get("i0", Some(vec![Property::Id, Property::Email]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), Some("i0"), "properties [id, email]");
    assert_eq!(got.email(), Some(ALICE));
    assert_raw_ids(&node, "Identity/get", "i0", "email");
}

#[tokio::test(flavor = "multi_thread")]
async fn email_submission_get_returns_the_id_asked_for_with_any_property_list() {
    use jmap_client::email_submission::Property;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let alice = connect(&node).await;
    let inbox_id = inbox(&alice).await;
    let raw = format!("From: {ALICE}\r\nTo: {BOB}\r\nSubject: submitted\r\n\r\nhi\r\n").into_bytes();
    let email = alice
        .email_import(raw, [inbox_id], None::<Vec<&str>>, None)
        .await
        .unwrap();
    let email_id = email.id().unwrap().to_string();
    let sub = alice.email_submission_create(&email_id, "i0").await.unwrap();
    let id = sub.id().expect("a submission id").to_string();
    let got = alice.email_submission_get(&id, None).await.unwrap().unwrap();
    assert_eq!(got.id(), Some(id.as_str()), "properties omitted");
    let got = alice
        .email_submission_get(&id, Some(vec![Property::Id, Property::EmailId]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), Some(id.as_str()), "properties [id, emailId]");
    assert_eq!(got.email_id(), Some(email_id.as_str()));
    assert_raw_ids(&node, "EmailSubmission/get", &id, "emailId");
}

#[tokio::test(flavor = "multi_thread")]
async fn vacation_response_get_returns_the_singleton_id_with_any_property_list() {
    use jmap_client::vacation_response::Property;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let alice = connect(&node).await;
    let got = alice
        .vacation_response_get(None::<Vec<Property>>)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), Some("singleton"), "properties omitted");
    let got = alice
        .vacation_response_get(Some([Property::Id, Property::IsEnabled]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), Some("singleton"), "properties [id, isEnabled]");
    assert_raw_ids(&node, "VacationResponse/get", "singleton", "isEnabled");
}
