//! A local mesh of `meshmail serve` processes sharing one data directory:
//! set up once (domain, accounts, cluster CA and node certificates), then
//! started, SIGKILLed, paused and restarted node by node. Ports are fixed
//! per node (a restarted node comes back on the same addresses, which is
//! what its peers redial), chosen from a base and checked free up front.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const DOMAIN: &str = "example.test";
pub const PASSWORD: &str = "pw";

/// The address of account `i` (0-based).
pub fn account(i: u32) -> String {
    format!("user{}@{DOMAIN}", i + 1)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeAddrs {
    pub name: String,
    pub smtp: String,
    /// Submission (AUTH; plaintext allowed from loopback).
    pub submission: String,
    pub imap: String,
    pub http: String,
    pub mesh: String,
}

#[derive(Debug)]
pub struct NodeSlot {
    pub addrs: NodeAddrs,
    child: Option<Child>,
    pub pid: Option<u32>,
    pub generation: Option<u64>,
    pub paused: bool,
    pub started_at: Option<Instant>,
    /// Where the node listens when that differs from where clients reach
    /// it (`addrs`): the chaos runner's namespaces put a relay in between.
    pub bind: Option<NodeAddrs>,
    /// Runs the node through this command (e.g. `ip netns exec NS`).
    pub launch_prefix: Vec<String>,
    /// A node of a mesh this process did not start: killed and restarted
    /// by the cluster file's shell commands (see `attached.rs`).
    pub attached: Option<crate::attached::AttachedNode>,
    /// An attached node answered as its current generation and was not killed since.
    attached_up: bool,
    /// The binary this node runs when not the mesh's (a rolling upgrade's
    /// previous build), and environment of its own (a pinned store
    /// format); both cleared when it is upgraded.
    pub bin: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

impl NodeSlot {
    pub fn is_running(&self) -> bool {
        self.child.is_some() || self.attached_up
    }
}

#[derive(Debug)]
pub struct LocalMesh {
    pub bin: PathBuf,
    pub data_dir: PathBuf,
    pub slots: Vec<NodeSlot>,
    /// Whether `serve` knows `--mesh`/`--seeds` (a single-node build does not).
    pub mesh_flags: bool,
    env: Vec<(String, String)>,
    log_dir: PathBuf,
    /// Appended to every node's `serve` command line (e.g. `--config F`).
    pub extra_args: Vec<String>,
    /// Each node runs on a data directory of its own, `DATA/hosts/NODE`,
    /// holding only the cluster CA's certificate and the node's own
    /// certificate and key (copied from `DATA/cluster`): separate hosts
    /// that share nothing on the filesystem (the store and blobs must then
    /// be network services, named in the config).
    pub separate_data_dirs: bool,
    /// Attach mode: readiness and command limits, and whether `data_dir` is real.
    attach: Option<AttachLimits>,
}

#[derive(Debug, Clone, Copy)]
struct AttachLimits {
    ready: Duration,
    command: Duration,
    has_data_dir: bool,
}

/// Runs an admin command on the store; `env` as the nodes get it (a
/// `MESHMAIL_CONFIG` naming another store reaches the commands too).
async fn run_admin(
    bin: &Path,
    data_dir: &Path,
    env: &[(String, String)],
    args: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut child = Command::new(bin)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("running {} {args:?}", bin.display()))?;
    if let Some(input) = stdin {
        let mut w = child.stdin.take().expect("piped");
        w.write_all(input.as_bytes()).await?;
        drop(w);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .context("admin command timed out")??;
    if !out.status.success() {
        bail!(
            "meshmail {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// True when `port` can be bound on loopback for both TCP and UDP (QUIC).
fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
}

/// Picks `nodes` blocks of 5 consecutive free ports (smtp, imap, http,
/// mesh, submission) from `base`, 10 apart, skipping blocks in use.
pub fn pick_ports(base: u16, nodes: usize) -> anyhow::Result<Vec<[u16; 5]>> {
    let mut out = Vec::new();
    let mut block = base;
    while out.len() < nodes {
        let ports = [block, block + 1, block + 2, block + 3, block + 4];
        if ports.iter().all(|&p| port_free(p)) {
            out.push(ports);
        }
        block = block.checked_add(10).context("ran out of ports")?;
        if block > base.saturating_add(2000) {
            bail!("no free ports from {base}");
        }
    }
    Ok(out)
}

/// The dev port of each of `meshmail up`'s TCP listeners for node-0 and
/// its mesh (QUIC, UDP) port; node i adds 10·i, and `--base-port-offset`
/// adds the offset to all of them (see `node/src/up.rs`).
const UP_TCP_PORTS: [u16; 10] = [2525, 2587, 2465, 2424, 1143, 1993, 1110, 1995, 4190, 8080];
const UP_MESH_PORT: u16 = 7400;

/// A `--base-port-offset` for `meshmail up --nodes N` at which every port
/// of every node is free now. Offsets lie in 7,000..11,800, so the ports
/// stay above the dev ports, below the chaos scenarios' bases (20,000 and
/// up) and below the kernel's ephemeral range (32,768 and up): a client
/// socket of a test running in parallel never takes one of them between
/// this probe and `up`'s bind. `seed` spreads parallel callers apart.
pub fn free_up_offset(nodes: u32, seed: u32) -> anyhow::Result<u32> {
    const LOW: u32 = 7_000;
    const SPAN: u32 = 4_800;
    let free = |offset: u32| {
        (0..nodes).all(|i| {
            let at = |base: u16| u16::try_from(u32::from(base) + 10 * i + offset).ok();
            UP_TCP_PORTS
                .iter()
                .all(|&p| at(p).is_some_and(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()))
                && at(UP_MESH_PORT).is_some_and(|p| std::net::UdpSocket::bind(("127.0.0.1", p)).is_ok())
        })
    };
    let step = 10 * nodes.max(1);
    let start = (seed % (SPAN / step)) * step;
    (0..SPAN / step)
        .map(|k| LOW + (start + k * step) % SPAN)
        .find(|&o| free(o))
        .context("no free port offset for meshmail up in 7,000..11,800")
}

impl LocalMesh {
    /// Creates the data directory's domain, `accounts` accounts and (when
    /// the binary has a mesh) the cluster CA with one certificate per node.
    pub async fn setup(
        bin: &Path,
        data_dir: &Path,
        nodes: usize,
        accounts: u32,
        base_port: u16,
        env: Vec<(String, String)>,
        log_dir: &Path,
    ) -> anyhow::Result<LocalMesh> {
        std::fs::create_dir_all(data_dir)?;
        std::fs::create_dir_all(log_dir)?;
        let help = Command::new(bin).args(["serve", "--help"]).output().await?;
        let mesh_flags = String::from_utf8_lossy(&help.stdout).contains("--mesh");
        if nodes > 1 && !mesh_flags {
            bail!(
                "{} has no --mesh flag: this build runs one node per data directory, so run 1 node",
                bin.display()
            );
        }
        run_admin(bin, data_dir, &env, &["domain", "add", DOMAIN], None).await?;
        for i in 0..accounts {
            let pw = format!("{PASSWORD}\n");
            run_admin(
                bin,
                data_dir,
                &env,
                &["account", "add", &account(i), "--password-stdin"],
                Some(&pw),
            )
            .await?;
        }
        let names: Vec<String> = (0..nodes).map(|i| format!("node-{i}")).collect();
        if mesh_flags {
            run_admin(bin, data_dir, &env, &["cluster", "init"], None).await?;
            for n in &names {
                run_admin(bin, data_dir, &env, &["cluster", "cert", n], None).await?;
            }
        }
        let ports = pick_ports(base_port, nodes)?;
        let slots = names
            .into_iter()
            .zip(ports)
            .map(|(name, p)| NodeSlot {
                addrs: NodeAddrs {
                    name,
                    smtp: format!("127.0.0.1:{}", p[0]),
                    submission: format!("127.0.0.1:{}", p[4]),
                    imap: format!("127.0.0.1:{}", p[1]),
                    http: format!("127.0.0.1:{}", p[2]),
                    mesh: format!("127.0.0.1:{}", p[3]),
                },
                child: None,
                pid: None,
                generation: None,
                paused: false,
                started_at: None,
                bind: None,
                launch_prefix: Vec::new(),
                attached: None,
                attached_up: false,
                bin: None,
                env: Vec::new(),
            })
            .collect();
        Ok(LocalMesh {
            bin: bin.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            slots,
            mesh_flags,
            env,
            log_dir: log_dir.to_path_buf(),
            extra_args: Vec::new(),
            separate_data_dirs: false,
            attach: None,
        })
    }

    /// A mesh someone else started (the chaos runner's `--attach`). With
    /// the cluster file's `data_dir`, the load's domain and accounts are
    /// created there (those that exist already are left alone).
    pub async fn attach(
        bin: &Path,
        cluster: &crate::attached::ClusterFile,
        accounts: u32,
        log_dir: &Path,
    ) -> anyhow::Result<LocalMesh> {
        std::fs::create_dir_all(log_dir)?;
        if let Some(dir) = &cluster.data_dir {
            // Refusals here are "already exists" on a reused target; a
            // missing account shows as lost mail, never silently.
            let mut refused = run_admin(bin, dir, &[], &["domain", "add", DOMAIN], None).await.err();
            for i in 0..accounts {
                let pw = format!("{PASSWORD}\n");
                let args = ["account", "add", &account(i), "--password-stdin"];
                if let Err(e) = run_admin(bin, dir, &[], &args, Some(&pw)).await {
                    refused.get_or_insert(e);
                }
            }
            if let Some(e) = refused {
                eprintln!("attach: some of the domain and accounts were not created (existing ones are kept): {e:#}");
            }
        }
        let slots = cluster
            .node
            .iter()
            .map(|n| NodeSlot {
                addrs: NodeAddrs {
                    name: n.name.clone(),
                    smtp: n.smtp.clone(),
                    submission: n.submission.clone(),
                    imap: n.imap.clone(),
                    http: n.http.clone(),
                    mesh: String::new(),
                },
                child: None,
                pid: None,
                generation: None,
                paused: false,
                started_at: None,
                bind: None,
                launch_prefix: Vec::new(),
                attached: Some(n.clone()),
                attached_up: false,
                bin: None,
                env: Vec::new(),
            })
            .collect();
        Ok(LocalMesh {
            bin: bin.to_path_buf(),
            data_dir: cluster.data_dir.clone().unwrap_or_default(),
            slots,
            mesh_flags: cluster.node.len() > 1,
            env: Vec::new(),
            log_dir: log_dir.to_path_buf(),
            extra_args: Vec::new(),
            separate_data_dirs: false,
            attach: Some(AttachLimits {
                ready: Duration::from_secs_f64(cluster.ready_timeout_s),
                command: Duration::from_secs_f64(cluster.command_timeout_s),
                has_data_dir: cluster.data_dir.is_some(),
            }),
        })
    }

    /// Whether this mesh was attached to rather than started here.
    pub fn is_attached(&self) -> bool {
        self.attach.is_some()
    }

    /// Attach mode's start: the first time, waits for the node to answer;
    /// after a kill, runs its restart command (if any) and waits for a
    /// higher generation than the killed one.
    async fn start_attached(&mut self, i: usize, limits: AttachLimits) -> anyhow::Result<u64> {
        let slot = &self.slots[i];
        let node = slot.attached.clone().context("not an attached node")?;
        if slot.attached_up {
            bail!("{} is already running", node.name);
        }
        let before = slot.generation;
        if before.is_some()
            && let Some(cmd) = &node.restart
        {
            crate::attached::run_shell(cmd, limits.command).await?;
        }
        let generation = crate::attached::wait_up(&node.name, &node.http, before, limits.ready).await?;
        let slot = &mut self.slots[i];
        slot.attached_up = true;
        slot.generation = Some(generation);
        slot.started_at = Some(Instant::now());
        Ok(generation)
    }

    /// `meshmail serve` for node `i` at `a`, its seeds the other nodes,
    /// its stderr appended to its log.
    fn serve_command(&self, i: usize, a: &NodeAddrs) -> anyhow::Result<Command> {
        let seeds: Vec<String> = self
            .slots
            .iter()
            .filter(|s| s.addrs.name != a.name)
            .map(|s| format!("{}@{}", s.addrs.name, s.addrs.mesh))
            .collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_dir.join(format!("{}.log", a.name)))?;
        let prefix = &self.slots[i].launch_prefix;
        let bin = self.slots[i].bin.as_ref().unwrap_or(&self.bin);
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.arg("--data-dir")
            .arg(self.node_data_dir(&a.name)?)
            .args(["serve", "--node-name", &a.name, "--smtp", &a.smtp, "--imap", &a.imap])
            .args(["--http", &a.http, "--submission", &a.submission, "--submissions", "off"])
            .args(["--lmtp", "off", "--imaps", "off", "--allow-plaintext-auth-on-loopback"]);
        if self.mesh_flags {
            cmd.args(["--mesh", &a.mesh]);
            if !seeds.is_empty() {
                cmd.args(["--seeds", &seeds.join(",")]);
            }
        }
        cmd.args(&self.extra_args);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(self.slots[i].env.iter().map(|(k, v)| (k, v)))
            .env(
                "MESHMAIL_LOG",
                std::env::var("MESHMAIL_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        Ok(cmd)
    }

    /// Attach mode's kill: the node's kill command, then its HTTP silent
    /// (or answering as a successor).
    async fn kill_attached(&mut self, i: usize, limits: AttachLimits) -> anyhow::Result<()> {
        let slot = &self.slots[i];
        let node = slot.attached.clone().context("not an attached node")?;
        let Some(cmd) = &node.kill else {
            bail!("{} has no kill command in the cluster file", node.name);
        };
        crate::attached::run_shell(cmd, limits.command).await?;
        if let Some(g) = slot.generation {
            crate::attached::wait_gone(&node.name, &node.http, g, limits.ready).await?;
        }
        let slot = &mut self.slots[i];
        slot.attached_up = false;
        slot.started_at = None;
        Ok(())
    }

    pub fn addrs(&self) -> Vec<NodeAddrs> {
        self.slots.iter().map(|s| s.addrs.clone()).collect()
    }

    /// Drops `key` from the environment of every command from now on (the
    /// admin commands and every node's `serve`).
    pub fn remove_env(&mut self, key: &str) {
        self.env.retain(|(k, _)| k != key);
    }

    /// Starts node `i` and waits for its ready line; returns its generation.
    pub async fn start(&mut self, i: usize) -> anyhow::Result<u64> {
        if let Some(limits) = self.attach {
            return self.start_attached(i, limits).await;
        }
        if self.slots[i].child.is_some() {
            bail!("{} is already running", self.slots[i].addrs.name);
        }
        let a = self.slots[i]
            .bind
            .clone()
            .unwrap_or_else(|| self.slots[i].addrs.clone());
        let mut cmd = self.serve_command(i, &a)?;
        let mut child = cmd.spawn().context("starting meshmail serve")?;
        let pid = child.id();
        let generation = wait_ready(&mut child, &a.name).await?;
        let slot = &mut self.slots[i];
        slot.child = Some(child);
        slot.pid = pid;
        slot.generation = Some(generation);
        slot.paused = false;
        slot.started_at = Some(Instant::now());
        Ok(generation)
    }

    fn signal(&self, i: usize, sig: i32) -> anyhow::Result<()> {
        let pid = self.slots[i].pid.context("not running")?;
        // SAFETY: kill(2) on a child we spawned and have not reaped yet.
        if unsafe { libc::kill(pid as i32, sig) } != 0 {
            bail!("kill({pid}, {sig}): {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// SIGKILL, then reap. A paused node dies too (SIGKILL needs no CONT).
    pub async fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(limits) = self.attach {
            return self.kill_attached(i, limits).await;
        }
        let Some(mut child) = self.slots[i].child.take() else {
            bail!("{} is not running", self.slots[i].addrs.name);
        };
        let _ = child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        let slot = &mut self.slots[i];
        slot.pid = None;
        slot.paused = false;
        slot.started_at = None;
        Ok(())
    }

    pub fn pause(&mut self, i: usize) -> anyhow::Result<()> {
        self.signal(i, libc::SIGSTOP)?;
        self.slots[i].paused = true;
        Ok(())
    }

    pub fn resume(&mut self, i: usize) -> anyhow::Result<()> {
        self.signal(i, libc::SIGCONT)?;
        self.slots[i].paused = false;
        Ok(())
    }

    /// Whether node `i`'s process has exited on its own (a crash), reaping it.
    pub fn crashed(&mut self, i: usize) -> Option<String> {
        let child = self.slots[i].child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.slots[i].child = None;
                self.slots[i].pid = None;
                Some(format!("{status}"))
            }
            _ => None,
        }
    }

    /// Stops every node this process started; an attached mesh is left
    /// running (it is not ours to stop).
    pub async fn stop_all(&mut self) {
        if self.attach.is_some() {
            return;
        }
        for i in 0..self.slots.len() {
            if self.slots[i].paused {
                let _ = self.resume(i);
            }
            if self.slots[i].child.is_some() {
                let _ = self.kill(i).await;
            }
        }
    }

    /// The data directory node `name` runs on: the shared one, or with
    /// [`LocalMesh::separate_data_dirs`] its own, made on first use with
    /// the CA certificate and the node's certificate and key in
    /// `cluster/` (what an operator copies to a new host).
    fn node_data_dir(&self, name: &str) -> anyhow::Result<PathBuf> {
        if !self.separate_data_dirs {
            return Ok(self.data_dir.clone());
        }
        let dir = self.data_dir.join("hosts").join(name);
        let certs = dir.join("cluster");
        std::fs::create_dir_all(&certs).with_context(|| format!("creating {}", certs.display()))?;
        for file in ["ca.pem".to_string(), format!("{name}.pem"), format!("{name}.key")] {
            let from = self.data_dir.join("cluster").join(&file);
            if self.mesh_flags && !certs.join(&file).exists() {
                std::fs::copy(&from, certs.join(&file)).with_context(|| format!("copying {}", from.display()))?;
            }
        }
        Ok(dir)
    }

    /// `meshmail verify ledger`: its exit code and output.
    pub async fn verify_ledger(&self) -> anyhow::Result<(i32, String)> {
        if self.attach.is_some_and(|a| !a.has_data_dir) {
            return Ok((0, "not run: the cluster file gives no data_dir\n".into()));
        }
        let out = tokio::time::timeout(
            Duration::from_secs(600),
            Command::new(&self.bin)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .arg("--data-dir")
                .arg(&self.data_dir)
                .args(["verify", "ledger"])
                .kill_on_drop(true)
                .output(),
        )
        .await
        .context("verify ledger timed out")??;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((out.status.code().unwrap_or(-1), text))
    }
}

/// Resident set size of a process, KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Open file descriptors of a process.
pub fn fd_count(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Finds the `meshmail` binary: explicit, else next to this executable (or
/// one directory up, where cargo puts binaries when the caller is a test).
pub fn find_meshmail(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join("meshmail");
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!(
        "cannot find the meshmail binary near {}: build it (cargo build -p meshmail-node) or pass --meshmail",
        exe.display()
    )
}

/// Waits for the node's ready line (killing it when 60 s pass without
/// one) and returns the generation it names; its stdout is drained from
/// then on so a chatty node never blocks on a full pipe.
async fn wait_ready(child: &mut Child, name: &str) -> anyhow::Result<u64> {
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(l) = lines.next_line().await? {
            if l.starts_with("meshmail ready") {
                return anyhow::Ok(l);
            }
        }
        bail!("{name} exited before it was ready (see its log)")
    })
    .await;
    let ready = match ready {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let _ = child.start_kill();
            bail!("{name} not ready within 60 s");
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(ready
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("generation="))
        .and_then(|g| g.parse().ok())
        .unwrap_or(0))
}
