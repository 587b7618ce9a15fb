use super::*;
use crate::imap::wire::parser::parse_command;
use crate::imap::wire::types::CommandKind;
use crate::summary::{HeaderText, ImapAddress};

struct Msg {
    uid: u32,
    seq: u32,
    flags: Vec<String>,
    date_ms: i64,
    size: u64,
    modseq: u64,
    env: Envelope,
    body: Option<String>,
}

impl MessageView for Msg {
    fn uid(&self) -> u32 {
        self.uid
    }
    fn seq(&self) -> u32 {
        self.seq
    }
    fn flags(&self) -> &[String] {
        &self.flags
    }
    fn internal_date_ms(&self) -> i64 {
        self.date_ms
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn modseq(&self) -> u64 {
        self.modseq
    }
    fn envelope(&self) -> &Envelope {
        &self.env
    }
    fn header(&self, name: &str) -> Option<String> {
        name.eq_ignore_ascii_case("x-spam").then(|| "Yes, 9.5".to_string())
    }
    fn text(&self, body_only: bool) -> Option<String> {
        let body = self.body.clone()?;
        Some(if body_only {
            body
        } else {
            format!("Subject: Quarterly\r\n\r\n{body}")
        })
    }
}

fn msg() -> Msg {
    Msg {
        uid: 42,
        seq: 3,
        flags: vec!["\\Seen".into(), "$Forwarded".into()],
        // 2025-07-01 22:30 UTC
        date_ms: 1_751_409_000_000,
        size: 2048,
        modseq: 17,
        env: Envelope {
            date: Some("Wed, 2 Jul 2025 00:30:00 +0200".into()),
            subject: Some(HeaderText {
                raw: "=?UTF-8?Q?Caf=C3=A9?= report".into(),
                decoded: "Café report".into(),
            }),
            from: AddressList {
                raw: Some("Alice Liddell <alice@example.org>".into()),
                addresses: vec![ImapAddress {
                    name: Some("Alice Liddell".into()),
                    raw_name: Some("Alice Liddell".into()),
                    adl: None,
                    mailbox: Some("alice".into()),
                    host: Some("example.org".into()),
                }],
            },
            ..Envelope::default()
        },
        body: Some("The numbers are UP.".into()),
    }
}

fn search(program: &str, m: &Msg) -> bool {
    let cmd = parse_command(format!("t SEARCH {program}").as_bytes()).unwrap();
    let CommandKind::Search(s) = cmd.kind else { panic!() };
    let saved: IdSet = [40, 42].into_iter().collect();
    let ctx = SearchContext {
        max_seq: 10,
        max_uid: 50,
        saved: Some(&saved),
    };
    matches(&s.key, m, &ctx)
}

#[test]
fn evaluation() {
    let m = msg();
    let yes = [
        "ALL",
        "SEEN",
        "UNANSWERED",
        "KEYWORD $forwarded",
        "UNKEYWORD Junk",
        "FROM alice",
        "FROM \"LIDDELL\"",
        "FROM alice@EXAMPLE.org",
        "SUBJECT café",
        "SUBJECT CAFÉ",
        "SUBJECT \"\"",
        "HEADER X-Spam yes",
        "HEADER x-spam \"\"",
        "BODY up",
        "TEXT quarterly",
        "ON 1-Jul-2025",
        "SINCE 1-Jul-2025",
        "BEFORE 2-Jul-2025",
        "SENTON 2-Jul-2025",
        "SENTSINCE 2-Jul-2025",
        "SENTBEFORE 3-Jul-2025",
        "LARGER 2047",
        "SMALLER 2049",
        "MODSEQ 17",
        "UID 40:45",
        "UID $",
        "$",
        "3",
        "2:*",
        "OLD",
        "NOT NEW",
        "NOT RECENT",
        "OR DELETED SEEN",
        "(SEEN FROM alice) NOT DELETED",
        "NOT (DELETED OR DRAFT FLAGGED)",
    ];
    for program in yes {
        assert!(search(program, &m), "{program} should match");
    }
    let no = [
        "UNSEEN",
        "FLAGGED",
        "KEYWORD Junk",
        "TO alice",
        "FROM bob",
        "HEADER X-Other \"\"",
        "BODY quarterly",
        "ON 2-Jul-2025",
        "BEFORE 1-Jul-2025",
        "SENTON 1-Jul-2025",
        "LARGER 2048",
        "MODSEQ 18",
        "UID 1:41",
        "UID *",
        "4:*",
        "NEW",
        "RECENT",
        "NOT ALL",
        "SEEN DELETED",
    ];
    for program in no {
        assert!(!search(program, &m), "{program} should not match");
    }
    // Not loaded: BODY cannot match.
    let unloaded = Msg { body: None, ..msg() };
    assert!(!search("BODY up", &unloaded));
    // Nothing saved: `$` is empty.
    let ctx = SearchContext::default();
    assert!(!matches(&SearchKey::Uid(SequenceSet::parse(b"$").unwrap()), &m, &ctx));
}

#[test]
fn body_and_header_needs() {
    let key = |p: &str| match parse_command(format!("t SEARCH {p}").as_bytes()).unwrap().kind {
        CommandKind::Search(s) => s.key,
        _ => unreachable!(),
    };
    assert!(needs_body(&key("NOT (SEEN OR FROM x TEXT y)")));
    assert!(!needs_body(&key("NOT (SEEN OR FROM x HEADER a b)")));
    assert!(needs_headers(&key("NOT (SEEN OR FROM x HEADER a b)")));
    assert!(uses_modseq(&key("OR SEEN MODSEQ 5")) && !uses_modseq(&key("SEEN")));
}

/// The envelope cache holds no `sender` or `reply_to`
/// (`FixedParts::new`): no key may read them. A message whose Sender
/// and Reply-To name other people answers every envelope key alike
/// with and without them.
#[test]
fn no_key_reads_sender_or_reply_to() {
    let person = |who: &str| AddressList {
        raw: Some(format!("{who} <{who}@elsewhere.example>")),
        addresses: vec![ImapAddress {
            name: Some(who.into()),
            raw_name: Some(who.into()),
            adl: None,
            mailbox: Some(who.into()),
            host: Some("elsewhere.example".into()),
        }],
    };
    let mut full = msg();
    full.env.sender = person("bob");
    full.env.reply_to = person("carol");
    let mut held = msg();
    held.env.sender = AddressList::default();
    held.env.reply_to = AddressList::default();
    for who in ["bob", "carol", "elsewhere", "alice"] {
        for k in ["FROM", "TO", "CC", "BCC", "SUBJECT", "TEXT"] {
            let p = format!("{k} {who}");
            assert_eq!(search(&p, &full), search(&p, &held), "{p}");
        }
    }
    // The check can see a difference: From is read.
    let mut other = msg();
    other.env.from = person("bob");
    assert_ne!(search("FROM bob", &full), search("FROM bob", &other));
}

/// A key [`needs_meta`] says needs no hot row answers the same on a
/// message known by its UID and envelope alone (the envelope cache's
/// search); every key that reads the hot row is seen to differ. A key
/// [`needs_live_meta`] says needs no live part answers the same on the
/// cache's fixed parts (size and internal date kept); the others differ.
#[test]
fn keys_that_need_no_hot_row_match_bare_messages_alike() {
    let mut full = msg();
    full.flags
        .extend(["\\Answered", "\\Flagged", "\\Deleted", "\\Draft"].map(String::from));
    let bare = Msg {
        flags: Vec::new(),
        date_ms: 0,
        size: 0,
        modseq: 0,
        ..msg()
    };
    // What the envelope cache holds: size and internal date kept.
    let fixed = Msg {
        flags: Vec::new(),
        modseq: 0,
        ..msg()
    };
    let key = |p: &str| match parse_command(format!("t SEARCH {p}").as_bytes()).unwrap().kind {
        CommandKind::Search(s) => s.key,
        _ => unreachable!(),
    };
    let meta_keys = [
        "ANSWERED",
        "DELETED",
        "DRAFT",
        "FLAGGED",
        "SEEN",
        "UNANSWERED",
        "UNDELETED",
        "UNDRAFT",
        "UNFLAGGED",
        "UNSEEN",
        "KEYWORD $Forwarded",
        "UNKEYWORD $Forwarded",
        "SINCE 1-Jan-2000",
        "ON 1-Jul-2025",
        "BEFORE 1-Jan-2000",
        "LARGER 1000",
        "SMALLER 1000",
        "MODSEQ 5",
        "OR SUBJECT zzz SEEN",
        "NOT (FROM alice UNSEEN)",
    ];
    let fixed_keys = [
        "SINCE 1-Jan-2000",
        "ON 1-Jul-2025",
        "BEFORE 1-Jan-2000",
        "LARGER 1000",
        "SMALLER 1000",
    ];
    for k in meta_keys {
        assert!(needs_meta(&key(k)), "{k}");
        assert_ne!(search(k, &full), search(k, &bare), "{k}: the check cannot see it");
        if fixed_keys.contains(&k) {
            assert!(!needs_live_meta(&key(k)), "{k}");
            assert_eq!(search(k, &full), search(k, &fixed), "{k}");
        } else {
            assert!(needs_live_meta(&key(k)), "{k}");
            assert_ne!(search(k, &full), search(k, &fixed), "{k}: the check cannot see it");
        }
    }
    for k in [
        "ALL",
        "SUBJECT caf\u{e9}",
        "FROM alice@example",
        "FROM e@e",
        "TO x",
        "UID 42",
        "1:5",
        "OLD",
        "NOT RECENT",
        "HEADER X-Spam yes",
        "BODY up",
        "OR SUBJECT zzz FROM liddell",
    ] {
        assert!(!needs_meta(&key(k)), "{k}");
        assert_eq!(search(k, &full), search(k, &bare), "{k}");
    }
    // A moved message's EMAILID is its origin, which only its hot row
    // holds: a bare UID would answer for its current place.
    assert!(needs_live_meta(&key("EMAILID x")), "EMAILID reads the hot row");
}

#[test]
fn case_insensitive_substrings_in_place_and_across_the_at() {
    assert!(contains_ci("Quarterly REPORT", "report") && !contains_ci("Quarterly", "reports"));
    assert!(
        contains_ci("Caf\u{c9} report", "caf\u{e9}"),
        "non-ASCII goes the Unicode way"
    );
    assert!(contains_ci("", "") && !contains_ci("", "x"));
    for (needle, want) in [
        ("ice@Exa", true),
        ("alice@example.org", true),
        ("@", true),
        ("e@e", true),
        ("x@e", false),
        ("ALICE", true),
        ("org", true),
        ("alice@@", false),
        ("example.org@", false),
    ] {
        assert_eq!(address_contains("alice", "example.org", needle), want, "{needle}");
        assert_eq!(contains_ci("alice@example.org", needle), want, "{needle}");
    }
}

#[test]
fn sent_dates() {
    let env = |d: &str| Envelope {
        date: Some(d.into()),
        ..Envelope::default()
    };
    assert_eq!(sent_date(&env("1 Jan 99 00:00 GMT")), Date::new(1999, 1, 1));
    assert_eq!(sent_date(&env("Mon, 31 Dec 01 23:00 +0000")), Date::new(2001, 12, 31));
    assert_eq!(sent_date(&env("garbage")), None);
    let stamped = Envelope {
        date: Some("garbage".into()),
        date_timestamp: Some(86_400),
        ..Envelope::default()
    };
    assert_eq!(sent_date(&stamped), Date::new(1970, 1, 2));
}
