//! Comparators (RFC 4790: i;octet, i;ascii-casemap, i;ascii-numeric) and
//! match types (RFC 5228 §2.7.1, RFC 5231 relational). `:matches` records
//! what each wildcard matched for `${1}`... (RFC 5229 §3.2); every step of
//! its backtracking is charged to the run's budget.

use std::cmp::Ordering;

use super::program::{Comparator, MatchKind, RelOp};

/// Whether `value` matches `key` (not for `:count`, which compares how
/// many values there are, see [`count_matches`]). `captures` receives the
/// match variables of a successful `:matches`.
pub fn matches(
    comparator: Comparator,
    kind: MatchKind,
    value: &str,
    key: &str,
    captures: &mut Vec<String>,
    steps: &mut u64,
) -> bool {
    *steps += 1;
    match kind {
        MatchKind::Is => compare(comparator, value, key) == Some(Ordering::Equal),
        MatchKind::Contains => match comparator {
            Comparator::Octet => value.contains(key),
            _ => value.to_ascii_lowercase().contains(&key.to_ascii_lowercase()),
        },
        MatchKind::Matches => glob(comparator, value, key, captures, steps),
        MatchKind::Value(op) => compare(comparator, value, key).is_some_and(|o| holds(op, o)),
        MatchKind::Count(_) => false,
    }
}

/// RFC 5231 §4.2: the number of values, compared with the key.
pub fn count_matches(comparator: Comparator, op: RelOp, count: usize, key: &str) -> bool {
    compare(comparator, &count.to_string(), key).is_some_and(|o| holds(op, o))
}

fn holds(op: RelOp, o: Ordering) -> bool {
    match op {
        RelOp::Gt => o == Ordering::Greater,
        RelOp::Ge => o != Ordering::Less,
        RelOp::Lt => o == Ordering::Less,
        RelOp::Le => o != Ordering::Greater,
        RelOp::Eq => o == Ordering::Equal,
        RelOp::Ne => o != Ordering::Equal,
    }
}

/// The comparator's order; `None` never happens today but leaves room
/// for comparators without one.
fn compare(comparator: Comparator, a: &str, b: &str) -> Option<Ordering> {
    Some(match comparator {
        Comparator::Octet => a.as_bytes().cmp(b.as_bytes()),
        Comparator::AsciiCasemap => a.to_ascii_lowercase().as_bytes().cmp(b.to_ascii_lowercase().as_bytes()),
        Comparator::AsciiNumeric => numeric(a).cmp_inf(&numeric(b)),
    })
}

/// RFC 4790 §9.1.1: the leading digits' value; a string that does not
/// start with a digit is positive infinity (`None`).
struct Numeric(Option<String>);

fn numeric(s: &str) -> Numeric {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return Numeric(None);
    }
    let trimmed = digits.trim_start_matches('0');
    Numeric(Some(if trimmed.is_empty() {
        "0".into()
    } else {
        trimmed.to_string()
    }))
}

impl Numeric {
    fn cmp_inf(&self, other: &Numeric) -> Ordering {
        match (&self.0, &other.0) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(a), Some(b)) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Tok {
    Char(char),
    One,
    Any,
}

fn tokens(pattern: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        out.push(match c {
            '\\' => match it.next() {
                Some(n) => Tok::Char(n),
                None => break,
            },
            '?' => Tok::One,
            '*' => Tok::Any,
            c => Tok::Char(c),
        });
    }
    out
}

/// `*` and `?` matching; on success `captures` holds the whole value then
/// each wildcard's text, in order.
fn glob(comparator: Comparator, value: &str, pattern: &str, captures: &mut Vec<String>, steps: &mut u64) -> bool {
    let fold = comparator != Comparator::Octet;
    let v: Vec<char> = value.chars().collect();
    let p = tokens(pattern);
    let mut spans = Vec::new();
    if !glob_at(&p, &v, fold, &mut spans, steps) {
        return false;
    }
    captures.clear();
    captures.push(value.to_string());
    captures.extend(spans.into_iter().map(|(s, e)| v[s..e].iter().collect::<String>()));
    true
}

/// Backtracking match; each `*` takes as few characters as it can (RFC
/// 5229 §3.2 leaves the split open; this is what sieve-test does).
fn glob_at(p: &[Tok], v: &[char], fold: bool, spans: &mut Vec<(usize, usize)>, steps: &mut u64) -> bool {
    fn go(p: &[Tok], v: &[char], at: usize, fold: bool, spans: &mut Vec<(usize, usize)>, steps: &mut u64) -> bool {
        *steps += 1;
        let Some((first, rest)) = p.split_first() else {
            return at == v.len();
        };
        match first {
            Tok::Char(c) => {
                let same = v
                    .get(at)
                    .is_some_and(|x| if fold { x.eq_ignore_ascii_case(c) } else { x == c });
                same && go(rest, v, at + 1, fold, spans, steps)
            }
            Tok::One => {
                if at >= v.len() {
                    return false;
                }
                spans.push((at, at + 1));
                if go(rest, v, at + 1, fold, spans, steps) {
                    return true;
                }
                spans.pop();
                false
            }
            Tok::Any => {
                for end in at..=v.len() {
                    if *steps > super::interp::STEPS_MAX {
                        return false;
                    }
                    spans.push((at, end));
                    if go(rest, v, end, fold, spans, steps) {
                        return true;
                    }
                    spans.pop();
                }
                false
            }
        }
    }
    // Spans are pushed in pattern order only along the successful path.
    let ok = go(p, v, 0, fold, spans, steps);
    spans.sort_by_key(|s| s.0);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(c: Comparator, k: MatchKind, v: &str, key: &str) -> bool {
        matches(c, k, v, key, &mut Vec::new(), &mut 0)
    }

    #[test]
    fn comparators_and_match_types() {
        use Comparator::*;
        assert!(m(AsciiCasemap, MatchKind::Is, "Hello", "hello"));
        assert!(!m(Octet, MatchKind::Is, "Hello", "hello"));
        assert!(m(AsciiCasemap, MatchKind::Contains, "Hello World", "O w"));
        assert!(m(AsciiNumeric, MatchKind::Is, "007", "7"));
        assert!(m(AsciiNumeric, MatchKind::Value(RelOp::Gt), "abc", "99999"));
        assert!(!m(AsciiNumeric, MatchKind::Value(RelOp::Lt), "10", "9a"));
        assert!(m(AsciiCasemap, MatchKind::Matches, "foo.BAR", "*.bar"));
        assert!(m(Octet, MatchKind::Matches, "a*b", "a\\*?"));
        assert!(count_matches(AsciiNumeric, RelOp::Ge, 3, "2"));
    }

    #[test]
    fn wildcards_capture_in_order() {
        let mut caps = Vec::new();
        assert!(matches(
            Comparator::AsciiCasemap,
            MatchKind::Matches,
            "abcdef",
            "a*c?e*",
            &mut caps,
            &mut 0
        ));
        assert_eq!(caps, vec!["abcdef", "b", "d", "f"]);
    }
}
