//! A store outage for SQLite: another process holds the store file's
//! write lock (`BEGIN EXCLUSIVE`) for N seconds, so every write of every
//! node waits out its busy timeout and fails. A slow store is the same
//! lock taken and released in turns (`slow`). Expected: SMTP answers 4xx
//! meanwhile (counted: the load's refusals during the outage), never 250
//! for what it did not keep, and every 250 is read back after heal (the
//! golden check). For FoundationDB the equivalent is a scenario step that
//! stops the cluster's processes (not automated here).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The lock holder; the lock ends when the process exits (`end` or drop).
pub struct StoreLock {
    child: Child,
}

/// Takes the write lock on `db` from a separate python3 process for at
/// most `seconds` (it exits on its own then, even if the runner dies).
pub async fn lock(db: &Path, seconds: f64) -> anyhow::Result<StoreLock> {
    hold(db, seconds, None).await
}

/// A slow store: the write lock is taken for `hold_ms`, released for as
/// long, again and again for at most `seconds`, so every write waits up to
/// `hold_ms` (SQLite's busy handler rides it out) without any failing: a
/// store that answers late, without FUSE or LD_PRELOAD tricks.
pub async fn slow(db: &Path, seconds: f64, hold_ms: f64) -> anyhow::Result<StoreLock> {
    hold(db, seconds, Some(hold_ms)).await
}

async fn hold(db: &Path, seconds: f64, cycle_ms: Option<f64>) -> anyhow::Result<StoreLock> {
    let script = "import sqlite3,sys,time\n\
c=sqlite3.connect(sys.argv[1],isolation_level=None,timeout=30)\n\
end=time.monotonic()+float(sys.argv[2])\n\
hold=float(sys.argv[3])/1000 if len(sys.argv)>3 else None\n\
c.execute('BEGIN EXCLUSIVE')\n\
print('locked',flush=True)\n\
while hold is not None and time.monotonic()+2*hold<end: time.sleep(hold); c.execute('ROLLBACK'); time.sleep(hold); c.execute('BEGIN EXCLUSIVE')\n\
time.sleep(max(0.0,end-time.monotonic()))\n\
c.execute('ROLLBACK')\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg(format!("{seconds}"))
        .args(cycle_ms.map(|ms| format!("{ms}")))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting python3 to lock the store")?;
    let mut out = BufReader::new(child.stdout.take().context("stdout")?).lines();
    match tokio::time::timeout(Duration::from_secs(40), out.next_line()).await {
        Ok(Ok(Some(l))) if l == "locked" => Ok(StoreLock { child }),
        other => bail!("could not lock {}: {other:?}", db.display()),
    }
}

impl StoreLock {
    pub async fn end(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
