//! The Sender Rewriting Scheme (SRS0, as in Shevek's and libsrs2's
//! description) for forwarded mail.
//!
//! An alias that forwards `x@sender.example`'s message to a remote address
//! cannot send it with the original envelope sender: the remote MX checks
//! SPF against `sender.example`, which never allowed our addresses. So the
//! forwarded copy leaves with
//!
//! ```text
//! SRS0=HHHH=TT=sender.example=x@our.domain
//! ```
//!
//! where TT is the day (base32, mod 1024) and HHHH a keyed hash of the rest.
//! A bounce sent back to that address is accepted at RCPT only when the
//! hash verifies and the address is at most [`MAX_AGE_DAYS`] old, and is
//! routed to the original sender: the domain's SPF passes and nobody can
//! use us as an open relay by forging SRS addresses.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How long a rewritten address accepts bounces.
pub const MAX_AGE_DAYS: u32 = 21;
const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
/// Hash characters kept (base64, 24 bits).
const HASH_LEN: usize = 4;

/// Days since the Unix epoch, the clock SRS timestamps count in.
pub fn today() -> u32 {
    (meshmail_storage::model::now_ms() / 86_400_000) as u32
}

fn stamp(day: u32) -> String {
    let t = day % 1024;
    let mut s = String::with_capacity(2);
    s.push(BASE32[(t >> 5) as usize] as char);
    s.push(BASE32[(t & 31) as usize] as char);
    s
}

fn stamp_value(s: &str) -> Option<u32> {
    let mut v = 0u32;
    if s.len() != 2 {
        return None;
    }
    for c in s.bytes() {
        let d = BASE32.iter().position(|&b| b == c.to_ascii_uppercase())? as u32;
        v = (v << 5) | d;
    }
    Some(v)
}

fn hash(key: &[u8], stamp: &str, domain: &str, local: &str) -> String {
    use base64::Engine;
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    // Case-insensitive: MTAs on the way may change the case of the address.
    for part in [stamp, domain, local] {
        mac.update(part.to_ascii_lowercase().as_bytes());
        mac.update(b"\0");
    }
    let tag = mac.finalize().into_bytes();
    let mut s = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&tag[..3]);
    s.truncate(HASH_LEN);
    s
}

/// The envelope sender for a copy of `sender`'s mail forwarded by one of
/// our domains (`srs_domain`). `<>` stays `<>`; an address that already is
/// SRS is rewritten again (SRS0 of SRS0 is valid, if long).
pub fn forward(key: &[u8], sender: &str, srs_domain: &str, day: u32) -> String {
    let Some((local, domain)) = sender.rsplit_once('@') else {
        return String::new();
    };
    let tt = stamp(day);
    let hh = hash(key, &tt, domain, local);
    format!("SRS0={hh}={tt}={domain}={local}@{srs_domain}")
}

/// Whether a local part (or an address, which starts with it) is an SRS0
/// address, in any case.
pub fn is_srs0(local_part: &str) -> bool {
    local_part.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("srs0="))
}

/// The original sender behind an SRS0 local part, if its hash verifies and
/// it is recent; `None` for anything else (the caller answers 550).
pub fn reverse(key: &[u8], local_part: &str, day: u32) -> Option<String> {
    let rest = local_part
        .strip_prefix("SRS0=")
        .or_else(|| local_part.strip_prefix("srs0="))?;
    // HHHH=TT=domain=local; the original local part may itself contain '='.
    let mut parts = rest.splitn(4, '=');
    let (hh, tt, domain, local) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if domain.is_empty() || local.is_empty() {
        return None;
    }
    let expected = hash(key, tt, domain, local);
    // Compared in constant time, and without case like libsrs2: MTAs on
    // the way may lower-case the local part (base64 loses a little entropy).
    let ok = hh.len() == expected.len()
        && hh.bytes().zip(expected.bytes()).fold(0u8, |acc, (a, b)| {
            acc | (a.to_ascii_lowercase() ^ b.to_ascii_lowercase())
        }) == 0;
    if !ok {
        return None;
    }
    let then = stamp_value(tt)?;
    let age = (day % 1024 + 1024 - then) % 1024;
    (age <= MAX_AGE_DAYS).then(|| format!("{local}@{domain}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn round_trip_and_case_insensitive() {
        let day = 20_500;
        let a = forward(KEY, "x.y@sender.example", "fwd.example", day);
        assert!(
            a.starts_with("SRS0=") && a.ends_with("=sender.example=x.y@fwd.example"),
            "{a}"
        );
        let local = a.rsplit_once('@').unwrap().0;
        assert_eq!(reverse(KEY, local, day).as_deref(), Some("x.y@sender.example"));
        assert_eq!(
            reverse(KEY, &local.to_ascii_lowercase(), day + 3).as_deref(),
            Some("x.y@sender.example")
        );
    }

    #[test]
    fn forged_old_or_malformed_addresses_are_refused() {
        let day = 20_500;
        let a = forward(KEY, "x@sender.example", "fwd.example", day);
        let local = a.rsplit_once('@').unwrap().0;
        assert_eq!(reverse(b"another key", local, day), None, "wrong key");
        assert_eq!(reverse(KEY, local, day + MAX_AGE_DAYS + 1), None, "too old");
        let forged = local.replace("sender.example", "victim.example");
        assert_eq!(reverse(KEY, &forged, day), None, "changed domain");
        for bad in [
            "SRS0=",
            "SRS0=abcd",
            "SRS0=abcd=AA=",
            "plain",
            "SRS0=====",
            "SRS0=ab=cd=e=f",
        ] {
            assert_eq!(reverse(KEY, bad, day), None, "{bad}");
        }
    }

    #[test]
    fn the_day_wraps_at_1024() {
        let a = forward(KEY, "x@s.example", "f.example", 1023);
        let local = a.rsplit_once('@').unwrap().0;
        assert_eq!(reverse(KEY, local, 1024 + 5).as_deref(), Some("x@s.example"));
    }
}
