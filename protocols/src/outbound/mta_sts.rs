//! MTA-STS (RFC 8461): a domain that publishes `_mta-sts.<domain>` TXT
//! (`v=STSv1; id=…`) and a policy at
//! `https://mta-sts.<domain>/.well-known/mta-sts.txt` asks senders to
//! deliver only to the MX hosts it lists, over TLS with a certificate that
//! verifies (`enforce`), or to report what that would refuse (`testing`).
//!
//! The policy is cached in the store (`model::mta_sts`, key `("sts",
//! domain)`), shared by every node. At each delivery job the TXT record is
//! looked up (the resolver caches it for its TTL); a policy is fetched
//! again when the TXT `id` differs from the cached one or the cached one
//! is past its `max_age`, and a cached, unexpired policy keeps applying
//! when the fetch fails (§5.1). The parsers here are pure; the HTTPS fetch
//! is [`super::mta_sts_fetch`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hickory_resolver::proto::rr::RData;
use meshmail_storage::model::mta_sts::{self, MX_PATTERNS_MAX, StsMode, StsPolicy};
use meshmail_storage::model::now_ms;

use super::Outbound;

/// RFC 8461 §3.2: max_age is at most 31557600 s (about a year).
pub const MAX_AGE_MAX_S: u64 = 31_557_600;
/// After a failed fetch this node waits this long before fetching the
/// domain's policy again (every job would otherwise pay the timeout).
pub const FETCH_RETRY_AFTER: Duration = Duration::from_secs(300);
/// Domains remembered with a failed fetch, at most.
const FAILURES_MAX: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy syntax: {0}")]
    Syntax(String),
}

/// What the `_mta-sts` TXT lookup said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Txt {
    /// Exactly one valid STSv1 record with this id.
    Id(String),
    /// No STSv1 record, several, or an invalid one: the domain has no
    /// (new) policy to fetch (§3.1).
    Absent,
    /// The lookup failed (timeout, SERVFAIL).
    Failed(String),
}

/// §3.1: the STSv1 record among a name's TXT records (each already the
/// concatenation of its strings).
pub fn parse_txt(records: &[String]) -> Txt {
    let sts: Vec<&String> = records.iter().filter(|r| r.starts_with("v=STSv1")).collect();
    let [record] = sts.as_slice() else {
        return Txt::Absent;
    };
    let mut fields = record.split(';').map(str::trim).filter(|f| !f.is_empty());
    if fields.next() != Some("v=STSv1") {
        return Txt::Absent;
    }
    for field in fields {
        if let Some(id) = field.strip_prefix("id=") {
            let ok = (1..=32).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric());
            return if ok { Txt::Id(id.to_string()) } else { Txt::Absent };
        }
    }
    Txt::Absent
}

/// §3.2: `key: value` lines (CRLF, LF tolerated); `version: STSv1`, `mode`,
/// `max_age` required, `mx` (one or more) unless the mode is `none`;
/// unknown keys are ignored.
pub fn parse_policy(text: &str, domain: &str, id: &str, fetched_ms: u64) -> Result<StsPolicy, PolicyError> {
    let bad = |s: String| Err(PolicyError::Syntax(s));
    let (mut version, mut mode, mut max_age) = (None, None, None);
    let mut mx = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return bad(format!(
                "not a key: value line: {:?}",
                line.chars().take(60).collect::<String>()
            ));
        };
        let value = value.trim();
        match key.trim() {
            "version" => version = Some(value.to_string()),
            "mode" => {
                mode = Some(match value {
                    "enforce" => StsMode::Enforce,
                    "testing" => StsMode::Testing,
                    "none" => StsMode::None,
                    other => return bad(format!("unknown mode {other:?}")),
                })
            }
            "max_age" => {
                let ok = !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit());
                match value.parse::<u64>() {
                    Ok(n) if ok => max_age = Some(n.min(MAX_AGE_MAX_S)),
                    _ => return bad(format!("max_age {value:?} is not a number")),
                }
            }
            "mx" => {
                let p = value.to_ascii_lowercase();
                let host = p.strip_prefix("*.").unwrap_or(&p);
                let valid = !host.is_empty()
                    && host.len() <= 253
                    && host
                        .split('.')
                        .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
                if !valid {
                    return bad(format!("mx {value:?} is not a host name pattern"));
                }
                if mx.len() < MX_PATTERNS_MAX {
                    mx.push(p);
                }
            }
            _ => {} // extensions
        }
    }
    if version.as_deref() != Some("STSv1") {
        return bad("version is not STSv1".into());
    }
    let Some(mode) = mode else {
        return bad("no mode".into());
    };
    let Some(max_age_s) = max_age else {
        return bad("no max_age".into());
    };
    if mx.is_empty() && mode != StsMode::None {
        return bad("no mx pattern".into());
    }
    Ok(StsPolicy {
        domain: domain.to_ascii_lowercase(),
        id: id.to_string(),
        mode,
        mx,
        max_age_s,
        fetched_ms,
    })
}

/// §4.1: a pattern is a host name, or `*.` and a domain, which matches
/// exactly one more label on the left (`*.example.com` matches
/// `mx.example.com`, not `example.com` nor `a.b.example.com`).
pub fn mx_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(base) => host
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest == base),
        None => host == pattern,
    }
}

pub fn host_allowed(policy: &StsPolicy, host: &str) -> bool {
    policy.mx.iter().any(|p| mx_matches(p, host))
}

/// This node's memory of failed fetches (so a broken policy host costs one
/// timeout per [`FETCH_RETRY_AFTER`], not one per job).
#[derive(Default)]
pub struct FetchFailures {
    by_domain: Mutex<HashMap<String, (String, Instant)>>,
}

impl FetchFailures {
    fn recent(&self, domain: &str, id: &str) -> bool {
        let m = self.by_domain.lock().expect("mta-sts failures");
        m.get(domain)
            .is_some_and(|(failed_id, at)| failed_id == id && at.elapsed() < FETCH_RETRY_AFTER)
    }
    fn record(&self, domain: &str, id: &str) {
        let mut m = self.by_domain.lock().expect("mta-sts failures");
        if m.len() >= FAILURES_MAX {
            m.retain(|_, (_, at)| at.elapsed() < FETCH_RETRY_AFTER);
            if m.len() >= FAILURES_MAX {
                m.clear();
            }
        }
        m.insert(domain.to_string(), (id.to_string(), Instant::now()));
    }
    fn clear(&self, domain: &str) {
        self.by_domain.lock().expect("mta-sts failures").remove(domain);
    }
}

async fn lookup_txt(o: &Outbound, domain: &str) -> Txt {
    use hickory_resolver::net::{DnsError, NetError};
    let name = format!("_mta-sts.{}.", domain.trim_end_matches('.'));
    match o.dns.resolver().txt_lookup(name.as_str()).await {
        Ok(lookup) => {
            let records: Vec<String> = lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::TXT(t) => Some(t.txt_data.iter().map(|s| String::from_utf8_lossy(s)).collect()),
                    _ => None,
                })
                .collect();
            parse_txt(&records)
        }
        Err(NetError::Dns(DnsError::NoRecordsFound(_))) => Txt::Absent,
        Err(e) => Txt::Failed(e.to_string()),
    }
}

/// The policy that applies to mail for `domain` now (`None`: no policy, or
/// mode `none`).
pub async fn policy_for(o: &Outbound, domain: &str) -> Option<StsPolicy> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let started = Instant::now();
    let txt = lookup_txt(o, &domain).await;
    let cached = {
        let d = domain.clone();
        match o
            .ctx
            .db
            .run("mta_sts_get", move |txn| {
                let d = d.clone();
                async move { mta_sts::get(&txn, &d).await }
            })
            .await
        {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(domain, error = %e, "reading the cached MTA-STS policy failed");
                None
            }
        }
    };
    let now = now_ms();
    let fresh = cached.filter(|p| p.is_fresh(now));
    let policy = match txt {
        Txt::Id(id) if fresh.as_ref().is_some_and(|p| p.id == id) => fresh,
        Txt::Id(id) if o.sts_failures.recent(&domain, &id) => fresh,
        Txt::Id(id) => match fetch_and_store(o, &domain, &id, now).await {
            Some(p) => Some(p),
            None => {
                o.sts_failures.record(&domain, &id);
                fresh
            }
        },
        Txt::Absent => fresh,
        Txt::Failed(e) => {
            tracing::debug!(domain, error = %e, "MTA-STS TXT lookup failed; using the cached policy if any");
            fresh
        }
    };
    metrics::histogram!("meshmail_outbound_stage_seconds", "stage" => "mta_sts")
        .record(started.elapsed().as_secs_f64());
    policy.filter(|p| p.mode != StsMode::None)
}

async fn fetch_and_store(o: &Outbound, domain: &str, id: &str, now: u64) -> Option<StsPolicy> {
    let fetched = super::mta_sts_fetch::fetch(o, domain).await;
    let text = match fetched {
        Ok(t) => t,
        Err(e) => {
            metrics::counter!("meshmail_outbound_mta_sts_fetches_total", "outcome" => e.outcome()).increment(1);
            tracing::warn!(domain, error = %e, "MTA-STS policy fetch failed");
            return None;
        }
    };
    let policy = match parse_policy(&text, domain, id, now) {
        Ok(p) => p,
        Err(e) => {
            metrics::counter!("meshmail_outbound_mta_sts_fetches_total", "outcome" => "invalid").increment(1);
            tracing::warn!(domain, error = %e, "MTA-STS policy is invalid");
            return None;
        }
    };
    metrics::counter!("meshmail_outbound_mta_sts_fetches_total", "outcome" => "ok").increment(1);
    o.sts_failures.clear(domain);
    let p = policy.clone();
    let stored = o
        .ctx
        .db
        .run("mta_sts_put", move |txn| {
            let p = p.clone();
            async move { mta_sts::put(&txn, &p) }
        })
        .await;
    if let Err(e) = stored {
        // Applied anyway; the next job fetches again.
        tracing::warn!(domain, error = %e, "caching the MTA-STS policy failed");
    }
    tracing::info!(domain, mode = policy.mode.label(), id, "MTA-STS policy fetched");
    Some(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txt_records() {
        let one = |s: &str| parse_txt(&[s.to_string()]);
        assert_eq!(one("v=STSv1; id=20160831085700Z;"), Txt::Id("20160831085700Z".into()));
        assert_eq!(one("v=STSv1;id=abc"), Txt::Id("abc".into()));
        assert_eq!(one("v=STSv1; id=has-dash"), Txt::Absent);
        assert_eq!(one("v=STSv1;"), Txt::Absent);
        assert_eq!(one("v=spf1 -all"), Txt::Absent);
        let two = ["v=STSv1; id=a".to_string(), "v=STSv1; id=b".to_string()];
        assert_eq!(parse_txt(&two), Txt::Absent, "several records: none applies");
        let mixed = ["v=spf1 -all".to_string(), "v=STSv1; id=a".to_string()];
        assert_eq!(parse_txt(&mixed), Txt::Id("a".into()));
    }

    #[test]
    fn policies() {
        let p = parse_policy(
            "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmax_age: 604800\r\nx-ext: 1\r\n",
            "Example.COM",
            "id1",
            5,
        )
        .unwrap();
        assert_eq!(p.domain, "example.com");
        assert_eq!(p.mode, StsMode::Enforce);
        assert_eq!(p.mx, vec!["mail.example.com", "*.example.net"]);
        assert_eq!(p.max_age_s, 604_800);
        assert!(p.is_fresh(5 + 604_799_999) && !p.is_fresh(5 + 604_800_000));
        assert!(host_allowed(&p, "MAIL.example.com."));
        assert!(host_allowed(&p, "mx1.example.net"));
        assert!(!host_allowed(&p, "example.net"));
        assert!(!host_allowed(&p, "a.mx1.example.net"));
        assert!(!host_allowed(&p, "mail.example.org"));
        // LF line ends, mode none without mx, max_age capped.
        let n = parse_policy("version: STSv1\nmode: none\nmax_age: 99999999999\n", "d", "i", 0);
        assert!(n.is_err(), "11 digits");
        let n = parse_policy("version: STSv1\nmode: none\nmax_age: 9999999999\n", "d", "i", 0).unwrap();
        assert_eq!((n.mode, n.max_age_s), (StsMode::None, MAX_AGE_MAX_S));
        for bad in [
            "mode: enforce\nmx: a.b\nmax_age: 1\n",
            "version: STSv2\nmode: enforce\nmx: a.b\nmax_age: 1\n",
            "version: STSv1\nmode: enforce\nmax_age: 1\n",
            "version: STSv1\nmode: strict\nmx: a.b\nmax_age: 1\n",
            "version: STSv1\nmode: testing\nmx: a.b\n",
            "version: STSv1\nmode: testing\nmx: a..b\nmax_age: 1\n",
            "version: STSv1\nmode: testing\nmx: a.b\nmax_age: -1\n",
            "<html>not a policy</html>",
        ] {
            assert!(parse_policy(bad, "d", "i", 0).is_err(), "{bad}");
        }
    }
}
