//! The server's side of RFC 5804: `OK`/`NO`/`BYE` with a response code
//! and a human-readable string (§1.3), strings written quoted when they
//! can be and as `{n}` literals when not (§4 `literal-s2c`), and the
//! capability list (§1.7) the greeting, CAPABILITY and STARTTLS send.

/// RFC 5804 §1.3's response codes this server uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// PLAIN before TLS where plaintext logins are not allowed.
    EncryptNeeded,
    /// `QUOTA/MAXSCRIPTS`: the account has its number of scripts.
    MaxScripts,
    /// `QUOTA/MAXSIZE`: the script is larger than allowed.
    MaxSize,
    /// Deleting the active script.
    Active,
    NonExistent,
    AlreadyExists,
    /// A temporary failure (store unavailable, login rate limit).
    TryLater,
    /// NOOP's echo.
    Tag(Vec<u8>),
}

impl Code {
    fn write(&self, out: &mut Vec<u8>) {
        let atom: &[u8] = match self {
            Code::EncryptNeeded => b"ENCRYPT-NEEDED",
            Code::MaxScripts => b"QUOTA/MAXSCRIPTS",
            Code::MaxSize => b"QUOTA/MAXSIZE",
            Code::Active => b"ACTIVE",
            Code::NonExistent => b"NONEXISTENT",
            Code::AlreadyExists => b"ALREADYEXISTS",
            Code::TryLater => b"TRYLATER",
            Code::Tag(tag) => {
                out.extend_from_slice(b"TAG ");
                string(out, tag);
                return;
            }
        };
        out.extend_from_slice(atom);
    }
}

/// The three final responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    No,
    Bye,
}

impl Status {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::No => "no",
            Status::Bye => "bye",
        }
    }
}

/// Appends `s` as a quoted string, or as a literal when it cannot be one
/// (CR, LF, NUL, or longer than a quoted string may be).
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 1024 && !s.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        out.push(b'"');
        for &b in s {
            if matches!(b, b'"' | b'\\') {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        literal(out, s);
    }
}

/// Appends `{n}` CRLF and the bytes (GETSCRIPT's script, always a literal).
pub fn literal(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(format!("{{{}}}\r\n", s.len()).as_bytes());
    out.extend_from_slice(s);
}

/// `OK`, `NO` or `BYE`, an optional `(code)` and the text, CRLF-ended.
pub fn status(status: Status, code: Option<&Code>, text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 24);
    out.extend_from_slice(match status {
        Status::Ok => b"OK",
        Status::No => b"NO",
        Status::Bye => b"BYE",
    });
    if let Some(c) = code {
        out.extend_from_slice(b" (");
        c.write(&mut out);
        out.push(b')');
    }
    if !text.is_empty() {
        out.push(b' ');
        string(&mut out, text.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// What the capability list depends on.
#[derive(Debug, Clone)]
pub struct CapaState<'a> {
    /// STARTTLS is offered (TLS configured and not yet on).
    pub starttls: bool,
    /// PLAIN may be used now (TLS on, or plaintext allowed here).
    pub plain: bool,
    /// The Sieve extensions `require` accepts.
    pub extensions: &'a [&'a str],
    pub max_redirects: usize,
    /// The logged-in user (RFC 5804 §1.7 OWNER), once authenticated.
    pub owner: Option<&'a str>,
}

/// The capability lines (RFC 5804 §1.7), without the final `OK`. SASL is
/// listed empty rather than left out while PLAIN is refused: clients
/// then know to STARTTLS first, as Dovecot does (§2.1 lets the list
/// change after STARTTLS).
pub fn capabilities(s: &CapaState<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line = |key: &str, value: Option<&str>| {
        string(&mut out, key.as_bytes());
        if let Some(v) = value {
            out.push(b' ');
            string(&mut out, v.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    };
    line("IMPLEMENTATION", Some("meshmail"));
    line("SASL", Some(if s.plain { "PLAIN" } else { "" }));
    line("SIEVE", Some(&s.extensions.join(" ")));
    if s.starttls {
        line("STARTTLS", None);
    }
    line("MAXREDIRECTS", Some(&s.max_redirects.to_string()));
    if let Some(owner) = s.owner {
        line("OWNER", Some(owner));
    }
    line("VERSION", Some("1.0"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_codes_and_strings() {
        assert_eq!(status(Status::Ok, None, ""), b"OK\r\n");
        assert_eq!(
            status(Status::No, Some(&Code::MaxSize), "too \"big\""),
            b"NO (QUOTA/MAXSIZE) \"too \\\"big\\\"\"\r\n"
        );
        assert_eq!(
            status(Status::Ok, Some(&Code::Tag(b"t1".to_vec())), "Done"),
            b"OK (TAG \"t1\") \"Done\"\r\n"
        );
        assert_eq!(status(Status::No, None, "a\nb"), b"NO {3}\r\na\nb\r\n");
        let mut out = Vec::new();
        literal(&mut out, b"keep;");
        assert_eq!(out, b"{5}\r\nkeep;");
    }

    #[test]
    fn capability_lines() {
        let s = CapaState {
            starttls: true,
            plain: false,
            extensions: &["fileinto", "reject"],
            max_redirects: 4,
            owner: None,
        };
        let text = String::from_utf8(capabilities(&s)).unwrap();
        assert_eq!(
            text,
            "\"IMPLEMENTATION\" \"meshmail\"\r\n\"SASL\" \"\"\r\n\"SIEVE\" \"fileinto reject\"\r\n\
             \"STARTTLS\"\r\n\"MAXREDIRECTS\" \"4\"\r\n\"VERSION\" \"1.0\"\r\n"
        );
    }
}
