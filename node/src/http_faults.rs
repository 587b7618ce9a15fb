//! Fault injection over HTTP for chaos runs and tests: drop every mesh
//! link, partition this node for a while, probe the write fence, make its
//! wall clock jump, kill the root supervisor, make the store's next commits
//! report an unknown outcome after applying them. Routed
//! only in a build with fault hooks (`faults::COMPILED`; a release build
//! answers 404), and even then answering 403 unless the node runs with
//! `MESHMAIL_FAULT_HOOKS=1`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;

use crate::http::NodeInfo;

fn faults_enabled() -> Result<(), (StatusCode, String)> {
    if meshmail_actors::faults::hooks_enabled() {
        Ok(())
    } else {
        Err((
            StatusCode::FORBIDDEN,
            "fault injection is off (start the node with MESHMAIL_FAULT_HOOKS=1)\n".into(),
        ))
    }
}

/// `POST /admin/faults/drop-links`: closes every mesh link now.
pub async fn drop_links(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    if let Err(e) = faults_enabled() {
        return e;
    }
    let n = info.mesh.endpoint().map_or(0, |e| e.drop_links());
    tracing::warn!(links = n, "fault injection: dropped every mesh link");
    (StatusCode::OK, format!("dropped {n}\n"))
}

#[derive(Deserialize)]
pub struct PartitionParams {
    ms: u64,
}

/// `POST /admin/faults/partition?ms=N`: drops every link and refuses all
/// for N ms (both ways).
pub async fn partition(State(info): State<Arc<NodeInfo>>, Query(p): Query<PartitionParams>) -> impl IntoResponse {
    if let Err(e) = faults_enabled() {
        return e;
    }
    let ms = p.ms.min(600_000);
    let n = info
        .mesh
        .endpoint()
        .map_or(0, |e| e.partition(Duration::from_millis(ms)));
    tracing::warn!(links = n, ms, "fault injection: partitioned from the mesh");
    (StatusCode::OK, format!("partitioned for {ms} ms (dropped {n})\n"))
}

#[derive(Deserialize)]
pub struct ProbeParams {
    shard: u32,
    epoch: u64,
}

/// `POST /admin/faults/fence-probe?shard=N&epoch=E`: tries to commit one
/// write to `shard` as this incarnation holding lease epoch E, through the
/// same fence every shard write passes. 200 if it committed, 409 if the
/// store refused it. Tests use it to show that a stale incarnation cannot
/// write.
pub async fn fence_probe(State(info): State<Arc<NodeInfo>>, Query(p): Query<ProbeParams>) -> impl IntoResponse {
    if let Err(e) = faults_enabled() {
        return e;
    }
    let (name, generation) = (info.name.clone(), info.generation);
    let result = info
        .db
        .run("fence_probe", |txn| {
            let name = name.clone();
            async move { meshmail_storage::model::nodes::fence_probe(&txn, p.shard, &name, generation, p.epoch).await }
        })
        .await;
    match result {
        Ok(()) => (StatusCode::OK, "committed\n".to_string()),
        Err(e) => (StatusCode::CONFLICT, format!("rejected: {e}\n")),
    }
}

#[derive(Deserialize)]
pub struct ClockJumpParams {
    /// The offset from the system clock, seconds (negative: behind); 0 ends the skew.
    offset_s: i64,
}

/// `POST /admin/faults/clock-jump?offset_s=N`: from now on this node's wall
/// clock ([`meshmail_storage::clock`]) reads N seconds off the system's
/// (an absolute offset, not cumulative; clamped to ±10 days). The write
/// fence must not care: it compares lease epochs, never times.
pub async fn clock_jump(Query(p): Query<ClockJumpParams>) -> impl IntoResponse {
    if let Err(e) = faults_enabled() {
        return e;
    }
    let Some(ms) = meshmail_storage::clock::set_offset_ms(p.offset_s.saturating_mul(1000)) else {
        return (
            StatusCode::NOT_FOUND,
            "this build cannot skew its clock (no fault-hooks)\n".to_string(),
        );
    };
    tracing::warn!(offset_ms = ms, "fault injection: wall clock offset set");
    let now = meshmail_storage::clock::now_ms();
    (StatusCode::OK, format!("clock offset {ms} ms; now_ms {now}\n"))
}

#[derive(Deserialize)]
pub struct KillSupervisorParams {
    /// `root` (default) or `outbound`.
    which: Option<String>,
}

/// `POST /admin/faults/kill-supervisor[?which=root|outbound]`: stops the
/// node's root supervisor or the outbound runner's, as a bug that killed it
/// would. The node must then exit non-zero (crash-only) instead of
/// answering on its listeners with part of its actors gone.
pub async fn kill_supervisor(
    State(info): State<Arc<NodeInfo>>,
    Query(p): Query<KillSupervisorParams>,
) -> impl IntoResponse {
    if let Err(e) = faults_enabled() {
        return e;
    }
    let (name, cell) = match p.which.as_deref().unwrap_or("root") {
        "root" => ("root supervisor", Some(info.supervisor.clone())),
        "outbound" => ("outbound runner supervisor", info.outbound_supervisor.clone()),
        other => return (StatusCode::BAD_REQUEST, format!("unknown supervisor {other:?}\n")),
    };
    let Some(cell) = cell else {
        return (StatusCode::NOT_FOUND, format!("no {name} on this node\n"));
    };
    tracing::warn!("fault injection: killing the {name}");
    cell.kill();
    (StatusCode::OK, format!("{name} killed\n"))
}

#[derive(Deserialize)]
pub struct CommitUnknownParams {
    n: u32,
}

/// `POST /admin/faults/commit-unknown?n=N`: the store's next N commits are
/// applied, then reported as `commit_unknown_result` (FDB's 1021), through
/// the backend's own hook (SQLite, or FoundationDB in a fault-hooks build).
/// What it shows: the retries that follow never store a message twice.
pub async fn commit_unknown(
    State(info): State<Arc<NodeInfo>>,
    Query(p): Query<CommitUnknownParams>,
) -> impl IntoResponse {
    if let Err(e) = faults_enabled() {
        return e;
    }
    let Some(faults) = info.db.faults() else {
        return (
            StatusCode::NOT_IMPLEMENTED,
            format!(
                "the {} backend of this build has no fault hooks\n",
                info.db.backend_name()
            ),
        );
    };
    let n = p.n.min(1_000);
    faults
        .commit_unknown_after_apply
        .store(n, std::sync::atomic::Ordering::SeqCst);
    tracing::warn!(
        n,
        backend = info.db.backend_name(),
        "fault injection: next commits end with an unknown outcome"
    );
    (
        StatusCode::OK,
        format!("the next {n} commits report an unknown outcome\n"),
    )
}
