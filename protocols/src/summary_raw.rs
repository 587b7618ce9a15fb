//! Header values read as written, for the parts of IMAP's ENVELOPE and
//! BODYSTRUCTURE that must not be decoded: display names keep their
//! encoded words and 8-bit bytes (RFC 3501 §7.4.2 sends header text
//! undecoded; a client decodes it), comments are not names, and MIME
//! parameters keep their RFC 2231 form (`filename*=utf-8''...`) instead
//! of being decoded into 8-bit strings a rev1 client cannot take.
//!
//! mail-parser still decides the message's structure; this module only
//! reads the text of an address or Content-Type header again.

/// One IMAP address structure from a raw address header: group markers
/// (`mailbox` = group name, no host) and their end markers (all None)
/// included, as RFC 3501 §7.4.2 lays them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAddress {
    /// The display name as written (quoted strings unquoted, words joined
    /// by one space, encoded words kept); the comment when there is no
    /// phrase.
    pub name: Option<String>,
    pub adl: Option<String>,
    pub mailbox: Option<String>,
    pub host: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Comment(String),
    Special(char),
}

/// RFC 5322 lexical tokens of a header value. Unterminated quotes and
/// comments run to the end: a broken header still yields what it has.
fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ' ' | '\t' | '\r' | '\n' => {
                chars.next();
            }
            '"' => {
                chars.next();
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => s.extend(chars.next()),
                        '\r' | '\n' => {}
                        c => s.push(c),
                    }
                }
                out.push(Token::Quoted(s));
            }
            '(' => {
                chars.next();
                let (mut depth, mut s) = (1, String::new());
                while let Some(c) = chars.next() {
                    match c {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        '\\' => {
                            s.extend(chars.next());
                            continue;
                        }
                        _ => {}
                    }
                    s.push(c);
                }
                out.push(Token::Comment(s.trim().to_string()));
            }
            '<' | '>' | '@' | ',' | ';' | ':' => {
                chars.next();
                out.push(Token::Special(c));
            }
            _ => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if matches!(
                        c,
                        ' ' | '\t' | '\r' | '\n' | '"' | '(' | '<' | '>' | '@' | ',' | ';' | ':'
                    ) {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                out.push(Token::Word(s));
            }
        }
    }
    out
}

fn phrase(words: &[Token]) -> Option<String> {
    let parts: Vec<&str> = words
        .iter()
        .filter_map(|t| match t {
            Token::Word(w) | Token::Quoted(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn last_comment(words: &[Token]) -> Option<String> {
    words.iter().rev().find_map(|t| match t {
        Token::Comment(c) if !c.is_empty() => Some(c.clone()),
        _ => None,
    })
}

/// `local@domain` from the tokens of an addr-spec (comments dropped).
fn addr_spec(toks: &[Token]) -> (Option<String>, Option<String>) {
    let mut local = String::new();
    let mut domain = String::new();
    let mut seen_at = false;
    for t in toks {
        let target = if seen_at { &mut domain } else { &mut local };
        match t {
            Token::Special('@') if !seen_at => seen_at = true,
            Token::Word(w) => target.push_str(w),
            Token::Quoted(q) if !seen_at => {
                target.push('"');
                target.push_str(q);
                target.push('"');
            }
            Token::Quoted(q) => target.push_str(q),
            Token::Special(c) => target.push(*c),
            Token::Comment(_) => {}
        }
    }
    (
        (!local.is_empty()).then_some(local),
        (seen_at && !domain.is_empty()).then_some(domain),
    )
}

/// One mailbox (`name <addr>`, `addr (comment)`, `<addr>`) from its tokens.
fn mailbox(toks: &[Token]) -> Option<RawAddress> {
    if toks.iter().all(|t| matches!(t, Token::Comment(_))) {
        return None;
    }
    let (name, spec) = match toks.iter().position(|t| *t == Token::Special('<')) {
        Some(open) => {
            let close = toks[open..]
                .iter()
                .position(|t| *t == Token::Special('>'))
                .map_or(toks.len(), |c| open + c);
            let before = &toks[..open];
            let name = phrase(before).or_else(|| last_comment(&toks[close.min(toks.len())..]));
            (name, &toks[open + 1..close])
        }
        None => (last_comment(toks), toks),
    };
    // An obsolete source route (`@a,@b:user@host`) becomes the adl.
    let (adl, spec) = match spec.iter().position(|t| *t == Token::Special(':')) {
        Some(colon) if spec.first() == Some(&Token::Special('@')) => {
            let route: String = spec[..colon]
                .iter()
                .map(|t| match t {
                    Token::Word(w) => w.clone(),
                    Token::Special(c) => c.to_string(),
                    _ => String::new(),
                })
                .collect();
            (Some(route), &spec[colon + 1..])
        }
        _ => (None, spec),
    };
    let (local, domain) = addr_spec(spec);
    // IMAP reserves a NIL host for group markers, so a broken address gets
    // placeholders, the way Dovecot writes them.
    Some(RawAddress {
        name,
        adl,
        mailbox: Some(local.unwrap_or_else(|| "MISSING_MAILBOX".into())),
        host: Some(domain.unwrap_or_else(|| "MISSING_DOMAIN".into())),
    })
}

/// The IMAP address list of a raw address header value.
pub fn addresses(text: &str) -> Vec<RawAddress> {
    let toks = tokens(text);
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_group = false;
    let mut angle = false;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Token::Special('<') => angle = true,
            Token::Special('>') => angle = false,
            Token::Special(':') if !angle && !in_group => {
                out.push(RawAddress {
                    name: None,
                    adl: None,
                    mailbox: Some(phrase(&toks[start..i]).unwrap_or_default()),
                    host: None,
                });
                in_group = true;
                start = i + 1;
            }
            Token::Special(',') if !angle => {
                out.extend(mailbox(&toks[start..i]));
                start = i + 1;
            }
            Token::Special(';') if in_group && !angle => {
                out.extend(mailbox(&toks[start..i]));
                out.push(RawAddress {
                    name: None,
                    adl: None,
                    mailbox: None,
                    host: None,
                });
                in_group = false;
                start = i + 1;
            }
            _ => {}
        }
    }
    out.extend(mailbox(&toks[start..]));
    if in_group {
        out.push(RawAddress {
            name: None,
            adl: None,
            mailbox: None,
            host: None,
        });
    }
    out
}

/// A Content-Type or Content-Disposition value as written: the value
/// (`text/plain`, `attachment`) and its parameters, RFC 2231 continuations
/// (`name*0`, `name*1`) joined; an extended value keeps its `name*` key and
/// its `charset'lang'%XX` form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawParams {
    pub value: String,
    pub params: Vec<(String, String)>,
}

pub fn params(text: &str) -> RawParams {
    let mut pieces = split_semicolons(text).into_iter();
    let value = pieces.next().map(|v| strip_comments(&v)).unwrap_or_default();
    // (base name, section, extended, value) in order of appearance.
    let mut sections: Vec<(String, u32, bool, String)> = Vec::new();
    for piece in pieces {
        let Some((name, val)) = piece.split_once('=') else {
            continue;
        };
        let name = strip_comments(name);
        let val = unquote(val.trim());
        let (base, extended) = match name.strip_suffix('*') {
            Some(b) => (b.to_string(), true),
            None => (name.clone(), false),
        };
        let (base, section) = match base.rsplit_once('*') {
            Some((b, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => {
                (b.to_string(), n.parse().unwrap_or(0))
            }
            _ => (base, 0),
        };
        if base.is_empty() {
            continue;
        }
        sections.push((base, section, extended, val));
    }
    let mut params: Vec<(String, String)> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for (base, ..) in &sections {
        let key = base.to_ascii_lowercase();
        if done.contains(&key) {
            continue;
        }
        done.push(key.clone());
        let mut parts: Vec<&(String, u32, bool, String)> =
            sections.iter().filter(|s| s.0.to_ascii_lowercase() == key).collect();
        parts.sort_by_key(|s| s.1);
        let extended = parts.iter().any(|s| s.2);
        let joined: String = parts.iter().map(|s| s.3.as_str()).collect();
        let name = if extended { format!("{base}*") } else { base.clone() };
        params.push((name, joined));
    }
    RawParams { value, params }
}

fn split_semicolons(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let (mut quoted, mut escaped, mut depth) = (false, false, 0u32);
    for c in text.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') if depth == 0 => quoted = !quoted,
            (false, _, '(') => depth += 1,
            (false, _, ')') => depth = depth.saturating_sub(1),
            (false, _, ';') if depth == 0 => {
                out.push(String::new());
                continue;
            }
            _ => {}
        }
        out.last_mut().expect("never empty").push(c);
    }
    out
}

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0u32;
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 && !c.is_whitespace() => out.push(c),
            _ => {}
        }
    }
    out
}

fn unquote(v: &str) -> String {
    match v.strip_prefix('"') {
        Some(rest) => {
            let mut out = String::new();
            let mut chars = rest.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => out.extend(chars.next()),
                    c => out.push(c),
                }
            }
            out
        }
        None => strip_comments(v),
    }
}

/// A Date header as seconds since the Unix epoch, read leniently where a
/// strict parser gives up on real mail: a leap second (`23:59:60`), a
/// missing weekday or seconds, two-digit years (RFC 5322 §4.3), obsolete
/// zone names, a trailing comment. None when no day, month and year are
/// found.
pub fn lenient_date(raw: &str) -> Option<i64> {
    let text = raw.split('(').next().unwrap_or_default();
    let after_weekday = text.split_once(',').map_or(text, |(_, rest)| rest);
    let mut words = after_weekday.split_whitespace();
    let day: i64 = words.next()?.parse().ok()?;
    let month = MONTHS.iter().position(|m| {
        words
            .clone()
            .next()
            .is_some_and(|w| w.get(..3).is_some_and(|w| w.eq_ignore_ascii_case(m)))
    })? as i64
        + 1;
    words.next();
    let year_text = words.next()?;
    let year: i64 = year_text.parse().ok()?;
    let year = match year_text.len() {
        1 | 2 if year < 50 => year + 2000,
        1..=3 => year + 1900,
        _ => year,
    };
    let mut secs = 0i64;
    if let Some(time) = words.next() {
        let mut parts = time.split(':').map(|p| p.parse::<i64>().ok());
        let h = parts.next().flatten().unwrap_or(0).clamp(0, 23);
        let m = parts.next().flatten().unwrap_or(0).clamp(0, 59);
        let sec = parts.next().flatten().unwrap_or(0).clamp(0, 59);
        secs = h * 3600 + m * 60 + sec;
    }
    let zone = words.next().map_or(0, zone_offset_secs);
    if !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + secs - zone)
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// `+hhmm`/`-hhmm`, or an RFC 5322 §4.3 obsolete zone name; unknown: 0.
fn zone_offset_secs(z: &str) -> i64 {
    if let Some(sign) = z.chars().next().filter(|c| *c == '+' || *c == '-')
        && z.len() == 5
        && let Ok(n) = z[1..].parse::<i64>()
    {
        let secs = (n / 100) * 3600 + (n % 100) * 60;
        return if sign == '-' { -secs } else { secs };
    }
    let hours = match z.to_ascii_uppercase().as_str() {
        "EDT" => -4,
        "EST" | "CDT" => -5,
        "CST" | "MDT" => -6,
        "MST" | "PDT" => -7,
        "PST" => -8,
        _ => 0,
    };
    hours * 3600
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<(Option<String>, Option<String>, Option<String>)> {
        addresses(text)
            .into_iter()
            .map(|a| (a.name, a.mailbox, a.host))
            .collect()
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn names_stay_as_written_and_comments_are_not_names() {
        assert_eq!(
            names("=?UTF-8?B?SsO2aG4=?= <john@x.example> (a comment)"),
            vec![(s("=?UTF-8?B?SsO2aG4=?="), s("john"), s("x.example"))]
        );
        assert_eq!(
            names("\"O'Brien, Pat\" <pat@x.ie>, bare@x.com"),
            vec![(s("O'Brien, Pat"), s("pat"), s("x.ie")), (None, s("bare"), s("x.com"))]
        );
        assert_eq!(
            names("john@x.com (John Q. Public)"),
            vec![(s("John Q. Public"), s("john"), s("x.com"))]
        );
        assert_eq!(
            names("Rémi Ünicode <r@x.fr>"),
            vec![(s("Rémi Ünicode"), s("r"), s("x.fr"))]
        );
    }

    #[test]
    fn groups_have_markers() {
        assert_eq!(
            names("Team: a@x, b@y;, c@z"),
            vec![
                (None, s("Team"), None),
                (None, s("a"), s("x")),
                (None, s("b"), s("y")),
                (None, None, None),
                (None, s("c"), s("z"))
            ]
        );
        assert_eq!(
            names("undisclosed-recipients:;"),
            vec![(None, s("undisclosed-recipients"), None), (None, None, None)]
        );
    }

    #[test]
    fn lenient_dates() {
        assert_eq!(lenient_date("Thu, 01 Jan 1970 00:00:00 +0000"), Some(0));
        assert_eq!(lenient_date("Fri, 31 Dec 1999 23:59:60 GMT"), Some(946_684_799));
        assert_eq!(lenient_date("1 Jan 70 01:00 +0100"), Some(0));
        assert_eq!(lenient_date("Thu, 1 Jan 1970 00:00:00 EST (comment)"), Some(5 * 3600));
        assert_eq!(lenient_date("Thu, 29 Feb 2024 12:00:00 +0530"), Some(1_709_188_200));
        assert_eq!(lenient_date("not a date at all"), None);
    }

    #[test]
    fn rfc2231_parameters_keep_their_form() {
        let p = params("application/pdf; name*0=\"long-\"; name*1=\"name.pdf\"");
        assert_eq!(p.value, "application/pdf");
        assert_eq!(p.params, vec![("name".to_string(), "long-name.pdf".to_string())]);
        let p = params("attachment;\r\n filename*=UTF-8''%E2%9C%93.pdf");
        assert_eq!(
            p.params,
            vec![("filename*".to_string(), "UTF-8''%E2%9C%93.pdf".to_string())]
        );
        let p = params("multipart/mixed; boundary=\"a;b\" (comment); CHARSET=utf-8");
        assert_eq!(
            p.params,
            vec![
                ("boundary".to_string(), "a;b".to_string()),
                ("CHARSET".to_string(), "utf-8".to_string())
            ]
        );
    }
}
