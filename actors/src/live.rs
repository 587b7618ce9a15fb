//! Live-actor accounting: every actor holds a [`LiveGuard`] in its state, so
//! `meshmail_actors_live{kind}` goes up when it starts and down when its
//! state is dropped — on a clean stop *and* on a panic. The chaos runner
//! compares it with sessions + shards + the fixed set to find leaks.

use std::collections::BTreeMap;
use std::sync::Mutex;

static LIVE: Mutex<BTreeMap<&'static str, i64>> = Mutex::new(BTreeMap::new());

/// Counts one live actor of `kind` for as long as it exists.
#[derive(Debug)]
pub struct LiveGuard {
    kind: &'static str,
}

impl LiveGuard {
    pub fn new(kind: &'static str) -> Self {
        let n = {
            let mut live = LIVE.lock().expect("live poisoned");
            let n = live.entry(kind).or_insert(0);
            *n += 1;
            *n
        };
        metrics::gauge!("meshmail_actors_live", "kind" => kind).set(n as f64);
        LiveGuard { kind }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let n = {
            let mut live = LIVE.lock().expect("live poisoned");
            let n = live.entry(self.kind).or_insert(0);
            *n -= 1;
            *n
        };
        metrics::gauge!("meshmail_actors_live", "kind" => self.kind).set(n as f64);
    }
}

/// Live actors by kind, for `/status` and tests.
pub fn live_actors() -> BTreeMap<&'static str, i64> {
    LIVE.lock().expect("live poisoned").clone()
}
