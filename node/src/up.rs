//! `meshmail up`: a local mesh of N node processes sharing one data
//! directory (the embedded store and blob directory), the way a newcomer
//! meets meshmail. It prepares what the nodes need (cluster CA and node
//! certificates, and with `--demo` a domain and an account), starts the
//! nodes on the dev ports plus 10·i, prints their endpoints, restarts a node
//! that dies (after a delay that grows while it keeps dying right after
//! start, see [`crate::up_restart`]), and stops them all on Ctrl-C or SIGTERM.
//! Each running node's pid is in `DATA/run/NODE.pid` (rewritten at every
//! restart, removed when the node exits), so tools outside `up` (the chaos
//! runner's attach mode: `kill -KILL $(cat DATA/run/node-1.pid)`) can reach it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use meshmail_mesh::{ClusterCa, NodeId};
use meshmail_storage::model::{accounts, domains};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::cli::UpArgs;
use crate::config::Config;
use crate::up_restart::{CrashLoop, RestartPolicy};
use meshmail_storage::fdb_local::{self, LocalFdb};
use meshmail_storage::open::KvConfig;

pub const DEMO_DOMAIN: &str = "example.test";
pub const DEMO_ACCOUNT: &str = "demo@example.test";
pub const DEMO_PASSWORD: &str = "demo";

/// The dev default port of each listener; node i adds 10·i.
const BASE_PORTS: &[(&str, u16)] = &[
    ("smtp", 2525),
    ("submission", 2587),
    ("submissions", 2465),
    ("lmtp", 2424),
    ("imap", 1143),
    ("imaps", 1993),
    ("pop3", 1110),
    ("pop3s", 1995),
    ("managesieve", 4190),
    ("http", 8080),
    ("mesh", 7400),
];

struct NodeSpec {
    name: String,
    ports: Vec<(&'static str, u16)>,
}

impl NodeSpec {
    fn port(&self, listener: &str) -> u16 {
        self.ports.iter().find(|(n, _)| *n == listener).map_or(0, |(_, p)| *p)
    }

    fn seed(&self) -> String {
        format!("{}@127.0.0.1:{}", self.name, self.port("mesh"))
    }
}

fn plan(args: &UpArgs) -> anyhow::Result<Vec<NodeSpec>> {
    (0..args.nodes)
        .map(|i| {
            let ports = BASE_PORTS
                .iter()
                .map(|(n, base)| {
                    let p = u32::from(*base) + 10 * i + args.base_port_offset;
                    u16::try_from(p)
                        .map(|p| (*n, p))
                        .map_err(|_| anyhow::anyhow!("port {p} for node-{i} {n} is out of range"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(NodeSpec {
                name: format!("node-{i}"),
                ports,
            })
        })
        .collect()
}

/// Creates what is missing: the cluster CA, the node certificates, and
/// (with `--demo`) the demo domain and account. Never overwrites.
async fn prepare(cfg: &Config, nodes: &[NodeSpec], demo: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(&cfg.data_dir).with_context(|| format!("creating {}", cfg.data_dir.display()))?;
    let dir = cfg
        .mesh
        .cluster_dir
        .clone()
        .unwrap_or_else(|| cfg.data_dir.join("cluster"));
    let ca = if dir.join(meshmail_mesh::ca::CA_CERT_FILE).exists() {
        ClusterCa::load(&dir)?
    } else {
        println!("creating the cluster CA in {}", dir.display());
        ClusterCa::init(&dir)?
    };
    for n in nodes {
        if !dir.join(format!("{}.pem", n.name)).exists() {
            ca.issue_node_cert(&NodeId::new(n.name.clone())?, &dir)?;
        }
    }
    if demo {
        let db = crate::store::open(cfg).await?;
        db.run("up_demo_domain", |txn| async move {
            match domains::get(&txn, DEMO_DOMAIN).await? {
                Some(d) => Ok(d),
                None => domains::add(&txn, DEMO_DOMAIN).await,
            }
        })
        .await?;
        let exists = db
            .read("up_demo_account", |txn| async move {
                accounts::get(&txn, DEMO_ACCOUNT).await
            })
            .await?
            .is_some();
        if !exists {
            let hash = tokio::task::spawn_blocking(|| accounts::hash_password(DEMO_PASSWORD)).await??;
            db.run("up_demo_account_add", |txn| {
                let hash = hash.clone();
                async move { accounts::add(&txn, DEMO_ACCOUNT, &hash).await }
            })
            .await?;
        }
    }
    Ok(())
}

fn spawn_node(
    exe: &Path,
    cfg_path: Option<&Path>,
    cfg: &Config,
    spec: &NodeSpec,
    all: &[NodeSpec],
) -> anyhow::Result<Child> {
    let seeds: Vec<String> = all.iter().filter(|n| n.name != spec.name).map(NodeSpec::seed).collect();
    let mut cmd = Command::new(exe);
    if let Some(p) = cfg_path {
        cmd.arg("--config").arg(p);
    }
    cmd.arg("--data-dir").arg(&cfg.data_dir);
    // The store `up` resolved (its own FDB cluster, or one named by a flag
    // the config file does not hold) goes to every node the same way.
    if let KvConfig::Fdb {
        cluster_file,
        key_prefix,
    } = cfg.kv()
    {
        match cluster_file {
            Some(f) => cmd.arg("--store").arg(format!("fdb:{}", f.display())),
            None => cmd.arg("--store").arg("fdb"),
        };
        if !key_prefix.is_empty() {
            cmd.arg("--fdb-key-prefix").arg(key_prefix);
        }
    }
    cmd.arg("serve").arg("--node-name").arg(&spec.name);
    for (listener, port) in &spec.ports {
        cmd.arg(format!("--{listener}")).arg(format!("127.0.0.1:{port}"));
    }
    if !seeds.is_empty() {
        cmd.arg("--seeds").arg(seeds.join(","));
    }
    // Local mesh: the demo account logs in without TLS from loopback only.
    cmd.arg("--allow-plaintext-auth-on-loopback");
    let log_dir = cfg.data_dir.join("logs");
    std::fs::create_dir_all(&log_dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_dir.join(format!("{}.log", spec.name)))?;
    cmd.stdout(Stdio::piped()).stderr(log).kill_on_drop(true);
    let child = cmd.spawn().with_context(|| format!("starting {}", spec.name))?;
    write_pid(cfg, &spec.name, child.id());
    Ok(child)
}

/// `DATA/run/NODE.pid`.
fn pid_file(cfg: &Config, name: &str) -> PathBuf {
    cfg.data_dir.join("run").join(format!("{name}.pid"))
}

/// Records a started node's pid (best effort: a tool reading it is a
/// convenience, never a reason for `up` to fail). Written to a temporary
/// name and renamed, so a reader never sees half a number.
fn write_pid(cfg: &Config, name: &str, pid: Option<u32>) {
    let (Some(pid), path) = (pid, pid_file(cfg, name)) else {
        return;
    };
    let tmp = path.with_extension("pid.tmp");
    let written = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
        .and_then(|_| std::fs::write(&tmp, format!("{pid}\n")))
        .and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        eprintln!("could not write {}: {e}", path.display());
    }
}

/// Waits for the node's ready line; then keeps draining its stdout.
async fn wait_ready(name: &str, child: &mut Child) -> anyhow::Result<String> {
    let out = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(out).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if line.starts_with("meshmail ready:") {
                return Ok::<_, std::io::Error>(Some(line));
            }
        }
        Ok(None)
    })
    .await;
    let line = match ready {
        Ok(Ok(Some(line))) => line,
        Ok(Ok(None)) => bail!("{name} exited before it was ready"),
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => bail!("{name} was not ready within 60 s"),
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(line)
}

pub async fn run(cfg: &Config, cfg_path: Option<&Path>, args: UpArgs) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 9 {
        bail!("--nodes must be between 1 and 9 (ports are spaced by 10)");
    }
    let nodes = plan(&args)?;
    let (cfg, fdb) = local_store(cfg, &args).await?;
    let cfg = &cfg;
    let result = run_nodes(cfg, cfg_path, &args, &nodes).await;
    if let Some(mut fdb) = fdb {
        fdb.stop().await;
    }
    result
}

/// The local cluster's port: FDB's default, plus `up`'s port offset.
const FDB_PORT_BASE: u32 = 4500;

/// With `--store fdb`, no cluster file and `fdbserver` at hand: the local
/// cluster `up` runs itself (files in `<data-dir>/fdb/`), and the config
/// pointing at it. Stopped after the nodes on Ctrl-C; a second `up` on the
/// same data directory serves the same database again.
async fn local_store(cfg: &Config, args: &UpArgs) -> anyhow::Result<(Config, Option<LocalFdb>)> {
    let mut cfg = cfg.clone();
    let KvConfig::Fdb {
        cluster_file: None,
        key_prefix,
    } = cfg.kv()
    else {
        return Ok((cfg, None));
    };
    let Some(bin) = fdb_local::find_bin(args.fdb_bin.as_deref()) else {
        if let Some(d) = &args.fdb_bin {
            bail!("--fdb-bin {}: no fdbserver and fdbcli there", d.display());
        }
        eprintln!("FoundationDB: no fdbserver on PATH; the nodes use the client's default cluster file");
        return Ok((cfg, None));
    };
    std::fs::create_dir_all(&cfg.data_dir).with_context(|| format!("creating {}", cfg.data_dir.display()))?;
    // FDB's default port plus `up`'s offset: two `up`s side by side
    // (offsets apart) get two clusters.
    let port = u16::try_from(FDB_PORT_BASE + args.base_port_offset).context("--base-port-offset too large")?;
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let fdb = LocalFdb::start(&bin, &cfg.data_dir.join("fdb"), listen).await?;
    cfg.store = Some(KvConfig::Fdb {
        cluster_file: Some(fdb.cluster_file.clone()),
        key_prefix,
    });
    Ok((cfg, Some(fdb)))
}

async fn run_nodes(cfg: &Config, cfg_path: Option<&Path>, args: &UpArgs, nodes: &[NodeSpec]) -> anyhow::Result<()> {
    prepare(cfg, nodes, args.demo).await?;
    let exe: PathBuf = std::env::current_exe()?;
    let mut children = Vec::new();
    for spec in nodes {
        children.push(spawn_node(&exe, cfg_path, cfg, spec, nodes)?);
    }
    let mut generations = Vec::new();
    for (spec, child) in nodes.iter().zip(children.iter_mut()) {
        // A node that cannot start the first time fails `up` at once (a
        // port taken, a bad config): the operator is there to see it.
        let line = wait_ready(&spec.name, child).await?;
        eprintln!("{} started (pid {})", spec.name, child.id().unwrap_or(0));
        let generation = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("generation="))
            .unwrap_or("?")
            .to_string();
        generations.push(generation);
    }
    print_table(cfg, nodes, &generations, args.demo);

    let policy = RestartPolicy {
        base: Duration::from_millis(args.restart_delay_ms),
        max: Duration::from_millis(args.restart_delay_max_ms),
        stable_after: Duration::from_secs(args.restart_stable_after_s),
    };
    let now = Instant::now();
    let mut slots: Vec<Slot> = children
        .into_iter()
        .map(|child| Slot {
            child: Some(child),
            started: now,
            crash: CrashLoop::new(policy),
            restart_at: None,
        })
        .collect();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    // One supervision pass every 100 ms: notice deaths, schedule restarts
    // and start the ones due. A node waiting out its delay (up to
    // `restart_delay_max_ms`) never keeps the others from being watched,
    // nor Ctrl-C from being heard.
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        for (spec, slot) in nodes.iter().zip(slots.iter_mut()) {
            slot.supervise(spec, || spawn_node(&exe, cfg_path, cfg, spec, nodes));
            if slot.child.is_none() {
                let _ = std::fs::remove_file(pid_file(cfg, &spec.name));
            }
        }
    }
    let mut children: Vec<Child> = slots.into_iter().filter_map(|s| s.child).collect();
    eprintln!("stopping {} nodes", children.len());
    for c in &children {
        if let Some(pid) = c.id() {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
    }
    for c in &mut children {
        if tokio::time::timeout(Duration::from_secs(10), c.wait()).await.is_err() {
            let _ = c.kill().await;
        }
    }
    for spec in nodes {
        let _ = std::fs::remove_file(pid_file(cfg, &spec.name));
    }
    Ok(())
}

/// One node of the local mesh under supervision.
struct Slot {
    /// None while it waits out its restart delay.
    child: Option<Child>,
    started: Instant,
    crash: CrashLoop,
    restart_at: Option<Instant>,
}

impl Slot {
    fn supervise(&mut self, spec: &NodeSpec, spawn: impl FnOnce() -> anyhow::Result<Child>) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            let ran = self.started.elapsed();
            let r = self.crash.on_exit(ran);
            if r.quick_deaths >= 2 {
                eprintln!(
                    "{} exited ({status}) after {:.1} s: crash loop, {} quick exits in a row; restarting in {:.1} s (see {}.log)",
                    spec.name,
                    ran.as_secs_f64(),
                    r.quick_deaths,
                    r.delay.as_secs_f64(),
                    spec.name
                );
            } else {
                eprintln!(
                    "{} exited ({status}) after {:.1} s; restarting in {:.1} s",
                    spec.name,
                    ran.as_secs_f64(),
                    r.delay.as_secs_f64()
                );
            }
            self.child = None;
            self.restart_at = Some(Instant::now() + r.delay);
        }
        if self.child.is_none() && self.restart_at.is_some_and(|t| Instant::now() >= t) {
            self.restart_at = None;
            self.started = Instant::now();
            match spawn() {
                Ok(mut child) => {
                    announce_ready(&spec.name, &mut child);
                    self.child = Some(child);
                }
                Err(e) => {
                    // Counts as a quick death: the schedule grows.
                    let r = self.crash.on_exit(Duration::ZERO);
                    eprintln!(
                        "{} could not be started: {e:#}; retrying in {:.1} s",
                        spec.name,
                        r.delay.as_secs_f64()
                    );
                    self.restart_at = Some(Instant::now() + r.delay);
                }
            }
        }
    }
}

/// Prints a restarted node's ready line when it comes (on its own task,
/// so a slow start never stalls supervision) and drains its stdout.
fn announce_ready(name: &str, child: &mut Child) {
    let Some(out) = child.stdout.take() else { return };
    let (name, pid) = (name.to_string(), child.id().unwrap_or(0));
    tokio::spawn(async move {
        let mut lines = BufReader::new(out).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("meshmail ready:") {
                eprintln!("{name} restarted (pid {pid}): {line}");
            }
        }
    });
}

fn print_table(cfg: &Config, nodes: &[NodeSpec], generations: &[String], demo: bool) {
    println!();
    println!(
        "{:<8} {:>4} {:<16} {:<16} {:<16} {:<16} {:<16} {:<16} {:<16} {:<16}",
        "node", "gen", "smtp", "submission", "imap", "imaps", "pop3", "managesieve", "http", "mesh (udp)"
    );
    for (n, g) in nodes.iter().zip(generations) {
        let a = |l: &str| format!("127.0.0.1:{}", n.port(l));
        println!(
            "{:<8} {:>4} {:<16} {:<16} {:<16} {:<16} {:<16} {:<16} {:<16} {:<16}",
            n.name,
            g,
            a("smtp"),
            a("submission"),
            a("imap"),
            a("imaps"),
            a("pop3"),
            a("managesieve"),
            a("http"),
            a("mesh")
        );
    }
    println!();
    println!(
        "data: {} (logs in {})",
        cfg.data_dir.display(),
        cfg.data_dir.join("logs").display()
    );
    if demo {
        println!(
            "demo account: {DEMO_ACCOUNT} / password {DEMO_PASSWORD} (IMAP LOGIN or POP3 USER/PASS from loopback; mail to it on any SMTP port)"
        );
    }
    println!(
        "status: curl -s 127.0.0.1:{}/status   ·   Ctrl-C stops every node",
        nodes[0].port("http")
    );
}
