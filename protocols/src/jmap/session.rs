//! The Session resource (RFC 8620 §2), served at `/.well-known/jmap`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::dispatch::SESSION_STATE;
use super::wire::ids;
use super::wire::{CAP_CORE, CAP_MAIL, CAP_SIEVE, CAP_SUBMISSION, CAP_VACATION, CAP_WEBSOCKET};
use super::{Caller, Limits};
use crate::sieve;

/// Paths on the node's HTTP listener.
pub const API_PATH: &str = "/jmap/api";
pub const UPLOAD_PATH: &str = "/jmap/upload/{accountId}/";
pub const DOWNLOAD_PATH: &str = "/jmap/download/{accountId}/{blobId}/{name}?accept={type}";
pub const EVENT_SOURCE_PATH: &str = "/jmap/eventsource/?types={types}&closeafter={closeafter}&ping={ping}";
pub const WEBSOCKET_PATH: &str = "/jmap/ws";

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreCapability {
    pub max_size_upload: u64,
    pub max_concurrent_upload: usize,
    pub max_size_request: usize,
    pub max_concurrent_requests: usize,
    pub max_calls_in_request: usize,
    pub max_objects_in_get: usize,
    pub max_objects_in_set: usize,
    pub collation_algorithms: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebSocketCapability {
    pub url: String,
    pub supports_push: bool,
}

/// RFC 9661 §1.2.1: the session-level Sieve capability names the
/// implementation; the limits are per account ([`SieveAccountCapability`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SieveCapability {
    pub implementation: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Capability {
    Core(CoreCapability),
    WebSocket(WebSocketCapability),
    Sieve(SieveCapability),
    Empty {},
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MailAccountCapability {
    pub max_mailboxes_per_email: u32,
    pub max_mailbox_depth: Option<u32>,
    pub max_size_mailbox_name: u32,
    pub max_size_attachments_per_email: u64,
    pub email_query_sort_options: Vec<&'static str>,
    pub may_create_top_level_mailbox: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmissionAccountCapability {
    pub max_delayed_send: u64,
    pub submission_extensions: BTreeMap<String, Vec<String>>,
}

/// RFC 9661 §1.2.1, with the limits ManageSieve and delivery enforce
/// (one constant each, never a copy): the store's name and script
/// count limits, the compiler's size limit and extensions, the
/// interpreter's redirect limit.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SieveAccountCapability {
    pub max_size_script_name: usize,
    pub max_size_script: usize,
    pub max_number_scripts: usize,
    pub max_number_redirects: usize,
    pub sieve_extensions: Vec<&'static str>,
    /// `enotify` is not supported: null.
    pub notification_methods: Option<Vec<String>>,
    /// `extlists` is not supported: null.
    pub external_lists: Option<Vec<String>>,
}

impl SieveAccountCapability {
    pub fn new() -> Self {
        use meshmail_storage::model::sieve::{NAME_BYTES_MAX, SCRIPTS_MAX};
        SieveAccountCapability {
            max_size_script_name: NAME_BYTES_MAX,
            max_size_script: sieve::SCRIPT_BYTES_MAX,
            max_number_scripts: SCRIPTS_MAX,
            max_number_redirects: sieve::interp::REDIRECTS_MAX,
            sieve_extensions: sieve::compile::EXTENSIONS.to_vec(),
            notification_methods: None,
            external_lists: None,
        }
    }
}

impl Default for SieveAccountCapability {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum AccountCapability {
    Mail(MailAccountCapability),
    Submission(SubmissionAccountCapability),
    Sieve(SieveAccountCapability),
    Empty {},
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub name: String,
    pub is_personal: bool,
    pub is_read_only: bool,
    pub account_capabilities: BTreeMap<&'static str, AccountCapability>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub capabilities: BTreeMap<&'static str, Capability>,
    pub accounts: BTreeMap<String, Account>,
    pub primary_accounts: BTreeMap<&'static str, String>,
    pub username: String,
    pub api_url: String,
    pub download_url: String,
    pub upload_url: String,
    pub event_source_url: String,
    pub state: String,
}

/// The Session of `caller`; `base` is the URL prefix clients reached this
/// node with (`http://127.0.0.1:8080`), `ws_base` the same for WebSocket.
pub fn session(caller: &Caller, limits: &Limits, base: &str, ws_base: &str) -> Session {
    let account_id = ids::account_id(caller.account);
    let capabilities = BTreeMap::from([
        (
            CAP_CORE,
            Capability::Core(CoreCapability {
                max_size_upload: limits.max_size_upload,
                max_concurrent_upload: limits.max_concurrent_upload,
                max_size_request: limits.max_size_request,
                max_concurrent_requests: limits.max_concurrent_requests,
                max_calls_in_request: limits.max_calls_in_request,
                max_objects_in_get: limits.max_objects_in_get,
                max_objects_in_set: limits.max_objects_in_set,
                collation_algorithms: vec!["i;ascii-casemap"],
            }),
        ),
        (CAP_MAIL, Capability::Empty {}),
        (CAP_SUBMISSION, Capability::Empty {}),
        (CAP_VACATION, Capability::Empty {}),
        (
            CAP_SIEVE,
            Capability::Sieve(SieveCapability {
                implementation: "meshmail",
            }),
        ),
        (
            CAP_WEBSOCKET,
            Capability::WebSocket(WebSocketCapability {
                url: format!("{ws_base}{WEBSOCKET_PATH}"),
                supports_push: true,
            }),
        ),
    ]);
    let account = Account {
        name: caller.email.clone(),
        is_personal: true,
        is_read_only: false,
        account_capabilities: BTreeMap::from([
            (
                CAP_MAIL,
                AccountCapability::Mail(MailAccountCapability {
                    max_mailboxes_per_email: 1,
                    max_mailbox_depth: None,
                    max_size_mailbox_name: 255,
                    max_size_attachments_per_email: limits.max_size_upload,
                    email_query_sort_options: vec!["receivedAt", "sentAt", "size", "from", "to", "subject"],
                    may_create_top_level_mailbox: true,
                }),
            ),
            (
                CAP_SUBMISSION,
                AccountCapability::Submission(SubmissionAccountCapability {
                    max_delayed_send: 0,
                    submission_extensions: BTreeMap::new(),
                }),
            ),
            (CAP_VACATION, AccountCapability::Empty {}),
            (CAP_SIEVE, AccountCapability::Sieve(SieveAccountCapability::new())),
        ]),
    };
    Session {
        capabilities,
        accounts: BTreeMap::from([(account_id.clone(), account)]),
        primary_accounts: BTreeMap::from([
            (CAP_MAIL, account_id.clone()),
            (CAP_SUBMISSION, account_id.clone()),
            (CAP_VACATION, account_id.clone()),
            (CAP_SIEVE, account_id),
        ]),
        username: caller.email.clone(),
        api_url: format!("{base}{API_PATH}"),
        download_url: format!("{base}{DOWNLOAD_PATH}"),
        upload_url: format!("{base}{UPLOAD_PATH}"),
        event_source_url: format!("{base}{EVENT_SOURCE_PATH}"),
        state: SESSION_STATE.into(),
    }
}
