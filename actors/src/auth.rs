//! Password authentication for sessions: argon2id verification on a
//! fixed-size pool of dedicated threads (never on the async workers), a
//! short-lived cache of verified credentials keyed by a keyed hash of
//! (user, password) so repeated logins skip the hash without storing any
//! secret, and the failed-login limiter of [`crate::auth_limits`] (per
//! client address and per account from an address, slowing down before
//! refusing).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::auth_limits::{Admission, FailureLimiter, LimitedBy};
use hmac::{Hmac, Mac};
use meshmail_storage::model::accounts::{self, Account};
use meshmail_storage::{Database, StorageError};
use sha2::Sha256;
use tokio::sync::oneshot;

/// Verifications waiting for a hashing thread before new ones are refused.
pub const HASH_QUEUE_MAX: usize = 256;
/// How long a verified credential is trusted without hashing again.
pub const CACHE_TTL: Duration = Duration::from_secs(300);
/// Verified credentials cached before expired ones are dropped.
const TRACKED_KEYS_MAX: usize = 100_000;

pub use crate::auth_limits::AuthLimits;

#[derive(Debug)]
pub enum AuthOutcome {
    Ok(Account),
    /// Wrong user or password (indistinguishable on purpose).
    Failed,
    /// Too many recent failures from this client address, or for this
    /// account from it: no attempt is checked before `retry_after` has
    /// passed.
    RateLimited {
        retry_after: Duration,
    },
    /// The store or the hash pool cannot answer now: try later.
    Unavailable(String),
}

struct Job {
    phc: String,
    password: String,
    done: oneshot::Sender<bool>,
}

pub struct Authenticator {
    db: Database,
    jobs: SyncSender<Job>,
    cache_key: [u8; 32],
    cache: Mutex<HashMap<[u8; 32], (String, Instant)>>,
    limiter: FailureLimiter,
}

impl Authenticator {
    /// Starts `threads` hashing threads (at least 1).
    pub fn new(db: Database, threads: usize, limits: AuthLimits) -> Arc<Self> {
        let (tx, rx) = sync_channel::<Job>(HASH_QUEUE_MAX);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("argon2-{i}"))
                .spawn(move || {
                    loop {
                        let job = match rx.lock().expect("hash queue").recv() {
                            Ok(job) => job,
                            Err(_) => return, // Authenticator dropped.
                        };
                        metrics::gauge!("meshmail_auth_hash_queue_depth").decrement(1.0);
                        let started = Instant::now();
                        let ok = accounts::verify_password(&job.password, &job.phc);
                        metrics::histogram!("meshmail_auth_hash_seconds").record(started.elapsed().as_secs_f64());
                        let _ = job.done.send(ok);
                    }
                })
                .expect("spawn hashing thread");
        }
        Arc::new(Authenticator {
            db,
            jobs: tx,
            cache_key: rand::random(),
            cache: Mutex::new(HashMap::new()),
            limiter: FailureLimiter::new(limits),
        })
    }

    fn credential_key(&self, user: &str, password: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.cache_key).expect("any key length");
        mac.update(user.as_bytes());
        mac.update(&[0]);
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    pub async fn authenticate(&self, user: &str, password: &str, ip: IpAddr) -> AuthOutcome {
        let user = user.trim().to_ascii_lowercase();
        match self.limiter.admit(&user, ip) {
            Admission::Refused { by, retry_after } => {
                metrics::counter!("meshmail_auth_total", "result" => "rate_limited").increment(1);
                metrics::counter!("meshmail_auth_rate_limited_total", "by" => by.label()).increment(1);
                return AuthOutcome::RateLimited { retry_after };
            }
            Admission::Check => {}
        }
        let u = user.clone();
        let account = match self
            .db
            .read("auth_lookup", move |txn| {
                let u = u.clone();
                async move {
                    match accounts::get(&txn, &u).await {
                        Err(StorageError::Model(_)) => Ok(None), // Not an address: unknown user.
                        other => other,
                    }
                }
            })
            .await
        {
            Ok(a) => a,
            Err(e) => return AuthOutcome::Unavailable(e.to_string()),
        };
        let ok = match &account {
            // Hash anyway for unknown users, so timing does not tell which
            // usernames exist.
            None => self.verify(password, DUMMY_PHC).await.map(|_| false),
            Some(a) => {
                let key = self.credential_key(&user, password);
                let cached = self.cache.lock().expect("cache").get(&key).cloned();
                match cached {
                    Some((phc, at)) if phc == a.password_hash && at.elapsed() < CACHE_TTL => {
                        metrics::counter!("meshmail_auth_cache_hits_total").increment(1);
                        Ok(true)
                    }
                    _ => {
                        let ok = self.verify(password, &a.password_hash).await;
                        if let Ok(true) = ok {
                            let mut cache = self.cache.lock().expect("cache");
                            if cache.len() >= TRACKED_KEYS_MAX {
                                cache.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
                            }
                            cache.insert(key, (a.password_hash.clone(), Instant::now()));
                        }
                        ok
                    }
                }
            }
        };
        tracing::debug!(
            user = %user,
            account_found = account.is_some(),
            password_ok = matches!(ok, Ok(true)),
            "login checked"
        );
        match (ok, account) {
            (Ok(true), Some(a)) => {
                self.limiter.record_success(&user, ip);
                metrics::counter!("meshmail_auth_total", "result" => "ok").increment(1);
                AuthOutcome::Ok(a)
            }
            (Err(e), _) => AuthOutcome::Unavailable(e.to_string()),
            _ => {
                let (delay, by) = self.limiter.failure_delay(&user, ip);
                self.limiter.record_failure(&user, ip);
                metrics::counter!("meshmail_auth_total", "result" => "failed").increment(1);
                slow_down(delay, by).await;
                AuthOutcome::Failed
            }
        }
    }

    async fn verify(&self, password: &str, phc: &str) -> Result<bool, HashError> {
        let (done, wait) = oneshot::channel();
        let job = Job {
            phc: phc.to_string(),
            password: password.to_string(),
            done,
        };
        match self.jobs.try_send(job) {
            Ok(()) => metrics::gauge!("meshmail_auth_hash_queue_depth").increment(1.0),
            Err(TrySendError::Full(_)) => return Err(HashError::Overloaded),
            Err(TrySendError::Disconnected(_)) => return Err(HashError::Stopped),
        }
        wait.await.map_err(|_| HashError::ThreadFailed)
    }
}

/// Why a password could not be checked (the login is answered as
/// unavailable, never as a wrong password).
#[derive(Debug, thiserror::Error)]
enum HashError {
    #[error("authentication is overloaded")]
    Overloaded,
    #[error("hashing pool stopped")]
    Stopped,
    #[error("hashing thread failed")]
    ThreadFailed,
}

/// Holds back a failure answer (nothing when `delay` is zero), counted by
/// which failures set the delay.
async fn slow_down(delay: Duration, by: LimitedBy) {
    if delay.is_zero() {
        return;
    }
    metrics::counter!("meshmail_auth_delayed_total", "by" => by.label()).increment(1);
    metrics::histogram!("meshmail_auth_delay_seconds").record(delay.as_secs_f64());
    tokio::time::sleep(delay).await;
}

/// A valid argon2id hash of a random password, verified for unknown users.
const DUMMY_PHC: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$0rKJjJmXn7zlRTyxMvmaR9WZ5hcG1YyDhU0rFKZ3ZP0";
