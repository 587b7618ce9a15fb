//! `meshmail serve`: open the store, take a new generation, serve until
//! interrupted.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use meshmail_storage::model::nodes;
use meshmail_storage::open::open_kv;
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::config::Config;
use crate::http::{self, NodeInfo};

/// Seconds, from 50 µs to 10 s: covers a cached read up to a stalled commit.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub async fn run(cfg: Config) -> anyhow::Result<()> {
    let started = Instant::now();
    let metrics = PrometheusBuilder::new()
        // Histograms (not summaries) so they aggregate across nodes.
        .set_buckets(LATENCY_BUCKETS_S)
        .context("metrics buckets")?
        .install_recorder()
        .context("installing the metrics recorder")?;
    let db = open_kv(&cfg.kv()).with_context(|| format!("opening the store ({:?})", cfg.kv()))?;
    let generation = nodes::register_start(&db, &cfg.node_name, "").await?;
    metrics::gauge!("meshmail_node_generation").set(generation as f64);

    let listener = tokio::net::TcpListener::bind(cfg.listen.http)
        .await
        .with_context(|| format!("binding the HTTP listener on {}", cfg.listen.http))?;
    let http_addr = listener.local_addr()?;
    let info = Arc::new(NodeInfo {
        name: cfg.node_name.clone(),
        generation,
        started,
        db,
        metrics,
    });
    tracing::info!(
        node = %cfg.node_name,
        generation,
        data_dir = %cfg.data_dir.display(),
        backend = info.db.backend_name(),
        http = %http_addr,
        "meshmail node ready"
    );
    // A line scripts and tests can wait for (the port may have been 0).
    println!(
        "meshmail ready: node={} generation={generation} http={http_addr}",
        cfg.node_name
    );

    axum::serve(listener, http::router(info))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("HTTP listener failed")?;
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
