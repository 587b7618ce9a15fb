//! Identity/set and the sender rule EmailSubmission shares with SMTP
//! submission: a user may add identities for their subaddresses and the
//! aliases that deliver only to them, send as those, and nothing else.

mod common;
mod jmap_common;

use common::{Node, meshmail, run_ok, setup_account};
use jmap_common::{api, basic};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";
const PW: &str = "secret";

fn calls(addr: &str, user: &str, calls: Value) -> Vec<Value> {
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail", "urn:ietf:params:jmap:submission"], "methodCalls": calls});
    let (status, v) = api(addr, &basic(user, PW), &body.to_string());
    assert_eq!(status, 200, "{v}");
    v["methodResponses"].as_array().cloned().unwrap_or_default()
}

/// Email/set of a message from `from` to Bob, then EmailSubmission/set with
/// `identity`; returns the EmailSubmission/set response.
fn send(addr: &str, from: &str, identity: &str) -> Value {
    let r = calls(
        addr,
        ALICE,
        json!([
            ["Email/set", {"accountId": "a1", "create": {"d": {"mailboxIds": {"m3": true}, "from": [{"email": from}], "to": [{"email": BOB}], "subject": format!("from {from}"), "textBody": [{"partId": "t", "type": "text/plain"}], "bodyValues": {"t": {"value": "hello"}}}}}, "c"],
            ["EmailSubmission/set", {"accountId": "a1", "create": {"s": {"identityId": identity, "emailId": "#d"}}}, "s"]
        ]),
    );
    r[1][1].clone()
}

#[test]
fn identities_are_the_users_own_addresses_and_submission_checks_the_same_rule() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    run_ok(
        meshmail(dir.path()).args(["alias", "add", "sales@example.test", ALICE]),
        None,
    );
    run_ok(
        meshmail(dir.path()).args(["alias", "add", "team@example.test", &format!("{ALICE},{BOB}")]),
        None,
    );
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let http = node.addr("http");

    let r = calls(
        http,
        ALICE,
        json!([["Identity/set", {"accountId": "a1", "create": {
            "news": {"email": "alice+news@example.test", "name": "Alice (news)"},
            "sales": {"email": "sales@example.test"},
            "team": {"email": "team@example.test"},
            "bob": {"email": BOB},
            "other": {"email": "alice@elsewhere.test"}
        }}, "i"]]),
    );
    let set = &r[0][1];
    assert!(set["created"]["news"]["id"].is_string(), "{set}");
    assert!(set["created"]["sales"]["id"].is_string(), "{set}");
    for refused in ["team", "bob", "other"] {
        assert_eq!(set["notCreated"][refused]["type"], "forbiddenFrom", "{refused}: {set}");
    }
    let news = set["created"]["news"]["id"].as_str().unwrap().to_string();
    let sales = set["created"]["sales"]["id"].as_str().unwrap().to_string();

    let r = calls(
        http,
        ALICE,
        json!([
            ["Identity/set", {"accountId": "a1",
                "update": {"i0": {"name": "Alice"}, (news.clone()): {"email": "x@example.test"}},
                "destroy": ["i0", sales.clone()]}, "u"],
            ["Identity/get", {"accountId": "a1"}, "g"]
        ]),
    );
    let set = &r[0][1];
    assert!(set["updated"].get("i0").is_some(), "{set}");
    assert_eq!(set["notUpdated"][&news]["type"], "invalidProperties", "{set}");
    assert_eq!(set["notDestroyed"]["i0"]["type"], "forbidden", "{set}");
    assert_eq!(set["destroyed"], json!([sales]), "{set}");
    let list = r[1][1]["list"].as_array().unwrap();
    let emails: Vec<(&str, &str, bool)> = list
        .iter()
        .map(|i| {
            (
                i["email"].as_str().unwrap(),
                i["name"].as_str().unwrap(),
                i["mayDelete"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        emails,
        [
            (ALICE, "Alice", false),
            ("alice+news@example.test", "Alice (news)", true)
        ]
    );
    assert_ne!(set["oldState"], set["newState"]);

    // Sending as an own address works, under its identity or i0; as an
    // address shared with Bob, or Bob's, it is forbiddenFrom.
    let ok = send(http, "alice+news@example.test", &news);
    assert!(ok["created"]["s"]["id"].is_string(), "{ok}");
    let ok = send(http, "sales@example.test", "i0");
    assert!(ok["created"]["s"]["id"].is_string(), "{ok}");
    for from in ["team@example.test", BOB] {
        let refused = send(http, from, "i0");
        assert_eq!(refused["notCreated"]["s"]["type"], "forbiddenFrom", "{from}: {refused}");
    }
    let gone = send(http, ALICE, &sales);
    assert_eq!(gone["notCreated"]["s"]["type"], "invalidProperties", "{gone}");
}
