//! Push (RFC 8620 §7): StateChange objects for EventSource and WebSocket
//! clients, fed by the account's shard actor like IMAP IDLE — the hint the
//! writer publishes after each commit reaches this node's `HintHub`
//! (directly, or over the mesh through the watch this node keeps with the
//! owner), wakes the stream, which re-reads the states from the store and
//! sends the types that changed. No polling of the store: a stream with no
//! hints reads nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use meshmail_actors::shard::{Subscription, subscribe};
use serde::Serialize;

use super::methods::email_get::email_state;
use super::methods::mailbox::state_of;
use super::methods::sieve::Scripts;
use super::wire::MethodError;
use super::wire::ids;
use super::{JmapShared, store};

/// Data types a client can ask pushes for.
pub const TYPES: &[&str] = &["Email", "Mailbox", "Thread", "EmailDelivery", "SieveScript"];

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StateChange {
    #[serde(rename = "@type")]
    pub kind: &'static str,
    pub changed: BTreeMap<String, BTreeMap<String, String>>,
}

/// States per type of one account.
pub type TypeStates = BTreeMap<String, String>;

pub async fn states(shared: &JmapShared, account: i64) -> Result<TypeStates, MethodError> {
    let mailboxes = store::mailboxes(&shared.ctx, account).await?;
    let email = email_state(&mailboxes);
    let scripts = Scripts::read_for(&shared.ctx.db, account).await?;
    Ok(BTreeMap::from([
        ("Email".to_string(), email.clone()),
        ("Thread".to_string(), email.clone()),
        ("EmailDelivery".to_string(), email),
        ("Mailbox".to_string(), state_of(&mailboxes)),
        ("SieveScript".to_string(), scripts.state().encode()),
    ]))
}

/// One client's push subscription for one account.
pub struct PushStream {
    shared: Arc<JmapShared>,
    account: i64,
    sub: Subscription,
    /// None: every type.
    types: Option<Vec<String>>,
    last: TypeStates,
}

/// `types` from a query (`*` or a comma-separated list).
pub fn parse_types(s: &str) -> Option<Vec<String>> {
    let s = s.trim();
    if s.is_empty() || s == "*" {
        return None;
    }
    Some(
        s.split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
    )
}

impl PushStream {
    /// Subscribes first, then reads the states: a change committed in
    /// between is then both in the states and hinted (never lost).
    pub async fn start(
        shared: &Arc<JmapShared>,
        account: i64,
        types: Option<Vec<String>>,
    ) -> Result<Self, MethodError> {
        let sub = subscribe(&shared.ctx, account);
        let last = states(shared, account).await?;
        metrics::gauge!("meshmail_jmap_push_streams").increment(1.0);
        Ok(PushStream {
            shared: shared.clone(),
            account,
            sub,
            types,
            last,
        })
    }

    pub fn set_types(&mut self, types: Option<Vec<String>>) {
        self.types = types;
    }

    /// The states as of the last change sent (or of the start).
    pub fn current(&self) -> StateChange {
        self.change_of(self.last.clone())
    }

    fn change_of(&self, states: TypeStates) -> StateChange {
        let filtered: BTreeMap<String, String> = states
            .into_iter()
            .filter(|(t, _)| self.types.as_ref().is_none_or(|ts| ts.iter().any(|x| x == t)))
            .collect();
        StateChange {
            kind: "StateChange",
            changed: BTreeMap::from([(ids::account_id(self.account), filtered)]),
        }
    }

    /// Waits for the next change of a wanted type.
    pub async fn next(&mut self) -> StateChange {
        loop {
            // Hints that come meanwhile merge into one pending hint,
            // covered by the next re-read.
            let hint = self.sub.recv().await;
            let Ok(mut now) = states(&self.shared, self.account).await else {
                continue;
            };
            // EmailDelivery moves only with new mail (a delivery's hint
            // names its UID; other writes' hints do not).
            if hint.uid == 0
                && let Some(prev) = self.last.get("EmailDelivery")
            {
                now.insert("EmailDelivery".into(), prev.clone());
            }
            let changed: TypeStates = now
                .iter()
                .filter(|(t, s)| self.last.get(*t) != Some(*s))
                .map(|(t, s)| (t.clone(), s.clone()))
                .collect();
            self.last = now;
            let change = self.change_of(changed);
            if change.changed.values().any(|m| !m.is_empty()) {
                metrics::histogram!("meshmail_jmap_push_latency_seconds")
                    .record(hint.committed_at.elapsed().as_secs_f64());
                return change;
            }
        }
    }
}

impl Drop for PushStream {
    fn drop(&mut self) {
        metrics::gauge!("meshmail_jmap_push_streams").decrement(1.0);
    }
}
