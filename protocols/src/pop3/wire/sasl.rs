//! SASL PLAIN for POP3 AUTH (RFC 5034 over RFC 4616): the base64 of
//! `authzid NUL authcid NUL password`, `=` for an empty initial response,
//! `*` to cancel.

use base64::Engine;

/// Longest SASL response line accepted, CRLF excluded: RFC 5034 §4 lets a
/// continuation exceed RFC 2449's 255 octets; PLAIN needs well under this
/// for any sane name and password.
pub const SASL_LINE_MAX: usize = 8 * 1024;

/// The identities and password of a PLAIN response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plain {
    pub authzid: String,
    pub authcid: String,
    pub password: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    #[error("Authentication cancelled")]
    Cancelled,
    #[error("Invalid base64 data")]
    NotBase64,
    #[error("Malformed PLAIN response")]
    Malformed,
}

/// Decodes one client response (initial or continuation) as PLAIN.
pub fn decode_plain(line: &[u8]) -> Result<Plain, SaslError> {
    let line = line.trim_ascii();
    if line == b"*" {
        return Err(SaslError::Cancelled);
    }
    let raw = if line == b"=" {
        Vec::new()
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(line)
            .map_err(|_| SaslError::NotBase64)?
    };
    let parts: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
    let [authz, authc, pass] = parts.as_slice() else {
        return Err(SaslError::Malformed);
    };
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| SaslError::Malformed);
    let plain = Plain {
        authzid: text(authz)?,
        authcid: text(authc)?,
        password: text(pass)?,
    };
    if plain.authcid.is_empty() {
        return Err(SaslError::Malformed);
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &[u8]) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD.encode(s).into_bytes()
    }

    #[test]
    fn plain_decodes_and_refuses_bad_input() {
        let p = decode_plain(&b64(b"\0alice@example.org\0pass word")).unwrap();
        assert_eq!(
            (p.authzid.as_str(), p.authcid.as_str(), p.password.as_str()),
            ("", "alice@example.org", "pass word")
        );
        assert_eq!(decode_plain(b"*"), Err(SaslError::Cancelled));
        assert_eq!(decode_plain(b"=="), Err(SaslError::NotBase64));
        assert_eq!(decode_plain(b"not base64!"), Err(SaslError::NotBase64));
        assert_eq!(decode_plain(b"="), Err(SaslError::Malformed));
        assert_eq!(decode_plain(&b64(b"alice\0secret")), Err(SaslError::Malformed));
        assert_eq!(decode_plain(&b64(b"\0\0secret")), Err(SaslError::Malformed));
        assert_eq!(decode_plain(&b64(b"\0al\xffice\0secret")), Err(SaslError::Malformed));
    }
}
