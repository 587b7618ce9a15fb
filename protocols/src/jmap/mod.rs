//! JMAP (RFC 8620 Core, RFC 8621 Mail, RFC 8887 WebSocket, RFC 9661
//! Sieve) over meshmail's
//! store and shard actors, in three parts:
//!
//! - [`wire`]: what the JSON means — request/response and error types,
//!   capabilities, result-reference pointers ([`wire::pointer`]), ids and
//!   state strings ([`wire::ids`]), one object parsed on its own
//!   ([`wire::object`], so a bad one is its own `invalidProperties`),
//!   FilterOperator ([`wire::filter`]), and an Email's header forms and body
//!   parts as JMAP writes them ([`wire::email_parts`],
//!   [`wire::email_body_lists`]). Pure code, no I/O. May use
//!   [`crate::summary`] and the store's plain types (ids, records); never
//!   [`methods`], the request layer, the store's transactions or actors.
//! - [`methods`]: one file per method family — [`methods::mailbox`] (+
//!   `mailbox_set`), [`methods::email_get`], [`methods::email_query`]
//!   (query, changes, snippets; + `email_query_index`, `email_filter`),
//!   [`methods::email_set`] (+ `email_build`, the message a create
//!   describes), [`methods::email_import`] (copy, import, parse),
//!   [`methods::thread`], [`methods::identity`], [`methods::submission`],
//!   [`methods::vacation`], [`methods::sieve`] (+ `sieve_set`: RFC 9661
//!   SieveScript, through the operations ManageSieve uses),
//!   [`methods::blob`] (upload, download, copy).
//!   Reads come from the store (snapshot reads); every mailbox write goes
//!   to the account's shard actor (`mailbox_ops::request`,
//!   `delivery::deliver`), wherever it lives in the mesh; EmailSubmission
//!   hands the message to [`crate::accept`] and maps its typed outcomes
//!   to its own answers.
//! - the request layer, here: [`dispatch`] (capability and limit checks,
//!   back-references, creation ids, one method after the other), [`auth`]
//!   (Basic and bearer credentials), [`session`] (the Session resource),
//!   [`push`] (StateChange from the shard actors' hints), `store` (the
//!   reads methods share), and what every request shares ([`JmapShared`]).
//!
//! The HTTP transport (axum routes, EventSource and WebSocket framing)
//! lives in the node crate; this module knows nothing of HTTP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use meshmail_actors::auth::Authenticator;
use meshmail_actors::node::NodeCtx;
use meshmail_storage::ids::AccountId;

use crate::smtp::session::SmtpShared;

pub mod auth;
pub mod dispatch;
pub mod methods;
pub mod push;
pub mod session;
pub(crate) mod store;
pub mod wire;

pub use dispatch::execute;

/// The limits the Session advertises (RFC 8620 §2) and the server enforces.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_size_upload: u64,
    pub max_concurrent_upload: usize,
    pub max_size_request: usize,
    pub max_concurrent_requests: usize,
    pub max_calls_in_request: usize,
    pub max_objects_in_get: usize,
    pub max_objects_in_set: usize,
    /// Email/query results per call when the client gives no limit, and
    /// the most it may ask for.
    pub query_limit_max: usize,
    /// Body values are cut at this many bytes unless the client asks for less.
    pub max_body_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_size_upload: 50 * 1024 * 1024,
            max_concurrent_upload: 4,
            max_size_request: 10 * 1024 * 1024,
            max_concurrent_requests: 8,
            max_calls_in_request: 32,
            max_objects_in_get: 500,
            max_objects_in_set: 500,
            query_limit_max: 1000,
            max_body_value_bytes: 1024 * 1024,
        }
    }
}

/// What every JMAP request of a node shares.
pub struct JmapShared {
    pub ctx: Arc<NodeCtx>,
    pub auth: Arc<Authenticator>,
    /// The submission listener's settings: EmailSubmission goes through
    /// `accept::accept_message` like a message submitted over SMTP.
    pub smtp: Arc<SmtpShared>,
    pub limits: Limits,
    /// Basic and bearer credentials over plaintext HTTP from loopback
    /// clients (dev and tests only); never from any other address.
    pub allow_plaintext_auth_on_loopback: bool,
    in_flight: Mutex<HashMap<AccountId, usize>>,
    uploads_in_flight: Mutex<HashMap<AccountId, usize>>,
}

impl JmapShared {
    pub fn new(
        ctx: Arc<NodeCtx>,
        auth: Arc<Authenticator>,
        smtp: Arc<SmtpShared>,
        limits: Limits,
        allow_plaintext_auth_on_loopback: bool,
    ) -> Arc<JmapShared> {
        Arc::new(JmapShared {
            ctx,
            auth,
            smtp,
            limits,
            allow_plaintext_auth_on_loopback,
            in_flight: Mutex::new(HashMap::new()),
            uploads_in_flight: Mutex::new(HashMap::new()),
        })
    }

    /// Counts a request of `account` in flight (maxConcurrentRequests);
    /// `None` if it already has the most allowed.
    pub fn enter_request(self: &Arc<Self>, account: AccountId) -> Option<InFlight> {
        enter(self, account, false)
    }

    /// The same for uploads (maxConcurrentUpload).
    pub fn enter_upload(self: &Arc<Self>, account: AccountId) -> Option<InFlight> {
        enter(self, account, true)
    }
}

fn enter(shared: &Arc<JmapShared>, account: AccountId, upload: bool) -> Option<InFlight> {
    let (map, max) = if upload {
        (&shared.uploads_in_flight, shared.limits.max_concurrent_upload)
    } else {
        (&shared.in_flight, shared.limits.max_concurrent_requests)
    };
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    let n = m.entry(account).or_default();
    if *n >= max {
        return None;
    }
    *n += 1;
    Some(InFlight {
        shared: shared.clone(),
        account,
        upload,
    })
}

/// A request in flight; counted down when dropped.
pub struct InFlight {
    shared: Arc<JmapShared>,
    account: AccountId,
    upload: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let map = if self.upload {
            &self.shared.uploads_in_flight
        } else {
            &self.shared.in_flight
        };
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.account) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.account);
            }
        }
    }
}

/// The authenticated user of a request: one account, its own.
#[derive(Debug, Clone)]
pub struct Caller {
    pub account: AccountId,
    pub email: String,
    pub ip: IpAddr,
    pub tls: bool,
}
