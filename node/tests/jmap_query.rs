//! Email/query over the receivedAt index: the indexed answer (one
//! `inMailbox`, sorted by receivedAt) must equal the general path's answer
//! (the same query wrapped in an AND, which the index does not take), for
//! messages delivered out of receivedAt order, at every position; and the
//! list properties (preview, hasAttachment) come without reading bodies but
//! equal what the parsed body says.

mod common;
mod jmap_common;

use common::{Node, setup_account, smtp_send};
use jmap_common::{api, basic};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";
const PW: &str = "secret";

fn calls(addr: &str, auth: &str, calls: Value) -> Vec<Value> {
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"], "methodCalls": calls});
    let (status, v) = api(addr, auth, &body.to_string());
    assert_eq!(status, 200, "{v}");
    v["methodResponses"].as_array().cloned().unwrap_or_default()
}

fn query(addr: &str, auth: &str, filter: Value, asc: bool, position: i64, limit: usize) -> Value {
    let r = calls(
        addr,
        auth,
        json!([["Email/query", {"accountId": "a1", "filter": filter, "sort": [{"property": "receivedAt", "isAscending": asc}], "position": position, "limit": limit, "calculateTotal": true}, "q"]]),
    );
    r[0][1].clone()
}

#[test]
fn the_indexed_query_equals_the_general_one_and_lists_read_no_bodies() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (addr, auth) = (node.addr("http"), basic(ALICE, PW));
    for i in 0..12 {
        let (code, _) = smtp_send(
            node.addr("smtp"),
            "carol@remote.test",
            ALICE,
            &format!("From: carol@remote.test\r\nTo: {ALICE}\r\nSubject: n{i}\r\n\r\nBody number {i}.\r\n"),
        );
        assert_eq!(code, 250);
    }
    // Messages whose receivedAt is older than everything delivered (and two
    // with the same one): UID order is not receivedAt order any more.
    for (i, date) in ["2001-01-01T00:00:00Z", "1999-05-05T00:00:00Z", "1999-05-05T00:00:00Z"]
        .iter()
        .enumerate()
    {
        calls(
            addr,
            &auth,
            json!([["Email/set", {"accountId": "a1", "create": {"o": {"mailboxIds": {"m1": true}, "receivedAt": date, "from": [{"email": "old@remote.test"}], "subject": format!("old{i}"), "textBody": [{"partId": "t", "type": "text/plain"}], "bodyValues": {"t": {"value": "old body"}}}}}, "s"]]),
        );
    }
    let indexed = json!({"inMailbox": "m1"});
    let general = json!({"operator": "AND", "conditions": [{"inMailbox": "m1"}]});
    for asc in [false, true] {
        for (position, limit) in [(0, 50), (0, 5), (3, 4), (13, 10), (-4, 2), (40, 5)] {
            let a = query(addr, &auth, indexed.clone(), asc, position, limit);
            let b = query(addr, &auth, general.clone(), asc, position, limit);
            for field in ["ids", "position", "total", "queryState"] {
                assert_eq!(
                    a[field], b[field],
                    "{field} at asc={asc} position={position} limit={limit}"
                );
            }
        }
    }
    let newest = query(addr, &auth, indexed.clone(), false, 0, 50);
    assert_eq!(newest["total"], 15);
    let ids: Vec<Value> = newest["ids"].as_array().unwrap().clone();
    let r = calls(
        addr,
        &auth,
        json!([["Email/get", {"accountId": "a1", "ids": ids, "properties": ["subject", "receivedAt", "preview", "hasAttachment"]}, "g"]]),
    );
    let list = r[0][1]["list"].as_array().unwrap().clone();
    let subjects: Vec<&str> = list.iter().map(|e| e["subject"].as_str().unwrap()).collect();
    // Newest first; the oldest two share a receivedAt and come by UID, newest UID first.
    assert_eq!(&subjects[..2], ["n11", "n10"]);
    assert_eq!(&subjects[12..], ["old0", "old2", "old1"]);
    let dates: Vec<&str> = list.iter().map(|e| e["receivedAt"].as_str().unwrap()).collect();
    assert!(dates.windows(2).all(|w| w[0] >= w[1]), "{dates:?}");
    assert_eq!(list[0]["preview"], "Body number 11.");
    assert_eq!(list[0]["hasAttachment"], false);
    // The stored preview equals the one parsed from the body (asking for a
    // header form makes Email/get parse the body).
    let r = calls(
        addr,
        &auth,
        json!([["Email/get", {"accountId": "a1", "ids": [list_id(&newest, 0)], "properties": ["preview", "header:Subject:asText"]}, "g"]]),
    );
    assert_eq!(r[0][1]["list"][0]["preview"], "Body number 11.");
}

fn list_id(q: &Value, i: usize) -> Value {
    q["ids"][i].clone()
}

/// Applies a queryChanges response to a cached list (RFC 8620 §5.6).
fn apply(old: &[Value], changes: &Value) -> Vec<Value> {
    let removed = changes["removed"].as_array().unwrap();
    let mut out: Vec<Value> = old.iter().filter(|id| !removed.contains(id)).cloned().collect();
    for a in changes["added"].as_array().unwrap() {
        let i = a["index"].as_u64().unwrap() as usize;
        out.insert(i.min(out.len()), a["id"].clone());
    }
    out
}

#[test]
fn query_changes_of_a_mailbox_list_bring_a_cached_list_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let (addr, auth) = (node.addr("http"), basic(ALICE, PW));
    let deliver = |i: usize| {
        let (code, _) = smtp_send(
            node.addr("smtp"),
            "carol@remote.test",
            ALICE,
            &format!("From: carol@remote.test\r\nTo: {ALICE}\r\nSubject: m{i}\r\n\r\nBody {i}.\r\n"),
        );
        assert_eq!(code, 250);
    };
    for i in 0..6 {
        deliver(i);
    }
    let filter = json!({"inMailbox": "m1"});
    for asc in [false, true] {
        let before = query(addr, &auth, filter.clone(), asc, 0, 50);
        assert_eq!(before["canCalculateChanges"], true);
        let state = before["queryState"].clone();
        let old: Vec<Value> = before["ids"].as_array().unwrap().clone();
        // Two new messages, one old one destroyed, one flagged (moves nothing),
        // one moved to Archive (leaves the list), one with an old receivedAt.
        deliver(10);
        deliver(11);
        calls(
            addr,
            &auth,
            json!([["Email/set", {"accountId": "a1",
                "destroy": [old[2].clone()],
                "update": {(old[3].as_str().unwrap()): {"keywords/$flagged": true}, (old[4].as_str().unwrap()): {"mailboxIds": {"m6": true}}},
                "create": {"o": {"mailboxIds": {"m1": true}, "receivedAt": "2001-01-01T00:00:00Z", "from": [{"email": "old@remote.test"}], "subject": "old", "textBody": [{"partId": "t", "type": "text/plain"}], "bodyValues": {"t": {"value": "old"}}}}
            }, "s"]]),
        );
        let r = calls(
            addr,
            &auth,
            json!([["Email/queryChanges", {"accountId": "a1", "filter": filter, "sort": [{"property": "receivedAt", "isAscending": asc}], "sinceQueryState": state, "calculateTotal": true}, "c"]]),
        );
        let changes = &r[0][1];
        let now = query(addr, &auth, filter.clone(), asc, 0, 50);
        assert_eq!(changes["newQueryState"], now["queryState"]);
        assert_eq!(changes["total"], now["total"]);
        assert_eq!(changes["added"].as_array().unwrap().len(), 3, "{changes}");
        assert_eq!(
            &apply(&old, changes),
            now["ids"].as_array().unwrap(),
            "asc={asc}: {changes}"
        );
        // A state from a query the index cannot answer is not calculated.
        let r = calls(
            addr,
            &auth,
            json!([["Email/queryChanges", {"accountId": "a1", "filter": {"inMailbox": "m1", "hasKeyword": "$seen"}, "sort": [{"property": "receivedAt", "isAscending": asc}], "sinceQueryState": state}, "c"]]),
        );
        assert_eq!(r[0][0], "error");
        assert_eq!(r[0][1]["type"], "cannotCalculateChanges");
        // maxChanges below the number of changes.
        let r = calls(
            addr,
            &auth,
            json!([["Email/queryChanges", {"accountId": "a1", "filter": filter, "sort": [{"property": "receivedAt", "isAscending": asc}], "sinceQueryState": state, "maxChanges": 2}, "c"]]),
        );
        assert_eq!(r[0][1]["type"], "tooManyChanges");
    }
}
