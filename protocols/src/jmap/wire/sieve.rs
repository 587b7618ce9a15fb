//! JMAP Sieve's wire types (RFC 9661): the SieveScript object, what a
//! /set create or update may say of one, /query's FilterCondition and
//! sort, /validate's arguments and answer, and the SieveScript state
//! string. Pure: the methods (`jmap::methods::sieve`) read the store and
//! fill these.
//!
//! The state is the list of the account's scripts, each as its id and a
//! digest of its name, text version and activity: `v` then `<id>.<hex>`
//! joined by `,` (at most `SCRIPTS_MAX` = 32 entries, so a few hundred
//! bytes). Computed from the store, it is the same on every node, and
//! `/changes` is the difference of two states.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SetError;
use super::object::Properties;

/// A SieveScript as /get answers it (RFC 9661 §2.1).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SieveScriptObject {
    pub id: String,
    pub name: String,
    pub blob_id: String,
    pub is_active: bool,
}

/// A /set create: `name` may be null or absent (the server names it).
/// `id` and `isActive` are server-set: sent, they are refused.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptCreate {
    #[serde(default)]
    pub name: Option<String>,
    pub blob_id: String,
    #[serde(default)]
    pub is_active: Option<bool>,
}

impl Properties for ScriptCreate {
    const REQUIRED: &'static [&'static str] = &["blobId"];
}

/// A /set update: a new name, a new text, or both. `isActive` may be
/// repeated with its current value (RFC 8620 §5.3 lets a client send a
/// server-set property unchanged); changing it is refused, as RFC 9661
/// activates only through `onSuccessActivateScript`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub blob_id: Option<String>,
    #[serde(default)]
    pub is_active: Option<bool>,
}

impl Properties for ScriptUpdate {
    const REQUIRED: &'static [&'static str] = &[];
}

/// SieveScript/query's FilterCondition (RFC 9661 §2.5).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptFilter {
    /// The name contains this string (i;unicode-casemap, approximated by
    /// lowercase comparison as Mailbox/query does).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub is_active: Option<bool>,
}

impl ScriptFilter {
    pub fn matches(&self, o: &SieveScriptObject) -> bool {
        self.name
            .as_ref()
            .is_none_or(|n| o.name.to_lowercase().contains(&n.to_lowercase()))
            && self.is_active.is_none_or(|a| o.is_active == a)
    }
}

/// SieveScript/validate's arguments (RFC 9661 §2.6).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateArgs {
    #[expect(dead_code, reason = "the dispatcher checks accountId before the method runs")]
    account_id: String,
    pub blob_id: String,
}

/// SieveScript/validate's answer: `error` null when the script is valid.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidateResponse {
    pub account_id: String,
    pub error: Option<SetError>,
}

/// One script's place in the state string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptMark {
    pub id: u64,
    pub digest: u32,
}

/// The SieveScript state: every script of the account, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptState {
    pub marks: Vec<ScriptMark>,
}

/// What changed between two states (RFC 8620 §5.2), ids as numbers.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ScriptChanges {
    pub created: Vec<u64>,
    pub updated: Vec<u64>,
    pub destroyed: Vec<u64>,
}

impl ScriptState {
    /// The state of scripts given as (id, name, version, active).
    pub fn of<'a>(scripts: impl Iterator<Item = (u64, &'a str, u64, bool)>) -> ScriptState {
        let mut marks: Vec<ScriptMark> = scripts
            .map(|(id, name, version, active)| ScriptMark {
                id,
                digest: digest(name, version, active),
            })
            .collect();
        marks.sort_by_key(|m| m.id);
        ScriptState { marks }
    }

    pub fn encode(&self) -> String {
        let marks: Vec<String> = self.marks.iter().map(|m| format!("{}.{:x}", m.id, m.digest)).collect();
        format!("v{}", marks.join(","))
    }

    pub fn decode(s: &str) -> Option<ScriptState> {
        let rest = s.strip_prefix('v')?;
        let mut marks = Vec::new();
        for part in rest.split(',').filter(|p| !p.is_empty()) {
            let (id, digest) = part.split_once('.')?;
            marks.push(ScriptMark {
                id: id.parse().ok()?,
                digest: u32::from_str_radix(digest, 16).ok()?,
            });
            // At most the store's script count, and in id order as encoded.
            if marks.len() > 64 || marks.windows(2).any(|w| w[0].id >= w[1].id) {
                return None;
            }
        }
        Some(ScriptState { marks })
    }

    /// What changed from `old` to `self`.
    pub fn since(&self, old: &ScriptState) -> ScriptChanges {
        let before: BTreeMap<u64, u32> = old.marks.iter().map(|m| (m.id, m.digest)).collect();
        let now: BTreeMap<u64, u32> = self.marks.iter().map(|m| (m.id, m.digest)).collect();
        let mut out = ScriptChanges::default();
        for (id, d) in &now {
            match before.get(id) {
                None => out.created.push(*id),
                Some(b) if b != d => out.updated.push(*id),
                Some(_) => {}
            }
        }
        out.destroyed = before.keys().filter(|id| !now.contains_key(id)).copied().collect();
        out
    }
}

/// FNV-1a of what /get shows of a script (the mailbox digest's hash).
fn digest(name: &str, version: u64, active: bool) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name
        .as_bytes()
        .iter()
        .chain(&[0])
        .chain(&version.to_le_bytes())
        .chain(&[u8::from(active)])
    {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_give_the_changes() {
        let old = ScriptState::of([(1, "a", 10, true), (2, "b", 11, false), (3, "c", 12, false)].into_iter());
        let new = ScriptState::of([(1, "a", 10, false), (3, "c", 12, false), (4, "d", 13, false)].into_iter());
        assert_eq!(ScriptState::decode(&old.encode()), Some(old.clone()));
        assert_eq!(ScriptState::decode("v"), Some(ScriptState::default()));
        for bad in ["", "x1.2", "v1", "v1.zz", "v2.1,1.1"] {
            assert_eq!(ScriptState::decode(bad), None, "{bad}");
        }
        assert_eq!(
            new.since(&old),
            ScriptChanges {
                created: vec![4],
                updated: vec![1],
                destroyed: vec![2]
            }
        );
        let renamed = ScriptState::of([(1, "z", 10, true), (2, "b", 11, false), (3, "c", 12, false)].into_iter());
        assert_eq!(renamed.since(&old).updated, vec![1], "a rename is an update");
        assert_eq!(old.since(&old), ScriptChanges::default());
    }

    #[test]
    fn filters_match_name_and_activity() {
        let o = SieveScriptObject {
            id: "S1".into(),
            name: "Vacation Rules".into(),
            blob_id: "S1_1".into(),
            is_active: true,
        };
        let f = |v: serde_json::Value| serde_json::from_value::<ScriptFilter>(v).unwrap().matches(&o);
        assert!(f(serde_json::json!({"name": "vacation"})));
        assert!(f(serde_json::json!({"isActive": true})));
        assert!(!f(serde_json::json!({"isActive": false})));
        assert!(!f(serde_json::json!({"name": "spam", "isActive": true})));
        assert!(serde_json::from_value::<ScriptFilter>(serde_json::json!({"text": "x"})).is_err());
    }
}
