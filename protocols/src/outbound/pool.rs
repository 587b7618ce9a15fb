//! Idle SMTP connections kept for the next scan's messages to the same
//! destination (as Postfix's connection cache does): a delivery task takes
//! one before it connects and gives it back when its messages are done.
//! A connection is reused only under the same TLS policy it was opened
//! with (the key), starts its next transaction with RSET (a peer that
//! dropped it is found there), and is closed after `idle_timeout` unused.
//!
//! The per-destination cap still holds for open connections: a task opens
//! one only when the pool has none for its key, so every other open
//! connection of that destination is then in use by another task.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::client::SmtpClient;

/// Idle connections kept per key, and keys, at most.
const PER_KEY_MAX: usize = 20;
const KEYS_MAX: usize = 1000;

#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<String, Vec<(SmtpClient, Instant)>>>,
}

impl Pool {
    /// An idle connection for `key` that has not outlived `idle_timeout`.
    pub fn take(&self, key: &str, idle_timeout: Duration) -> Option<SmtpClient> {
        let mut idle = self.idle.lock().expect("pool");
        let list = idle.get_mut(key)?;
        while let Some((c, since)) = list.pop() {
            if since.elapsed() < idle_timeout {
                return Some(c);
            }
            close(c);
        }
        idle.remove(key);
        None
    }

    /// Keeps `c` for the next task of `key`, or closes it when the pool is
    /// full.
    pub fn put(&self, key: &str, c: SmtpClient) {
        let mut idle = self.idle.lock().expect("pool");
        if idle.len() >= KEYS_MAX && !idle.contains_key(key) {
            drop(idle);
            close(c);
            return;
        }
        let list = idle.entry(key.to_string()).or_default();
        if list.len() >= PER_KEY_MAX {
            drop(idle);
            close(c);
            return;
        }
        list.push((c, Instant::now()));
    }

    /// Closes the connections idle for `idle_timeout` or longer (each scan).
    pub fn sweep(&self, idle_timeout: Duration) {
        let mut idle = self.idle.lock().expect("pool");
        let mut expired = Vec::new();
        for list in idle.values_mut() {
            let (keep, old): (Vec<_>, Vec<_>) = list.drain(..).partition(|(_, since)| since.elapsed() < idle_timeout);
            *list = keep;
            expired.extend(old.into_iter().map(|(c, _)| c));
        }
        idle.retain(|_, l| !l.is_empty());
        drop(idle);
        for c in expired {
            close(c);
        }
        metrics::gauge!("meshmail_outbound_idle_connections").set(self.len() as f64);
    }

    pub fn len(&self) -> usize {
        self.idle.lock().expect("pool").values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// QUIT in the background (a close never holds up a delivery or the lock).
fn close(c: SmtpClient) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(c.quit());
    }
}
