//! A store outage for SQLite: another process holds the store file's
//! write lock (`BEGIN EXCLUSIVE`) for N seconds, so every write of every
//! node waits out its busy timeout and fails. Expected: SMTP answers 4xx
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
    let script = "import sqlite3,sys,time\n\
c=sqlite3.connect(sys.argv[1],isolation_level=None,timeout=30)\n\
c.execute('BEGIN EXCLUSIVE')\n\
print('locked',flush=True)\n\
time.sleep(float(sys.argv[2]))\n\
c.execute('ROLLBACK')\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg(format!("{seconds}"))
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
