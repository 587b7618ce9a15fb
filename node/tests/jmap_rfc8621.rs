//! RFC 8621 details a general JMAP client relies on (issue 39 items 5–7),
//! over raw HTTP: the exact JSON is what is under test.
//! - Reading Emails (§4.1): header forms, header names, NFC, body values,
//!   the textBody/htmlBody/attachments algorithm of §4.1.4, List-* URLs.
//! - Mailboxes (§2; RFC 8620 §5.3, §5.5): sortOrder, role, FilterOperator
//!   in Mailbox/query, server-set properties repeated in an update.
//! - Email/query (§4.4.1): the thread-keyword and `header` conditions.

mod common;
mod jmap_common;

use std::collections::BTreeSet;

use common::{Node, smtp_send};
use jmap_common::{invoke, start_node};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";

fn call(node: &Node, method: &str, args: Value) -> Value {
    jmap_common::call(node, ALICE, method, args)
}

fn deliver(node: &Node, data: &str) {
    let (code, reply) = smtp_send(node.addr("smtp"), "carol@remote.test", ALICE, data);
    assert_eq!(code, 250, "{reply}");
}

/// The ids of the emails a filter finds, as a set.
fn query(node: &Node, filter: Value) -> BTreeSet<String> {
    let r = call(node, "Email/query", json!({"accountId": "a1", "filter": filter}));
    r["ids"]
        .as_array()
        .unwrap_or_else(|| panic!("ids: {r}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The one email whose subject contains `subject`.
fn email(node: &Node, subject: &str) -> String {
    let ids = query(node, json!({"subject": subject}));
    assert_eq!(ids.len(), 1, "one email with subject {subject}: {ids:?}");
    ids.into_iter().next().unwrap()
}

fn get_email(node: &Node, id: &str, extra: Value) -> Value {
    let mut args = json!({"accountId": "a1", "ids": [id]});
    args.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let r = call(node, "Email/get", args);
    r["list"][0].clone()
}

const HEADERS_MESSAGE: &str = "Message-Id: <m1@example.test>\r\n\
From: Carol <carol@remote.test>\r\n\
To: alice@example.test\r\n\
Subject: =?UTF-8?Q?Cafe=CC=81?= headers\r\n\
X-Raw: one two\r\n\
List-Post: <mailto:list@example.test>, (web) <https://example.test/post>\r\n\
List-Unsubscribe: <mailto:leave@example.test>,\r\n <https://example.test/leave>\r\n\
List-Archive: NO\r\n\
List-Help: <https://example.test/help>, not-a-url\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
\r\n\
line one\r\n\
line two";

/// §4.1.2–4.1.3: Raw without the final CRLF (header:X and headers[]),
/// names as the message writes them, Text (and `subject`) in NFC, List-*
/// URLs per RFC 2369 or null; §4.1.4: body values with LF line ends.
#[test]
fn header_forms_names_and_body_values_follow_rfc8621() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    deliver(&node, HEADERS_MESSAGE);
    let id = email(&node, "headers");
    let got = get_email(
        &node,
        &id,
        json!({"properties": [
            "subject", "headers", "header:X-Raw", "header:Subject:asText",
            "header:List-Post:asURLs", "header:List-Unsubscribe:asURLs",
            "header:List-Archive:asURLs", "header:List-Help:asURLs", "textBody", "bodyValues"],
            "fetchTextBodyValues": true}),
    );
    assert_eq!(got["header:X-Raw"], " one two", "{got}");
    let headers = got["headers"].as_array().unwrap();
    assert!(
        headers.contains(&json!({"name": "Message-Id", "value": " <m1@example.test>"})),
        "name as written, value without CRLF: {got}"
    );
    assert!(
        headers.iter().all(|h| !h["value"].as_str().unwrap().ends_with('\n')),
        "{got}"
    );
    // "e" + U+0301 in the message; its NFC is the one character U+00E9.
    assert_eq!(got["header:Subject:asText"], "Caf\u{e9} headers", "{got}");
    assert_eq!(got["subject"], "Caf\u{e9} headers", "{got}");
    assert_eq!(
        got["header:List-Post:asURLs"],
        json!(["mailto:list@example.test", "https://example.test/post"]),
        "{got}"
    );
    assert_eq!(
        got["header:List-Unsubscribe:asURLs"],
        json!(["mailto:leave@example.test", "https://example.test/leave"]),
        "{got}"
    );
    assert_eq!(
        got["header:List-Archive:asURLs"],
        Value::Null,
        "NO is not a URL list: {got}"
    );
    assert_eq!(got["header:List-Help:asURLs"], Value::Null, "not all URLs: {got}");
    let part = got["textBody"][0]["partId"].as_str().unwrap();
    let value = got["bodyValues"][part]["value"].as_str().unwrap();
    assert!(value.starts_with("line one\nline two"), "{value:?}");
    assert!(!value.contains('\r'), "CRLF becomes LF: {value:?}");
}

const STRUCTURE_MESSAGE: &str = "From: carol@remote.test\r\n\
To: alice@example.test\r\n\
Subject: structure\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=m\r\n\
\r\n\
--m\r\n\
Content-Type: multipart/alternative; boundary=a\r\n\
\r\n\
--a\r\n\
Content-Type: text/plain\r\n\
\r\n\
plain\r\n\
--a\r\n\
Content-Type: text/html\r\n\
\r\n\
<p>html</p>\r\n\
--a--\r\n\
--m\r\n\
Content-Type: image/png\r\n\
Content-Disposition: inline; filename=i.png\r\n\
Content-Transfer-Encoding: base64\r\n\
\r\n\
iVBORw0KGgo=\r\n\
--m\r\n\
Content-Type: application/pdf\r\n\
Content-Disposition: attachment; filename=x.pdf\r\n\
Content-Transfer-Encoding: base64\r\n\
\r\n\
JVBERi0=\r\n\
--m--\r\n";

fn types(parts: &Value) -> Vec<String> {
    parts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap().to_string())
        .collect()
}

/// §4.1.4: an inline image beside a multipart/alternative in a
/// multipart/mixed is part of both bodies, not an attachment; and
/// fetchAllBodyValues gives the text/* parts only.
#[test]
fn body_lists_follow_the_rfc_algorithm_and_values_are_text_only() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    deliver(&node, STRUCTURE_MESSAGE);
    let id = email(&node, "structure");
    let got = get_email(
        &node,
        &id,
        json!({"properties": ["textBody", "htmlBody", "attachments", "bodyValues"],
               "fetchAllBodyValues": true}),
    );
    assert_eq!(types(&got["textBody"]), ["text/plain", "image/png"], "{got}");
    assert_eq!(types(&got["htmlBody"]), ["text/html", "image/png"], "{got}");
    assert_eq!(types(&got["attachments"]), ["application/pdf"], "{got}");
    let text_parts: BTreeSet<&str> = [&got["textBody"][0], &got["htmlBody"][0]]
        .iter()
        .map(|p| p["partId"].as_str().unwrap())
        .collect();
    let valued: BTreeSet<&str> = got["bodyValues"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(valued, text_parts, "the text/* parts, not the image or the PDF: {got}");
    assert_eq!(got["bodyValues"][*text_parts.first().unwrap()]["isTruncated"], false);
}

fn inbox(node: &Node) -> String {
    let r = call(
        node,
        "Mailbox/query",
        json!({"accountId": "a1", "filter": {"role": "inbox"}}),
    );
    r["ids"][0].as_str().expect("an inbox").to_string()
}

/// The `notUpdated` entry of one update, or null if it was applied.
fn update_mailbox(node: &Node, id: &str, patch: Value) -> Value {
    let r = call(node, "Mailbox/set", json!({"accountId": "a1", "update": {id: patch}}));
    if r["updated"].get(id).is_some() {
        return Value::Null;
    }
    r["notUpdated"][id].clone()
}

fn get_mailbox(node: &Node, id: &str) -> Value {
    call(node, "Mailbox/get", json!({"accountId": "a1", "ids": [id]}))["list"][0].clone()
}

/// RFC 8621 §2: sortOrder is stored (create and update; default 0), a role
/// change is applied or refused as invalidProperties, and Mailbox/changes
/// sees both.
#[test]
fn mailbox_sort_order_and_role_are_stored_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    let r = call(
        &node,
        "Mailbox/set",
        json!({"accountId": "a1", "create": {
            "s": {"name": "Sorted", "sortOrder": 5},
            "p": {"name": "Plain"},
        }}),
    );
    let sorted = r["created"]["s"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let plain = r["created"]["p"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        r["created"]["p"]["sortOrder"], 0,
        "a default comes back in created: {r}"
    );
    assert_eq!(get_mailbox(&node, &sorted)["sortOrder"], 5);
    assert_eq!(get_mailbox(&node, &plain)["sortOrder"], 0);
    let state = call(&node, "Mailbox/get", json!({"accountId": "a1", "ids": []}))["state"].clone();

    assert_eq!(update_mailbox(&node, &sorted, json!({"sortOrder": 7})), Value::Null);
    assert_eq!(get_mailbox(&node, &sorted)["sortOrder"], 7);
    assert_eq!(update_mailbox(&node, &plain, json!({"role": "flagged"})), Value::Null);
    assert_eq!(get_mailbox(&node, &plain)["role"], "flagged");
    let changes = call(
        &node,
        "Mailbox/changes",
        json!({"accountId": "a1", "sinceState": state}),
    );
    let updated: BTreeSet<&str> = changes["updated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(updated, BTreeSet::from([sorted.as_str(), plain.as_str()]), "{changes}");

    let inbox = inbox(&node);
    for (id, role) in [
        (&inbox, json!("archive")),  // INBOX keeps its role
        (&sorted, json!("flagged")), // Plain has it: one mailbox per role
        (&sorted, json!("inbox")),
        (&sorted, json!("no-such-role")),
    ] {
        let e = update_mailbox(&node, id, json!({"role": role}));
        assert_eq!(e["type"], "invalidProperties", "{role}: {e}");
        assert_eq!(e["properties"], json!(["role"]), "{role}: {e}");
    }
    assert_eq!(get_mailbox(&node, &sorted)["role"], Value::Null);
    assert_eq!(update_mailbox(&node, &plain, json!({"role": null})), Value::Null);
    assert_eq!(get_mailbox(&node, &plain)["role"], Value::Null);
    let r = call(
        &node,
        "Mailbox/set",
        json!({"accountId": "a1", "create": {"t": {"name": "Trash2", "role": "trash"}}}),
    );
    assert_eq!(r["notCreated"]["t"]["properties"], json!(["role"]), "Trash has it: {r}");
    let after = call(
        &node,
        "Mailbox/query",
        json!({"accountId": "a1", "filter": {"name": "Trash2"}}),
    );
    assert_eq!(
        after["ids"],
        json!([]),
        "a refused create leaves nothing behind: {after}"
    );
}

/// RFC 8620 §5.3: an update may repeat server-set properties with the
/// values they have; other values are refused, each property named.
#[test]
fn mailbox_update_accepts_server_set_properties_unchanged_only() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    let r = call(
        &node,
        "Mailbox/set",
        json!({"accountId": "a1", "create": {"k": {"name": "Kept"}}}),
    );
    let id = r["created"]["k"]["id"].as_str().unwrap().to_string();
    let mut whole = get_mailbox(&node, &id);
    whole["name"] = json!("Renamed");
    assert_eq!(
        update_mailbox(&node, &id, whole.clone()),
        Value::Null,
        "the object as read"
    );
    assert_eq!(get_mailbox(&node, &id)["name"], "Renamed");
    assert_eq!(
        update_mailbox(&node, &id, json!({"myRights/mayDelete": true})),
        Value::Null,
        "a path to an unchanged value"
    );
    let mut rights = whole["myRights"].clone();
    rights["mayDelete"] = json!(false);
    let e = update_mailbox(
        &node,
        &id,
        json!({"id": "m999", "totalEmails": 3, "myRights": rights, "unreadThreads": 0}),
    );
    assert_eq!(e["type"], "invalidProperties", "{e}");
    assert_eq!(e["properties"], json!(["id", "myRights", "totalEmails"]), "{e}");
}

/// RFC 8620 §5.5: Mailbox/query takes FilterOperator, nested.
#[test]
fn mailbox_query_takes_nested_filter_operators() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    let r = call(
        &node,
        "Mailbox/set",
        json!({"accountId": "a1", "create": {"s": {"name": "Sorted"}}}),
    );
    let sorted = r["created"]["s"]["id"].as_str().unwrap().to_string();
    let filter = json!({"operator": "OR", "conditions": [
        {"role": "inbox"},
        {"operator": "AND", "conditions": [
            {"name": "sort"},
            {"operator": "NOT", "conditions": [{"hasAnyRole": true}]},
        ]},
    ]});
    let r = call(
        &node,
        "Mailbox/query",
        json!({"accountId": "a1", "filter": filter, "sort": [{"property": "name"}]}),
    );
    assert_eq!(r["ids"], json!([inbox(&node), sorted]), "{r}");
    let bad = invoke(
        &node,
        ALICE,
        "Mailbox/query",
        json!({"accountId": "a1", "filter": {"operator": "XOR", "conditions": []}}),
    );
    assert_eq!(bad[1]["type"], "unsupportedFilter", "{bad}");
}

/// RFC 8621 §4.4.1: the *InThreadHaveKeyword conditions look at the whole
/// thread; `header` matches a field by name, and its text if given.
#[test]
fn email_query_thread_keyword_and_header_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    deliver(
        &node,
        "Message-ID: <t1@remote.test>\r\nSubject: thread one\r\n\r\nfirst\r\n",
    );
    deliver(
        &node,
        "Message-ID: <t2@remote.test>\r\nIn-Reply-To: <t1@remote.test>\r\nReferences: <t1@remote.test>\r\nSubject: Re: thread one\r\n\r\nsecond\r\n",
    );
    deliver(
        &node,
        "Message-ID: <t3@remote.test>\r\nSubject: alone\r\nX-Tag: blue\r\n\r\nthird\r\n",
    );
    let ids: Vec<String> = query(&node, json!({"subject": "thread one"})).into_iter().collect();
    let subject = |id: &String| get_email(&node, id, json!({"properties": ["subject"]}))["subject"].clone();
    let (first, second) = match subject(&ids[0]) == "thread one" {
        true => (ids[0].clone(), ids[1].clone()),
        false => (ids[1].clone(), ids[0].clone()),
    };
    let third = email(&node, "alone");
    let threads: Vec<Value> = [&first, &second]
        .iter()
        .map(|i| get_email(&node, i, json!({"properties": ["threadId"]}))["threadId"].clone())
        .collect();
    assert_eq!(threads[0], threads[1], "a reply joins its thread");
    let r = call(
        &node,
        "Email/set",
        json!({"accountId": "a1", "update": {
            first.clone(): {"keywords/$flagged": true, "keywords/$seen": true},
            second.clone(): {"keywords/$seen": true},
        }}),
    );
    assert_eq!(r["notUpdated"], json!({}), "{r}");
    let set = |ids: &[&String]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let pair = set(&[&first, &second]);
    assert_eq!(query(&node, json!({"allInThreadHaveKeyword": "$seen"})), pair);
    assert_eq!(query(&node, json!({"allInThreadHaveKeyword": "$flagged"})), set(&[]));
    assert_eq!(query(&node, json!({"someInThreadHaveKeyword": "$flagged"})), pair);
    assert_eq!(
        query(&node, json!({"noneInThreadHaveKeyword": "$flagged"})),
        set(&[&third])
    );
    assert_eq!(
        query(
            &node,
            json!({"operator": "AND", "conditions": [
            {"inMailbox": inbox(&node)}, {"someInThreadHaveKeyword": "$flagged"}]})
        ),
        pair
    );
    assert_eq!(query(&node, json!({"header": ["X-Tag"]})), set(&[&third]));
    assert_eq!(query(&node, json!({"header": ["x-tag", "BLU"]})), set(&[&third]));
    assert_eq!(query(&node, json!({"header": ["X-Tag", "red"]})), set(&[]));
    assert_eq!(query(&node, json!({"header": ["Subject", "thread"]})), pair);
}

/// Uploads `bytes`; returns the blob id.
fn upload(node: &Node, bytes: &[u8]) -> String {
    let auth = jmap_common::basic(ALICE, jmap_common::PASSWORD);
    let (status, text) = jmap_common::http(node.addr("http"), "POST", "/jmap/upload/a1/", Some(&auth), bytes);
    assert_eq!(status, 201, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    v["blobId"].as_str().unwrap().to_string()
}

/// One Email/set create: its `created` entry, or its `notCreated` one.
fn create_email(node: &Node, email: Value) -> Result<String, Value> {
    let r = call(node, "Email/set", json!({"accountId": "a1", "create": {"c": email}}));
    match r["created"]["c"]["id"].as_str() {
        Some(id) => Ok(id.to_string()),
        None => Err(r["notCreated"]["c"].clone()),
    }
}

/// RFC 8621 §4.6: header:* properties are written, on the Email and on
/// its parts; bodyStructure builds the MIME tree; a part's content may
/// come from a blob (an unknown one is blobNotFound with notFound); cid,
/// language and location are kept.
#[test]
fn email_create_from_header_properties_structures_and_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    let inbox = inbox(&node);
    let text_blob = upload(&node, b"hello from a blob");
    let png_blob = upload(&node, b"\x89PNG\r\n\x1a\n-not-really");
    let id = create_email(
        &node,
        json!({"mailboxIds": {inbox.clone(): true},
            "header:from": "Foo <test@example.org>",
            "header:X-Custom:all": [" one", " two"],
            "textBody": [{"blobId": text_blob, "type": "text/plain"}],
            "attachments": [{"blobId": png_blob, "type": "image/png", "name": "p.png",
                "disposition": "attachment", "cid": "img1", "language": ["en"],
                "location": "https://example.test/p.png", "header:X-Part": " kept"}]}),
    )
    .unwrap_or_else(|e| panic!("created: {e}"));
    let got = get_email(
        &node,
        &id,
        json!({"properties": ["from", "header:X-Custom:all", "textBody", "attachments", "bodyValues"],
               "bodyProperties": ["partId", "type", "name", "cid", "language", "location", "header:X-Part"],
               "fetchTextBodyValues": true}),
    );
    assert_eq!(
        got["from"],
        json!([{"name": "Foo", "email": "test@example.org"}]),
        "{got}"
    );
    assert_eq!(got["header:X-Custom:all"], json!([" one", " two"]), "{got}");
    let text = got["textBody"][0]["partId"].as_str().unwrap();
    assert_eq!(got["bodyValues"][text]["value"], "hello from a blob", "{got}");
    let a = &got["attachments"][0];
    assert_eq!(
        (
            &a["type"],
            &a["name"],
            &a["cid"],
            &a["language"],
            &a["location"],
            &a["header:X-Part"]
        ),
        (
            &json!("image/png"),
            &json!("p.png"),
            &json!("img1"),
            &json!(["en"]),
            &json!("https://example.test/p.png"),
            &json!(" kept")
        ),
        "{got}"
    );

    let id = create_email(
        &node,
        json!({"mailboxIds": {inbox.clone(): true}, "subject": "structured",
            "bodyStructure": {"type": "multipart/alternative", "subParts": [
                {"partId": "t", "type": "text/plain"}, {"partId": "h", "type": "text/html"}]},
            "bodyValues": {"t": {"value": "plain"}, "h": {"value": "<b>html</b>"}}}),
    )
    .unwrap_or_else(|e| panic!("created: {e}"));
    let got = get_email(
        &node,
        &id,
        json!({"properties": ["bodyStructure", "textBody", "htmlBody", "bodyValues"], "fetchAllBodyValues": true}),
    );
    assert_eq!(got["bodyStructure"]["type"], "multipart/alternative", "{got}");
    assert_eq!(
        types(&got["bodyStructure"]["subParts"]),
        ["text/plain", "text/html"],
        "{got}"
    );
    let html = got["htmlBody"][0]["partId"].as_str().unwrap();
    assert_eq!(got["bodyValues"][html]["value"], "<b>html</b>", "{got}");

    let e = create_email(
        &node,
        json!({"mailboxIds": {inbox.clone(): true}, "textBody": [{"blobId": "Bnope", "type": "text/plain"}]}),
    )
    .unwrap_err();
    assert_eq!(
        (&e["type"], &e["notFound"]),
        (&json!("blobNotFound"), &json!(["Bnope"])),
        "{e}"
    );
}

/// RFC 8621 §4.6: what a client SHOULD NOT send is refused, not repaired,
/// as invalidProperties naming the property (nested ones by their path).
#[test]
fn email_create_refuses_the_should_not_cases() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[ALICE]);
    let mb = json!({inbox(&node): true});
    let text = json!([{"partId": "t", "type": "text/plain"}]);
    let values = json!({"t": {"value": "x"}});
    let cases = [
        (json!({"headers": [{"name": "X", "value": " y"}]}), "headers"),
        (json!({"header:Content-Type": " text/plain"}), "header:Content-Type"),
        (json!({"header:X-List": [" a", " b"]}), "header:X-List"),
        (
            json!({"textBody": [{"partId": "t", "type": "text/plain"}, {"partId": "t", "type": "text/plain"}]}),
            "textBody",
        ),
        (
            json!({"htmlBody": [{"partId": "t", "type": "text/html"}, {"partId": "t", "type": "text/html"}]}),
            "htmlBody",
        ),
        (
            json!({"textBody": text, "bodyValues": {"t": {"value": "x", "isTruncated": true}}}),
            "bodyValues/t",
        ),
        (
            json!({"textBody": [{"partId": "t", "type": "text/plain", "size": 1}], "bodyValues": values}),
            "textBody/0/size",
        ),
        (
            json!({"textBody": [{"partId": "t", "type": "text/plain", "header:Content-Transfer-Encoding": " base64"}],
                   "bodyValues": values}),
            "textBody/0/header:Content-Transfer-Encoding",
        ),
        (
            json!({"bodyStructure": {"partId": "t", "type": "text/plain"}, "textBody": text, "bodyValues": values}),
            "bodyStructure",
        ),
    ];
    for (extra, property) in cases {
        let mut email = json!({"mailboxIds": mb});
        email
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let e = create_email(&node, email).expect_err(property);
        assert_eq!(e["type"], "invalidProperties", "{property}: {e}");
        assert_eq!(e["properties"], json!([property]), "{property}: {e}");
    }
    let count = call(&node, "Email/query", json!({"accountId": "a1"}))["ids"].clone();
    assert_eq!(count, json!([]), "nothing was created");
}
