//! RFC 5229: `${name}` and `${N}` expansion, `set`'s modifiers, and the
//! limits on what a variable may hold.

use std::collections::HashMap;

use super::program::Modifier;

/// A variable's value is cut at this many bytes (on a char boundary).
pub const VALUE_BYTES_MAX: usize = 4096;
/// Variables per scope.
pub const VARIABLES_MAX: usize = 256;

/// identifier *("." identifier), RFC 5229 §3's variable-name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            let mut c = part.chars();
            c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        })
}

/// Where names are looked up while expanding.
pub struct Scope<'a> {
    pub locals: &'a HashMap<String, String>,
    pub globals: &'a HashMap<String, String>,
    pub declared_global: &'a std::collections::HashSet<String>,
    pub matches: &'a [String],
}

impl Scope<'_> {
    pub fn get(&self, name: &str) -> Option<&str> {
        let lower = name.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("global.") {
            return self.globals.get(rest).map(String::as_str);
        }
        if self.declared_global.contains(&lower) {
            return self.globals.get(&lower).map(String::as_str);
        }
        self.locals.get(&lower).map(String::as_str)
    }
}

/// Replaces each well-formed `${...}` (RFC 5229 §3); unknown names are
/// empty, malformed references stay as written.
pub fn expand(text: &str, scope: &Scope<'_>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let name = &after[..end];
        if name.bytes().all(|b| b.is_ascii_digit()) && !name.is_empty() {
            let n: usize = name.parse().unwrap_or(usize::MAX);
            out.push_str(scope.matches.get(n).map(String::as_str).unwrap_or(""));
            rest = &after[end + 1..];
        } else if valid_name(name) {
            out.push_str(scope.get(name).unwrap_or(""));
            rest = &after[end + 1..];
        } else {
            out.push_str("${");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `set`'s modifiers, in their precedence order (RFC 5229 §4).
pub fn apply(mut value: String, modifiers: &[Modifier]) -> String {
    for m in modifiers {
        value = match m {
            Modifier::Lower => value.to_ascii_lowercase(),
            Modifier::Upper => value.to_ascii_uppercase(),
            Modifier::LowerFirst => first_with(&value, |c| c.to_ascii_lowercase()),
            Modifier::UpperFirst => first_with(&value, |c| c.to_ascii_uppercase()),
            Modifier::QuoteWildcard => value.chars().fold(String::new(), |mut s, c| {
                if matches!(c, '*' | '?' | '\\') {
                    s.push('\\');
                }
                s.push(c);
                s
            }),
            Modifier::Length => value.chars().count().to_string(),
        };
    }
    value
}

fn first_with(s: &str, f: impl Fn(char) -> char) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => std::iter::once(f(first)).chain(c).collect(),
        None => String::new(),
    }
}

/// Cuts a value to [`VALUE_BYTES_MAX`] on a character boundary.
pub fn bounded(mut v: String) -> String {
    if v.len() > VALUE_BYTES_MAX {
        let mut at = VALUE_BYTES_MAX;
        while !v.is_char_boundary(at) {
            at -= 1;
        }
        v.truncate(at);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_and_modifiers() {
        let mut locals = HashMap::new();
        locals.insert("a".to_string(), "x".to_string());
        let empty = HashMap::new();
        let declared = Default::default();
        let matches = vec!["all".to_string(), "one".to_string()];
        let scope = Scope {
            locals: &locals,
            globals: &empty,
            declared_global: &declared,
            matches: &matches,
        };
        assert_eq!(
            expand("[${A}|${1}|${2}|${nope}|${b-c}|${", &scope),
            "[x|one|||${b-c}|${"
        );
        assert_eq!(apply("hello World".into(), &[Modifier::UpperFirst]), "Hello World");
        assert_eq!(apply("a*b".into(), &[Modifier::QuoteWildcard, Modifier::Length]), "4");
        assert!(valid_name("foo.bar_1") && !valid_name("1x") && !valid_name("a..b"));
    }
}
