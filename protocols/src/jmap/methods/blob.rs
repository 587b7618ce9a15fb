//! Blobs (RFC 8620 §6): upload, download and Blob/copy. A blob id names
//! a message of the account, one part of it, an upload of the account, or
//! one version of the text of one of its Sieve scripts (RFC 9661 §2.2;
//! see [`crate::jmap::wire::ids`]); nothing outside the caller's account is readable.
//! Uploads are written to the blob store as objects and recorded under
//! the account; unreferenced, they last the orphan sweep's grace (1 h).

use std::collections::BTreeMap;

use bytes::Bytes;
use meshmail_storage::StorageError;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::jmap::{self, Upload};
use meshmail_storage::model::now_ms;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jmap::dispatch::{Call, Output, parse, reply};
use crate::jmap::wire::email_parts;
use crate::jmap::wire::ids::{self, BlobRef};
use crate::jmap::wire::{MethodError, SetError};
use crate::jmap::{JmapShared, store};

pub struct BlobData {
    pub bytes: Bytes,
    pub media_type: String,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobError {
    #[error("blob not found")]
    NotFound,
    #[error("the blob is too large")]
    TooLarge,
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
}

impl From<StorageError> for BlobError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::NotFound(_) => BlobError::NotFound,
            other => BlobError::Unavailable(other.to_string()),
        }
    }
}

impl From<MethodError> for BlobError {
    fn from(e: MethodError) -> Self {
        BlobError::Unavailable(e.to_string())
    }
}

/// The bytes of `blob_id` if `account` may read it.
pub async fn read(shared: &JmapShared, account: AccountId, blob_id: &str) -> Result<BlobData, BlobError> {
    let ctx = &shared.ctx;
    match ids::parse_blob(blob_id).ok_or(BlobError::NotFound)? {
        // Message blob ids name the message's first place, as its email id.
        BlobRef::Message(m, u) => {
            let (_, msg) = store::email(ctx, account, (m, u)).await?.ok_or(BlobError::NotFound)?;
            Ok(BlobData {
                bytes: store::body(ctx, &msg).await?,
                media_type: "message/rfc822".into(),
                name: None,
            })
        }
        BlobRef::Part(m, u, part) => {
            let (_, msg) = store::email(ctx, account, (m, u)).await?.ok_or(BlobError::NotFound)?;
            let raw = store::body(ctx, &msg).await?;
            let (bytes, media_type, name) = email_parts::part_contents(&raw, &part).ok_or(BlobError::NotFound)?;
            Ok(BlobData {
                bytes: Bytes::from(bytes),
                media_type,
                name,
            })
        }
        BlobRef::Upload(hash) => {
            let (bytes, media_type) = upload_bytes(shared, account, hash).await?;
            Ok(BlobData {
                bytes,
                media_type,
                name: None,
            })
        }
        BlobRef::Script(id, version) => {
            let (scripts, _) = crate::managesieve::scripts::list(&ctx.db, account)
                .await
                .map_err(|e| BlobError::Unavailable(e.to_string()))?;
            let script = scripts
                .into_iter()
                .find(|s| s.id() == id && s.version == version)
                .ok_or(BlobError::NotFound)?;
            Ok(BlobData {
                bytes: Bytes::from(script.source.into_bytes()),
                media_type: "application/sieve".into(),
                name: Some(format!("{}.sieve", script.name)),
            })
        }
        BlobRef::UploadPart(hash, part) => {
            let (raw, _) = upload_bytes(shared, account, hash).await?;
            let (bytes, media_type, name) = email_parts::part_contents(&raw, &part).ok_or(BlobError::NotFound)?;
            Ok(BlobData {
                bytes: Bytes::from(bytes),
                media_type,
                name,
            })
        }
    }
}

/// An upload of `account` and its media type.
async fn upload_bytes(shared: &JmapShared, account: AccountId, hash: String) -> Result<(Bytes, String), BlobError> {
    let ctx = &shared.ctx;
    let up = ctx
        .db
        .read("jmap_upload_get", move |txn| {
            let h = hash.clone();
            async move { jmap::get_upload(&txn, account, &h).await }
        })
        .await?
        .ok_or(BlobError::NotFound)?;
    let body = meshmail_storage::model::messages::BodyRef {
        hash: up.hash.clone(),
        size: up.size,
        inline: false,
    };
    Ok((ctx.blobs.get(&ctx.db, &body).await?, up.media_type))
}

pub async fn read_blob(call: &Call<'_>, blob_id: &str) -> Result<BlobData, BlobError> {
    read(call.shared, call.caller.account, blob_id).await
}

/// The answer to an upload (RFC 8620 §6.1).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadResponse {
    pub account_id: String,
    pub blob_id: String,
    #[serde(rename = "type")]
    pub media_type: String,
    pub size: u64,
}

/// Stores an upload of `account`.
pub async fn upload(
    shared: &JmapShared,
    account: AccountId,
    media_type: &str,
    bytes: Bytes,
) -> Result<UploadResponse, BlobError> {
    if bytes.len() as u64 > shared.limits.max_size_upload {
        return Err(BlobError::TooLarge);
    }
    let ctx = &shared.ctx;
    let size = bytes.len() as u64;
    let prepared = ctx.blobs.prepare_object(&ctx.db, bytes).await?;
    let media_type: String = media_type.chars().filter(|c| !c.is_control()).take(255).collect();
    let record = Upload {
        hash: prepared.body.hash.clone(),
        size,
        media_type: if media_type.is_empty() {
            "application/octet-stream".into()
        } else {
            media_type
        },
        created_ms: now_ms(),
    };
    let r = record.clone();
    ctx.db
        .run("jmap_upload", move |txn| {
            let r = r.clone();
            async move { jmap::put_upload(&txn, account, &r) }
        })
        .await?;
    metrics::counter!("meshmail_jmap_upload_bytes_total").increment(size);
    Ok(UploadResponse {
        account_id: ids::account_id(account),
        blob_id: ids::upload_blob_id(&record.hash),
        media_type: record.media_type,
        size,
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CopyArgs {
    from_account_id: String,
    account_id: String,
    blob_ids: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CopyResponse {
    from_account_id: String,
    account_id: String,
    copied: BTreeMap<String, String>,
    not_copied: BTreeMap<String, SetError>,
}

/// Blob/copy: a user has one account, so a copy within it is the same
/// blob; any other account is not found.
pub async fn copy(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: CopyArgs = parse(args)?;
    call.check_account(&args.account_id)?;
    call.check_account(&args.from_account_id)
        .map_err(|_| MethodError::FromAccountNotFound)?;
    crate::jmap::dispatch::check_set_size(call, args.blob_ids.len())?;
    let mut resp = CopyResponse {
        from_account_id: args.from_account_id,
        account_id: args.account_id,
        copied: BTreeMap::new(),
        not_copied: BTreeMap::new(),
    };
    for id in args.blob_ids {
        match read_blob(call, &id).await {
            Ok(_) => {
                resp.copied.insert(id.clone(), id);
            }
            Err(_) => {
                resp.not_copied.insert(id, SetError::not_found());
            }
        }
    }
    reply("Blob/copy", &resp)
}
