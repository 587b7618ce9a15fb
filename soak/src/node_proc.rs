//! Starting a `meshmail` node process for benchmarks: fresh data directory,
//! every listener on port 0, endpoints read from its ready line.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

/// Finds the `meshmail` binary: `--meshmail`, else next to this executable.
pub fn meshmail_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    crate::cluster::find_meshmail(explicit)
}

pub struct NodeProc {
    child: Child,
    pub endpoints: HashMap<String, String>,
}

impl NodeProc {
    pub fn start(bin: &Path, data_dir: &Path, extra: &[&str]) -> anyhow::Result<NodeProc> {
        Self::start_with_submission(bin, data_dir, "off", extra)
    }

    /// Like [`NodeProc::start`], with the submission listener at `submission`
    /// (`"127.0.0.1:0"` for outbound benchmarks).
    pub fn start_with_submission(
        bin: &Path,
        data_dir: &Path,
        submission: &str,
        extra: &[&str],
    ) -> anyhow::Result<NodeProc> {
        Self::spawn(bin, data_dir, &[], submission, extra)
    }

    /// Like [`NodeProc::start`], with global options (e.g. `--config FILE`)
    /// before the `serve` command.
    pub fn start_with_global(
        bin: &Path,
        data_dir: &Path,
        global: &[String],
        extra: &[&str],
    ) -> anyhow::Result<NodeProc> {
        Self::spawn(bin, data_dir, global, "off", extra)
    }

    fn spawn(
        bin: &Path,
        data_dir: &Path,
        global: &[String],
        submission: &str,
        extra: &[&str],
    ) -> anyhow::Result<NodeProc> {
        let mut child = Command::new(bin)
            .args(global)
            .arg("--data-dir")
            .arg(data_dir)
            .args([
                "serve",
                "--smtp",
                "127.0.0.1:0",
                "--submission",
                submission,
                "--submissions",
                "off",
            ])
            .args([
                "--lmtp",
                "off",
                "--http",
                "127.0.0.1:0",
                "--imap",
                "127.0.0.1:0",
                "--imaps",
                "off",
            ])
            .args(extra)
            .env("MESHMAIL_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .context("starting meshmail")?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let ready = lines.next().context("meshmail exited before it was ready")??;
        let endpoints = ready
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(NodeProc { child, endpoints })
    }

    /// The node's process id (for /proc figures).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self, name: &str) -> anyhow::Result<String> {
        self.endpoints
            .get(name)
            .cloned()
            .with_context(|| format!("no {name} endpoint"))
    }

    /// Resident set size of the node process, KiB (from /proc).
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .context("no VmRSS in /proc status")
    }

    /// Peak resident set size of the node process so far, KiB (VmHWM).
    pub fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .context("no VmHWM in /proc status")
    }

    /// User + system CPU seconds the node process has used so far.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        process_cpu_seconds(&format!("/proc/{}/stat", self.child.id()))
    }

    /// The Prometheus text of its /metrics.
    pub fn metrics(&self) -> anyhow::Result<String> {
        use std::io::Read;
        let mut s = std::net::TcpStream::connect(self.addr("http")?)?;
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Adds a domain and an account to a data directory.
pub fn setup_account(bin: &Path, data_dir: &Path, email: &str, password: &str) -> anyhow::Result<()> {
    setup_account_on(bin, data_dir, &[], email, password)
}

/// [`setup_account`] with global arguments before the command (the store:
/// `--store fdb:FILE --fdb-key-prefix P`).
pub fn setup_account_on(
    bin: &Path,
    data_dir: &Path,
    global: &[String],
    email: &str,
    password: &str,
) -> anyhow::Result<()> {
    let domain = email.split('@').nth(1).context("user@domain")?;
    let st = Command::new(bin)
        .args(global)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["domain", "add", domain])
        .output()?;
    if !st.status.success() {
        bail!("domain add failed: {}", String::from_utf8_lossy(&st.stderr));
    }
    let mut child = Command::new(bin)
        .args(global)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["account", "add", email, "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(format!("{password}\n").as_bytes())?;
    if !child.wait()?.success() {
        bail!("account add failed");
    }
    Ok(())
}

/// Sum of a histogram's `_sum` / `_count` and its buckets, from Prometheus text.
pub fn histogram(metrics: &str, name: &str) -> (f64, f64, Vec<(String, f64)>) {
    let (mut sum, mut count, mut buckets) = (0.0, 0.0, Vec::new());
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix(&format!("{name}_sum")) {
            sum += rest
                .split_whitespace()
                .last()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
        } else if let Some(rest) = line.strip_prefix(&format!("{name}_count")) {
            count += rest
                .split_whitespace()
                .last()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
        } else if let Some(rest) = line.strip_prefix(&format!("{name}_bucket{{le=\""))
            && let Some((le, v)) = rest.split_once("\"}")
        {
            buckets.push((le.to_string(), v.trim().parse().unwrap_or(0.0)));
        }
    }
    (sum, count, buckets)
}

/// User + system CPU seconds of a process so far, from its `/proc/…/stat`
/// (`/proc/self/stat`: the bench itself, i.e. the load's clients).
pub fn process_cpu_seconds(stat_path: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(stat_path)?;
    // Fields after the parenthesised command name; utime and stime are
    // the 14th and 15th fields of the line.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Ok(ticks / crate::machine_cpu::ticks_per_second())
}
