//! Identity/get, /changes and /set (RFC 8621 §6). `i0` is the account's own
//! address and always exists (it cannot be destroyed; its name and
//! signatures can be edited); the user may add identities for other
//! addresses they own — a subaddress, an alias that delivers only to them:
//! the same rule SMTP submission applies to MAIL FROM
//! (`accept::sender_allowed`). Any other address is `forbiddenFrom`.

use meshmail_storage::StorageError;
use meshmail_storage::model::jmap::{self, IDENTITIES_MAX, Identity, NamedAddress};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::mailbox::SetResponse;
use crate::accept::sender_allowed;
use crate::jmap::dispatch::{
    Call, ChangesArgs, ChangesResponse, GetArgs, GetResponse, Output, PlainSetArgs, begin_set, parse, reply, set_count,
};
use crate::jmap::wire::object::{Properties, parse_object};
use crate::jmap::wire::{MethodError, SetError};

/// The identity of the account's own address.
pub const IDENTITY_ID: &str = "i0";
/// Display names and signatures are kept to this many bytes.
const TEXT_MAX_BYTES: usize = 10_000;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IdentityObject<'a> {
    id: &'a str,
    name: &'a str,
    email: &'a str,
    reply_to: &'a Option<Vec<NamedAddress>>,
    bcc: &'a Option<Vec<NamedAddress>>,
    text_signature: &'a str,
    html_signature: &'a str,
    may_delete: bool,
}

fn object(i: &Identity) -> Value {
    serde_json::to_value(IdentityObject {
        id: &i.id,
        name: &i.name,
        email: &i.email,
        reply_to: &i.reply_to,
        bcc: &i.bcc,
        text_signature: &i.text_signature,
        html_signature: &i.html_signature,
        may_delete: i.id != IDENTITY_ID,
    })
    .unwrap_or_default()
}

/// The account's identities (i0 first) and the Identity state.
pub async fn identities(call: &Call<'_>) -> Result<(Vec<Identity>, String), MethodError> {
    let account = call.caller.account;
    let (stored, state) = call
        .shared
        .ctx
        .db
        .read("jmap_identities", move |txn| async move {
            Ok::<_, StorageError>((
                jmap::list_identities(&txn, account).await?,
                jmap::identity_state(&txn, account).await?,
            ))
        })
        .await?;
    let own = stored
        .iter()
        .find(|i| i.id == IDENTITY_ID)
        .cloned()
        .unwrap_or(Identity {
            id: IDENTITY_ID.into(),
            email: call.caller.email.clone(),
            ..Identity::default()
        });
    let mut all = vec![own];
    all.extend(stored.into_iter().filter(|i| i.id != IDENTITY_ID));
    Ok((all, state.to_string()))
}

pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: GetArgs = parse(args)?;
    crate::jmap::dispatch::check_get_size(call, args.ids.as_ref())?;
    let (all, state) = identities(call).await?;
    let mut resp = GetResponse {
        account_id: call.account_id(),
        state,
        list: Vec::new(),
        not_found: Vec::new(),
    };
    let render = |i: &Identity| crate::jmap::dispatch::select_properties(object(i), args.properties.as_deref());
    match &args.ids {
        None => resp.list = all.iter().map(render).collect(),
        Some(ids) => {
            for id in ids {
                let id = call.resolve_id(id).unwrap_or_else(|| id.clone());
                match all.iter().find(|i| i.id == id) {
                    Some(i) => resp.list.push(render(i)),
                    None => resp.not_found.push(id),
                }
            }
        }
    }
    reply("Identity/get", &resp)
}

/// Identity/changes: the state is a counter, so only "nothing changed" can
/// be told exactly; otherwise the client re-reads (a handful of objects).
pub async fn changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ChangesArgs = parse(args)?;
    let (_, state) = identities(call).await?;
    if args.since_state != state {
        return Err(MethodError::CannotCalculateChanges);
    }
    reply(
        "Identity/changes",
        &ChangesResponse {
            account_id: call.account_id(),
            old_state: args.since_state,
            new_state: state,
            ..Default::default()
        },
    )
}

/// What a create may give (id and mayDelete are the server's).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IdentityCreate {
    email: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    reply_to: Option<Vec<NamedAddress>>,
    #[serde(default)]
    bcc: Option<Vec<NamedAddress>>,
    #[serde(default)]
    text_signature: String,
    #[serde(default)]
    html_signature: String,
}

/// What an update may change (email is immutable).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IdentityPatch {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, with = "super::vacation::nullable")]
    reply_to: Option<Option<Vec<NamedAddress>>>,
    #[serde(default, with = "super::vacation::nullable")]
    bcc: Option<Option<Vec<NamedAddress>>>,
    #[serde(default)]
    text_signature: Option<String>,
    #[serde(default)]
    html_signature: Option<String>,
}

impl Properties for IdentityCreate {
    const REQUIRED: &'static [&'static str] = &["email"];
}

impl Properties for IdentityPatch {
    const REQUIRED: &'static [&'static str] = &[];
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    id: String,
    may_delete: bool,
}

fn too_long(i: &Identity) -> bool {
    [&i.name, &i.text_signature, &i.html_signature]
        .iter()
        .any(|s| s.len() > TEXT_MAX_BYTES)
}

async fn save(call: &Call<'_>, identity: Identity) -> Result<(), StorageError> {
    let account = call.caller.account;
    call.shared
        .ctx
        .db
        .run("jmap_identity_put", move |txn| {
            let identity = identity.clone();
            async move { jmap::put_identity(&txn, account, &identity) }
        })
        .await
}

async fn create_one(call: &Call<'_>, count: usize, value: Value) -> Result<Identity, SetError> {
    let c: IdentityCreate = parse_object(value)?;
    if count >= IDENTITIES_MAX {
        return Err(SetError::new(
            "overQuota",
            format!("at most {IDENTITIES_MAX} identities"),
        ));
    }
    let shared = &call.shared;
    let allowed = sender_allowed(&shared.ctx, &call.caller.email, &c.email, &shared.smtp.routing)
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))?;
    if !allowed {
        return Err(SetError::new("forbiddenFrom", "not one of your addresses"));
    }
    let account = call.caller.account;
    let id = shared
        .ctx
        .db
        .run("jmap_identity_id", move |txn| async move {
            jmap::new_identity_id(&txn, account).await
        })
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))?;
    let identity = Identity {
        id,
        name: c.name,
        email: c.email,
        reply_to: c.reply_to,
        bcc: c.bcc,
        text_signature: c.text_signature,
        html_signature: c.html_signature,
    };
    if too_long(&identity) {
        return Err(SetError::invalid_properties(
            &["name"],
            format!("over {TEXT_MAX_BYTES} bytes"),
        ));
    }
    save(call, identity.clone())
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))?;
    Ok(identity)
}

fn patched(mut i: Identity, value: Value) -> Result<Identity, SetError> {
    if let Value::Object(m) = &value
        && let Some(e) = m.get("email")
        && e.as_str() != Some(i.email.as_str())
    {
        return Err(SetError::invalid_properties(&["email"], "email is immutable"));
    }
    let mut value = value;
    if let Value::Object(m) = &mut value {
        m.remove("email");
    }
    let p: IdentityPatch = parse_object(value)?;
    if let Some(x) = p.name {
        i.name = x;
    }
    if let Some(x) = p.reply_to {
        i.reply_to = x;
    }
    if let Some(x) = p.bcc {
        i.bcc = x;
    }
    if let Some(x) = p.text_signature {
        i.text_signature = x;
    }
    if let Some(x) = p.html_signature {
        i.html_signature = x;
    }
    if too_long(&i) {
        return Err(SetError::invalid_properties(
            &["name"],
            format!("over {TEXT_MAX_BYTES} bytes"),
        ));
    }
    Ok(i)
}

pub async fn set(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: PlainSetArgs = parse(args)?;
    let (mut all, old_state) = identities(call).await?;
    begin_set(
        call,
        set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
        args.if_in_state.as_deref(),
        &old_state,
    )?;
    let mut resp: SetResponse<Created> = SetResponse {
        account_id: call.account_id(),
        old_state: Some(old_state),
        ..Default::default()
    };
    for (cid, value) in args.create.unwrap_or_default() {
        match create_one(call, all.len(), value).await {
            Ok(i) => {
                call.created.insert(cid.clone(), i.id.clone());
                resp.created.insert(
                    cid,
                    Created {
                        id: i.id.clone(),
                        may_delete: true,
                    },
                );
                all.push(i);
            }
            Err(e) => {
                resp.not_created.insert(cid, e);
            }
        }
    }
    for (id, value) in args.update.unwrap_or_default() {
        let id = call.resolve_id(&id).unwrap_or(id);
        match update_one(call, &all, &id, value).await {
            Ok(()) => {
                resp.updated.insert(id, None);
            }
            Err(e) => {
                resp.not_updated.insert(id, e);
            }
        }
    }
    for id in args.destroy.unwrap_or_default() {
        let id = call.resolve_id(&id).unwrap_or(id);
        match destroy_one(call, &all, &id).await {
            Ok(()) => {
                all.retain(|i| i.id != id);
                resp.destroyed.push(id);
            }
            Err(e) => {
                resp.not_destroyed.insert(id, e);
            }
        }
    }
    resp.new_state = identities(call).await?.1;
    reply("Identity/set", &resp)
}

/// Identity `id` of `all`, patched and saved.
async fn update_one(call: &Call<'_>, all: &[Identity], id: &str, value: Value) -> Result<(), SetError> {
    let Some(current) = all.iter().find(|i| i.id == id).cloned() else {
        return Err(SetError::not_found());
    };
    let next = patched(current, value)?;
    save(call, next)
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))
}

/// Deletes identity `id` of `all`; the account's own address's identity
/// cannot go.
async fn destroy_one(call: &Call<'_>, all: &[Identity], id: &str) -> Result<(), SetError> {
    if id == IDENTITY_ID {
        return Err(SetError::new("forbidden", "the identity of your own address stays"));
    }
    if !all.iter().any(|i| i.id == id) {
        return Err(SetError::not_found());
    }
    let account = call.caller.account;
    let gone = id.to_string();
    call.shared
        .ctx
        .db
        .run("jmap_identity_destroy", move |txn| {
            let gone = gone.clone();
            async move { jmap::delete_identity(&txn, account, &gone) }
        })
        .await
        .map_err(|e| SetError::new("serverFail", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_create_needs_only_an_email() {
        crate::jmap::wire::object::assert_required::<IdentityCreate>(serde_json::json!({"email": "a@example.test"}));
    }
}
