//! HTTP endpoints of the mesh: the event stream observers (and the chaos
//! runner) record, graceful drain, and fault injection.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use meshmail_mesh::NodeEvent;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast;

use crate::http::NodeInfo;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `GET /mesh/events`: one JSON object per line for every link up/down
/// this node sees, as it happens; the response never ends while the node
/// lives. The first line is a `hello` naming the observer.
pub async fn events(State(info): State<Arc<NodeInfo>>) -> Response {
    let rx = info.mesh.endpoint().map(|e| e.subscribe());
    let hello = json!({
        "ts_ms": now_ms(), "observer": info.name, "observer_generation": info.generation, "kind": "hello",
    });
    // Then the links already up, so an observer that connects late still
    // pairs every later down with an up.
    let mut first = format!("{hello}\n");
    for (id, generation) in info.mesh.endpoint().map(|e| e.live()).unwrap_or_default() {
        let line = json!({
            "ts_ms": now_ms(), "observer": info.name, "observer_generation": info.generation,
            "kind": "up", "node": id.to_string(), "generation": generation, "reason": "snapshot",
        });
        first.push_str(&format!("{line}\n"));
    }
    let state = (Some(first), rx, info.clone());
    let stream = futures::stream::unfold(state, |(first, mut rx, info)| async move {
        if let Some(line) = first {
            return Some((Ok::<_, std::io::Error>(line), (None, rx, info)));
        }
        let Some(r) = rx.as_mut() else {
            std::future::pending::<()>().await;
            return None;
        };
        let (kind, node, generation, reason) = match r.recv().await {
            Ok(NodeEvent::NodeUp { id, generation, .. }) => ("up", id, generation, String::new()),
            Ok(NodeEvent::NodeDown { id, generation, reason }) => ("down", id, generation, format!("{reason:?}")),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                let line = json!({"ts_ms": now_ms(), "observer": info.name, "kind": "lagged", "missed": n});
                return Some((Ok(format!("{line}\n")), (None, rx, info)));
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        let line = json!({
            "ts_ms": now_ms(), "observer": info.name, "observer_generation": info.generation,
            "kind": kind, "node": node.to_string(), "generation": generation, "reason": reason,
        });
        Some((Ok(format!("{line}\n")), (None, rx, info)))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// `POST /admin/drain`: hand every shard of this node to the others
/// (gracefully: drain, release, the next owner acquires) and take none.
pub async fn drain(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    info.mesh.set_draining(true);
    tracing::warn!("drain requested: handing this node's shards over");
    (
        StatusCode::ACCEPTED,
        format!("draining: {} shards held\n", info.mesh.held()),
    )
}

/// `POST /admin/undrain`: take shards again.
pub async fn undrain(State(info): State<Arc<NodeInfo>>) -> impl IntoResponse {
    info.mesh.set_draining(false);
    (StatusCode::OK, "serving again\n")
}

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
            async move {
                meshmail_storage::model::nodes::check_lease(&txn, p.shard, &name, generation, p.epoch).await?;
                txn.set(&meshmail_storage::keyspace::cursor("fence_probe"), name.as_bytes())?;
                Ok::<_, meshmail_storage::StorageError>(())
            }
        })
        .await;
    match result {
        Ok(()) => (StatusCode::OK, "committed\n".to_string()),
        Err(e) => (StatusCode::CONFLICT, format!("rejected: {e}\n")),
    }
}
