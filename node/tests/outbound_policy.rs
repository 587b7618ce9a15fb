//! Outbound delivery to peers that ask for more (or offer less): the
//! 8BITMIME downgrade for a peer without 8BITMIME (RFC 6152 §3), MTA-STS
//! policies (RFC 8461) served over HTTPS by a test CA, and `TLS-Required:
//! No` (RFC 8689 §5). Real sockets throughout: the DNS server, the MX hosts
//! and the HTTPS policy host of `py/outbound_peer.py`, submission with
//! smtplib, and Python's email parser and dkimpy as the judges.

mod common;
mod outbound_common;

use std::time::Duration;

use common::{meshmail, run_ok};
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
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mx");
    std::fs::create_dir_all(&out).unwrap();
    let peer = Peer::start(&out);
    let data = dir.path().join("data");
    let _ = meshmail(&data).args(["domain", "add", "local.test"]).output();
    let zone_line = run_ok(
        meshmail(&data).args(["dkim", "generate", "local.test", "--selector", "s1"]),
        None,
    );
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
        let (ok, out) = check(&[
            "submit-file",
            node.addr("submission"),
            USER,
            PASSWORD,
            USER,
            "bob@seven.test",
            path.to_str().unwrap(),
        ]);
        assert!(ok, "submission failed: {out}");
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
        let (ok, out) = check(&["dkim", file, zone_line.trim()]);
        assert!(ok, "{name}: dkimpy did not verify the downgraded copy: {out}\n{raw}");
    }

    // 8-bit in a header field: only SMTPUTF8 would carry it.
    let header8 = "From: Alice <alice@local.test>\r\nTo: bob@seven.test\r\nSubject: caf\u{e9}\r\n\r\nbody\r\n";
    let path = dir.path().join("header8.eml");
    std::fs::write(&path, header8).unwrap();
    let (ok, out) = check(&[
        "submit-file",
        node.addr("submission"),
        USER,
        PASSWORD,
        USER,
        "carol@seven.test",
        path.to_str().unwrap(),
    ]);
    assert!(ok, "submission failed: {out}");
    let (ok, text) = check(&["dsn", node.addr("imap"), USER, PASSWORD, "5.6.7", "carol@seven.test"]);
    assert!(ok, "no 5.6.7 DSN for 8-bit headers to a peer without SMTPUTF8: {text}");
    assert!(peer.next_message(Duration::from_millis(500)).is_none());
    verify_ledger(&data);
}
