//! JMAP over HTTP on the node's listener: the Session resource, the API
//! endpoint, blob upload/download, EventSource push (RFC 8620) and JMAP
//! over WebSocket (RFC 8887), plus the webmail page at `/`. This is only
//! the transport: authentication, limits and every method live in
//! `meshmail_protocols::jmap`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use meshmail_protocols::jmap::auth::{AuthError, authenticate};
use meshmail_protocols::jmap::methods::blob;
use meshmail_protocols::jmap::push::{PushStream, parse_types};
use meshmail_protocols::jmap::wire::{self, RequestError, ids};
use meshmail_protocols::jmap::{Caller, JmapShared, execute, session};
use serde::Deserialize;

/// Who is at the other end of a connection, and over what.
#[derive(Debug, Clone, Copy)]
pub struct PeerInfo {
    pub addr: SocketAddr,
    pub tls: bool,
}

impl
    axum::extract::connect_info::Connected<
        axum::serve::IncomingStream<'_, crate::http_cap::Capped<tokio::net::TcpListener>>,
    > for PeerInfo
{
    fn connect_info(s: axum::serve::IncomingStream<'_, crate::http_cap::Capped<tokio::net::TcpListener>>) -> Self {
        PeerInfo {
            addr: *s.remote_addr(),
            tls: false,
        }
    }
}

impl
    axum::extract::connect_info::Connected<
        axum::serve::IncomingStream<'_, crate::http_cap::Capped<crate::https::TlsListener>>,
    > for PeerInfo
{
    fn connect_info(s: axum::serve::IncomingStream<'_, crate::http_cap::Capped<crate::https::TlsListener>>) -> Self {
        PeerInfo {
            addr: *s.remote_addr(),
            tls: true,
        }
    }
}

/// A stream with no client message for this long is closed (the client
/// reconnects); bounds abandoned connections.
const PUSH_IDLE_MAX: Duration = Duration::from_secs(3600);
/// EventSource ping intervals are clamped to this range (RFC 8620 §7.3).
const PING_MIN_S: u64 = 5;
const PING_MAX_S: u64 = 600;

pub fn routes(shared: Arc<JmapShared>) -> Router {
    Router::new()
        .route("/.well-known/jmap", get(session_resource))
        .route("/jmap/session", get(session_resource))
        .route("/jmap/api", post(api))
        .route("/jmap/upload/{account}/", post(upload))
        .route("/jmap/download/{account}/{blob}/{name}", get(download))
        .route("/jmap/eventsource/", get(event_source))
        .route("/jmap/ws", get(websocket))
        .route("/", get(crate::webmail::index))
        .route("/webmail/app.js", get(crate::webmail::script))
        .route("/webmail/app.css", get(crate::webmail::style))
        .with_state(shared)
}

fn problem(status: StatusCode, kind: &str, detail: &str, limit: Option<&str>) -> Response {
    let mut body = serde_json::json!({"type": kind, "status": status.as_u16(), "detail": detail});
    if let Some(l) = limit {
        body["limit"] = serde_json::Value::String(l.to_string());
    }
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

fn request_problem(e: &RequestError) -> Response {
    let p = e.problem();
    problem(StatusCode::BAD_REQUEST, p.kind, &p.detail, p.limit)
}

fn auth_problem(e: &AuthError) -> Response {
    metrics::counter!("meshmail_jmap_auth_refused_total").increment(1);
    let (status, kind) = match e {
        AuthError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "about:blank"),
        AuthError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "about:blank"),
        AuthError::PlaintextRefused => (StatusCode::FORBIDDEN, "about:blank"),
        _ => (StatusCode::UNAUTHORIZED, "about:blank"),
    };
    let mut r = problem(status, kind, &e.to_string(), None);
    if let AuthError::RateLimited { retry_after } = e {
        // RFC 9110 §10.2.3: when to try again, in seconds.
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after.as_secs()));
    }
    if status == StatusCode::UNAUTHORIZED {
        // No `Basic` challenge: a browser would pop up its own login
        // dialog over the webmail page; the scheme is in the Session docs.
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"meshmail\""),
        );
    }
    r
}

async fn caller(shared: &JmapShared, headers: &HeaderMap, peer: PeerInfo) -> Result<Caller, Response> {
    let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    authenticate(shared, value, peer.addr.ip(), peer.tls)
        .await
        .map_err(|e| auth_problem(&e))
}

/// The URL prefix the client used to reach us (`http://host:port`).
fn base_urls(headers: &HeaderMap, peer: PeerInfo) -> (String, String) {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.len() < 256 && !h.contains(['/', ' ', '"']))
        .unwrap_or("localhost");
    if peer.tls {
        (format!("https://{host}"), format!("wss://{host}"))
    } else {
        (format!("http://{host}"), format!("ws://{host}"))
    }
}

async fn session_resource(
    State(shared): State<Arc<JmapShared>>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    headers: HeaderMap,
) -> Response {
    let who = match caller(&shared, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let (base, ws) = base_urls(&headers, peer);
    let s = session::session(&who, &shared.limits, &base, &ws);
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        serde_json::to_string(&s).unwrap_or_default(),
    )
        .into_response()
}

/// Reads a body up to `max` bytes; `None` when it is larger.
async fn read_body(body: Body, max: usize) -> Result<Option<Bytes>, Response> {
    match axum::body::to_bytes(body, max.saturating_add(1)).await {
        Ok(b) if b.len() > max => Ok(None),
        Ok(b) => Ok(Some(b)),
        Err(e) => {
            // A length-limit failure reads as an over-size body; anything
            // else (client gone) cannot be answered usefully.
            if std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) {
                Ok(None)
            } else {
                Err(problem(
                    StatusCode::BAD_REQUEST,
                    "about:blank",
                    "could not read the body",
                    None,
                ))
            }
        }
    }
}

async fn api(
    State(shared): State<Arc<JmapShared>>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let who = match caller(&shared, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(_in_flight) = shared.enter_request(who.account) else {
        return request_problem(&RequestError::Limit {
            limit: "maxConcurrentRequests",
        });
    };
    if headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > shared.limits.max_size_request)
    {
        return request_problem(&RequestError::Limit {
            limit: "maxSizeRequest",
        });
    }
    let bytes = match read_body(body, shared.limits.max_size_request).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return request_problem(&RequestError::Limit {
                limit: "maxSizeRequest",
            });
        }
        Err(r) => return r,
    };
    let request = match wire::parse_request(&bytes) {
        Ok(r) => r,
        Err(e) => return request_problem(&e),
    };
    let response = match execute(&shared, &who, request).await {
        Ok(r) => r,
        Err(e) => return request_problem(&e),
    };
    metrics::histogram!("meshmail_jmap_request_seconds").record(started.elapsed().as_secs_f64());
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&response).unwrap_or_default(),
    )
        .into_response()
}

fn own_account(who: &Caller, account: &str) -> bool {
    ids::parse_account(account) == Some(who.account)
}

async fn upload(
    State(shared): State<Arc<JmapShared>>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(account): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let who = match caller(&shared, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !own_account(&who, &account) {
        return problem(StatusCode::NOT_FOUND, "about:blank", "no such account", None);
    }
    let Some(_in_flight) = shared.enter_upload(who.account) else {
        return problem(
            StatusCode::TOO_MANY_REQUESTS,
            "urn:ietf:params:jmap:error:limit",
            "too many uploads at once",
            Some("maxConcurrentUpload"),
        );
    };
    let max = shared.limits.max_size_upload as usize;
    let bytes = match read_body(body, max).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "urn:ietf:params:jmap:error:limit",
                "the upload is too large",
                Some("maxSizeUpload"),
            );
        }
        Err(r) => return r,
    };
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_string();
    match blob::upload(&shared, who.account, &media_type, bytes).await {
        Ok(r) => (
            StatusCode::CREATED,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&r).unwrap_or_default(),
        )
            .into_response(),
        Err(blob::BlobError::TooLarge) => problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "urn:ietf:params:jmap:error:limit",
            "the upload is too large",
            Some("maxSizeUpload"),
        ),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, "about:blank", &e.to_string(), None),
    }
}

#[derive(Deserialize)]
struct DownloadQuery {
    accept: Option<String>,
}

/// A media type safe to put in a header (no parameters smuggling CRLF).
fn clean_media_type(s: &str) -> Option<String> {
    let t = s.trim();
    (t.len() <= 255 && t.contains('/') && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"/+-.;= ".contains(&b)))
        .then(|| t.to_string())
}

fn clean_file_name(s: &str) -> String {
    let n: String = s
        .chars()
        .filter(|c| !c.is_control() && !matches!(c, '"' | '\\' | '/'))
        .take(200)
        .collect();
    if n.is_empty() { "download".into() } else { n }
}

async fn download(
    State(shared): State<Arc<JmapShared>>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path((account, blob_id, name)): Path<(String, String, String)>,
    Query(q): Query<DownloadQuery>,
    headers: HeaderMap,
) -> Response {
    let who = match caller(&shared, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !own_account(&who, &account) {
        return problem(StatusCode::NOT_FOUND, "about:blank", "no such account", None);
    }
    match blob::read(&shared, who.account, &blob_id).await {
        Ok(b) => {
            let media_type = q
                .accept
                .as_deref()
                .and_then(clean_media_type)
                .or_else(|| clean_media_type(&b.media_type))
                .unwrap_or_else(|| "application/octet-stream".into());
            let disposition = format!("attachment; filename=\"{}\"", clean_file_name(&name));
            metrics::counter!("meshmail_jmap_download_bytes_total").increment(b.bytes.len() as u64);
            let mut r = Response::new(Body::from(b.bytes));
            let h = r.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&media_type) {
                h.insert(header::CONTENT_TYPE, v);
            }
            if let Ok(v) = HeaderValue::from_str(&disposition) {
                h.insert(header::CONTENT_DISPOSITION, v);
            }
            // Blobs are untrusted content served from the webmail's origin:
            // never sniffed, never run as a page.
            h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
            h.insert("content-security-policy", HeaderValue::from_static("sandbox"));
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, immutable, max-age=31536000"),
            );
            r
        }
        Err(blob::BlobError::NotFound) => problem(StatusCode::NOT_FOUND, "about:blank", "blob not found", None),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, "about:blank", &e.to_string(), None),
    }
}

#[derive(Deserialize)]
struct EventSourceQuery {
    types: Option<String>,
    closeafter: Option<String>,
    ping: Option<u64>,
}

/// EventSource (RFC 8620 §7.3): `state` events carrying StateChange
/// objects, `ping` events every `ping` seconds, and with
/// `closeafter=state` the stream ends after the first change.
async fn event_source(
    State(shared): State<Arc<JmapShared>>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Query(q): Query<EventSourceQuery>,
    headers: HeaderMap,
) -> Response {
    let who = match caller(&shared, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let types = parse_types(q.types.as_deref().unwrap_or("*"));
    let close_after_state = q.closeafter.as_deref() == Some("state");
    let ping = q.ping.filter(|p| *p > 0).map(|p| p.clamp(PING_MIN_S, PING_MAX_S));
    let stream = match PushStream::start(&shared, who.account, types).await {
        Ok(s) => s,
        Err(e) => return problem(StatusCode::SERVICE_UNAVAILABLE, "about:blank", &e.to_string(), None),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(feed_event_source(stream, tx, close_after_state, ping));
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// Writes the events of one EventSource connection until the client goes
/// (the channel closes) or the stream is done.
async fn feed_event_source(
    mut stream: PushStream,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    close_after_state: bool,
    ping: Option<u64>,
) {
    let started = Instant::now();
    let mut ticker = ping.map(|p| {
        tokio::time::interval_at(
            tokio::time::Instant::now() + Duration::from_secs(p),
            Duration::from_secs(p),
        )
    });
    // An opening ping shows the client the stream is open before the first
    // change (a ping rather than an SSE comment: some clients, jmap-client
    // 0.4 among them, read a comment's blank line as an empty state event).
    let hello = format!("event: ping\ndata: {{\"interval\":{}}}\n\n", ping.unwrap_or(0));
    if tx.send(Ok(Bytes::from(hello))).await.is_err() {
        return;
    }
    loop {
        let tick = async {
            match ticker.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            change = stream.next() => {
                let data = serde_json::to_string(&change).unwrap_or_default();
                let event = format!("event: state\nid: {}\ndata: {data}\n\n", started.elapsed().as_millis());
                if tx.send(Ok(Bytes::from(event))).await.is_err() || close_after_state {
                    return;
                }
            }
            _ = tick => {
                let event = format!("event: ping\ndata: {{\"interval\":{}}}\n\n", ping.unwrap_or(0));
                if tx.send(Ok(Bytes::from(event))).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
            _ = tokio::time::sleep(PUSH_IDLE_MAX.saturating_sub(started.elapsed())) => return,
        }
    }
}

/// JMAP over WebSocket (RFC 8887), subprotocol `jmap`.
async fn websocket(
    State(shared): State<Arc<JmapShared>>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let who = match caller(&shared, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let max = shared.limits.max_size_request;
    ws.protocols(["jmap"])
        .max_message_size(max)
        .on_upgrade(move |socket| serve_websocket(shared, who, socket))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WsEnvelope {
    #[serde(rename = "@type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    data_types: Option<Vec<String>>,
}

fn ws_error(request_id: Option<String>, e: &RequestError) -> String {
    let p = e.problem();
    let mut v = serde_json::json!({"@type": "RequestError", "type": p.kind, "status": p.status, "detail": p.detail});
    if let Some(l) = p.limit {
        v["limit"] = serde_json::Value::String(l.into());
    }
    if let Some(id) = request_id {
        v["requestId"] = serde_json::Value::String(id);
    }
    v.to_string()
}

async fn serve_websocket(shared: Arc<JmapShared>, who: Caller, mut socket: WebSocket) {
    metrics::gauge!("meshmail_jmap_websockets").increment(1.0);
    let mut push: Option<PushStream> = None;
    loop {
        let next_push = async {
            match push.as_mut() {
                Some(p) => p.next().await,
                None => std::future::pending().await,
            }
        };
        let incoming = tokio::select! {
            m = tokio::time::timeout(PUSH_IDLE_MAX, socket.recv()) => match m {
                Ok(Some(Ok(m))) => m,
                _ => break,
            },
            change = next_push => {
                let text = serde_json::to_string(&change).unwrap_or_default();
                if socket.send(Message::Text(text.into())).await.is_err() {
                    break;
                }
                continue;
            }
        };
        let text = match incoming {
            Message::Text(t) => t.to_string(),
            Message::Binary(_) => {
                let e = RequestError::NotJson("binary frames are not JMAP".into());
                let _ = socket.send(Message::Text(ws_error(None, &e).into())).await;
                continue;
            }
            Message::Close(_) => break,
            _ => continue,
        };
        let envelope: WsEnvelope = match serde_json::from_str(&text) {
            Ok(e) => e,
            Err(e) => {
                let err = if serde_json::from_str::<serde_json::Value>(&text).is_ok() {
                    RequestError::NotRequest(e.to_string())
                } else {
                    RequestError::NotJson(e.to_string())
                };
                let _ = socket.send(Message::Text(ws_error(None, &err).into())).await;
                continue;
            }
        };
        let answer = match envelope.kind.as_str() {
            "Request" => {
                let request_id = envelope.id.clone();
                let Some(_in_flight) = shared.enter_request(who.account) else {
                    let e = RequestError::Limit {
                        limit: "maxConcurrentRequests",
                    };
                    let _ = socket.send(Message::Text(ws_error(request_id, &e).into())).await;
                    continue;
                };
                match wire::parse_request(text.as_bytes()) {
                    Err(e) => ws_error(request_id, &e),
                    Ok(req) => match execute(&shared, &who, req).await {
                        Ok(mut resp) => {
                            resp.kind = Some("Response");
                            resp.request_id = request_id;
                            serde_json::to_string(&resp).unwrap_or_default()
                        }
                        Err(e) => ws_error(request_id, &e),
                    },
                }
            }
            "WebSocketPushEnable" => {
                let types = envelope.data_types.clone();
                match push.as_mut() {
                    Some(p) => p.set_types(types),
                    None => match PushStream::start(&shared, who.account, types).await {
                        Ok(p) => push = Some(p),
                        Err(e) => tracing::debug!(error = %e, "jmap: push could not start"),
                    },
                }
                continue;
            }
            "WebSocketPushDisable" => {
                push = None;
                continue;
            }
            other => ws_error(envelope.id, &RequestError::NotRequest(format!("unknown @type {other}"))),
        };
        if socket.send(Message::Text(answer.into())).await.is_err() {
            break;
        }
    }
    metrics::gauge!("meshmail_jmap_websockets").decrement(1.0);
}
