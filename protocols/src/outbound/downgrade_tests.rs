use super::*;

fn down(m: &[u8]) -> Vec<u8> {
    downgrade(m, Target::SevenBit).unwrap().expect("converted")
}

/// A decoder for the checks: quoted-printable per RFC 2045 §6.7.
fn qp_decode(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'=' {
            if b[i + 1..].starts_with(b"\r\n") {
                i += 3;
                continue;
            }
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn seven_bit_messages_are_left_alone() {
    let m = b"Subject: hi\r\n\r\nplain text\r\n";
    assert_eq!(downgrade(m, Target::SevenBit), Ok(None));
    let m8 = "Subject: hi\r\n\r\ncaf\u{e9}\r\n".as_bytes();
    assert_eq!(downgrade(m8, Target::EightBit), Ok(None));
}

#[test]
fn non_mime_body_becomes_qp_with_mime_headers() {
    let m = "Subject: hi\r\nFrom: a@b\r\n\r\nCaf\u{e9} cr\u{e8}me = tasty \r\n.dot line\r\n".as_bytes();
    let out = down(m);
    let text = std::str::from_utf8(&out).unwrap();
    assert!(
        text.starts_with("Subject: hi\r\nFrom: a@b\r\nMIME-Version: 1.0\r\n"),
        "{text}"
    );
    assert!(text.contains("Content-Type: text/plain; charset=utf-8\r\n"), "{text}");
    assert!(
        text.contains("Content-Transfer-Encoding: quoted-printable\r\n\r\n"),
        "{text}"
    );
    let body = &out[text.find("\r\n\r\n").unwrap() + 4..];
    // CRLF preserved as hard line breaks, trailing space encoded.
    assert_eq!(
        std::str::from_utf8(body).unwrap(),
        "Caf=C3=A9 cr=C3=A8me =3D tasty=20\r\n.dot line\r\n"
    );
    assert_eq!(
        qp_decode(body),
        "Caf\u{e9} cr\u{e8}me = tasty \r\n.dot line\r\n".as_bytes()
    );
}

#[test]
fn nested_multipart_only_8bit_leaves_change() {
    let seven = "Content-Type: text/plain; charset=us-ascii\r\n\r\nplain part\r\n";
    let qp = "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nalready =C3=A9\r\n";
    let m = format!(
        "From: a@b\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"outer\"\r\n\r\n\
         preamble\r\n--outer\r\n{seven}--outer\r\n\
         Content-Type: multipart/alternative; boundary=inner\r\n\r\n--inner\r\n{qp}--inner\r\n\
         Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n<p>h\u{e9}</p>\r\n\
         --inner--\r\n--outer\r\nContent-Type: application/octet-stream\r\n\r\n\u{ff}\u{fe}\r\n--outer--\r\nepilogue\r\n"
    );
    let out = down(m.as_bytes());
    let text = std::str::from_utf8(&out).unwrap();
    assert!(text.is_ascii());
    // 7-bit and already-QP parts are byte-identical.
    assert!(text.contains(&format!("--outer\r\n{seven}--outer\r\n")), "{text}");
    assert!(text.contains(&format!("--inner\r\n{qp}--inner\r\n")), "{text}");
    assert!(
        text.contains(
            "Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>h=C3=A9</p>\r\n--inner--"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nw7/Dvg==\r\n"
        ),
        "{text}"
    );
    assert!(text.starts_with("From: a@b\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed"));
    assert!(text.ends_with("--outer--\r\nepilogue\r\n"));
    assert_eq!(downgrade(&out, Target::SevenBit), Ok(None));
}

#[test]
fn binary_goes_base64_even_to_8bitmime_peers() {
    let m = b"Content-Type: application/pdf\r\nContent-Transfer-Encoding: binary\r\n\r\n\x00\x01\r\x02\n";
    let out = downgrade(m, Target::EightBit).unwrap().expect("converted");
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        "Content-Type: application/pdf\r\nMIME-Version: 1.0\r\nContent-Transfer-Encoding: base64\r\n\r\nAAENAgo=\r\n"
    );
    // A long text line with 8-bit octets to an 8BITMIME peer: QP (soft breaks).
    let long = format!(
        "Content-Type: text/plain; charset=utf-8\r\n\r\n{}\u{e9}\r\n",
        "x".repeat(1200)
    );
    let out = downgrade(long.as_bytes(), Target::EightBit)
        .unwrap()
        .expect("converted");
    let body = &out[out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
    assert!(body.split(|&c| c == b'\n').all(|l| l.len() <= 77));
    assert_eq!(qp_decode(body), format!("{}\u{e9}\r\n", "x".repeat(1200)).as_bytes());
}

#[test]
fn encapsulated_messages_convert_inside() {
    let m = "Content-Type: message/rfc822\r\n\r\nSubject: inner\r\n\r\nna\u{ef}ve\r\n".as_bytes();
    let out = down(m);
    let text = std::str::from_utf8(&out).unwrap();
    assert_eq!(
        text,
        "Content-Type: message/rfc822\r\n\r\nSubject: inner\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nna=C3=AFve\r\n"
    );
}

#[test]
fn refusals() {
    let m = "Subject: caf\u{e9}\r\n\r\nbody \u{e9}\r\n".as_bytes();
    assert_eq!(downgrade(m, Target::SevenBit), Err(DowngradeError::HeaderEightBit));
    let mut deep = String::new();
    for i in 0..NESTING_MAX + 2 {
        deep.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n"
        ));
    }
    deep.push_str("\r\n\u{e9}\r\n");
    assert_eq!(
        downgrade(deep.as_bytes(), Target::SevenBit),
        Err(DowngradeError::TooDeep)
    );
}

#[test]
fn lf_only_messages_and_strays() {
    let m = "Subject: x\n\nl\u{e9}\n".as_bytes();
    assert_eq!(down(m), b"Subject: x\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\nl=C3=A9\n");
    // A QP part with a raw 8-bit octet keeps its meaning.
    let m = b"Content-Transfer-Encoding: quoted-printable\r\nContent-Type: text/plain\r\n\r\nA=3D\xe9\r\n";
    let out = down(m);
    assert!(
        out.ends_with(b"\r\n\r\nA=3D=E9\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

#[test]
fn fuzz_entry_holds_on_samples() {
    for m in [
        &b""[..],
        b"\xff",
        b"\r",
        b"Content-Type: multipart/mixed; boundary=a\r\n\r\n\xff\r\n--a\r\n\r\n\xfe\x00\r\n--a--\r\n\xfd",
        b"Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\r\n--a\r\n\n\xff",
        b"\n\n\xff\r\r",
    ] {
        fuzz(m);
    }
}
