//! Addresses in header values and envelopes: the list parser the
//! `address` test needs (groups, comments, quoted names) and the address
//! parts of RFC 5228 §2.7.4 and RFC 5233 (`+` separates user and detail).

use super::program::AddressPart;

/// The separator of RFC 5233 subaddresses.
pub const DETAIL_SEPARATOR: char = '+';

/// The addr-specs of a header value such as `"A, B" <a@x>, b@y, g: c@z;`.
pub fn parse_list(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut item = String::new();
    let (mut quoted, mut comment, mut angle) = (false, 0usize, false);
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted || comment > 0 => {
                chars.next();
            }
            '"' if comment == 0 => quoted = !quoted,
            '(' if !quoted => comment += 1,
            ')' if !quoted && comment > 0 => comment -= 1,
            _ if quoted || comment > 0 => {}
            '<' => {
                angle = true;
                item.clear();
            }
            '>' if angle => {
                angle = false;
                push_address(&mut out, &item);
                item.clear();
                item.push('\u{0}');
            }
            ':' if !angle => item.clear(),
            ',' | ';' if !angle => {
                push_address(&mut out, &item);
                item.clear();
            }
            _ => item.push(c),
        }
    }
    push_address(&mut out, &item);
    out
}

fn push_address(out: &mut Vec<String>, item: &str) {
    if item.starts_with('\u{0}') {
        return; // Already taken from <...>.
    }
    let a: String = item.split_whitespace().collect::<Vec<_>>().join("");
    if !a.is_empty() {
        out.push(a);
    }
}

/// One address (`a@b`, `<a@b>`, `Name <a@b>`), for redirect targets.
pub fn parse_single(s: &str) -> Option<String> {
    let list = parse_list(s);
    let [a] = list.as_slice() else { return None };
    let (local, domain) = a.rsplit_once('@')?;
    if local.is_empty() || domain.is_empty() || domain.contains(['<', '>', '@', ' ']) {
        return None;
    }
    Some(a.clone())
}

/// `user+detail@domain` without its detail.
pub fn without_detail(addr: &str) -> String {
    match addr.rsplit_once('@') {
        Some((local, domain)) => {
            let user = local.split_once(DETAIL_SEPARATOR).map_or(local, |(u, _)| u);
            format!("{user}@{domain}")
        }
        None => addr.to_string(),
    }
}

/// The part of `addr` a test compares; `None` when it has none (a
/// `:detail` of an address without a separator fails to match).
pub fn part(addr: &str, part: AddressPart) -> Option<String> {
    let (local, domain) = match addr.rsplit_once('@') {
        Some((l, d)) => (l, d),
        None => (addr, ""),
    };
    Some(match part {
        AddressPart::All => addr.to_string(),
        AddressPart::LocalPart => local.to_string(),
        AddressPart::Domain => domain.to_string(),
        AddressPart::User => local.split_once(DETAIL_SEPARATOR).map_or(local, |(u, _)| u).to_string(),
        AddressPart::Detail => local.split_once(DETAIL_SEPARATOR)?.1.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_groups_and_names() {
        assert_eq!(
            parse_list("\"Doe, J\" <j@x.test>, b@y.test (Bob), team: c@z.test, d@z.test;"),
            vec!["j@x.test", "b@y.test", "c@z.test", "d@z.test"]
        );
        assert_eq!(parse_single("Ann <a+tag@x.test>").as_deref(), Some("a+tag@x.test"));
        assert_eq!(parse_single("not an address"), None);
        assert_eq!(part("a+b+c@x", AddressPart::Detail).as_deref(), Some("b+c"));
        assert_eq!(part("a@x", AddressPart::Detail), None);
        assert_eq!(without_detail("a+b@x"), "a@x");
    }
}
