//! IMAP flags as the two file formats carry them.
//!
//! Maildir (the spec's "info" after `:2,`, letters in ASCII order): `D`
//! \Draft, `F` \Flagged, `P` passed (kept as the keyword `$Forwarded`, the
//! one clients set for it), `R` \Answered, `S` \Seen, `T` \Deleted, then
//! lowercase letters for keywords, `a` = the folder's first keyword in
//! Dovecot's `dovecot-keywords` file (see `maildir`).
//!
//! mbox (the mutt / Dovecot / UW convention): `Status:` holds `R` for
//! \Seen and `O` (seen by a client before, i.e. not new; always written);
//! `X-Status:` holds `A` \Answered, `F` \Flagged, `T` \Draft and `D`
//! \Deleted; `X-Keywords:` the keywords, separated by spaces.

/// The system flags a maildir file name carries, by letter, in ASCII order.
const MAILDIR_SYSTEM: [(char, &str); 6] = [
    ('D', "\\Draft"),
    ('F', "\\Flagged"),
    ('P', "$Forwarded"),
    ('R', "\\Answered"),
    ('S', "\\Seen"),
    ('T', "\\Deleted"),
];

/// `X-Status:` letters (mbox), in the order written.
const X_STATUS: [(char, &str); 4] = [
    ('A', "\\Answered"),
    ('F', "\\Flagged"),
    ('T', "\\Draft"),
    ('D', "\\Deleted"),
];

fn has(flags: &[String], flag: &str) -> bool {
    flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
}

/// True for a keyword (not a system flag); `\Recent` and other backslash
/// flags are no keyword and are never written.
fn is_keyword(flag: &str) -> bool {
    !flag.starts_with('\\')
}

/// The info part of a maildir file name (`2,` and the letters) for
/// `flags`; `letter` gives a keyword's letter (None: the folder has no
/// room for it, and it is left out).
pub fn maildir_info(flags: &[String], mut letter: impl FnMut(&str) -> Option<char>) -> String {
    let mut letters: Vec<char> = MAILDIR_SYSTEM
        .iter()
        .filter(|(_, f)| has(flags, f))
        .map(|(c, _)| *c)
        .collect();
    for f in flags
        .iter()
        .filter(|f| is_keyword(f) && !f.eq_ignore_ascii_case("$Forwarded"))
    {
        letters.extend(letter(f));
    }
    letters.sort_unstable();
    letters.dedup();
    let mut out = String::from("2,");
    out.extend(letters);
    out
}

/// The flags a maildir info part (`2,FRSa`) names; `keyword` turns a
/// lowercase letter into its keyword. An unknown letter is dropped.
pub fn from_maildir_info(info: &str, keyword: impl Fn(char) -> Option<String>) -> Vec<String> {
    let Some(letters) = info.strip_prefix("2,") else {
        return Vec::new();
    };
    let mut flags = Vec::new();
    for c in letters.chars() {
        if let Some((_, f)) = MAILDIR_SYSTEM.iter().find(|(l, _)| *l == c) {
            flags.push((*f).to_string());
        } else if c.is_ascii_lowercase()
            && let Some(k) = keyword(c)
        {
            flags.push(k);
        }
    }
    flags
}

/// The values of `Status:`, `X-Status:` and `X-Keywords:` for `flags`
/// (`X-Status:` and `X-Keywords:` None when empty).
pub fn mbox_headers(flags: &[String]) -> (String, Option<String>, Option<String>) {
    let status = if has(flags, "\\Seen") { "RO" } else { "O" }.to_string();
    let x: String = X_STATUS
        .iter()
        .filter(|(_, f)| has(flags, f))
        .map(|(c, _)| *c)
        .collect();
    let keywords: Vec<&str> = flags.iter().filter(|f| is_keyword(f)).map(String::as_str).collect();
    (
        status,
        (!x.is_empty()).then_some(x),
        (!keywords.is_empty()).then(|| keywords.join(" ")),
    )
}

/// The flags named by an mbox message's `Status:`, `X-Status:` and
/// `X-Keywords:` values (each may be absent). Keywords may be separated by
/// spaces or commas (both are seen in the wild).
pub fn from_mbox_headers(status: Option<&str>, x_status: Option<&str>, x_keywords: Option<&str>) -> Vec<String> {
    let mut flags = Vec::new();
    if status.is_some_and(|s| s.contains('R')) {
        flags.push("\\Seen".to_string());
    }
    for (c, f) in X_STATUS {
        if x_status.is_some_and(|s| s.contains(c)) {
            flags.push(f.to_string());
        }
    }
    for k in x_keywords
        .unwrap_or("")
        .split([' ', ',', '\t'])
        .filter(|k| !k.is_empty())
    {
        if !flags.iter().any(|f| f.eq_ignore_ascii_case(k)) {
            flags.push(k.to_string());
        }
    }
    flags
}

/// `flags` in one order (system flags, then keywords, each sorted), to
/// compare sets.
pub fn canonical(flags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = flags
        .iter()
        .filter(|f| !f.eq_ignore_ascii_case("\\Recent"))
        .cloned()
        .collect();
    out.sort_by_key(|f| (is_keyword(f), f.to_ascii_lowercase()));
    out.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(flags: &[&str]) -> Vec<String> {
        flags.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn maildir_letters_are_sorted_and_read_back() {
        let flags = v(&[
            "\\Seen",
            "\\Deleted",
            "$Label1",
            "\\Answered",
            "\\Draft",
            "\\Flagged",
            "work",
        ]);
        let table = ["$Label1", "work"];
        let info = maildir_info(&flags, |k| {
            table.iter().position(|t| t == &k).map(|i| (b'a' + i as u8) as char)
        });
        assert_eq!(info, "2,DFRSTab");
        let back = from_maildir_info(&info, |c| table.get((c as u8 - b'a') as usize).map(|s| s.to_string()));
        assert_eq!(canonical(&back), canonical(&flags));
        assert_eq!(from_maildir_info("2,", |_| None), Vec::<String>::new());
        assert_eq!(from_maildir_info("1,experimental", |_| None), Vec::<String>::new());
    }

    #[test]
    fn a_keyword_without_a_letter_is_left_out() {
        assert_eq!(maildir_info(&v(&["\\Seen", "k"]), |_| None), "2,S");
        assert_eq!(maildir_info(&v(&["$Forwarded"]), |_| Some('a')), "2,P");
    }

    #[test]
    fn mbox_status_headers_round_trip() {
        let flags = v(&[
            "\\Seen",
            "\\Answered",
            "\\Flagged",
            "\\Deleted",
            "\\Draft",
            "$Label1",
            "x",
        ]);
        let (s, x, k) = mbox_headers(&flags);
        assert_eq!(
            (s.as_str(), x.as_deref(), k.as_deref()),
            ("RO", Some("AFTD"), Some("$Label1 x"))
        );
        let back = from_mbox_headers(Some(&s), x.as_deref(), k.as_deref());
        assert_eq!(canonical(&back), canonical(&flags));
        assert_eq!(mbox_headers(&[]), ("O".to_string(), None, None));
        assert!(from_mbox_headers(Some("O"), None, None).is_empty());
        assert_eq!(from_mbox_headers(None, None, Some("a, b")), v(&["a", "b"]));
    }
}
