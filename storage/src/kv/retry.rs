//! The transaction retry loop, and idempotent transactions for commits whose
//! outcome is unknown.

use std::future::Future;
use std::time::{Duration, Instant};

use rand::Rng;

use super::{Database, Txn};
use crate::error::{StorageError, TxError};
use crate::keyspace;

/// The default [`RetryPolicy::give_up_after`]: well inside a mail client's
/// patience (RFC 5321 §4.5.3.2.6 has an SMTP client wait 10 minutes after
/// DATA) and long enough to ride out a store failover or a short lock.
pub const RETRY_BUDGET: Duration = Duration::from_secs(20);

/// How often and how patiently a transaction is retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts before giving up (the first one included).
    pub attempts_max: u32,
    /// First backoff; doubled after each retry, with full jitter.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// No new attempt starts after this much time since the first: a store
    /// that is down or locked (each attempt waiting out a busy timeout) turns
    /// into an answer ("try again later") in bounded time instead of after
    /// `attempts_max` slow attempts.
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts_max: 40,
            backoff_initial: Duration::from_millis(1),
            backoff_max: Duration::from_millis(250),
            give_up_after: RETRY_BUDGET,
        }
    }
}

impl RetryPolicy {
    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .backoff_initial
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.backoff_max);
        // Full jitter: retries of colliding transactions spread out instead
        // of colliding again in lockstep.
        let micros = rand::rng().random_range(0..=exp.as_micros().max(1) as u64);
        Duration::from_micros(micros)
    }
}

/// What an idempotent transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idempotent<T> {
    /// This call applied it and returned this value.
    Applied(T),
    /// An earlier attempt (whose commit outcome was unknown) had applied it.
    AlreadyApplied,
}

impl Database {
    /// Runs `f` in a read-write transaction, retrying on conflicts and
    /// retryable errors with jittered exponential backoff. `op` names the
    /// transaction in the metrics (`meshmail_kv_txn_seconds{op=...}`).
    ///
    /// An attempt whose commit outcome is unknown is retried too: `f` must be
    /// idempotent or check [`Txn::maybe_committed`] (see
    /// [`Database::run_idempotent`]).
    pub async fn run<T, E, F, Fut>(&self, op: &'static str, f: F) -> Result<T, E>
    where
        F: FnMut(Txn) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: TxError,
    {
        self.run_inner(op, false, f).await
    }

    /// Runs `f` in a read-only snapshot transaction (retried if the store is
    /// unavailable or the snapshot grows too old).
    pub async fn read<T, E, F, Fut>(&self, op: &'static str, f: F) -> Result<T, E>
    where
        F: FnMut(Txn) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: TxError,
    {
        self.run_inner(op, true, f).await
    }

    /// Runs `f` at most once in effect: a marker keyed by `op_id` is written
    /// in the same transaction, and an attempt that follows an unknown commit
    /// outcome checks the marker before doing anything. `op_id` must be
    /// unique per logical operation (a UUIDv7 made by the caller).
    pub async fn run_idempotent<T, E, F, Fut>(
        &self,
        op: &'static str,
        op_id: [u8; 16],
        mut f: F,
    ) -> Result<Idempotent<T>, E>
    where
        F: FnMut(Txn) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: TxError,
    {
        let marker = keyspace::idempotency_key(&op_id);
        self.run(op, move |txn| {
            let marker = marker.clone();
            // The body future is lazy: nothing of it runs unless awaited below.
            let body = f(txn.clone());
            async move {
                if txn.maybe_committed() && txn.get(&marker).await?.is_some() {
                    return Ok(Idempotent::AlreadyApplied);
                }
                let value = body.await?;
                txn.set(&marker, &crate::model::now_ms().to_le_bytes())?;
                Ok(Idempotent::Applied(value))
            }
        })
        .await
    }

    async fn run_inner<T, E, F, Fut>(&self, op: &'static str, read_only: bool, mut f: F) -> Result<T, E>
    where
        F: FnMut(Txn) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: TxError,
    {
        let mut maybe_committed = false;
        let mut attempt = 0u32;
        let first = Instant::now();
        loop {
            let started = Instant::now();
            let result = async {
                let txn = self.begin_attempt(read_only, attempt, maybe_committed).await?;
                let value = f(txn.clone()).await?;
                let body_done = Instant::now();
                metrics::histogram!("meshmail_kv_txn_seconds", "op" => op)
                    .record(body_done.duration_since(started).as_secs_f64());
                if !read_only {
                    txn.commit().await?;
                    metrics::histogram!("meshmail_kv_commit_seconds", "op" => op)
                        .record(body_done.elapsed().as_secs_f64());
                    metrics::histogram!("meshmail_kv_txn_written_bytes", "op" => op).record(txn.written_bytes() as f64);
                }
                Ok::<T, E>(value)
            }
            .await;
            let err = match result {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            let Some(storage) = err.as_storage() else {
                return Err(err);
            };
            if !storage.is_retryable() {
                return Err(err);
            }
            metrics::counter!("meshmail_kv_retries_total", "op" => op, "reason" => storage.label()).increment(1);
            maybe_committed |= storage.maybe_committed();
            attempt += 1;
            let elapsed = first.elapsed();
            if attempt >= self.retry.attempts_max || elapsed >= self.retry.give_up_after {
                tracing::warn!(op, attempt, elapsed_ms = elapsed.as_millis() as u64, error = %storage, "transaction gave up");
                metrics::counter!("meshmail_kv_gave_up_total", "op" => op, "reason" => storage.label()).increment(1);
                let last = Box::new(StorageError::Backend(storage.to_string()));
                return Err(E::from(StorageError::RetriesExhausted {
                    attempts: attempt,
                    elapsed_ms: elapsed.as_millis() as u64,
                    last,
                }));
            }
            tokio::time::sleep(self.retry.backoff(attempt)).await;
        }
    }
}
