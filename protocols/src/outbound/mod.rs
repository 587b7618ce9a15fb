//! Outbound delivery: the queue runner that takes mail for remote
//! recipients out of the store's queue (`model::outbound`) and hands it to
//! the recipients' MX hosts (or a smarthost), with retries, bounces (DSN),
//! delay warnings and DKIM signing.
//!
//! - [`runner`]: the supervised actors; each scan claims due items of the
//!   shards this node holds the lease of (fenced like every shard write).
//! - [`deliver`]: one destination's work: route, connect, one transaction
//!   per message (its recipients of that domain together), the outcome of
//!   every recipient committed under the claim's fence.
//! - [`notify`]: DSNs go to the sender's INBOX through the shard actor, or
//!   into the queue when the sender is remote.
//! - [`client`] the SMTP client, [`mx`] MX resolution, [`dsn`] RFC 3464
//!   reports, [`dkim`] signing and key generation.

pub mod client;
pub mod deliver;
pub mod dkim;
pub mod downgrade;
pub mod dsn;
pub mod mta_sts;
pub mod mta_sts_fetch;
pub mod mx;
pub mod notify;
pub mod pool;
pub mod runner;
pub mod tls_policy;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshmail_actors::node::NodeCtx;
use tokio::sync::Semaphore;

use crate::dns::Dns;
use client::{Timeouts, TlsRoots};

/// A smarthost every message is relayed through instead of the MX hosts.
#[derive(Debug, Clone)]
pub struct Relay {
    pub host: String,
    pub port: u16,
    /// AUTH PLAIN credentials, sent only over TLS or to a loopback relay.
    pub auth: Option<(String, String)>,
}

/// What the node's config says about outbound delivery (`[outbound]`).
#[derive(Debug, Clone)]
pub struct OutboundConfig {
    /// EHLO name, Reporting-MTA and the DSN's From domain.
    pub hostname: String,
    /// Delay before retry n (the last repeats); jitter of up to 10% is added.
    pub retry_schedule: Vec<Duration>,
    /// A message not delivered within this is bounced.
    pub max_lifetime: Duration,
    /// A delay DSN is sent once a message has waited this long; `None`: never.
    pub delay_warning: Option<Duration>,
    pub relay: Option<Relay>,
    /// Port of the remote MX hosts (25; tests use an unprivileged one).
    pub mx_port: u16,
    /// Concurrent connections per destination domain.
    pub per_destination_max: usize,
    pub timeouts: Timeouts,
    /// How often the runner looks for due items.
    pub scan_interval: Duration,
    /// Items in flight on this node at most (claimed, not yet finished).
    pub in_flight_max: usize,
    /// Due items read per shard per scan.
    pub due_per_shard_max: usize,
    /// A claim outlives its attempt by this at most: a node that dies
    /// mid-attempt leaves the item due again after it (sooner when another
    /// node takes the shard over).
    pub claim_timeout: Duration,
    /// Sign mail from local domains that have a key.
    pub dkim_sign: bool,
    pub mta_sts: MtaStsConfig,
    /// A connection kept idle for the next scan's messages to the same
    /// destination is closed after this; zero: connections are not kept
    /// across scans.
    pub connection_idle_timeout: Duration,
}

/// MTA-STS (RFC 8461) policy discovery (`[outbound] mta_sts*`).
#[derive(Debug, Clone)]
pub struct MtaStsConfig {
    /// Look policies up and apply them (never with a relay).
    pub enabled: bool,
    /// The HTTPS port of `mta-sts.<domain>` (443; tests use their own).
    pub port: u16,
    /// The whole policy fetch (connect, TLS, request, answer).
    pub fetch_timeout: Duration,
}

impl Default for MtaStsConfig {
    fn default() -> Self {
        MtaStsConfig {
            enabled: true,
            port: 443,
            fetch_timeout: Duration::from_secs(20),
        }
    }
}

impl Default for OutboundConfig {
    fn default() -> Self {
        OutboundConfig {
            hostname: "localhost".into(),
            retry_schedule: [60, 300, 900, 1800, 3600, 7200, 14400]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            max_lifetime: Duration::from_secs(5 * 24 * 3600),
            delay_warning: Some(Duration::from_secs(4 * 3600)),
            relay: None,
            mx_port: 25,
            per_destination_max: 20,
            timeouts: Timeouts::default(),
            scan_interval: Duration::from_secs(1),
            in_flight_max: 1000,
            due_per_shard_max: 100,
            claim_timeout: Duration::from_secs(1800),
            dkim_sign: true,
            mta_sts: MtaStsConfig::default(),
            connection_idle_timeout: Duration::from_secs(5),
        }
    }
}

impl OutboundConfig {
    /// The delay before the next attempt after `attempts` attempts.
    pub fn retry_delay(&self, attempts: u32) -> Duration {
        let i = (attempts.max(1) as usize - 1).min(self.retry_schedule.len().saturating_sub(1));
        self.retry_schedule.get(i).copied().unwrap_or(Duration::from_secs(60))
    }
}

/// What the runner's actors and delivery tasks share. Lives outside the
/// actors, so a restarted runner still sees what is in flight.
pub struct Outbound {
    pub ctx: Arc<NodeCtx>,
    pub dns: Dns,
    pub config: OutboundConfig,
    pub tls: Option<TlsRoots>,
    pub keys: dkim::KeyCache,
    sts_failures: mta_sts::FetchFailures,
    pub pool: pool::Pool,
    in_flight: Mutex<HashSet<[u8; 16]>>,
    destinations: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The lease epoch of each shard at its last scan: a change (takeover)
    /// makes the next scan look at the shard's claims too.
    seen_epochs: Mutex<HashMap<u32, u64>>,
}

impl Outbound {
    pub fn new(ctx: Arc<NodeCtx>, dns: Dns, config: OutboundConfig, tls: Option<TlsRoots>) -> Arc<Outbound> {
        Arc::new(Outbound {
            ctx,
            dns,
            config,
            tls,
            keys: dkim::KeyCache::default(),
            sts_failures: mta_sts::FetchFailures::default(),
            pool: pool::Pool::default(),
            in_flight: Mutex::new(HashSet::new()),
            destinations: Mutex::new(HashMap::new()),
            seen_epochs: Mutex::new(HashMap::new()),
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.lock().expect("in_flight").len()
    }

    /// Registers an item of `shard` as in flight here; `None` if it already
    /// is, or if this node no longer accepts work for the shard (it is
    /// draining it). The guard also counts as a request in flight for the
    /// shard, so a graceful hand-off waits for the attempt to end before it
    /// releases the lease: the next owner never claims an item while this
    /// node may still be sending it.
    fn enter(self: &Arc<Self>, id: [u8; 16], shard: u32) -> Option<InFlight> {
        let shard_guard = self.ctx.enter(shard)?;
        self.in_flight.lock().expect("in_flight").insert(id).then(|| InFlight {
            o: self.clone(),
            id,
            _shard: shard_guard,
        })
    }

    fn is_in_flight(&self, id: &[u8; 16]) -> bool {
        self.in_flight.lock().expect("in_flight").contains(id)
    }

    fn destination(&self, domain: &str) -> Arc<Semaphore> {
        let mut d = self.destinations.lock().expect("destinations");
        if d.len() > 10_000 {
            // Bounded: forget idle destinations (none holds a permit).
            d.retain(|_, s| s.available_permits() < self.config.per_destination_max);
        }
        d.entry(domain.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.per_destination_max.max(1))))
            .clone()
    }
}

/// An item in flight on this node; dropping it (even by a panic) ends it.
pub struct InFlight {
    o: Arc<Outbound>,
    id: [u8; 16],
    _shard: meshmail_actors::node::InFlightShard,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.o.in_flight.lock().expect("in_flight").remove(&self.id);
    }
}
