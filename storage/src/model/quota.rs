//! Quotas per account (RFC 9208 resources STORAGE, in KiB, and MESSAGE):
//! the limits are one record per account, set by the operator; the usage
//! is the sum of the account's per-mailbox counters (`("cnt", ...)`),
//! which every delivery, copy and expunge already changes in its own
//! transaction. So usage needs no key of its own (no hot per-account
//! counter, nothing to backfill for stores older than quotas), and the
//! shard actor, the single writer of an account, checks it in the same
//! batch transaction that delivers.

use serde::{Deserialize, Serialize};

use super::mailboxes::{COUNT_BYTES, COUNT_MESSAGES};
use super::{get_record, put_record};
use crate::error::Result;
use crate::ids::AccountId;
use crate::keyspace;
use crate::kv::{Txn, decode_i64};

/// Counter keys read per range read (FDB: ≤ 10,000 keys per read); an
/// account has at most 10,000 mailboxes of 3 counters, so ≤ 4 reads.
const COUNTERS_PER_READ: usize = 9_000;

/// The limits; None is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Quota {
    pub storage_kib: Option<u64>,
    pub messages: Option<u64>,
}

impl Quota {
    pub fn is_unlimited(&self) -> bool {
        self.storage_kib.is_none() && self.messages.is_none()
    }
}

/// What an account holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub messages: u64,
    pub bytes: u64,
}

impl Usage {
    /// STORAGE usage in KiB, rounded up (RFC 9208 §5.1: units of 1024 octets).
    pub fn storage_kib(&self) -> u64 {
        self.bytes.div_ceil(1024)
    }
}

/// The resource a delivery would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Storage,
    Messages,
}

pub async fn get(txn: &Txn, account: AccountId) -> Result<Quota> {
    Ok(get_record(txn, &keyspace::quota(account), "quota")
        .await?
        .unwrap_or_default())
}

pub fn set(txn: &Txn, account: AccountId, quota: &Quota) -> Result<()> {
    super::directory::changed(txn)?;
    if quota.is_unlimited() {
        return txn.clear(&keyspace::quota(account));
    }
    put_record(txn, &keyspace::quota(account), quota)
}

/// The account's usage: its mailboxes' counters summed.
pub async fn usage(txn: &Txn, account: AccountId) -> Result<Usage> {
    // The counters behind the mailbox records, and those of earlier
    // builds under ("cnt", ...): both hold part of the count, and a part
    // may be negative (expunges counted on the new key of messages counted
    // on the old one), so the sums are signed until the end.
    let (mut messages, mut bytes) = (0i64, 0i64);
    for (begin, end) in [keyspace::mailboxes(account), keyspace::account_counters(account)] {
        let mut cursor = txn.range_cursor(&begin, &end, COUNTERS_PER_READ, false);
        while let Some(chunk) = cursor.next_chunk().await? {
            for (k, v) in chunk {
                let Some((_, _, kind)) = keyspace::parse_mailbox_counter(&k) else {
                    continue;
                };
                let n = decode_i64(Some(&v));
                match kind.as_str() {
                    COUNT_MESSAGES => messages = messages.saturating_add(n),
                    COUNT_BYTES => bytes = bytes.saturating_add(n),
                    _ => {}
                }
            }
        }
    }
    Ok(Usage {
        messages: messages.max(0) as u64,
        bytes: bytes.max(0) as u64,
    })
}

/// Whether adding `messages` messages of `bytes` octets in total would
/// exceed a limit. A limit of N allows usage up to N (RFC 9208 §4.1).
pub fn exceeds(quota: &Quota, usage: &Usage, messages: u64, bytes: u64) -> Option<Exceeded> {
    if let Some(limit) = quota.messages
        && usage.messages + messages > limit
    {
        return Some(Exceeded::Messages);
    }
    if let Some(limit) = quota.storage_kib
        && (usage.bytes + bytes).div_ceil(1024) > limit
    {
        return Some(Exceeded::Storage);
    }
    None
}

/// Whether the account is already at or over a limit (nothing more fits:
/// SMTP refuses at RCPT).
pub fn is_full(quota: &Quota, usage: &Usage) -> bool {
    quota.messages.is_some_and(|l| usage.messages >= l) || quota.storage_kib.is_some_and(|l| usage.storage_kib() >= l)
}

/// Checks quota for a delivery inside its transaction (None: fits).
pub async fn check(txn: &Txn, account: AccountId, messages: u64, bytes: u64) -> Result<Option<Exceeded>> {
    let quota = get(txn, account).await?;
    if quota.is_unlimited() {
        return Ok(None);
    }
    Ok(exceeds(&quota, &usage(txn, account).await?, messages, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_allow_up_to_the_limit() {
        let q = Quota {
            storage_kib: Some(2),
            messages: Some(3),
        };
        let u = Usage {
            messages: 2,
            bytes: 1000,
        };
        assert_eq!(exceeds(&q, &u, 1, 1048), None);
        assert_eq!(exceeds(&q, &u, 1, 1049), Some(Exceeded::Storage));
        assert_eq!(exceeds(&q, &u, 2, 1), Some(Exceeded::Messages));
        assert!(!is_full(&q, &u));
        assert!(is_full(&q, &Usage { messages: 3, bytes: 0 }));
        assert!(is_full(
            &q,
            &Usage {
                messages: 0,
                bytes: 2048
            }
        ));
        assert_eq!(exceeds(&Quota::default(), &u, 100, 1 << 40), None);
    }
}
