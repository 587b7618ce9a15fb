//! Day one (issue 42 item 5): `meshmail dns records DOMAIN` prints every
//! record from the config, and the node serves the Thunderbird autoconfig
//! file and the MTA-STS policy over HTTP. Checked by independent code
//! (py/day_one.py): xml.etree reads the autoconfig file, RFC 8461's
//! grammar the policy, and dkimpy verifies a message the node signed with
//! the DKIM record `dns records` printed, looked up over DNS in the test
//! DNS server the outbound tests use.

mod common;
mod outbound_common;

use std::time::Duration;

use common::{http_get, meshmail, python_script, run_ok};
use meshmail_storage::blob::content_hash;
use outbound_common::*;

const PUBLISH: &str = "[publish]\nimap_port = 143\nimaps_port = 993\nsubmission_port = 587\n\
                       submissions_port = 465\njmap_port = 443\nmta_sts_mode = \"enforce\"\n\
                       mta_sts_max_age_s = 86400\nmx_hosts = [\"mail.local.test\", \"mx2.local.test\"]\n";

/// The body of an HTTP answer, after checking its status line.
fn body_of(answer: &str, status: &str) -> String {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with(&format!("HTTP/1.1 {status}")), "{head}");
    body.to_string()
}

/// The value of a zone line's TXT strings, joined.
fn txt_value(line: &str) -> String {
    line.split('"').skip(1).step_by(2).collect()
}

fn check(dir: &std::path::Path, args: &[&str], file_text: &str) {
    let file = dir.join("checked");
    std::fs::write(&file, file_text).unwrap();
    let mut all = vec![args[0], file.to_str().unwrap()];
    all.extend_from_slice(&args[1..]);
    let (ok, out) = python_script("day_one.py", &all);
    assert!(ok, "{args:?}: {out}\n{file_text}");
}

#[test]
fn dns_records_autoconfig_and_mta_sts_come_from_the_config() {
    if !python_available() {
        return;
    }
    let (dir, peer, data) = scratch_peer();
    local_domain_with_dkim(&data);
    let node = start_node(&data, &peer, &format!("\n{PUBLISH}"));
    let cfg = data.join("meshmail.toml");
    let records = run_ok(
        meshmail(&data)
            .arg("--config")
            .arg(&cfg)
            .args(["dns", "records", "local.test"]),
        None,
    );
    for want in [
        "local.test. 3600 IN MX 10 mail.local.test.",
        "local.test. 3600 IN MX 20 mx2.local.test.",
        "local.test. 3600 IN TXT \"v=spf1 mx -all\"",
        "s1._domainkey.local.test. 3600 IN TXT \"v=DKIM1; k=rsa; p=",
        "_dmarc.local.test. 3600 IN TXT \"v=DMARC1; p=quarantine; rua=mailto:postmaster@local.test\"",
        "_mta-sts.local.test. 3600 IN TXT \"v=STSv1; id=",
        "_smtp._tls.local.test. 3600 IN TXT \"v=TLSRPTv1; rua=mailto:postmaster@local.test\"",
        "_imap._tcp.local.test. 3600 IN SRV 0 1 143 mail.local.test.",
        "_imaps._tcp.local.test. 3600 IN SRV 0 1 993 mail.local.test.",
        "_submission._tcp.local.test. 3600 IN SRV 0 1 587 mail.local.test.",
        "_submissions._tcp.local.test. 3600 IN SRV 0 1 465 mail.local.test.",
        "_jmap._tcp.local.test. 3600 IN SRV 0 1 443 mail.local.test.",
        "_pop3s._tcp.local.test. 3600 IN SRV 0 0 0 .",
    ] {
        assert!(records.contains(want), "missing {want:?} in\n{records}");
    }

    // The DKIM record, published in the test DNS, verifies what the node signs.
    let dkim_line = records.lines().find(|l| l.starts_with("s1._domainkey.")).unwrap();
    peer.add_records(&[("s1._domainkey.local.test.", "TXT", &txt_value(dkim_line))]);
    submit(&node, "bob@remote.test", "signed on day one");
    let msg = peer
        .next_message(Duration::from_secs(30))
        .expect("delivered to the remote MX");
    let (ok, out) = python_script("day_one.py", &["dkim", msg["file"].as_str().unwrap(), &peer.dns]);
    assert!(ok, "dkimpy did not verify through DNS: {out}");

    // Autoconfig at both paths, for a local domain only.
    let http = node.addr("http");
    let expected = r#"{"domain": "local.test",
        "incoming": [["imap", "mail.local.test", 993, "SSL"], ["imap", "mail.local.test", 143, "STARTTLS"]],
        "outgoing": [["smtp", "mail.local.test", 465, "SSL"], ["smtp", "mail.local.test", 587, "STARTTLS"]]}"#;
    for path in [
        "/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=alice%40local.test",
        "/mail/config-v1.1.xml?emailaddress=alice@local.test",
    ] {
        let xml = body_of(&http_get(http, path), "200");
        check(dir.path(), &["autoconfig", expected], &xml);
    }
    let other = http_get(http, "/mail/config-v1.1.xml?emailaddress=a@elsewhere.test");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");

    // The MTA-STS policy: RFC 8461's grammar, and the record's id is its own.
    let answer = http_get(http, "/.well-known/mta-sts.txt");
    assert!(
        answer.to_ascii_lowercase().contains("content-type: text/plain"),
        "{answer}"
    );
    let policy = body_of(&answer, "200");
    check(dir.path(), &["mta-sts"], &policy);
    assert!(
        policy.contains("mode: enforce\r\n") && policy.contains("mx: mx2.local.test\r\n"),
        "{policy}"
    );
    let id_line = records.lines().find(|l| l.starts_with("_mta-sts.")).unwrap();
    assert!(
        id_line.contains(&format!("id={}\"", &content_hash(policy.as_bytes())[..20])),
        "{id_line}"
    );
}
