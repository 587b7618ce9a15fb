//! HTTP endpoints of the mesh: the event stream observers (and the chaos
//! runner) record, and graceful drain. Fault injection is in `http_faults`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use meshmail_mesh::NodeEvent;
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
