//! The HTTP listener: `/metrics` (Prometheus), `/health`, `/status`.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use meshmail_storage::Database;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

pub struct NodeInfo {
    pub name: String,
    pub generation: u64,
    pub started: Instant,
    pub db: Database,
    pub metrics: PrometheusHandle,
    pub ctx: Arc<meshmail_actors::node::NodeCtx>,
}

pub fn router(info: Arc<NodeInfo>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/status", get(status))
        .route("/admin/quarantine/{id}/redeliver", axum::routing::post(redeliver))
        .with_state(info)
}

async fn metrics(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    info.metrics.render()
}

/// 200 when the store answers a read, 503 otherwise (load balancers and
/// supervisors act on this, so it checks the one dependency that matters).
async fn health(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    let probe = info
        .db
        .read("health", |txn| async move {
            txn.get(&meshmail_storage::keyspace::sequence("account_id")).await
        })
        .await;
    match probe {
        Ok(_) => (StatusCode::OK, "ok\n".to_string()),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store unavailable: {e}\n")),
    }
}

async fn status(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    Json(json!({
        "node": info.name,
        "generation": info.generation,
        "backend": info.db.backend_name(),
        "uptime_s": info.started.elapsed().as_secs(),
        "shards_owned": info.ctx.owned_shards(),
        "shard_count": info.ctx.shard_count,
        "actors_live": meshmail_actors::live::live_actors(),
    }))
}

/// Redelivers a quarantined item through its shard actor.
async fn redeliver(
    State(info): State<Arc<NodeInfo>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> impl IntoResponse {
    let id = match meshmail_storage::model::id_from_str(&id) {
        Ok(id) => id,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    match meshmail_actors::quarantine::redeliver(&info.ctx, id).await {
        Ok(outcome) => (StatusCode::OK, format!("redelivered: {outcome:?}\n")),
        Err(e) => (StatusCode::CONFLICT, format!("redelivery failed: {e}\n")),
    }
}
