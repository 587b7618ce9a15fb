//! JMAP's wire layer (RFC 8620 §3): the request and response envelopes,
//! result references, and the two kinds of error — request-level problem
//! details (RFC 7807, §3.6.1) and method-level errors (§3.6.2). Pure types,
//! no I/O and no store access.
//!
//! Method arguments stay JSON values only here, between the envelope and
//! the method: back-references (§3.7) are resolved on the JSON of earlier
//! responses before a method parses its arguments into its own typed struct.
//!
//! The folder holds the rest of JMAP's wire layer: [`pointer`] (result
//! reference paths), [`ids`] (ids and state strings, shared with IMAP's
//! OBJECTID), [`object`] (one object parsed on its own), [`filter`]
//! (FilterOperator), [`email_parts`] and [`email_body_lists`] (an Email's
//! header forms and body parts as JMAP writes them), [`sieve`] (RFC
//! 9661's SieveScript, its filter and state string).
//!
//! What it may touch: serde, `mail-parser`, [`crate::summary`] and the
//! store's plain types (ids, records). Never `jmap::methods`, the request
//! layer (`jmap::dispatch`, `jmap::store`...), the store's transactions,
//! the actors or [`crate::net`] (`protocols/tests/layers.rs` fails if it
//! does).

pub mod email_body_lists;
pub mod email_parts;
pub mod filter;
pub mod ids;
pub mod object;
pub mod pointer;
pub mod sieve;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const CAP_CORE: &str = "urn:ietf:params:jmap:core";
pub const CAP_MAIL: &str = "urn:ietf:params:jmap:mail";
pub const CAP_SUBMISSION: &str = "urn:ietf:params:jmap:submission";
pub const CAP_VACATION: &str = "urn:ietf:params:jmap:vacationresponse";
pub const CAP_WEBSOCKET: &str = "urn:ietf:params:jmap:websocket";
pub const CAP_SIEVE: &str = "urn:ietf:params:jmap:sieve";

/// Capabilities this server implements.
pub const CAPABILITIES: &[&str] = &[
    CAP_CORE,
    CAP_MAIL,
    CAP_SUBMISSION,
    CAP_VACATION,
    CAP_WEBSOCKET,
    CAP_SIEVE,
];

/// Capabilities of the IANA JMAP registry this server does not implement.
/// A request may name them (some clients, jmap-client among them, always
/// send their whole list); they enable no method here. Any other URI is
/// an unknownCapability.
pub const REGISTERED_NOT_IMPLEMENTED: &[&str] = &[
    "urn:ietf:params:jmap:blob",
    "urn:ietf:params:jmap:calendars",
    "urn:ietf:params:jmap:contacts",
    "urn:ietf:params:jmap:mdn",
    "urn:ietf:params:jmap:principals",
    "urn:ietf:params:jmap:principals:owner",
    "urn:ietf:params:jmap:quota",
    "urn:ietf:params:jmap:smimeverify",
    "urn:ietf:params:jmap:tasks",
];

/// A JMAP request (RFC 8620 §3.3).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    pub using: Vec<String>,
    pub method_calls: Vec<Invocation>,
    #[serde(default)]
    pub created_ids: Option<BTreeMap<String, String>>,
    /// RFC 8887: the WebSocket form carries a type and an id.
    #[serde(default, rename = "@type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
}

/// `[name, arguments, callId]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub name: String,
    pub arguments: serde_json::Map<String, Value>,
    pub call_id: String,
}

impl<'de> Deserialize<'de> for Invocation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (name, arguments, call_id) = <(String, serde_json::Map<String, Value>, String)>::deserialize(d)?;
        Ok(Invocation {
            name,
            arguments,
            call_id,
        })
    }
}

impl Serialize for Invocation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&self.name, &self.arguments, &self.call_id).serialize(s)
    }
}

/// A JMAP response (RFC 8620 §3.4).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    #[serde(rename = "@type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub method_responses: Vec<Invocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_ids: Option<BTreeMap<String, String>>,
    pub session_state: String,
}

/// `{"resultOf", "name", "path"}` (RFC 8620 §3.7).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultReference {
    pub result_of: String,
    pub name: String,
    pub path: String,
}

/// Request-level problems (RFC 8620 §3.6.1), answered with an HTTP status
/// and an RFC 7807 body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the content is not JSON: {0}")]
    NotJson(String),
    #[error("the JSON is not a JMAP request: {0}")]
    NotRequest(String),
    #[error("the request uses an unknown capability: {0}")]
    UnknownCapability(String),
    #[error("the request exceeds the limit {limit}")]
    Limit { limit: &'static str },
}

/// The problem-details body of a [`RequestError`].
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub status: u16,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<&'static str>,
}

impl RequestError {
    pub fn type_uri(&self) -> &'static str {
        match self {
            RequestError::NotJson(_) => "urn:ietf:params:jmap:error:notJSON",
            RequestError::NotRequest(_) => "urn:ietf:params:jmap:error:notRequest",
            RequestError::UnknownCapability(_) => "urn:ietf:params:jmap:error:unknownCapability",
            RequestError::Limit { .. } => "urn:ietf:params:jmap:error:limit",
        }
    }

    pub fn problem(&self) -> Problem {
        Problem {
            kind: self.type_uri(),
            status: 400,
            detail: self.to_string(),
            limit: match self {
                RequestError::Limit { limit } => Some(limit),
                _ => None,
            },
        }
    }
}

/// Method-level errors (RFC 8620 §3.6.2, RFC 8621): answered as an
/// `["error", {"type": ...}, callId]` invocation; the request goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodError {
    #[error("unknownMethod")]
    UnknownMethod,
    #[error("invalidArguments: {0}")]
    InvalidArguments(String),
    #[error("invalidResultReference: {0}")]
    InvalidResultReference(String),
    #[error("accountNotFound")]
    AccountNotFound,
    #[error("accountNotSupportedByMethod")]
    AccountNotSupportedByMethod,
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("requestTooLarge")]
    RequestTooLarge,
    #[error("cannotCalculateChanges")]
    CannotCalculateChanges,
    /// A /queryChanges with more changes than its maxChanges.
    #[error("tooManyChanges")]
    TooManyChanges,
    #[error("anchorNotFound")]
    AnchorNotFound,
    #[error("unsupportedFilter: {0}")]
    UnsupportedFilter(String),
    #[error("unsupportedSort: {0}")]
    UnsupportedSort(String),
    #[error("stateMismatch")]
    StateMismatch,
    #[error("fromAccountNotFound")]
    FromAccountNotFound,
    #[error("serverUnavailable: {0}")]
    ServerUnavailable(String),
    #[error("serverFail: {0}")]
    ServerFail(String),
}

impl MethodError {
    pub fn type_name(&self) -> &'static str {
        match self {
            MethodError::UnknownMethod => "unknownMethod",
            MethodError::InvalidArguments(_) => "invalidArguments",
            MethodError::InvalidResultReference(_) => "invalidResultReference",
            MethodError::AccountNotFound => "accountNotFound",
            MethodError::AccountNotSupportedByMethod => "accountNotSupportedByMethod",
            MethodError::Forbidden(_) => "forbidden",
            MethodError::RequestTooLarge => "requestTooLarge",
            MethodError::CannotCalculateChanges => "cannotCalculateChanges",
            MethodError::TooManyChanges => "tooManyChanges",
            MethodError::AnchorNotFound => "anchorNotFound",
            MethodError::UnsupportedFilter(_) => "unsupportedFilter",
            MethodError::UnsupportedSort(_) => "unsupportedSort",
            MethodError::StateMismatch => "stateMismatch",
            MethodError::FromAccountNotFound => "fromAccountNotFound",
            MethodError::ServerUnavailable(_) => "serverUnavailable",
            MethodError::ServerFail(_) => "serverFail",
        }
    }

    /// The error's arguments object.
    pub fn to_arguments(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), Value::String(self.type_name().into()));
        let description = match self {
            MethodError::InvalidArguments(d)
            | MethodError::InvalidResultReference(d)
            | MethodError::Forbidden(d)
            | MethodError::UnsupportedFilter(d)
            | MethodError::UnsupportedSort(d)
            | MethodError::ServerUnavailable(d)
            | MethodError::ServerFail(d) => Some(d.clone()),
            _ => None,
        };
        if let Some(d) = description {
            m.insert("description".into(), Value::String(d));
        }
        m
    }
}

/// A per-object error in a /set or /copy response (RFC 8620 §5.3).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SetError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<String>>,
    /// `blobNotFound`: the blob ids that do not exist (RFC 8621 §4.6).
    #[serde(rename = "notFound", skip_serializing_if = "Option::is_none")]
    pub not_found: Option<Vec<String>>,
    /// `alreadyExists`: the id of the object that holds the name (RFC
    /// 9661 §2.4 for SieveScript).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_id: Option<String>,
}

impl SetError {
    pub fn new(kind: &'static str, description: impl Into<String>) -> SetError {
        SetError {
            kind,
            description: Some(description.into()),
            properties: None,
            not_found: None,
            existing_id: None,
        }
    }
    pub fn not_found() -> SetError {
        SetError {
            kind: "notFound",
            description: None,
            properties: None,
            not_found: None,
            existing_id: None,
        }
    }
    /// `blobNotFound` naming the missing blobs.
    pub fn blob_not_found(blob_ids: Vec<String>) -> SetError {
        SetError {
            kind: "blobNotFound",
            description: Some(format!("no such blob: {}", blob_ids.join(", "))),
            properties: None,
            not_found: Some(blob_ids),
            existing_id: None,
        }
    }
    pub fn invalid_properties(props: &[&str], description: impl Into<String>) -> SetError {
        SetError {
            kind: "invalidProperties",
            description: Some(description.into()),
            properties: Some(props.iter().map(|p| p.to_string()).collect()),
            not_found: None,
            existing_id: None,
        }
    }
}

/// Parses `text` as a request: notJSON for bytes that are not JSON,
/// notRequest for JSON that is not a request.
pub fn parse_request(text: &[u8]) -> Result<Request, RequestError> {
    let value: Value = serde_json::from_slice(text).map_err(|e| RequestError::NotJson(e.to_string()))?;
    serde_json::from_value(value).map_err(|e| RequestError::NotRequest(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_refuse() {
        let r = parse_request(br#"{"using":["urn:ietf:params:jmap:core"],"methodCalls":[["Core/echo",{"a":1},"c0"]]}"#)
            .unwrap();
        assert_eq!(r.method_calls[0].name, "Core/echo");
        assert_eq!(r.method_calls[0].call_id, "c0");
        assert!(matches!(parse_request(b"{nope"), Err(RequestError::NotJson(_))));
        assert!(matches!(parse_request(b"[1,2]"), Err(RequestError::NotRequest(_))));
        assert!(matches!(
            parse_request(br#"{"using":[],"methodCalls":[["x",1,"c"]]}"#),
            Err(RequestError::NotRequest(_))
        ));
    }
}
