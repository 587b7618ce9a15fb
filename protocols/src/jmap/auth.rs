//! Credentials of a JMAP request: HTTP Basic (checked by the node's
//! `Authenticator`: the same argon2 pool, credential cache and failure
//! limits as IMAP and SMTP AUTH) or a bearer token (`meshmail token
//! create USER`, stored as its SHA-256).

use std::net::IpAddr;

use base64::Engine;
use meshmail_actors::auth::AuthOutcome;
use meshmail_storage::StorageError;
use meshmail_storage::model::{accounts, jmap};

use super::{Caller, JmapShared};

/// Authorization header values longer than this are refused unread.
pub const AUTHORIZATION_MAX_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("authentication required")]
    Missing,
    #[error("malformed Authorization header")]
    Malformed,
    #[error("invalid credentials")]
    Failed,
    #[error("too many failed attempts; try again in {} s", retry_after.as_secs())]
    RateLimited { retry_after: std::time::Duration },
    #[error("credentials over plaintext HTTP are refused (use HTTPS)")]
    PlaintextRefused,
    #[error("authentication is unavailable: {0}")]
    Unavailable(String),
}

/// The caller named by `authorization`, or why not.
pub async fn authenticate(
    shared: &JmapShared,
    authorization: Option<&str>,
    ip: IpAddr,
    tls: bool,
) -> Result<Caller, AuthError> {
    let header = authorization.ok_or(AuthError::Missing)?;
    if header.len() > AUTHORIZATION_MAX_BYTES {
        return Err(AuthError::Malformed);
    }
    let loopback_allowed = shared.allow_plaintext_auth_on_loopback && ip.is_loopback();
    if !(tls || loopback_allowed) {
        return Err(AuthError::PlaintextRefused);
    }
    let (scheme, value) = header.trim().split_once(' ').ok_or(AuthError::Malformed)?;
    let started = std::time::Instant::now();
    let result = if scheme.eq_ignore_ascii_case("basic") {
        basic(shared, value.trim(), ip, tls).await
    } else if scheme.eq_ignore_ascii_case("bearer") {
        bearer(shared, value.trim(), ip, tls).await
    } else {
        Err(AuthError::Malformed)
    };
    let label = if result.is_ok() { "ok" } else { "refused" };
    metrics::histogram!("meshmail_jmap_auth_seconds", "result" => label).record(started.elapsed().as_secs_f64());
    result
}

async fn basic(shared: &JmapShared, value: &str, ip: IpAddr, tls: bool) -> Result<Caller, AuthError> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|_| AuthError::Malformed)?;
    let text = String::from_utf8(decoded).map_err(|_| AuthError::Malformed)?;
    let (user, password) = text.split_once(':').ok_or(AuthError::Malformed)?;
    match shared.auth.authenticate(user, password, ip).await {
        AuthOutcome::Ok(a) => Ok(Caller {
            account: a.id,
            email: a.email,
            ip,
            tls,
        }),
        AuthOutcome::Failed => Err(AuthError::Failed),
        AuthOutcome::RateLimited { retry_after } => Err(AuthError::RateLimited { retry_after }),
        AuthOutcome::Unavailable(e) => Err(AuthError::Unavailable(e)),
    }
}

async fn bearer(shared: &JmapShared, token: &str, ip: IpAddr, tls: bool) -> Result<Caller, AuthError> {
    if token.is_empty() || token.len() > 256 {
        return Err(AuthError::Malformed);
    }
    let t = token.to_string();
    let found = shared
        .ctx
        .db
        .read("jmap_token", move |txn| {
            let t = t.clone();
            async move {
                let Some(tok) = jmap::get_token(&txn, &t).await? else {
                    return Ok::<_, StorageError>(None);
                };
                accounts::get(&txn, &tok.email).await
            }
        })
        .await
        .map_err(|e| AuthError::Unavailable(e.to_string()))?;
    match found {
        Some(a) => Ok(Caller {
            account: a.id,
            email: a.email,
            ip,
            tls,
        }),
        None => Err(AuthError::Failed),
    }
}

/// A new random token (256 bits, URL-safe base64).
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
