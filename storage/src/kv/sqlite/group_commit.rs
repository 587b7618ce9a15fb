//! Group commit: every transaction waiting for the writer when it frees up
//! is applied in one SQLite transaction, so they share one WAL append and
//! one fsync.
//!
//! A committing transaction queues a [`CommitRequest`] and waits for the
//! writer's turn (a FIFO semaphore). Whoever gets the turn takes every
//! request queued at that moment (up to [`GROUP_MEMBERS_MAX`]), its own
//! among them unless an earlier holder already took it, and applies them
//! in queue order. Each member is checked for conflicts as if it committed
//! alone right after the members before it: their write ranges are logged
//! in the same SQLite transaction before the next member's check reads the
//! log. A member that conflicts, or whose statements fail, is left out
//! without failing the others (see [`apply_group`]).
//!
//! Why: with one commit batcher the next batch could only start its reads
//! after the previous batch's fsync, so reads and commit took turns; with
//! two batchers each commit paid its own fsync for half the deliveries.
//! Folding whatever waits into one commit lets batchers (and IMAP, JMAP,
//! the queue runner) overlap their reads with another's commit and still
//! pay one fsync for all of them. FoundationDB's commit proxies batch the
//! same way; nothing here is visible above the backend.

use std::time::Instant;

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::{Shared, heap, read_one, schema, sql_err};
use crate::error::{Result, StorageError};
use crate::kv::overlay::{Mutation, apply_add};

/// Most transactions applied in one SQLite transaction.
pub const GROUP_MEMBERS_MAX: usize = 64;
/// Most mutation bytes (keys + values) in one group; the first member is
/// always taken, whatever its size (≤ 10 MB, the per-transaction limit).
pub const GROUP_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Commits between two prunes of the commit log.
const PRUNE_EVERY_COMMITS: u32 = 256;

/// One transaction waiting to be applied.
pub(super) struct CommitRequest {
    /// When it began to wait for its turn.
    wait_started: Instant,
    /// The version its reads saw (None: it read nothing).
    read_version: Option<i64>,
    /// Its read-conflict ranges `[begin, end)`.
    reads: Vec<(Vec<u8>, Vec<u8>)>,
    mutations: Vec<Mutation>,
    done: oneshot::Sender<Result<()>>,
}

impl CommitRequest {
    fn bytes(&self) -> usize {
        self.mutations.iter().map(Mutation::size_bytes).sum()
    }
}

impl Shared {
    /// Queues one transaction and returns once it is applied (or refused):
    /// by this caller, when it gets the writer's turn first, or by an
    /// earlier holder of the turn that took it into its group.
    pub(super) async fn commit_queued(
        self: &std::sync::Arc<Self>,
        read_version: Option<i64>,
        reads: Vec<(Vec<u8>, Vec<u8>)>,
        mutations: Vec<Mutation>,
    ) -> Result<()> {
        let (done, mut answer) = oneshot::channel();
        self.pending
            .lock()
            .expect("commit queue poisoned")
            .push_back(CommitRequest {
                wait_started: Instant::now(),
                read_version,
                reads,
                mutations,
                done,
            });
        let _turn = self.writer_turn.acquire().await.expect("writer queue is never closed");
        loop {
            match answer.try_recv() {
                Ok(result) => return result,
                // Dropped unanswered: a group's worker died (a panic) with
                // it in hand, maybe after SQLite committed.
                Err(oneshot::error::TryRecvError::Closed) => return Err(StorageError::CommitUnknown),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            // Holding the turn, ours is either answered or still queued: a
            // holder answers its whole group before it lets the turn go.
            let group = self.take_group();
            assert!(!group.is_empty(), "an unanswered commit is in the queue");
            let shared = self.clone();
            tokio::task::spawn_blocking(move || shared.commit_group(group))
                .await
                .map_err(super::join_err)?;
        }
    }

    /// The queue's head, within the group limits.
    fn take_group(&self) -> Vec<CommitRequest> {
        let mut queue = self.pending.lock().expect("commit queue poisoned");
        let mut group = Vec::new();
        let mut bytes = 0;
        while let Some(front) = queue.front() {
            let size = front.bytes();
            if group.len() >= GROUP_MEMBERS_MAX || (!group.is_empty() && bytes + size > GROUP_BYTES_MAX) {
                break;
            }
            bytes += size;
            group.push(queue.pop_front().expect("front exists"));
        }
        group
    }

    /// Applies a group and answers each member.
    fn commit_group(&self, group: Vec<CommitRequest>) {
        metrics::histogram!("meshmail_kv_sqlite_group_commit_members").record(group.len() as f64);
        if let Err(e) = self.faults.before_commit() {
            for m in group {
                let _ = m.done.send(Err(for_each_member(&e)));
            }
            return;
        }
        let mut writer = self.writer.lock().expect("writer poisoned");
        // Commits queued behind one that just waited out the busy timeout
        // would each wait the same 5 s for the same lock (the n-th waiter's
        // attempt lasting n × 5 s, past any retry budget). They fail at
        // once instead; their retry loop decides whether to try again.
        let (stale, group): (Vec<_>, Vec<_>) = group
            .into_iter()
            .partition(|m| writer.last_busy.is_some_and(|t| t > m.wait_started));
        for m in stale {
            metrics::counter!("meshmail_kv_sqlite_busy_fast_failures_total").increment(1);
            let _ = m.done.send(Err(StorageError::Unavailable(
                "the store file is write-locked by another process".into(),
            )));
        }
        if group.is_empty() {
            return;
        }
        // Not while the checkpoint thread restarts the WAL.
        let gate = self.commit_gate.pass();
        let guard = match self.fair.acquire() {
            Ok(g) => g,
            Err(e) => {
                let e = StorageError::Io(e);
                for m in group {
                    let _ = m.done.send(Err(for_each_member(&e)));
                }
                return;
            }
        };
        for m in &group {
            metrics::histogram!("meshmail_kv_writer_lock_wait_seconds").record(m.wait_started.elapsed().as_secs_f64());
        }
        let apply_started = Instant::now();
        let prune = writer.commits_since_prune >= PRUNE_EVERY_COMMITS;
        let results = apply_group(&mut writer.conn, &group, prune);
        drop(guard);
        drop(gate);
        metrics::histogram!("meshmail_kv_sqlite_apply_seconds").record(apply_started.elapsed().as_secs_f64());
        match &results {
            Ok(_) if prune => writer.commits_since_prune = 0,
            Ok(_) => writer.commits_since_prune += 1,
            Err(StorageError::Unavailable(_)) => writer.last_busy = Some(Instant::now()),
            Err(_) => {}
        }
        drop(writer);
        match results {
            Ok(results) => {
                for (m, result) in group.into_iter().zip(results) {
                    let _ = m.done.send(result.and_then(|()| self.injected_unknown()));
                }
            }
            Err(e) => {
                for m in group {
                    let _ = m.done.send(Err(for_each_member(&e)));
                }
            }
        }
    }

    /// The test hook: the next N applied commits report an unknown outcome.
    fn injected_unknown(&self) -> Result<()> {
        self.faults.after_commit()
    }
}

/// A copy of a group-wide error for each member (the error type holds an
/// `io::Error`, which is not `Clone`), of the same kind.
fn for_each_member(e: &StorageError) -> StorageError {
    match e {
        StorageError::Unavailable(s) => StorageError::Unavailable(s.clone()),
        StorageError::Unwritable { full, detail } => StorageError::Unwritable {
            full: *full,
            detail: detail.clone(),
        },
        StorageError::Io(io) => StorageError::Io(std::io::Error::new(io.kind(), io.to_string())),
        StorageError::CommitUnknown => StorageError::CommitUnknown,
        other => StorageError::Backend(other.to_string()),
    }
}

/// One SQLite transaction for the whole group: per member a result (its
/// conflict, or applied), or one error for all when the SQLite
/// transaction itself fails (nothing applied). A member whose statements
/// fail spoils the transaction for all (SQLite's savepoints would undo it
/// alone, but they write a statement journal for every member, which cost
/// ~2x the I/O per delivery in `bench smtp`): the transaction is rolled
/// back, that member gets its error, and the others go again without it.
fn apply_group(conn: &mut Connection, group: &[CommitRequest], prune: bool) -> Result<Vec<Result<()>>> {
    let mut failed: Vec<Option<StorageError>> = group.iter().map(|_| None).collect();
    loop {
        match apply_once(conn, group, &failed, prune)? {
            Attempt::Applied(mut results) => {
                for (r, f) in results.iter_mut().zip(failed.iter_mut()) {
                    if let Some(e) = f.take() {
                        *r = Err(e);
                    }
                }
                return Ok(results);
            }
            Attempt::MemberFailed(i, e) => failed[i] = Some(e),
        }
    }
}

enum Attempt {
    Applied(Vec<Result<()>>),
    /// Member `i`'s statements failed; nothing was applied.
    MemberFailed(usize, StorageError),
}

fn apply_once(
    conn: &mut Connection,
    group: &[CommitRequest],
    failed: &[Option<StorageError>],
    prune: bool,
) -> Result<Attempt> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let mut version = schema::read_version(&tx).map_err(sql_err)?;
    let first_version = version;
    let mut results = Vec::with_capacity(group.len());
    for (i, m) in group.iter().enumerate() {
        if failed[i].is_some() {
            results.push(Ok(())); // replaced by its error
            continue;
        }
        match check_member(&tx, version, m) {
            Err(e) => results.push(Err(e)),
            Ok(()) => match write_member(&tx, version + 1, &m.mutations) {
                Ok(()) => {
                    version += 1;
                    results.push(Ok(()));
                }
                // Dropping `tx` rolls the whole attempt back.
                Err(e) => return Ok(Attempt::MemberFailed(i, e)),
            },
        }
    }
    if version == first_version {
        // Every member was refused: nothing to make durable.
        return Ok(Attempt::Applied(results));
    }
    schema::write_meta(&tx, "version", version).map_err(sql_err)?;
    if prune {
        let now_ms = crate::clock::system_now_ms() as i64;
        schema::prune_conflict_log(&tx, now_ms - 10_000).map_err(sql_err)?;
    }
    tx.commit().map_err(sql_err)?;
    Ok(Attempt::Applied(results))
}

/// Checks one member against every commit after its read version (those
/// of earlier members of the group included: they are logged in the same
/// SQLite transaction before the next member is checked).
fn check_member(tx: &Connection, version: i64, m: &CommitRequest) -> Result<()> {
    if let Some(rv) = m.read_version
        && version > rv
        && !m.reads.is_empty()
    {
        let pruned_through = schema::read_meta(tx, "pruned_through").map_err(sql_err)?;
        if pruned_through > rv {
            return Err(StorageError::TransactionTooOld {
                limit_ms: crate::kv::TXN_LIFETIME_MAX.as_millis() as u64,
            });
        }
        let writes = schema::write_ranges_since(tx, rv).map_err(sql_err)?;
        if overlaps_any(&m.reads, writes) {
            return Err(StorageError::Conflict);
        }
    }
    Ok(())
}

/// Applies one member's mutations and logs its write ranges as commit
/// `version`.
fn write_member(tx: &Connection, version: i64, mutations: &[Mutation]) -> Result<()> {
    for m in mutations {
        match m {
            Mutation::Set(k, v) => heap::set(tx, k, v),
            Mutation::Clear(k) => heap::clear(tx, k),
            Mutation::ClearRange(b, e) => heap::clear_range(tx, b, e),
            Mutation::Add(k, op) => {
                let old = read_one(tx, k)?;
                heap::set(tx, k, &apply_add(old.as_deref(), op))
            }
        }
        .map_err(sql_err)?;
    }
    // The store's own time, not the node's (possibly skewed) clock: see crate::clock.
    let now_ms = crate::clock::system_now_ms() as i64;
    let ranges = coalesce(mutations.iter().map(Mutation::conflict_range).collect());
    schema::log_commit(tx, version, now_ms, &ranges).map_err(sql_err)
}

/// Sorts and merges overlapping or touching ranges.
pub(super) fn coalesce(mut ranges: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ranges.sort();
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(ranges.len());
    for (b, e) in ranges {
        match out.last_mut() {
            Some(last) if b <= last.1 => {
                if e > last.1 {
                    last.1 = e;
                }
            }
            _ => out.push((b, e)),
        }
    }
    out
}

/// True when any read range intersects any write range (half-open ranges).
pub(super) fn overlaps_any(reads: &[(Vec<u8>, Vec<u8>)], writes: Vec<(Vec<u8>, Vec<u8>)>) -> bool {
    let writes = coalesce(writes);
    reads.iter().any(|(rb, re)| {
        // The last write range starting before the read ends is the only
        // candidate: coalesced ranges are disjoint and sorted.
        let idx = writes.partition_point(|(wb, _)| wb < re);
        idx > 0 && writes[idx - 1].1 > *rb
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::kv::sqlite::{SqliteBackend, SqliteOptions};
    use crate::kv::{Backend, BackendTransaction};

    async fn wait_for_queue(backend: &SqliteBackend, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while backend.shared.pending.lock().unwrap().len() < n {
            assert!(std::time::Instant::now() < deadline, "commits never queued");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Three transactions land in one group: two that read and write the
    /// same key from the same snapshot, and one that writes another key.
    /// The second of the pair must conflict with the first even though
    /// neither was in the commit log when the group began; the third is
    /// applied regardless.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn members_of_one_group_conflict_as_if_committed_one_after_another() {
        let dir = tempfile::tempdir().unwrap();
        let backend = SqliteBackend::open(SqliteOptions::new(dir.path().join("kv.sqlite"))).unwrap();
        let seed = backend.begin(false).await.unwrap();
        seed.set(b"x", b"0");
        seed.commit().await.unwrap();
        let version_before = {
            let w = backend.shared.writer.lock().unwrap();
            crate::kv::sqlite::schema::read_version(&w.conn).unwrap()
        };

        // Hold the writer's turn so that all three queue behind it.
        let turn = backend.shared.writer_turn.acquire().await.unwrap();
        let mut txns: Vec<Box<dyn BackendTransaction>> = Vec::new();
        for value in [&b"a"[..], b"b"] {
            let t = backend.begin(false).await.unwrap();
            assert_eq!(t.get(b"x", false).await.unwrap().as_deref(), Some(&b"0"[..]));
            t.set(b"x", value);
            txns.push(t);
        }
        let other = backend.begin(false).await.unwrap();
        other.set(b"y", b"1");
        txns.push(other);
        let mut handles = Vec::new();
        for (i, t) in txns.into_iter().enumerate() {
            handles.push(tokio::spawn(async move { t.commit().await }));
            wait_for_queue(&backend, i + 1).await;
        }
        drop(turn);
        let results: Vec<_> = futures::future::join_all(handles)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert!(results[0].is_ok(), "{:?}", results[0]);
        assert!(
            matches!(results[1], Err(crate::StorageError::Conflict)),
            "the second writer of x committed too: {:?}",
            results[1]
        );
        assert!(results[2].is_ok(), "{:?}", results[2]);

        let read = backend.begin(true).await.unwrap();
        assert_eq!(read.get(b"x", true).await.unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(read.get(b"y", true).await.unwrap().as_deref(), Some(&b"1"[..]));
        let w = backend.shared.writer.lock().unwrap();
        let version_after = crate::kv::sqlite::schema::read_version(&w.conn).unwrap();
        assert_eq!(version_after, version_before + 2, "one version per applied member");
    }

    /// Many concurrent writers: every commit is applied exactly once (the
    /// counter they all add to reads 200, every key is there).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_commits_all_apply() {
        let dir = tempfile::tempdir().unwrap();
        let backend = SqliteBackend::open(SqliteOptions::new(dir.path().join("kv.sqlite"))).unwrap();
        let mut handles = Vec::new();
        for i in 0..200u32 {
            let backend = backend.clone();
            handles.push(tokio::spawn(async move {
                let t = backend.begin(false).await.unwrap();
                t.set(format!("k{i:04}").as_bytes(), &i.to_le_bytes());
                t.atomic_add(b"count", &1u64.to_le_bytes());
                t.commit().await
            }));
        }
        for h in handles {
            h.await.unwrap().unwrap();
        }
        let read = backend.begin(true).await.unwrap();
        let count = read.get(b"count", true).await.unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(count.try_into().unwrap()), 200);
        let rows = read.get_range(b"k", b"l", 1000, false, true).await.unwrap();
        assert_eq!(rows.len(), 200);
    }
}
