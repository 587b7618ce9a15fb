//! HTTP endpoints of the mesh: the event stream observers (and the chaos
//! runner) record, and graceful drain. Fault injection is in `http_faults`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use meshmail_mesh::NodeEvent;
use meshmail_mesh::status::{MeshEvent, event_kind};
use tokio::sync::broadcast;

use crate::http::NodeInfo;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A line of this node's stream, stamped now, about no peer yet.
fn event(info: &NodeInfo, kind: &str) -> MeshEvent {
    MeshEvent {
        ts_ms: now_ms(),
        observer: info.name.clone(),
        observer_generation: info.generation,
        kind: kind.into(),
        ..MeshEvent::default()
    }
}

/// One NDJSON line (a struct of strings and numbers always serializes).
fn line(e: &MeshEvent) -> String {
    let mut s = serde_json::to_string(e).unwrap_or_default();
    s.push('\n');
    s
}

/// `GET /mesh/events`: one JSON object per line for every link up/down
/// this node sees, as it happens; the response never ends while the node
/// lives. The first line is a `hello` naming the observer.
pub async fn events(State(info): State<Arc<NodeInfo>>) -> Response {
    let rx = info.mesh.endpoint().map(|e| e.subscribe());
    let mut first = line(&event(&info, event_kind::HELLO));
    // Then the links already up, so an observer that connects late still
    // pairs every later down with an up.
    for (id, generation) in info.mesh.endpoint().map(|e| e.live()).unwrap_or_default() {
        first.push_str(&line(&MeshEvent {
            node: id.to_string(),
            generation,
            reason: "snapshot".into(),
            ..event(&info, event_kind::UP)
        }));
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
            Ok(NodeEvent::NodeUp { id, generation, .. }) => (event_kind::UP, id, generation, String::new()),
            Ok(NodeEvent::NodeDown { id, generation, reason }) => {
                (event_kind::DOWN, id, generation, format!("{reason:?}"))
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                let lagged = MeshEvent {
                    missed: Some(n),
                    ..event(&info, event_kind::LAGGED)
                };
                return Some((Ok(line(&lagged)), (None, rx, info)));
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        let e = MeshEvent {
            node: node.to_string(),
            generation,
            reason,
            ..event(&info, kind)
        };
        Some((Ok(line(&e)), (None, rx, info)))
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
