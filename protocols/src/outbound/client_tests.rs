use super::*;

#[test]
fn replies_and_caps() {
    assert_eq!(
        parse_reply_line("250-PIPELINING").unwrap(),
        (250, true, "PIPELINING".into())
    );
    assert_eq!(parse_reply_line("250").unwrap(), (250, false, String::new()));
    assert!(parse_reply_line("hello").is_err());
    assert!(parse_reply_line("999 x").is_err());
    let r = SmtpReply {
        code: 250,
        lines: [
            "mx hello",
            "PIPELINING",
            "SIZE 1000",
            "8BITMIME",
            "dsn",
            "STARTTLS",
            "AUTH PLAIN login",
        ]
        .map(String::from)
        .to_vec(),
    };
    let c = Caps::parse(&r);
    assert!(c.pipelining && c.eight_bit_mime && c.dsn && c.starttls && !c.smtputf8);
    assert_eq!(c.size, Some(1000));
    assert_eq!(c.auth, vec!["PLAIN".to_string(), "LOGIN".to_string()]);
    let r = SmtpReply {
        code: 550,
        lines: vec!["5.1.1 no such user".into()],
    };
    assert_eq!(r.enhanced().as_deref(), Some("5.1.1"));
    assert!(r.is_permanent());
}

/// A scripted peer: answers each line it reads with the next reply,
/// records what it got; DATA's body is read up to the final dot.
async fn scripted_peer(replies: Vec<&'static str>) -> (SocketAddr, tokio::task::JoinHandle<Vec<String>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let (r, mut w) = s.into_split();
        let mut r = tokio::io::BufReader::new(r);
        let mut seen = Vec::new();
        let mut replies = replies.into_iter();
        w.write_all(b"220 peer ESMTP\r\n").await.unwrap();
        let mut in_data = false;
        loop {
            let mut line = String::new();
            if tokio::io::AsyncBufReadExt::read_line(&mut r, &mut line)
                .await
                .unwrap_or(0)
                == 0
            {
                return seen;
            }
            if in_data && line != ".\r\n" {
                seen.push(format!("body:{}", line.trim_end()));
                continue;
            }
            seen.push(line.trim_end().to_string());
            let Some(reply) = replies.next() else { return seen };
            in_data = reply.starts_with("354");
            w.write_all(reply.as_bytes()).await.unwrap();
        }
    });
    (addr, task)
}

#[tokio::test]
async fn pipelined_transaction_with_one_recipient_refused() {
    let (addr, peer) = scripted_peer(vec![
        "250-peer\r\n250-PIPELINING\r\n250-DSN\r\n250 SIZE 1000\r\n",
        "250 sender ok\r\n",
        "250 rcpt ok\r\n",
        "550 5.1.1 no such user\r\n",
        "354 go\r\n",
        "250 2.0.0 queued\r\n",
        "221 bye\r\n",
    ])
    .await;
    let mut c = SmtpClient::connect(addr, "peer.test", "me.test", Timeouts::default(), None)
        .await
        .unwrap();
    assert!(c.caps.pipelining && c.caps.dsn);
    let env = Envelope {
        from: "a@me.test".into(),
        rcpts: vec![
            RcptSpec {
                address: "b@peer.test".into(),
                notify: Some(DsnNotify {
                    failure: true,
                    ..DsnNotify::default()
                }),
                orcpt: Some("rfc822;b+x@peer.test".into()),
            },
            RcptSpec {
                address: "c@peer.test".into(),
                ..RcptSpec::default()
            },
        ],
        size: 20,
        envid: Some("id=1".into()),
        ..Envelope::default()
    };
    let out = c.send_mail(&env, b"Subject: x\n\n.dot\nend").await.unwrap();
    assert_eq!(out.rcpts[0].code, 250, "the accepted one gets the end-of-data reply");
    assert_eq!(out.rcpts[1].code, 550);
    assert_eq!(out.rcpts[1].enhanced().as_deref(), Some("5.1.1"));
    c.quit().await;
    let seen = peer.await.unwrap();
    assert_eq!(seen[1], "MAIL FROM:<a@me.test> SIZE=20 ENVID=id+3D1");
    assert_eq!(
        seen[2],
        "RCPT TO:<b@peer.test> NOTIFY=FAILURE ORCPT=rfc822;b+2Bx@peer.test"
    );
    // Bare LF made CRLF, the leading dot doubled, a final CRLF added.
    assert!(seen.contains(&"body:..dot".to_string()), "{seen:?}");
    assert!(seen.contains(&"body:end".to_string()), "{seen:?}");
}

#[tokio::test]
async fn a_silent_peer_times_out_at_the_greeting() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let _hold = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s);
    });
    let t = Timeouts {
        greeting: Duration::from_millis(200),
        ..Timeouts::default()
    };
    let started = std::time::Instant::now();
    let err = SmtpClient::connect(addr, "peer.test", "me.test", t, None)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ClientError::Timeout("greeting")), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn garbage_from_the_peer_is_a_protocol_error() {
    let (addr, _peer) = scripted_peer(vec!["hello there\r\n"]).await;
    let err = SmtpClient::connect(addr, "peer.test", "me.test", Timeouts::default(), None)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ClientError::Protocol(_)), "{err}");
}

/// A peer whose STARTTLS is broken may send garbage in the same segment as
/// its 220: that is a TLS failure (as a failed handshake is), not a
/// protocol error, so `TLS-Required: No` can fall back to plaintext.
#[tokio::test]
async fn data_behind_the_starttls_reply_is_a_tls_failure() {
    let (addr, _peer) = scripted_peer(vec![
        "250-peer\r\n250 STARTTLS\r\n",
        "220 go ahead\r\nthis is not a TLS handshake\r\n",
    ])
    .await;
    let roots = TlsRoots::load(None).unwrap();
    let err = SmtpClient::connect(addr, "peer.test", "me.test", Timeouts::default(), Some(&roots))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ClientError::Tls(_)), "{err}");
}

#[test]
fn xtext_encodes_plus_and_equals() {
    assert_eq!(xtext("a+b=c d"), "a+2Bb+3Dc+20d");
}
