//! Mailbox names: modified UTF-7 (RFC 3501 §5.1.3, kept by RFC 9051 for
//! clients that did not ENABLE UTF8=ACCEPT), decoding names out of
//! commands, and LIST pattern matching ([`list_pattern_matches`]).
//!
//! Printable US-ASCII stands for itself except `&`, written `&-`; any
//! other run of characters is `&`, their UTF-16BE code units in base64
//! with `,` instead of `/` and no padding, then `-`. [`decode`] accepts
//! only the canonical form (so a name has exactly one spelling): no
//! printable ASCII inside a base64 run, no `-&` null shift between two
//! runs, zero padding bits, paired surrogates, no 8-bit or control bytes.

use std::fmt;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

/// Why a name is not valid modified UTF-7.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utf7Error(&'static str);

impl fmt::Display for Utf7Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid modified UTF-7: {}", self.0)
    }
}

impl std::error::Error for Utf7Error {}

fn printable(c: u32) -> bool {
    (0x20..=0x7e).contains(&c)
}

/// Encodes a name in modified UTF-7.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut units: Vec<u16> = Vec::new();
    for c in name.chars() {
        if printable(c as u32) {
            flush(&mut out, &mut units);
            out.push(c);
            if c == '&' {
                out.push('-');
            }
        } else {
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    flush(&mut out, &mut units);
    out
}

/// Writes a pending base64 run.
fn flush(out: &mut String, units: &mut Vec<u16>) {
    if units.is_empty() {
        return;
    }
    out.push('&');
    let (mut acc, mut bits) = (0u32, 0u32);
    for unit in units.drain(..) {
        acc = (acc << 16) | u32::from(unit);
        bits += 16;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out.push('-');
}

/// Decodes a modified UTF-7 name, refusing non-canonical input.
pub fn decode(input: &[u8]) -> Result<String, Utf7Error> {
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b != b'&' {
            if !printable(u32::from(b)) {
                return Err(Utf7Error("8-bit or control character"));
            }
            out.push(b as char);
            i += 1;
            continue;
        }
        let end = input[i + 1..]
            .iter()
            .position(|&c| c == b'-')
            .map(|p| i + 1 + p)
            .ok_or(Utf7Error("unterminated base64 run"))?;
        let run = &input[i + 1..end];
        if run.is_empty() {
            out.push('&');
        } else {
            decode_run(run, &mut out)?;
            if input.get(end + 1) == Some(&b'&') && input.get(end + 2) != Some(&b'-') {
                return Err(Utf7Error("null shift between two base64 runs"));
            }
        }
        i = end + 1;
    }
    Ok(out)
}

fn decode_run(run: &[u8], out: &mut String) -> Result<(), Utf7Error> {
    let (mut acc, mut bits) = (0u32, 0u32);
    let mut units = Vec::with_capacity(run.len() * 6 / 16);
    for &c in run {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .ok_or(Utf7Error("character outside the base64 alphabet"))?;
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 16 {
            bits -= 16;
            units.push((acc >> bits) as u16);
            acc &= (1 << bits) - 1;
        }
    }
    if bits >= 6 || acc != 0 {
        return Err(Utf7Error("partial code unit at the end of a base64 run"));
    }
    for c in char::decode_utf16(units) {
        let c = c.map_err(|_| Utf7Error("unpaired surrogate"))?;
        if printable(c as u32) {
            return Err(Utf7Error("printable ASCII inside a base64 run"));
        }
        out.push(c);
    }
    Ok(())
}

/// A mailbox name (or LIST pattern) from a command, decoded.
///
/// With `utf8_accept` (the session ENABLEd UTF8=ACCEPT, RFC 9051 §6.3.1 /
/// RFC 6855) the name is UTF-8 as sent and `&` is an ordinary character.
/// Otherwise it is modified UTF-7, except that a name with 8-bit bytes is
/// taken as UTF-8 when it is valid UTF-8 (clients that send raw UTF-8 are
/// common; the bytes cannot be modified UTF-7 anyway). `INBOX` in any case
/// becomes `INBOX`; `inbox/x` is left alone (the hierarchy delimiter is the
/// session's choice).
pub fn decode_mailbox(raw: &[u8], utf8_accept: bool) -> Result<String, Utf7Error> {
    let name = if utf8_accept || !raw.is_ascii() {
        String::from_utf8(raw.to_vec()).map_err(|_| Utf7Error("invalid UTF-8"))?
    } else {
        decode(raw)?
    };
    Ok(if name.eq_ignore_ascii_case("INBOX") {
        "INBOX".to_string()
    } else {
        name
    })
}

/// A decoded name as the client expects it: UTF-8 after UTF8=ACCEPT,
/// modified UTF-7 otherwise.
pub fn encode_mailbox(name: &str, utf8: bool) -> String {
    if utf8 { name.to_string() } else { encode(name) }
}

/// Does `name` match a LIST pattern (`*` matches anything, `%` anything
/// but the hierarchy delimiter)? Both are decoded names. Comparison is
/// exact except that a leading INBOX (followed by the end, the delimiter or
/// a wildcard) matches in any case. Runs in O(pattern × name) time: no
/// exponential backtracking on patterns like `*%*%*`.
pub fn list_pattern_matches(pattern: &str, name: &str, delimiter: Option<char>) -> bool {
    let p = inbox_upper(pattern, delimiter, true);
    let n = inbox_upper(name, delimiter, false);
    // reachable[j]: the pattern read so far can match exactly n[..j].
    let mut reachable = vec![false; n.len() + 1];
    reachable[0] = true;
    for &pc in &p {
        let mut next = vec![false; n.len() + 1];
        if pc == '*' || pc == '%' {
            let mut on = false;
            for j in 0..=n.len() {
                on |= reachable[j];
                next[j] = on;
                if pc == '%' && delimiter.is_some() && n.get(j).copied() == delimiter {
                    on = false;
                }
            }
        } else {
            for j in 0..n.len() {
                next[j + 1] = reachable[j] && n[j] == pc;
            }
        }
        reachable = next;
    }
    reachable[n.len()]
}

/// The characters of `s`, with a leading INBOX upper-cased.
fn inbox_upper(s: &str, delimiter: Option<char>, wildcards: bool) -> Vec<char> {
    let mut chars: Vec<char> = s.chars().collect();
    let boundary = |c: Option<&char>| match c {
        None => true,
        Some(&c) => Some(c) == delimiter || (wildcards && (c == '*' || c == '%')),
    };
    if chars.len() >= 5 && chars[..5].iter().collect::<String>().eq_ignore_ascii_case("inbox") && boundary(chars.get(5))
    {
        for c in &mut chars[..5] {
            *c = c.to_ascii_uppercase();
        }
    }
    chars
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_examples() {
        // RFC 3501 §5.1.3.
        let name = "~peter/mail/\u{65e5}\u{672c}\u{8a9e}/\u{53f0}\u{5317}";
        assert_eq!(encode(name), "~peter/mail/&ZeVnLIqe-/&U,BTFw-");
        assert_eq!(decode(b"~peter/mail/&ZeVnLIqe-/&U,BTFw-").unwrap(), name);
        assert_eq!(encode("Tom & Jerry"), "Tom &- Jerry");
        assert_eq!(decode(b"Tom &- Jerry").unwrap(), "Tom & Jerry");
        assert_eq!(encode("Entw\u{fc}rfe"), "Entw&APw-rfe");
        assert_eq!(decode(b"&AOk-t&AOk-").unwrap(), "\u{e9}t\u{e9}");
        // Outside the BMP: a surrogate pair.
        assert_eq!(decode(encode("\u{1f600}").as_bytes()).unwrap(), "\u{1f600}");
        assert_eq!(encode("a\tb"), "a&AAk-b");
    }

    #[test]
    fn rejects_invalid_encodings() {
        for bad in [
            &b"&"[..],
            b"&ZeVnLIqe",
            b"&U,BTFw-&ZeVnLIqe-", // null shift
            b"&AGE-",              // "a" must stand for itself
            b"&U,BTFx-",           // non-zero padding bits
            b"&ZeVn-",             // partial code unit
            b"&2D0-",              // lone high surrogate
            b"&Ze/-",              // '/' is not in the modified alphabet
            b"caf\xc3\xa9",
            b"tab\there",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn mailbox_names() {
        assert_eq!(decode_mailbox(b"inBox", false).unwrap(), "INBOX");
        assert_eq!(decode_mailbox(b"inbox/Sub", false).unwrap(), "inbox/Sub");
        assert_eq!(decode_mailbox(b"Entw&APw-rfe", false).unwrap(), "Entw\u{fc}rfe");
        assert_eq!(decode_mailbox(b"Entw&APw-rfe", true).unwrap(), "Entw&APw-rfe");
        assert_eq!(decode_mailbox("Entwürfe".as_bytes(), false).unwrap(), "Entwürfe");
        assert!(decode_mailbox(b"\xff", true).is_err());
        assert_eq!(encode_mailbox("Entwürfe", false), "Entw&APw-rfe");
        assert_eq!(encode_mailbox("Entwürfe", true), "Entwürfe");
    }

    proptest! {
        #[test]
        fn round_trip(name in "\\PC*") {
            let encoded = encode(&name);
            prop_assert!(encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            prop_assert_eq!(decode(encoded.as_bytes()).unwrap(), name);
        }

        #[test]
        fn round_trip_any_chars(chars in proptest::collection::vec(any::<char>(), 0..20)) {
            let name: String = chars.into_iter().collect();
            prop_assert_eq!(decode(encode(&name).as_bytes()).unwrap(), name);
        }

        #[test]
        fn decode_is_canonical(bytes in proptest::collection::vec(prop_oneof![Just(b'&'), Just(b'-'), Just(b'A'), Just(b','), 0x20u8..0x7f], 0..24)) {
            // Whatever decodes re-encodes to the same bytes.
            if let Ok(name) = decode(&bytes) {
                prop_assert_eq!(encode(&name).into_bytes(), bytes);
            }
        }
    }
}
