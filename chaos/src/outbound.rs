//! The outbound part of a chaos run (`[outbound]` in a scenario): a sink
//! MX on loopback that every node relays to (`[outbound] relay`), a
//! submission load (AUTH PLAIN, one remote recipient per message, each
//! message tagged `X-Chaos-Out-Id`) spread over the nodes while they are
//! killed, and the end checks:
//!
//! - `outbound_lost`: submitted and answered 250, never seen at the sink;
//! - `outbound_duplicates`: deliveries of one (id, recipient) beyond the
//!   first (at-least-once: allowed, counted);
//! - `outbound_claim_overlaps`: two attempts (distinct claims: node,
//!   generation, lease epoch, claim time, read from the `claim=` field of
//!   the node's `X-Meshmail-Outbound` trace header) of one (id, recipient)
//!   whose spans [claim time, the sink's 250] intersect. A delivery that
//!   reaches the sink proves its node was alive then, and the claim time
//!   that it was alive when it claimed, so an intersection means two live
//!   nodes held a claim on the message at once;
//! - `outbound_untraced`: deliveries without a readable claim (the overlap
//!   check would be blind to them).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meshmail_soak::checks::Check;
use meshmail_soak::cluster::{PASSWORD, account};
use meshmail_soak::sink_mx::{Delivery, Sink, SinkOptions};
use meshmail_soak::smtp_client::{Outcome, SmtpClient};
use serde::{Deserialize, Serialize};

/// The scenario's `[outbound]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundLoad {
    #[serde(default)]
    pub enabled: bool,
    /// Messages per second submitted, in total (spread over the connections).
    #[serde(default = "d_rate")]
    pub rate: f64,
    #[serde(default = "d_connections")]
    pub connections: usize,
    /// Recipient domains (remote1.test .. remoteN.test), round robin.
    #[serde(default = "d_domains")]
    pub domains: usize,
    /// The sink answers 451 to every n-th RCPT (0: never): retries under kills.
    #[serde(default)]
    pub tempfail_every: u64,
    /// After the fault phase, wait at most this long for every acknowledged
    /// message to reach the sink.
    #[serde(default = "d_drain_limit")]
    pub drain_limit_s: f64,
    /// Fewer acknowledged submissions than this fail the run.
    #[serde(default)]
    pub min_acked: u64,
}

fn d_rate() -> f64 {
    10.0
}
fn d_connections() -> usize {
    2
}
fn d_domains() -> usize {
    3
}
fn d_drain_limit() -> f64 {
    180.0
}

impl Default for OutboundLoad {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

/// The sink and the config file that points the nodes at it.
pub struct OutboundRig {
    pub sink: Sink,
    pub config_path: std::path::PathBuf,
}

impl OutboundRig {
    /// Starts the sink and writes the nodes' config (`OUT/outbound.toml`).
    pub fn start(cfg: &OutboundLoad, out: &Path) -> anyhow::Result<OutboundRig> {
        let sink = Sink::start(SinkOptions {
            tempfail_every: cfg.tempfail_every,
        })?;
        let config_path = out.join("outbound.toml");
        // Short retries and scans so a run of minutes drains; the resolver
        // points nowhere (the relay is an address, nothing is looked up).
        std::fs::write(
            &config_path,
            format!(
                "[dns]\nresolver = \"127.0.0.1:9\"\ntimeout_ms = 500\n\n\
                 [outbound]\nrelay = \"{}\"\nscan_interval_ms = 200\n\
                 retry_schedule_s = [1, 2, 4]\ndelay_warning_s = 0\n",
                sink.addr()
            ),
        )?;
        Ok(OutboundRig { sink, config_path })
    }
}

/// What became of each submitted message, by id.
#[derive(Debug, Default)]
pub struct Submitted {
    /// id → (recipient, outcome)
    pub fates: BTreeMap<String, (String, Outcome)>,
}

/// The submission load: runs until `stop` is set.
pub struct OutboundDriver {
    pub submitted: Arc<Mutex<Submitted>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl OutboundDriver {
    /// `targets`: every node's submission address (killed nodes refuse
    /// connections; a worker then moves on to the next).
    pub fn start(cfg: &OutboundLoad, targets: Vec<String>, accounts: u32) -> OutboundDriver {
        let submitted = Arc::new(Mutex::new(Submitted::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let workers = cfg.connections.max(1);
        let interval = Duration::from_secs_f64(workers as f64 / cfg.rate.max(0.1));
        let tasks = (0..workers)
            .map(|w| {
                let (submitted, stop, targets) = (submitted.clone(), stop.clone(), targets.clone());
                let domains = cfg.domains.max(1);
                let sender = account(w as u32 % accounts.max(1));
                tokio::spawn(async move {
                    worker(w, sender, targets, domains, interval, submitted, stop).await;
                })
            })
            .collect();
        OutboundDriver { submitted, stop, tasks }
    }

    pub async fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
    }

    pub fn acked(&self) -> Vec<(String, String)> {
        let s = self.submitted.lock().expect("submitted");
        s.fates
            .iter()
            .filter(|(_, (_, o))| *o == Outcome::Acked)
            .map(|(id, (rcpt, _))| (id.clone(), rcpt.clone()))
            .collect()
    }
}

async fn worker(
    w: usize,
    sender: String,
    targets: Vec<String>,
    domains: usize,
    interval: Duration,
    submitted: Arc<Mutex<Submitted>>,
    stop: Arc<AtomicBool>,
) {
    let (connect_timeout, op_timeout) = (Duration::from_secs(2), Duration::from_secs(15));
    let mut target = w % targets.len().max(1);
    let mut client: Option<SmtpClient> = None;
    let mut n = 0u64;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep_until(next.into()).await;
        next += interval;
        if client.is_none() {
            match SmtpClient::connect(&targets[target], connect_timeout, op_timeout).await {
                Ok(mut c) => match c.auth_plain(&sender, PASSWORD).await {
                    Ok(()) => client = Some(c),
                    Err(_) => target = (target + 1) % targets.len(),
                },
                Err(_) => target = (target + 1) % targets.len(),
            }
        }
        let Some(c) = client.as_mut() else { continue };
        let id = format!("w{w}-{n}");
        let rcpt = format!("r{}@remote{}.test", n % 7, 1 + (n as usize % domains));
        n += 1;
        let message = format!(
            "From: <{sender}>\r\nTo: <{rcpt}>\r\nSubject: chaos outbound {id}\r\n\
             Message-ID: <{id}@chaos.test>\r\nX-Chaos-Out-Id: {id}\r\n\r\nbody of {id}\r\n"
        );
        let outcome = c.send_message(&sender, &rcpt, &message).await;
        let broken = !matches!(outcome, Outcome::Acked | Outcome::Refused(_));
        submitted.lock().expect("submitted").fates.insert(id, (rcpt, outcome));
        if broken {
            client = None;
            target = (target + 1) % targets.len();
        }
    }
    if let Some(c) = client {
        c.quit().await;
    }
}

/// One attempt, as the node's trace header names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ClaimId {
    pub node: String,
    pub generation: u64,
    pub epoch: u64,
    pub started_ms: u64,
}

/// `... claim=NODE/GEN/EPOCH@MS` → the claim.
pub fn parse_claim(trace: &str) -> Option<ClaimId> {
    let v = trace.split(';').map(str::trim).find_map(|f| f.strip_prefix("claim="))?;
    let (fence, ms) = v.rsplit_once('@')?;
    let mut parts = fence.rsplitn(3, '/');
    let epoch = parts.next()?.parse().ok()?;
    let generation = parts.next()?.parse().ok()?;
    let node = parts.next()?.to_string();
    Some(ClaimId {
        node,
        generation,
        epoch,
        started_ms: ms.parse().ok()?,
    })
}

/// Two attempts of one message that held their claims at once.
#[derive(Debug, Clone, Serialize)]
pub struct Overlap {
    pub id: String,
    pub rcpt: String,
    pub a: ClaimId,
    pub a_end_ms: u64,
    pub b: ClaimId,
    pub b_end_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct OutboundFindings {
    pub submitted: u64,
    pub acked: u64,
    pub not_acked: u64,
    pub deliveries: u64,
    pub lost: u64,
    pub lost_ids: Vec<String>,
    pub duplicates: u64,
    pub delivered_after_error: u64,
    pub unexplained: u64,
    pub untraced: u64,
    pub overlaps: Vec<Overlap>,
    pub distinct_nodes_delivering: u64,
    pub sink_connections: u64,
    pub sink_connections_peak: u64,
    pub sink_tempfails: u64,
    pub drain_s: Option<f64>,
}

/// A delivery seen at the sink: under which claim, and when it got its 250.
type Attempt = (Option<ClaimId>, u64);

/// The pure part of the end checks, over what the load and the sink saw.
pub fn analyse(fates: &BTreeMap<String, (String, Outcome)>, deliveries: &[Delivery]) -> OutboundFindings {
    let mut f = OutboundFindings {
        submitted: fates.len() as u64,
        acked: fates.values().filter(|(_, o)| *o == Outcome::Acked).count() as u64,
        deliveries: deliveries.len() as u64,
        ..OutboundFindings::default()
    };
    f.not_acked = f.submitted - f.acked;
    // (id, rcpt) → the attempts that delivered it: claim → last 250 time.
    let mut by_msg: BTreeMap<(String, String), Vec<Attempt>> = BTreeMap::new();
    let mut nodes = std::collections::BTreeSet::new();
    for d in deliveries {
        let Some(id) = d.header("X-Chaos-Out-Id") else {
            f.unexplained += 1;
            continue;
        };
        let claim = d.header("X-Meshmail-Outbound").and_then(parse_claim);
        if claim.is_none() {
            f.untraced += 1;
        }
        if let Some(c) = &claim {
            nodes.insert(c.node.clone());
        }
        for r in &d.rcpts {
            by_msg
                .entry((id.to_string(), r.to_ascii_lowercase()))
                .or_default()
                .push((claim.clone(), d.at_ms));
        }
    }
    f.distinct_nodes_delivering = nodes.len() as u64;
    for ((id, rcpt), got) in &by_msg {
        f.duplicates += got.len() as u64 - 1;
        match fates.get(id) {
            None => f.unexplained += got.len() as u64,
            Some((want, o)) => {
                if !want.eq_ignore_ascii_case(rcpt) {
                    f.unexplained += got.len() as u64;
                } else if *o != Outcome::Acked {
                    f.delivered_after_error += 1;
                }
            }
        }
        // Spans of distinct claims: [claim time, last 250 under it].
        let mut spans: HashMap<ClaimId, u64> = HashMap::new();
        for (c, at) in got {
            if let Some(c) = c {
                let e = spans.entry(c.clone()).or_insert(*at);
                *e = (*e).max(*at);
            }
        }
        let mut spans: Vec<(ClaimId, u64)> = spans.into_iter().collect();
        spans.sort();
        for i in 0..spans.len() {
            for j in i + 1..spans.len() {
                let ((a, a_end), (b, b_end)) = (&spans[i], &spans[j]);
                if a.started_ms < *b_end && b.started_ms < *a_end {
                    f.overlaps.push(Overlap {
                        id: id.clone(),
                        rcpt: rcpt.clone(),
                        a: a.clone(),
                        a_end_ms: *a_end,
                        b: b.clone(),
                        b_end_ms: *b_end,
                    });
                }
            }
        }
    }
    for (id, (rcpt, o)) in fates {
        if *o == Outcome::Acked && !by_msg.contains_key(&(id.clone(), rcpt.to_ascii_lowercase())) {
            f.lost += 1;
            if f.lost_ids.len() < 50 {
                f.lost_ids.push(id.clone());
            }
        }
    }
    f
}

/// Waits (at most `limit`) until every acknowledged message is at the sink.
pub async fn wait_drained(driver: &OutboundDriver, sink: &Sink, limit: Duration) -> Option<f64> {
    let started = Instant::now();
    let acked = driver.acked();
    loop {
        let seen: std::collections::HashSet<(String, String)> = sink
            .deliveries()
            .iter()
            .filter_map(|d| Some((d.header("X-Chaos-Out-Id")?.to_string(), d.rcpts.clone())))
            .flat_map(|(id, rs)| rs.into_iter().map(move |r| (id.clone(), r.to_ascii_lowercase())))
            .collect();
        if acked
            .iter()
            .all(|(id, r)| seen.contains(&(id.clone(), r.to_ascii_lowercase())))
        {
            return Some(started.elapsed().as_secs_f64());
        }
        if started.elapsed() >= limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The end-check lines.
pub fn checks(cfg: &OutboundLoad, f: &OutboundFindings) -> Vec<Check> {
    vec![
        Check::at_least("outbound_acked", f.acked, cfg.min_acked),
        Check::zero(
            "outbound_lost",
            f.lost,
            format!("of {} acked, never at the sink MX", f.acked),
        ),
        Check::info(
            "outbound_duplicates",
            f.duplicates,
            format!(
                "extra deliveries over {} sink transactions (at-least-once)",
                f.deliveries
            ),
        ),
        Check::zero(
            "outbound_claim_overlaps",
            f.overlaps.len() as u64,
            "attempts of one message by two live claims at once",
        ),
        Check::zero("outbound_untraced", f.untraced, "deliveries without a claim= trace"),
        Check::zero("outbound_unexplained", f.unexplained, "at the sink but never submitted"),
        Check::info(
            "outbound_delivered_after_error",
            f.delivered_after_error,
            "the submitter saw no 250 but the message went out (allowed)",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(id: &str, rcpt: &str, claim: &str, at_ms: u64) -> Delivery {
        Delivery {
            at_ms,
            mail_from: "a@x".into(),
            rcpts: vec![rcpt.into()],
            x_headers: vec![
                (
                    "x-meshmail-outbound".into(),
                    format!("tls=none; mx=h; by=n; claim={claim}"),
                ),
                ("x-chaos-out-id".into(), id.into()),
            ],
            connection: 1,
        }
    }

    fn fates(ids: &[(&str, &str, Outcome)]) -> BTreeMap<String, (String, Outcome)> {
        ids.iter()
            .map(|(i, r, o)| (i.to_string(), (r.to_string(), o.clone())))
            .collect()
    }

    #[test]
    fn parses_the_claim() {
        let c = parse_claim("tls=none; mx=127.0.0.1; by=x; claim=node-1/7/42@1700").unwrap();
        assert_eq!(
            c,
            ClaimId {
                node: "node-1".into(),
                generation: 7,
                epoch: 42,
                started_ms: 1700
            }
        );
        assert!(parse_claim("tls=none; mx=h").is_none());
    }

    #[test]
    fn sequential_attempts_are_duplicates_not_overlaps() {
        // Node 0 delivered at 150 and died before recording it; node 1
        // claimed at 200 and delivered again.
        let f = analyse(
            &fates(&[("a", "r@d", Outcome::Acked), ("b", "r@d", Outcome::Acked)]),
            &[
                delivery("a", "r@d", "node-0/1/5@100", 150),
                delivery("a", "r@d", "node-1/1/6@200", 260),
            ],
        );
        assert_eq!((f.duplicates, f.overlaps.len(), f.lost, f.untraced), (1, 0, 1, 0));
        assert_eq!(f.lost_ids, vec!["b".to_string()]);
    }

    #[test]
    fn concurrent_claims_are_overlaps() {
        // Node 1 claimed at 120, while node 0's claim of 100 had not yet
        // delivered (150): both were alive and both held the message.
        let f = analyse(
            &fates(&[("a", "r@d", Outcome::Acked)]),
            &[
                delivery("a", "r@d", "node-0/1/5@100", 150),
                delivery("a", "r@d", "node-1/1/6@120", 170),
            ],
        );
        assert_eq!(f.overlaps.len(), 1);
        assert_eq!(f.lost, 0);
        let cs = checks(&OutboundLoad::default(), &f);
        assert!(cs.iter().any(|c| c.name == "outbound_claim_overlaps" && !c.ok));
    }

    #[test]
    fn unknown_and_untraced_are_counted() {
        let mut d = delivery("zz", "r@d", "x", 1);
        d.x_headers[0].1 = "tls=none".into();
        let f = analyse(&fates(&[]), &[d]);
        assert_eq!((f.unexplained, f.untraced), (1, 1));
    }
}
