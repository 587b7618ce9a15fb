//! Account data JMAP keeps beside the mailboxes: uploaded blobs, bearer
//! tokens, EmailSubmission records and the VacationResponse. None of it is
//! a mailbox: mailbox writes stay with the shard actor.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{decode, get_record, next_sequence, now_ms, put_record};
use crate::error::Result;
use crate::ids::AccountId;
use crate::keyspace;
use crate::kv::{RangeOptions, Txn};

/// How long an upload may be used (RFC 8620 §6.1: at least an hour; the
/// orphan sweep keeps an unreferenced body for its grace period, 1 h).
pub const UPLOAD_TTL_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Upload {
    pub hash: String,
    pub size: u64,
    pub media_type: String,
    pub created_ms: u64,
}

pub fn put_upload(txn: &Txn, account: AccountId, upload: &Upload) -> Result<()> {
    put_record(txn, &keyspace::upload(account, &upload.hash), upload)
}

/// The account's upload of `hash`, if it has one that has not expired.
pub async fn get_upload(txn: &Txn, account: AccountId, hash: &str) -> Result<Option<Upload>> {
    let up: Option<Upload> = get_record(txn, &keyspace::upload(account, hash), "upload").await?;
    Ok(up.filter(|u| now_ms().saturating_sub(u.created_ms) < UPLOAD_TTL_MS))
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Token {
    pub email: String,
    pub created_ms: u64,
}

/// The stored form of a token: its SHA-256 (tokens are 256-bit random, so
/// a fast hash suffices; nothing stored lets anyone log in).
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub fn put_token(txn: &Txn, token: &str, email: &str) -> Result<()> {
    put_record(
        txn,
        &keyspace::token(&token_hash(token)),
        &Token {
            email: email.to_string(),
            created_ms: now_ms(),
        },
    )
}

pub async fn get_token(txn: &Txn, token: &str) -> Result<Option<Token>> {
    get_record(txn, &keyspace::token(&token_hash(token)), "token").await
}

/// What EmailSubmission/get shows of a submission: it was handed to the
/// SMTP acceptance path at once (local recipients delivered, remote ones
/// queued), so its undoStatus is final from the start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Submission {
    pub id: [u8; 16],
    pub identity_id: String,
    pub email_id: String,
    pub thread_id: String,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub send_at_ms: u64,
    /// Per recipient: the SMTP reply the acceptance path gave.
    pub replies: Vec<String>,
}

pub fn put_submission(txn: &Txn, account: AccountId, s: &Submission) -> Result<()> {
    put_record(txn, &keyspace::submission(account, &s.id), s)
}

/// Up to `limit` submissions, oldest first.
pub async fn list_submissions(txn: &Txn, account: AccountId, limit: usize) -> Result<Vec<Submission>> {
    let (b, e) = keyspace::submissions(account);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(limit)).await?;
    rows.iter().map(|(_, v)| decode("submission", v)).collect()
}

/// The newest submission (the EmailSubmission state), read as one key.
pub async fn last_submission(txn: &Txn, account: AccountId) -> Result<Option<Submission>> {
    let (b, e) = keyspace::submissions(account);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(1).reversed()).await?;
    rows.first().map(|(_, v)| decode("submission", v)).transpose()
}

pub fn delete_submission(txn: &Txn, account: AccountId, id: &[u8; 16]) -> Result<()> {
    txn.clear(&keyspace::submission(account, id))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Vacation {
    pub is_enabled: bool,
    pub from_date: Option<String>,
    pub to_date: Option<String>,
    pub subject: Option<String>,
    pub text_body: Option<String>,
    pub html_body: Option<String>,
    /// Raised at every change: the VacationResponse state.
    pub version: u64,
}

pub async fn get_vacation(txn: &Txn, account: AccountId) -> Result<Vacation> {
    Ok(get_record(txn, &keyspace::vacation(account), "vacation")
        .await?
        .unwrap_or_default())
}

pub fn put_vacation(txn: &Txn, account: AccountId, v: &Vacation) -> Result<()> {
    super::directory::changed(txn)?;
    put_record(txn, &keyspace::vacation(account), v)
}

/// The last automatic reply to one sender.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VacationReply {
    pub replied_ms: u64,
    /// The [`Vacation::version`] it answered for: a changed response is a
    /// new period.
    pub version: u64,
}

/// Records an automatic reply to `sender` unless one was sent in this
/// period (same response version, less than `period_ms` ago). True when
/// the caller should send it. The read makes two nodes answering the same
/// sender at once conflict, so one of them sends.
pub async fn claim_vacation_reply(
    txn: &Txn,
    account: AccountId,
    sender: &str,
    version: u64,
    now_ms: u64,
    period_ms: u64,
) -> Result<bool> {
    let sender = sender.to_ascii_lowercase();
    let key = keyspace::vacation_reply(account, &sender);
    let last: Option<VacationReply> = get_record(txn, &key, "vacation reply").await?;
    if last.is_some_and(|l| l.version == version && now_ms.saturating_sub(l.replied_ms) < period_ms) {
        return Ok(false);
    }
    put_record(
        txn,
        &key,
        &VacationReply {
            replied_ms: now_ms,
            version,
        },
    )?;
    Ok(true)
}

/// Identities an account may have.
pub const IDENTITIES_MAX: usize = 100;

/// An address with an optional display name (Identity replyTo and bcc).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NamedAddress {
    pub name: Option<String>,
    pub email: String,
}

/// A JMAP Identity (RFC 8621 §6). Its `email` was checked, when it was
/// created, to be one of the account's own addresses.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Identity {
    pub id: String,
    pub name: String,
    pub email: String,
    pub reply_to: Option<Vec<NamedAddress>>,
    pub bcc: Option<Vec<NamedAddress>>,
    pub text_signature: String,
    pub html_signature: String,
}

/// The stored identities (at most [`IDENTITIES_MAX`]), in id order.
pub async fn list_identities(txn: &Txn, account: AccountId) -> Result<Vec<Identity>> {
    let (b, e) = keyspace::identities(account);
    let rows = txn.get_range(&b, &e, RangeOptions::limit(IDENTITIES_MAX + 1)).await?;
    rows.iter().map(|(_, v)| decode("identity", v)).collect()
}

pub async fn identity_state(txn: &Txn, account: AccountId) -> Result<i64> {
    txn.get_i64(&keyspace::identity_state(account)).await
}

/// Writes an identity and raises the state.
pub fn put_identity(txn: &Txn, account: AccountId, identity: &Identity) -> Result<()> {
    put_record(txn, &keyspace::identity(account, &identity.id), identity)?;
    txn.add_i64(&keyspace::identity_state(account), 1)
}

pub fn delete_identity(txn: &Txn, account: AccountId, id: &str) -> Result<()> {
    txn.clear(&keyspace::identity(account, id))?;
    txn.add_i64(&keyspace::identity_state(account), 1)
}

/// A new identity id (`i<n>`; rare, so a read-write counter is fine).
pub async fn new_identity_id(txn: &Txn, account: AccountId) -> Result<String> {
    Ok(format!(
        "i{}",
        next_sequence(txn, &keyspace::identity_sequence(account)).await?
    ))
}
