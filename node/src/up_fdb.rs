//! `meshmail up --store fdb`: a local FoundationDB cluster of `up`'s own,
//! the second way to try meshmail. With `fdbserver` (and `fdbcli` beside
//! it) on `PATH` or in `--fdb-bin DIR`, `up` starts one `fdbserver` on
//! loopback with its files in `<data-dir>/fdb/`, configures a new database
//! the first time (`configure new single ssd`), waits until it is
//! available, runs the nodes on it, and stops it after the nodes on Ctrl-C.
//! A second `up` on the same data directory finds the cluster's files and
//! starts the same database again: nothing is lost between runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// The local cluster's port: FDB's default, plus `up`'s port offset.
const FDB_PORT_BASE: u32 = 4500;
/// How long a fresh cluster may take to configure and become available.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// One fdbcli call's own timeout, seconds.
const FDBCLI_TIMEOUT_S: &str = "10";

/// A running local cluster; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct LocalFdb {
    child: Child,
    pub cluster_file: PathBuf,
}

/// The directory holding `fdbserver` and `fdbcli`: `--fdb-bin`, else the
/// first `PATH` entry that has `fdbserver`.
pub fn find_bin(flag: Option<&Path>) -> Option<PathBuf> {
    let has = |d: &Path| d.join("fdbserver").is_file() && d.join("fdbcli").is_file();
    if let Some(d) = flag {
        return has(d).then(|| d.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has(d))
}

impl LocalFdb {
    /// Starts (or restarts) the cluster in `<data_dir>/fdb` and waits until
    /// the database is available.
    pub async fn start(bin: &Path, data_dir: &Path, port_offset: u32) -> anyhow::Result<LocalFdb> {
        let dir = data_dir.join("fdb");
        let cluster_file = dir.join("fdb.cluster");
        let fresh = !cluster_file.exists();
        let port = FDB_PORT_BASE + port_offset;
        std::fs::create_dir_all(dir.join("data")).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::create_dir_all(dir.join("logs"))?;
        if fresh {
            std::fs::write(&cluster_file, format!("meshmail:up@127.0.0.1:{port}\n"))?;
        }
        let log = std::fs::File::create(dir.join("fdbserver.out"))?;
        let child = Command::new(bin.join("fdbserver"))
            .arg("-p")
            .arg(format!("127.0.0.1:{port}"))
            .arg("-C")
            .arg(&cluster_file)
            .arg("-d")
            .arg(dir.join("data"))
            .arg("-L")
            .arg(dir.join("logs"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.join("fdbserver").display()))?;
        eprintln!(
            "FoundationDB: fdbserver (pid {}) on 127.0.0.1:{port}, files in {}",
            child.id().unwrap_or(0),
            dir.display()
        );
        let fdb = LocalFdb { child, cluster_file };
        if fresh {
            fdb.cli(bin, "configure new single ssd", "60").await?;
        }
        fdb.wait_available(bin).await?;
        Ok(fdb)
    }

    async fn cli(&self, bin: &Path, command: &str, timeout_s: &str) -> anyhow::Result<String> {
        let out = Command::new(bin.join("fdbcli"))
            .arg("-C")
            .arg(&self.cluster_file)
            .arg("--exec")
            .arg(command)
            .arg("--timeout")
            .arg(timeout_s)
            .output()
            .await
            .with_context(|| format!("running {}", bin.join("fdbcli").display()))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "fdbcli {command:?} failed: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(text)
    }

    async fn wait_available(&self, bin: &Path) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            if let Ok(text) = self.cli(bin, "status minimal", FDBCLI_TIMEOUT_S).await
                && text.contains("is available")
            {
                eprintln!(
                    "FoundationDB: available after {:.1} s ({})",
                    started.elapsed().as_secs_f64(),
                    self.cluster_file.display()
                );
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "the local FoundationDB cluster was not available within {} s (see {})",
                    READY_TIMEOUT.as_secs(),
                    self.cluster_file.with_file_name("fdbserver.out").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops the server after the nodes: SIGTERM, then SIGKILL after 10 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        eprintln!(
            "FoundationDB: stopped (its files stay in {})",
            self.cluster_file.with_file_name("").display()
        );
    }
}
