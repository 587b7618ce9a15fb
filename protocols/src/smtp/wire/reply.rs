//! SMTP replies (RFC 5321 §4.2) with enhanced status codes (RFC 3463, RFC
//! 2034), rendered to wire bytes.
//!
//! RFC 2034 §4: once ENHANCEDSTATUSCODES is advertised, every reply except
//! the greeting and the answer to EHLO/HELO carries an enhanced code, and
//! only 2xx/4xx/5xx replies have one (RFC 3463 has no class 3). The
//! constructors below follow that, so a session can render what they give.

use std::fmt;

/// An enhanced status code `class.subject.detail` (RFC 3463).
pub type Enhanced = (u8, u16, u16);

/// One SMTP reply, possibly multi-line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Three-digit reply code (200..=599).
    pub code: u16,
    /// Enhanced status code, written after the code on every line.
    pub enhanced: Option<Enhanced>,
    /// Text lines; an empty vector renders as one line with no text.
    pub lines: Vec<String>,
}

impl Reply {
    /// A one-line reply.
    pub fn new(code: u16, enhanced: Option<Enhanced>, text: impl Into<String>) -> Reply {
        Reply {
            code,
            enhanced,
            lines: vec![text.into()],
        }
    }

    /// A multi-line reply: every line but the last is written `code-text`.
    pub fn multiline(code: u16, enhanced: Option<Enhanced>, lines: Vec<String>) -> Reply {
        Reply { code, enhanced, lines }
    }

    /// 2xx.
    pub fn is_positive(&self) -> bool {
        (200..300).contains(&self.code)
    }
    /// 3xx.
    pub fn is_intermediate(&self) -> bool {
        (300..400).contains(&self.code)
    }
    /// 4xx: the client may retry later.
    pub fn is_transient(&self) -> bool {
        (400..500).contains(&self.code)
    }
    /// 5xx.
    pub fn is_permanent(&self) -> bool {
        (500..600).contains(&self.code)
    }

    /// Appends the wire form to `out`. Each line is `code`, `-` or ` `
    /// (last line), the enhanced code if any, the text, CRLF. CR, LF and NUL
    /// inside a text line are replaced by spaces: a reply must never be able
    /// to inject a line of its own.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let code = self.code.min(999);
        let last = self.lines.len().saturating_sub(1);
        let empty = [String::new()];
        let lines: &[String] = if self.lines.is_empty() { &empty } else { &self.lines };
        for (i, line) in lines.iter().enumerate() {
            out.extend_from_slice(format!("{code:03}").as_bytes());
            // "250" alone is a complete last line; "250-" a valid continuation.
            if !(i == last && self.enhanced.is_none() && line.is_empty()) {
                out.push(if i == last { b' ' } else { b'-' });
            }
            if let Some((c, s, d)) = self.enhanced {
                out.extend_from_slice(format!("{c}.{s}.{d}").as_bytes());
                if !line.is_empty() {
                    out.push(b' ');
                }
            }
            out.extend(
                line.bytes()
                    .map(|b| if matches!(b, b'\r' | b'\n' | 0) { b' ' } else { b }),
            );
            out.extend_from_slice(b"\r\n");
        }
    }

    /// The wire form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }

    /// The same reply without its enhanced code (for a client that did not
    /// get ENHANCEDSTATUSCODES, e.g. after HELO).
    pub fn without_enhanced(mut self) -> Reply {
        self.enhanced = None;
        self
    }

    // ---- constructors for the replies a server sends -------------------

    /// 220 greeting (no enhanced code, RFC 2034 §4).
    pub fn greeting(hostname: &str, banner: &str) -> Reply {
        Reply::new(220, None, format!("{hostname} ESMTP {banner}"))
    }
    /// 250 answer to EHLO: the first line greets, then one line per
    /// capability (`PIPELINING`, `SIZE 10485760`, ...).
    pub fn ehlo(hostname: &str, client: &str, capabilities: &[String]) -> Reply {
        let mut lines = Vec::with_capacity(1 + capabilities.len());
        lines.push(format!("{hostname} greets {client}"));
        lines.extend(capabilities.iter().cloned());
        Reply::multiline(250, None, lines)
    }
    /// 250 answer to HELO.
    pub fn helo(hostname: &str) -> Reply {
        Reply::new(250, None, hostname.to_string())
    }
    /// 221 closing the connection after QUIT.
    pub fn closing(hostname: &str) -> Reply {
        Reply::new(221, Some((2, 0, 0)), format!("{hostname} closing connection"))
    }
    /// 250 2.0.0 OK (RSET, NOOP, ...).
    pub fn ok() -> Reply {
        Reply::new(250, Some((2, 0, 0)), "OK")
    }
    /// 250 2.1.0 after MAIL.
    pub fn sender_ok() -> Reply {
        Reply::new(250, Some((2, 1, 0)), "Sender OK")
    }
    /// 250 2.1.5 after RCPT.
    pub fn recipient_ok() -> Reply {
        Reply::new(250, Some((2, 1, 5)), "Recipient OK")
    }
    /// 250 2.0.0 after the message was made durable; `id` names the acceptance.
    pub fn message_accepted(id: &str) -> Reply {
        Reply::new(250, Some((2, 0, 0)), format!("OK queued as {id}"))
    }
    /// 251 2.1.5 user not local, will forward.
    pub fn will_forward(path: &str) -> Reply {
        Reply::new(
            251,
            Some((2, 1, 5)),
            format!("User not local; will forward to <{path}>"),
        )
    }
    /// 252 2.5.0 answer to VRFY when the server does not disclose users.
    pub fn cannot_verify() -> Reply {
        Reply::new(
            252,
            Some((2, 5, 0)),
            "Cannot VRFY user, but will accept message and attempt delivery",
        )
    }
    /// 214 2.0.0 answer to HELP.
    pub fn help(text: &str) -> Reply {
        Reply::new(214, Some((2, 0, 0)), text.to_string())
    }
    /// 220 2.0.0 answer to STARTTLS before the handshake.
    pub fn ready_to_start_tls() -> Reply {
        Reply::new(220, Some((2, 0, 0)), "Ready to start TLS")
    }
    /// 235 2.7.0 AUTH succeeded (RFC 4954).
    pub fn auth_succeeded() -> Reply {
        Reply::new(235, Some((2, 7, 0)), "Authentication successful")
    }
    /// 334 AUTH challenge; `challenge` is already base64 (may be empty).
    pub fn auth_challenge(challenge: &str) -> Reply {
        Reply::multiline(334, None, vec![challenge.to_string()])
    }
    /// 354 after DATA (intermediate: no enhanced code).
    pub fn start_mail_input() -> Reply {
        Reply::new(354, None, "Start mail input; end with <CRLF>.<CRLF>")
    }
    /// 421 4.4.2 the client was idle too long.
    pub fn timeout(hostname: &str) -> Reply {
        Reply::new(421, Some((4, 4, 2)), format!("{hostname} timeout, closing connection"))
    }
    /// 421 4.3.2 the node is shutting down.
    pub fn shutting_down(hostname: &str) -> Reply {
        Reply::new(
            421,
            Some((4, 3, 2)),
            format!("{hostname} service not available, closing connection"),
        )
    }
    /// 450 4.2.1 mailbox temporarily unavailable (e.g. its shard is moving).
    pub fn mailbox_busy() -> Reply {
        Reply::new(450, Some((4, 2, 1)), "Mailbox temporarily unavailable, try again later")
    }
    /// 451 4.3.0 local error in processing (e.g. the commit failed).
    pub fn local_error() -> Reply {
        Reply::new(451, Some((4, 3, 0)), "Local error in processing, try again later")
    }
    /// 452 4.3.1 insufficient system storage.
    pub fn insufficient_storage() -> Reply {
        Reply::new(452, Some((4, 3, 1)), "Insufficient system storage")
    }
    /// 452 4.5.3 too many recipients (RFC 5321 §4.5.3.1.10).
    pub fn too_many_recipients() -> Reply {
        Reply::new(452, Some((4, 5, 3)), "Too many recipients")
    }
    /// 454 4.7.0 TLS not available.
    pub fn tls_not_available() -> Reply {
        Reply::new(454, Some((4, 7, 0)), "TLS not available due to temporary reason")
    }
    /// 500 5.5.2 command unrecognized.
    pub fn command_unrecognized() -> Reply {
        Reply::new(500, Some((5, 5, 2)), "Syntax error, command unrecognized")
    }
    /// 501 5.5.4 syntax error in parameters.
    pub fn syntax_error_in_parameters() -> Reply {
        Reply::new(501, Some((5, 5, 4)), "Syntax error in parameters or arguments")
    }
    /// 502 5.5.1 command not implemented.
    pub fn not_implemented() -> Reply {
        Reply::new(502, Some((5, 5, 1)), "Command not implemented")
    }
    /// 503 5.5.1 bad sequence of commands.
    pub fn bad_sequence() -> Reply {
        Reply::new(503, Some((5, 5, 1)), "Bad sequence of commands")
    }
    /// 504 5.5.4 command parameter not implemented.
    pub fn parameter_not_implemented() -> Reply {
        Reply::new(504, Some((5, 5, 4)), "Command parameter not implemented")
    }
    /// 530 5.7.0 authentication required.
    pub fn auth_required() -> Reply {
        Reply::new(530, Some((5, 7, 0)), "Authentication required")
    }
    /// 535 5.7.8 authentication credentials invalid.
    pub fn auth_failed() -> Reply {
        Reply::new(535, Some((5, 7, 8)), "Authentication credentials invalid")
    }
    /// 538 5.7.11 encryption required for the requested mechanism (RFC 4954).
    pub fn encryption_required() -> Reply {
        Reply::new(
            538,
            Some((5, 7, 11)),
            "Encryption required for requested authentication mechanism",
        )
    }
    /// 550 5.1.1 no such user.
    pub fn unknown_user() -> Reply {
        Reply::new(550, Some((5, 1, 1)), "Mailbox unavailable: no such user")
    }
    /// 550 5.7.1 relaying denied.
    pub fn relay_denied() -> Reply {
        Reply::new(550, Some((5, 7, 1)), "Relaying denied")
    }
    /// 552 5.3.4 message too big.
    pub fn message_too_big() -> Reply {
        Reply::new(552, Some((5, 3, 4)), "Message size exceeds fixed maximum message size")
    }
    /// 553 5.6.7 a non-ASCII address without SMTPUTF8 (RFC 6531 §3.6).
    pub fn utf8_address_without_smtputf8() -> Reply {
        Reply::new(553, Some((5, 6, 7)), "Non-ASCII address requires SMTPUTF8")
    }
    /// 554 5.0.0 transaction failed.
    /// 552 5.2.2 mailbox full (RFC 3463): the account's quota has no room.
    pub fn over_quota() -> Reply {
        Reply::new(552, Some((5, 2, 2)), "Mailbox full: over quota")
    }

    pub fn transaction_failed(text: &str) -> Reply {
        Reply::new(554, Some((5, 0, 0)), text.to_string())
    }
    /// 550 5.7.1: the recipient's Sieve script refused the message (RFC
    /// 5429 §2.1), with the script's reason.
    pub fn rejected_by_recipient(text: &str) -> Reply {
        Reply::new(550, Some((5, 7, 1)), text.to_string())
    }
    /// 554 5.5.0 no valid recipients (answer to DATA/BDAT without any).
    pub fn no_valid_recipients() -> Reply {
        Reply::new(554, Some((5, 5, 0)), "No valid recipients")
    }
    /// 555 5.5.4 MAIL/RCPT parameter not recognized or not implemented.
    pub fn parameter_unrecognized() -> Reply {
        Reply::new(
            555,
            Some((5, 5, 4)),
            "MAIL FROM/RCPT TO parameters not recognized or not implemented",
        )
    }
}

impl fmt::Display for Reply {
    /// The wire form, CRLFs included.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.to_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_line() {
        assert_eq!(Reply::ok().to_bytes(), b"250 2.0.0 OK\r\n");
        assert_eq!(
            Reply::start_mail_input().to_string(),
            "354 Start mail input; end with <CRLF>.<CRLF>\r\n"
        );
        assert_eq!(Reply::multiline(250, None, vec![]).to_bytes(), b"250\r\n");
        assert_eq!(Reply::new(250, Some((2, 0, 0)), "").to_bytes(), b"250 2.0.0\r\n");
        assert_eq!(Reply::auth_challenge("").to_bytes(), b"334\r\n");
    }

    #[test]
    fn multi_line_continuations() {
        let caps = vec![
            "PIPELINING".to_string(),
            "SIZE 1000".to_string(),
            "8BITMIME".to_string(),
        ];
        let r = Reply::ehlo("mx.example", "client.example", &caps);
        assert_eq!(
            r.to_string(),
            "250-mx.example greets client.example\r\n250-PIPELINING\r\n250-SIZE 1000\r\n250 8BITMIME\r\n"
        );
        let r = Reply::multiline(550, Some((5, 7, 1)), vec!["a".into(), "b".into()]);
        assert_eq!(r.to_string(), "550-5.7.1 a\r\n550 5.7.1 b\r\n");
        let r = Reply::multiline(250, None, vec!["".into(), "".into()]);
        assert_eq!(r.to_string(), "250-\r\n250\r\n");
    }

    #[test]
    fn text_cannot_inject_lines() {
        let r = Reply::new(250, None, "a\r\n250 fake\0");
        assert_eq!(r.to_bytes(), b"250 a  250 fake \r\n");
    }

    #[test]
    fn classes_match_codes() {
        assert!(Reply::ok().is_positive());
        assert!(Reply::start_mail_input().is_intermediate());
        assert!(Reply::local_error().is_transient());
        assert!(Reply::message_too_big().is_permanent());
        for r in [
            Reply::auth_required(),
            Reply::auth_failed(),
            Reply::encryption_required(),
            Reply::unknown_user(),
            Reply::relay_denied(),
            Reply::message_too_big(),
            Reply::parameter_unrecognized(),
            Reply::too_many_recipients(),
            Reply::timeout("h"),
        ] {
            // The enhanced class always agrees with the reply code's class.
            let (class, _, _) = r.enhanced.unwrap();
            assert_eq!(u16::from(class), r.code / 100, "{r}");
        }
    }
}
