//! The delivery path as a caller on a node that does not own the shard sees
//! it: retries while the owner is unknown or moving, and the ledger check
//! that tells a delivery stored before its answer was lost.
//!
//! Two nodes of this process share one store: `owner` holds every lease,
//! `caller` none, and the caller's router is a script that stands in for
//! the mesh (it reaches the owner's shard actor directly).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshmail_actors::delivery::{DeliveryError, Outcome, deliver, deliver_here};
use meshmail_actors::mailbox_ops::{MailboxOp, OpResult};
use meshmail_actors::node::NodeCtx;
use meshmail_actors::op_error::OpError;
use meshmail_actors::remote::{Route, ShardRouter, WireDelivery, WireHint};
use meshmail_storage::ids::AccountId;

use crate::common::{ledger_state, messages_in, node, request, store, uid_of};

/// What the scripted mesh does with one routing attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// No owner known (a failover in progress): nothing was sent.
    NoOwner,
    /// The owner stored it, and its answer was lost on the way back.
    StoreAndLoseAnswer,
    /// The owner stored it and answered.
    Store,
}

/// A router that plays `script` (one step per attempt of each delivery,
/// the last step repeated) against the owner node.
struct ScriptedMesh {
    owner: Arc<NodeCtx>,
    script: Vec<Step>,
    attempts: Mutex<HashMap<[u8; 16], usize>>,
}

impl ScriptedMesh {
    fn new(owner: Arc<NodeCtx>, script: Vec<Step>) -> Arc<Self> {
        Arc::new(ScriptedMesh {
            owner,
            script,
            attempts: Mutex::new(HashMap::new()),
        })
    }

    fn attempts(&self, id: [u8; 16]) -> usize {
        self.attempts.lock().unwrap().get(&id).copied().unwrap_or(0)
    }
}

#[async_trait::async_trait]
impl ShardRouter for ScriptedMesh {
    async fn deliver(&self, shard: u32, req: WireDelivery) -> Route<Result<Outcome, DeliveryError>> {
        let n = {
            let mut attempts = self.attempts.lock().unwrap();
            let n = attempts.entry(req.acceptance_id).or_default();
            *n += 1;
            *n
        };
        let step = self.script[(n - 1).min(self.script.len() - 1)];
        if step == Step::NoOwner {
            return Route::Retry(format!("no owner known for shard {shard}"));
        }
        let stored = deliver_here(&self.owner, shard, req.into_request())
            .await
            .expect("the owner serves the shard");
        match step {
            Step::StoreAndLoseAnswer => Route::Retry("link dropped before the answer".into()),
            _ => Route::Done(stored),
        }
    }

    async fn op(&self, _shard: u32, _account: AccountId, _op: MailboxOp) -> Route<Result<OpResult, OpError>> {
        Route::Retry("not scripted".into())
    }

    fn push_hint(&self, _node: &str, _generation: u64, _hint: WireHint) {}
}

/// While the shard's owner is unknown the caller retries; once the owner
/// answers, the delivery is stored once.
#[tokio::test]
async fn a_delivery_is_retried_until_an_owner_answers() {
    let s = store(0).await;
    let owner = node(&s, "owner", 1, true).await;
    let caller = node(&s, "caller", 1, false).await;
    let mesh = ScriptedMesh::new(owner, vec![Step::NoOwner, Step::NoOwner, Step::NoOwner, Step::Store]);
    caller.set_router(mesh.clone());
    let req = request(&s, b"routed", Duration::from_secs(30)).await;
    let answer = deliver(&caller, req.clone()).await;
    assert_eq!(uid_of(&answer), 1);
    assert_eq!(mesh.attempts(req.acceptance_id), 4, "three retries, then the owner");
    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 1);
}

/// The owner stored a delivery but its answer was lost; the caller's retry
/// reaches the owner again, whose ledger check answers with the first
/// copy's UID instead of storing a second one.
#[tokio::test]
async fn a_retry_after_a_lost_answer_is_not_stored_twice() {
    let s = store(0).await;
    let owner = node(&s, "owner", 1, true).await;
    let caller = node(&s, "caller", 1, false).await;
    let mesh = ScriptedMesh::new(owner, vec![Step::StoreAndLoseAnswer, Step::Store]);
    caller.set_router(mesh.clone());
    let req = request(&s, b"twice", Duration::from_secs(30)).await;
    let answer = deliver(&caller, req.clone()).await;
    assert_eq!(uid_of(&answer), 1, "the first copy's UID");
    assert_eq!(mesh.attempts(req.acceptance_id), 2);
    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 1);
}

/// The owner stored a delivery, its answer was lost, and no owner answers
/// again before the deadline: once a commit attempt's grace has passed the
/// caller reads the ledger and answers "delivered" (a 451 would make the
/// sender's retry a duplicate). A delivery never stored is answered 451.
#[tokio::test]
async fn a_delivery_stored_before_its_answer_was_lost_is_answered_delivered() {
    let s = store(0).await;
    let owner = node(&s, "owner", 1, true).await;
    let caller = node(&s, "caller", 1, false).await;
    let mesh = ScriptedMesh::new(owner, vec![Step::StoreAndLoseAnswer, Step::NoOwner]);
    caller.set_router(mesh.clone());
    let patience = Duration::from_millis(300);
    let stored = request(&s, b"stored", patience).await;
    let (stored_id, stored_answer) = (stored.acceptance_id, deliver(&caller, stored));
    // Both wait out the deadline and the grace (~10 s): run them together.
    let never = ScriptedMesh::new(node(&s, "owner2", 1, false).await, vec![Step::NoOwner]);
    let lonely = node(&s, "lonely", 1, false).await;
    lonely.set_router(never);
    let unstored = request(&s, b"never", patience).await;
    let unstored_id = unstored.acceptance_id;
    let (stored_answer, unstored_answer) = tokio::join!(stored_answer, deliver(&lonely, unstored));
    assert_eq!(uid_of(&stored_answer), 1, "the ledger says it was stored");
    assert!(mesh.attempts(stored_id) >= 2, "it was retried");
    assert_eq!(messages_in(&s.db, s.account, s.inbox).await, 1);
    assert!(
        matches!(&unstored_answer, Err(DeliveryError::Temporary(e)) if e.contains("no owner")),
        "{unstored_answer:?}"
    );
    assert_eq!(ledger_state(&s.db, unstored_id).await, None);
}
