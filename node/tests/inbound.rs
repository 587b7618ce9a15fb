//! Inbound authentication (SPF, DKIM, DMARC, ARC → Authentication-Results,
//! DMARC p=reject → 550) and address routing (aliases, catch-all, +tag,
//! forwarding, 550 at RCPT) over real sockets: a dnslib DNS server the
//! test starts on loopback, dkimpy-signed messages sent with smtplib, read
//! back with imaplib.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{Node, meshmail, run_ok, setup_account, write_config};

const PASSWORD: &str = "inbound test password";

/// A testdns.py server; it exits when its stdin (held here) closes.
pub struct TestDns {
    child: Child,
    pub port: u16,
}

impl TestDns {
    pub fn start(zone: &std::path::Path) -> TestDns {
        std::fs::write(zone, r#"{"records": []}"#).unwrap();
        let mut child = Command::new("python3")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/testdns.py"))
            .arg(zone)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("testdns did not start: {line:?}"));
        TestDns { child, port }
    }
}

impl Drop for TestDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the Python packages a suite imports are installed (CI installs
/// .ci/requirements.txt; elsewhere a missing one skips the test loudly).
pub fn python_modules_available(modules: &[&str]) -> bool {
    let ok = Command::new("python3")
        .arg("-c")
        .arg(format!("import {}", modules.join(", ")))
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("MESHMAIL_REQUIRE_CLIENTS").is_none(),
            "python modules {modules:?} are required here: pip install -r .ci/requirements.txt"
        );
        eprintln!("SKIPPED: python modules {modules:?} missing (pip install -r .ci/requirements.txt)");
    }
    ok
}

#[test]
fn authentication_results_dmarc_reject_and_routing() {
    if !python_modules_available(&["dnslib", "dkim", "authres"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let zone = d.join("zone.json");
    let dns = TestDns::start(&zone);

    setup_account(d, "alice@example.org", PASSWORD);
    setup_account(d, "bob@example.org", PASSWORD);
    run_ok(meshmail(d).args(["domain", "add", "catch.example.org"]), None);
    for (alias, targets) in [
        ("sales@example.org", "alice@example.org,bob@example.org"),
        ("team@example.org", "sales@example.org"),
        ("@catch.example.org", "bob@example.org"),
        ("fwd@example.org", "friend@remote.test"),
        ("loop1@example.org", "loop2@example.org"),
        ("loop2@example.org", "loop1@example.org"),
        ("alice.smith@example.org", "alice@example.org"),
    ] {
        run_ok(meshmail(d).args(["alias", "add", alias, targets]), None);
    }
    let listed = run_ok(meshmail(d).args(["alias", "list"]), None);
    assert!(listed.contains("@catch.example.org\tbob@example.org"), "{listed}");
    // An alias may not shadow an account, nor live in a foreign domain.
    let shadow = meshmail(d)
        .args(["alias", "add", "alice@example.org", "bob@example.org"])
        .output()
        .unwrap();
    assert!(!shadow.status.success());
    let foreign = meshmail(d)
        .args(["alias", "add", "x@remote.test", "bob@example.org"])
        .output()
        .unwrap();
    assert!(!foreign.status.success());

    let cfg = write_config(
        d,
        &format!(
            "[dns]\nresolver = \"127.0.0.1:{}\"\ntimeout_ms = 2000\n\n\
             [smtp]\n# The test's client is on loopback: check it too.\ninbound_auth_skip_networks = []\n\
             allow_plaintext_auth_on_loopback = true\n",
            dns.port
        ),
    );
    let n = Node::start(
        d,
        &["--config", cfg.to_str().unwrap(), "--allow-plaintext-auth-on-loopback"],
        &[],
    );
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/inbound_suite.py"))
        .arg(&zone)
        .args([n.addr("smtp"), n.addr("imap"), n.addr("submission"), PASSWORD])
        .output()
        .expect("python3");
    let report = String::from_utf8_lossy(&out.stderr);
    eprintln!("{report}");
    assert!(out.status.success(), "inbound suite failed");

    let queue = run_ok(meshmail(d).args(["queue", "list"]), None);
    let line = queue
        .lines()
        .find(|l| l.contains("friend@remote.test"))
        .unwrap_or_else(|| panic!("forwarded copy queued: {queue}"));
    // It leaves with an SRS sender under the alias's domain (SPF at the
    // remote end sees example.org, not the original sender's domain).
    let srs = line
        .split(|c: char| c.is_whitespace() || c == '<' || c == '>')
        .find(|w| w.starts_with("SRS0="))
        .unwrap_or_else(|| panic!("an SRS0 sender in {line:?}"));
    assert!(srs.ends_with("=nowhere.test=x@example.org"), "{srs}");
    // A bounce to that address is accepted (and routed to the original
    // sender); a forged one is refused at RCPT.
    let bounce = "From: MAILER-DAEMON@remote.test\r\nSubject: bounce\r\n\r\nundeliverable\r\n";
    let (code, text) = common::smtp_send(n.addr("smtp"), "", srs, bounce);
    assert_eq!(code, 250, "{text}");
    let forged = srs.replacen("SRS0=", "SRS0=Z", 1);
    let (code, text) = common::smtp_send(n.addr("smtp"), "", &forged, bounce);
    assert_eq!(code, 550, "{text}");
    let queue = run_ok(meshmail(d).args(["queue", "list"]), None);
    assert!(
        queue.contains("x@nowhere.test"),
        "the bounce goes back to the original sender: {queue}"
    );
    let verify = meshmail(d).args(["verify", "ledger"]).output().unwrap();
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{text}");

    let metrics = common::http_get(n.addr("http"), "/metrics");
    assert!(
        metrics.contains("meshmail_smtp_inbound_auth_results_total{method=\"dkim\",result=\"pass\"}"),
        "per-method result counters"
    );
}

/// DNS that never answers (a UDP port nobody reads): the checks end with
/// `temperror` within their bounds and the message is accepted — a DNS
/// outage neither stalls nor refuses mail.
#[test]
fn dns_outage_gives_temperror_and_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A bound socket that is never read: queries go unanswered.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    setup_account(d, "alice@example.org", PASSWORD);
    let cfg = write_config(
        d,
        &format!(
            "[dns]\nresolver = \"127.0.0.1:{port}\"\ntimeout_ms = 300\n\n\
             [smtp]\ninbound_auth_skip_networks = []\n"
        ),
    );
    let n = Node::start(d, &["--config", cfg.to_str().unwrap()], &[]);
    let started = std::time::Instant::now();
    let (code, text) = common::smtp_send(
        n.addr("smtp"),
        "someone@unreachable.test",
        "alice@example.org",
        "From: someone@unreachable.test\r\nSubject: dns down\r\n\r\nhello\r\n",
    );
    let took = started.elapsed();
    assert_eq!(code, 250, "{text}");
    assert!(took < std::time::Duration::from_secs(25), "bounded: {took:?}");
    let metrics = common::http_get(n.addr("http"), "/metrics");
    assert!(
        metrics.contains("meshmail_smtp_inbound_auth_results_total{method=\"spf\",result=\"temperror\"}")
            || metrics.contains("meshmail_smtp_inbound_auth_timeouts_total"),
        "a temporary result was recorded"
    );
    drop(silent);
}
