//! Per-object errors (RFC 8620 §5.3; RFC 8621 §4.6, §4.8): one bad object
//! in a Mailbox/set, Email/set or Email/import is that object's
//! `invalidProperties`, naming the property, and the other objects of the
//! same call still run. Raw HTTP: a client library will not send a
//! `null` name or a numeric blobId.

mod common;
mod jmap_common;

use common::Node;
use jmap_common::{PASSWORD as PW, basic, http, start_node};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";

fn start(dir: &std::path::Path) -> Node {
    start_node(dir, &[ALICE])
}

fn call(node: &Node, method: &str, args: Value) -> Value {
    jmap_common::call(node, ALICE, method, args)
}

fn inbox(node: &Node) -> String {
    let r = call(
        node,
        "Mailbox/query",
        json!({"accountId": "a1", "filter": {"role": "inbox"}}),
    );
    r["ids"][0].as_str().expect("an inbox").to_string()
}

/// Asserts `notCreated[cid]` is invalidProperties naming exactly `property`.
fn assert_invalid(resp: &Value, cid: &str, property: &str) {
    let e = &resp["notCreated"][cid];
    assert_eq!(e["type"], "invalidProperties", "{cid}: {resp}");
    assert_eq!(e["properties"], json!([property]), "{cid}: {resp}");
}

#[test]
fn mailbox_set_refuses_a_bad_create_alone() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let r = call(
        &node,
        "Mailbox/set",
        json!({"accountId": "a1", "create": {
            "null": {"name": null},
            "missing": {"role": null},
            "number": {"name": 7},
            "good": {"name": "Kept"},
        }}),
    );
    assert_invalid(&r, "null", "name");
    assert_invalid(&r, "missing", "name");
    assert_invalid(&r, "number", "name");
    let id = r["created"]["good"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("good created: {r}"));
    let got = call(&node, "Mailbox/get", json!({"accountId": "a1", "ids": [id]}));
    assert_eq!(got["list"][0]["name"], "Kept", "{got}");
}

#[test]
fn email_set_refuses_a_bad_create_alone() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let inbox = inbox(&node);
    let r = call(
        &node,
        "Email/set",
        json!({"accountId": "a1", "create": {
            "empty": {},
            "typed": {"mailboxIds": [inbox.clone()]},
            "keywords": {"mailboxIds": {inbox.clone(): true}, "keywords": {"$seen": "yes"}},
            "good": {"mailboxIds": {inbox.clone(): true}, "subject": "kept",
                     "textBody": [{"partId": "t", "type": "text/plain"}],
                     "bodyValues": {"t": {"value": "hello"}}},
        }}),
    );
    assert_invalid(&r, "empty", "mailboxIds");
    assert_invalid(&r, "typed", "mailboxIds");
    assert_invalid(&r, "keywords", "keywords");
    let id = r["created"]["good"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("good created: {r}"));
    let got = call(
        &node,
        "Email/get",
        json!({"accountId": "a1", "ids": [id], "properties": ["subject"]}),
    );
    assert_eq!(got["list"][0]["subject"], "kept", "{got}");
}

#[test]
fn email_import_names_the_bad_property_and_imports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let inbox = inbox(&node);
    let raw = b"From: alice@example.test\r\nSubject: imported\r\n\r\nhi\r\n";
    let (status, text) = http(
        node.addr("http"),
        "POST",
        "/jmap/upload/a1/",
        Some(&basic(ALICE, PW)),
        raw,
    );
    assert_eq!(status, 201, "{text}");
    let up: Value = serde_json::from_str(&text).unwrap();
    let blob = up["blobId"].as_str().unwrap().to_string();
    let mb = json!({inbox.clone(): true});
    let r = call(
        &node,
        "Email/import",
        json!({"accountId": "a1", "emails": {
            "noBlob": {"mailboxIds": mb},
            "numBlob": {"blobId": 5, "mailboxIds": mb},
            "noMailbox": {"blobId": blob},
            "strMailbox": {"blobId": blob, "mailboxIds": inbox},
            "listKeywords": {"blobId": blob, "mailboxIds": mb, "keywords": ["$seen"]},
            "good": {"blobId": blob, "mailboxIds": mb, "keywords": {"$flagged": true}},
        }}),
    );
    assert_invalid(&r, "noBlob", "blobId");
    assert_invalid(&r, "numBlob", "blobId");
    assert_invalid(&r, "noMailbox", "mailboxIds");
    assert_invalid(&r, "strMailbox", "mailboxIds");
    assert_invalid(&r, "listKeywords", "keywords");
    let id = r["created"]["good"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("good imported: {r}"));
    let got = call(
        &node,
        "Email/get",
        json!({"accountId": "a1", "ids": [id], "properties": ["subject", "keywords"]}),
    );
    assert_eq!(got["list"][0]["subject"], "imported", "{got}");
    assert_eq!(got["list"][0]["keywords"], json!({"$flagged": true}), "{got}");
}

#[test]
fn email_copy_refuses_a_bad_create_alone_and_copies_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let inbox = inbox(&node);
    let made = call(
        &node,
        "Mailbox/set",
        json!({"accountId": "a1", "create": {"k": {"name": "Kept"}}}),
    );
    let kept = made["created"]["k"]["id"].as_str().unwrap().to_string();
    let set = call(
        &node,
        "Email/set",
        json!({"accountId": "a1", "create": {"o": {"mailboxIds": {inbox.clone(): true}, "subject": "original"}}}),
    );
    let original = set["created"]["o"]["id"].as_str().unwrap().to_string();
    let r = call(
        &node,
        "Email/copy",
        json!({"fromAccountId": "a1", "accountId": "a1", "create": {
            "noId": {"mailboxIds": {kept.clone(): true}},
            "good": {"id": original, "mailboxIds": {kept.clone(): true}, "keywords": {"$seen": true}},
        }}),
    );
    assert_invalid(&r, "noId", "id");
    let copy = r["created"]["good"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("good copied: {r}"));
    assert_ne!(copy, original, "a copy is another email");
    let got = call(
        &node,
        "Email/get",
        json!({"accountId": "a1", "ids": [copy, original], "properties": ["subject", "keywords", "mailboxIds"]}),
    );
    let list = &got["list"];
    assert_eq!(list[0]["subject"], "original", "{got}");
    assert_eq!(list[0]["keywords"], json!({"$seen": true}), "{got}");
    assert_eq!(list[0]["mailboxIds"], json!({kept: true}), "{got}");
    assert_eq!(list[1]["keywords"], json!({}), "the original keeps its keywords: {got}");
}
