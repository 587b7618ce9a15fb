//! Outbound delivery to peers that ask for more (or offer less): the
//! 8BITMIME downgrade for a peer without 8BITMIME (RFC 6152 §3), MTA-STS
//! policies (RFC 8461) served over HTTPS by a test CA, and `TLS-Required:
//! No` (RFC 8689 §5). Real sockets throughout: the DNS server, the MX hosts
//! and the HTTPS policy host of `py/outbound_peer.py`, submission with
//! smtplib, and Python's email parser and dkimpy as the judges.

mod common;
mod outbound_common;

use std::time::Duration;

use outbound_common::*;

/// A multipart message with an 8-bit text part, a 7-bit part and an 8-bit
/// octet-stream, submitted with BODY=8BITMIME, reaches the MX that offers
/// no 8BITMIME (and refuses any 8-bit octet) as 7-bit MIME that Python's
/// email parser decodes to the original parts, DKIM-signed over what was
/// sent (dkimpy verifies); so does a non-MIME 8-bit message. A message
/// with 8-bit header fields still bounces (5.6.7: that needs SMTPUTF8).
#[test]
fn eight_bit_mail_is_downgraded_for_a_7bit_peer() {
    if !python_available() {
        return;
    }
    let (dir, peer, data) = scratch_peer();
    let zone_line = local_domain_with_dkim(&data);
    let node = start_node(&data, &peer, "retry_schedule_s = [1]\ndelay_warning_s = 0\n");

    let multipart = format!(
        "From: Alice <{USER}>\r\nTo: bob@seven.test\r\nSubject: downgrade\r\n\
         Date: Tue, 01 Dec 2026 08:00:00 +0000\r\nMessage-ID: <dg1@local.test>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n\
         --b1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n\
         Gr\u{fc}\u{df}e aus K\u{f6}ln x=41 \u{2014} \u{fc}n\u{ef}c\u{f6}d\u{e9} \r\n.leading dot\r\n\
         --b1\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nplain ascii part\r\n\
         --b1\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: 8bit\r\n\r\n\
         \u{ff}\u{80}binary-ish\r\n--b1--\r\n"
    );
    let plain = format!(
        "From: Alice <{USER}>\r\nTo: bob@seven.test\r\nSubject: plain 8-bit\r\n\
         Date: Tue, 01 Dec 2026 08:00:00 +0000\r\nMessage-ID: <dg2@local.test>\r\n\r\n\
         Na\u{ef}ve caf\u{e9} text without MIME headers\r\n"
    );
    for (name, text) in [("multipart.eml", &multipart), ("plain.eml", &plain)] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        submit_file(&node, "bob@seven.test", &path, &[]);
        let msg = peer
            .next_message(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{name} not delivered to the 7-bit MX"));
        assert_eq!(msg["mx"], "127.0.0.3", "{msg}");
        let file = msg["file"].as_str().unwrap();
        let (ok, out) = check(&["same-content", file, path.to_str().unwrap()]);
        let raw = String::from_utf8_lossy(&std::fs::read(file).unwrap()).into_owned();
        assert!(ok, "{name}: not the same content after the downgrade: {out}\n{raw}");
        if name == "multipart.eml" {
            // The 7-bit part went as it was.
            assert!(
                raw.contains("--b1\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nplain ascii part\r\n--b1"),
                "{raw}"
            );
            assert!(raw.contains("Content-Transfer-Encoding: quoted-printable"), "{raw}");
        }
        let (ok, out) = check(&["dkim", file, &zone_line]);
        assert!(ok, "{name}: dkimpy did not verify the downgraded copy: {out}\n{raw}");
    }

    // 8-bit in a header field: only SMTPUTF8 would carry it.
    let header8 = "From: Alice <alice@local.test>\r\nTo: bob@seven.test\r\nSubject: caf\u{e9}\r\n\r\nbody\r\n";
    let path = dir.path().join("header8.eml");
    std::fs::write(&path, header8).unwrap();
    submit_file(&node, "carol@seven.test", &path, &[]);
    let (ok, text) = check(&["dsn", node.addr("imap"), USER, PASSWORD, "5.6.7", "carol@seven.test"]);
    assert!(ok, "no 5.6.7 DSN for 8-bit headers to a peer without SMTPUTF8: {text}");
    assert!(peer.next_message(Duration::from_millis(500)).is_none());
    verify_ledger(&data);
}

/// The domains of the MTA-STS test, their MX and policy: mx.sts.test is
/// the STARTTLS MX whose certificate the test CA signed, mx.remote.test
/// offers no TLS. Each publishes `_mta-sts` TXT and a policy on the HTTPS
/// host.
const STS_DOMAINS: &[(&str, &str, &str)] = &[
    ("enforce-bad.test", "mx.sts.test", "mode: enforce\nmx: mx.other.test\n"),
    ("enforce-ok.test", "mx.sts.test", "mode: enforce\nmx: *.sts.test\n"),
    (
        "enforce-plain.test",
        "mx.remote.test",
        "mode: enforce\nmx: mx.remote.test\n",
    ),
    ("testing.test", "mx.sts.test", "mode: testing\nmx: mx.other.test\n"),
    ("tlsno.test", "mx.sts.test", "mode: enforce\nmx: mx.other.test\n"),
];

fn sts_setup(dir: &std::path::Path, lifetime_s: u32) -> (Peer, common::Node, std::path::PathBuf) {
    let mut names = vec!["mx.sts.test".to_string()];
    names.extend(STS_DOMAINS.iter().map(|(d, _, _)| format!("mta-sts.{d}")));
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let ca = TestCa::new(&dir.join("tls"), &names);
    let out = dir.join("mx");
    std::fs::create_dir_all(&out).unwrap();
    let peer = Peer::start_with(&out, Some(&ca.dir));
    for (domain, mx_host, policy) in STS_DOMAINS {
        let mx = format!("{domain}.");
        let mx_value = format!("10 {mx_host}.");
        let txt = format!("_mta-sts.{domain}.");
        let host = format!("mta-sts.{domain}.");
        peer.add_records(&[
            (&mx, "MX", &mx_value),
            (&txt, "TXT", "v=STSv1; id=20261201a;"),
            (&host, "A", "127.0.0.4"),
        ]);
        peer.set_policy(domain, &format!("version: STSv1\n{policy}max_age: 86400\n"));
    }
    let data = dir.join("data");
    let node = start_node(
        &data,
        &peer,
        &format!(
            "retry_schedule_s = [1]\ndelay_warning_s = 0\nmax_lifetime_s = {lifetime_s}\n\
             tls_ca_file = \"{}\"\nmta_sts_port = {}\n",
            ca.ca_file().display(),
            peer.https_port.expect("HTTPS policy server")
        ),
    );
    (peer, node, data)
}

/// The `queue show` of the one queued item for `rcpt`, once its last error
/// contains `want`.
fn queued_with_error(data: &std::path::Path, rcpt: &str, want: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = queue(data, &["list"]);
        if let Some(line) = list.lines().find(|l| l.contains(rcpt)) {
            let id = line.split('\t').next().unwrap();
            let shown = queue(data, &["show", id]);
            if shown.contains(want) {
                return shown;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{rcpt} never queued with {want:?}: {list}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// MTA-STS: an `enforce` policy whose mx patterns do not match the MX
/// keeps the message queued (`queue show` says why) and bounces it at
/// expiry with 4.7.5 and the reason; a matching policy delivers over
/// verified TLS; `testing` delivers and counts the violation; the policy
/// is fetched once per domain (then read from the store).
#[test]
fn mta_sts_policies_are_applied() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (peer, node, data) = sts_setup(dir.path(), 12);

    submit(&node, "bob@enforce-bad.test", "sts refused");
    let shown = queued_with_error(&data, "bob@enforce-bad.test", "MTA-STS");
    assert!(
        shown.contains("MTA-STS policy of enforce-bad.test (enforce, id 20261201a)")
            && shown.contains("mx.other.test")
            && shown.contains("mx.sts.test"),
        "{shown}"
    );

    // A matching MX without TLS: refused too (enforce needs verified TLS).
    submit(&node, "bob@enforce-plain.test", "sts plaintext");
    let shown = queued_with_error(&data, "bob@enforce-plain.test", "offered no TLS");
    assert!(shown.contains("tls=none"), "{shown}");

    for n in 0..2 {
        submit(&node, "bob@enforce-ok.test", &format!("sts ok {n}"));
        let msg = peer
            .next_message(Duration::from_secs(30))
            .expect("delivered under a matching enforce policy");
        assert_eq!(msg["rcpts"], serde_json::json!(["bob@enforce-ok.test"]));
        assert_eq!(msg["tls"], true, "{msg}");
        let raw = std::fs::read_to_string(msg["file"].as_str().unwrap()).unwrap();
        assert!(
            raw.contains("X-Meshmail-Outbound: tls=verified; mx=mx.sts.test"),
            "{raw}"
        );
    }

    submit(&node, "bob@testing.test", "sts testing");
    let msg = peer
        .next_message(Duration::from_secs(30))
        .expect("delivered under a testing policy");
    assert_eq!(msg["rcpts"], serde_json::json!(["bob@testing.test"]));
    let refused = metric(
        &node,
        "meshmail_outbound_mta_sts_refused_total{mode=\"testing\",reason=\"mx\"}",
    );
    assert!(refused >= 1.0, "testing-mode violation not counted");
    // Four domains, four fetches: the second enforce-ok message used the
    // stored policy.
    let fetched = metric(&node, "meshmail_outbound_mta_sts_fetches_total{outcome=\"ok\"}");
    assert_eq!(fetched, 4.0, "policy fetches");

    // The refused one bounces at expiry, the DSN saying why.
    let (ok, text) = check(&[
        "dsn",
        node.addr("imap"),
        USER,
        PASSWORD,
        "4.7.5",
        "bob@enforce-bad.test",
    ]);
    assert!(
        ok && text.contains("MTA-STS"),
        "no 4.7.5 DSN for the MTA-STS refusal: {text}"
    );
    assert!(
        peer.next_message(Duration::from_millis(500)).is_none(),
        "refused mail was delivered"
    );
    verify_ledger(&data);
}

/// RFC 8689 §5 `TLS-Required: No`: the enforce policy of tlsno.test (which
/// does not list its MX) is ignored, and a peer whose STARTTLS is broken
/// gets the message in plaintext; without the header the same peer is
/// refused. With REQUIRETLS too, REQUIRETLS wins: the policy applies.
#[test]
fn tls_required_no_overrides_mta_sts() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (peer, node, data) = sts_setup(dir.path(), 3600);
    let send = |name: &str, rcpt: &str, header: bool, options: &[&str]| {
        let text = format!(
            "From: Alice <{USER}>\r\nTo: {rcpt}\r\nSubject: {name}\r\n\
             Date: Tue, 01 Dec 2026 08:00:00 +0000\r\nMessage-ID: <{name}@local.test>\r\n{}\r\nbody\r\n",
            if header { "TLS-Required: No\r\n" } else { "" }
        );
        let path = dir.path().join(format!("{name}.eml"));
        std::fs::write(&path, text).unwrap();
        submit_file(&node, rcpt, &path, options);
    };

    send("tlsno", "bob@tlsno.test", true, &[]);
    let msg = peer
        .next_message(Duration::from_secs(30))
        .expect("TLS-Required: No ignores the MTA-STS policy");
    assert_eq!(msg["rcpts"], serde_json::json!(["bob@tlsno.test"]));

    send("badtls", "bob@badtls.test", true, &[]);
    let msg = peer
        .next_message(Duration::from_secs(30))
        .expect("TLS-Required: No falls back to plaintext after a broken STARTTLS");
    assert_eq!(msg["rcpts"], serde_json::json!(["bob@badtls.test"]));
    assert_eq!(msg["tls"], false, "{msg}");

    send("badtls-strict", "carol@badtls.test", false, &[]);
    let shown = queued_with_error(&data, "carol@badtls.test", "TLS");
    assert!(shown.contains("tls-required-no=false"), "{shown}");

    send("both", "dave@tlsno.test", true, &["REQUIRETLS"]);
    let shown = queued_with_error(&data, "dave@tlsno.test", "MTA-STS");
    assert!(
        shown.contains("requiretls=true tls-required-no=false"),
        "REQUIRETLS must win over TLS-Required: No: {shown}"
    );
    assert!(peer.next_message(Duration::from_millis(500)).is_none());
    let fallbacks = metric(&node, "meshmail_outbound_tls_fallbacks_total");
    assert!(fallbacks >= 1.0, "fallback not counted");
}
