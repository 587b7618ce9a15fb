//! VacationResponse/get and /set (RFC 8621 §8): the one setting per
//! account. The replies themselves are sent at delivery by
//! `accept::vacation`, which reads the same record.

use meshmail_storage::model::jmap::{self, Vacation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::mailbox::SetResponse;
use crate::jmap::dispatch::{Call, GetArgs, GetResponse, Output, PlainSetArgs, begin_set, parse, reply, set_count};
use crate::jmap::wire::object::{Properties, parse_object};
use crate::jmap::wire::{MethodError, SetError};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VacationObject {
    id: &'static str,
    is_enabled: bool,
    from_date: Option<String>,
    to_date: Option<String>,
    subject: Option<String>,
    text_body: Option<String>,
    html_body: Option<String>,
}

async fn vacation(call: &Call<'_>) -> Result<Vacation, MethodError> {
    let account = call.caller.account;
    Ok(call
        .shared
        .ctx
        .db
        .read("jmap_vacation", move |txn| async move {
            jmap::get_vacation(&txn, account).await
        })
        .await?)
}

fn vacation_object(v: &Vacation) -> VacationObject {
    VacationObject {
        id: "singleton",
        is_enabled: v.is_enabled,
        from_date: v.from_date.clone(),
        to_date: v.to_date.clone(),
        subject: v.subject.clone(),
        text_body: v.text_body.clone(),
        html_body: v.html_body.clone(),
    }
}

/// VacationResponse/get. The replies are sent by the delivery path
/// (`accept::vacation`), which reads the same record.
pub async fn get(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: GetArgs = parse(args)?;
    let v = vacation(call).await?;
    let mut resp = GetResponse {
        account_id: call.account_id(),
        state: v.version.to_string(),
        list: Vec::new(),
        not_found: Vec::new(),
    };
    let wanted = args.ids.unwrap_or_else(|| vec!["singleton".into()]);
    for id in wanted {
        if id == "singleton" {
            resp.list.push(crate::jmap::dispatch::select_properties(
                serde_json::to_value(vacation_object(&v)).unwrap_or_default(),
                args.properties.as_deref(),
            ));
        } else {
            resp.not_found.push(id);
        }
    }
    reply("VacationResponse/get", &resp)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VacationPatch {
    #[serde(default)]
    is_enabled: Option<bool>,
    #[serde(default, with = "nullable")]
    from_date: Option<Option<String>>,
    #[serde(default, with = "nullable")]
    to_date: Option<Option<String>>,
    #[serde(default, with = "nullable")]
    subject: Option<Option<String>>,
    #[serde(default, with = "nullable")]
    text_body: Option<Option<String>>,
    #[serde(default, with = "nullable")]
    html_body: Option<Option<String>>,
}

impl Properties for VacationPatch {
    const REQUIRED: &'static [&'static str] = &[];
}

/// A property a patch may set to null: absent → None, null → Some(None).
pub(super) mod nullable {
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

pub async fn set(call: &mut Call<'_>, args: Map<String, Value>) -> Result<Output, MethodError> {
    let args: PlainSetArgs = parse(args)?;
    let mut v = vacation(call).await?;
    let old = v.version.to_string();
    begin_set(
        call,
        set_count(args.create.as_ref(), args.update.as_ref(), args.destroy.as_ref()),
        args.if_in_state.as_deref(),
        &old,
    )?;
    let mut resp: SetResponse<Value> = SetResponse {
        account_id: call.account_id(),
        old_state: Some(old),
        ..Default::default()
    };
    for (k, _) in args.create.unwrap_or_default() {
        resp.not_created
            .insert(k, SetError::new("singleton", "VacationResponse is a singleton"));
    }
    for k in args.destroy.unwrap_or_default() {
        resp.not_destroyed
            .insert(k, SetError::new("singleton", "VacationResponse is a singleton"));
    }
    for (id, patch) in args.update.unwrap_or_default() {
        if id != "singleton" {
            resp.not_updated.insert(id, SetError::not_found());
            continue;
        }
        let p: VacationPatch = match parse_object(patch) {
            Ok(p) => p,
            Err(e) => {
                resp.not_updated.insert(id, e.into());
                continue;
            }
        };
        if let Some(x) = p.is_enabled {
            v.is_enabled = x;
        }
        for (field, value) in [
            (&mut v.from_date, p.from_date),
            (&mut v.to_date, p.to_date),
            (&mut v.subject, p.subject),
            (&mut v.text_body, p.text_body),
            (&mut v.html_body, p.html_body),
        ] {
            if let Some(x) = value {
                *field = x;
            }
        }
        v.version += 1;
        let (account, rec) = (call.caller.account, v.clone());
        call.shared
            .ctx
            .db
            .run("jmap_vacation_set", move |txn| {
                let rec = rec.clone();
                async move { jmap::put_vacation(&txn, account, &rec) }
            })
            .await?;
        // RCPT caches whether the account's vacation response is on.
        crate::accept::rcpt_cache::local_change();
        resp.updated.insert(id, None);
    }
    resp.new_state = v.version.to_string();
    reply("VacationResponse/set", &resp)
}
