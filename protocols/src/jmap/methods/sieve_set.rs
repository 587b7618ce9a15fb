//! SieveScript/set (RFC 9661 §2.4): create (a name and the blob of the
//! text), update (rename, new text), destroy (never the active script:
//! `sieveIsActive`), then `onSuccessDeactivateScript` and
//! `onSuccessActivateScript` when every change succeeded. Each change is
//! one operation of [`crate::managesieve::scripts`] (compile, then one
//! store transaction), as ManageSieve's PUTSCRIPT, RENAMESCRIPT,
//! DELETESCRIPT and SETACTIVE are.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::mailbox::SetResponse;
use super::sieve::{Scripts, script_bytes, set_error};
use crate::jmap::dispatch::{Call, Output, begin_set, parse, reply, set_count};
use crate::jmap::wire::object::parse_object;
use crate::jmap::wire::sieve::{ScriptCreate, ScriptUpdate, SieveScriptObject};
use crate::jmap::wire::{MethodError, SetError, ids};
use crate::managesieve::scripts::{self, ScriptError};
use crate::managesieve::wire::name::script_name;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    if_in_state: Option<String>,
    #[serde(default)]
    create: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    update: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    destroy: Option<Vec<String>>,
    #[serde(default)]
    on_success_activate_script: Option<String>,
    #[serde(default)]
    on_success_deactivate_script: Option<bool>,
}

/// What an update or an activation reports of a script (the properties
/// the server changed, RFC 8620 §5.3).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Changed {
    #[serde(skip_serializing_if = "Option::is_none")]
    blob_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_active: Option<bool>,
}

type Response = SetResponse<SieveScriptObject>;

pub async fn set(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: SetArgs = parse(args)?;
    let before = Scripts::read(call).await?;
    let old = before.state().encode();
    begin_set(
        call,
        set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
        args.if_in_state.as_deref(),
        &old,
    )?;
    let mut resp = Response {
        account_id: call.account_id(),
        old_state: Some(old),
        ..Default::default()
    };
    for (cid, value) in args.create.unwrap_or_default() {
        match create(call, value).await {
            Ok(obj) => {
                call.created.insert(cid.clone(), obj.id.clone());
                resp.created.insert(cid, obj);
            }
            Err(e) => {
                resp.not_created.insert(cid, e);
            }
        }
    }
    for (id, value) in args.update.unwrap_or_default() {
        match update(call, &id, value).await {
            Ok(changed) => {
                resp.updated.insert(id, to_value(&changed));
            }
            Err(e) => {
                resp.not_updated.insert(id, e);
            }
        }
    }
    for id in args.destroy.unwrap_or_default() {
        match destroy(call, &id).await {
            Ok(()) => resp.destroyed.push(id),
            Err(e) => {
                resp.not_destroyed.insert(id, e);
            }
        }
    }
    let all_done = resp.not_created.is_empty() && resp.not_updated.is_empty() && resp.not_destroyed.is_empty();
    if all_done {
        on_success(
            call,
            &mut resp,
            args.on_success_deactivate_script,
            args.on_success_activate_script,
        )
        .await?;
    }
    resp.new_state = Scripts::read(call).await?.state().encode();
    if resp.old_state.as_deref() != Some(resp.new_state.as_str()) {
        scripts::changed(&call.shared.ctx, call.caller.account);
    }
    reply("SieveScript/set", &resp)
}

fn to_value(c: &Changed) -> Option<Value> {
    if c.blob_id.is_none() && c.is_active.is_none() {
        return None;
    }
    serde_json::to_value(c).ok()
}

/// A checked script name, or its invalidProperties.
fn valid_name(name: &str) -> Result<String, SetError> {
    script_name(name.as_bytes()).map_err(|e| SetError::invalid_properties(&["name"], format!("name: {e}")))
}

/// `alreadyExists` naming the script that holds `name` (RFC 9661 §2.4).
fn already_exists(all: &Scripts, name: &str) -> SetError {
    let mut e = SetError::new("alreadyExists", format!("a script named {name:?} exists"));
    e.existing_id = all.by_name(name).map(|s| ids::script_id(s.id()));
    e
}

/// A name for a create that gave none: `script-N`, the first one free.
fn free_name(all: &Scripts) -> String {
    (1..)
        .map(|n| format!("script-{n}"))
        .find(|n| all.by_name(n).is_none())
        .unwrap_or_default()
}

async fn create(call: &Call<'_>, value: Value) -> Result<SieveScriptObject, SetError> {
    let c: ScriptCreate = parse_object(value)?;
    if c.is_active == Some(true) {
        return Err(SetError::invalid_properties(
            &["isActive"],
            "isActive is server-set: use onSuccessActivateScript",
        ));
    }
    let all = Scripts::read(call)
        .await
        .map_err(|e| SetError::new("serverUnavailable", e.to_string()))?;
    let name = match &c.name {
        Some(n) => valid_name(n)?,
        None => free_name(&all),
    };
    if all.by_name(&name).is_some() {
        return Err(already_exists(&all, &name));
    }
    let source = script_bytes(call, &c.blob_id).await?;
    let db = &call.shared.ctx.db;
    match scripts::put(db, call.caller.account, &call.caller.email, &name, &source, true).await {
        Ok(stored) => Ok(SieveScriptObject {
            id: ids::script_id(stored.id()),
            blob_id: ids::script_blob_id(stored.id(), stored.version),
            name: stored.name,
            is_active: false,
        }),
        Err(ScriptError::AlreadyExists) => Err(already_exists(&all, &name)),
        Err(e) => Err(set_error(e)),
    }
}

async fn update(call: &Call<'_>, id: &str, value: Value) -> Result<Changed, SetError> {
    let u: ScriptUpdate = parse_object(value)?;
    let all = Scripts::read(call)
        .await
        .map_err(|e| SetError::new("serverUnavailable", e.to_string()))?;
    let script = call
        .resolve_id(id)
        .and_then(|i| all.by_id(&i).cloned())
        .ok_or_else(SetError::not_found)?;
    if u.is_active.is_some_and(|a| a != all.is_active(&script)) {
        return Err(SetError::invalid_properties(
            &["isActive"],
            "isActive is server-set: use onSuccessActivateScript",
        ));
    }
    let new_name = match &u.name {
        Some(n) if *n != script.name => Some(valid_name(n)?),
        _ => None,
    };
    // The new name is checked before anything is written, so a taken name
    // leaves the text as it was.
    if let Some(n) = &new_name
        && all.by_name(n).is_some()
    {
        return Err(already_exists(&all, n));
    }
    let (db, account) = (&call.shared.ctx.db, call.caller.account);
    let mut changed = Changed::default();
    if let Some(blob_id) = &u.blob_id {
        let source = script_bytes(call, blob_id).await?;
        let stored = scripts::put(db, account, &call.caller.email, &script.name, &source, false)
            .await
            .map_err(set_error)?;
        changed.blob_id = Some(ids::script_blob_id(stored.id(), stored.version));
    }
    if let Some(n) = &new_name {
        match scripts::rename(db, account, &script.name, n).await {
            Ok(()) => {}
            Err(ScriptError::AlreadyExists) => return Err(already_exists(&all, n)),
            Err(e) => return Err(set_error(e)),
        }
    }
    Ok(changed)
}

async fn destroy(call: &Call<'_>, id: &str) -> Result<(), SetError> {
    let all = Scripts::read(call)
        .await
        .map_err(|e| SetError::new("serverUnavailable", e.to_string()))?;
    let script = call
        .resolve_id(id)
        .and_then(|i| all.by_id(&i).cloned())
        .ok_or_else(SetError::not_found)?;
    scripts::delete(&call.shared.ctx.db, call.caller.account, &script.name)
        .await
        .map_err(set_error)
}

/// `onSuccessDeactivateScript` first, then `onSuccessActivateScript`
/// (RFC 9661 §2.4); an id that names no script is ignored. Every script
/// whose activity changed is reported: in `created` if made by this call,
/// else in `updated`.
async fn on_success(
    call: &mut Call<'_>,
    resp: &mut Response,
    deactivate: Option<bool>,
    activate: Option<String>,
) -> Result<(), MethodError> {
    let all = Scripts::read(call).await?;
    let was = all.active_script().map(|s| ids::script_id(s.id()));
    let target = activate
        .and_then(|id| call.resolve_id(&id))
        .and_then(|id| all.by_id(&id).cloned());
    let now = match (&target, deactivate == Some(true)) {
        (Some(t), _) => Some(t.clone()),
        (None, true) => None,
        (None, false) => return Ok(()),
    };
    let (db, account) = (&call.shared.ctx.db, call.caller.account);
    let activated = now.as_ref().map(|s| s.name.as_str());
    if activated != all.active.as_deref() {
        scripts::activate(db, account, activated)
            .await
            .map_err(|e| MethodError::ServerUnavailable(e.to_string()))?;
    }
    let now_id = now.map(|s| ids::script_id(s.id()));
    if was == now_id {
        return Ok(());
    }
    if let Some(w) = was {
        mark(resp, &w, false);
    }
    if let Some(n) = now_id {
        mark(resp, &n, true);
    }
    Ok(())
}

/// Reports a script's new activity in `created` or `updated`.
fn mark(resp: &mut Response, id: &str, active: bool) {
    if let Some(obj) = resp.created.values_mut().find(|o| o.id == id) {
        obj.is_active = active;
        return;
    }
    let entry = resp.updated.entry(id.to_string()).or_insert(None);
    let mut changed = Changed {
        is_active: Some(active),
        ..Default::default()
    };
    if let Some(Value::Object(m)) = entry
        && let Some(Value::String(b)) = m.get("blobId")
    {
        changed.blob_id = Some(b.clone());
    }
    *entry = to_value(&changed);
}
