//! SieveScript/get, /changes, /query and /validate (RFC 9661), and what
//! SieveScript/set (`sieve_set`) shares with them. The scripts are the
//! account's records in `storage::model::sieve`, read and written through
//! [`crate::managesieve::scripts`], the operations ManageSieve's session
//! uses: a script stored over either protocol is compiled the same way,
//! seen by the other, and run at delivery. They are account records
//! outside every mailbox (no shard actor owns them), so any node answers
//! from the shared store. A script's text is a blob (`S<id>_<version>`,
//! `application/sieve`), downloaded through `blob`.

use meshmail_storage::model::sieve::StoredScript;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::blob::{self, BlobError};
use super::mailbox::{Comparator, QueryPage, QueryResponse};
use crate::jmap::dispatch::{
    Call, ChangesArgs, ChangesResponse, GetArgs, GetResponse, Output, check_get_size, parse, reply, select_properties,
};
use crate::jmap::wire::filter::Filter;
use crate::jmap::wire::ids;
use crate::jmap::wire::sieve::{ScriptFilter, ScriptState, SieveScriptObject, ValidateArgs, ValidateResponse};
use crate::jmap::wire::{MethodError, SetError};
use crate::managesieve::scripts::{self, ScriptError};

/// The account's scripts and the active one's name, as of one snapshot.
pub(crate) struct Scripts {
    pub list: Vec<StoredScript>,
    pub active: Option<String>,
}

impl Scripts {
    pub async fn read(call: &Call<'_>) -> Result<Scripts, MethodError> {
        Scripts::read_for(&call.shared.ctx.db, call.caller.account).await
    }

    pub async fn read_for(
        db: &meshmail_storage::Database,
        account: meshmail_storage::ids::AccountId,
    ) -> Result<Scripts, MethodError> {
        match scripts::list(db, account).await {
            Ok((list, active)) => Ok(Scripts { list, active }),
            Err(e) => Err(MethodError::ServerUnavailable(e.to_string())),
        }
    }

    pub fn is_active(&self, s: &StoredScript) -> bool {
        self.active.as_deref() == Some(s.name.as_str())
    }

    pub fn object(&self, s: &StoredScript) -> SieveScriptObject {
        SieveScriptObject {
            id: ids::script_id(s.id()),
            name: s.name.clone(),
            blob_id: ids::script_blob_id(s.id(), s.version),
            is_active: self.is_active(s),
        }
    }

    /// The script an id names (`#creationId` resolved by the caller).
    pub fn by_id(&self, id: &str) -> Option<&StoredScript> {
        let n = ids::parse_script(id)?;
        self.list.iter().find(|s| s.id() == n)
    }

    pub fn by_name(&self, name: &str) -> Option<&StoredScript> {
        self.list.iter().find(|s| s.name == name)
    }

    pub fn active_script(&self) -> Option<&StoredScript> {
        self.by_name(self.active.as_deref()?)
    }

    pub fn state(&self) -> ScriptState {
        ScriptState::of(
            self.list
                .iter()
                .map(|s| (s.id(), s.name.as_str(), s.version, self.is_active(s))),
        )
    }
}

/// The SetError a refused script operation is (RFC 9661 §2.4).
pub(super) fn set_error(e: ScriptError) -> SetError {
    match e {
        ScriptError::Invalid(text) => SetError::new("invalidSieve", text),
        ScriptError::TooLarge => SetError::new("tooLarge", e.to_string()),
        ScriptError::TooMany => SetError::new("overQuota", e.to_string()),
        ScriptError::NotFound => SetError::not_found(),
        ScriptError::AlreadyExists => SetError::new("alreadyExists", e.to_string()),
        ScriptError::Active => SetError::new("sieveIsActive", "deactivate the script first"),
        ScriptError::Store(_) => SetError::new("serverUnavailable", e.to_string()),
    }
}

/// The bytes of a blob a script create, update or validate names
/// (`#creationId` allowed), or its SetError.
pub(super) async fn script_bytes(call: &Call<'_>, blob_id: &str) -> Result<Vec<u8>, SetError> {
    let Some(resolved) = call.resolve_id(blob_id) else {
        return Err(SetError::blob_not_found(vec![blob_id.to_string()]));
    };
    match blob::read_blob(call, &resolved).await {
        Ok(b) => Ok(b.bytes.to_vec()),
        Err(BlobError::NotFound) => Err(SetError::blob_not_found(vec![blob_id.to_string()])),
        Err(e @ BlobError::TooLarge) => Err(SetError::new("tooLarge", e.to_string())),
        Err(e @ BlobError::Unavailable(_)) => Err(SetError::new("serverUnavailable", e.to_string())),
    }
}

/// SieveScript/get.
pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: GetArgs = parse(args)?;
    check_get_size(call, args.ids.as_ref())?;
    let all = Scripts::read(call).await?;
    let mut resp = GetResponse {
        account_id: call.account_id(),
        state: all.state().encode(),
        list: Vec::new(),
        not_found: Vec::new(),
    };
    let render = |s: &StoredScript| {
        select_properties(
            serde_json::to_value(all.object(s)).unwrap_or_default(),
            args.properties.as_deref(),
        )
    };
    match args.ids {
        None => resp.list = all.list.iter().map(render).collect(),
        Some(wanted) => {
            for id in wanted {
                match call.resolve_id(&id).as_deref().and_then(|i| all.by_id(i)) {
                    Some(s) => resp.list.push(render(s)),
                    None => resp.not_found.push(id),
                }
            }
        }
    }
    reply("SieveScript/get", &resp)
}

/// SieveScript/changes: the difference between the client's state and
/// now (the state lists every script, see `wire::sieve`).
pub async fn changes(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ChangesArgs = parse(args)?;
    let old = ScriptState::decode(&args.since_state).ok_or(MethodError::CannotCalculateChanges)?;
    let now = Scripts::read(call).await?.state();
    let diff = now.since(&old);
    let total = diff.created.len() + diff.updated.len() + diff.destroyed.len();
    // A partial answer would need an intermediate state: with at most 32
    // scripts, a client asking for fewer changes starts again instead.
    if args.max_changes.is_some_and(|max| (total as u64) > max) {
        return Err(MethodError::CannotCalculateChanges);
    }
    let names = |v: Vec<u64>| v.into_iter().map(ids::script_id).collect();
    let resp = ChangesResponse {
        account_id: call.account_id(),
        old_state: args.since_state,
        new_state: now.encode(),
        has_more_changes: false,
        created: names(diff.created),
        updated: names(diff.updated),
        destroyed: names(diff.destroyed),
        updated_properties: None,
    };
    reply("SieveScript/changes", &resp)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    #[serde(default)]
    filter: Option<Filter<ScriptFilter>>,
    #[serde(default)]
    sort: Option<Vec<Comparator>>,
    #[serde(default)]
    position: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    calculate_total: Option<bool>,
}

/// SieveScript/query: filter by name (contains) and isActive, sort by
/// name and isActive (RFC 9661 §2.5).
pub async fn query(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: QueryArgs = parse(args)?;
    let all = Scripts::read(call).await?;
    let objs = all.list.iter().map(|s| all.object(s));
    let page = QueryPage::of(
        objs,
        args.filter.as_ref(),
        |c, o| c.matches(o),
        &args.sort.unwrap_or_default(),
        |property, objs| {
            match property {
                "name" => objs.sort_by(|a, b| a.name.cmp(&b.name)),
                "isActive" => objs.sort_by_key(|o| o.is_active),
                other => return Err(MethodError::UnsupportedSort(other.to_string())),
            }
            Ok(())
        },
    )?;
    let total = page.total;
    let (position, ids) = page.window(args.position, args.limit, |o| o.id);
    reply(
        "SieveScript/query",
        &QueryResponse {
            account_id: call.account_id(),
            query_state: all.state().encode(),
            can_calculate_changes: false,
            position,
            ids,
            total: args.calculate_total.unwrap_or(false).then_some(total),
            limit: None,
        },
    )
}

/// SieveScript/validate: the blob compiled as it would be stored, nothing
/// written (ManageSieve's CHECKSCRIPT).
pub async fn validate(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: ValidateArgs = parse(args)?;
    let error = match script_bytes(call, &args.blob_id).await {
        Ok(bytes) => scripts::check(&bytes, &call.caller.email).err().map(set_error),
        Err(e) => Some(e),
    };
    reply(
        "SieveScript/validate",
        &ValidateResponse {
            account_id: call.account_id(),
            error,
        },
    )
}
