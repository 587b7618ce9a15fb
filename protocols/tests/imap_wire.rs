//! The IMAP wire layer from outside: ENVELOPE and BODYSTRUCTURE of real
//! messages (summarized as at delivery) against hand-written answers, body
//! sections, transfer decoding, response lines, and the fuzz entry point on
//! 100,000 random inputs with a fixed seed (CI runs it without nightly).

mod common;

use meshmail_protocols::imap::wire::response::{self, Esearch, ListItem};
use meshmail_protocols::imap::{
    FetchResponse, IdSet, Partial, Section, SectionText, Status, StatusItem, StatusValue, fuzz_command,
    list_pattern_matches,
};
use meshmail_protocols::summary::{Summary, summarize};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn crlf(s: &str) -> Vec<u8> {
    s.replace("\r\n", "\n").replace('\n', "\r\n").into_bytes()
}

fn structure(s: &Summary, extensible: bool) -> String {
    let mut out = Vec::new();
    response::body_structure(&mut out, &s.structure, extensible, false);
    String::from_utf8(out).unwrap()
}

fn envelope(s: &Summary, utf8: bool) -> String {
    let mut out = Vec::new();
    response::envelope(&mut out, &s.envelope, utf8);
    String::from_utf8(out).unwrap()
}

fn section(raw: &[u8], s: &Summary, part: &[u32], text: Option<SectionText>) -> Option<String> {
    let section = Section {
        part: part.to_vec(),
        text,
    };
    response::section_bytes(raw, s, &section).map(|b| String::from_utf8(b).unwrap())
}

const ALICE: &str = "((\"Alice\" NIL \"alice\" \"example.org\"))";

#[test]
fn plain_text_message() {
    let raw = crlf(
        "From: Alice <alice@example.org>
To: bob@example.net
Subject: Hello
Date: Tue, 1 Jul 2025 10:00:00 +0200
Message-ID: <m1@example.org>

Hi Bob,
see you.
",
    );
    let s = summarize(&raw);
    assert_eq!(
        structure(&s, true),
        "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 19 2 NIL NIL NIL NIL)"
    );
    assert_eq!(
        structure(&s, false),
        "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 19 2)"
    );
    assert_eq!(
        envelope(&s, false),
        format!(
            "(\"Tue, 1 Jul 2025 10:00:00 +0200\" \"Hello\" {ALICE} {ALICE} {ALICE} \
             ((NIL NIL \"bob\" \"example.net\")) NIL NIL NIL \"<m1@example.org>\")"
        )
    );
    assert_eq!(section(&raw, &s, &[1], None).unwrap(), "Hi Bob,\r\nsee you.\r\n");
    assert_eq!(
        section(&raw, &s, &[], Some(SectionText::Text)).unwrap(),
        "Hi Bob,\r\nsee you.\r\n"
    );
    assert_eq!(section(&raw, &s, &[], None).unwrap().as_bytes(), &raw[..]);
    assert!(
        section(&raw, &s, &[], Some(SectionText::Header))
            .unwrap()
            .ends_with("<m1@example.org>\r\n\r\n")
    );
    assert_eq!(section(&raw, &s, &[2], None), None);
}

const MIXED: &str = "From: Alice <alice@example.org>
To: Bob <bob@example.net>
Subject: Report
Content-Type: multipart/mixed; boundary=\"b1\"

--b1
Content-Type: text/plain; charset=utf-8
Content-Language: en

Hello Bob.
--b1
Content-Type: application/pdf; name=\"r.pdf\"
Content-Transfer-Encoding: base64
Content-Disposition: attachment; filename=\"r.pdf\"
Content-ID: <att1@example.org>
Content-Description: The report

JVBERi0xLjQK
--b1--
";

#[test]
fn multipart_mixed_with_attachment() {
    let raw = crlf(MIXED);
    let s = summarize(&raw);
    let text = "(\"text\" \"plain\" (\"charset\" \"utf-8\") NIL NIL \"7bit\" 10 0";
    let pdf = "(\"application\" \"pdf\" (\"name\" \"r.pdf\") \"<att1@example.org>\" \"The report\" \"base64\" 12";
    assert_eq!(
        structure(&s, true),
        format!(
            "({text} NIL NIL (\"en\") NIL){pdf} NIL (\"attachment\" (\"filename\" \"r.pdf\")) NIL NIL) \
             \"mixed\" (\"boundary\" \"b1\") NIL NIL NIL)"
        )
    );
    assert_eq!(structure(&s, false), format!("({text}){pdf}) \"mixed\")"));
    assert_eq!(
        envelope(&s, false),
        format!("(NIL \"Report\" {ALICE} {ALICE} {ALICE} ((\"Bob\" NIL \"bob\" \"example.net\")) NIL NIL NIL NIL)")
    );
    // Sections.
    assert_eq!(section(&raw, &s, &[1], None).unwrap(), "Hello Bob.");
    assert_eq!(section(&raw, &s, &[2], None).unwrap(), "JVBERi0xLjQK");
    assert_eq!(
        section(&raw, &s, &[1], Some(SectionText::Mime)).unwrap(),
        "Content-Type: text/plain; charset=utf-8\r\nContent-Language: en\r\n\r\n"
    );
    let fields = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        section(
            &raw,
            &s,
            &[],
            Some(SectionText::HeaderFields(fields(&["subject", "TO", "x-none"])))
        )
        .unwrap(),
        "To: Bob <bob@example.net>\r\nSubject: Report\r\n\r\n"
    );
    assert_eq!(
        section(
            &raw,
            &s,
            &[],
            Some(SectionText::HeaderFieldsNot(fields(&["From", "content-type", "To"])))
        )
        .unwrap(),
        "Subject: Report\r\n\r\n"
    );
    assert!(
        section(&raw, &s, &[], Some(SectionText::Text))
            .unwrap()
            .starts_with("--b1\r\n")
    );
    // HEADER/TEXT only exist for message parts; parts out of range do not exist.
    assert_eq!(section(&raw, &s, &[1], Some(SectionText::Text)), None);
    assert_eq!(section(&raw, &s, &[3], None), None);
    // A single part inside a multipart is its own only subpart (Dovecot's
    // reading of RFC 3501 §6.4.5); the top level of a message has no 1.1.
    assert_eq!(section(&raw, &s, &[1, 1], None).as_deref(), Some("Hello Bob."));
    assert_eq!(section(&raw, &s, &[1, 2], None), None);
    // BINARY decodes the attachment.
    assert_eq!(response::binary_bytes(&raw, &s, &[2]).unwrap(), b"%PDF-1.4\n");
    assert_eq!(response::binary_bytes(&raw, &s, &[1]).unwrap(), b"Hello Bob.");
    assert_eq!(response::binary_bytes(&raw, &s, &[]).unwrap(), raw);
    assert_eq!(
        response::binary_bytes(&raw, &s, &[4]),
        Err(response::BinaryError::NoSuchPart)
    );
}

#[test]
fn multipart_alternative() {
    let raw = crlf(
        "From: news@example.com
To: reader@example.net
Subject: =?UTF-8?Q?Caf=C3=A9?= news
Content-Type: multipart/alternative; boundary=alt

--alt
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Caf=C3=A9 au lait
--alt
Content-Type: text/html; charset=utf-8

<p>Caf&eacute;</p>
--alt--
",
    );
    let s = summarize(&raw);
    assert_eq!(
        structure(&s, true),
        "((\"text\" \"plain\" (\"charset\" \"utf-8\") NIL NIL \"quoted-printable\" 17 0 NIL NIL NIL NIL)\
         (\"text\" \"html\" (\"charset\" \"utf-8\") NIL NIL \"7bit\" 18 0 NIL NIL NIL NIL) \
         \"alternative\" (\"boundary\" \"alt\") NIL NIL NIL)"
    );
    let news = "((NIL NIL \"news\" \"example.com\"))";
    assert_eq!(
        envelope(&s, false),
        format!(
            "(NIL \"=?UTF-8?Q?Caf=C3=A9?= news\" {news} {news} {news} ((NIL NIL \"reader\" \"example.net\")) \
             NIL NIL NIL NIL)"
        )
    );
    assert_eq!(
        response::binary_bytes(&raw, &s, &[1]).unwrap(),
        "Café au lait".as_bytes()
    );
}

#[test]
fn nested_message_rfc822() {
    let raw = crlf(
        "From: list@example.org
To: bob@example.net
Subject: Fwd: lunch
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: text/plain

See below.
--outer
Content-Type: message/rfc822

From: Carol <carol@example.net>
Subject: lunch
Content-Type: text/plain

noon?
--outer--
",
    );
    let s = summarize(&raw);
    let carol = "((\"Carol\" NIL \"carol\" \"example.net\"))";
    let nested_env = format!("(NIL \"lunch\" {carol} {carol} {carol} NIL NIL NIL NIL NIL)");
    assert_eq!(
        structure(&s, true),
        format!(
            "((\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 10 0 NIL NIL NIL NIL)\
             (\"message\" \"rfc822\" NIL NIL NIL \"7bit\" 82 {nested_env} \
             (\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 5 0 NIL NIL NIL NIL) 4 NIL NIL NIL NIL) \
             \"mixed\" (\"boundary\" \"outer\") NIL NIL NIL)"
        )
    );
    assert_eq!(
        structure(&s, false),
        format!(
            "((\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 10 0)\
             (\"message\" \"rfc822\" NIL NIL NIL \"7bit\" 82 {nested_env} \
             (\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 5 0) 4) \"mixed\")"
        )
    );
    let header = "From: Carol <carol@example.net>\r\nSubject: lunch\r\nContent-Type: text/plain\r\n\r\n";
    assert_eq!(section(&raw, &s, &[2], Some(SectionText::Header)).unwrap(), header);
    assert_eq!(section(&raw, &s, &[2], None).unwrap(), format!("{header}noon?"));
    assert_eq!(section(&raw, &s, &[2], Some(SectionText::Text)).unwrap(), "noon?");
    assert_eq!(section(&raw, &s, &[2, 1], None).unwrap(), "noon?");
    assert_eq!(
        section(&raw, &s, &[2], Some(SectionText::Mime)).unwrap(),
        "Content-Type: message/rfc822\r\n\r\n"
    );
    assert_eq!(
        section(&raw, &s, &[2], Some(SectionText::HeaderFields(vec!["Subject".into()]))).unwrap(),
        "Subject: lunch\r\n\r\n"
    );
}

#[test]
fn encoded_message_part_is_a_basic_part() {
    let raw = crlf("Content-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\nRnJvbTogYUBiDQoNCng=\n");
    let s = summarize(&raw);
    assert_eq!(
        structure(&s, true),
        "(\"message\" \"rfc822\" NIL NIL NIL \"base64\" 22 NIL NIL NIL NIL)"
    );
}

#[test]
fn non_ascii_names_and_subjects() {
    let raw = crlf("From: =?UTF-8?B?w4lsb2lzZQ==?= <eloise@example.fr>\nSubject: Caf\u{e9}\n\nx\n");
    let s = summarize(&raw);
    let env = envelope(&s, false);
    assert!(
        env.contains("((\"=?UTF-8?B?w4lsb2lzZQ==?=\" NIL \"eloise\" \"example.fr\"))"),
        "{env}"
    );
    // Header text goes as written (RFC 3501 §7.4.2, and Dovecot): a raw
    // 8-bit subject as a literal without UTF8=ACCEPT...
    assert!(env.starts_with("(NIL {5}\r\nCafé (("), "{env}");
    // ... and as a quoted UTF-8 string with it; encoded words stay encoded.
    let env = envelope(&s, true);
    assert!(
        env.starts_with("(NIL \"Café\" ((\"=?UTF-8?B?w4lsb2lzZQ==?=\" NIL"),
        "{env}"
    );
}

#[test]
fn strings_and_dates() {
    let render = |s: &[u8], utf8| {
        let mut out = Vec::new();
        response::string(&mut out, s, utf8);
        out
    };
    assert_eq!(render(b"a \"b\" \\c", false), b"\"a \\\"b\\\" \\\\c\"");
    assert_eq!(render(b"two\r\nlines", false), b"{10}\r\ntwo\r\nlines");
    assert_eq!(render("é".as_bytes(), false), "{2}\r\né".as_bytes());
    assert_eq!(render("é".as_bytes(), true), "\"é\"".as_bytes());
    assert_eq!(render(&[b'x'; 2000], true)[..7], *b"{2000}\r");
    let mut out = Vec::new();
    response::astring(&mut out, b"INBOX", false);
    response::astring(&mut out, b"nil", false);
    response::mailbox(&mut out, "Entwürfe", false);
    assert_eq!(out, b"INBOX\"nil\"\"Entw&APw-rfe\"");
    assert_eq!(response::internal_date(1_796_026_489_000), "30-Nov-2026 08:14:49 +0000");
    assert_eq!(response::internal_date(0), "01-Jan-1970 00:00:00 +0000");
    assert_eq!(response::internal_date(-1000), "31-Dec-1969 23:59:59 +0000");
}

#[test]
fn response_lines() {
    let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
    assert_eq!(
        s(response::tagged(
            "a1",
            Status::Ok,
            Some("READ-WRITE"),
            "SELECT completed"
        )),
        "a1 OK [READ-WRITE] SELECT completed\r\n"
    );
    assert_eq!(
        s(response::untagged(Status::Bye, None, "bye\r\nnow")),
        "* BYE bye  now\r\n"
    );
    assert_eq!(s(response::tagged("a", Status::No, None, "[x] y")), "a NO - [x] y\r\n");
    assert_eq!(s(response::continuation("Ready")), "+ Ready\r\n");
    assert_eq!(
        s(response::capability_line(&["IMAP4rev2", "IDLE"])),
        "* CAPABILITY IMAP4rev2 IDLE\r\n"
    );
    let item = ListItem {
        attributes: vec!["\\HasNoChildren", "\\Sent"],
        delimiter: Some('/'),
        name: "Gesendete Objekte/Entwürfe",
        child_subscribed: true,
        old_name: Some("Old"),
    };
    assert_eq!(
        s(response::list_line("LIST", &item, false)),
        "* LIST (\\HasNoChildren \\Sent) \"/\" \"Gesendete Objekte/Entw&APw-rfe\" \
         (\"CHILDINFO\" (\"SUBSCRIBED\") \"OLDNAME\" (\"Old\"))\r\n"
    );
    let plain = ListItem {
        name: "INBOX",
        ..ListItem::default()
    };
    assert_eq!(
        s(response::list_line("LSUB", &plain, false)),
        "* LSUB () NIL \"INBOX\"\r\n"
    );
    assert_eq!(
        s(response::status_response_line(
            "INBOX",
            &[
                (StatusItem::Messages, StatusValue::Number(3)),
                (StatusItem::UidNext, StatusValue::Number(9)),
                (StatusItem::MailboxId, StatusValue::ObjectId("m7".into()))
            ],
            false
        )),
        "* STATUS \"INBOX\" (MESSAGES 3 UIDNEXT 9 MAILBOXID (m7))\r\n"
    );
    let all: IdSet = [2, 3, 4, 10].into_iter().collect();
    let e = Esearch {
        tag: Some("a282"),
        uid: true,
        min: Some(2),
        count: Some(4),
        all: Some(&all),
        ..Esearch::default()
    };
    assert_eq!(
        s(response::esearch_line(&e)),
        "* ESEARCH (TAG \"a282\") UID MIN 2 COUNT 4 ALL 2:4,10\r\n"
    );
    let empty = IdSet::new();
    let e = Esearch {
        tag: Some("a"),
        count: Some(0),
        all: Some(&empty),
        ..Esearch::default()
    };
    assert_eq!(s(response::esearch_line(&e)), "* ESEARCH (TAG \"a\") COUNT 0\r\n");
    assert_eq!(
        s(response::search_line(&[2, 3], Some(917))),
        "* SEARCH 2 3 (MODSEQ 917)\r\n"
    );
    assert_eq!(s(response::search_line(&[], Some(917))), "* SEARCH\r\n");
    assert_eq!(
        s(response::vanished_line(true, &all)),
        "* VANISHED (EARLIER) 2:4,10\r\n"
    );
    assert_eq!(
        s(response::namespace_line("", Some('/'), false)),
        "* NAMESPACE ((\"\" \"/\")) NIL NIL\r\n"
    );
    assert_eq!(
        s(response::id_line(&[("name", "meshmail")])),
        "* ID (\"name\" \"meshmail\")\r\n"
    );
    assert_eq!(
        s(response::quota_line("", &[("STORAGE", 10, 512)])),
        "* QUOTA \"\" (STORAGE 10 512)\r\n"
    );
    assert_eq!(
        s(response::quotaroot_line("INBOX", &[""], false)),
        "* QUOTAROOT \"INBOX\" \"\"\r\n"
    );
}

#[test]
fn fetch_response_builder() {
    let raw = crlf(MIXED);
    let summary = summarize(&raw);
    let header_fields = Section {
        part: vec![],
        text: Some(SectionText::HeaderFields(vec!["Subject".into(), "X Y".into()])),
    };
    let mut f = FetchResponse::new(12, false);
    f.uid(4827)
        .flags(&["\\Seen", "$Forwarded"])
        .internal_date(0)
        .rfc822_size(summary.size)
        .modseq(7)
        .section(&header_fields, None, Some(b"Subject: Report\r\n\r\n"))
        .section(&Section::default(), Some(3), Some(b"m: A"))
        .binary(&[2], None, Some(b"%PDF\0"))
        .binary_size(&[2], 9)
        .section(
            &Section {
                part: vec![9],
                text: None,
            },
            None,
            None,
        );
    assert_eq!(
        String::from_utf8(f.finish()).unwrap(),
        format!(
            "* 12 FETCH (UID 4827 FLAGS (\\Seen $Forwarded) INTERNALDATE \"01-Jan-1970 00:00:00 +0000\" \
             RFC822.SIZE {} MODSEQ (7) BODY[HEADER.FIELDS (Subject \"X Y\")] {{19}}\r\nSubject: Report\r\n\r\n \
             BODY[]<3> {{4}}\r\nm: A BINARY[2] ~{{5}}\r\n%PDF\0 BINARY.SIZE[2] 9 BODY[9] NIL)\r\n",
            raw.len()
        )
    );
    let mut f = FetchResponse::new(1, false);
    f.body_structure(&summary.structure.children[0], false)
        .envelope(&summary.envelope);
    let line = String::from_utf8(f.finish()).unwrap();
    assert!(line.starts_with("* 1 FETCH (BODY (\"text\" \"plain\"") && line.contains(" ENVELOPE (NIL \"Report\""));
    let nested = Section {
        part: vec![1, 2],
        text: Some(SectionText::HeaderFieldsNot(vec!["A".into()])),
    };
    assert_eq!(nested.to_string(), "1.2.HEADER.FIELDS.NOT (A)");
}

#[test]
fn transfer_decoding_and_partials() {
    let qp = response::decode_transfer_encoding(b"a=3Db =\r\nc \t\r\nd=\nx=zz=4", "Quoted-Printable").unwrap();
    assert_eq!(qp, b"a=b c\r\ndx=zz=4");
    let b64 = response::decode_transfer_encoding(b"SGVs\r\nbG8g\r\nd29y bGQ=\r\n", "BASE64").unwrap();
    assert_eq!(b64, b"Hello world");
    assert_eq!(response::decode_transfer_encoding(b"\0x", "binary").unwrap(), b"\0x");
    assert_eq!(response::decode_transfer_encoding(b"x", "x-uuencode"), None);
    let data = b"0123456789";
    assert_eq!(
        response::partial_range(data, Some(Partial { offset: 2, count: 3 })),
        b"234"
    );
    assert_eq!(
        response::partial_range(data, Some(Partial { offset: 8, count: 5 })),
        b"89"
    );
    assert_eq!(
        response::partial_range(data, Some(Partial { offset: 80, count: 5 })),
        b""
    );
    assert_eq!(
        response::partial_range(
            data,
            Some(Partial {
                offset: u64::MAX,
                count: u64::MAX
            })
        ),
        b""
    );
    assert_eq!(response::partial_range(data, None), data);
    // Folded fields keep their continuation lines.
    let header = b"Subject: a\r\n b\r\nX-A: 1\r\nsubject: again\r\n\r\n";
    assert_eq!(
        response::filter_header(header, &["SUBJECT".into()], true),
        b"Subject: a\r\n b\r\nsubject: again\r\n\r\n"
    );
    assert_eq!(
        response::filter_header(header, &["subject".into()], false),
        b"X-A: 1\r\n\r\n"
    );
    // No blank line in the block: none added.
    assert_eq!(
        response::filter_header(b"X-A: 1\r\n", &["x-a".into()], true),
        b"X-A: 1\r\n"
    );
}

#[test]
fn list_patterns() {
    let m = |p: &str, n: &str| list_pattern_matches(p, n, Some('/'));
    assert!(m("*", "a/b/c") && m("%", "a") && !m("%", "a/b") && m("a/%", "a/b") && !m("a/%", "a/b/c"));
    assert!(m("inbox", "INBOX") && m("Inbox/%", "INBOX/x") && !m("inboxes", "INBOXES") && m("INBOXES", "INBOXES"));
    assert!(m("*b*", "abc") && !m("*b*", "ac") && m("a*%*%*%*%*%*%*%*%*z", "abcdefghijklmnopqrstuvwxyz"));
    assert!(!m("a*%*%*%*%*%*%*%*%*%*%*%*%*%*%*%*%*%*z", &"a".repeat(500)));
    assert!(m("", "") && !m("", "a") && m("Entwürfe", "Entwürfe"));
}

const COMMANDS: &[&[u8]] = &[
    b"a LOGIN {4}\r\nfred {6+}\r\nsecret",
    b"a SELECT INBOX (QRESYNC (67890007 90060115194045000 41:211,214:541 (1,5 10,50)))",
    b"a LIST (SUBSCRIBED RECURSIVEMATCH) \"\" (INBOX* \"Sent%\") RETURN (CHILDREN STATUS (MESSAGES UNSEEN))",
    b"a APPEND INBOX (\\Seen) \" 7-Feb-1994 21:52:25 -0800\" ~{5}\r\nhello {1+}\r\nx",
    b"a UID SEARCH RETURN (MIN SAVE) CHARSET UTF-8 OR (UNSEEN 1:5) NOT UID $ HEADER X \"\" SINCE 1-Feb-1994",
    b"a SEARCH NOT (OR FROM {3}\r\nabc BODY x) SENTON 1-Jan-2020 MODSEQ \"/flags/\\\\seen\" all 5 LARGER 9",
    b"a UID FETCH 1:* (BODY.PEEK[1.2.HEADER.FIELDS (A B)]<0.9> BINARY[1] FLAGS) (CHANGEDSINCE 1 VANISHED)",
    b"a FETCH 1,2:4 (BODY[] BODY[1.MIME] BODY[2.TEXT] BINARY.SIZE[2] BODY[HEADER.FIELDS.NOT (X)]<1.2>)",
    b"a STORE 1 (UNCHANGEDSINCE 5) +FLAGS.SILENT (\\Seen $X)",
    b"a ID (\"name\" \"x\" \"os\" NIL)",
    b"a AUTHENTICATE PLAIN AGZyZWQAc2VjcmV0",
    b"a UID MOVE 1,3:* &ZeVnLIqe-",
    b"a CREATE Drafts (USE (\\Drafts))",
    b"a SETQUOTA \"\" (STORAGE 512)",
    b"a STATUS INBOX (MESSAGES UIDNEXT HIGHESTMODSEQ)",
    b"a ENABLE CONDSTORE QRESYNC UTF8=ACCEPT",
];

const INTERESTING: &[&[u8]] = &[
    b"\r\n",
    b" ",
    b"(",
    b")",
    b"[",
    b"]",
    b"<",
    b">",
    b"{",
    b"}",
    b"{5}\r\n",
    b"{0+}\r\n",
    b"~{3}\r\n",
    b"\"",
    b"\\",
    b"*",
    b"%",
    b"$",
    b":",
    b",",
    b".",
    b"&",
    b"-",
    b"NIL",
    b"NOT ",
    b"OR ",
    b"UID ",
    b"0",
    b"4294967295",
    b"99999999999999999999",
    b"\0",
    b"\xff",
];

#[test]
fn imap_command_on_random_inputs() {
    let seed = 0x1a4a_c0de;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..100_000 {
        let input = if rng.random_bool(0.25) {
            let n = rng.random_range(0..300);
            (0..n).map(|_| rng.random()).collect()
        } else {
            let seed_command = COMMANDS[rng.random_range(0..COMMANDS.len())];
            common::mutate(&mut rng, seed_command, INTERESTING)
        };
        let result = std::panic::catch_unwind(|| fuzz_command(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}
