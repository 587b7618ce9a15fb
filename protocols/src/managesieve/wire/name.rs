//! Script names (RFC 5804 §1.6): UTF-8 (Net-Unicode), without control
//! characters or the line and paragraph separators, and within what the
//! store keeps (no `/`, at most 512 bytes: `storage::model::sieve`).
//! JMAP's SieveScript names (RFC 9661) are checked here too.

/// The store's limit on a name, in bytes.
pub use meshmail_storage::model::sieve::NAME_BYTES_MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("empty")]
    Empty,
    #[error("longer than {NAME_BYTES_MAX} bytes")]
    TooLong,
    #[error("not UTF-8")]
    NotUtf8,
    #[error("control characters, line separators and '/' are not allowed")]
    Forbidden,
}

/// The name `raw` spells, or why it is refused.
pub fn script_name(raw: &[u8]) -> Result<String, NameError> {
    if raw.is_empty() {
        return Err(NameError::Empty);
    }
    if raw.len() > NAME_BYTES_MAX {
        return Err(NameError::TooLong);
    }
    let s = std::str::from_utf8(raw).map_err(|_| NameError::NotUtf8)?;
    // RFC 5804 §1.6: 0000-001F, 007F, 0080-009F, 2028, 2029; '/' is the
    // store's (and Dovecot's) own refusal.
    let forbidden = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '/');
    if s.chars().any(forbidden) {
        return Err(NameError::Forbidden);
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc_5804_1_6() {
        assert_eq!(script_name("vacation été".as_bytes()), Ok("vacation été".into()));
        assert_eq!(script_name(b""), Err(NameError::Empty));
        assert_eq!(script_name(b"a\xffb"), Err(NameError::NotUtf8));
        assert_eq!(script_name(b"a\tb"), Err(NameError::Forbidden));
        assert_eq!(script_name("a\u{2028}".as_bytes()), Err(NameError::Forbidden));
        assert_eq!(script_name("a\u{85}".as_bytes()), Err(NameError::Forbidden));
        assert_eq!(script_name(b"a/b"), Err(NameError::Forbidden));
        assert_eq!(script_name(&[b'x'; NAME_BYTES_MAX + 1]), Err(NameError::TooLong));
        assert!(script_name("é".repeat(128).as_bytes()).is_ok(), "128 characters fit");
    }
}
