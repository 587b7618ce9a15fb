//! Acceptance's typed answers as SMTP replies: one [`Outcome`] per
//! recipient becomes one reply (LMTP sends each, grouped per RCPT), and
//! [`combine`] makes the one reply an SMTP transaction gets. JMAP's
//! `deliveryStatus.smtpReply` (RFC 8621 §7) is this same text.

use crate::accept::{Outcome, Refusal};
use crate::smtp::wire::reply::Reply;

/// The reply for one recipient's copy: 250 only for what is durable.
pub fn reply_of(outcome: &Outcome) -> Reply {
    match outcome {
        Outcome::Stored { id } => Reply::message_accepted(id),
        Outcome::Refused(Refusal::Permanent(why)) => Reply::transaction_failed(why),
        Outcome::Refused(Refusal::Rejected(why)) => Reply::rejected_by_recipient(why),
        Outcome::Refused(Refusal::OverQuota) => Reply::over_quota(),
        Outcome::Refused(Refusal::StorageFull) => Reply::insufficient_storage(),
        Outcome::Refused(Refusal::Temporary) => Reply::local_error(),
    }
}

/// One SMTP reply for a whole transaction: 250 only if every recipient's copy
/// is durable; otherwise a temporary failure wins over a permanent one, so
/// the client retries rather than bounces what could still be delivered.
pub fn combine(replies: Vec<Reply>) -> Reply {
    if let Some(r) = replies.iter().find(|r| r.is_transient()) {
        return r.clone();
    }
    if let Some(r) = replies.iter().find(|r| r.is_permanent()) {
        return r.clone();
    }
    replies.into_iter().next().unwrap_or_else(Reply::ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_failure_wins() {
        let r = combine(vec![
            Reply::message_accepted("a"),
            Reply::local_error(),
            Reply::transaction_failed("x"),
        ]);
        assert_eq!(r.code, 451);
        assert_eq!(combine(vec![Reply::message_accepted("a")]).code, 250);
    }
}
