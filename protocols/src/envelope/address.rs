//! Mailboxes, domains and address literals as RFC 5321 §4.1.2 spells them,
//! extended by RFC 6531 (SMTPUTF8: UTF-8 in local parts and domain labels).
//!
//! The parser accepts UTF-8 wherever RFC 6531 allows it and only reports
//! whether an address is ASCII: whether SMTPUTF8 was requested is session
//! state, so the session decides (553 5.6.7 when it was not).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// RFC 5321 §4.5.3.1.2: a domain is at most 255 octets.
pub const DOMAIN_MAX: usize = 255;
/// DNS: a label is at most 63 octets.
pub const LABEL_MAX: usize = 63;
/// RFC 5321 §4.5.3.1.3: a path (including the angle brackets) is at most 256 octets.
pub const PATH_MAX: usize = 256;

/// Why an address, domain or literal was refused. The details are static so
/// that a reply never echoes client bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("empty local part")]
    EmptyLocalPart,
    #[error("invalid local part")]
    InvalidLocalPart,
    #[error("missing @domain")]
    MissingDomain,
    #[error("invalid domain")]
    InvalidDomain,
    #[error("domain too long")]
    DomainTooLong,
    #[error("invalid address literal")]
    InvalidAddressLiteral,
    #[error("path too long")]
    PathTooLong,
    #[error("unexpected characters after the address")]
    TrailingCharacters,
    #[error("the address must be in angle brackets")]
    MissingBrackets,
}

/// An address literal (`[192.0.2.1]`, `[IPv6:2001:db8::1]`, `[tag:content]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressLiteral {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
    /// RFC 5321 General-address-literal: syntactically valid, tag not IPv6.
    /// No such tag is registered; the session may refuse it.
    General {
        tag: String,
        content: String,
    },
}

impl fmt::Display for AddressLiteral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddressLiteral::V4(ip) => write!(f, "[{ip}]"),
            AddressLiteral::V6(ip) => write!(f, "[IPv6:{ip}]"),
            AddressLiteral::General { tag, content } => write!(f, "[{tag}:{content}]"),
        }
    }
}

/// A mailbox `local@domain`.
///
/// `local` holds the *value* of the local part: a quoted local part is stored
/// without its quotes and with quoted-pairs resolved (`"a b"@x` → `a b`), so
/// that `"ab"@x` and `ab@x` compare equal, as RFC 5321 §4.1.2 says they are.
/// `Display` re-quotes when needed. `domain` is a domain name as written
/// (case kept) or an address literal including its brackets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mailbox {
    pub local: String,
    pub domain: String,
}

impl Mailbox {
    /// Parses `local@domain` (no angle brackets), UTF-8 allowed.
    pub fn parse(s: &str) -> Result<Mailbox, AddressError> {
        let (mailbox, used) = parse_mailbox_prefix(s, |_| true)?;
        if used != s.len() {
            return Err(AddressError::TrailingCharacters);
        }
        Ok(mailbox)
    }

    /// The domain with ASCII letters lowercased. Domains compare
    /// case-insensitively; local parts are case-sensitive (RFC 5321 §2.4), so
    /// they are left alone. U-labels are not case-folded (that needs IDNA
    /// mapping, which belongs to whoever resolves the domain).
    pub fn lowercased_domain(&self) -> String {
        self.domain.to_ascii_lowercase()
    }

    /// The same mailbox with its domain lowercased: the form to look up
    /// accounts with.
    pub fn normalized(&self) -> Mailbox {
        Mailbox {
            local: self.local.clone(),
            domain: self.lowercased_domain(),
        }
    }

    /// True when both parts are ASCII: such an address needs no SMTPUTF8.
    pub fn is_ascii(&self) -> bool {
        self.local.is_ascii() && self.domain.is_ascii()
    }

    /// True when the domain is an address literal (`[...]`).
    pub fn is_address_literal(&self) -> bool {
        self.domain.starts_with('[')
    }

    /// The local part as it must be written on the wire: as is when it is a
    /// dot-string, else as a quoted string.
    pub fn local_on_wire(&self) -> String {
        if is_dot_string(&self.local) {
            return self.local.clone();
        }
        let mut out = String::with_capacity(self.local.len() + 2);
        out.push('"');
        for c in self.local.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    }
}

impl fmt::Display for Mailbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.local_on_wire(), self.domain)
    }
}

/// RFC 5321 atext, plus any non-ASCII character (RFC 6531 UTF8-non-ascii).
fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

/// RFC 5321 qtextSMTP (printable ASCII except `"` and `\`), plus UTF-8.
fn is_qtext(c: char) -> bool {
    matches!(c, ' ' | '!' | '#'..='[' | ']'..='~') || !c.is_ascii()
}

fn is_dot_string(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(|atom| !atom.is_empty() && atom.chars().all(is_atext))
}

/// Characters a domain token may be made of, before label validation.
fn is_domain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' || !c.is_ascii()
}

/// Validates a domain name: dot-separated labels of letters, digits and
/// hyphens (not at either end of a label), non-ASCII allowed (U-labels, RFC
/// 6531), at most 63 octets per label and 255 in all, no trailing dot.
pub fn validate_domain(domain: &str) -> Result<(), AddressError> {
    check_domain(domain, false)
}

/// Like [`validate_domain`] but also allows `_` in labels: many hosts that
/// send EHLO (Windows machine names, containers) carry one, and refusing the
/// greeting helps nobody. Not for mailbox domains.
pub fn validate_helo_domain(domain: &str) -> Result<(), AddressError> {
    check_domain(domain, true)
}

pub(crate) fn check_domain(domain: &str, allow_underscore: bool) -> Result<(), AddressError> {
    if domain.len() > DOMAIN_MAX {
        return Err(AddressError::DomainTooLong);
    }
    if domain.is_empty() {
        return Err(AddressError::InvalidDomain);
    }
    for label in domain.split('.') {
        let ok_char =
            |c: char| c.is_ascii_alphanumeric() || c == '-' || !c.is_ascii() || (allow_underscore && c == '_');
        if label.is_empty()
            || label.len() > LABEL_MAX
            || label.starts_with('-')
            || label.ends_with('-')
            || !label.chars().all(ok_char)
        {
            return Err(AddressError::InvalidDomain);
        }
    }
    Ok(())
}

/// Parses an address literal including its brackets (`[192.0.2.1]`,
/// `[IPv6:::1]`, `[tag:content]`).
pub fn parse_address_literal(s: &str) -> Result<AddressLiteral, AddressError> {
    let inner = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or(AddressError::InvalidAddressLiteral)?;
    if let Some((tag, content)) = inner.split_once(':') {
        if tag.eq_ignore_ascii_case("IPv6") {
            // Ipv6Addr's parser accepts exactly the RFC 4291 text forms,
            // including the embedded-IPv4 tail that RFC 5321 allows.
            return content
                .parse::<Ipv6Addr>()
                .map(AddressLiteral::V6)
                .map_err(|_| AddressError::InvalidAddressLiteral);
        }
        // Standardized-tag = Ldh-str; dcontent = %d33-90 / %d94-126.
        let tag_ok = !tag.is_empty()
            && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !tag.ends_with('-')
            && !tag.starts_with('-');
        let content_ok = !content.is_empty() && content.chars().all(|c| matches!(c, '!'..='Z' | '^'..='~'));
        if tag_ok && content_ok {
            return Ok(AddressLiteral::General {
                tag: tag.to_string(),
                content: content.to_string(),
            });
        }
        return Err(AddressError::InvalidAddressLiteral);
    }
    // IPv4: exactly four decimal octets of 1-3 digits each (RFC 5321
    // Snum). Ipv4Addr's parser also refuses leading zeros, which would be
    // read as octal elsewhere.
    inner
        .parse::<Ipv4Addr>()
        .map(AddressLiteral::V4)
        .map_err(|_| AddressError::InvalidAddressLiteral)
}

/// Parses a mailbox at the start of `s` and returns it with the number of
/// bytes it took. Parsing stops at the first character that cannot continue
/// the domain; `stop` says which characters may legitimately follow (`>`
/// inside a path), anything else there is an error.
pub(crate) fn parse_mailbox_prefix(s: &str, stop: impl Fn(char) -> bool) -> Result<(Mailbox, usize), AddressError> {
    let (local, mut pos) = parse_local_part(s)?;
    let rest = &s[pos..];
    if !rest.starts_with('@') {
        return Err(if rest.is_empty() || rest.starts_with(&stop) {
            AddressError::MissingDomain
        } else {
            AddressError::InvalidLocalPart
        });
    }
    pos += 1;
    let rest = &s[pos..];
    let domain_len = if rest.starts_with('[') {
        match rest.find(']') {
            Some(end) => end + 1,
            None => return Err(AddressError::InvalidAddressLiteral),
        }
    } else {
        rest.find(|c: char| !is_domain_char(c)).unwrap_or(rest.len())
    };
    let domain = &rest[..domain_len];
    if domain.starts_with('[') {
        parse_address_literal(domain)?;
    } else {
        validate_domain(domain)?;
    }
    pos += domain_len;
    if let Some(next) = s[pos..].chars().next()
        && !stop(next)
    {
        return Err(AddressError::InvalidDomain);
    }
    Ok((
        Mailbox {
            local,
            domain: domain.to_string(),
        },
        pos,
    ))
}

/// Parses a local part (dot-string or quoted string) at the start of `s`,
/// returning its value and the bytes it took.
fn parse_local_part(s: &str) -> Result<(String, usize), AddressError> {
    if let Some(body) = s.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((value, 1 + i + 1)),
                '\\' => match chars.next() {
                    // quoted-pairSMTP = "\" %d32-126
                    Some((_, q)) if (' '..='~').contains(&q) => value.push(q),
                    _ => return Err(AddressError::InvalidLocalPart),
                },
                c if is_qtext(c) => value.push(c),
                _ => return Err(AddressError::InvalidLocalPart),
            }
        }
        return Err(AddressError::InvalidLocalPart);
    }
    let end = s.find(|c: char| !(is_atext(c) || c == '.')).unwrap_or(s.len());
    let local = &s[..end];
    if local.is_empty() {
        return Err(AddressError::EmptyLocalPart);
    }
    if !is_dot_string(local) {
        return Err(AddressError::InvalidLocalPart);
    }
    Ok((local.to_string(), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_quoted_mailboxes() {
        let m = Mailbox::parse("john.doe@Example.COM").unwrap();
        assert_eq!(m.local, "john.doe");
        assert_eq!(m.domain, "Example.COM");
        assert_eq!(m.lowercased_domain(), "example.com");
        assert_eq!(m.normalized().to_string(), "john.doe@example.com");
        assert!(m.is_ascii());

        let q = Mailbox::parse(r#""john \"j\" doe"@example.com"#).unwrap();
        assert_eq!(q.local, r#"john "j" doe"#);
        assert_eq!(q.to_string(), r#""john \"j\" doe"@example.com"#);
        // Needless quotes are dropped in the canonical form.
        assert_eq!(Mailbox::parse(r#""abc"@x.org"#).unwrap().to_string(), "abc@x.org");
        assert_eq!(
            Mailbox::parse(r#""a..b"@x.org"#).unwrap().to_string(),
            r#""a..b"@x.org"#
        );
    }

    #[test]
    fn utf8_addresses_are_flagged_not_refused() {
        let m = Mailbox::parse("josé@exämple.de").unwrap();
        assert!(!m.is_ascii());
        assert_eq!(m.to_string(), "josé@exämple.de");
    }

    #[test]
    fn refuses_bad_mailboxes() {
        for bad in [
            "",
            "@x.org",
            "a@",
            "a",
            "a..b@x.org",
            ".a@x.org",
            "a.@x.org",
            "a b@x.org",
            "a@-x.org",
            "a@x-.org",
            "a@x..org",
            "a@x.org.",
            "a@[1.2.3]",
            "a@[1.2.3.4",
            "\"a@x.org",
            "a@x.org extra",
            "a@x_y.org",
        ] {
            assert!(Mailbox::parse(bad).is_err(), "{bad:?} accepted");
        }
        let long_label = format!("a@{}.org", "x".repeat(64));
        assert_eq!(Mailbox::parse(&long_label), Err(AddressError::InvalidDomain));
        let long_domain = format!("a@{}", vec!["x".repeat(60); 5].join("."));
        assert_eq!(Mailbox::parse(&long_domain), Err(AddressError::DomainTooLong));
    }

    #[test]
    fn address_literals() {
        assert_eq!(
            parse_address_literal("[192.0.2.1]"),
            Ok(AddressLiteral::V4(Ipv4Addr::new(192, 0, 2, 1)))
        );
        assert_eq!(
            parse_address_literal("[IPv6:2001:db8::1]"),
            Ok(AddressLiteral::V6("2001:db8::1".parse().unwrap()))
        );
        assert_eq!(
            parse_address_literal("[ipv6:::ffff:192.0.2.1]").unwrap().to_string(),
            "[IPv6:::ffff:192.0.2.1]"
        );
        assert!(matches!(
            parse_address_literal("[x-tag:abc]"),
            Ok(AddressLiteral::General { .. })
        ));
        for bad in [
            "192.0.2.1",
            "[192.0.2.256]",
            "[1.2.3.4.5]",
            "[IPv6:zz::1]",
            "[]",
            "[:x]",
            "[t:a b]",
        ] {
            assert!(parse_address_literal(bad).is_err(), "{bad:?} accepted");
        }
        let m = Mailbox::parse("root@[10.0.0.1]").unwrap();
        assert!(m.is_address_literal());
    }

    #[test]
    fn helo_domains_tolerate_underscore() {
        assert!(validate_helo_domain("my_pc.local").is_ok());
        assert!(validate_domain("my_pc.local").is_err());
    }
}
