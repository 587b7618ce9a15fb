//! Parser unit tests: every command form, literals, spacing, errors, and
//! property tests (never panics; random mutations of valid commands).

use proptest::prelude::*;

use super::*;

fn parse(s: &str) -> CommandKind {
    match parse_command(&s.replace("\r\n", "\n").replace('\n', "\r\n").into_bytes()) {
        Ok(c) => c.kind,
        Err(e) => panic!("{s:?}: {e}"),
    }
}

fn bad(s: &str) -> ParseError {
    match parse_command(s.as_bytes()) {
        Ok(c) => panic!("{s:?} parsed as {c:?}"),
        Err(e) => e,
    }
}

fn set(s: &str) -> SequenceSet {
    SequenceSet::parse(s.as_bytes()).unwrap()
}

#[test]
fn simple_commands() {
    use CommandKind as C;
    for (line, kind) in [
        ("a CAPABILITY", C::Capability),
        ("a noop", C::Noop),
        ("a LOGOUT", C::Logout),
        ("a STARTTLS", C::StartTls),
        ("a NAMESPACE", C::Namespace),
        ("a IDLE", C::Idle),
        ("a CHECK", C::Check),
        ("a CLOSE", C::Close),
        ("a UNSELECT", C::Unselect),
        ("a EXPUNGE", C::Expunge),
    ] {
        assert_eq!(parse(line), kind, "{line}");
        let tagged = parse_command(format!("{line}\r\n").as_bytes()).unwrap();
        assert_eq!(tagged.tag, "a");
    }
    assert_eq!(parse("a UID EXPUNGE 1:3,7"), C::UidExpunge(set("1:3,7")));
    assert_eq!(parse_command(b"A0001.x] NOOP").unwrap().tag, "A0001.x]");
}

#[test]
fn errors_carry_the_tag_when_known() {
    let e = bad("a FROB");
    assert_eq!(e.tag.as_deref(), Some("a"));
    assert_eq!(e.response(), b"a BAD unknown command\r\n");
    for no_tag in ["", " NOOP", "+a NOOP", "a", "(a NOOP", "a\"b NOOP"] {
        let e = bad(no_tag);
        assert_eq!(e.tag, None, "{no_tag:?}");
        assert!(e.response().starts_with(b"* BAD "));
    }
    for line in [
        "a NOOP x",
        "a LOGIN",
        "a LOGIN a",
        "a SELECT",
        "a FETCH 1",
        "a FETCH 0 FLAGS",
        "a FETCH 1 (FLAGS",
        "a FETCH 1 BODY[1.0]",
        "a FETCH 1 BODY[MIME]",
        "a FETCH 1 BODY[1.TXT]",
        "a FETCH 1 BODY[]<5>",
        "a FETCH 1 BODY[]<5.0>",
        "a FETCH 1 FLAGS (VANISHED)",
        "a FETCH 1 FLAGS (CHANGEDSINCE 4 VANISHED)",
        "a STORE 1 FLAGS.LOUD (\\Seen)",
        "a STORE 1 +FLAGS",
        "a SEARCH",
        "a SEARCH FOO",
        "a SEARCH BEFORE 31-Feb-2024",
        "a SEARCH KEYWORD \\Seen",
        "a SEARCH ()",
        "a SEARCH OR SEEN",
        "a SEARCH SUBJECT \"unterminated",
        "a SEARCH SUBJECT \"bad \\escape\"",
        "a STATUS INBOX ()",
        "a STATUS INBOX (MESSAGES BOGUS)",
        "a LIST (RECURSIVEMATCH) \"\" *",
        "a LIST \"\" * RETURN (BOGUS)",
        "a LIST \"\" ()",
        "a ENABLE",
        "a SELECT &Jjo",
        "a APPEND INBOX",
        "a APPEND INBOX (\\Seen) \"bad date\" {1}\r\nx",
        "a APPEND INBOX {5}\r\nabc",
        "a APPEND INBOX {3}x",
        "a UID FROB 1",
        "a AUTHENTICATE PLAIN ***",
        "a FETCH 1 (FLAGS)(UID)",
        "a FETCH 4294967296 FLAGS",
    ] {
        let e = bad(line);
        assert_eq!(e.tag.as_deref(), Some("a"), "{line}");
        assert!(!e.reason.is_empty());
    }
}

#[test]
fn login_and_authenticate() {
    assert_eq!(
        parse("a LOGIN fred \"pa ss\\\"word\""),
        CommandKind::Login {
            username: "fred".into(),
            password: "pa ss\"word".into()
        }
    );
    // Literals, synchronizing and LITERAL+.
    assert_eq!(
        parse("a LOGIN {4}\nfred {7+}\np\r\n\"{}x"),
        CommandKind::Login {
            username: "fred".into(),
            password: "p\r\n\"{}x".into()
        }
    );
    assert_eq!(
        parse("a AUTHENTICATE plain AGZyZWQAc2VjcmV0"),
        CommandKind::Authenticate {
            mechanism: "PLAIN".into(),
            initial_response: Some(b"\0fred\0secret".to_vec())
        }
    );
    assert_eq!(
        parse("a AUTHENTICATE PLAIN ="),
        CommandKind::Authenticate {
            mechanism: "PLAIN".into(),
            initial_response: Some(Vec::new())
        }
    );
    assert_eq!(
        parse("a AUTHENTICATE XOAUTH2"),
        CommandKind::Authenticate {
            mechanism: "XOAUTH2".into(),
            initial_response: None
        }
    );
    assert_eq!(parse_sasl_response(b"*\r\n"), Ok(SaslResponse::Cancel));
    assert_eq!(parse_sasl_response(b""), Ok(SaslResponse::Data(Vec::new())));
    assert_eq!(parse_sasl_response(b"Zm9v"), Ok(SaslResponse::Data(b"foo".to_vec())));
    assert!(parse_sasl_response(b"Zm9").is_err());
}

#[test]
fn enable_and_id() {
    assert_eq!(
        parse("a ENABLE condstore UTF8=ACCEPT"),
        CommandKind::Enable(vec!["CONDSTORE".into(), "UTF8=ACCEPT".into()])
    );
    assert_eq!(parse("a ID NIL"), CommandKind::Id(None));
    assert_eq!(
        parse("a ID (\"name\" \"Thunderbird\" \"version\" NIL)"),
        CommandKind::Id(Some(vec![
            ("name".into(), Some("Thunderbird".into())),
            ("version".into(), None)
        ]))
    );
    assert_eq!(parse("a ID ()"), CommandKind::Id(Some(Vec::new())));
}

#[test]
fn select_and_mailbox_names() {
    let select = |s: &str| match parse(s) {
        CommandKind::Select { mailbox, params } | CommandKind::Examine { mailbox, params } => (mailbox, params),
        other => panic!("{other:?}"),
    };
    assert_eq!(select("a SELECT inbox"), ("INBOX".into(), SelectParams::default()));
    assert_eq!(select("a EXAMINE \"Entw&APw-rfe\"").0, "Entw\u{fc}rfe");
    assert_eq!(select("a SELECT {5+}\nInBoX").0, "INBOX");
    assert_eq!(select("a SELECT ~peter/mail]x").0, "~peter/mail]x");
    let (_, p) = select("a SELECT INBOX (CONDSTORE)");
    assert!(p.condstore && p.qresync.is_none());
    let (_, p) = select("a SELECT INBOX (QRESYNC (67890007 20050715194045000 41,43:211,214:541))");
    let q = p.qresync.unwrap();
    assert_eq!((q.uidvalidity, q.modseq), (67890007, 20050715194045000));
    assert_eq!(q.known_uids, Some(set("41,43:211,214:541")));
    assert_eq!(q.seq_match, None);
    let (_, p) = select("a SELECT INBOX (QRESYNC (1 2 1:9 (1,5 10,50)) CONDSTORE)");
    assert_eq!(p.qresync.unwrap().seq_match, Some((set("1,5"), set("10,50"))));
    assert!(p.condstore);
    assert_eq!(
        select("a SELECT INBOX (QRESYNC (1 2))").1.qresync.unwrap().known_uids,
        None
    );
    // UTF8=ACCEPT: names are UTF-8 and '&' is literal.
    let opts = ParseOptions { utf8_accept: true };
    let c = parse_command_with(b"a SELECT \"Entw&APw-rfe\"", opts).unwrap();
    assert!(matches!(c.kind, CommandKind::Select { mailbox, .. } if mailbox == "Entw&APw-rfe"));
    // Raw UTF-8 is accepted either way.
    let c = parse_command("a SELECT \"Entwürfe\"".as_bytes()).unwrap();
    assert!(matches!(c.kind, CommandKind::Select { mailbox, .. } if mailbox == "Entwürfe"));
    // APPEND UTF8 (~{n}) (RFC 6855 §4): only after ENABLE UTF8=ACCEPT.
    let utf8_append = "a APPEND INBOX UTF8 (~{8}\r\nSubj: ü)".as_bytes();
    let c = parse_command_with(utf8_append, opts).unwrap();
    assert!(matches!(c.kind, CommandKind::Append { messages, .. } if messages[0].data == "Subj: ü".as_bytes()));
    assert!(parse_command(utf8_append).is_err(), "not without UTF8=ACCEPT");
    assert!(
        parse_command_with(b"a APPEND INBOX UTF8 ({3}\r\nabc)", opts).is_err(),
        "literal8 only"
    );
}

#[test]
fn mailbox_management() {
    use CommandKind as C;
    assert_eq!(
        parse("a CREATE Drafts (USE (\\Drafts \\Sent))"),
        C::Create {
            mailbox: "Drafts".into(),
            special_use: vec!["\\Drafts".into(), "\\Sent".into()]
        }
    );
    assert_eq!(
        parse("a CREATE \"a b\""),
        C::Create {
            mailbox: "a b".into(),
            special_use: vec![]
        }
    );
    assert_eq!(parse("a DELETE x"), C::Delete("x".into()));
    assert_eq!(
        parse("a RENAME x \"y/z\""),
        C::Rename {
            from: "x".into(),
            to: "y/z".into()
        }
    );
    assert_eq!(parse("a SUBSCRIBE x"), C::Subscribe("x".into()));
    assert_eq!(parse("a UNSUBSCRIBE x"), C::Unsubscribe("x".into()));
    assert_eq!(
        parse("a STATUS INBOX (MESSAGES uidnext UIDVALIDITY UNSEEN DELETED SIZE HIGHESTMODSEQ RECENT)"),
        C::Status {
            mailbox: "INBOX".into(),
            items: vec![
                StatusItem::Messages,
                StatusItem::UidNext,
                StatusItem::UidValidity,
                StatusItem::Unseen,
                StatusItem::Deleted,
                StatusItem::Size,
                StatusItem::HighestModSeq,
                StatusItem::Recent
            ]
        }
    );
    assert_eq!(
        parse("a STATUS INBOX (MAILBOXID deleted-storage)"),
        C::Status {
            mailbox: "INBOX".into(),
            items: vec![StatusItem::MailboxId, StatusItem::DeletedStorage]
        }
    );
    assert_eq!(parse("a GETQUOTA \"\""), C::GetQuota(String::new()));
    assert_eq!(parse("a GETQUOTAROOT inbox"), C::GetQuotaRoot("INBOX".into()));
    assert_eq!(
        parse("a SETQUOTA \"\" (storage 512 MESSAGE 1000)"),
        C::SetQuota {
            root: String::new(),
            limits: vec![("STORAGE".into(), 512), ("MESSAGE".into(), 1000)]
        }
    );
}

#[test]
fn list_forms() {
    let list = |s: &str| match parse(s) {
        CommandKind::List(l) => l,
        other => panic!("{other:?}"),
    };
    let l = list("a LIST \"\" *");
    assert_eq!(
        (l.reference.as_str(), l.patterns.clone(), l.extended),
        ("", vec!["*".to_string()], false)
    );
    assert_eq!(list("a LIST \"\" \"\"").patterns, vec![String::new()]);
    assert_eq!(list("a LIST ~/Mail/ %/x]").patterns, vec!["%/x]".to_string()]);
    let l = list("a LIST (SUBSCRIBED RECURSIVEMATCH) \"\" (INBOX* \"Sent%\") RETURN (CHILDREN SPECIAL-USE)");
    assert!(l.extended && l.select_subscribed && l.select_recursive_match && !l.select_remote);
    assert_eq!(l.patterns, vec!["INBOX*".to_string(), "Sent%".to_string()]);
    assert!(l.return_children && l.return_special_use && !l.return_subscribed);
    let l = list("a LIST () \"\" % RETURN (SUBSCRIBED STATUS (MESSAGES UNSEEN))");
    assert!(l.extended && l.return_subscribed);
    assert_eq!(l.return_status, Some(vec![StatusItem::Messages, StatusItem::Unseen]));
    let l = list("a LIST (REMOTE SPECIAL-USE) \"\" *");
    assert!(l.select_remote && l.select_special_use);
    assert_eq!(
        parse("a LSUB \"#news.\" comp.%"),
        CommandKind::Lsub {
            reference: "#news.".into(),
            pattern: "comp.%".into()
        }
    );
}

#[test]
fn append_and_multiappend() {
    let (mailbox, messages) =
        match parse("a APPEND saved-messages (\\Seen $Label) \" 7-Feb-1994 21:52:25 -0800\" {5}\nhello") {
            CommandKind::Append { mailbox, messages } => (mailbox, messages),
            other => panic!("{other:?}"),
        };
    assert_eq!(mailbox, "saved-messages");
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert_eq!(m.flags, vec![Flag::Seen, Flag::Keyword("$Label".into())]);
    let date = m.date.unwrap();
    assert_eq!(date.offset_minutes, -480);
    assert_eq!(date.unix_ms, 760_686_745_000);
    assert_eq!((m.data.as_slice(), m.binary), (&b"hello"[..], false));
    // MULTIAPPEND with literal8 and LITERAL+.
    let kind = parse("a APPEND INBOX {3+}\nabc (\\Draft) ~{4}\na\0\r\n \"01-Jan-2000 00:00:00 +0000\" {0}\n");
    let CommandKind::Append { messages, .. } = kind else {
        panic!()
    };
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1].data, b"a\0\r\n");
    assert!(messages[1].binary && !messages[0].binary);
    assert_eq!(messages[2].date.unwrap().unix_ms, 946_684_800_000);
    assert_eq!(messages[2].data, b"");
}

#[test]
fn search_forms() {
    let search = |s: &str| match parse(s) {
        CommandKind::Search(s) => s,
        other => panic!("{other:?}"),
    };
    let s = search("a SEARCH FLAGGED SINCE 1-Feb-1994 NOT FROM \"Smith\"");
    assert!(!s.uid && s.ret.is_none() && s.charset.is_none());
    let d = Date::new(1994, 2, 1).unwrap();
    assert_eq!(
        s.key,
        SearchKey::And(vec![
            SearchKey::Flagged,
            SearchKey::Since(d),
            SearchKey::Not(Box::new(SearchKey::From("Smith".into())))
        ])
    );
    let s = search("a UID SEARCH RETURN (MIN COUNT SAVE) CHARSET utf-8 OR (UNSEEN 1:5) UID $ ");
    assert!(s.uid);
    let ret = s.ret.unwrap();
    assert!(ret.min && ret.count && ret.save && !ret.all && !ret.max);
    assert_eq!(s.charset.as_deref(), Some("UTF-8"));
    assert_eq!(
        s.key,
        SearchKey::Or(
            Box::new(SearchKey::And(vec![SearchKey::Unseen, SearchKey::Sequence(set("1:5"))])),
            Box::new(SearchKey::Uid(SequenceSet::Saved))
        )
    );
    assert!(search("a SEARCH RETURN () ALL").ret.unwrap().all);
    assert_eq!(search("a SEARCH $").key, SearchKey::Sequence(SequenceSet::Saved));
    let all = search(
        "a SEARCH ALL ANSWERED BCC b BEFORE \"1-Jan-2020\" BODY x CC c DELETED DRAFT FLAGGED FROM f \
         HEADER X-A \"\" KEYWORD k LARGER 10 NEW NOT OLD ON 2-Jan-2020 OR RECENT SEEN SENTBEFORE 1-Jan-2020 \
         SENTON 1-Jan-2020 SENTSINCE 1-Jan-2020 SINCE 1-Jan-2020 SMALLER 5 SUBJECT s TEXT t TO o UID 1:* \
         UNANSWERED UNDELETED UNDRAFT UNFLAGGED UNKEYWORD u UNSEEN 2,4:* MODSEQ 7 \
         MODSEQ \"/flags/\\\\draft\" all 620162338",
    );
    let SearchKey::And(keys) = all.key else { panic!() };
    assert_eq!(keys.len(), 35);
    assert_eq!(
        keys[34],
        SearchKey::ModSeq {
            entry: Some(("/flags/\\draft".into(), "all".into())),
            modseq: 620162338
        }
    );
    assert_eq!(keys[10], SearchKey::Header("X-A".into(), String::new()));
    // Literal search strings (with CHARSET, as clients send non-ASCII).
    let s = search("a SEARCH CHARSET UTF-8 TEXT {6}\nXXXXXX");
    assert_eq!(s.key, SearchKey::Text("XXXXXX".into()));
    // OBJECTID (RFC 8474 §6): ids are case-sensitive atoms.
    assert_eq!(
        search("a SEARCH EMAILID e3_Ab-1 THREADID t9f").key,
        SearchKey::And(vec![
            SearchKey::EmailId("e3_Ab-1".into()),
            SearchKey::ThreadId("t9f".into())
        ])
    );
    assert!(parse_command("a SEARCH EMAILID e.3\r\n".as_bytes()).is_err());
}

#[test]
fn search_depth_is_bounded() {
    let nested = |n: usize| format!("a SEARCH {}SEEN{}", "(".repeat(n), ")".repeat(n));
    assert!(parse_command(nested(MAX_SEARCH_DEPTH - 1).as_bytes()).is_ok());
    assert!(parse_command(nested(MAX_SEARCH_DEPTH).as_bytes()).is_err());
    let nots = format!("a SEARCH {}SEEN", "NOT ".repeat(100_000));
    assert!(parse_command(nots.as_bytes()).is_err());
    let ors = format!("a SEARCH {}SEEN{}", "OR SEEN ".repeat(10_000), "");
    assert!(parse_command(ors.as_bytes()).is_err());
    // Wide is fine.
    let wide = format!("a SEARCH {}", "SEEN ".repeat(10_000));
    assert!(parse_command(wide.as_bytes()).is_ok());
}

#[test]
fn fetch_forms() {
    use FetchAttr as A;
    let fetch = |s: &str| match parse(s) {
        CommandKind::Fetch(f) => f,
        other => panic!("{other:?}"),
    };
    let f = fetch("a FETCH 1:* ALL");
    assert_eq!(f.attrs, vec![A::Flags, A::InternalDate, A::Rfc822Size, A::Envelope]);
    assert_eq!(
        fetch("a FETCH 1 fast").attrs,
        vec![A::Flags, A::InternalDate, A::Rfc822Size]
    );
    assert_eq!(fetch("a FETCH 1 FULL").attrs.last(), Some(&A::Body));
    assert_eq!(fetch("a FETCH 2,4 flags").attrs, vec![A::Flags]);
    let f = fetch(
        "a FETCH 1 (FLAGS INTERNALDATE RFC822 RFC822.HEADER RFC822.SIZE RFC822.TEXT ENVELOPE BODY \
         BODYSTRUCTURE UID MODSEQ)",
    );
    assert_eq!(
        f.attrs,
        vec![
            A::Flags,
            A::InternalDate,
            A::Rfc822,
            A::Rfc822Header,
            A::Rfc822Size,
            A::Rfc822Text,
            A::Envelope,
            A::Body,
            A::BodyStructure,
            A::Uid,
            A::ModSeq
        ]
    );
    let section = |part: Vec<u32>, text: Option<SectionText>| Section { part, text };
    let f = fetch(
        "a FETCH 1 (BODY[] BODY.PEEK[HEADER]<0.100> body[1.2.3] BODY[1.MIME] BODY[2.TEXT] \
         BODY.PEEK[HEADER.FIELDS (From \"To\" {2}\nCc)] BODY[3.HEADER.FIELDS.NOT (X-A)])",
    );
    assert_eq!(
        f.attrs,
        vec![
            A::BodySection {
                peek: false,
                section: section(vec![], None),
                partial: None
            },
            A::BodySection {
                peek: true,
                section: section(vec![], Some(SectionText::Header)),
                partial: Some(Partial { offset: 0, count: 100 })
            },
            A::BodySection {
                peek: false,
                section: section(vec![1, 2, 3], None),
                partial: None
            },
            A::BodySection {
                peek: false,
                section: section(vec![1], Some(SectionText::Mime)),
                partial: None
            },
            A::BodySection {
                peek: false,
                section: section(vec![2], Some(SectionText::Text)),
                partial: None
            },
            A::BodySection {
                peek: true,
                section: section(
                    vec![],
                    Some(SectionText::HeaderFields(vec!["From".into(), "To".into(), "Cc".into()]))
                ),
                partial: None
            },
            A::BodySection {
                peek: false,
                section: section(vec![3], Some(SectionText::HeaderFieldsNot(vec!["X-A".into()]))),
                partial: None
            },
        ]
    );
    assert!(f.attrs[0].sets_seen() && !f.attrs[1].sets_seen());
    let f = fetch("a FETCH 1 (BINARY[1.2]<10.20> BINARY.PEEK[] BINARY.SIZE[3])");
    assert_eq!(
        f.attrs,
        vec![
            A::Binary {
                peek: false,
                part: vec![1, 2],
                partial: Some(Partial { offset: 10, count: 20 })
            },
            A::Binary {
                peek: true,
                part: vec![],
                partial: None
            },
            A::BinarySize { part: vec![3] },
        ]
    );
    // UID FETCH adds UID; CHANGEDSINCE adds MODSEQ.
    let f = fetch("a UID FETCH 300:500 (FLAGS) (CHANGEDSINCE 12345 VANISHED)");
    assert!(f.uid && f.vanished);
    assert_eq!(f.changed_since, Some(12345));
    assert_eq!(f.attrs, vec![A::Uid, A::Flags, A::ModSeq]);
    assert_eq!(fetch("a UID FETCH 1 (UID FLAGS)").attrs, vec![A::Uid, A::Flags]);
    assert_eq!(fetch("a FETCH $ FLAGS").set, SequenceSet::Saved);
}

#[test]
fn store_copy_move() {
    let store = |s: &str| match parse(s) {
        CommandKind::Store(s) => s,
        other => panic!("{other:?}"),
    };
    let s = store("a STORE 2:4 +FLAGS (\\Deleted)");
    assert_eq!((s.mode, s.silent, s.uid), (StoreMode::Add, false, false));
    assert_eq!(s.flags, vec![Flag::Deleted]);
    let s = store("a UID STORE 1 (UNCHANGEDSINCE 320162338) -flags.silent \\seen \\ANSWERED $Junk");
    assert_eq!((s.mode, s.silent, s.uid), (StoreMode::Remove, true, true));
    assert_eq!(s.unchanged_since, Some(320162338));
    assert_eq!(s.flags, vec![Flag::Seen, Flag::Answered, Flag::Keyword("$Junk".into())]);
    let s = store("a STORE 1 FLAGS ()");
    assert_eq!((s.mode, s.flags.len()), (StoreMode::Replace, 0));
    assert_eq!(
        store("a STORE 1 FLAGS (\\Recent \\X)").flags,
        vec![Flag::Extension("\\Recent".into()), Flag::Extension("\\X".into())]
    );
    assert_eq!(
        parse("a UID COPY 1:* \"Sent Items\""),
        CommandKind::Copy {
            uid: true,
            set: set("1:*"),
            mailbox: "Sent Items".into()
        }
    );
    assert_eq!(
        parse("a MOVE 3 Trash"),
        CommandKind::Move {
            uid: false,
            set: set("3"),
            mailbox: "Trash".into()
        }
    );
}

#[test]
fn odd_spacing() {
    // Runs of spaces, spaces inside parentheses, trailing spaces.
    assert_eq!(parse("a  NOOP   "), CommandKind::Noop);
    let CommandKind::Fetch(f) = parse("a FETCH  1:2   ( FLAGS   UID )  ") else {
        panic!()
    };
    assert_eq!(f.attrs, vec![FetchAttr::Flags, FetchAttr::Uid]);
    let CommandKind::Search(s) = parse("a SEARCH  ( SEEN  ) ") else {
        panic!()
    };
    assert_eq!(s.key, SearchKey::Seen);
    // But items must be separated.
    assert!(parse_command(b"a FETCH 1 (FLAGS\tUID)").is_err());
    assert!(parse_command(b"a NOOP\r\n\r\n").is_err());
}

#[test]
fn framing_helpers() {
    let lit = |len, sync, binary| Some(Literal { len, sync, binary });
    assert_eq!(literal_announcement(b"a LOGIN {4}"), lit(4, true, false));
    assert_eq!(literal_announcement(b"a LOGIN fred {6+}\r\n"), lit(6, false, false));
    assert_eq!(literal_announcement(b"a APPEND INBOX ~{100}"), lit(100, true, true));
    assert_eq!(literal_announcement(b"a APPEND INBOX ~{100+}"), lit(100, false, true));
    assert_eq!(
        literal_announcement(b"a LOGIN {99999999999999999999999}"),
        lit(u64::MAX, true, false)
    );
    assert_eq!(literal_announcement(b"{0}"), lit(0, true, false));
    for none in [
        &b"a NOOP"[..],
        b"a LOGIN \"{4}",
        b"a LOGIN \"x\\\" {4}",
        b"a X {}",
        b"a X {+}",
        b"a X {4-}",
        b"a X {4} ",
    ] {
        assert_eq!(literal_announcement(none), None, "{none:?}");
    }
    assert_eq!(literal_announcement(b"a LOGIN \"x\\\\\" {4}"), lit(4, true, false));
    assert!(is_done(b"DONE") && is_done(b"done\r\n") && !is_done(b"DONE x") && !is_done(b""));
}

const VALID: &[&str] = &[
    "a LOGIN {4}\r\nfred {6+}\r\nsecret",
    "a SELECT INBOX (QRESYNC (1 2 1:9 (1,5 10,50)))",
    "a LIST (SUBSCRIBED RECURSIVEMATCH) \"\" (INBOX* \"Sent%\") RETURN (CHILDREN STATUS (MESSAGES))",
    "a APPEND INBOX (\\Seen) \" 7-Feb-1994 21:52:25 -0800\" ~{5}\r\nhello {1+}\r\nx",
    "a UID SEARCH RETURN (MIN SAVE) CHARSET UTF-8 OR (UNSEEN 1:5) NOT UID $ HEADER X \"\" SINCE 1-Feb-1994",
    "a UID FETCH 1:* (BODY.PEEK[1.2.HEADER.FIELDS (A B)]<0.9> BINARY[1] FLAGS) (CHANGEDSINCE 1 VANISHED)",
    "a STORE 1 (UNCHANGEDSINCE 5) +FLAGS.SILENT (\\Seen $X)",
    "a ID (\"name\" \"x\")",
    "a AUTHENTICATE PLAIN AGZyZWQAc2VjcmV0",
    "a UID MOVE 1,3:* &ZeVnLIqe-",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        fuzz_command(&bytes);
    }

    #[test]
    fn never_panics_on_mutations(
        which in 0..VALID.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6),
    ) {
        let mut bytes = VALID[which].as_bytes().to_vec();
        for (at, byte, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => { bytes.remove(i); }
                _ if i < bytes.len() => bytes[i] = byte,
                _ => {}
            }
        }
        fuzz_command(&bytes);
    }

    #[test]
    fn valid_commands_survive_spacing_changes(which in 0..VALID.len(), extra in 1usize..4) {
        // Doubling the space after the tag keeps the command valid.
        let line = VALID[which].replacen(' ', &" ".repeat(extra + 1), 1);
        prop_assert!(parse_command(line.as_bytes()).is_ok(), "{}", line);
    }
}

#[test]
fn valid_samples_parse() {
    for v in VALID {
        let c = parse_command(v.as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(c.tag, "a");
        fuzz_command(v.as_bytes());
    }
}
