//! The webmail page in a real browser: headless Chromium driven by
//! selenium (`webmail_browser.py`) against a real node. Skipped with a loud
//! line when Chromium, chromedriver or selenium is missing, unless
//! MESHMAIL_REQUIRE_CLIENTS=1 (CI installs them).

mod common;
mod jmap_common;

use common::{Node, setup_account, smtp_send};
use jmap_common::{api, basic};

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";
const PW: &str = "secret";

fn browser_available() -> bool {
    let selenium = std::process::Command::new("python3")
        .args(["-c", "import selenium"])
        .status()
        .is_ok_and(|s| s.success());
    let found = selenium
        && std::path::Path::new("/usr/bin/chromium").exists()
        && std::path::Path::new("/usr/bin/chromedriver").exists();
    if !found {
        assert!(
            std::env::var_os("MESHMAIL_REQUIRE_CLIENTS").is_none(),
            "chromium, chromium-driver and python3-selenium are required here"
        );
        eprintln!(
            "SKIPPED: chromium/chromedriver/selenium missing (apt-get install chromium chromium-driver; pip install selenium)"
        );
    }
    found
}

#[test]
fn webmail_in_a_real_browser() {
    if !browser_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    setup_account(dir.path(), BOB, PW);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    // An HTML-only message with a script: the page must show its text only.
    let html = "From: Bob <bob@example.test>\r\nTo: alice@example.test\r\nSubject: Hello from SMTP\r\n\
                Message-ID: <hello@example.test>\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
                <p><b>Bold claim</b> for lunch</p><script>window.pwned = 1; alert(1)</script>\
                <img src=x onerror=\"window.pwned=2\">\r\n";
    let (code, text) = smtp_send(node.addr("smtp"), BOB, ALICE, html);
    assert_eq!(code, 250, "{text}");

    let attachment = dir.path().join("notes.txt");
    std::fs::write(&attachment, "attached notes\n").unwrap();
    let screenshot = std::env::var("MESHMAIL_WEBMAIL_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path().join("webmail.png"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webmail_browser.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args([node.addr("http"), node.addr("smtp"), ALICE, PW])
        .arg(&screenshot)
        .arg(&attachment)
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{log}");
    assert!(out.status.success(), "browser run failed:\n{log}");
    assert!(
        std::fs::metadata(&screenshot).unwrap().len() > 10_000,
        "a real screenshot"
    );

    // The reply reached Bob, threaded under his message, with the attachment.
    let bob = basic(BOB, PW);
    let (_, v) = api(
        node.addr("http"),
        &bob,
        &serde_json::json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"], "methodCalls": [
            ["Email/query", {"accountId": "a2", "filter": {"inMailbox": "m1"}}, "q"],
            ["Email/get", {"accountId": "a2", "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"},
                "properties": ["subject", "attachments", "inReplyTo", "from"]}, "g"]]})
        .to_string(),
    );
    let list = &v["methodResponses"][1][1]["list"];
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(list[0]["subject"], "Re: Hello from SMTP");
    assert_eq!(list[0]["inReplyTo"][0], "hello@example.test");
    assert_eq!(list[0]["from"][0]["email"], ALICE);
    assert_eq!(list[0]["attachments"][0]["name"], "notes.txt", "{v}");
}
