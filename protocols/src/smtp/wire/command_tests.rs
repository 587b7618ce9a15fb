use super::*;

fn ok(line: &str) -> Command {
    parse_command(line.as_bytes()).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

fn err(line: &[u8]) -> SyntaxError {
    match parse_command(line) {
        Ok(c) => panic!("{:?} accepted as {c:?}", String::from_utf8_lossy(line)),
        Err(e) => e,
    }
}

fn mailbox(s: &str) -> Mailbox {
    Mailbox::parse(s).unwrap()
}

#[test]
fn greetings() {
    assert_eq!(
        ok("EHLO mx.example.org"),
        Command::Ehlo(Host::Domain("mx.example.org".into()))
    );
    assert_eq!(
        ok("ehlo Mx.Example.org "),
        Command::Ehlo(Host::Domain("Mx.Example.org".into()))
    );
    assert_eq!(ok("HELO my_pc"), Command::Helo(Host::Domain("my_pc".into())));
    assert_eq!(
        ok("LHLO lmtp.example"),
        Command::Lhlo(Host::Domain("lmtp.example".into()))
    );
    assert!(matches!(
        ok("EHLO [192.0.2.1]"),
        Command::Ehlo(Host::Literal(AddressLiteral::V4(_)))
    ));
    assert!(matches!(
        ok("EHLO [IPv6:::1]"),
        Command::Ehlo(Host::Literal(AddressLiteral::V6(_)))
    ));
    for bad in [
        "EHLO",
        "EHLO ",
        "HELO -bad",
        "EHLO a b",
        "EHLO [300.1.1.1]",
        "EHLO a..b",
    ] {
        assert_eq!(err(bad.as_bytes()).reply().code, 501, "{bad}");
    }
}

#[test]
fn mail_from() {
    assert_eq!(
        ok("MAIL FROM:<john@example.org>"),
        Command::Mail {
            from: ReversePath::Mailbox(mailbox("john@example.org")),
            params: MailParams::default()
        }
    );
    // Space after the colon and odd case are tolerated.
    assert_eq!(
        ok("mail from: <john@example.org>"),
        Command::Mail {
            from: ReversePath::Mailbox(mailbox("john@example.org")),
            params: MailParams::default()
        }
    );
    assert_eq!(
        ok("MAIL FROM:<>"),
        Command::Mail {
            from: ReversePath::Null,
            params: MailParams::default()
        }
    );
    let Command::Mail { from, params } =
        ok("MAIL FROM:<a@b.org> SIZE=12345 body=8bitmime SMTPUTF8 AUTH=<> RET=HDRS ENVID=QQ314159")
    else {
        panic!()
    };
    assert_eq!(from, ReversePath::Mailbox(mailbox("a@b.org")));
    assert_eq!(params.size, Some(12345));
    assert_eq!(params.body, Some(BodyType::EightBitMime));
    assert!(params.smtputf8);
    assert_eq!(params.auth, Some(MailAuth::Unknown));
    assert_eq!(params.ret, Some(DsnRet::Hdrs));
    assert_eq!(params.envid.as_deref(), Some("QQ314159"));
    assert!(params.other.is_empty());
    let Command::Mail { params, .. } = ok("MAIL FROM:<a@b.org> ENVID=a+2Bb REQUIRETLS X-FOO=1") else {
        panic!()
    };
    assert_eq!(params.envid.as_deref(), Some("a+b"));
    assert!(params.requiretls);
    assert_eq!(params.other.len(), 1);
    assert!(parse_command(b"MAIL FROM:<a@b.org> RET=SOME").is_err());
    assert!(parse_command(b"MAIL FROM:<a@b.org> RET=FULL RET=HDRS").is_err());
    assert!(parse_command(format!("MAIL FROM:<a@b.org> ENVID={}", "x".repeat(101)).as_bytes()).is_err());
    let Command::Mail { params, .. } =
        ok("MAIL FROM:<a@b.org> AUTH=e+3Dmc2@example.com BODY=BINARYMIME SIZE=99999999999999999999999")
    else {
        panic!()
    };
    assert_eq!(params.auth, Some(MailAuth::Identity("e=mc2@example.com".into())));
    assert_eq!(params.body, Some(BodyType::BinaryMime));
    assert_eq!(params.size, Some(u64::MAX));
}

#[test]
fn paths() {
    // Source routes are dropped.
    let Command::Mail { from, .. } = ok("MAIL FROM:<@relay1.org,@relay2.org:user@final.org>") else {
        panic!()
    };
    assert_eq!(from, ReversePath::Mailbox(mailbox("user@final.org")));
    // Quoted local parts may hold '>' and spaces.
    let Command::Rcpt { to, .. } = ok(r#"RCPT TO:<"odd> \"one\""@example.org>"#) else {
        panic!()
    };
    let ForwardPath::Mailbox(m) = to else { panic!() };
    assert_eq!(m.local, r#"odd> "one""#);
    // UTF-8 is parsed; the session checks SMTPUTF8.
    let Command::Rcpt {
        to: ForwardPath::Mailbox(m),
        ..
    } = ok("RCPT TO:<δοκιμή@παράδειγμα.δοκιμή>")
    else {
        panic!()
    };
    assert!(!m.is_ascii());
    let Command::Rcpt {
        to: ForwardPath::Mailbox(m),
        ..
    } = ok("RCPT TO:<root@[10.1.2.3]>")
    else {
        panic!()
    };
    assert!(m.is_address_literal());
}

#[test]
fn rcpt_dsn_parameters() {
    let Command::Rcpt { params, .. } = ok("RCPT TO:<a@b.org> NOTIFY=success,FAILURE ORCPT=rfc822;a+2Bb@b.org X=1")
    else {
        panic!()
    };
    let (dsn, unknown) = parse_rcpt_dsn(&params).unwrap();
    let n = dsn.notify.unwrap();
    assert!(n.success && n.failure && !n.delay && !n.never);
    assert_eq!(dsn.orcpt.as_deref(), Some("rfc822;a+b@b.org"));
    assert_eq!(unknown, vec!["X".to_string()]);
    for bad in [
        "RCPT TO:<a@b.org> NOTIFY=NEVER,FAILURE",
        "RCPT TO:<a@b.org> NOTIFY=SOMETIMES",
        "RCPT TO:<a@b.org> ORCPT=noaddrtype",
        "RCPT TO:<a@b.org> NOTIFY=NEVER NOTIFY=NEVER",
    ] {
        let Command::Rcpt { params, .. } = ok(bad) else {
            panic!()
        };
        assert!(parse_rcpt_dsn(&params).is_err(), "{bad}");
    }
}

#[test]
fn rcpt_to() {
    assert_eq!(
        ok("RCPT TO:<Postmaster>"),
        Command::Rcpt {
            to: ForwardPath::Postmaster,
            params: vec![]
        }
    );
    assert_eq!(
        ok("rcpt to:<POSTMASTER>"),
        Command::Rcpt {
            to: ForwardPath::Postmaster,
            params: vec![]
        }
    );
    assert_eq!(
        ok("RCPT TO:<postmaster@example.org> NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;a+2Bb@example.org"),
        Command::Rcpt {
            to: ForwardPath::Mailbox(mailbox("postmaster@example.org")),
            params: vec![
                Param {
                    keyword: "NOTIFY".into(),
                    value: Some("SUCCESS,FAILURE".into())
                },
                Param {
                    keyword: "ORCPT".into(),
                    value: Some("rfc822;a+2Bb@example.org".into())
                },
            ]
        }
    );
}

#[test]
fn bad_paths() {
    for (line, code, enhanced) in [
        ("MAIL FROM:a@b.org", 501, (5, 1, 7)),
        ("MAIL FROM:<a@b.org", 501, (5, 1, 7)),
        ("MAIL FROM:<a@b.org>x", 501, (5, 1, 7)),
        ("MAIL FROM:<a>", 501, (5, 1, 7)),
        ("MAIL FROM:<Postmaster>", 501, (5, 1, 7)),
        ("MAIL FROM:<a@b_c.org>", 501, (5, 1, 7)),
        ("MAIL TO:<a@b.org>", 501, (5, 5, 4)),
        ("MAIL <a@b.org>", 501, (5, 5, 4)),
        ("RCPT TO:<>", 501, (5, 1, 3)),
        ("RCPT TO:<a b@c.org>", 501, (5, 1, 3)),
        ("RCPT TO:<@x.org:>", 501, (5, 1, 3)),
        ("RCPT TO:<a@b.org> =x", 501, (5, 5, 4)),
        ("RCPT TO:<a@b.org> X=", 501, (5, 5, 4)),
        ("MAIL FROM:<a@b.org> SIZE=1 SIZE=2", 501, (5, 5, 4)),
        ("MAIL FROM:<a@b.org> SIZE=12k", 501, (5, 5, 4)),
        ("MAIL FROM:<a@b.org> SIZE", 501, (5, 5, 4)),
        ("MAIL FROM:<a@b.org> BODY=9BIT", 501, (5, 5, 4)),
        ("MAIL FROM:<a@b.org> SMTPUTF8=yes", 501, (5, 5, 4)),
        ("MAIL FROM:<a@b.org> AUTH=+zz", 501, (5, 5, 4)),
    ] {
        let reply = err(line.as_bytes()).reply();
        assert_eq!((reply.code, reply.enhanced), (code, Some(enhanced)), "{line}");
    }
    assert_eq!(
        err(b"MAIL FROM:a@b.org"),
        SyntaxError::BadSender(AddressError::MissingBrackets)
    );
    let long = format!("RCPT TO:<{}@example.org>", "a".repeat(250));
    assert_eq!(
        err(long.as_bytes()),
        SyntaxError::BadRecipient(AddressError::PathTooLong)
    );
}

#[test]
fn simple_commands() {
    assert_eq!(ok("DATA"), Command::Data);
    assert_eq!(ok("data "), Command::Data);
    assert_eq!(ok("RSET"), Command::Rset);
    assert_eq!(ok("QUIT"), Command::Quit);
    assert_eq!(ok("STARTTLS"), Command::StartTls);
    assert_eq!(ok("NOOP"), Command::Noop(None));
    assert_eq!(ok("NOOP hello there"), Command::Noop(Some("hello there".into())));
    assert_eq!(ok("HELP"), Command::Help(None));
    assert_eq!(ok("HELP MAIL"), Command::Help(Some("MAIL".into())));
    assert_eq!(ok("VRFY john"), Command::Vrfy("john".into()));
    assert_eq!(ok("EXPN staff"), Command::Expn("staff".into()));
    assert_eq!(
        ok("BDAT 1000"),
        Command::Bdat {
            size: 1000,
            last: false
        }
    );
    assert_eq!(ok("BDAT 0 last"), Command::Bdat { size: 0, last: true });
    for bad in [
        "DATA x",
        "QUIT now",
        "RSET x",
        "STARTTLS x",
        "VRFY",
        "EXPN",
        "BDAT",
        "BDAT x",
        "BDAT 1 2",
        "BDAT -1",
        "BDAT 1 LAST x",
        "BDAT 99999999999999999999999",
    ] {
        assert_eq!(err(bad.as_bytes()).reply().code, 501, "{bad}");
    }
}

#[test]
fn auth() {
    assert_eq!(
        ok("AUTH plain dGVzdAB0ZXN0AHRlc3Q="),
        Command::Auth {
            mechanism: "PLAIN".into(),
            initial_response: Some("dGVzdAB0ZXN0AHRlc3Q=".into())
        }
    );
    assert_eq!(
        ok("AUTH LOGIN"),
        Command::Auth {
            mechanism: "LOGIN".into(),
            initial_response: None
        }
    );
    assert_eq!(
        ok("AUTH PLAIN ="),
        Command::Auth {
            mechanism: "PLAIN".into(),
            initial_response: Some("=".into())
        }
    );
    // RFC 4954 lets AUTH lines be much longer than 512 octets.
    let long = format!("AUTH PLAIN {}", "A".repeat(4000));
    assert!(matches!(ok(&long), Command::Auth { .. }));
    let too_long = format!("AUTH PLAIN {}", "A".repeat(AUTH_LINE_MAX));
    assert_eq!(err(too_long.as_bytes()), SyntaxError::LineTooLong);
    for bad in [
        "AUTH",
        "AUTH PL@IN",
        "AUTH PLAIN a b",
        "AUTH PLAIN !!",
        "AUTH ABCDEFGHIJKLMNOPQRSTU",
    ] {
        assert_eq!(err(bad.as_bytes()).reply().code, 501, "{bad}");
    }
}

#[test]
fn line_limits_and_bytes() {
    // 510 octets + CRLF = 512: the longest line allowed.
    let max = format!("NOOP {}", "x".repeat(COMMAND_LINE_MAX - 2 - 5));
    assert_eq!(max.len() + 2, COMMAND_LINE_MAX);
    assert!(parse_command(max.as_bytes()).is_ok());
    let over = format!("{max}x");
    assert_eq!(err(over.as_bytes()), SyntaxError::LineTooLong);
    assert_eq!(err(over.as_bytes()).reply().code, 500);

    assert_eq!(err(b"NOOP a\0b"), SyntaxError::ForbiddenCharacter);
    assert_eq!(err(b"NOOP a\rb"), SyntaxError::ForbiddenCharacter);
    assert_eq!(err(b"NOOP a\nb"), SyntaxError::ForbiddenCharacter);
    assert_eq!(err(b"DATA\r"), SyntaxError::ForbiddenCharacter);
    assert_eq!(err(b"NOOP \xff\xfe"), SyntaxError::InvalidUtf8);
    assert_eq!(err(b"RCPT TO:<\xc3@x.org>"), SyntaxError::InvalidUtf8);
    assert_eq!(err(b"\xffDATA"), SyntaxError::UnrecognizedCommand);
    assert_eq!(err(b""), SyntaxError::UnrecognizedCommand);
    assert_eq!(err(b"FOO bar"), SyntaxError::UnrecognizedCommand);
    assert_eq!(err(b"MAILFROM:<a@b.org>"), SyntaxError::UnrecognizedCommand);
    let reply = err(b"FOO").reply();
    assert_eq!(reply.to_bytes(), b"500 5.5.2 Syntax error, command unrecognized\r\n");
}
