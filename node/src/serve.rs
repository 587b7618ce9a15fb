//! `meshmail serve`, the node's composition root: open the store and take
//! a new generation, start the actors, the mesh (which grants the shard
//! leases) and the outbound runner, start the listeners
//! (`serve_listeners.rs`), announce readiness, serve until interrupted.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use meshmail_actors::node::{self as actor_node, NodeCtx, NodeIdentity};
use meshmail_storage::Database;
use meshmail_storage::blob::BlobStore;
use meshmail_storage::model::nodes;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use ractor::ActorRef;

use crate::config::Config;
use crate::http::NodeInfo;
use crate::serve_listeners::{self, Services};
use crate::vitals::Vitals;

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
    let metrics = install_metrics()?;
    let (db, ctx, generation) = open_node(&cfg).await?;
    let mut vitals = Vitals::default();
    let (supervisor, sup_handle) = actor_node::start(ctx.clone())
        .await
        .map_err(|e| anyhow::anyhow!("starting the node supervisor: {e}"))?;
    vitals.watch("root supervisor", sup_handle);
    let formats = cfg.upgrade.formats()?;
    let format_watch = crate::store::watch_format(db.clone(), formats, cfg.node_name.clone(), generation);
    vitals.watch("store format watch", format_watch);
    // Shard leases come from the mesh's control loop (alone, it takes them all).
    let mesh = crate::mesh::start(&cfg, &ctx, &mut vitals)
        .await
        .context("starting the mesh")?;
    let services = Services::new(&cfg, &ctx)?;
    if opts.sink {
        tracing::warn!("--bench-sink: SMTP answers 250 WITHOUT STORING ANYTHING (benchmark mode)");
    }
    // Outbound delivery: the queue runner runs the queue items of the
    // shards whose lease this node holds (granted by the mesh above).
    let outbound = start_outbound(&cfg, &ctx, &services.dns, &mut vitals).await?;
    let mut endpoints = Vec::new();
    if let Some(e) = mesh.endpoint() {
        endpoints.push(format!("mesh={}", e.local_addr()?));
    }
    endpoints.extend(serve_listeners::start_smtp(&cfg, &services, opts.sink, &mut vitals).await?);
    endpoints.extend(serve_listeners::start_imap(&cfg, &services, &mut vitals).await?);
    endpoints.extend(serve_listeners::start_pop3(&cfg, &services, &mut vitals).await?);
    endpoints.extend(serve_listeners::start_managesieve(&cfg, &services, &mut vitals).await?);
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
        formats,
    });
    let http = serve_listeners::start_http(&cfg, &services, info.clone(), &mut vitals, &mut endpoints).await?;
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
    serve_until_shutdown(http, cfg.jmap.max_connections, vitals).await
}

/// The Prometheus recorder with this node's histogram buckets, every
/// metric's HELP text, and the task that keeps it from growing.
fn install_metrics() -> anyhow::Result<PrometheusHandle> {
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
    Ok(metrics)
}

/// Opens the store and the blob store, checks the cluster's shard count
/// and takes this node's new generation: the node's context.
async fn open_node(cfg: &Config) -> anyhow::Result<(Database, Arc<NodeCtx>, u64)> {
    let db = crate::store::open(cfg).await?;
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
    let me = nodes::Registration {
        name: cfg.node_name.clone(),
        mesh_addr,
        build: crate::cli::BUILD.to_string(),
        formats: cfg.upgrade.formats()?,
    };
    let generation = nodes::register(&db, &me).await?;
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
    Ok((db, ctx, generation))
}

/// The outbound queue runner, when `[outbound] enabled`.
async fn start_outbound(
    cfg: &Config,
    ctx: &Arc<NodeCtx>,
    dns: &meshmail_protocols::dns::Dns,
    vitals: &mut Vitals,
) -> anyhow::Result<Option<ActorRef<meshmail_protocols::outbound::runner::SupervisorMsg>>> {
    if !cfg.outbound.enabled {
        return Ok(None);
    }
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
    Ok(Some(runner))
}

/// Serves HTTP until SIGINT/SIGTERM. Crash-only: a vital task that ends
/// takes the node down with it (exit status 1), rather than leaving a
/// process that answers but cannot serve.
async fn serve_until_shutdown(
    http: serve_listeners::Http,
    max_connections: usize,
    vitals: Vitals,
) -> anyhow::Result<()> {
    let serving = async move {
        match http.listener {
            Some(l) => axum::serve(
                crate::http_cap::Capped::new(l, max_connections, "http"),
                http.router
                    .into_make_service_with_connect_info::<crate::http_jmap::PeerInfo>(),
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
