//! Test evaluation: each test's values, compared with its keys by the
//! match type and comparator; `:matches` successes set `${N}`.

use super::action::DuplicateMark;
use super::address;
use super::error::RuntimeError;
use super::interp::{DUPLICATE_SECONDS_DEFAULT, Env, Frame, Run};
use super::matching;
use super::message::MessageView;
use super::program::{AddressPart, BodyTransform, Command, Index, MatchKind, MatchSpec, Str, Test, Zone};
use super::{date, edit};

impl<E: Env> Run<'_, '_, E> {
    pub(super) fn test(&mut self, t: &Test, frame: &mut Frame) -> Result<bool, RuntimeError> {
        self.charge(1)?;
        Ok(match t {
            Test::True => true,
            Test::False => false,
            Test::Not(t) => !self.test(t, frame)?,
            Test::AllOf(ts) => self.all_of(ts, frame)?,
            Test::AnyOf(ts) => self.any_of(ts, frame)?,
            Test::Exists(names) => {
                let names = self.expand_all(frame, names);
                names.iter().all(|n| self.msg.header(n).next().is_some())
            }
            Test::Size { over, limit } => {
                if *over {
                    self.msg.size() > *limit
                } else {
                    self.msg.size() < *limit
                }
            }
            Test::Header { names, keys, m, index } => {
                let values = self.header_values(frame, names, *index);
                self.compare(frame, *m, &values, keys)?
            }
            Test::Address {
                part,
                names,
                keys,
                m,
                index,
            } => {
                let values = self.address_values(frame, names, *part, *index);
                self.compare(frame, *m, &values, keys)?
            }
            Test::Envelope { part, names, keys, m } => {
                let values = self.envelope_values(frame, names, *part);
                self.compare(frame, *m, &values, keys)?
            }
            Test::Body { transform, keys, m } => {
                let values = self.body_values(transform);
                self.compare(frame, *m, &values, keys)?
            }
            Test::Date {
                header,
                zone,
                part,
                keys,
                m,
                index,
            } => {
                let dates = self.header_dates(frame, header, *index);
                let values = self.date_values(frame, &dates, zone, part);
                self.compare(frame, *m, &values, keys)?
            }
            Test::CurrentDate { zone, part, keys, m } => {
                let now = date::Instant {
                    utc_s: self.env.now_s(),
                    zone_min: 0,
                };
                let values = self.date_values(frame, &[now], zone, part);
                self.compare(frame, *m, &values, keys)?
            }
            Test::String { sources, keys, m } => {
                let values = self.string_values(frame, sources, m);
                self.compare(frame, *m, &values, keys)?
            }
            Test::HasFlag { vars, keys, m } => {
                let values = self.flag_values(frame, vars);
                self.compare(frame, *m, &values, keys)?
            }
            Test::Duplicate(d) => self.duplicate(frame, d)?,
            Test::MailboxExists(names) => {
                // Every name is asked (no short cut): the store's answers
                // are fetched between passes, all of one test's in one.
                let names = self.expand_all(frame, names);
                names.iter().filter(|n| !self.env.mailbox_exists(n)).count() == 0
            }
        })
    }

    /// allof: true unless a test is false; the rest are not evaluated.
    fn all_of(&mut self, ts: &[Test], frame: &mut Frame) -> Result<bool, RuntimeError> {
        for t in ts {
            if !self.test(t, frame)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// anyof: false unless a test is true; the rest are not evaluated.
    fn any_of(&mut self, ts: &[Test], frame: &mut Frame) -> Result<bool, RuntimeError> {
        for t in ts {
            if self.test(t, frame)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The values of the named header fields (`:index` picks one of each).
    fn header_values(&self, frame: &Frame, names: &[Str], index: Option<Index>) -> Vec<String> {
        let names = self.expand_all(frame, names);
        names
            .iter()
            .flat_map(|n| indexed(self.msg.header(n).collect(), index))
            .collect()
    }

    /// The `part` of every address in the named header fields.
    fn address_values(&self, frame: &Frame, names: &[Str], part: AddressPart, index: Option<Index>) -> Vec<String> {
        let names = self.expand_all(frame, names);
        let mut values = Vec::new();
        for n in &names {
            for v in indexed(self.msg.header(n).collect(), index) {
                values.extend(address::parse_list(&v).iter().filter_map(|a| address::part(a, part)));
            }
        }
        values
    }

    fn body_values(&self, transform: &BodyTransform) -> Vec<String> {
        match transform {
            BodyTransform::Raw => vec![String::from_utf8_lossy(self.msg.raw_body()).into_owned()],
            BodyTransform::Text => self.msg.texts().to_vec(),
        }
    }

    /// The dates of header field `header` that parse.
    fn header_dates(&self, frame: &Frame, header: &Str, index: Option<Index>) -> Vec<date::Instant> {
        let header = self.expand(frame, header);
        indexed(self.msg.header(&header).collect(), index)
            .iter()
            .filter_map(|v| date::parse(v))
            .collect()
    }

    /// The string test's values; `:count` counts the non-empty ones only
    /// (RFC 5229 §5).
    fn string_values(&self, frame: &Frame, sources: &[Str], m: &MatchSpec) -> Vec<String> {
        let mut values = self.expand_all(frame, sources);
        if matches!(m.kind, MatchKind::Count(_)) {
            values.retain(|v| !v.is_empty());
        }
        values
    }

    /// Any value matches any key (`:count`: how many values there are).
    fn compare(
        &mut self,
        frame: &mut Frame,
        m: MatchSpec,
        values: &[String],
        keys: &[Str],
    ) -> Result<bool, RuntimeError> {
        let keys = self.expand_all(frame, keys);
        self.charge((values.len() * keys.len()) as u64)?;
        if let MatchKind::Count(op) = m.kind {
            return Ok(keys
                .iter()
                .any(|k| matching::count_matches(m.comparator, op, values.len(), k)));
        }
        let mut caps = Vec::new();
        for v in values {
            for k in &keys {
                let hit = matching::matches(m.comparator, m.kind, v, k, &mut caps, &mut self.steps);
                self.charge(0)?;
                if hit {
                    if m.kind == MatchKind::Matches {
                        frame.matches = std::mem::take(&mut caps);
                    }
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    fn envelope_values(&self, frame: &Frame, names: &[Str], part: AddressPart) -> Vec<String> {
        let mut out = Vec::new();
        for n in self.expand_all(frame, names) {
            let addr = match n.to_ascii_lowercase().as_str() {
                "from" => &self.msg.envelope.from,
                _ => &self.msg.envelope.to,
            };
            if addr.is_empty() {
                // RFC 5228 §5.4: the null reverse-path is "" whatever the part.
                out.push(String::new());
            } else if let Some(p) = address::part(addr, part) {
                out.push(p);
            }
        }
        out
    }

    fn date_values(&self, frame: &Frame, dates: &[date::Instant], zone: &Zone, part: &Str) -> Vec<String> {
        let part = self.expand(frame, part).to_ascii_lowercase();
        let target = match zone {
            Zone::Local => Some(0),
            Zone::Original => None,
            Zone::Fixed(z) => match date::parse_zone(&self.expand(frame, z)) {
                Some(z) => Some(z),
                None => return Vec::new(),
            },
        };
        dates
            .iter()
            .map(|d| {
                date::part(
                    date::Instant {
                        zone_min: target.unwrap_or(d.zone_min),
                        ..*d
                    },
                    &part,
                )
            })
            .collect()
    }

    fn flag_values(&self, frame: &Frame, vars: &[Str]) -> Vec<String> {
        if vars.is_empty() {
            return super::interp::split_flags(&self.flags);
        }
        let scope = super::variables::Scope {
            locals: &frame.locals,
            globals: &self.globals,
            declared_global: &frame.declared,
            matches: &frame.matches,
        };
        self.expand_all(frame, vars)
            .iter()
            .flat_map(|v| super::interp::split_flags(scope.get(v).unwrap_or("")))
            .collect()
    }

    /// RFC 7352: the id is the handle and the message's Message-ID (or the
    /// named header, or `:uniqueid`); no value means not a duplicate.
    fn duplicate(&mut self, frame: &Frame, d: &super::program::Duplicate) -> Result<bool, RuntimeError> {
        let value = match (&d.uniqueid, &d.header) {
            (Some(u), _) => Some(self.expand(frame, u)),
            (None, h) => {
                let name = h
                    .as_ref()
                    .map_or_else(|| "message-id".to_string(), |h| self.expand(frame, h));
                self.msg.header(&name).next().map(|v| v.trim().to_string())
            }
        };
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(false);
        };
        let handle = d.handle.as_ref().map(|h| self.expand(frame, h)).unwrap_or_default();
        let id = format!("{handle}\u{0}{value}");
        let seen = self.env.duplicate_seen(&id) || self.duplicates.iter().any(|m| m.id == id);
        if !self.duplicates.iter().any(|m| m.id == id) {
            let expiry_s = d.seconds.unwrap_or(DUPLICATE_SECONDS_DEFAULT);
            self.duplicates.push(DuplicateMark {
                id,
                expiry_s,
                last: d.last,
            });
        }
        Ok(seen)
    }

    pub(super) fn delete_header(&mut self, c: &Command, frame: &mut Frame) -> Result<(), RuntimeError> {
        let Command::DeleteHeader {
            index,
            m,
            name,
            patterns,
        } = c
        else {
            return Ok(());
        };
        let name = self.expand(frame, name);
        let patterns = patterns.as_ref().map(|p| self.expand_all(frame, p));
        let (m, index) = (*m, *index);
        let mut steps = 0u64;
        edit::delete(&mut self.msg, &name, |n, count, value| {
            let at = index.map(|i| {
                if i.last {
                    count + 1 - (i.n as usize).min(count + 1)
                } else {
                    i.n as usize
                }
            });
            if at.is_some_and(|at| at != n) {
                return false;
            }
            match &patterns {
                None => true,
                Some(keys) => keys
                    .iter()
                    .any(|k| matching::matches(m.comparator, m.kind, value, k, &mut Vec::new(), &mut steps)),
            }
        });
        self.charge(steps)
    }
}

/// The `:index`th value (from the end with `:last`), or all of them.
fn indexed(values: Vec<String>, index: Option<Index>) -> Vec<String> {
    let Some(i) = index else { return values };
    let n = i.n as usize;
    if n == 0 || n > values.len() {
        return Vec::new();
    }
    let at = if i.last { values.len() - n } else { n - 1 };
    vec![values[at].clone()]
}

/// RFC 5230 §4.5-4.6 (and RFC 3834): no reply to the null sender, to
/// automatic or list mail, to ourselves, or to mail not addressed to one
/// of our addresses.
pub(super) fn vacation_applies(msg: &MessageView<'_>, own: &[String], extra: &[String]) -> bool {
    let sender = msg.envelope.from.to_ascii_lowercase();
    if sender.is_empty() {
        return false;
    }
    let local = sender.rsplit_once('@').map_or(sender.as_str(), |(l, _)| l);
    if local == "mailer-daemon"
        || local.starts_with("owner-")
        || local.ends_with("-request")
        || local.contains("-request+")
    {
        return false;
    }
    let ours: Vec<String> = own.iter().chain(extra).cloned().collect();
    if ours.contains(&sender) {
        return false;
    }
    let auto = msg
        .header("auto-submitted")
        .any(|v| !v.trim().eq_ignore_ascii_case("no"));
    let list = msg
        .header("precedence")
        .any(|v| ["bulk", "list", "junk"].contains(&v.trim().to_ascii_lowercase().as_str()))
        || msg
            .fields
            .iter()
            .any(|f| f.name.to_ascii_lowercase().starts_with("list-"));
    if auto || list {
        return false;
    }
    ["to", "cc", "bcc", "resent-to", "resent-cc"].iter().any(|h| {
        msg.header(h).any(|v| {
            address::parse_list(&v).iter().any(|a| {
                let a = a.to_ascii_lowercase();
                ours.iter().any(|o| *o == a || *o == address::without_detail(&a))
            })
        })
    })
}
