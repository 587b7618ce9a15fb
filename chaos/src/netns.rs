//! Real network faults: every node runs in its own network namespace
//! (`ip netns exec`), wired by a veth pair to a bridge that lives in a
//! namespace of its own; one more veth pair joins the runner's namespace to
//! that bridge so the load and the recovery pollers reach the nodes. There
//! is no default route anywhere and nothing forwards, so no packet leaves
//! this machine. Faults are `iptables` rules (partitions, one-way
//! partitions, and random loss when `netem` is missing) and `tc` qdiscs
//! (`netem` delay/jitter/loss/reorder, `tbf` bandwidth limits) inside the
//! node's namespace; heal flushes both.
//!
//! The nodes' client ports (SMTP, submission, IMAP, HTTP) listen on
//! 127.0.0.1 inside their namespace, behind a relay the runner runs in that
//! namespace: the nodes keep treating their clients as local (plaintext
//! AUTH on loopback only), while the bytes still cross the veth and its
//! faults. The mesh (QUIC) listens on the namespace's own address.
//!
//! Everything is named `mmchaos-<pid>-...` (namespaces) and `mmc<pid>h`
//! (the one veth end in the runner's namespace), so a runner finds what a
//! crashed runner left (its pid is gone) and removes it at start. Teardown
//! runs on drop, from a panic hook, and after Ctrl-C (see main.rs).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Context, bail};

use crate::schedule::{FaultKind, Netem};

pub const NS_PREFIX: &str = "mmchaos-";
const LINK_PREFIX: &str = "mmc";

/// Prefixes of live setups in this process (torn down by the panic hook).
static ACTIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Runs a command; its stdout, or an error with its stderr.
pub(crate) fn run(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("running {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ns_name(owner: u32, what: &str) -> String {
    format!("{NS_PREFIX}{owner}-{what}")
}

fn host_link(owner: u32) -> String {
    format!("{LINK_PREFIX}{owner}h")
}

/// The namespaces named like ours, with the runner pid they belong to.
pub fn our_namespaces() -> Vec<(String, u32)> {
    let list = run(&["ip", "netns", "list"]).unwrap_or_default();
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|n| {
            let pid = n.strip_prefix(NS_PREFIX)?.split('-').next()?.parse().ok()?;
            Some((n.to_string(), pid))
        })
        .collect()
}

/// The links in this namespace named like our host veth ends, with their owner pid.
pub fn our_links() -> Vec<(String, u32)> {
    let list = run(&["ip", "-o", "link", "show"]).unwrap_or_default();
    list.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n))
        .filter_map(|n| {
            let pid = n.strip_prefix(LINK_PREFIX)?.strip_suffix('h')?.parse().ok()?;
            Some((n.to_string(), pid))
        })
        .collect()
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes what runners that are gone left behind; returns what it removed.
pub fn remove_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for (n, pid) in our_namespaces() {
        if !pid_alive(pid) && run(&["ip", "netns", "del", &n]).is_ok() {
            removed.push(n);
        }
    }
    for (l, pid) in our_links() {
        if !pid_alive(pid) && run(&["ip", "link", "del", &l]).is_ok() {
            removed.push(l);
        }
    }
    removed
}

/// Deletes every namespace and host link of runner `owner`. Idempotent;
/// synchronous, so it can run from Drop and from the panic hook.
pub fn teardown(owner: u32) {
    let _ = run(&["ip", "link", "del", &host_link(owner)]);
    for (n, pid) in our_namespaces() {
        if pid == owner {
            let _ = run(&["ip", "netns", "del", &n]);
        }
    }
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&owner);
}

/// Tears down every setup of this process (Ctrl-C, panic).
pub fn teardown_all() {
    let owners: Vec<u32> = ACTIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    for o in owners {
        teardown(o);
    }
}

/// Installs (once) a panic hook that tears down (namespaces, and the
/// data directory's tmpfs of `disk.rs`) before the default hook reports.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            teardown_all();
            crate::disk::teardown_all();
            default(info);
        }));
    });
}

/// Why namespaces cannot be used here, if they cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if let Err(e) = run(&["ip", "netns", "list"]) {
        return Some(format!("no `ip netns`: {e:#}"));
    }
    if iptables_bin().is_none() {
        return Some("no iptables (apt install iptables)".into());
    }
    None
}

/// `iptables-legacy` where it exists (kernels without nf_tables), else `iptables`.
fn iptables_bin() -> Option<&'static str> {
    ["iptables-legacy", "iptables"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// One run's namespaces.
pub struct Netns {
    owner: u32,
    nodes: usize,
    /// 10.213.<third>.0/24
    third: u8,
    iptables: &'static str,
    /// Whether this kernel has `sch_netem` (many containers lack it).
    pub netem: bool,
    relays: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Netns {
    /// Creates the bridge namespace, one namespace per node and the host leg.
    pub fn create(nodes: usize) -> anyhow::Result<Netns> {
        if let Some(why) = unavailable() {
            bail!("network namespaces unavailable: {why}");
        }
        install_panic_hook();
        let owner = std::process::id();
        let used = run(&["ip", "-o", "-4", "addr", "show"]).unwrap_or_default();
        let third = (0..250u32)
            .map(|k| ((owner + k) % 250) as u8)
            .find(|t| !used.contains(&format!("10.213.{t}.")))
            .context("no free 10.213.X.0/24")?;
        ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(owner);
        let mut n = Netns {
            owner,
            nodes,
            third,
            iptables: iptables_bin().context("iptables")?,
            netem: false,
            relays: Vec::new(),
        };
        n.wire().inspect_err(|_| teardown(owner))?;
        Ok(n)
    }

    fn wire(&mut self) -> anyhow::Result<()> {
        let br = ns_name(self.owner, "br");
        run(&["ip", "netns", "add", &br])?;
        run(&["ip", "-n", &br, "link", "add", "br0", "type", "bridge"])?;
        run(&["ip", "-n", &br, "link", "set", "br0", "up"])?;
        let host = host_link(self.owner);
        run(&[
            "ip", "link", "add", &host, "type", "veth", "peer", "name", "host", "netns", &br,
        ])?;
        run(&["ip", "-n", &br, "link", "set", "host", "master", "br0", "up"])?;
        let host_ip = format!("{}/24", self.host_ip());
        run(&["ip", "addr", "add", &host_ip, "dev", &host])?;
        run(&["ip", "link", "set", &host, "up"])?;
        for i in 0..self.nodes {
            let ns = self.ns(i);
            let leg = format!("n{i}");
            run(&["ip", "netns", "add", &ns])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            run(&[
                "ip", "-n", &br, "link", "add", &leg, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            run(&["ip", "-n", &br, "link", "set", &leg, "master", "br0", "up"])?;
            let ip = format!("{}/24", self.node_ip(i));
            run(&["ip", "-n", &ns, "addr", "add", &ip, "dev", "eth0"])?;
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
        }
        // Probe netem once on a real link; without it, loss falls back to iptables.
        let ns0 = self.ns(0);
        self.netem = run(&[
            "ip", "netns", "exec", &ns0, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms",
        ])
        .is_ok();
        let _ = run(&["ip", "netns", "exec", &ns0, "tc", "qdisc", "del", "dev", "eth0", "root"]);
        Ok(())
    }

    pub fn ns(&self, i: usize) -> String {
        ns_name(self.owner, &format!("n{i}"))
    }

    pub fn node_ip(&self, i: usize) -> String {
        format!("10.213.{}.{}", self.third, i + 1)
    }

    pub fn host_ip(&self) -> String {
        format!("10.213.{}.254", self.third)
    }

    /// The command prefix that runs a process in node `i`'s namespace.
    pub fn launch_prefix(&self, i: usize) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.ns(i)]
    }

    /// Relays `ip:port` (the namespace's address) to `127.0.0.1:port` inside
    /// node `i`'s namespace, for every port given.
    pub fn relay(&mut self, i: usize, ports: &[u16]) -> anyhow::Result<()> {
        let path = format!("/run/netns/{}", self.ns(i));
        let ip: std::net::IpAddr = self.node_ip(i).parse()?;
        let pairs: Vec<(SocketAddr, SocketAddr)> = ports
            .iter()
            .map(|&p| (SocketAddr::new(ip, p), SocketAddr::from(([127, 0, 0, 1], p))))
            .collect();
        self.relays.push(crate::relay::spawn_in_netns(&path, pairs)?);
        Ok(())
    }

    fn exec(&self, i: usize, cmd: &[&str]) -> anyhow::Result<String> {
        let ns = self.ns(i);
        let mut args = vec!["ip", "netns", "exec", ns.as_str()];
        args.extend_from_slice(cmd);
        run(&args)
    }

    fn drop_rule(&self, i: usize, chain: &str, dir: &str, peer: &str) -> anyhow::Result<()> {
        self.exec(i, &[self.iptables, "-A", chain, dir, peer, "-j", "DROP"])
            .map(|_| ())
    }

    /// Applies a fault to node `i`; returns what was done, for the record.
    pub async fn apply(&self, kind: FaultKind, i: usize, p: &Netem) -> anyhow::Result<String> {
        let peers: Vec<String> = (0..self.nodes).filter(|&j| j != i).map(|j| self.node_ip(j)).collect();
        match kind {
            FaultKind::NetnsPartition => {
                for ip in &peers {
                    self.drop_rule(i, "INPUT", "-s", ip)?;
                    self.drop_rule(i, "OUTPUT", "-d", ip)?;
                }
                Ok(format!("iptables: no traffic to or from {}", peers.join(", ")))
            }
            FaultKind::NetnsOneway => {
                for ip in &peers {
                    self.drop_rule(i, "OUTPUT", "-d", ip)?;
                }
                Ok(format!(
                    "iptables: nothing sent to {} (theirs still arrives)",
                    peers.join(", ")
                ))
            }
            FaultKind::NetnsNetem => self.netem(i, p),
            FaultKind::NetnsBandwidth => {
                let rate = format!("{}kbit", p.rate_kbit.unwrap_or(1000));
                self.exec(
                    i,
                    &[
                        "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", &rate, "burst", "32kbit",
                        "latency", "400ms",
                    ],
                )?;
                Ok(format!("tc tbf rate {rate}"))
            }
            other => bail!("{} is not a namespace fault", other.name()),
        }
    }

    fn netem(&self, i: usize, p: &Netem) -> anyhow::Result<String> {
        let mut spec: Vec<String> = Vec::new();
        if let Some(d) = p.delay_ms {
            spec.extend(["delay".into(), format!("{d}ms")]);
            if let Some(j) = p.jitter_ms {
                spec.push(format!("{j}ms"));
            }
        }
        if let Some(l) = p.loss_pct {
            spec.extend(["loss".into(), format!("{l}%")]);
        }
        if let Some(r) = p.reorder_pct {
            spec.extend(["reorder".into(), format!("{r}%")]);
        }
        if self.netem {
            let mut cmd = vec!["tc", "qdisc", "replace", "dev", "eth0", "root", "netem"];
            cmd.extend(spec.iter().map(String::as_str));
            self.exec(i, &cmd)?;
            return Ok(format!("tc netem {}", spec.join(" ")));
        }
        // No sch_netem in this kernel: random loss both ways through
        // iptables' statistic match; delay, jitter and reordering cannot be
        // had without netem and are reported as not injected.
        let mut done = String::from("netem unavailable;");
        if let Some(l) = p.loss_pct {
            let prob = format!("{:.4}", (l / 100.0).clamp(0.0, 1.0));
            for chain in ["INPUT", "OUTPUT"] {
                let dev = if chain == "INPUT" { "-i" } else { "-o" };
                self.exec(
                    i,
                    &[
                        self.iptables,
                        "-A",
                        chain,
                        dev,
                        "eth0",
                        "-m",
                        "statistic",
                        "--mode",
                        "random",
                        "--probability",
                        &prob,
                        "-j",
                        "DROP",
                    ],
                )?;
            }
            done.push_str(&format!(" iptables loss {l}% each way;"));
        }
        if p.delay_ms.is_some() || p.reorder_pct.is_some() {
            done.push_str(" delay/jitter/reorder NOT injected;");
        }
        Ok(done)
    }

    /// Lifts every fault on node `i`: flushes its rules and its root qdisc.
    pub async fn heal(&self, i: usize) -> anyhow::Result<()> {
        self.exec(i, &[self.iptables, "-F"])?;
        // No root qdisc of ours (partitions) is not an error.
        let _ = self.exec(i, &["tc", "qdisc", "del", "dev", "eth0", "root"]);
        Ok(())
    }

    pub fn owner(&self) -> u32 {
        self.owner
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for r in self.relays.drain(..) {
            let _ = r.send(());
        }
        teardown(self.owner);
    }
}
