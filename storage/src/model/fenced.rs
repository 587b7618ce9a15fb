//! Fencing as a type: [`FencedTxn`] is a [`Txn`] whose shard lease was
//! checked in this very transaction, and every write a shard's owner makes
//! to its accounts' mailboxes takes one. A write that skipped the lease
//! check therefore does not compile, where it used to be a convention
//! (call `check_lease` first, by hand, in each actor).
//!
//! Why a type: the brief's invariant 2 ("one writer per shard, fenced by
//! the store") holds only if *every* write transaction of a shard reads its
//! lease key; a stale owner (partitioned, paused, superseded) then fails to
//! commit instead of writing. One forgotten call would break it silently.
//!
//! [`fence`] (also reached as `nodes::check_lease`) is the only way to get
//! one for a shard: it reads the lease (so a concurrent takeover conflicts
//! with the transaction) and refuses with [`StorageError::Fenced`] unless
//! (node, generation, epoch) still own it. The fields are private, so no
//! other code — in this crate or above it — can build one around a bare
//! `Txn`.
//!
//! Reads need no fence: a `FencedTxn` derefs to its `Txn`, so the read
//! functions (`&Txn`) take it as they are.
//!
//! ## What takes a `FencedTxn`
//! Every write of a mailbox's keys (its record, counters, rows, indexes,
//! change log): `messages::{append, expunge, store_flags,
//! store_flags_many, copy_to}`, `mailboxes::{create, create_unsubscribed,
//! create_defaults, put, add_counts, rename, set_subscribed, set_attributes,
//! remove_empty, rewind_uid_next_for_fault_injection}`,
//! `unindexed::index_first` and `compaction::trim_change_log`. The shard
//! actor's callers (the commit batcher, mailbox operations, the
//! compactor's trim) fence with [`fence`]; the outbound queue's `claim` and
//! `finish` fence inside themselves.
//!
//! ## What does not, and why
//! - Writes that are not a shard's: the accept ledger and quarantine
//!   (keyed by acceptance id, written in the same transaction as the
//!   fenced delivery when they belong to one), body reference counts
//!   (`blob`: shared by every shard, guarded by their own generation
//!   protocol), node records and leases (`nodes`), accounts, domains,
//!   aliases, quotas, Sieve scripts, JMAP records (uploads, tokens,
//!   identities, vacation, submissions), cursors and the compactor's global
//!   upkeep (orphan sweep, marker expiry, the mailbox walk's cursor).
//! - Writes to a shard's mailboxes made outside its ownership, each named
//!   by an [`AdminWrite`] reason through [`FencedTxn::admin`] (see each
//!   variant for why it is safe). Import, export, migration from another
//!   server and IMAP/JMAP writes are *not* among them: they go through the
//!   shard actors like any delivery.
//!
//! A fence covers a shard, not an account: which shard an account belongs
//! to is the actors' knowledge (the shard count is a node setting), so the
//! caller that fences shard `s` is trusted to write only `s`'s accounts.
//! The shard actor and the batcher only ever handle their own shard's.
//!
//! ```compile_fail
//! // An unfenced append does not compile: `append` takes a `FencedTxn`.
//! use meshmail_storage::Txn;
//! use meshmail_storage::model::messages::{self, NewMessage};
//! async fn unfenced(txn: &Txn, msg: &NewMessage) {
//!     let _ = messages::append(txn, 1, 1, msg).await;
//! }
//! ```
//!
//! ```compile_fail
//! // Nor can one be built around a bare transaction.
//! use meshmail_storage::Txn;
//! use meshmail_storage::model::fenced::FencedTxn;
//! fn forge(txn: &Txn) -> FencedTxn<'_> {
//!     FencedTxn { txn, shard: 0, epoch: 1 }
//! }
//! ```
//!
//! ```no_run
//! // The owner's way: fence, then write.
//! use meshmail_storage::{StorageError, Txn};
//! use meshmail_storage::model::{fenced, messages::{self, NewMessage}};
//! async fn owner_write(txn: &Txn, epoch: u64, msg: &NewMessage) -> Result<(), StorageError> {
//!     let fenced = fenced::fence(txn, 7, "node-a", 3, epoch).await?;
//!     messages::append(&fenced, 1, 1, msg).await?;
//!     Ok(())
//! }
//! ```

use std::ops::Deref;

use super::nodes;
use crate::error::{Result, StorageError};
use crate::kv::Txn;

/// A transaction allowed to write a shard's mailboxes: built by [`fence`]
/// after the lease check, or by [`FencedTxn::admin`] for the named writes
/// outside any shard's ownership.
pub struct FencedTxn<'a> {
    txn: &'a Txn,
    /// The shard fenced; `None` for an [`AdminWrite`].
    shard: Option<u32>,
    /// The lease epoch checked (0 for an [`AdminWrite`]).
    epoch: u64,
}

/// Why a write to a shard's mailboxes runs without the shard's lease. Each
/// is safe because no shard owner can be writing the same account's
/// mailboxes meanwhile with a view this write would break, and every
/// transaction is serializable anyway (it reads what it changes, so a
/// concurrent writer conflicts instead of interleaving).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminWrite {
    /// `accounts::add`: the default mailboxes of an account, in the
    /// transaction that creates it. No shard owner can know the account
    /// before that commits.
    NewAccount,
    /// `account_removal::step`: the account record went first
    /// (`account_removal::begin`), so nothing new resolves the address; a
    /// delivery that resolved it earlier and commits later conflicts with
    /// the step or finds its mailbox gone (see that module).
    AccountRemoval,
    /// Backup restore's repair: runs on a store being restored, which the
    /// restore requires empty (or `--force`) and which no node serves
    /// while it runs.
    Restore,
    /// Tests and benchmarks that fill a store no node serves, and test-only
    /// fault hooks. Never in a serving path.
    Fixture,
}

impl<'a> FencedTxn<'a> {
    /// A write outside any shard's ownership, for one of the reasons named
    /// by [`AdminWrite`]: no lease is read.
    pub fn admin(txn: &'a Txn, why: AdminWrite) -> Self {
        let _ = why; // Named at the call site, for its reader.
        FencedTxn {
            txn,
            shard: None,
            epoch: 0,
        }
    }

    /// The shard whose lease was checked (`None`: an admin write).
    pub fn shard(&self) -> Option<u32> {
        self.shard
    }

    /// The lease epoch checked (0 for an admin write).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The transaction, for reads (also reached by deref).
    pub fn txn(&self) -> &'a Txn {
        self.txn
    }
}

impl Deref for FencedTxn<'_> {
    type Target = Txn;

    fn deref(&self) -> &Txn {
        self.txn
    }
}

/// The fence of every write transaction of a shard: reads the lease (so a
/// concurrent takeover conflicts with this transaction) and refuses unless
/// (node, generation, epoch) still own it. A released lease fences its last
/// owner too: after a hand-off the old owner must not write. Reads no
/// clock: epochs are compared, never times.
pub async fn fence<'a>(txn: &'a Txn, shard: u32, node: &str, generation: u64, epoch: u64) -> Result<FencedTxn<'a>> {
    match nodes::lease(txn, shard).await? {
        Some(l) if !l.released && l.node == node && l.generation == generation && l.epoch == epoch => Ok(FencedTxn {
            txn,
            shard: Some(shard),
            epoch,
        }),
        other => {
            metrics::counter!("meshmail_lease_fenced_total").increment(1);
            Err(StorageError::Fenced {
                shard,
                detail: format!("writer {node}#{generation} epoch {epoch}, lease {other:?}"),
            })
        }
    }
}
