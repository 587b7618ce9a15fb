//! The node's side of `meshmail import`: admin routes that store messages
//! into an account's folders by the same path IMAP APPEND takes (parse and
//! write the body through `ingest`, then a delivery through the account's
//! shard actor, fenced by its lease, with an acceptance in the ledger and a
//! hint to IDLE sessions), and create folders as IMAP CREATE does. The
//! command reads the files; the node alone writes the mailboxes.
//!
//! Loopback callers only: these routes write into any account without its
//! password, so they answer 403 to anyone not on the node's own host, on
//! the HTTP and HTTPS listeners alike.
//!
//! - `GET  /admin/import/{email}`: the account's folders and the size limit;
//! - `POST /admin/import/{email}/folders` (`{"name": ...}`): create a folder;
//! - `GET  /admin/import/{email}/digests?mailbox=NAME`: the SHA-256 of every
//!   message of a folder (what import skips as already present);
//! - `POST /admin/import/{email}/messages?mailbox=..&flags=..&internal_date_ms=..`:
//!   store the request body as one message;
//! - `GET  /admin/import/{email}/checkpoint?source=URL&folder=NAME` and
//!   `PUT  /admin/import/{email}/checkpoint` (a `Checkpoint`): how far
//!   `meshmail migrate` got in one source folder (`model::migration`);
//!   GET answers `null` when there is none.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use meshmail_actors::delivery::{self, DeliveryError, DeliveryRequest, Outcome};
use meshmail_actors::mailbox_ops::{self, MailboxOp};
use meshmail_actors::node::NodeCtx;
use meshmail_actors::op_error::OpError;
use meshmail_protocols::ingest::ingest;
use meshmail_storage::StorageError;
use meshmail_storage::model::accounts::{self, Account};
use meshmail_storage::model::migration::{self, Checkpoint};
use meshmail_storage::model::{mailboxes, message_reads, new_id};
use serde::{Deserialize, Serialize};

use crate::http_jmap::PeerInfo;

/// Rows read per transaction when listing a folder's digests.
const DIGEST_PAGE_ROWS: usize = 1_000;

/// What `GET /admin/import/{email}` answers.
#[derive(Debug, Serialize, Deserialize)]
pub struct ImportTarget {
    pub account: String,
    /// The node's `[smtp] max_message_bytes`: larger messages are refused.
    pub max_message_bytes: u64,
    pub mailboxes: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NewFolder {
    pub name: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FolderQuery {
    pub mailbox: String,
    /// Only messages with a higher UID (a resumed migration's last batch).
    #[serde(default)]
    pub after_uid: u32,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CheckpointQuery {
    pub source: String,
    pub folder: String,
}

/// Hex SHA-256 of each message of a folder, in UID order (duplicates kept).
#[derive(Debug, Serialize, Deserialize)]
pub struct Digests {
    pub digests: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct MessageQuery {
    pub mailbox: String,
    /// IMAP flags separated by spaces.
    #[serde(default)]
    pub flags: String,
    pub internal_date_ms: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Stored {
    pub uid: u32,
}

#[derive(Clone)]
struct ImportState {
    ctx: Arc<NodeCtx>,
    max_message_bytes: u64,
}

pub fn routes(ctx: Arc<NodeCtx>, max_message_bytes: u64) -> Router {
    let state = ImportState { ctx, max_message_bytes };
    Router::new()
        .route("/admin/import/{email}", get(target))
        .route("/admin/import/{email}/folders", post(create_folder))
        .route("/admin/import/{email}/digests", get(digests))
        .route(
            "/admin/import/{email}/messages",
            // Refused while the body arrives, before it is held whole.
            post(store_message).layer(DefaultBodyLimit::max(max_message_bytes as usize)),
        )
        .route(
            "/admin/import/{email}/checkpoint",
            get(get_checkpoint).put(put_checkpoint),
        )
        .with_state(state)
}

/// An error answer: the status and one line of text.
fn refuse(code: StatusCode, text: impl std::fmt::Display) -> Response {
    (code, format!("{text}\n")).into_response()
}

/// Why a route refused before doing anything.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("import is served to loopback callers only: run `meshmail import` on the node's host")]
    NotLoopback,
    #[error("no such account")]
    NoAccount,
    #[error("store unavailable: {0}")]
    Store(#[from] StorageError),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let code = match self {
            Refusal::NotLoopback => StatusCode::FORBIDDEN,
            Refusal::NoAccount => StatusCode::NOT_FOUND,
            Refusal::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        refuse(code, self)
    }
}

/// The account of a loopback caller's request.
async fn account(ctx: &NodeCtx, peer: &PeerInfo, email: &str) -> Result<Account, Refusal> {
    if !peer.addr.ip().is_loopback() {
        return Err(Refusal::NotLoopback);
    }
    let email = email.to_string();
    let found = ctx
        .db
        .read("admin_import_account", move |txn| {
            let email = email.clone();
            async move { accounts::get(&txn, &email).await }
        })
        .await?;
    found.ok_or(Refusal::NoAccount)
}

async fn target(
    State(s): State<ImportState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(email): Path<String>,
) -> Result<Json<ImportTarget>, Refusal> {
    let acc = account(&s.ctx, &peer, &email).await?;
    let id = acc.id;
    let list = s
        .ctx
        .db
        .read("admin_import_list", move |txn| async move {
            mailboxes::list(&txn, id).await
        })
        .await?;
    Ok(Json(ImportTarget {
        account: acc.email,
        max_message_bytes: s.max_message_bytes,
        mailboxes: list.into_iter().map(|m| m.name).collect(),
    }))
}

async fn create_folder(
    State(s): State<ImportState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(email): Path<String>,
    Json(folder): Json<NewFolder>,
) -> Result<Response, Refusal> {
    let acc = account(&s.ctx, &peer, &email).await?;
    // Subscribed, as JMAP creates them: imported folders should show in
    // every client without a SUBSCRIBE.
    let op = MailboxOp::Create {
        name: folder.name,
        special_use: None,
    };
    Ok(match mailbox_ops::request(&s.ctx, acc.id, op).await {
        Ok(_) | Err(OpError::AlreadyExists(_)) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ OpError::Unavailable(_)) => refuse(StatusCode::SERVICE_UNAVAILABLE, e),
        Err(e) => refuse(StatusCode::UNPROCESSABLE_ENTITY, e),
    })
}

async fn digests(
    State(s): State<ImportState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(email): Path<String>,
    Query(q): Query<FolderQuery>,
) -> Result<Json<Digests>, Refusal> {
    let acc = account(&s.ctx, &peer, &email).await?;
    let found = folder_digests(&s.ctx, acc, q.mailbox, q.after_uid).await?;
    Ok(Json(found.unwrap_or(Digests { digests: Vec::new() })))
}

/// The body hashes of a folder, [`DIGEST_PAGE_ROWS`] rows per read
/// transaction (a folder of any size stays within FDB's 5 s); None when
/// the folder does not exist.
async fn folder_digests(
    ctx: &NodeCtx,
    acc: Account,
    name: String,
    after_uid: u32,
) -> Result<Option<Digests>, StorageError> {
    let id = acc.id;
    let Some(mb) = ctx
        .db
        .read("admin_import_find", move |txn| {
            let name = name.clone();
            async move { mailboxes::find(&txn, id, &name).await }
        })
        .await?
    else {
        return Ok(None);
    };
    let mut out = Vec::new();
    let mut from = after_uid.saturating_add(1);
    loop {
        let page = ctx
            .db
            .read("admin_import_digests", move |txn| async move {
                message_reads::list_meta(&txn, id, mb.id, from, None, DIGEST_PAGE_ROWS).await
            })
            .await?;
        let Some(last) = page.last() else { break };
        from = last.uid + 1;
        let full = page.len() == DIGEST_PAGE_ROWS;
        out.extend(page.into_iter().map(|m| m.body.hash));
        if !full {
            break;
        }
    }
    Ok(Some(Digests { digests: out }))
}

async fn get_checkpoint(
    State(s): State<ImportState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(email): Path<String>,
    Query(q): Query<CheckpointQuery>,
) -> Result<Json<Option<Checkpoint>>, Refusal> {
    let acc = account(&s.ctx, &peer, &email).await?;
    let id = acc.id;
    let found = s
        .ctx
        .db
        .read("admin_migrate_checkpoint_get", move |txn| {
            let (source, folder) = (q.source.clone(), q.folder.clone());
            async move { migration::get(&txn, id, &source, &folder).await }
        })
        .await?;
    Ok(Json(found))
}

/// One small transaction: the checkpoint is not written with the messages
/// (they go through the shard actor); it only ever lags them, and the
/// content hashes cover the gap on a resumed run.
async fn put_checkpoint(
    State(s): State<ImportState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(email): Path<String>,
    Json(c): Json<Checkpoint>,
) -> Result<Response, Refusal> {
    let acc = account(&s.ctx, &peer, &email).await?;
    let id = acc.id;
    let written = s
        .ctx
        .db
        .run("admin_migrate_checkpoint_put", move |txn| {
            let c = c.clone();
            async move { migration::put(&txn, id, &c) }
        })
        .await;
    Ok(match written {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ StorageError::Model(_)) => refuse(StatusCode::UNPROCESSABLE_ENTITY, e),
        Err(e) => refuse(StatusCode::SERVICE_UNAVAILABLE, e),
    })
}

/// True for what IMAP STORE would accept as a flag: a system flag or an
/// atom keyword (RFC 3501 §9 `flag-keyword`).
fn valid_flag(flag: &str) -> bool {
    const SYSTEM: [&str; 5] = ["\\Seen", "\\Answered", "\\Flagged", "\\Deleted", "\\Draft"];
    if flag.starts_with('\\') {
        return SYSTEM.iter().any(|s| s.eq_ignore_ascii_case(flag));
    }
    !flag.is_empty()
        && flag
            .bytes()
            .all(|b| (0x21..0x7f).contains(&b) && !b"(){%*\"\\]".contains(&b))
}

async fn store_message(
    State(s): State<ImportState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Path(email): Path<String>,
    Query(q): Query<MessageQuery>,
    body: Bytes,
) -> Result<Response, Refusal> {
    let acc = account(&s.ctx, &peer, &email).await?;
    let flags: Vec<String> = q.flags.split_whitespace().map(str::to_string).collect();
    if let Some(bad) = flags.iter().find(|f| !valid_flag(f)) {
        return Ok(refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("not an IMAP flag: {bad:?}"),
        ));
    }
    Ok(
        match store(&s.ctx, &acc, q.mailbox, flags, q.internal_date_ms, body).await {
            Ok(uid) => Json(Stored { uid }).into_response(),
            Err(DeliveryError::OverQuota) => refuse(StatusCode::INSUFFICIENT_STORAGE, "over quota"),
            Err(e @ DeliveryError::Permanent(_)) => refuse(StatusCode::UNPROCESSABLE_ENTITY, e),
            Err(e) => refuse(StatusCode::SERVICE_UNAVAILABLE, e),
        },
    )
}

/// Attempts per message when the body was swept between its write and
/// the commit (the orphan sweep's race): it is written again.
const BODY_SWEPT_ATTEMPTS_MAX: u32 = 3;

/// IMAP APPEND's path: ingest, then one delivery through the shard actor.
async fn store(
    ctx: &Arc<NodeCtx>,
    acc: &Account,
    mailbox: String,
    flags: Vec<String>,
    internal_date_ms: i64,
    raw: Bytes,
) -> Result<u32, DeliveryError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let ingested = ingest(ctx, raw.clone()).await?;
        let req = DeliveryRequest {
            acceptance_id: new_id(),
            account: acc.id,
            recipient: acc.email.clone(),
            mailbox: mailbox.clone(),
            body: ingested.body,
            flags: flags.clone(),
            internal_date_ms,
            summary: ingested.summary,
            fault: None,
            from_quarantine: None,
            deadline: delivery::deadline_in(delivery::DELIVERY_DEADLINE),
        };
        match delivery::deliver(ctx, req).await {
            Ok(Outcome::Delivered { uid, .. }) => return Ok(uid),
            Ok(Outcome::Quarantined { .. }) => {
                return Err(DeliveryError::Permanent(
                    "quarantined: the store refused it three times".into(),
                ));
            }
            Err(DeliveryError::BodySwept) if attempt < BODY_SWEPT_ATTEMPTS_MAX => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_flag;

    #[test]
    fn flags_are_system_flags_or_atoms() {
        for ok in ["\\Seen", "\\draft", "$Label1", "work", "Junk-ish"] {
            assert!(valid_flag(ok), "{ok}");
        }
        for bad in ["\\Recent", "\\Other", "", "a b", "x(", "q\"", "\u{e9}"] {
            assert!(!valid_flag(bad), "{bad}");
        }
    }
}
