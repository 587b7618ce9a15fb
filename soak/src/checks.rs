//! End checks shared by `soak run` and the chaos runner: the golden
//! invariant read back over IMAP, actor accounting at quiet points, memory
//! trend, and the one-line-per-check summary that decides the exit code.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cluster::{NodeAddrs, PASSWORD, account};
use crate::history::Observation;
use crate::imap_client::ImapClient;
use crate::load::Fate;

/// One end check: printed as `name: value`, failing when `ok` is false.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub value: String,
    pub ok: bool,
    pub note: String,
}

impl Check {
    /// A count that must be zero.
    pub fn zero(name: &str, n: u64, note: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            value: n.to_string(),
            ok: n == 0,
            note: note.into(),
        }
    }

    pub fn info(name: &str, value: impl ToString, note: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            value: value.to_string(),
            ok: true,
            note: note.into(),
        }
    }

    pub fn at_least(name: &str, n: u64, min: u64) -> Check {
        Check {
            name: name.into(),
            value: n.to_string(),
            ok: n >= min,
            note: format!("at least {min}"),
        }
    }

    pub fn line(&self) -> String {
        let mark = if self.ok { "" } else { "   <-- FAILED" };
        if self.note.is_empty() {
            format!("{}: {}{mark}", self.name, self.value)
        } else {
            format!("{}: {} ({}){mark}", self.name, self.value, self.note)
        }
    }
}

pub fn all_ok(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.ok)
}

/// Reads every account's INBOX (UID, MODSEQ, load id), trying the nodes in
/// turn until one answers, within `limit` per mailbox.
pub async fn read_back(targets: &[NodeAddrs], accounts: u32, limit: Duration) -> anyhow::Result<Vec<Observation>> {
    let mut out = Vec::new();
    for a in 0..accounts {
        let user = account(a);
        let until = Instant::now() + limit;
        let mut attempt = 0usize;
        loop {
            let addr = &targets[attempt % targets.len()].imap;
            attempt += 1;
            let r = async {
                let mut c =
                    ImapClient::connect_with(addr, None, Duration::from_secs(3), Duration::from_secs(60)).await?;
                c.login(&user, PASSWORD).await?;
                let o = crate::load::observe(&mut c, &user, 0, None).await?;
                let _ = c.cmd("LOGOUT").await;
                anyhow::Ok(o)
            }
            .await;
            match r {
                Ok(o) => {
                    out.push(o);
                    break;
                }
                Err(e) if Instant::now() >= until => {
                    anyhow::bail!("reading back {user}: {e:#}");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GoldenFindings {
    pub acked: u64,
    pub found: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Found although the client saw a refusal or a timeout: allowed.
    pub extra_after_error: u64,
    /// Found but never sent by this load (or only as "not sent"): a bug.
    pub extra_unexplained: u64,
    /// Found in another account's mailbox than the one it was sent to.
    pub misdelivered: u64,
    pub examples: Vec<String>,
}

/// Compares what the load was told with what the mailboxes hold.
pub fn golden(ids: &HashMap<String, (u32, Fate)>, read: &[Observation]) -> GoldenFindings {
    let mut f = GoldenFindings::default();
    let mut found: HashMap<&str, (u64, &str)> = HashMap::new();
    for o in read {
        for (_, id) in &o.messages {
            if let Some(id) = id {
                let e = found.entry(id).or_insert((0, &o.mailbox));
                e.0 += 1;
            }
        }
    }
    let example = |f: &mut GoldenFindings, s: String| {
        if f.examples.len() < 20 {
            f.examples.push(s);
        }
    };
    for (id, (acct, fate)) in ids {
        if *fate == Fate::Acked {
            f.acked += 1;
            if !found.contains_key(id.as_str()) {
                f.lost += 1;
                example(&mut f, format!("lost: {id} (acked for {})", account(*acct)));
            }
        }
    }
    for (id, (n, mailbox)) in &found {
        f.found += 1;
        if *n > 1 {
            f.duplicated += 1;
            example(&mut f, format!("duplicated: {id} found {n} times"));
        }
        match ids.get(*id) {
            Some((acct, fate)) => {
                if account(*acct) != *mailbox {
                    f.misdelivered += 1;
                    example(
                        &mut f,
                        format!("misdelivered: {id} for {} found in {mailbox}", account(*acct)),
                    );
                }
                if *fate != Fate::Acked {
                    f.extra_after_error += 1;
                }
            }
            None => {
                f.extra_unexplained += 1;
                example(&mut f, format!("extra: {id} in {mailbox} was never sent"));
            }
        }
    }
    f
}

/// Live actors of one node at one moment, from its `/metrics`.
#[derive(Debug, Clone, Serialize)]
pub struct ActorSample {
    pub node: String,
    pub generation: u64,
    pub total: i64,
    pub sessions: i64,
    pub shards: i64,
    /// total − sessions (every kind ending in "session") − shards: must not
    /// change between quiet points.
    pub fixed: i64,
    pub by_kind: Vec<(String, i64)>,
}

pub async fn actor_sample(node: &str, generation: u64, http: &str) -> anyhow::Result<ActorSample> {
    let text = crate::http::get(http, "/metrics", Duration::from_secs(5)).await?;
    let kinds: Vec<(String, i64)> = crate::http::prom_values(&text, "meshmail_actors_live")
        .into_iter()
        .filter_map(|(l, v)| Some((crate::http::label(&l, "kind")?.to_string(), v as i64)))
        .collect();
    anyhow::ensure!(!kinds.is_empty(), "{node}: no meshmail_actors_live in /metrics");
    // Session actors are named per protocol (imap_session, smtp_session, ...).
    let sessions = kinds
        .iter()
        .filter(|(n, _)| n.ends_with("session"))
        .map(|(_, v)| v)
        .sum::<i64>();
    let shards = kinds.iter().filter(|(n, _)| n == "shard").map(|(_, v)| v).sum::<i64>();
    let total = kinds.iter().map(|(_, v)| v).sum::<i64>();
    Ok(ActorSample {
        node: node.into(),
        generation,
        total,
        sessions,
        shards,
        fixed: total - sessions - shards,
        by_kind: kinds,
    })
}

/// Samples until two readings 500 ms apart agree (actors stopping after a
/// session ends take a moment), at most `limit`.
pub async fn settled_actor_sample(
    node: &str,
    generation: u64,
    http: &str,
    limit: Duration,
) -> anyhow::Result<ActorSample> {
    let until = Instant::now() + limit;
    let mut prev = actor_sample(node, generation, http).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cur = actor_sample(node, generation, http).await?;
        if (cur.fixed == prev.fixed && cur.total == prev.total) || Instant::now() >= until {
            return Ok(cur);
        }
        prev = cur;
    }
}

/// Leaked actors: per node present at both quiet points, how much the
/// fixed set grew (a restarted node is compared too: the fixed set is the
/// same for every incarnation of one configuration).
pub fn leaked_actors(start: &[ActorSample], end: &[ActorSample]) -> (i64, Vec<String>) {
    let mut leaked = 0;
    let mut notes = Vec::new();
    for e in end {
        if let Some(s) = start.iter().find(|s| s.node == e.node) {
            let d = e.fixed - s.fixed;
            if d != 0 {
                notes.push(format!("{}: fixed actors {} -> {} ({:+})", e.node, s.fixed, e.fixed, d));
            }
            leaked += d.max(0);
        }
    }
    (leaked, notes)
}

/// One memory / fd sample of a node process.
#[derive(Debug, Clone, Serialize)]
pub struct ProcSample {
    pub t_s: f64,
    pub node: String,
    pub generation: u64,
    pub rss_kib: u64,
    pub fds: u64,
}

/// Least-squares slope of y over x.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// The second-half memory trend of one node, in percent of its mean:
/// slope × half duration / mean. Uses the incarnation that covers most of
/// the second half (a restart resets memory, which is not a trend).
pub fn memory_trend_pct(samples: &[ProcSample], node: &str, run_s: f64) -> Option<(f64, u64)> {
    let half = run_s / 2.0;
    let mut by_gen: HashMap<u64, Vec<(f64, f64)>> = HashMap::new();
    for s in samples.iter().filter(|s| s.node == node && s.t_s >= half) {
        by_gen.entry(s.generation).or_default().push((s.t_s, s.rss_kib as f64));
    }
    let (generation, pts) = by_gen.into_iter().max_by_key(|(_, v)| v.len())?;
    if pts.len() < 3 {
        return None;
    }
    let span = pts.last()?.0 - pts.first()?.0;
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    Some((slope(&pts) * span / mean.max(1.0) * 100.0, generation))
}

/// p50, p90, p99, max of a set of values (0 when empty).
pub fn quantiles(values: &[f64]) -> [f64; 4] {
    if values.is_empty() {
        return [0.0; 4];
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    [q(0.5), q(0.9), q(0.99), v[v.len() - 1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_counts() {
        let ids = HashMap::from([
            ("a".to_string(), (0, Fate::Acked)),
            ("b".to_string(), (0, Fate::Acked)),
            ("c".to_string(), (0, Fate::Unknown)),
        ]);
        let o = Observation {
            mailbox: account(0),
            uidvalidity: 1,
            highest_modseq: 1,
            start: Instant::now(),
            end: Instant::now(),
            messages: vec![
                (1, Some("a".into())),
                (2, Some("a".into())),
                (3, Some("c".into())),
                (4, Some("z".into())),
            ],
        };
        let f = golden(&ids, &[o]);
        assert_eq!(
            (f.lost, f.duplicated, f.extra_after_error, f.extra_unexplained),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn trend_and_quantiles() {
        let s: Vec<ProcSample> = (0..100)
            .map(|i| ProcSample {
                t_s: i as f64,
                node: "n".into(),
                generation: 1,
                rss_kib: 1000 + i,
                fds: 10,
            })
            .collect();
        let (pct, _) = memory_trend_pct(&s, "n", 100.0).unwrap();
        // Grows ~49 KiB over the half around a mean of ~1075: ≈ 4.6 %.
        assert!((pct - 4.56).abs() < 0.1, "{pct}");
        assert_eq!(quantiles(&[1.0, 2.0, 3.0, 4.0]), [2.0, 4.0, 4.0, 4.0]);
    }
}
