//! A one-process FoundationDB cluster of our own, for `meshmail up --store
//! fdb` (on loopback, files in `<data-dir>/fdb/`) and the chaos runner's
//! separate-hosts scenario (on the bridge address its network namespaces
//! reach). Not for production, where FDB is run by its own tooling.
//!
//! With `fdbserver` and `fdbcli` in one directory ([`find_bin`]),
//! [`LocalFdb::start`] starts one `fdbserver` listening on the given
//! address with its files in the given directory, configures a new
//! database the first time (`configure new single ssd`) and waits until it
//! is available. Started again on the same directory, it finds the
//! cluster file and serves the same database: nothing is lost between runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use tokio::process::{Child, Command};

/// Why a local cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LocalFdbError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("fdbcli {command:?} failed: {output}")]
    Cli { command: String, output: String },
    #[error("the local FoundationDB cluster was not available within {secs} s (see {log})")]
    NotAvailable { secs: u64, log: PathBuf },
}

/// Attaches what was being done to an I/O error.
fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> LocalFdbError {
    move |source| LocalFdbError::Io {
        what: what.to_string(),
        source,
    }
}

type Result<T> = std::result::Result<T, LocalFdbError>;

/// How long a fresh cluster may take to configure and become available.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// One fdbcli call's own timeout, seconds.
const FDBCLI_TIMEOUT_S: &str = "10";

/// A running local cluster; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct LocalFdb {
    child: Child,
    pub cluster_file: PathBuf,
}

/// The directory holding `fdbserver` and `fdbcli`: `flag` (a `--fdb-bin`
/// option), else the first `PATH` entry that has `fdbserver`.
pub fn find_bin(flag: Option<&Path>) -> Option<PathBuf> {
    let has = |d: &Path| d.join("fdbserver").is_file() && d.join("fdbcli").is_file();
    if let Some(d) = flag {
        return has(d).then(|| d.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has(d))
}

impl LocalFdb {
    /// Starts (or restarts) the cluster whose files are in `dir`, its one
    /// process listening on `listen`, and waits until the database is
    /// available. The cluster file is `dir/fdb.cluster`.
    pub async fn start(bin: &Path, dir: &Path, listen: SocketAddr) -> Result<LocalFdb> {
        let cluster_file = dir.join("fdb.cluster");
        let fresh = !cluster_file.exists();
        for sub in ["data", "logs"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(io(format!("creating {}", dir.join(sub).display())))?;
        }
        if fresh {
            std::fs::write(&cluster_file, format!("meshmail:local@{listen}\n"))
                .map_err(io(format!("writing {}", cluster_file.display())))?;
        }
        let out = dir.join("fdbserver.out");
        let log = std::fs::File::create(&out).map_err(io(format!("creating {}", out.display())))?;
        let log2 = log.try_clone().map_err(io("fdbserver.out"))?;
        let child = Command::new(bin.join("fdbserver"))
            .arg("-p")
            .arg(listen.to_string())
            .arg("-C")
            .arg(&cluster_file)
            .arg("-d")
            .arg(dir.join("data"))
            .arg("-L")
            .arg(dir.join("logs"))
            .stdin(Stdio::null())
            .stdout(log2)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(io(format!("starting {}", bin.join("fdbserver").display())))?;
        eprintln!(
            "FoundationDB: fdbserver (pid {}) on {listen}, files in {}",
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

    async fn cli(&self, bin: &Path, command: &str, timeout_s: &str) -> Result<String> {
        let out = Command::new(bin.join("fdbcli"))
            .arg("-C")
            .arg(&self.cluster_file)
            .arg("--exec")
            .arg(command)
            .arg("--timeout")
            .arg(timeout_s)
            .output()
            .await
            .map_err(io(format!("running {}", bin.join("fdbcli").display())))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(LocalFdbError::Cli {
                command: command.into(),
                output: format!("{text}{}", String::from_utf8_lossy(&out.stderr)),
            });
        }
        Ok(text)
    }

    async fn wait_available(&self, bin: &Path) -> Result<()> {
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
                return Err(LocalFdbError::NotAvailable {
                    secs: READY_TIMEOUT.as_secs(),
                    log: self.cluster_file.with_file_name("fdbserver.out"),
                });
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
