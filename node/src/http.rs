//! The HTTP listener: `/metrics` (Prometheus), `/health`, `/status`, the
//! mesh's event stream `/mesh/events`, and the admin API (quarantine
//! redelivery, drain, and — only in a `fault-hooks` build — fault
//! injection for chaos runs: a release build has no such routes (404).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use meshmail_mesh::status::{LeaseView, NodeStatus};
use meshmail_storage::Database;
use metrics_exporter_prometheus::PrometheusHandle;

pub struct NodeInfo {
    pub name: String,
    pub generation: u64,
    pub started: Instant,
    pub db: Database,
    pub metrics: PrometheusHandle,
    pub ctx: Arc<meshmail_actors::node::NodeCtx>,
    pub mesh: meshmail_mesh::runtime::MeshRuntime,
    /// False once a vital task ended (the node is about to exit).
    pub liveness: Arc<crate::vitals::Liveness>,
    pub supervisor: ractor::ActorCell,
    /// The outbound queue runner's supervisor (None with `[outbound]` off).
    pub outbound_supervisor: Option<ractor::ActorCell>,
    /// The store formats this node supports (its pin applied).
    pub formats: meshmail_storage::model::format_switch::FormatRange,
}

pub fn router(info: Arc<NodeInfo>) -> Router {
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/status", get(status))
        .route("/mesh/events", get(crate::http_mesh::events))
        .route("/admin/quarantine/{id}/redeliver", axum::routing::post(redeliver))
        .route("/admin/drain", axum::routing::post(crate::http_mesh::drain))
        .route("/admin/undrain", axum::routing::post(crate::http_mesh::undrain));
    if !meshmail_actors::faults::COMPILED {
        return router.with_state(info);
    }
    router
        .route(
            "/admin/faults/drop-links",
            axum::routing::post(crate::http_faults::drop_links),
        )
        .route(
            "/admin/faults/partition",
            axum::routing::post(crate::http_faults::partition),
        )
        .route(
            "/admin/faults/fence-probe",
            axum::routing::post(crate::http_faults::fence_probe),
        )
        .route(
            "/admin/faults/clock-jump",
            axum::routing::post(crate::http_faults::clock_jump),
        )
        .route(
            "/admin/faults/kill-supervisor",
            axum::routing::post(crate::http_faults::kill_supervisor),
        )
        .route(
            "/admin/faults/commit-unknown",
            axum::routing::post(crate::http_faults::commit_unknown),
        )
        .with_state(info)
}

async fn metrics(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    info.metrics.render()
}

/// Liveness: 200 while the node's actors run (the root supervisor is up and
/// no vital task has ended), 503 otherwise. It does not look at the store:
/// restarting a node does not fix a store that is down (that is `/ready`).
async fn health(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    let supervisor = info.supervisor.get_status();
    if info.liveness.alive() && supervisor == ractor::ActorStatus::Running {
        (StatusCode::OK, "ok\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not alive: root supervisor {supervisor:?}, vital tasks alive: {}\n",
                info.liveness.alive()
            ),
        )
    }
}

/// Readiness: 200 when this node can serve now: alive, the store answers a
/// read and it holds shard leases (a draining or just-started node that
/// holds none sends its work elsewhere). 503 with the reasons otherwise.
async fn ready(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    let mut problems = Vec::new();
    if !info.liveness.alive() || info.supervisor.get_status() != ractor::ActorStatus::Running {
        problems.push("the node's actors are gone".to_string());
    }
    let probe = info
        .db
        .read(
            "ready",
            |txn| async move { meshmail_storage::model::probe_read(&txn).await },
        )
        .await;
    if let Err(e) = probe {
        problems.push(format!("store unavailable: {e}"));
    }
    if info.mesh.held() == 0 {
        problems.push("holds no shard leases".to_string());
    }
    if problems.is_empty() {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", problems.join("; ")),
        )
    }
}

/// This node's view: itself, the members and their links, and who owns
/// which shards (counts per incarnation, and every lease with its epoch).
/// The shape is [`NodeStatus`], which `meshmail status --node` parses.
async fn status(State(info): State<Arc<NodeInfo>>) -> Json<NodeStatus> {
    Json(node_status(&info))
}

fn node_status(info: &NodeInfo) -> NodeStatus {
    let owners = info.mesh.owners();
    let mut per_node: BTreeMap<String, u64> = BTreeMap::new();
    let leases: Vec<LeaseView> = owners
        .iter()
        .flatten()
        .filter(|l| !l.released)
        .map(|l| {
            *per_node.entry(l.node.clone()).or_default() += 1;
            LeaseView {
                shard: l.shard,
                node: l.node.clone(),
                generation: l.generation,
                epoch: l.epoch,
            }
        })
        .collect();
    NodeStatus {
        node: info.name.clone(),
        generation: info.generation,
        backend: info.db.backend_name().to_string(),
        uptime_s: info.started.elapsed().as_secs(),
        shards_owned: info.ctx.owned_shards() as u64,
        leases_held: info.mesh.held() as u64,
        shard_count: info.ctx.shard_count,
        settled: info.mesh.settled(),
        draining: info.mesh.draining(),
        members: info.mesh.members(),
        owners: per_node,
        unowned: owners.iter().filter(|l| l.as_ref().is_none_or(|l| l.released)).count() as u64,
        leases,
        actors_live: meshmail_actors::live::live_actors()
            .into_iter()
            .map(|(kind, n)| (kind.to_string(), n))
            .collect(),
        build: Some(crate::cli::BUILD.to_string()),
        formats: Some(info.formats),
        store_format: Some(info.db.write_format()),
    }
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
