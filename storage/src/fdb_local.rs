//! A FoundationDB cluster of our own (one process, or several on one
//! machine for the chaos runner's FDB faults), for `meshmail up --store
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
    bin: PathBuf,
    dir: PathBuf,
    listens: Vec<SocketAddr>,
    /// One per process; None while [`LocalFdb::kill`] has it down.
    children: Vec<Option<Child>>,
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
        Self::start_processes(bin, dir, &[listen]).await
    }

    /// A cluster of one process per address of `listens`, every one a
    /// coordinator. One process: `configure new single ssd`; three or more:
    /// `double`, each process in a zone of its own (one machine's processes
    /// are otherwise one zone, where `double` cannot keep two copies), so
    /// the cluster lives through the loss of any one process.
    pub async fn start_processes(bin: &Path, dir: &Path, listens: &[SocketAddr]) -> Result<LocalFdb> {
        let cluster_file = dir.join("fdb.cluster");
        let fresh = !cluster_file.exists();
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        if fresh {
            let coordinators: Vec<String> = listens.iter().map(SocketAddr::to_string).collect();
            std::fs::write(&cluster_file, format!("meshmail:local@{}\n", coordinators.join(",")))
                .map_err(io(format!("writing {}", cluster_file.display())))?;
        }
        let mut fdb = LocalFdb {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            listens: listens.to_vec(),
            children: Vec::new(),
            cluster_file,
        };
        for i in 0..listens.len() {
            let child = fdb.spawn(i)?;
            fdb.children.push(Some(child));
        }
        if fresh {
            let mode = if listens.len() >= 3 { "double" } else { "single" };
            fdb.cli(bin, &format!("configure new {mode} ssd"), "60").await?;
        }
        fdb.wait_available(bin).await?;
        Ok(fdb)
    }

    /// How many processes the cluster has.
    pub fn processes(&self) -> usize {
        self.listens.len()
    }

    /// Where process `i` keeps its files: `dir` itself for a one-process
    /// cluster (the layout `up` has always used), `dir/<i>` otherwise.
    fn process_dir(&self, i: usize) -> PathBuf {
        if self.listens.len() == 1 {
            self.dir.clone()
        } else {
            self.dir.join(i.to_string())
        }
    }

    fn spawn(&self, i: usize) -> Result<Child> {
        let own = self.process_dir(i);
        for sub in ["data", "logs"] {
            std::fs::create_dir_all(own.join(sub)).map_err(io(format!("creating {}", own.join(sub).display())))?;
        }
        let out = own.join("fdbserver.out");
        let log = std::fs::File::create(&out).map_err(io(format!("creating {}", out.display())))?;
        let log2 = log.try_clone().map_err(io("fdbserver.out"))?;
        let mut cmd = Command::new(self.bin.join("fdbserver"));
        cmd.arg("-p")
            .arg(self.listens[i].to_string())
            .arg("-C")
            .arg(&self.cluster_file)
            .arg("-d")
            .arg(own.join("data"))
            .arg("-L")
            .arg(own.join("logs"));
        if self.listens.len() > 1 {
            cmd.args([
                "--locality-zoneid",
                &format!("z{i}"),
                "--locality-machineid",
                &format!("m{i}"),
            ]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log2)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(io(format!("starting {}", self.bin.join("fdbserver").display())))?;
        eprintln!(
            "FoundationDB: fdbserver (pid {}) on {}, files in {}",
            child.id().unwrap_or(0),
            self.listens[i],
            own.display()
        );
        Ok(child)
    }

    /// SIGKILLs process `i` (a fault: no chance to flush anything).
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill().await;
        }
    }

    /// Starts process `i` again on its files, if it is down.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        if self.children[i].is_none() {
            let child = self.spawn(i)?;
            self.children[i] = Some(child);
        }
        Ok(())
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

    /// Stops the servers after the nodes: SIGTERM, then SIGKILL after 10 s.
    pub async fn stop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            if let Some(pid) = child.id() {
                // SAFETY: signalling our own child process.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
        }
        for child in self.children.iter_mut().flatten() {
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        self.children.iter_mut().for_each(|c| *c = None);
        eprintln!(
            "FoundationDB: stopped (its files stay in {})",
            self.cluster_file.with_file_name("").display()
        );
    }
}
