//! Node configuration: TOML file, then flags. Dev defaults bind loopback on
//! unprivileged ports; `ops/config/production.toml` shows the standard ones.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use meshmail_protocols::accept::rcpt_cache::RcptCache;
use meshmail_protocols::accept::routing::RoutingConfig;
use meshmail_protocols::smtp::session::inbound_auth::{InboundAuthConfig, RejectAction};
use meshmail_storage::blob::{BlobConfig, INLINE_MAX_BYTES_DEFAULT};
use meshmail_storage::open::KvConfig;
use serde::Deserialize;

use crate::cli::{GlobalOverrides, ServeArgs, StoreArg};
pub use crate::config_mesh::MeshSection;
pub use crate::config_outbound::{DnsSection, OutboundSection};

pub const DATA_DIR_DEFAULT: &str = "./meshmail-data";

/// Commit batchers on FoundationDB. A delivery transaction there is a chain
/// of ~10 dependent reads, each a round trip to the cluster (13 ms per
/// batch of 4.5 under load), so ingest is bound by that latency, not by the
/// commit: 16 batchers take 1.8x the msg/s of 2 on a one-process cluster,
/// with less node CPU per message (soak/reports/bench-fdb-2026-12-07.md).
/// A shard keeps its one batcher, so batchers never conflict on a mailbox.
pub const FDB_BATCHERS: usize = 16;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    #[serde(default = "default_node_name")]
    pub node_name: String,
    /// The name this node gives itself in greetings and Received headers.
    #[serde(default = "default_hostname")]
    pub hostname: String,
    #[serde(default = "default_shard_count")]
    pub shard_count: u32,
    /// Commit batchers; unset: the store's default ([`Config::batchers`]).
    #[serde(default)]
    pub batchers: Option<usize>,
    #[serde(default)]
    pub listen: Listen,
    #[serde(default)]
    pub smtp: SmtpConfig,
    #[serde(default)]
    pub imap: ImapConfig,
    #[serde(default)]
    pub pop3: crate::config_pop3::Pop3Section,
    #[serde(default)]
    pub managesieve: crate::config_managesieve::ManageSieveSection,
    #[serde(default)]
    pub tls: TlsConfig,
    #[serde(default)]
    pub mesh: MeshSection,
    #[serde(default)]
    pub dns: DnsSection,
    #[serde(default)]
    pub jmap: JmapSection,
    #[serde(default)]
    pub outbound: OutboundSection,
    #[serde(default)]
    pub auth: crate::config_auth::AuthSection,
    #[serde(default)]
    pub compactor: crate::config_compactor::CompactorSection,
    /// Rolling upgrades: a pin to an older store format.
    #[serde(default)]
    pub upgrade: crate::config_upgrade::UpgradeSection,
    /// What the node publishes: DNS records, autoconfig, MTA-STS.
    #[serde(default)]
    pub publish: crate::config_publish::PublishSection,
    /// The KV store; default: SQLite at `<data_dir>/meshmail.sqlite`.
    #[serde(default)]
    pub store: Option<KvConfig>,
    /// The blob store; default: `<data_dir>/blobs`.
    #[serde(default)]
    pub blobs: Option<BlobConfig>,
    #[serde(default = "default_inline")]
    pub inline_max_bytes: usize,
}

/// Listener addresses. A listener left out of the file keeps its dev default;
/// set it to "off" to disable it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    #[serde(default = "d_smtp", with = "opt_addr")]
    pub smtp: Option<SocketAddr>,
    #[serde(default = "d_submission", with = "opt_addr")]
    pub submission: Option<SocketAddr>,
    /// Implicit TLS submission (RFC 8314), 465 in production.
    #[serde(default = "d_submissions", with = "opt_addr")]
    pub submissions: Option<SocketAddr>,
    #[serde(default = "d_lmtp", with = "opt_addr")]
    pub lmtp: Option<SocketAddr>,
    /// IMAP with STARTTLS (143 in production).
    #[serde(default = "d_imap", with = "opt_addr")]
    pub imap: Option<SocketAddr>,
    /// IMAP over implicit TLS (993 in production).
    #[serde(default = "d_imaps", with = "opt_addr")]
    pub imaps: Option<SocketAddr>,
    #[serde(default = "d_http", with = "opt_addr")]
    pub http: Option<SocketAddr>,
    /// The HTTP router over TLS (JMAP and webmail with real credentials);
    /// off unless set, e.g. "127.0.0.1:8443" (dev) or "0.0.0.0:443".
    #[serde(default, with = "opt_addr")]
    pub https: Option<SocketAddr>,
    /// Concurrent connections per SMTP-family listener.
    #[serde(default = "d_smtp_conns")]
    pub smtp_max_connections: usize,
    /// Concurrent connections per IMAP listener (IDLE clients stay connected).
    #[serde(default = "d_imap_conns")]
    pub imap_max_connections: usize,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            smtp: d_smtp(),
            submission: d_submission(),
            submissions: d_submissions(),
            lmtp: d_lmtp(),
            imap: d_imap(),
            imaps: d_imaps(),
            http: d_http(),
            https: None,
            smtp_max_connections: d_smtp_conns(),
            imap_max_connections: d_imap_conns(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    /// Largest message accepted (SIZE); default 50 MiB.
    #[serde(default = "d_max_message")]
    pub max_message_bytes: u64,
    /// Most recipients per transaction.
    #[serde(default = "d_max_rcpt")]
    pub max_recipients: usize,
    /// Allow AUTH without TLS when the client connects from loopback (dev
    /// and tests only; never over a network).
    #[serde(default)]
    pub allow_plaintext_auth_on_loopback: bool,
    /// Seconds a client may stay silent before it is dropped with 421
    /// (RFC 5321 §4.5.3.2 suggests 5 minutes).
    #[serde(default = "d_idle")]
    pub idle_timeout_s: u64,
    /// Seconds DATA (and each LMTP recipient) waits for the store to commit
    /// before answering 451 4.3.0: a store that is down or locked turns into
    /// "try again later" in bounded time, and nothing is stored after that
    /// answer (the sender retries).
    #[serde(default = "d_delivery_timeout")]
    pub delivery_timeout_s: u64,
    /// RFC 5233 subaddressing: `user+tag@dom` delivers to `user@dom`.
    /// One character; "" turns it off.
    #[serde(default = "d_separator")]
    pub subaddress_separator: String,
    /// SPF/DKIM/ARC/DMARC checks on the MX listener, recorded in an
    /// Authentication-Results header.
    #[serde(default = "d_true")]
    pub inbound_auth: bool,
    /// A message failing DMARC whose domain says `p=reject`: "reject" (550
    /// at DATA) or "junk" (accept into the Junk mailbox).
    #[serde(default = "d_dmarc_reject")]
    pub dmarc_reject: RejectAction,
    /// Clients whose mail is not checked (trusted relays, local injection):
    /// CIDR networks, default loopback.
    #[serde(default = "d_auth_skip")]
    pub inbound_auth_skip_networks: Vec<ipnet::IpNet>,
    /// Addresses whose RCPT answer the node keeps (routing and vacation
    /// flags; checked against the store's directory version at most every
    /// 250 ms, so a change anywhere is seen within that). 0 turns it off:
    /// every RCPT reads the store.
    #[serde(default = "d_rcpt_cache")]
    pub rcpt_cache_entries: usize,
}

impl Default for SmtpConfig {
    fn default() -> Self {
        SmtpConfig {
            max_message_bytes: d_max_message(),
            max_recipients: d_max_rcpt(),
            allow_plaintext_auth_on_loopback: false,
            idle_timeout_s: d_idle(),
            delivery_timeout_s: d_delivery_timeout(),
            subaddress_separator: d_separator(),
            inbound_auth: true,
            dmarc_reject: d_dmarc_reject(),
            inbound_auth_skip_networks: d_auth_skip(),
            rcpt_cache_entries: d_rcpt_cache(),
        }
    }
}

impl SmtpConfig {
    pub fn inbound_auth(&self) -> Option<InboundAuthConfig> {
        self.inbound_auth.then(|| InboundAuthConfig {
            on_reject: self.dmarc_reject,
            skip_networks: self.inbound_auth_skip_networks.clone(),
        })
    }

    /// The node's RCPT cache, shared by its SMTP and LMTP listeners.
    pub fn rcpt_cache(&self) -> Option<Arc<RcptCache>> {
        (self.rcpt_cache_entries > 0).then(|| Arc::new(RcptCache::new(self.rcpt_cache_entries)))
    }

    pub fn routing(&self) -> anyhow::Result<RoutingConfig> {
        let mut chars = self.subaddress_separator.chars();
        let sep = match (chars.next(), chars.next()) {
            (None, _) => None,
            (Some(c), None) if c.is_ascii_punctuation() && c != '@' => Some(c),
            _ => anyhow::bail!(
                "[smtp] subaddress_separator must be one punctuation character other than @, or \"\" (got {:?})",
                self.subaddress_separator
            ),
        };
        Ok(RoutingConfig {
            subaddress_separator: sep,
        })
    }
}

fn d_rcpt_cache() -> usize {
    10_000
}

fn d_auth_skip() -> Vec<ipnet::IpNet> {
    ["127.0.0.0/8", "::1/128"]
        .iter()
        .map(|n| n.parse().expect("static network"))
        .collect()
}

fn d_separator() -> String {
    "+".into()
}
pub(crate) fn d_true() -> bool {
    true
}
fn d_dmarc_reject() -> RejectAction {
    RejectAction::Reject
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImapConfig {
    /// Allow LOGIN/AUTHENTICATE without TLS from loopback clients.
    #[serde(default)]
    pub allow_plaintext_auth_on_loopback: bool,
    /// Largest APPEND literal, bytes (default: the SMTP message limit).
    pub max_literal_bytes: Option<u64>,
    #[serde(default = "d_sessions_per_account")]
    pub max_sessions_per_account: usize,
    /// Memory for the envelopes SEARCH, SORT and THREAD read, node-wide,
    /// MiB (whole mailboxes, least recently searched dropped first; about
    /// 0.6 KB a message); 0 turns the cache off.
    #[serde(default = "d_search_cache_mb")]
    pub search_cache_mb: u64,
    /// Memory for the hot rows (flags, MODSEQs, sizes, dates) that FETCH
    /// of those items reads, node-wide, in MiB (whole mailboxes, least
    /// recently used dropped first; ~0.2 KB a message); 0 turns it off.
    #[serde(default = "d_hot_cache_mb")]
    pub hot_cache_mb: u64,
    /// Seconds an IDLE with nothing to report keeps its session actor
    /// before the session parks (packed state, no actor, a task waiting on
    /// the socket; about a fifth of the memory); 0 never parks.
    #[serde(default = "d_park_idle_after_secs")]
    pub park_idle_after_secs: u64,
}

impl Default for ImapConfig {
    fn default() -> Self {
        ImapConfig {
            allow_plaintext_auth_on_loopback: false,
            max_literal_bytes: None,
            max_sessions_per_account: d_sessions_per_account(),
            search_cache_mb: d_search_cache_mb(),
            hot_cache_mb: d_hot_cache_mb(),
            park_idle_after_secs: d_park_idle_after_secs(),
        }
    }
}

fn d_search_cache_mb() -> u64 {
    32
}

fn d_hot_cache_mb() -> u64 {
    32
}

fn d_park_idle_after_secs() -> u64 {
    10
}

fn d_sessions_per_account() -> usize {
    100
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// JMAP and the webmail page (served on the HTTP and HTTPS listeners).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JmapSection {
    /// Accept Basic and bearer credentials over plaintext HTTP from
    /// loopback clients (dev and tests; never over a network).
    #[serde(default)]
    pub allow_plaintext_auth_on_loopback: bool,
    /// Origins allowed to call JMAP from a browser (CORS), e.g.
    /// "https://mail.example.org"; empty: any origin (credentials are
    /// sent as an Authorization header, never cookies).
    #[serde(default)]
    pub cors_allow_origins: Vec<String>,
    #[serde(default = "d_jmap_request")]
    pub max_size_request_bytes: usize,
    #[serde(default = "d_jmap_upload")]
    pub max_size_upload_bytes: u64,
    #[serde(default = "d_jmap_concurrent")]
    pub max_concurrent_requests: usize,
    #[serde(default = "d_jmap_calls")]
    pub max_calls_in_request: usize,
    #[serde(default = "d_jmap_objects")]
    pub max_objects_in_get: usize,
    #[serde(default = "d_jmap_objects")]
    pub max_objects_in_set: usize,
    /// Open connections per HTTP/HTTPS listener; beyond it a connection is
    /// answered 503 and closed.
    #[serde(default = "d_jmap_connections")]
    pub max_connections: usize,
}

impl Default for JmapSection {
    fn default() -> Self {
        JmapSection {
            allow_plaintext_auth_on_loopback: false,
            cors_allow_origins: Vec::new(),
            max_size_request_bytes: d_jmap_request(),
            max_size_upload_bytes: d_jmap_upload(),
            max_concurrent_requests: d_jmap_concurrent(),
            max_calls_in_request: d_jmap_calls(),
            max_objects_in_get: d_jmap_objects(),
            max_objects_in_set: d_jmap_objects(),
            max_connections: d_jmap_connections(),
        }
    }
}

fn d_jmap_request() -> usize {
    10 * 1024 * 1024
}
fn d_jmap_upload() -> u64 {
    50 * 1024 * 1024
}
fn d_jmap_connections() -> usize {
    1024
}
fn d_jmap_concurrent() -> usize {
    8
}
fn d_jmap_calls() -> usize {
    32
}
fn d_jmap_objects() -> usize {
    500
}

fn default_data_dir() -> PathBuf {
    PathBuf::from(DATA_DIR_DEFAULT)
}
fn default_node_name() -> String {
    "node0".to_string()
}
fn default_hostname() -> String {
    "localhost".to_string()
}
fn default_shard_count() -> u32 {
    meshmail_actors::node::SHARD_COUNT_DEFAULT
}
fn default_inline() -> usize {
    INLINE_MAX_BYTES_DEFAULT
}
fn addr(s: &str) -> Option<SocketAddr> {
    Some(s.parse().expect("valid default address"))
}
fn d_smtp() -> Option<SocketAddr> {
    addr("127.0.0.1:2525")
}
fn d_submission() -> Option<SocketAddr> {
    addr("127.0.0.1:2587")
}
fn d_submissions() -> Option<SocketAddr> {
    addr("127.0.0.1:2465")
}
fn d_lmtp() -> Option<SocketAddr> {
    addr("127.0.0.1:2424")
}
fn d_imap() -> Option<SocketAddr> {
    addr("127.0.0.1:1143")
}
fn d_imaps() -> Option<SocketAddr> {
    addr("127.0.0.1:1993")
}
fn d_smtp_conns() -> usize {
    2_000
}
fn d_imap_conns() -> usize {
    15_000
}
fn d_http() -> Option<SocketAddr> {
    addr("127.0.0.1:8080")
}
fn d_max_message() -> u64 {
    50 * 1024 * 1024
}
fn d_max_rcpt() -> usize {
    100
}
fn d_idle() -> u64 {
    300
}
fn d_delivery_timeout() -> u64 {
    meshmail_actors::delivery::DELIVERY_DEADLINE.as_secs()
}

/// `"host:port"` or `"off"`.
pub(crate) mod opt_addr {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_listen(&s).map_err(serde::de::Error::custom)
    }
}

/// A listener setting that is neither an address nor `off`.
#[derive(Debug, thiserror::Error)]
#[error("{input:?} is not host:port or \"off\": {source}")]
pub struct ListenParseError {
    input: String,
    source: std::net::AddrParseError,
}

/// Parses a listener setting: an address, or `off`.
pub fn parse_listen(s: &str) -> Result<Option<SocketAddr>, ListenParseError> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|source| ListenParseError {
        input: s.into(),
        source,
    })
}

impl Config {
    pub fn load(path: Option<&Path>, overrides: &GlobalOverrides) -> anyhow::Result<Config> {
        let mut cfg: Config = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", p.display()))?
            }
            None => toml::from_str("").expect("empty config is valid"),
        };
        if let Some(d) = &overrides.data_dir {
            cfg.data_dir = d.clone();
        }
        match &overrides.store {
            None => {}
            Some(StoreArg::Sqlite) => cfg.store = None,
            Some(StoreArg::Fdb(cluster_file)) => {
                cfg.store = Some(KvConfig::Fdb {
                    cluster_file: cluster_file.clone(),
                    key_prefix: String::new(),
                })
            }
        }
        if overrides.pin_store_format.is_some() {
            cfg.upgrade.pin_store_format = overrides.pin_store_format;
        }
        // An empty prefix (e.g. MESHMAIL_FDB_KEY_PREFIX="") is no prefix.
        if let Some(prefix) = overrides.fdb_key_prefix.as_ref().filter(|p| !p.is_empty()) {
            match &mut cfg.store {
                Some(KvConfig::Fdb { key_prefix, .. }) => *key_prefix = prefix.clone(),
                _ => {
                    anyhow::bail!("--fdb-key-prefix needs a FoundationDB store (--store fdb or [store] kind = \"fdb\")")
                }
            }
        }
        Ok(cfg)
    }

    pub fn with_serve_args(mut self, args: &ServeArgs) -> Config {
        if let Some(n) = &args.node_name {
            self.node_name = n.clone();
        }
        for (flag, slot) in [
            (&args.smtp, &mut self.listen.smtp),
            (&args.submission, &mut self.listen.submission),
            (&args.submissions, &mut self.listen.submissions),
            (&args.lmtp, &mut self.listen.lmtp),
            (&args.imap, &mut self.listen.imap),
            (&args.imaps, &mut self.listen.imaps),
            (&args.http, &mut self.listen.http),
            (&args.https, &mut self.listen.https),
            (&args.pop3, &mut self.pop3.listen),
            (&args.pop3s, &mut self.pop3.listen_tls),
            (&args.managesieve, &mut self.managesieve.listen),
        ] {
            if let Some(v) = flag {
                *slot = v.0;
            }
        }
        if let Some(m) = &args.mesh {
            self.mesh.listen = m.0;
        }
        if !args.seeds.is_empty() {
            self.mesh.seeds = args.seeds.clone();
        }
        if args.allow_plaintext_auth_on_loopback {
            self.smtp.allow_plaintext_auth_on_loopback = true;
            self.imap.allow_plaintext_auth_on_loopback = true;
            self.pop3.allow_plaintext_auth_on_loopback = true;
            self.managesieve.allow_plaintext_auth_on_loopback = true;
            self.jmap.allow_plaintext_auth_on_loopback = true;
        }
        if let Some(m) = args.max_message_bytes {
            self.smtp.max_message_bytes = m;
        }
        self
    }

    /// How many commit batchers share the deliveries: the configured
    /// number, else one on SQLite and [`FDB_BATCHERS`] on FoundationDB.
    ///
    /// SQLite has one writer: a second batcher only splits the stream into
    /// two half-size batches that queue for it in turn, and each batch stops
    /// growing while it waits. One batcher's next batch takes everything
    /// that arrived during its commit (mean batch 4.6 → 7.9 when the default
    /// went from two to one). Group commit does not change that: two
    /// batchers measured 1,602 against 1,802 msg/s, their reads (0.5 ms)
    /// too short beside a commit (2.5 ms) to overlap it
    /// (soak/reports/ingest-2026-12-04.md). FoundationDB commits in
    /// parallel, so its batchers overlap their reads and commit latency.
    pub fn batchers(&self) -> usize {
        self.batchers.unwrap_or(match self.kv() {
            KvConfig::Sqlite { .. } => 1,
            KvConfig::Fdb { .. } => FDB_BATCHERS,
        })
    }

    pub fn kv(&self) -> KvConfig {
        let mut kv = self
            .store
            .clone()
            .unwrap_or_else(|| KvConfig::sqlite_in(&self.data_dir));
        if let KvConfig::Sqlite { path, .. } = &mut kv
            && path.as_os_str().is_empty()
        {
            *path = self.data_dir.join("meshmail.sqlite");
        }
        kv
    }

    pub fn blob_config(&self) -> BlobConfig {
        self.blobs.clone().unwrap_or_else(|| BlobConfig::Local {
            dir: self.data_dir.join("blobs"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example configs in ops/ must stay loadable as the code changes.
    #[test]
    fn shipped_configs_parse() {
        for text in [
            include_str!("../../ops/config/dev.toml"),
            include_str!("../../ops/config/production.toml"),
        ] {
            let cfg: Config = toml::from_str(text).expect("config parses");
            assert!(cfg.listen.http.is_some());
        }
        let prod: Config = toml::from_str(include_str!("../../ops/config/production.toml")).unwrap();
        assert_eq!(prod.listen.smtp.unwrap().port(), 25);
        assert_eq!(prod.listen.imaps.unwrap().port(), 993);
        assert_eq!(prod.pop3.listen.unwrap().port(), 110);
        assert_eq!(prod.pop3.listen_tls.unwrap().port(), 995);
        assert_eq!(prod.managesieve.listen.unwrap().port(), 4190);
        assert!(matches!(prod.store, Some(KvConfig::Fdb { .. })));
        assert_eq!(prod.auth.failures_per_ip_max, 10);
        assert_eq!(prod.auth.failure_window_s, 300);
        assert_eq!((prod.mesh.dead_after_ms, prod.mesh.drain_deadline_ms), (1000, 500));
        assert_eq!((prod.imap.search_cache_mb, prod.imap.hot_cache_mb), (256, 128));
        assert_eq!(prod.batchers(), FDB_BATCHERS, "FoundationDB commits in parallel");
        // dev.toml spells out the defaults.
        let dev: Config = toml::from_str(include_str!("../../ops/config/dev.toml")).unwrap();
        let d = MeshSection::default();
        let keys = |m: &MeshSection| {
            (
                m.keep_alive_ms,
                m.idle_timeout_ms,
                m.suspect_after_ms,
                m.dead_after_ms,
                m.redial_min_ms,
                m.redial_max_ms,
                m.moves_per_round,
                m.drain_deadline_ms,
            )
        };
        assert_eq!(keys(&dev.mesh), keys(&d));
        assert_eq!(dev.batchers(), 1, "SQLite has one writer");
        let p = crate::config_pop3::Pop3Section::default();
        let pop3 = |c: &crate::config_pop3::Pop3Section| {
            (
                c.listen,
                c.listen_tls,
                c.max_sessions_per_account,
                c.max_connections,
                c.idle_timeout_s,
            )
        };
        assert_eq!(pop3(&dev.pop3), pop3(&p));
        let m = crate::config_managesieve::ManageSieveSection::default();
        let managesieve = |c: &crate::config_managesieve::ManageSieveSection| {
            (
                c.listen,
                c.allow_plaintext_auth_on_loopback,
                c.max_connections,
                c.idle_timeout_s,
            )
        };
        assert_eq!(managesieve(&dev.managesieve), managesieve(&m));
        let c = crate::config_compactor::CompactorSection::default();
        assert_eq!(
            (dev.compactor.interval_s, dev.compactor.change_log_window),
            (c.interval_s, c.change_log_window)
        );
        assert_eq!(c.settings().change_log_window, 10_000);
        let set: Config = toml::from_str("batchers = 3").unwrap();
        assert_eq!(set.batchers(), 3);
    }

    /// A `[store]` of kind sqlite without a path is the data directory's
    /// file, with the settings given (how `bench smtp --node-config`
    /// changes one setting of a node whose data directory it chose).
    #[test]
    fn a_sqlite_store_without_a_path_is_the_data_dirs_file() {
        use meshmail_storage::kv::sqlite::checkpoint::CheckpointMode;
        let mut cfg: Config = toml::from_str("[store]\nkind = \"sqlite\"\ncheckpoint = \"in_commit\"\n").unwrap();
        cfg.data_dir = PathBuf::from("/srv/mm");
        let KvConfig::Sqlite {
            path,
            checkpoint,
            fsync,
            ..
        } = cfg.kv()
        else {
            panic!("not sqlite: {:?}", cfg.kv());
        };
        assert_eq!(path, PathBuf::from("/srv/mm/meshmail.sqlite"));
        assert_eq!(checkpoint, CheckpointMode::InCommit);
        assert!(fsync, "fsync stays on by default");
        let dflt: Config = toml::from_str("").unwrap();
        let KvConfig::Sqlite { checkpoint, .. } = dflt.kv() else {
            panic!()
        };
        assert_eq!(checkpoint, CheckpointMode::Background);
    }

    #[test]
    fn outbound_defaults_and_keys() {
        let cfg: Config = toml::from_str("").unwrap();
        assert_eq!(
            cfg.outbound.retry_schedule_s,
            vec![60, 300, 900, 1800, 3600, 7200, 14400]
        );
        assert_eq!(cfg.outbound.max_lifetime_s, 5 * 24 * 3600);
        let rt = cfg.outbound.runtime("x").unwrap();
        assert!(rt.mta_sts.enabled);
        assert_eq!(rt.mta_sts.port, 443);
        assert_eq!(rt.mta_sts.fetch_timeout.as_secs(), 20);
        let cfg: Config = toml::from_str(
            "[outbound]\nretry_schedule_s = [1, 2]\nmax_lifetime_s = 5\nrelay = \"127.0.0.1:2526\"\nmx_port = 2599\n",
        )
        .unwrap();
        let rt = cfg.outbound.runtime("mx.local.test").unwrap();
        assert_eq!(rt.retry_delay(1).as_secs(), 1);
        assert_eq!(rt.retry_delay(9).as_secs(), 2, "the last delay repeats");
        assert_eq!(rt.relay.unwrap().port, 2526);
        assert!(
            toml::from_str::<Config>("[outbound]\nretry = 1\n").is_err(),
            "unknown keys are refused"
        );
        let bad: Config = toml::from_str("[outbound]\nrelay = \"nohost\"\n").unwrap();
        assert!(bad.outbound.runtime("x").is_err());
    }

    #[test]
    fn listeners_can_be_turned_off() {
        let cfg: Config = toml::from_str("[listen]\nsmtp = \"off\"\n").unwrap();
        assert!(cfg.listen.smtp.is_none());
        assert_eq!(cfg.listen.imap.unwrap().port(), 1143);
    }
}
