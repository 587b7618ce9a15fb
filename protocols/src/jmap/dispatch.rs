//! Runs one JMAP request (RFC 8620 §3.3–3.7): capability and limit checks,
//! then each method call in order, with its back-references resolved on
//! the responses before it and its creation ids on the ones made so far.
//! A failing method becomes an `error` response and the request goes on;
//! only a malformed or over-limit request fails as a whole.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::methods::{
    blob, email_get, email_import, email_query, email_query_index, email_set, identity, mailbox, mailbox_set, sieve,
    sieve_set, submission, thread, vacation,
};
use super::wire::ids;
use super::wire::{
    CAP_CORE, CAP_MAIL, CAP_SIEVE, CAP_SUBMISSION, CAP_VACATION, CAPABILITIES, Invocation, MethodError,
    REGISTERED_NOT_IMPLEMENTED, Request, RequestError, Response, ResultReference,
};
use super::{Caller, JmapShared};

/// The Session state: the Session object of an account changes only with
/// the server's configuration.
pub const SESSION_STATE: &str = "1";

/// One request's context: who calls, and the creation ids made so far.
pub struct Call<'a> {
    pub shared: &'a Arc<JmapShared>,
    pub caller: &'a Caller,
    /// Creation id (without `#`) → server id.
    pub created: BTreeMap<String, String>,
}

impl Call<'_> {
    /// The caller's account, if `id` names it (a user sees only their own).
    pub fn check_account(&self, id: &str) -> Result<(), MethodError> {
        match ids::parse_account(id) {
            Some(a) if a == self.caller.account => Ok(()),
            _ => Err(MethodError::AccountNotFound),
        }
    }

    pub fn account_id(&self) -> String {
        ids::account_id(self.caller.account)
    }

    /// Resolves `#creationId` to the id created earlier in this request.
    pub fn resolve_id(&self, id: &str) -> Option<String> {
        match id.strip_prefix('#') {
            Some(c) => self.created.get(c).cloned(),
            None => Some(id.to_string()),
        }
    }
}

/// What a method answers: usually one response, sometimes more (an
/// EmailSubmission with onSuccessUpdateEmail adds an implicit Email/set).
pub type Output = Vec<(String, Value)>;

pub fn parse<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, MethodError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| MethodError::InvalidArguments(e.to_string()))
}

pub fn reply<T: Serialize>(name: &str, value: &T) -> Result<Output, MethodError> {
    let v = serde_json::to_value(value).map_err(|e| MethodError::ServerFail(e.to_string()))?;
    Ok(vec![(name.to_string(), v)])
}

/// Runs a request for `caller`.
pub async fn execute(shared: &Arc<JmapShared>, caller: &Caller, req: Request) -> Result<Response, RequestError> {
    for cap in &req.using {
        if !CAPABILITIES.contains(&cap.as_str()) && !REGISTERED_NOT_IMPLEMENTED.contains(&cap.as_str()) {
            return Err(RequestError::UnknownCapability(cap.clone()));
        }
    }
    if req.method_calls.len() > shared.limits.max_calls_in_request {
        return Err(RequestError::Limit {
            limit: "maxCallsInRequest",
        });
    }
    let echo_created = req.created_ids.is_some();
    let mut call = Call {
        shared,
        caller,
        created: req.created_ids.unwrap_or_default(),
    };
    let mut responses: Vec<Invocation> = Vec::with_capacity(req.method_calls.len());
    for inv in req.method_calls {
        let started = Instant::now();
        let outcome = match resolve_references(inv.arguments, &responses) {
            Ok(args) => run_method(&mut call, &req.using, &inv.name, args).await,
            Err(e) => Err(e),
        };
        let label = method_label(&inv.name);
        match outcome {
            Ok(outputs) => {
                metrics::counter!("meshmail_jmap_calls_total", "method" => label, "result" => "ok").increment(1);
                for (name, value) in outputs {
                    let arguments = match value {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    responses.push(Invocation {
                        name,
                        arguments,
                        call_id: inv.call_id.clone(),
                    });
                }
            }
            Err(e) => {
                metrics::counter!("meshmail_jmap_calls_total", "method" => label, "result" => e.type_name())
                    .increment(1);
                responses.push(Invocation {
                    name: "error".into(),
                    arguments: e.to_arguments(),
                    call_id: inv.call_id.clone(),
                });
            }
        }
        metrics::histogram!("meshmail_jmap_call_seconds", "method" => label).record(started.elapsed().as_secs_f64());
    }
    Ok(Response {
        kind: None,
        request_id: None,
        method_responses: responses,
        created_ids: echo_created.then_some(call.created),
        session_state: SESSION_STATE.to_string(),
    })
}

/// A bounded label set for metrics: known method names, or "other".
fn method_label(name: &str) -> &'static str {
    METHODS.iter().find(|(n, _)| *n == name).map_or("other", |(n, _)| n)
}

/// Every method and the capability a request must use for it.
const METHODS: &[(&str, &str)] = &[
    ("Core/echo", CAP_CORE),
    ("Blob/copy", CAP_CORE),
    ("Mailbox/get", CAP_MAIL),
    ("Mailbox/changes", CAP_MAIL),
    ("Mailbox/query", CAP_MAIL),
    ("Mailbox/queryChanges", CAP_MAIL),
    ("Mailbox/set", CAP_MAIL),
    ("Thread/get", CAP_MAIL),
    ("Thread/changes", CAP_MAIL),
    ("Email/get", CAP_MAIL),
    ("Email/changes", CAP_MAIL),
    ("Email/query", CAP_MAIL),
    ("Email/queryChanges", CAP_MAIL),
    ("Email/set", CAP_MAIL),
    ("Email/copy", CAP_MAIL),
    ("Email/import", CAP_MAIL),
    ("Email/parse", CAP_MAIL),
    ("SearchSnippet/get", CAP_MAIL),
    ("Identity/get", CAP_SUBMISSION),
    ("Identity/changes", CAP_SUBMISSION),
    ("Identity/set", CAP_SUBMISSION),
    ("EmailSubmission/get", CAP_SUBMISSION),
    ("EmailSubmission/changes", CAP_SUBMISSION),
    ("EmailSubmission/query", CAP_SUBMISSION),
    ("EmailSubmission/queryChanges", CAP_SUBMISSION),
    ("EmailSubmission/set", CAP_SUBMISSION),
    ("VacationResponse/get", CAP_VACATION),
    ("VacationResponse/set", CAP_VACATION),
    ("SieveScript/get", CAP_SIEVE),
    ("SieveScript/changes", CAP_SIEVE),
    ("SieveScript/query", CAP_SIEVE),
    ("SieveScript/set", CAP_SIEVE),
    ("SieveScript/validate", CAP_SIEVE),
];

async fn run_method(
    call: &mut Call<'_>,
    using: &[String],
    name: &str,
    args: Map<String, Value>,
) -> Result<Output, MethodError> {
    let Some((_, cap)) = METHODS.iter().find(|(n, _)| *n == name) else {
        return Err(MethodError::UnknownMethod);
    };
    // RFC 8620 §3.3: a method of a capability the request does not use is
    // unknown to it.
    if !using.iter().any(|u| u == cap) {
        return Err(MethodError::UnknownMethod);
    }
    if name != "Core/echo" {
        match args.get("accountId") {
            Some(Value::String(id)) => call.check_account(id)?,
            Some(_) => return Err(MethodError::InvalidArguments("accountId must be a string".into())),
            None if name == "Blob/copy" || name == "Email/copy" => {}
            None => return Err(MethodError::InvalidArguments("accountId is required".into())),
        }
    }
    match name {
        "Core/echo" => Ok(vec![("Core/echo".into(), Value::Object(args))]),
        "Blob/copy" => blob::copy(call, args).await,
        "Mailbox/get" => mailbox::get(call, args).await,
        "Mailbox/changes" => mailbox::changes(call, args).await,
        "Mailbox/query" => mailbox::query(call, args).await,
        "Mailbox/queryChanges" => mailbox::query_changes(call, args).await,
        "Mailbox/set" => mailbox_set::set(call, args).await,
        "Thread/get" => thread::get(call, args).await,
        "Thread/changes" => thread::changes(call, args).await,
        "Email/get" => email_get::get(call, args).await,
        "Email/changes" => email_query::changes(call, args).await,
        "Email/query" => email_query::query(call, args).await,
        "Email/queryChanges" => email_query_index::query_changes(call, args).await,
        "SearchSnippet/get" => email_query::snippets(call, args).await,
        "Email/set" => email_set::set(call, args).await,
        "Email/copy" => email_import::copy(call, args).await,
        "Email/import" => email_import::import(call, args).await,
        "Email/parse" => email_import::parse_blobs(call, args).await,
        "Identity/get" => identity::get(call, args).await,
        "Identity/changes" => identity::changes(call, args).await,
        "Identity/set" => identity::set(call, args).await,
        "EmailSubmission/get" => submission::get(call, args).await,
        "EmailSubmission/changes" => submission::changes(call, args).await,
        "EmailSubmission/query" => submission::query(call, args).await,
        "EmailSubmission/queryChanges" => submission::query_changes(call, args).await,
        "EmailSubmission/set" => submission::set(call, args).await,
        "VacationResponse/get" => vacation::get(call, args).await,
        "VacationResponse/set" => vacation::set(call, args).await,
        "SieveScript/get" => sieve::get(call, args).await,
        "SieveScript/changes" => sieve::changes(call, args).await,
        "SieveScript/query" => sieve::query(call, args).await,
        "SieveScript/set" => sieve_set::set(call, args).await,
        "SieveScript/validate" => sieve::validate(call, args).await,
        _ => Err(MethodError::UnknownMethod),
    }
}

/// Replaces every `"#name": ResultReference` argument by the value it
/// points at (RFC 8620 §3.7).
fn resolve_references(args: Map<String, Value>, earlier: &[Invocation]) -> Result<Map<String, Value>, MethodError> {
    for key in args.keys() {
        if let Some(name) = key.strip_prefix('#')
            && args.contains_key(name)
        {
            return Err(MethodError::InvalidArguments(format!("both {name} and #{name} given")));
        }
    }
    let mut out = Map::with_capacity(args.len());
    for (key, value) in args {
        let Some(name) = key.strip_prefix('#') else {
            out.insert(key, value);
            continue;
        };
        let reference: ResultReference =
            serde_json::from_value(value).map_err(|e| MethodError::InvalidResultReference(format!("{key}: {e}")))?;
        let source = earlier
            .iter()
            .find(|r| r.call_id == reference.result_of && r.name == reference.name)
            .ok_or_else(|| {
                MethodError::InvalidResultReference(format!(
                    "no {} response with call id {}",
                    reference.name, reference.result_of
                ))
            })?;
        let resolved = super::wire::pointer::evaluate(&Value::Object(source.arguments.clone()), &reference.path)
            .ok_or_else(|| MethodError::InvalidResultReference(format!("path {} does not exist", reference.path)))?;
        out.insert(name.to_string(), resolved);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inv(name: &str, args: Value, id: &str) -> Invocation {
        Invocation {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            call_id: id.into(),
        }
    }

    #[test]
    fn selected_properties_always_carry_the_id() {
        let obj = json!({"id": "m1", "name": "INBOX", "role": "inbox"});
        let props = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for asked in [
            props(&["id", "name"]),
            props(&["name", "id"]),
            props(&["name"]),
            props(&["id", "id", "name"]),
        ] {
            let got = select_properties(obj.clone(), Some(&asked));
            assert_eq!(got, json!({"id": "m1", "name": "INBOX"}), "{asked:?}");
        }
        assert_eq!(select_properties(obj.clone(), None), obj);
        // An object without an id (Email/parse) answers null when asked.
        let parsed = select_properties(json!({"subject": "x"}), Some(&props(&["id", "subject"])));
        assert_eq!(parsed, json!({"id": null, "subject": "x"}));
    }

    #[test]
    fn back_references_resolve_or_fail() {
        let earlier = vec![inv("Email/query", json!({"ids": ["e1_1", "e1_2"]}), "q")];
        let args = json!({"#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}, "accountId": "a1"});
        let got = resolve_references(args.as_object().unwrap().clone(), &earlier).unwrap();
        assert_eq!(got["ids"], json!(["e1_1", "e1_2"]));
        for bad in [
            json!({"#ids": {"resultOf": "x", "name": "Email/query", "path": "/ids"}}),
            json!({"#ids": {"resultOf": "q", "name": "Email/get", "path": "/ids"}}),
            json!({"#ids": {"resultOf": "q", "name": "Email/query", "path": "/nope"}}),
            json!({"#ids": 5}),
        ] {
            let e = resolve_references(bad.as_object().unwrap().clone(), &earlier).unwrap_err();
            assert_eq!(e.type_name(), "invalidResultReference", "{bad}");
        }
        let both = json!({"ids": [], "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}});
        assert_eq!(
            resolve_references(both.as_object().unwrap().clone(), &earlier)
                .unwrap_err()
                .type_name(),
            "invalidArguments"
        );
    }
}

/// Keeps only the properties asked for (`id` always, RFC 8620 §5.1).
/// `None`: all. A property the object lacks is `null`.
pub fn select_properties(value: Value, properties: Option<&[String]>) -> Value {
    let (props, mut m) = match (properties, value) {
        (Some(props), Value::Object(m)) => (props, m),
        (_, value) => return value,
    };
    let mut out = Map::with_capacity(props.len() + 1);
    if let Some(id) = m.remove("id") {
        out.insert("id".into(), id);
    }
    for p in props {
        // Each value is moved out once: a second look (a listed `id`, taken
        // above, or a property listed twice) must keep the first, not
        // overwrite it with null — the `"id": null` of issue 39.
        if out.contains_key(p) {
            continue;
        }
        let v = m.remove(p).unwrap_or(Value::Null);
        out.insert(p.clone(), v);
    }
    Value::Object(out)
}

/// The arguments of every /get (RFC 8620 §5.1).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetArgs {
    pub account_id: String,
    #[serde(default)]
    pub ids: Option<Vec<String>>,
    #[serde(default)]
    pub properties: Option<Vec<String>>,
}

/// The arguments of every /changes (RFC 8620 §5.2).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangesArgs {
    pub account_id: String,
    pub since_state: String,
    #[serde(default)]
    pub max_changes: Option<u64>,
}

/// The answer of every /changes.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangesResponse {
    pub account_id: String,
    pub old_state: String,
    pub new_state: String,
    pub has_more_changes: bool,
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub destroyed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_properties: Option<Vec<String>>,
}

/// The arguments of every /queryChanges (RFC 8620 §5.6); this server
/// answers cannotCalculateChanges (allowed: clients query again).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryChangesArgs {
    pub account_id: String,
    pub since_query_state: String,
}

pub fn query_changes_unsupported(args: Map<String, Value>) -> Result<Output, MethodError> {
    let _: QueryChangesArgs = parse(args)?;
    Err(MethodError::CannotCalculateChanges)
}

/// Checks a /get's ids against maxObjectsInGet.
pub fn check_get_size(call: &Call<'_>, ids: Option<&Vec<String>>) -> Result<(), MethodError> {
    if ids.is_some_and(|ids| ids.len() > call.shared.limits.max_objects_in_get) {
        return Err(MethodError::RequestTooLarge);
    }
    Ok(())
}

/// The response of every /get (RFC 8620 §5.1).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetResponse<T: serde::Serialize = Value> {
    pub account_id: String,
    pub state: String,
    pub list: Vec<T>,
    pub not_found: Vec<String>,
}

/// The arguments of a /set whose objects are parsed one by one (so one
/// bad object is a SetError, not an invalidArguments for the call).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlainSetArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    pub if_in_state: Option<String>,
    #[serde(default)]
    pub create: Option<std::collections::BTreeMap<String, Value>>,
    #[serde(default)]
    pub update: Option<std::collections::BTreeMap<String, Value>>,
    #[serde(default)]
    pub destroy: Option<Vec<String>>,
}

/// How many objects a /set names (create + update + destroy).
pub fn set_count<C, U>(
    create: Option<&std::collections::BTreeMap<String, C>>,
    update: Option<&std::collections::BTreeMap<String, U>>,
    destroy: Option<&Vec<String>>,
) -> usize {
    create.map_or(0, |c| c.len()) + update.map_or(0, |u| u.len()) + destroy.map_or(0, |d| d.len())
}

/// The start every /set shares (RFC 8620 §5.3): the object count against
/// maxObjectsInSet, then `ifInState` against the current state.
pub fn begin_set(
    call: &Call<'_>,
    objects: usize,
    if_in_state: Option<&str>,
    old_state: &str,
) -> Result<(), MethodError> {
    check_set_size(call, objects)?;
    if if_in_state.is_some_and(|s| s != old_state) {
        return Err(MethodError::StateMismatch);
    }
    Ok(())
}

/// Checks a /set's create + update + destroy count against maxObjectsInSet.
pub fn check_set_size(call: &Call<'_>, n: usize) -> Result<(), MethodError> {
    if n > call.shared.limits.max_objects_in_set {
        return Err(MethodError::RequestTooLarge);
    }
    Ok(())
}
