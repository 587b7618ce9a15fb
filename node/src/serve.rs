//! `meshmail serve`: open the store, take a new generation and the shard
//! leases, start the actors and the listeners, serve until interrupted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::{self as actor_node, NodeCtx, NodeIdentity};
use meshmail_protocols::imap::session::ImapShared;
use meshmail_protocols::smtp::session::{Mode, SmtpShared};
use meshmail_storage::blob::BlobStore;
use meshmail_storage::model::nodes;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::config::Config;
use crate::http::{self, NodeInfo};
use crate::vitals::Vitals;
use crate::{listeners, tls};

/// Seconds, from 50 µs to 10 s: covers a cached read up to a stalled commit.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Batch sizes: powers of two up to the batcher's maximum.
const COUNT_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
/// Sizes in bytes: 1 KiB to 10 MB (FDB's transaction limit).
const BYTE_BUCKETS: &[f64] = &[
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    10_000_000.0,
];

/// Queue-to-remote latency: 100 ms to a day (retries stretch it to hours).
const QUEUE_LATENCY_BUCKETS_S: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0,
];

pub struct ServeOptions {
    pub sink: bool,
}

/// A mail server holds a socket per client: lift the soft open-files limit
/// to the hard one instead of failing at the default 1,024.
fn raise_open_files_limit() {
    // SAFETY: getrlimit/setrlimit on this process with a valid struct.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                tracing::warn!("could not raise the open-files limit");
            }
        }
    }
}

pub async fn run(cfg: Config, opts: ServeOptions) -> anyhow::Result<()> {
    let started = Instant::now();
    raise_open_files_limit();
    warn_if_fault_hooks();
    let metrics = PrometheusBuilder::new()
        // Histograms (not summaries) so they aggregate across nodes.
        .set_buckets(LATENCY_BUCKETS_S)
        .context("metrics buckets")?
        .set_buckets_for_metric(Matcher::Full("meshmail_batch_deliveries".into()), COUNT_BUCKETS)
        .context("metrics buckets")?
        .set_buckets_for_metric(Matcher::Suffix("_bytes".into()), BYTE_BUCKETS)
        .context("metrics buckets")?
        .set_buckets_for_metric(
            Matcher::Full("meshmail_outbound_delivery_seconds".into()),
            QUEUE_LATENCY_BUCKETS_S,
        )
        .context("metrics buckets")?
        .install_recorder()
        .context("installing the metrics recorder")?;
    crate::metrics_help::describe_all();
    // Histogram samples pile up in the recorder until a render drains them:
    // a node nobody scrapes must not grow for that.
    let upkeep = metrics.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
            // SQLite's own heap (page caches): 0 under FoundationDB.
            metrics::gauge!("meshmail_kv_sqlite_heap_bytes").set(meshmail_storage::kv::sqlite::heap_bytes() as f64);
            crate::allocator::publish_stats();
        }
    });
    let db = crate::store::open(&cfg).await?;
    let blobs = BlobStore::open(&cfg.blob_config(), cfg.inline_max_bytes)
        .await
        .with_context(|| format!("opening the blob store ({:?})", cfg.blob_config()))?;
    let mesh_addr = cfg
        .mesh
        .advertise
        .or(cfg.mesh.listen)
        .map(|a| a.to_string())
        .unwrap_or_default();
    check_shard_count(&db, cfg.shard_count).await?;
    let generation = nodes::register_start(&db, &cfg.node_name, &mesh_addr).await?;
    metrics::gauge!("meshmail_node_generation").set(generation as f64);
    let identity = NodeIdentity {
        name: cfg.node_name.clone(),
        generation,
    };
    let ctx = NodeCtx::with_compactor(
        db.clone(),
        blobs,
        identity,
        cfg.shard_count,
        cfg.batchers(),
        cfg.compactor.settings(),
    );
    let mut vitals = Vitals::default();
    let (supervisor, sup_handle) = actor_node::start(ctx.clone())
        .await
        .map_err(|e| anyhow::anyhow!("starting the node supervisor: {e}"))?;
    vitals.watch("root supervisor", sup_handle);
    vitals.watch("store format watch", crate::store::watch_format(db.clone()));
    // Shard leases come from the mesh's control loop (alone, it takes them all).
    let mesh = crate::mesh::start(&cfg, &ctx, &mut vitals)
        .await
        .context("starting the mesh")?;

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
    let auth = Authenticator::new(db.clone(), threads, cfg.auth.limits());
    let tls = tls::acceptor(
        cfg.tls.cert.as_deref(),
        cfg.tls.key.as_deref(),
        &cfg.data_dir,
        &cfg.hostname,
    )?;
    if opts.sink {
        tracing::warn!("--bench-sink: SMTP answers 250 WITHOUT STORING ANYTHING (benchmark mode)");
    }

    let dns = meshmail_protocols::dns::Dns::new(cfg.dns.resolver, Duration::from_millis(cfg.dns.timeout_ms))
        .context("setting up the DNS resolver")?;

    let routing = cfg.smtp.routing()?;
    // Outbound delivery: the queue runner runs the queue items of the
    // shards whose lease this node holds (granted by the mesh above).
    let outbound = if cfg.outbound.enabled {
        let tls_ca = match &cfg.outbound.tls_ca_file {
            Some(p) => Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?),
            None => None,
        };
        let roots = meshmail_protocols::outbound::client::TlsRoots::load(tls_ca.as_deref())
            .map_err(|e| anyhow::anyhow!("outbound TLS roots: {e}"))?;
        let o = meshmail_protocols::outbound::Outbound::new(
            ctx.clone(),
            dns.clone(),
            cfg.outbound.runtime(&cfg.hostname)?,
            Some(roots),
        );
        let (runner, handle) = meshmail_protocols::outbound::runner::start(o)
            .await
            .map_err(|e| anyhow::anyhow!("starting the outbound queue runner: {e}"))?;
        vitals.watch("outbound runner supervisor", handle);
        Some(runner)
    } else {
        None
    };

    let mut endpoints = Vec::new();
    let rcpt_cache = cfg.smtp.rcpt_cache();
    if let Some(e) = mesh.endpoint() {
        endpoints.push(format!("mesh={}", e.local_addr()?));
    }
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
        let shared = Arc::new(SmtpShared {
            ctx: ctx.clone(),
            auth: auth.clone(),
            tls: Some(tls.clone()),
            hostname: cfg.hostname.clone(),
            mode,
            max_message_bytes: cfg.smtp.max_message_bytes,
            max_recipients: cfg.smtp.max_recipients,
            allow_plaintext_auth_on_loopback: cfg.smtp.allow_plaintext_auth_on_loopback,
            idle_timeout: Duration::from_secs(cfg.smtp.idle_timeout_s),
            delivery_timeout: Duration::from_secs(cfg.smtp.delivery_timeout_s),
            dns: dns.clone(),
            routing: routing.clone(),
            rcpt_cache: rcpt_cache.clone(),
            inbound_auth: cfg.smtp.inbound_auth(),
            sink: opts.sink,
        });
        let bound = listeners::spawn_smtp(name, addr, cfg.listen.smtp_max_connections, shared, &mut vitals).await?;
        endpoints.push(format!("{name}={bound}"));
    }

    // One envelope cache for both IMAP listeners.
    let envelopes = (cfg.imap.search_cache_mb > 0).then(|| {
        let bytes = usize::try_from(cfg.imap.search_cache_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        Arc::new(meshmail_protocols::imap::envelope_cache::EnvelopeCache::new(bytes))
    });
    // And one hot-row cache.
    let hot_rows = (cfg.imap.hot_cache_mb > 0).then(|| {
        let bytes = usize::try_from(cfg.imap.hot_cache_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        Arc::new(meshmail_protocols::imap::hot_row_cache::HotRowCache::new(bytes))
    });
    for (name, addr, implicit_tls) in [("imap", cfg.listen.imap, false), ("imaps", cfg.listen.imaps, true)] {
        let Some(addr) = addr else { continue };
        let shared = Arc::new(ImapShared {
            ctx: ctx.clone(),
            auth: auth.clone(),
            tls: Some(tls.clone()),
            implicit_tls,
            hostname: cfg.hostname.clone(),
            allow_plaintext_auth_on_loopback: cfg.imap.allow_plaintext_auth_on_loopback,
            max_literal_bytes: cfg.imap.max_literal_bytes.unwrap_or(cfg.smtp.max_message_bytes),
            max_sessions_per_account: cfg.imap.max_sessions_per_account,
            sessions_per_account: Default::default(),
            envelopes: envelopes.clone(),
            hot_rows: hot_rows.clone(),
            park_idle_after: (cfg.imap.park_idle_after_secs > 0)
                .then(|| std::time::Duration::from_secs(cfg.imap.park_idle_after_secs)),
        });
        let bound = listeners::spawn_imap(name, addr, cfg.listen.imap_max_connections, shared, &mut vitals).await?;
        endpoints.push(format!("{name}={bound}"));
    }

    let jmap = jmap_shared(&cfg, &ctx, &auth, &tls, &dns);
    let info = Arc::new(NodeInfo {
        name: cfg.node_name.clone(),
        generation,
        started,
        db,
        metrics,
        ctx: ctx.clone(),
        mesh: mesh.clone(),
        liveness: vitals.liveness(),
        supervisor: supervisor.get_cell(),
        outbound_supervisor: outbound.as_ref().map(|o| o.get_cell()),
    });
    let http_listener = match cfg.listen.http {
        Some(addr) => {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding the HTTP listener on {addr}"))?;
            endpoints.push(format!("http={}", l.local_addr()?));
            Some(l)
        }
        None => None,
    };
    let router = http::router(info.clone())
        .merge(crate::http_jmap::routes(jmap))
        .layer(cors(&cfg));
    if let Some(addr) = cfg.listen.https {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the HTTPS listener on {addr}"))?;
        endpoints.push(format!("https={}", l.local_addr()?));
        let tls_listener = crate::http_cap::Capped::new(
            crate::https::TlsListener::new(l, tls.clone())?,
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
    tracing::info!(
        node = %cfg.node_name,
        generation,
        data_dir = %cfg.data_dir.display(),
        backend = info.db.backend_name(),
        shards = ctx.owned_shards(),
        mesh_settled = mesh.settled(),
        endpoints = %endpoints.join(" "),
        "meshmail node ready"
    );
    // A line scripts and tests can wait for (ports may have been 0).
    println!(
        "meshmail ready: node={} generation={generation} {}",
        cfg.node_name,
        endpoints.join(" ")
    );

    let serving = async move {
        match http_listener {
            Some(l) => axum::serve(
                crate::http_cap::Capped::new(l, cfg.jmap.max_connections, "http"),
                router.into_make_service_with_connect_info::<crate::http_jmap::PeerInfo>(),
            )
            .with_graceful_shutdown(shutdown_signal())
            .await
            .context("HTTP listener failed"),
            None => {
                shutdown_signal().await;
                Ok(())
            }
        }
    };
    // Crash-only: a vital task that ends takes the node down with it (exit
    // status 1), rather than leaving a process that answers but cannot serve.
    tokio::select! {
        result = serving => result?,
        death = vitals.first_death() => {
            tracing::error!(cause = %death, "a vital task of the node ended: exiting (crash-only)");
            anyhow::bail!("{death}: the node cannot serve without it");
        }
    }
    tracing::info!("meshmail node stopped");
    Ok(())
}

/// JMAP's shared state: its limits from `[jmap]`, and the submission
/// settings EmailSubmission hands messages to the SMTP acceptance path with.
fn jmap_shared(
    cfg: &Config,
    ctx: &Arc<NodeCtx>,
    auth: &Arc<Authenticator>,
    tls: &tokio_rustls::TlsAcceptor,
    dns: &meshmail_protocols::dns::Dns,
) -> Arc<meshmail_protocols::jmap::JmapShared> {
    let smtp = Arc::new(SmtpShared {
        ctx: ctx.clone(),
        auth: auth.clone(),
        tls: Some(tls.clone()),
        hostname: cfg.hostname.clone(),
        mode: Mode::Submission { implicit_tls: false },
        max_message_bytes: cfg.smtp.max_message_bytes,
        max_recipients: cfg.smtp.max_recipients,
        allow_plaintext_auth_on_loopback: cfg.smtp.allow_plaintext_auth_on_loopback,
        idle_timeout: Duration::from_secs(cfg.smtp.idle_timeout_s),
        delivery_timeout: Duration::from_secs(cfg.smtp.delivery_timeout_s),
        dns: dns.clone(),
        // Validated at startup (serve fails on a bad separator first).
        routing: cfg.smtp.routing().unwrap_or_default(),
        // JMAP submission resolves recipients through `resolve_recipient`.
        rcpt_cache: None,
        inbound_auth: None,
        sink: false,
    });
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
    meshmail_protocols::jmap::JmapShared::new(
        ctx.clone(),
        auth.clone(),
        smtp,
        limits,
        j.allow_plaintext_auth_on_loopback,
    )
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

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}

/// Says loudly when this process will honour fault-injection requests.
fn warn_if_fault_hooks() {
    if meshmail_actors::faults::hooks_enabled() {
        tracing::warn!("fault hooks are ON (a fault-hooks build with MESHMAIL_FAULT_HOOKS=1): never in production");
    }
}

/// The shard count is a fact of the cluster, fixed at its first start: a
/// node configured with another count would put an account in a second
/// shard with a second writer, so it refuses to start.
async fn check_shard_count(db: &meshmail_storage::Database, configured: u32) -> anyhow::Result<()> {
    use meshmail_storage::model::cluster::{self, ShardCountCheck};
    let check = db
        .run("cluster_shard_count", move |txn| async move {
            cluster::check_shard_count(&txn, configured).await
        })
        .await
        .context("checking the cluster's shard count")?;
    match check {
        ShardCountCheck::Recorded => {
            tracing::info!(
                shard_count = configured,
                "first start of this cluster: shard_count recorded"
            );
            Ok(())
        }
        ShardCountCheck::Matches => Ok(()),
        ShardCountCheck::Mismatch { cluster } => anyhow::bail!(
            "this cluster has shard_count = {cluster} (fixed at its first start) but this node is configured \
             with shard_count = {configured}: refusing to start, because two counts would put one account in \
             two shards with two writers. Set shard_count = {cluster} in the node's config."
        ),
    }
}
