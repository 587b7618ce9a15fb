//! POP3 answers: status lines with RFC 2449 response codes, multi-line
//! answers, and [`Stuffer`], the streaming encoder of a message for RETR
//! and TOP (CRLF line ends, byte-stuffing, the final `.`).

/// RFC 2449 §8 / RFC 2449 §6.4 / RFC 3206 response codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The maildrop cannot be opened now (RFC 2449 §8.1.1).
    InUse,
    /// The credentials, or their transport (RFC 3206 §4).
    Auth,
    /// A temporary failure of the server: try later (RFC 3206 §3).
    SysTemp,
    /// A permanent failure of the server (RFC 3206 §3).
    SysPerm,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InUse => "IN-USE",
            Code::Auth => "AUTH",
            Code::SysTemp => "SYS/TEMP",
            Code::SysPerm => "SYS/PERM",
        }
    }
}

/// `+OK text`.
pub fn ok(text: &str) -> Vec<u8> {
    status_line("+OK", None, text)
}

/// `-ERR [CODE] text`.
pub fn err(code: Option<Code>, text: &str) -> Vec<u8> {
    status_line("-ERR", code, text)
}

fn status_line(status: &str, code: Option<Code>, text: &str) -> Vec<u8> {
    let mut out = String::with_capacity(status.len() + text.len() + 16);
    out.push_str(status);
    if let Some(c) = code {
        out.push_str(" [");
        out.push_str(c.as_str());
        out.push(']');
    }
    if !text.is_empty() {
        out.push(' ');
        // A status line is one line whatever the text holds.
        out.extend(text.chars().filter(|c| *c != '\r' && *c != '\n'));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// A multi-line answer of short lines (CAPA, LIST, UIDL, AUTH): `+OK`,
/// each line byte-stuffed, then `.`.
pub fn multi_line<S: AsRef<str>>(first: &str, lines: &[S]) -> Vec<u8> {
    let mut out = ok(first);
    for l in lines {
        let l = l.as_ref();
        if l.starts_with('.') {
            out.push(b'.');
        }
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

/// The SASL continuation of RFC 5034 §4: `+ ` and a base64 challenge (PLAIN
/// has none).
pub fn continuation(challenge_b64: &str) -> Vec<u8> {
    format!("+ {challenge_b64}\r\n").into_bytes()
}

/// What the capability list offers (RFC 2449 §6), given the session's state.
#[derive(Debug, Clone, Copy)]
pub struct CapaState {
    /// STLS can be started (TLS configured and not active yet).
    pub stls: bool,
    /// USER/PASS and AUTH are allowed on this connection now.
    pub login: bool,
    /// In the TRANSACTION state: nothing about logging in is offered.
    pub authenticated: bool,
}

/// The CAPA lines, in Dovecot's order so clients that log them see the
/// familiar list. EXPIRE and LOGIN-DELAY are not offered: no policy
/// deletes messages, and no delay between logins is enforced.
pub fn capabilities(s: CapaState) -> Vec<&'static str> {
    let mut caps = vec!["CAPA", "TOP", "UIDL", "RESP-CODES", "PIPELINING", "AUTH-RESP-CODE"];
    if !s.authenticated {
        if s.stls {
            caps.push("STLS");
        }
        if s.login {
            caps.extend(["USER", "SASL PLAIN"]);
        }
    }
    caps.push("IMPLEMENTATION meshmail");
    caps
}

/// A scan listing line (RFC 1939 §5 LIST): `n size`.
pub fn scan_line(number: usize, size: u64) -> String {
    format!("{number} {size}")
}

/// A unique-id listing line (RFC 1939 §7 UIDL): `n id`.
pub fn uid_line(number: usize, id: &str) -> String {
    format!("{number} {id}")
}

/// The unique id of a message, from the mailbox's UIDVALIDITY and the
/// message's UID: stable across sessions (a UID is never reused within a
/// UIDVALIDITY), unique within the maildrop, 16 characters of `0-9a-f`
/// (RFC 1939 §7 asks for 1 to 70 of 0x21–0x7E). The layout is Dovecot's
/// default `pop3_uidl_format = %08Xu%08Xv`, which in Dovecot 2.3 prints
/// lower-case hex (checked against dovecot-pop3d by
/// `node/tests/pop3_dovecot.rs`): a mailbox moved from Dovecot with its
/// UIDs and UIDVALIDITY keeps its UIDLs, so clients that "leave mail on
/// the server" do not download everything again.
pub fn unique_id(uid_validity: u32, uid: u32) -> String {
    format!("{uid:08x}{uid_validity:08x}")
}

/// Encodes a message as the body of a RETR or TOP answer, a chunk at a
/// time: every line ends in CRLF (a bare LF gains its CR), a line that
/// starts with `.` gains another (RFC 1939 §3), and [`Stuffer::finish`]
/// ends a last line left open and writes the terminating `.`. For TOP it
/// passes the header, the blank line after it, and then `body_lines`
/// lines of the body (RFC 1939 §7); a message with no blank line is all
/// header. State is carried between chunks, so a message is never held
/// twice and chunk boundaries change nothing (tested against
/// `stuff_naive` over random splits).
#[derive(Debug, Clone)]
pub struct Stuffer {
    line_start: bool,
    /// The line so far holds nothing but CRs.
    line_empty: bool,
    last_was_cr: bool,
    in_header: bool,
    /// TOP: body lines still to send (None: RETR, all of them).
    body_lines_left: Option<u64>,
    done: bool,
}

impl Stuffer {
    pub fn retr() -> Stuffer {
        Stuffer::with_limit(None)
    }

    pub fn top(body_lines: u32) -> Stuffer {
        Stuffer::with_limit(Some(u64::from(body_lines)))
    }

    fn with_limit(body_lines_left: Option<u64>) -> Stuffer {
        Stuffer {
            line_start: true,
            line_empty: true,
            last_was_cr: false,
            in_header: true,
            body_lines_left,
            done: false,
        }
    }

    /// True once TOP has sent all it will: the rest of the message need
    /// not be read.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Encodes the next chunk of the message into `out`.
    pub fn push(&mut self, mut src: &[u8], out: &mut Vec<u8>) {
        while !src.is_empty() && !self.done {
            if self.line_start {
                if !self.in_header && self.body_lines_left == Some(0) {
                    self.done = true;
                    return;
                }
                if src[0] == b'.' {
                    out.push(b'.');
                }
                self.line_start = false;
                self.line_empty = true;
            }
            match src.iter().position(|&b| b == b'\n') {
                None => {
                    self.take(src, out);
                    return;
                }
                Some(i) => {
                    self.take(&src[..i], out);
                    self.end_line(out);
                    src = &src[i + 1..];
                }
            }
        }
    }

    /// Ends the answer: CRLF after an unfinished last line, then `.`.
    pub fn finish(self, out: &mut Vec<u8>) {
        if !self.line_start && !self.done {
            // A last line ending in CR needs only its LF.
            out.extend_from_slice(if self.last_was_cr {
                b"\n".as_slice()
            } else {
                b"\r\n".as_slice()
            });
        }
        out.extend_from_slice(b".\r\n");
    }

    fn take(&mut self, part: &[u8], out: &mut Vec<u8>) {
        let Some(&last) = part.last() else { return };
        out.extend_from_slice(part);
        if part.iter().any(|&b| b != b'\r') {
            self.line_empty = false;
        }
        self.last_was_cr = last == b'\r';
    }

    fn end_line(&mut self, out: &mut Vec<u8>) {
        if !self.last_was_cr {
            out.push(b'\r');
        }
        out.push(b'\n');
        self.last_was_cr = false;
        self.line_start = true;
        if self.in_header {
            self.in_header = !self.line_empty;
        } else if let Some(n) = self.body_lines_left.as_mut() {
            *n -= 1;
        }
    }
}

/// The obvious encoder, the oracle of [`Stuffer`]'s tests: split into
/// lines, keep the header and `top` body lines, stuff, join with CRLF.
#[cfg(test)]
fn stuff_naive(message: &[u8], top: Option<u32>) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = message.split(|&b| b == b'\n').collect();
    // A final LF ends the last line rather than starting an empty one.
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut out = Vec::new();
    let mut in_header = true;
    let mut body_sent = 0u64;
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !in_header && top.is_some_and(|n| body_sent >= u64::from(n)) {
            break;
        }
        if line.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
        if in_header {
            in_header = !line.iter().all(|&b| b == b'\r');
        } else {
            body_sent += 1;
        }
    }
    out.extend_from_slice(b".\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stuff(message: &[u8], top: Option<u32>, chunk: usize) -> Vec<u8> {
        let mut s = top.map_or_else(Stuffer::retr, Stuffer::top);
        let mut out = Vec::new();
        for c in message.chunks(chunk.max(1)) {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn status_lines_carry_codes_and_stay_one_line() {
        assert_eq!(ok("2 320"), b"+OK 2 320\r\n");
        assert_eq!(err(None, "no such message"), b"-ERR no such message\r\n");
        assert_eq!(err(Some(Code::SysTemp), "try later"), b"-ERR [SYS/TEMP] try later\r\n");
        assert_eq!(err(Some(Code::InUse), "x\r\ny"), b"-ERR [IN-USE] xy\r\n");
        assert_eq!(ok(""), b"+OK\r\n");
    }

    #[test]
    fn multi_line_answers_are_stuffed_and_terminated() {
        assert_eq!(
            multi_line("", &["CAPA", ".hidden"]),
            b"+OK\r\nCAPA\r\n..hidden\r\n.\r\n"
        );
        assert_eq!(multi_line::<&str>("0 messages", &[]), b"+OK 0 messages\r\n.\r\n");
    }

    #[test]
    fn retr_stuffs_dots_and_ends_every_line_in_crlf() {
        let m = b"Subject: x\r\n\r\n.starts with a dot\r\nbare lf\n..two\r\n.\r\nlast";
        let want = b"Subject: x\r\n\r\n..starts with a dot\r\nbare lf\r\n...two\r\n..\r\nlast\r\n.\r\n";
        assert_eq!(stuff(m, None, 1000), want);
        assert_eq!(stuff(m, None, 1), want);
        assert_eq!(stuff(b"", None, 10), b".\r\n");
    }

    #[test]
    fn top_sends_the_header_and_n_body_lines() {
        let m = b"A: 1\r\nB: 2\r\n\r\none\r\ntwo\r\nthree\r\n";
        assert_eq!(stuff(m, Some(0), 3), b"A: 1\r\nB: 2\r\n\r\n.\r\n");
        assert_eq!(stuff(m, Some(2), 3), b"A: 1\r\nB: 2\r\n\r\none\r\ntwo\r\n.\r\n");
        assert_eq!(stuff(m, Some(99), 3), stuff(m, None, 3));
        // No blank line: everything is header.
        assert_eq!(stuff(b"A: 1\r\nB: 2", Some(0), 2), b"A: 1\r\nB: 2\r\n.\r\n");
    }

    #[test]
    fn unique_ids_are_within_rfc_1939_limits() {
        let id = unique_id(u32::MAX, 1);
        assert_eq!(id, "00000001ffffffff");
        assert_eq!(unique_id(0x6b16_b28b, 0x2a), "0000002a6b16b28b");
        assert!((1..=70).contains(&id.len()) && id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    }

    #[test]
    fn capabilities_follow_the_state() {
        let pre = capabilities(CapaState {
            stls: true,
            login: false,
            authenticated: false,
        });
        assert!(pre.contains(&"STLS") && !pre.contains(&"USER"));
        let post = capabilities(CapaState {
            stls: false,
            login: true,
            authenticated: true,
        });
        assert!(!post.contains(&"USER") && !post.contains(&"SASL PLAIN") && post.contains(&"UIDL"));
    }

    proptest::proptest! {
        #[test]
        fn the_stuffer_agrees_with_the_naive_encoder(
            message in proptest::collection::vec(proptest::sample::select(b"a.\r\n: ".to_vec()), 0..300),
            top in proptest::option::of(0u32..6),
            chunk in 1usize..40,
        ) {
            proptest::prop_assert_eq!(stuff(&message, top, chunk), stuff_naive(&message, top));
        }
    }
}
