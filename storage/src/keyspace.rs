//! The keyspace: every key meshmail stores, tuple-encoded under a short
//! subspace name. `docs/KEYSPACE.md` is the reference; keep it in step.
//!
//! Keys written together sort together: a mailbox's messages are
//! `("msg", account, mailbox, uid)` with increasing UIDs, and ledger
//! entries are keyed by time-ordered UUIDv7 acceptance ids. On SQLite that
//! is the difference between ~6k and ~50k keys/s per transaction.

use foundationdb_tuple::{Bytes, pack};

use crate::ids::{AccountId, MailboxId, Uid};
use crate::kv::{prefix_range, strinc};

/// Every key of one subspace (`("msg", …)`, `("ldg", …)`): what the
/// backup leaves out of its key copy.
pub fn subspace(name: &str) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&(name,)))
}

pub fn domain(name: &str) -> Vec<u8> {
    pack(&("dom", name))
}
pub fn domains() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("dom",)))
}

pub fn account(email: &str) -> Vec<u8> {
    pack(&("acct", email))
}
pub fn accounts() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("acct",)))
}
/// Account id → email, for reverse lookups.
pub fn account_by_id(id: AccountId) -> Vec<u8> {
    pack(&("acid", id))
}

/// An alias (`local@domain`) or a domain catch-all (`@domain`) → targets.
pub fn alias(address: &str) -> Vec<u8> {
    pack(&("alias", address))
}
pub fn aliases() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("alias",)))
}

/// The directory's version (i64 LE): raised by every change to what RCPT
/// reads (`model::directory`).
pub fn directory_version() -> Vec<u8> {
    pack(&("dirv",))
}
/// Cluster-wide secrets (`srs`: the SRS hash key), created once by the
/// first node that needs one, so every node computes the same hashes.
pub fn secret(name: &str) -> Vec<u8> {
    pack(&("secret", name))
}

/// Named counters used to allocate ids (`account_id`, ...).
pub fn sequence(name: &str) -> Vec<u8> {
    pack(&("seq", name))
}
/// Per-account counter for mailbox ids.
pub fn mailbox_sequence(account: AccountId) -> Vec<u8> {
    pack(&("seq", "mailbox_id", account))
}

pub fn mailbox(account: AccountId, mailbox: MailboxId) -> Vec<u8> {
    pack(&("mbox", account, mailbox))
}
pub fn mailboxes(account: AccountId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("mbox", account)))
}
/// Mailbox name → id, one key per name.
/// A subscribed mailbox name (IMAP SUBSCRIBE), whether or not the mailbox
/// exists: RFC 3501 §6.3.6 keeps a subscription when its mailbox goes.
pub fn subscription(account: AccountId, name: &str) -> Vec<u8> {
    pack(&("subs", account, name))
}
pub fn subscriptions(account: AccountId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("subs", account)))
}
pub fn mailbox_name(account: AccountId, name: &str) -> Vec<u8> {
    pack(&("mbxn", account, name))
}

pub fn message(account: AccountId, mailbox: MailboxId, uid: Uid) -> Vec<u8> {
    pack(&("msg", account, mailbox, uid))
}
pub fn messages(account: AccountId, mailbox: MailboxId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("msg", account, mailbox)))
}

/// Where a moved message is now: `(first mailbox, first UID)` → its
/// current `(mailbox, UID)` (value: mailbox i64 LE then UID u32 LE). The
/// message's JMAP id / IMAP EMAILID names its first place, so a read by id
/// whose row is gone follows this key. Written only by a move (in the
/// move's transaction), cleared with the moved row; never for a message
/// still where it was first stored.
pub fn email_placement(account: AccountId, first_mailbox: MailboxId, first_uid: Uid) -> Vec<u8> {
    pack(&("eplc", account, first_mailbox, first_uid))
}

/// A message's write-once summary (envelope and body structure, see
/// `model::message_codec`), apart from its hot `msg` row so that flag
/// changes and scans of flags never read or rewrite it.
pub fn message_summary(account: AccountId, mailbox: MailboxId, uid: Uid) -> Vec<u8> {
    pack(&("msum", account, mailbox, uid))
}
pub fn message_summaries(account: AccountId, mailbox: MailboxId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("msum", account, mailbox)))
}
/// The unseen index: one key (empty value) per message without `\Seen`,
/// written in the transactions that append, copy, flag and expunge it.
/// Complete in mailboxes whose record says `unseen_index`.
pub fn unseen(account: AccountId, mailbox: MailboxId, uid: Uid) -> Vec<u8> {
    pack(&("unsn", account, mailbox, uid))
}
pub fn unseen_all(account: AccountId, mailbox: MailboxId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("unsn", account, mailbox)))
}
/// The UID of a `msg`, `msum` or `unsn` key.
pub fn message_uid(key: &[u8]) -> crate::error::Result<Uid> {
    let (_, _, _, uid): (String, AccountId, MailboxId, Uid) =
        foundationdb_tuple::unpack(key).map_err(|e| bad_key(key, e))?;
    Ok(uid)
}

/// The receivedAt index: one key per message, ordered by INTERNALDATE
/// (ms) then UID; the value is the UID (u32 LE). JMAP's default sort reads
/// it backwards, bounded by position + limit, instead of every row.
pub fn message_by_date(account: AccountId, mailbox: MailboxId, internal_date_ms: i64, uid: Uid) -> Vec<u8> {
    pack(&("mdat", account, mailbox, internal_date_ms, uid))
}
pub fn messages_by_date(account: AccountId, mailbox: MailboxId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("mdat", account, mailbox)))
}
/// The (receivedAt, UID) of a receivedAt index key.
pub fn message_date_uid(key: &[u8]) -> crate::error::Result<(i64, Uid)> {
    let (_, _, _, date, uid): (String, AccountId, MailboxId, i64, Uid) =
        foundationdb_tuple::unpack(key).map_err(|e| bad_key(key, e))?;
    Ok((date, uid))
}

/// Per-mailbox counters ("messages", "unseen", "bytes"), little-endian i64.
pub fn counter(account: AccountId, mailbox: MailboxId, kind: &str) -> Vec<u8> {
    pack(&("cnt", account, mailbox, kind))
}

/// A mailbox counter (i64 LE, atomic adds) right behind the mailbox's
/// record: every delivery rewrites the record and adds to the counters, and
/// under `("cnt", ...)` they took a B-tree page of their own. Counters
/// written before this layout stay at [`counter`]; readers sum both.
pub fn mailbox_counter(account: AccountId, mailbox: MailboxId, kind: &str) -> Vec<u8> {
    pack(&("mbox", account, mailbox, kind))
}

/// Whether a key of the `("mbox", ...)` subspace is a mailbox record (not
/// one of its [`mailbox_counter`]s).
pub fn is_mailbox_record(key: &[u8]) -> bool {
    foundationdb_tuple::unpack::<(String, AccountId, MailboxId)>(key).is_ok()
}

/// The account, mailbox and kind of a [`mailbox_counter`] key.
pub fn parse_mailbox_counter(key: &[u8]) -> Option<(AccountId, MailboxId, String)> {
    let (_, account, mailbox, kind): (String, AccountId, MailboxId, String) = foundationdb_tuple::unpack(key).ok()?;
    Some((account, mailbox, kind))
}

/// Every per-mailbox counter of an account (quota usage sums them).
pub fn account_counters(account: AccountId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("cnt", account)))
}

/// An account's quota limits (RFC 9208 STORAGE and MESSAGE).
pub fn quota(account: AccountId) -> Vec<u8> {
    pack(&("quota", account))
}

/// The change log: one entry per MODSEQ, for CONDSTORE/QRESYNC and JMAP.
pub fn change(account: AccountId, mailbox: MailboxId, modseq: u64) -> Vec<u8> {
    pack(&("chg", account, mailbox, modseq))
}
pub fn changes_since(account: AccountId, mailbox: MailboxId, modseq: u64) -> (Vec<u8>, Vec<u8>) {
    let begin = change(account, mailbox, modseq + 1);
    (begin, strinc(&pack(&("chg", account, mailbox))))
}

/// The highest MODSEQ trimmed from a mailbox's change log (i64 LE): changes
/// above it are all present. The compactor raises it; a QRESYNC from below
/// it needs a full resync.
pub fn change_floor(account: AccountId, mailbox: MailboxId) -> Vec<u8> {
    pack(&("chgf", account, mailbox))
}

/// Every mailbox record of every account (the compactor's walk).
pub fn all_mailboxes() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("mbox",)))
}
/// The account of a mailbox record's key.
pub fn mailbox_account(key: &[u8]) -> crate::error::Result<AccountId> {
    let (_, account, _): (String, AccountId, MailboxId) =
        foundationdb_tuple::unpack(key).map_err(|e| bad_key(key, e))?;
    Ok(account)
}

/// Every idempotency marker (UUIDv7 keys: oldest first).
pub fn idempotency_all() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("idem",)))
}

/// The accept ledger, keyed by the acceptance id (UUIDv7, time-ordered).
pub fn ledger(acceptance_id: &[u8; 16]) -> Vec<u8> {
    pack(&("ldg", Bytes::from(&acceptance_id[..])))
}
pub fn ledger_all() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("ldg",)))
}

pub fn quarantine(id: &[u8; 16]) -> Vec<u8> {
    pack(&("quar", Bytes::from(&id[..])))
}
pub fn quarantine_all() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("quar",)))
}
/// Durable failure count of one delivery, so poison detection survives crashes.
pub fn delivery_attempts(delivery_id: &[u8; 16]) -> Vec<u8> {
    pack(&("try", Bytes::from(&delivery_id[..])))
}

/// Outbound queue entries (remote recipients), keyed by a UUIDv7.
pub fn outbound(id: &[u8; 16]) -> Vec<u8> {
    pack(&("outq", Bytes::from(&id[..])))
}
pub fn outbound_all() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("outq",)))
}

/// The due index of the outbound queue: one entry per item, at the time
/// its next attempt is due, per owning shard.
pub fn outbound_due(shard: u32, due_ms: u64, id: &[u8; 16]) -> Vec<u8> {
    pack(&("outd", shard, due_ms, Bytes::from(&id[..])))
}
/// Every due entry of one shard.
pub fn outbound_due_shard(shard: u32) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("outd", shard)))
}
/// The first due key of `shard` at or after `due_ms` (the end of a scan).
pub fn outbound_due_before(shard: u32, due_ms: u64) -> Vec<u8> {
    pack(&("outd", shard, due_ms))
}
/// The item id of a due-index key.
pub fn outbound_due_id(key: &[u8]) -> crate::error::Result<[u8; 16]> {
    let (_, _, _, id): (String, u32, u64, Bytes) = foundationdb_tuple::unpack(key).map_err(|e| bad_key(key, e))?;
    id_of(&id.0, key)
}
/// Present while an attempt of the item is in flight.
pub fn outbound_claim(shard: u32, id: &[u8; 16]) -> Vec<u8> {
    pack(&("outc", shard, Bytes::from(&id[..])))
}
pub fn outbound_claims(shard: u32) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("outc", shard)))
}
pub fn outbound_claim_id(key: &[u8]) -> crate::error::Result<[u8; 16]> {
    let (_, _, id): (String, u32, Bytes) = foundationdb_tuple::unpack(key).map_err(|e| bad_key(key, e))?;
    id_of(&id.0, key)
}
/// How many items are queued (i64 LE, atomic adds).
pub fn outbound_count() -> Vec<u8> {
    pack(&("outn",))
}

fn bad_key(key: &[u8], e: impl std::fmt::Display) -> crate::error::StorageError {
    crate::error::StorageError::Corrupt {
        what: format!("key {key:?}"),
        detail: e.to_string(),
    }
}

fn id_of(bytes: &[u8], key: &[u8]) -> crate::error::Result<[u8; 16]> {
    bytes.try_into().map_err(|_| bad_key(key, "id is not 16 bytes"))
}

/// The DKIM signing key of a local domain.
pub fn dkim_key(domain: &str) -> Vec<u8> {
    pack(&("dkim", domain))
}
pub fn dkim_keys() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("dkim",)))
}

/// A fact of the whole cluster fixed at first start (`shard_count`).
pub fn cluster_fact(name: &str) -> Vec<u8> {
    pack(&("cluster", name))
}

/// The cached MTA-STS policy (RFC 8461) of a remote domain.
pub fn mta_sts_policy(domain: &str) -> Vec<u8> {
    pack(&("sts", domain))
}

/// The generation counter of a node name (grows at every start).
pub fn node_generation(name: &str) -> Vec<u8> {
    pack(&("ngen", name))
}
pub fn node(name: &str) -> Vec<u8> {
    pack(&("node", name))
}
pub fn nodes() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("node",)))
}
/// When a node name's running incarnation last said it was alive.
pub fn node_seen(name: &str) -> Vec<u8> {
    pack(&("nseen", name))
}

/// The lease of one virtual shard.
pub fn lease(shard: u32) -> Vec<u8> {
    pack(&("lease", shard))
}
pub fn leases() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("lease",)))
}

/// Blob reference count (little-endian i64), by content hash.
pub fn blob_refs(hash: &str) -> Vec<u8> {
    pack(&("bref", hash))
}
/// Blob incarnation: bumped by the orphan sweep before it deletes a body.
pub fn blob_generation(hash: &str) -> Vec<u8> {
    pack(&("bgen", hash))
}
/// Present while the orphan sweep is deleting a body.
pub fn blob_deleting(hash: &str) -> Vec<u8> {
    pack(&("bdel", hash))
}
/// Small bodies stored inline in the KV store, by content hash, right
/// behind the body's reference count: a delivery writes both, and keyed by a
/// hash they land on a random B-tree page each; side by side they share one
/// (one page per delivery fewer, the difference growing with the store).
pub fn blob_inline(hash: &str) -> Vec<u8> {
    pack(&("bref", hash, BLOB_INLINE_TAG))
}
/// The element that tells an inline body from its reference count under
/// `("bref", hash)`.
pub const BLOB_INLINE_TAG: &str = "inline";

/// The hash of an inline body's key ([`blob_inline`]), None for any other key.
pub fn inline_body_hash(key: &[u8]) -> Option<String> {
    match foundationdb_tuple::unpack::<(String, String, String)>(key) {
        Ok((space, hash, tag)) if space == "bref" && tag == BLOB_INLINE_TAG => Some(hash),
        _ => None,
    }
}
/// Where stores written before 2026-12-05 keep inline bodies: read (and
/// swept) as a fallback, never written.
pub fn blob_inline_v1(hash: &str) -> Vec<u8> {
    pack(&("binl", hash))
}

/// Idempotency markers of `Database::run_idempotent`.
pub fn idempotency_key(op_id: &[u8; 16]) -> Vec<u8> {
    pack(&("idem", Bytes::from(&op_id[..])))
}

/// Resumable cursors of long walks (compaction, sweeps, verifiers).
pub fn cursor(name: &str) -> Vec<u8> {
    pack(&("cur", name))
}

/// A blob uploaded over JMAP by an account (the body itself is an object
/// in the blob store, kept by the orphan sweep's grace period).
pub fn upload(account: AccountId, hash: &str) -> Vec<u8> {
    pack(&("upl", account, hash))
}

/// A bearer token, by the hex SHA-256 of the token (the token itself is
/// never stored).
pub fn token(token_hash: &str) -> Vec<u8> {
    pack(&("tok", token_hash))
}

/// A JMAP EmailSubmission record of an account (UUIDv7 ids: time order).
pub fn submission(account: AccountId, id: &[u8; 16]) -> Vec<u8> {
    pack(&("jsub", account, Bytes::from(&id[..])))
}
pub fn submissions(account: AccountId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("jsub", account)))
}

/// An account's JMAP VacationResponse (one per account).
pub fn vacation(account: AccountId) -> Vec<u8> {
    pack(&("vac", account))
}

/// A JMAP Identity the user created or edited (`i0`, the account's own
/// address, exists without a record until it is edited).
pub fn identity(account: AccountId, id: &str) -> Vec<u8> {
    pack(&("jid", account, id))
}
pub fn identities(account: AccountId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("jid", account)))
}
/// The Identity state of an account (i64 LE, raised at every change) and
/// the allocator of identity ids.
pub fn identity_state(account: AccountId) -> Vec<u8> {
    pack(&("jidv", account))
}
pub fn identity_sequence(account: AccountId) -> Vec<u8> {
    pack(&("seq", "identity_id", account))
}

/// "The vacation response answered `sender` at T": one automatic reply per
/// sender per period, whichever node delivers (RFC 5230 §4.2).
pub fn vacation_reply(account: AccountId, sender: &str) -> Vec<u8> {
    pack(&("vacr", account, sender))
}

/// A Sieve script of an account, by name (`model::sieve`).
pub fn sieve_script(account: AccountId, name: &str) -> Vec<u8> {
    pack(&("sieve", account, name))
}
pub fn sieve_scripts(account: AccountId) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("sieve", account)))
}
/// Which of the account's Sieve scripts runs at delivery (one at most).
pub fn sieve_active(account: AccountId) -> Vec<u8> {
    pack(&("sievea", account))
}
/// An id a Sieve `duplicate` test saw (RFC 7352), with its expiry.
pub fn sieve_duplicate(account: AccountId, id_hash: &str) -> Vec<u8> {
    pack(&("sieved", account, id_hash))
}
/// A `meshmail migrate` checkpoint of one source folder
/// (`model::migration`), by sha256_hex(source URL, folder).
pub fn migration_checkpoint(account: AccountId, source_hash: &str) -> Vec<u8> {
    pack(&("migck", account, source_hash))
}

/// An account being deleted (`model::account_removal`): its id → what is
/// left to do. Written when its record goes, cleared when the last of its
/// keys has.
pub fn account_removal(account: AccountId) -> Vec<u8> {
    pack(&("adel", account))
}
pub fn account_removals() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("adel",)))
}

/// Every subspace whose second tuple element is the account: what is left
/// to clear once an account's mailboxes are gone. A test in this module
/// reads this file and fails on a per-account subspace missing here.
const ACCOUNT_SUBSPACES: &[&str] = &[
    "mbox", "subs", "mbxn", "msg", "eplc", "msum", "unsn", "mdat", "cnt", "quota", "chg", "chgf", "upl", "jsub", "vac",
    "jid", "jidv", "vacr", "thrm", "thrx", "sieve", "sievea", "sieved", "migck",
];

/// The key ranges of one account in every per-account subspace, and its
/// per-account sequences (mailbox and identity ids).
pub fn account_ranges(account: AccountId) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut ranges: Vec<_> = ACCOUNT_SUBSPACES
        .iter()
        .map(|name| prefix_range(&pack(&(*name, account))))
        .collect();
    for key in [mailbox_sequence(account), identity_sequence(account)] {
        let end = crate::kv::key_after(&key);
        ranges.push((key, end));
    }
    ranges
}

/// Every bearer token (a deleted account's are revoked by a walk over them).
pub fn tokens() -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("tok",)))
}

/// Thread index: a Message-ID seen in an account → the thread it belongs to.
pub fn thread_by_message_id(account: AccountId, message_id: &str) -> Vec<u8> {
    pack(&("thrm", account, message_id))
}

/// Thread membership: one key per message of a thread.
pub fn thread_member(account: AccountId, thread: &str, mailbox: MailboxId, uid: Uid) -> Vec<u8> {
    pack(&("thrx", account, thread, mailbox, uid))
}
pub fn thread_members(account: AccountId, thread: &str) -> (Vec<u8>, Vec<u8>) {
    prefix_range(&pack(&("thrx", account, thread)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_a_mailbox_sort_by_uid() {
        let a = message(1, 2, 9);
        let b = message(1, 2, 10);
        let c = message(1, 2, 1_000_000);
        assert!(a < b && b < c);
        let (lo, hi) = messages(1, 2);
        assert!(lo <= a && c < hi);
        assert!(message(1, 3, 0) >= hi);
    }

    #[test]
    fn account_ranges_cover_every_per_account_subspace() {
        // Every per-account subspace packed in this file is in ACCOUNT_SUBSPACES,
        // so deleting an account leaves none of its keys behind.
        let source = include_str!("keyspace.rs");
        let needle = concat!("pack(&(", "\"");
        for (at, _) in source.match_indices(needle) {
            let rest = &source[at + needle.len()..];
            let Some((name, after)) = rest.split_once('"') else {
                continue;
            };
            if after.starts_with(", account") && name != "adel" {
                assert!(ACCOUNT_SUBSPACES.contains(&name), "{name} is not in ACCOUNT_SUBSPACES");
            }
        }
        let ranges = account_ranges(7);
        for key in [
            message(7, 1, 1),
            mailbox(7, 2),
            vacation(7),
            mailbox_sequence(7),
            identity_sequence(7),
        ] {
            assert!(ranges.iter().any(|(b, e)| *b <= key && key < *e), "{key:?}");
        }
        for key in [message(70, 1, 1), mailbox(8, 2), mailbox_sequence(8)] {
            assert!(!ranges.iter().any(|(b, e)| *b <= key && key < *e), "{key:?}");
        }
    }

    #[test]
    fn mailbox_keys_give_back_their_account() {
        assert_eq!(mailbox_account(&mailbox(7, 3)).unwrap(), 7);
        assert!(mailbox_account(&message(7, 3, 1)).is_err());
        assert!(mailbox_account(b"not a tuple").is_err());
    }

    #[test]
    fn outbound_due_keys_sort_by_time_within_a_shard() {
        let (a, b) = ([1u8; 16], [0u8; 16]);
        let early = outbound_due(7, 999, &a);
        let late = outbound_due(7, 1_000_000, &b);
        assert!(early < late);
        let (lo, hi) = outbound_due_shard(7);
        assert!(lo <= early && late < hi);
        assert!(late < outbound_due_before(7, 1_000_001));
        assert!(late >= outbound_due_before(7, 1_000_000));
        assert_eq!(outbound_due_id(&late).unwrap(), b);
        assert_eq!(outbound_claim_id(&outbound_claim(7, &a)).unwrap(), a);
        assert!(outbound_due(8, 0, &a) >= hi);
    }

    #[test]
    fn ledger_keys_follow_uuid_v7_time_order() {
        let first = *uuid::Uuid::now_v7().as_bytes();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = *uuid::Uuid::now_v7().as_bytes();
        assert!(ledger(&first) < ledger(&second));
    }
}
