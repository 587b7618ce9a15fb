//! The node's listeners, as `serve` starts them: SMTP (MX, submission,
//! submissions, LMTP), IMAP and IMAPS, POP3 and POP3S, ManageSieve, and HTTP/HTTPS (status, metrics,
//! admin, JMAP, webmail). Each is built from the [`Services`] every
//! protocol shares and the address the config gives (`[listen]`, or
//! `[pop3] listen` and `listen_tls`, `[managesieve] listen`; absent:
//! not started); each returns `name=bound address` for the ready line.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::NodeCtx;
use meshmail_protocols::dns::Dns;
use meshmail_protocols::imap::session::ImapShared;
use meshmail_protocols::imap::session::envelope_cache::EnvelopeCache;
use meshmail_protocols::imap::session::hot_row_cache::HotRowCache;
use meshmail_protocols::jmap::JmapShared;
use meshmail_protocols::managesieve::session::ManageSieveShared;
use meshmail_protocols::pop3::session::Pop3Shared;
use meshmail_protocols::smtp::session::{Mode, SmtpShared};

use crate::config::Config;
use crate::http::{self, NodeInfo};
use crate::vitals::Vitals;
use crate::{listeners, tls};

/// What every protocol's sessions share: the node's context, the
/// authenticator (its failure limits span protocols), TLS and DNS.
pub struct Services {
    pub ctx: Arc<NodeCtx>,
    pub auth: Arc<Authenticator>,
    pub tls: tokio_rustls::TlsAcceptor,
    pub dns: Dns,
}

impl Services {
    pub fn new(cfg: &Config, ctx: &Arc<NodeCtx>) -> anyhow::Result<Services> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
        let auth = Authenticator::new(ctx.db.clone(), threads, cfg.auth.limits());
        let tls = tls::acceptor(
            cfg.tls.cert.as_deref(),
            cfg.tls.key.as_deref(),
            &cfg.data_dir,
            &cfg.hostname,
        )?;
        let dns = Dns::new(cfg.dns.resolver, Duration::from_millis(cfg.dns.timeout_ms))
            .context("setting up the DNS resolver")?;
        Ok(Services {
            ctx: ctx.clone(),
            auth,
            tls,
            dns,
        })
    }
}

/// One SMTP-family listener's settings (`mode` says which). `sink`: the
/// benchmark mode that stores nothing. `rcpt_cache`: one cache shared by
/// the SMTP listeners; JMAP submission has none (it resolves recipients
/// itself) and checks no inbound authentication.
fn smtp_shared(
    cfg: &Config,
    s: &Services,
    mode: Mode,
    rcpt_cache: Option<Arc<meshmail_protocols::accept::rcpt_cache::RcptCache>>,
    inbound_checks: bool,
    sink: bool,
) -> anyhow::Result<SmtpShared> {
    Ok(SmtpShared {
        ctx: s.ctx.clone(),
        auth: s.auth.clone(),
        tls: Some(s.tls.clone()),
        hostname: cfg.hostname.clone(),
        mode,
        max_message_bytes: cfg.smtp.max_message_bytes,
        max_recipients: cfg.smtp.max_recipients,
        allow_plaintext_auth_on_loopback: cfg.smtp.allow_plaintext_auth_on_loopback,
        idle_timeout: Duration::from_secs(cfg.smtp.idle_timeout_s),
        delivery_timeout: Duration::from_secs(cfg.smtp.delivery_timeout_s),
        dns: s.dns.clone(),
        routing: cfg.smtp.routing()?,
        rcpt_cache,
        inbound_auth: if inbound_checks { cfg.smtp.inbound_auth() } else { None },
        sink,
    })
}

/// The SMTP, submission, submissions and LMTP listeners the config names.
pub async fn start_smtp(cfg: &Config, s: &Services, sink: bool, vitals: &mut Vitals) -> anyhow::Result<Vec<String>> {
    let rcpt_cache = cfg.smtp.rcpt_cache();
    let mut endpoints = Vec::new();
    for (name, addr, mode) in [
        ("smtp", cfg.listen.smtp, Mode::Mx),
        (
            "submission",
            cfg.listen.submission,
            Mode::Submission { implicit_tls: false },
        ),
        (
            "submissions",
            cfg.listen.submissions,
            Mode::Submission { implicit_tls: true },
        ),
        ("lmtp", cfg.listen.lmtp, Mode::Lmtp),
    ] {
        let Some(addr) = addr else { continue };
        let shared = Arc::new(smtp_shared(cfg, s, mode, rcpt_cache.clone(), true, sink)?);
        let bound = listeners::spawn_smtp(name, addr, cfg.listen.smtp_max_connections, shared, vitals).await?;
        endpoints.push(format!("{name}={bound}"));
    }
    Ok(endpoints)
}

/// The IMAP and IMAPS listeners the config names, sharing one envelope
/// cache and one hot-row cache.
pub async fn start_imap(cfg: &Config, s: &Services, vitals: &mut Vitals) -> anyhow::Result<Vec<String>> {
    let mib = |mb: u64| usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let envelopes = (cfg.imap.search_cache_mb > 0).then(|| Arc::new(EnvelopeCache::new(mib(cfg.imap.search_cache_mb))));
    let hot_rows = (cfg.imap.hot_cache_mb > 0).then(|| Arc::new(HotRowCache::new(mib(cfg.imap.hot_cache_mb))));
    let mut endpoints = Vec::new();
    for (name, addr, implicit_tls) in [("imap", cfg.listen.imap, false), ("imaps", cfg.listen.imaps, true)] {
        let Some(addr) = addr else { continue };
        let shared = Arc::new(ImapShared {
            ctx: s.ctx.clone(),
            auth: s.auth.clone(),
            tls: Some(s.tls.clone()),
            implicit_tls,
            hostname: cfg.hostname.clone(),
            allow_plaintext_auth_on_loopback: cfg.imap.allow_plaintext_auth_on_loopback,
            max_literal_bytes: cfg.imap.max_literal_bytes.unwrap_or(cfg.smtp.max_message_bytes),
            max_sessions_per_account: cfg.imap.max_sessions_per_account,
            sessions_per_account: Default::default(),
            envelopes: envelopes.clone(),
            hot_rows: hot_rows.clone(),
            park_idle_after: (cfg.imap.park_idle_after_secs > 0)
                .then(|| Duration::from_secs(cfg.imap.park_idle_after_secs)),
        });
        let bound = listeners::spawn_imap(name, addr, cfg.listen.imap_max_connections, shared, vitals).await?;
        endpoints.push(format!("{name}={bound}"));
    }
    Ok(endpoints)
}

/// The POP3 (STLS) and POP3S (implicit TLS) listeners `[pop3]` names.
pub async fn start_pop3(cfg: &Config, s: &Services, vitals: &mut Vitals) -> anyhow::Result<Vec<String>> {
    let c = &cfg.pop3;
    let mut endpoints = Vec::new();
    for (name, addr, implicit_tls) in [("pop3", c.listen, false), ("pop3s", c.listen_tls, true)] {
        let Some(addr) = addr else { continue };
        let shared = Arc::new(Pop3Shared {
            ctx: s.ctx.clone(),
            auth: s.auth.clone(),
            tls: Some(s.tls.clone()),
            implicit_tls,
            allow_plaintext_auth_on_loopback: c.allow_plaintext_auth_on_loopback,
            idle_timeout: c.idle_timeout(),
            max_sessions_per_account: c.max_sessions_per_account,
            sessions_per_account: Default::default(),
        });
        let bound = listeners::spawn_pop3(name, addr, c.max_connections, shared, vitals).await?;
        endpoints.push(format!("{name}={bound}"));
    }
    Ok(endpoints)
}

/// The ManageSieve listener `[managesieve] listen` names (STARTTLS only:
/// RFC 5804 has no implicit-TLS port).
pub async fn start_managesieve(cfg: &Config, s: &Services, vitals: &mut Vitals) -> anyhow::Result<Vec<String>> {
    let c = &cfg.managesieve;
    let Some(addr) = c.listen else { return Ok(Vec::new()) };
    let shared = Arc::new(ManageSieveShared {
        ctx: s.ctx.clone(),
        auth: s.auth.clone(),
        tls: Some(s.tls.clone()),
        allow_plaintext_auth_on_loopback: c.allow_plaintext_auth_on_loopback,
        idle_timeout: c.idle_timeout(),
    });
    let bound = listeners::spawn_managesieve("managesieve", addr, c.max_connections, shared, vitals).await?;
    Ok(vec![format!("managesieve={bound}")])
}

/// The plain HTTP listener (served by `serve` until shutdown) and the
/// router it serves.
pub struct Http {
    pub listener: Option<tokio::net::TcpListener>,
    pub router: axum::Router,
}

/// Binds the HTTP listener and starts the HTTPS one (its own accept loop,
/// a vital task), both serving the status, admin and JMAP routes.
pub async fn start_http(
    cfg: &Config,
    s: &Services,
    info: Arc<NodeInfo>,
    vitals: &mut Vitals,
    endpoints: &mut Vec<String>,
) -> anyhow::Result<Http> {
    let listener = match cfg.listen.http {
        Some(addr) => {
            let l = bind(addr, "HTTP").await?;
            endpoints.push(format!("http={}", l.local_addr()?));
            Some(l)
        }
        None => None,
    };
    let router = http::router(info)
        .merge(crate::http_jmap::routes(jmap_shared(cfg, s)?))
        .merge(crate::http_import::routes(s.ctx.clone(), cfg.smtp.max_message_bytes))
        .merge(crate::http_day_one::routes(s.ctx.db.clone(), cfg.public_face()))
        .layer(cors(cfg));
    if let Some(addr) = cfg.listen.https {
        let l = bind(addr, "HTTPS").await?;
        endpoints.push(format!("https={}", l.local_addr()?));
        let tls_listener = crate::http_cap::Capped::new(
            crate::https::TlsListener::new(l, s.tls.clone())?,
            cfg.jmap.max_connections,
            "https",
        );
        let service = router
            .clone()
            .into_make_service_with_connect_info::<crate::http_jmap::PeerInfo>();
        let https = tokio::spawn(async move {
            if let Err(e) = axum::serve(tls_listener, service).await {
                tracing::error!(error = %e, "HTTPS listener failed");
            }
        });
        vitals.watch("https accept loop", https);
    }
    Ok(Http { listener, router })
}

async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} listener on {addr}"))
}

/// JMAP's shared state: its limits from `[jmap]`, and the submission
/// settings EmailSubmission hands messages to the SMTP acceptance path with.
fn jmap_shared(cfg: &Config, s: &Services) -> anyhow::Result<Arc<JmapShared>> {
    let submission = Mode::Submission { implicit_tls: false };
    let smtp = Arc::new(smtp_shared(cfg, s, submission, None, false, false)?);
    let j = &cfg.jmap;
    let limits = meshmail_protocols::jmap::Limits {
        max_size_request: j.max_size_request_bytes,
        max_size_upload: j.max_size_upload_bytes,
        max_concurrent_requests: j.max_concurrent_requests,
        max_calls_in_request: j.max_calls_in_request,
        max_objects_in_get: j.max_objects_in_get,
        max_objects_in_set: j.max_objects_in_set,
        ..Default::default()
    };
    Ok(JmapShared::new(
        s.ctx.clone(),
        s.auth.clone(),
        smtp,
        limits,
        j.allow_plaintext_auth_on_loopback,
    ))
}

/// CORS for a JMAP front end served from another origin. Credentials
/// travel in the Authorization header (never cookies), so no
/// `Allow-Credentials`; the header must be listed, a wildcard does not
/// cover it.
fn cors(cfg: &Config) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, Method, header};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let origins: Vec<axum::http::HeaderValue> = cfg
        .jmap
        .cors_allow_origins
        .iter()
        .filter_map(|o| o.parse().ok())
        .collect();
    let allow = if origins.is_empty() {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins)
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("accept"),
        ])
        .expose_headers([header::CONTENT_DISPOSITION])
        .max_age(Duration::from_secs(3600))
}
