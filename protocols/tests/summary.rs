//! `summarize` on the kinds of messages an IMAP server must describe.

use meshmail_protocols::summary::{BodyPart, ImapAddress, MAX_DEPTH, Summary, summarize};

fn crlf(s: &str) -> Vec<u8> {
    s.replace("\r\n", "\n").replace('\n', "\r\n").into_bytes()
}

fn slice(raw: &[u8], from: u64, to: u64) -> &str {
    std::str::from_utf8(&raw[from as usize..to as usize]).unwrap()
}

fn json_round_trip(s: &Summary) {
    let json = serde_json::to_string(s).unwrap();
    let back: Summary = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, s);
}

const MIXED: &str = "From: Alice <alice@example.org>
To: Bob <bob@example.net>, carol@example.net
Subject: Report
Date: Tue, 1 Jul 2025 10:00:00 +0200
Message-ID: <m1@example.org>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=\"b1\"

preamble
--b1
Content-Type: text/plain; charset=utf-8
Content-Language: en, fr

Hello Bob,
here is the report.
--b1
Content-Type: application/pdf; name=\"r.pdf\"
Content-Transfer-Encoding: base64
Content-Disposition: attachment; filename=\"r.pdf\"
Content-ID: <att1@example.org>
Content-Description: The report

JVBERi0xLjQK
JVBERi0xLjQK
--b1--
epilogue
";

#[test]
fn multipart_mixed_with_attachment() {
    let raw = crlf(MIXED);
    let s = summarize(&raw);
    assert!(!s.parse_failed);
    assert_eq!(s.size, raw.len() as u64);
    assert_eq!(s.header_len, s.body_offset);
    let header = slice(&raw, 0, s.header_len);
    assert!(header.starts_with("From: Alice") && header.ends_with("boundary=\"b1\"\r\n\r\n"));
    assert!(slice(&raw, s.body_offset, s.size).starts_with("preamble"));

    let env = &s.envelope;
    assert_eq!(env.subject.as_ref().unwrap().raw, "Report");
    assert_eq!(env.date.as_deref(), Some("Tue, 1 Jul 2025 10:00:00 +0200"));
    assert_eq!(env.date_timestamp, Some(1_751_356_800));
    assert_eq!(env.message_id.as_deref(), Some("<m1@example.org>"));
    assert_eq!(env.in_reply_to, None);
    let alice = ImapAddress {
        name: Some("Alice".into()),
        raw_name: Some("Alice".into()),
        adl: None,
        mailbox: Some("alice".into()),
        host: Some("example.org".into()),
    };
    assert_eq!(env.from.addresses, vec![alice.clone()]);
    // Absent Sender and Reply-To take the From value (RFC 3501 §7.4.2).
    assert_eq!(env.sender.addresses, vec![alice.clone()]);
    assert_eq!(env.reply_to.addresses, vec![alice]);
    assert_eq!(env.to.addresses.len(), 2);
    assert_eq!(env.to.addresses[1].name, None);
    assert_eq!(env.to.raw.as_deref(), Some("Bob <bob@example.net>, carol@example.net"));
    assert!(env.cc.addresses.is_empty() && env.cc.raw.is_none());

    let root = &s.structure;
    assert_eq!(
        (root.media_type.as_str(), root.subtype.as_str()),
        ("multipart", "mixed")
    );
    assert_eq!(root.params, vec![("boundary".to_string(), "b1".to_string())]);
    assert_eq!(root.children.len(), 2);

    let text = s.part(&[1]).unwrap();
    assert_eq!((text.media_type.as_str(), text.subtype.as_str()), ("text", "plain"));
    assert_eq!(text.params, vec![("charset".to_string(), "utf-8".to_string())]);
    assert_eq!(text.language, vec!["en".to_string(), "fr".to_string()]);
    assert_eq!(text.encoding, "7bit");
    assert_eq!(
        slice(&raw, text.body_offset, text.end_offset),
        "Hello Bob,\r\nhere is the report."
    );
    assert_eq!(text.size, 31);
    // One line break in the content: the CRLF after "report." belongs to
    // the boundary (RFC 2046 §5.1.1), as Dovecot counts.
    assert_eq!(text.lines, Some(1));
    assert_eq!(
        slice(&raw, text.header_offset, text.body_offset),
        "Content-Type: text/plain; charset=utf-8\r\nContent-Language: en, fr\r\n\r\n"
    );

    let pdf = s.part(&[2]).unwrap();
    assert_eq!((pdf.media_type.as_str(), pdf.subtype.as_str()), ("application", "pdf"));
    assert_eq!(pdf.encoding, "base64");
    assert_eq!(pdf.id.as_deref(), Some("<att1@example.org>"));
    assert_eq!(pdf.description.as_deref(), Some("The report"));
    assert_eq!(pdf.lines, None);
    assert_eq!(pdf.md5, None);
    let disposition = pdf.disposition.as_ref().unwrap();
    assert_eq!(disposition.kind, "attachment");
    assert_eq!(disposition.params, vec![("filename".to_string(), "r.pdf".to_string())]);
    assert_eq!(
        slice(&raw, pdf.body_offset, pdf.end_offset),
        "JVBERi0xLjQK\r\nJVBERi0xLjQK"
    );
    assert!(s.part(&[3]).is_none());
    assert!(s.part(&[0]).is_none());
    assert!(s.part(&[]).is_none());
    json_round_trip(&s);
}

const NESTED: &str = "From: list@example.org
To: bob@example.net
Subject: Fwd: lunch
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: text/plain

See below.
--outer
Content-Type: message/rfc822
Content-Description: forwarded

From: Carol <carol@example.net>
To: list@example.org
Subject: lunch
In-Reply-To: <x@y>
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain

noon?
--inner
Content-Type: text/html

<p>noon?</p>
--inner--

--outer--
";

#[test]
fn nested_message_rfc822() {
    let raw = crlf(NESTED);
    let s = summarize(&raw);
    assert!(!s.parse_failed);
    assert_eq!(s.structure.children.len(), 2);
    let fwd = s.part(&[2]).unwrap();
    assert_eq!((fwd.media_type.as_str(), fwd.subtype.as_str()), ("message", "rfc822"));
    assert_eq!(fwd.description.as_deref(), Some("forwarded"));
    let nested = fwd.message.as_ref().expect("encapsulated message");
    assert_eq!(nested.envelope.subject.as_ref().unwrap().decoded, "lunch");
    assert_eq!(nested.envelope.in_reply_to.as_deref(), Some("<x@y>"));
    assert_eq!(nested.envelope.from.addresses[0].mailbox.as_deref(), Some("carol"));
    // BODY[2] is the whole encapsulated message; BODY[2.HEADER] its header.
    let whole = slice(&raw, fwd.body_offset, fwd.end_offset);
    assert!(
        whole.starts_with("From: Carol") && whole.ends_with("--inner--\r\n"),
        "{whole:?}"
    );
    assert_eq!(fwd.lines, Some(whole.matches('\n').count() as u64));
    let header = slice(&raw, nested.header_offset, nested.body_offset);
    assert!(header.starts_with("From: Carol") && header.ends_with("boundary=inner\r\n\r\n"));
    assert_eq!(nested.structure.subtype, "alternative");
    // Section numbers continue into the encapsulated message.
    let plain = s.part(&[2, 1]).unwrap();
    let html = s.part(&[2, 2]).unwrap();
    assert_eq!(slice(&raw, plain.body_offset, plain.end_offset), "noon?");
    assert_eq!(slice(&raw, html.body_offset, html.end_offset), "<p>noon?</p>");
    assert_eq!(
        slice(&raw, html.header_offset, html.body_offset),
        "Content-Type: text/html\r\n\r\n"
    );
    assert!(s.part(&[2, 3]).is_none());
    // Inside a multipart, a single part is its own only subpart (as Dovecot
    // numbers them); deeper than that there is nothing.
    assert_eq!(s.part(&[1, 1]), s.part(&[1]));
    assert!(s.part(&[1, 2]).is_none());
    json_round_trip(&s);
}

#[test]
fn encoded_words_are_decoded_and_raw_is_kept() {
    let raw = crlf(
        "From: =?ISO-8859-1?Q?Andr=E9?= Pirard <PIRARD@vm1.ulg.ac.be>
Sender: =?UTF-8?B?w4lsb2lzZQ==?= <eloise@example.fr>
To: undisclosed-recipients:;
Cc: friends: a@example.org, b@example.org;, c@example.org
Subject: =?UTF-8?B?UHLDvGZ1bmcgw6Rsw7Z0?=
 =?UTF-8?Q?_=E2=9C=93?=

body
",
    );
    let s = summarize(&raw);
    let env = &s.envelope;
    let subject = env.subject.as_ref().unwrap();
    assert_eq!(subject.decoded, "Prüfung älöt ✓");
    assert_eq!(subject.raw, "=?UTF-8?B?UHLDvGZ1bmcgw6Rsw7Z0?= =?UTF-8?Q?_=E2=9C=93?=");
    assert_eq!(env.from.addresses[0].name.as_deref(), Some("André Pirard"));
    assert_eq!(env.from.addresses[0].host.as_deref(), Some("vm1.ulg.ac.be"));
    assert_eq!(
        env.from.raw.as_deref(),
        Some("=?ISO-8859-1?Q?Andr=E9?= Pirard <PIRARD@vm1.ulg.ac.be>")
    );
    assert_eq!(env.sender.addresses[0].name.as_deref(), Some("Éloise"));
    // Groups: start marker, members, end marker.
    let group_start = |name: &str| ImapAddress {
        mailbox: Some(name.into()),
        ..ImapAddress::default()
    };
    assert_eq!(
        env.to.addresses,
        vec![group_start("undisclosed-recipients"), ImapAddress::default()]
    );
    let cc: Vec<_> = env
        .cc
        .addresses
        .iter()
        .map(|a| (a.mailbox.clone(), a.host.clone()))
        .collect();
    assert_eq!(
        cc,
        vec![
            (Some("friends".into()), None),
            (Some("a".into()), Some("example.org".into())),
            (Some("b".into()), Some("example.org".into())),
            (None, None),
            (Some("c".into()), Some("example.org".into())),
        ]
    );
    json_round_trip(&s);
}

#[test]
fn header_only_message() {
    let raw = crlf("Subject: no body\nFrom: a@example.org\n");
    let s = summarize(&raw);
    assert!(!s.parse_failed);
    assert_eq!(s.envelope.subject.as_ref().unwrap().decoded, "no body");
    assert_eq!(s.header_len, raw.len() as u64);
    assert_eq!(s.body_offset, raw.len() as u64);
    assert_eq!(s.structure.size, 0);
    assert_eq!(s.structure.lines, Some(0));
    assert_eq!(s.structure.media_type, "text");
    // Headers and an empty body.
    let raw = crlf("Subject: empty\n\n");
    let s = summarize(&raw);
    assert_eq!(s.header_len, raw.len() as u64);
    assert_eq!(s.structure.size, 0);
    json_round_trip(&s);
}

#[test]
fn non_mime_message_is_text_plain_us_ascii() {
    let raw = crlf("Subject: plain\n\nline 1\nline 2\n");
    let s = summarize(&raw);
    let part = s.part(&[1]).unwrap();
    assert_eq!(part, &s.structure);
    assert_eq!(part.params, vec![("charset".to_string(), "us-ascii".to_string())]);
    assert_eq!(part.lines, Some(2));
    assert_eq!(slice(&raw, part.body_offset, part.end_offset), "line 1\r\nline 2\r\n");
    assert!(s.part(&[2]).is_none());
}

#[test]
fn garbage_still_gets_a_summary() {
    for raw in [
        &b""[..],
        b"\x00\xff\xfe\xfd garbage without any header",
        b"\r\n\r\n\r\n",
        b"::::",
        b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n--x\r\n--x--",
        b"Content-Type: message/rfc822\r\n\r\n",
    ] {
        let s = summarize(raw);
        assert_eq!(s.size, raw.len() as u64);
        assert!(s.structure.end_offset <= s.size);
        if s.parse_failed {
            assert_eq!(
                (s.structure.media_type.as_str(), s.structure.subtype.as_str()),
                ("text", "plain")
            );
            assert_eq!(s.structure.size, raw.len() as u64);
            assert_eq!(s.envelope, Default::default());
        }
        json_round_trip(&s);
    }
    // What the parser refuses outright is flagged; mail-parser is lenient
    // and reads most other junk as a header-only message, which is fine.
    assert!(summarize(b"").parse_failed);
    assert!(summarize(b"::::").parse_failed);
}

#[test]
fn deep_nesting_is_bounded() {
    // Thousands of nested message/rfc822 levels: no stack overflow, the
    // tree stops at MAX_DEPTH, and the JSON stays within serde_json's limit.
    let raw = "Content-Type: message/rfc822\r\n\r\n".repeat(20_000).into_bytes();
    let s = summarize(&raw);
    json_round_trip(&s);
    let mut depth = 0;
    let mut part = &s.structure;
    while let Some(m) = &part.message {
        part = &m.structure;
        depth += 1;
    }
    assert!(depth <= MAX_DEPTH, "{depth}");

    let mut raw = String::new();
    for i in 0..5_000 {
        raw.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n"
        ));
    }
    let s = summarize(raw.as_bytes());
    json_round_trip(&s);
    fn depth_of(p: &BodyPart) -> usize {
        1 + p.children.iter().map(depth_of).max().unwrap_or(0)
    }
    assert!(depth_of(&s.structure) <= MAX_DEPTH + 1);
}
