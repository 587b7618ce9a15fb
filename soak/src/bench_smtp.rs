//! `meshmail-soak bench smtp`: N messages of a fixed size over C connections
//! against one node, in the same invocation:
//!
//! * `durable`: to `--mailboxes` distinct accounts (default 16: with 16
//!   sessions, one mailbox each), every 250 durable;
//! * `spread`: the same load spread over `--spread-mailboxes` accounts;
//! * `sink`: the server's no-storage mode (the protocol ceiling);
//! * `dovecot`: Debian's Dovecot LMTP (`dovecot-lmtpd`, fsync on) as the
//!   peer, when installed (see [`crate::dovecot_peer`]), to the same
//!   recipients as `durable`; the durable rate is printed as a ratio of it;
//! * `dovecot-spread`: the peer to the `spread` recipients.
//!
//! Besides msg/s and latency it reports the node's CPU (user+sys from
//! /proc) per message, the bytes on disk per stored message after a WAL
//! checkpoint (SQLite file + blobs), and the write amplification (bytes the
//! node had the kernel write / message bytes delivered).

use std::path::{Path, PathBuf};

use clap::Args;
use meshmail_storage::StorageError;
use meshmail_storage::model::{accounts, domains};
use meshmail_storage::open::{KvConfig, open_kv};
use serde::Serialize;

use crate::bench_store::{self, BenchStore, RunStore};
use crate::machine_cpu::{self, CpuShares};
use crate::node_proc::{NodeProc, histogram, meshmail_binary, process_cpu_seconds};
use crate::smtp_load::{self, LoadSpec};
use crate::store_usage;

#[derive(Debug, Args)]
pub struct SmtpArgs {
    /// Messages per run.
    #[arg(long, default_value_t = 5000)]
    pub messages: u64,
    /// Concurrent SMTP connections.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Distinct recipient mailboxes of the `durable` (and `dovecot`) mode.
    #[arg(long, default_value_t = 16)]
    pub mailboxes: usize,
    /// Recipient mailboxes of the `spread` mode (0: no spread run).
    #[arg(long, default_value_t = 1000)]
    pub spread_mailboxes: usize,
    /// Messages stored (unmeasured) before each `durable` run: the rate as
    /// the store grows.
    #[arg(long, default_value_t = 0)]
    pub prefill: u64,
    /// Run Dovecot's LMTP as the peer when installed (`auto`), or not (`off`).
    #[arg(long, default_value = "auto")]
    pub peer: String,
    /// Runs per mode (the report gives medians).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Hard cap on each run's duration, seconds.
    #[arg(long, default_value_t = 300)]
    pub max_secs: u64,
    /// The meshmail binary (default: next to this one).
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    /// Another meshmail binary (an earlier build) run in the same
    /// invocation, interleaved, as modes `base-durable` and `base-spread`:
    /// before/after ratios from one run on a noisy machine.
    #[arg(long)]
    pub baseline_meshmail: Option<PathBuf>,
    /// Page size of the SQLite file the bench creates for `durable`,
    /// `spread` and `sink` (base-* runs: `--baseline-sqlite-page-size`).
    #[arg(long, default_value_t = meshmail_storage::kv::sqlite::PAGE_SIZE_BYTES_DEFAULT)]
    pub sqlite_page_size: u32,
    /// Page size of the file of the base-* runs (4096 for builds from
    /// before `page_size_bytes`; the default of this build for an A/B of
    /// two recent builds).
    #[arg(long, default_value_t = BASELINE_PAGE_SIZE_BYTES)]
    pub baseline_sqlite_page_size: u32,
    /// A TOML config file for the nodes (`--config`), e.g. `batchers`.
    #[arg(long)]
    pub node_config: Option<PathBuf>,
    /// The config file of the base-* runs instead (with no
    /// `--baseline-meshmail`, they run this build: an A/B of one setting,
    /// e.g. `[store] checkpoint = "in_commit"`; give
    /// `--baseline-sqlite-page-size 8192` to keep the page size equal).
    /// With `--flat-at`: windows alternate between this config and
    /// `--node-config` on the one store (the node restarted between them).
    #[arg(long)]
    pub baseline_node_config: Option<PathBuf>,
    /// Keep each run's node metrics (`/metrics` after the load) here as
    /// `<mode>-<n>.prom`, for the stage timings the summary leaves out.
    #[arg(long)]
    pub metrics_dir: Option<PathBuf>,
    /// Instead of the modes above: one node and one store, measured in
    /// `--runs` windows of `--messages` at each of these store sizes
    /// (messages stored before the window, ascending, e.g.
    /// `0,100000,1000000`), filled over SMTP in between; prints each
    /// point's median and its ratio to the first (see `bench_flat`).
    #[arg(long, value_delimiter = ',')]
    pub flat_at: Vec<u64>,
    /// With `--flat-at`: at every point above 0, each window on the big
    /// store follows one on a new empty store (mode `empty`, its own node,
    /// deleted after), and the report adds the ratio of each pair measured
    /// seconds apart: the machine's drift over the minutes of a fill does
    /// not enter it, as it does the ratio to the first point.
    #[arg(long)]
    pub flat_beside_empty: bool,
    /// Also run modes `fdb-durable` and `fdb-spread`: the loads of
    /// `durable` and `spread` with the node on the FoundationDB cluster of
    /// this cluster file, each run under a key prefix of its own (needs
    /// this bench and meshmail built with `--features fdb`; `.ci/fdb.sh
    /// start` makes a one-process cluster). The `fdbserver` processes' CPU
    /// is the store-server column.
    #[arg(long)]
    pub fdb_cluster: Option<PathBuf>,
    /// Also run mode `sieve-durable`: `durable` with an active script of
    /// this many rules on every recipient account (`bench_sieve`), and
    /// print its ratio to `durable` (0: no such run).
    #[arg(long, default_value_t = 0)]
    pub sieve_rules: usize,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RunFigures {
    pub mode: &'static str,
    pub messages: u64,
    pub msg_per_s: f64,
    pub accept_p50_ms: f64,
    pub accept_p99_ms: f64,
    pub first_quarter_msg_per_s: f64,
    pub last_quarter_msg_per_s: f64,
    pub mean_batch: f64,
    pub mean_commit_ms: f64,
    /// Share of the run the store's one writer spent applying commits
    /// (SQLite backend): near 1, the writer is what limits the rate. 0 for
    /// a build without `meshmail_kv_sqlite_apply_seconds` (not "idle").
    pub writer_busy: f64,
    /// SQLite pages the node's commits wrote to the WAL per message
    /// (`meshmail_kv_sqlite_commit_pages`; every commit of the window,
    /// deliveries and the rest; 0 for a build without the histogram).
    pub pages_per_msg: f64,
    pub cpu_ms_per_msg: f64,
    /// CPU of the load's clients (this process) per message, over the
    /// same window: with the node's, what one message costs the machine.
    pub client_cpu_ms_per_msg: f64,
    /// CPU of the store's server processes (`fdbserver`) per message, over
    /// the same window: 0 on SQLite, which runs inside the node.
    pub store_server_cpu_ms_per_msg: f64,
    /// A commit's stages, ms per SQLite apply (0 for builds without their
    /// histograms): the WAL's fsync, the WAL run's write, and the rest of
    /// the apply (SQLite's B-tree work).
    pub fsync_ms_per_commit: f64,
    pub wal_write_ms_per_commit: f64,
    pub btree_ms_per_commit: f64,
    /// The delivery batch transaction's body (its reads and logic), ms per
    /// batch.
    pub batch_txn_ms: f64,
    /// The whole machine's busy CPU per message over the window (every
    /// process and kernel thread: node, clients, a peer, the kernel's
    /// writeback), from `/proc/stat`.
    pub machine_cpu_ms_per_msg: f64,
    /// Shares of the machine's CPU time over the window: busy, idle (or
    /// waiting for I/O), and taken by the hypervisor (steal).
    pub machine_busy: f64,
    pub machine_idle: f64,
    pub machine_steal: f64,
    /// Bytes on disk per stored message (all messages stored, prefill too).
    pub disk_bytes_per_msg: f64,
    pub sqlite_bytes_per_msg: f64,
    pub blob_bytes_per_msg: f64,
    pub write_amplification: f64,
    pub batch_buckets: Vec<(String, f64)>,
}

impl RunFigures {
    fn with_machine(mut self, machine: CpuShares, sent: u64) -> Self {
        self.machine_cpu_ms_per_msg = machine.busy_seconds * 1000.0 / sent.max(1) as f64;
        self.machine_busy = machine.busy;
        self.machine_idle = machine.idle;
        self.machine_steal = machine.steal;
        self
    }
}

const DOMAIN: &str = "bench.example";
const MODES: [&str; 10] = [
    "base-durable",
    "durable",
    "sieve-durable",
    "base-spread",
    "spread",
    "fdb-durable",
    "fdb-spread",
    "sink",
    "dovecot",
    "dovecot-spread",
];

pub(crate) fn recipients(n: usize) -> Vec<String> {
    (0..n.max(1)).map(|i| format!("bench{i}@{DOMAIN}")).collect()
}

pub fn run(args: SmtpArgs) -> anyhow::Result<()> {
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    if !args.flat_at.is_empty() {
        return crate::bench_flat::run(&bin, &args);
    }
    let dovecot = match args.peer.as_str() {
        "off" => None,
        _ => crate::dovecot_peer::binary(),
    };
    if dovecot.is_none() && args.peer != "off" {
        eprintln!("dovecot LMTP not installed (apt-get install dovecot-lmtpd): no peer run");
    }
    let fdb = BenchStore::fdb_or_sqlite(args.fdb_cluster.as_deref());
    let mut all = Vec::new();
    for run in 0..args.runs {
        for mode in MODES {
            let base = match (&args.baseline_meshmail, &args.baseline_node_config) {
                (Some(b), _) => Some(b.as_path()),
                (None, Some(_)) => Some(bin.as_path()),
                (None, None) => None,
            };
            let figures = match (mode, base) {
                ("durable", _) => meshmail_run(&bin, &args, mode, args.mailboxes, args.prefill, &[])?,
                ("sieve-durable", _) if args.sieve_rules > 0 => {
                    meshmail_run(&bin, &args, mode, args.mailboxes, args.prefill, &[])?
                }
                ("spread", _) if args.spread_mailboxes > 0 => {
                    meshmail_run(&bin, &args, mode, args.spread_mailboxes, 0, &[])?
                }
                ("fdb-durable", _) if fdb.is_fdb() => {
                    meshmail_run_on(&bin, &args, mode, args.mailboxes, args.prefill, &fdb)?
                }
                ("fdb-spread", _) if fdb.is_fdb() && args.spread_mailboxes > 0 => {
                    meshmail_run_on(&bin, &args, mode, args.spread_mailboxes, 0, &fdb)?
                }
                ("base-durable", Some(b)) => meshmail_run(b, &args, mode, args.mailboxes, args.prefill, &[])?,
                ("base-spread", Some(b)) if args.spread_mailboxes > 0 => {
                    meshmail_run(b, &args, mode, args.spread_mailboxes, 0, &[])?
                }
                ("sink", _) => meshmail_run(&bin, &args, mode, args.mailboxes, 0, &["--bench-sink"])?,
                ("dovecot", _) if dovecot.is_some() => {
                    dovecot_run(dovecot.as_deref().expect("checked"), &args, mode, args.mailboxes)?
                }
                ("dovecot-spread", _) if dovecot.is_some() && args.spread_mailboxes > 0 => {
                    dovecot_run(dovecot.as_deref().expect("checked"), &args, mode, args.spread_mailboxes)?
                }
                _ => continue,
            };
            eprintln!(
                "run {}/{} {mode}: {:.0} msg/s (quarters {:.0} → {:.0}), p50 {:.2} ms, p99 {:.2} ms, batch {:.1}, \
                 CPU {:.3} ms/msg (clients {:.3}; machine {:.3}, steal {:.0} %, idle {:.0} %), \
                 {:.0} B/msg on disk, write amp {:.1}",
                run + 1,
                args.runs,
                figures.msg_per_s,
                figures.first_quarter_msg_per_s,
                figures.last_quarter_msg_per_s,
                figures.accept_p50_ms,
                figures.accept_p99_ms,
                figures.mean_batch,
                figures.cpu_ms_per_msg,
                figures.client_cpu_ms_per_msg,
                figures.machine_cpu_ms_per_msg,
                figures.machine_steal * 100.0,
                figures.machine_idle * 100.0,
                figures.disk_bytes_per_msg,
                figures.write_amplification,
            );
            all.push(figures);
        }
    }
    print_report(&args, &all);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&all)?)?;
    }
    Ok(())
}

fn print_report(args: &SmtpArgs, all: &[RunFigures]) {
    let median = |mode: &str, f: fn(&RunFigures) -> f64| median_of_mode(all, mode, f);
    println!(
        "bench smtp: {} messages of {} B over {} connections ({} mailboxes; spread {}; prefill {}), median of {} runs\n",
        args.messages, args.size, args.connections, args.mailboxes, args.spread_mailboxes, args.prefill, args.runs
    );
    println!(
        "| mode | msg/s | first → last quarter msg/s | accept p50 ms | accept p99 ms | mean batch | mean commit ms \
         | writer busy | WAL pages/msg | node CPU ms/msg | store server CPU ms/msg | client CPU ms/msg \
         | machine CPU ms/msg | steal % | idle % | disk B/msg (SQLite + blobs) | write amp |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for mode in MODES {
        let Some(rate) = median(mode, |r| r.msg_per_s) else {
            continue;
        };
        let m = |f: fn(&RunFigures) -> f64| median(mode, f).unwrap_or(0.0);
        println!(
            "| {mode} | {rate:.0} | {:.0} → {:.0} | {:.2} | {:.2} | {:.1} | {:.2} | {:.2} | {:.1} | {:.3} | {:.3} | {:.3} \
             | {:.3} | {:.0} | {:.0} | {:.0} ({:.0} + {:.0}) | {:.1} |",
            m(|r| r.first_quarter_msg_per_s),
            m(|r| r.last_quarter_msg_per_s),
            m(|r| r.accept_p50_ms),
            m(|r| r.accept_p99_ms),
            m(|r| r.mean_batch),
            m(|r| r.mean_commit_ms),
            m(|r| r.writer_busy),
            m(|r| r.pages_per_msg),
            m(|r| r.cpu_ms_per_msg),
            m(|r| r.store_server_cpu_ms_per_msg),
            m(|r| r.client_cpu_ms_per_msg),
            m(|r| r.machine_cpu_ms_per_msg),
            m(|r| r.machine_steal * 100.0),
            m(|r| r.machine_idle * 100.0),
            m(|r| r.disk_bytes_per_msg),
            m(|r| r.sqlite_bytes_per_msg),
            m(|r| r.blob_bytes_per_msg),
            m(|r| r.write_amplification),
        );
    }
    let durable = median("durable", |r| r.msg_per_s).unwrap_or(0.0);
    if let Some(sink) = median("sink", |r| r.msg_per_s) {
        println!("\ndurable / sink = {:.2}", durable / sink.max(1e-9));
    }
    if let Some(d) = median("dovecot", |r| r.msg_per_s) {
        println!("durable / dovecot LMTP = {:.2}", durable / d.max(1e-9));
    }
    if let Some(f) = median("fdb-durable", |r| r.msg_per_s) {
        let peer = median("dovecot", |r| r.msg_per_s).map_or(String::new(), |d| {
            format!(", fdb-durable / dovecot LMTP = {:.2}", f / d.max(1e-9))
        });
        println!("fdb-durable / durable (SQLite) = {:.2}{peer}", f / durable.max(1e-9));
    }
    print_cpu_ceiling(all);
    if let (Some(s), Some(d)) = (
        median("spread", |r| r.msg_per_s),
        median("dovecot-spread", |r| r.msg_per_s),
    ) {
        println!("spread / dovecot LMTP spread = {:.2}", s / d.max(1e-9));
    }
    print_ratios(all);
    if let Some(last) = all.iter().rev().find(|r| r.mode == "durable") {
        println!(
            "batch-size distribution (last durable run, cumulative): {:?}",
            last.batch_buckets
        );
    }
}

/// Before/after ratios of the modes measured in the same invocation: a
/// baseline build or config, and the cost of an active Sieve script.
fn print_ratios(all: &[RunFigures]) {
    let median = |mode: &str, f: fn(&RunFigures) -> f64| median_of_mode(all, mode, f);
    for (new, base) in [
        ("durable", "base-durable"),
        ("spread", "base-spread"),
        ("sieve-durable", "durable"),
    ] {
        if let (Some(n), Some(b)) = (median(new, |r| r.msg_per_s), median(base, |r| r.msg_per_s)) {
            let cpu = |m| median(m, |r| r.cpu_ms_per_msg).unwrap_or(0.0);
            let disk = |m| median(m, |r| r.disk_bytes_per_msg).unwrap_or(0.0);
            println!(
                "{new} / {base}: msg/s x{:.2}, CPU/msg x{:.2}, disk/msg x{:.2}",
                n / b.max(1e-9),
                cpu(new) / cpu(base).max(1e-9),
                disk(new) / disk(base).max(1e-9)
            );
        }
    }
}

/// The median of some figures (the upper one of an even count).
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

/// The median of one figure over the runs of one mode.
fn median_of_mode(all: &[RunFigures], mode: &str, f: fn(&RunFigures) -> f64) -> Option<f64> {
    median(all.iter().filter(|r| r.mode == mode).map(f).collect())
}

/// The rate this machine's cores could carry if CPU were the only limit,
/// for `durable` and `spread`, counted two ways:
/// * cores / (node + store server + clients' CPU per message): what the
///   processes spend;
/// * cores not taken by the hypervisor (1 − steal) / the whole machine's
///   busy CPU per message (the kernel's writeback and journal threads
///   too), with the share of those cores the run kept busy.
///
/// A target above the ceiling cannot be reached by waiting less, only by
/// spending less CPU per message.
fn print_cpu_ceiling(all: &[RunFigures]) {
    let median = |mode: &str, f: fn(&RunFigures) -> f64| median_of_mode(all, mode, f);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for (mode, peer) in [
        ("durable", "dovecot"),
        ("spread", "dovecot-spread"),
        ("fdb-durable", "dovecot"),
        ("fdb-spread", "dovecot-spread"),
    ] {
        let (Some(node), Some(client), Some(server)) = (
            median(mode, |r| r.cpu_ms_per_msg),
            median(mode, |r| r.client_cpu_ms_per_msg),
            median(mode, |r| r.store_server_cpu_ms_per_msg),
        ) else {
            continue;
        };
        // The FDB server's share counts with the node's: it is the node's
        // work, done in another process.
        let node = node + server;
        let versus = |ceiling: f64| {
            median(peer, |r| r.msg_per_s).map_or(String::new(), |d| format!(" (x{:.1} {peer})", ceiling / d.max(1e-9)))
        };
        let ceiling = cores * 1000.0 / (node + client).max(1e-9);
        println!(
            "{mode}: CPU ceiling {ceiling:.0} msg/s{} = {cores:.0} cores / ({node:.3} node and store server + {client:.3} clients) ms/msg",
            versus(ceiling)
        );
        let (Some(machine), Some(steal), Some(busy)) = (
            median(mode, |r| r.machine_cpu_ms_per_msg),
            median(mode, |r| r.machine_steal),
            median(mode, |r| r.machine_busy),
        ) else {
            continue;
        };
        let usable = cores * (1.0 - steal);
        let ceiling = usable * 1000.0 / machine.max(1e-9);
        println!(
            "{mode}: machine ceiling {ceiling:.0} msg/s{} = {usable:.2} cores left by the hypervisor (steal {:.0} %) \
             / {machine:.3} ms/msg of the whole machine; the run kept {:.0} % of them busy",
            versus(ceiling),
            steal * 100.0,
            busy / (1.0 - steal).max(1e-9) * 100.0
        );
    }
}

/// One run against a fresh node: accounts, optional prefill, the measured
/// load, then the node's figures and (after it stopped) its disk use.
pub(crate) fn meshmail_run(
    bin: &Path,
    args: &SmtpArgs,
    mode: &'static str,
    mailboxes: usize,
    prefill: u64,
    extra: &[&str],
) -> anyhow::Result<RunFigures> {
    meshmail_run_with(bin, args, mode, mailboxes, prefill, extra, &BenchStore::Sqlite)
}

/// [`meshmail_run`] with the node on `store`.
fn meshmail_run_on(
    bin: &Path,
    args: &SmtpArgs,
    mode: &'static str,
    mailboxes: usize,
    prefill: u64,
    store: &BenchStore,
) -> anyhow::Result<RunFigures> {
    meshmail_run_with(bin, args, mode, mailboxes, prefill, &[], store)
}

fn meshmail_run_with(
    bin: &Path,
    args: &SmtpArgs,
    mode: &'static str,
    mailboxes: usize,
    prefill: u64,
    extra: &[&str],
    on: &BenchStore,
) -> anyhow::Result<RunFigures> {
    let dir = tempfile::tempdir()?;
    let store = RunStore::new(on);
    let rcpts = recipients(mailboxes);
    let baseline = mode.starts_with("base-");
    let page_size = if baseline {
        args.baseline_sqlite_page_size
    } else {
        args.sqlite_page_size
    };
    setup_accounts(&store.kv_config(dir.path(), page_size), &rcpts)?;
    if mode == "sieve-durable" {
        crate::bench_sieve::install(&store.kv_config(dir.path(), page_size), &rcpts, args.sieve_rules)?;
    }
    if baseline {
        unfence_for_older_build(dir.path())?;
    }
    let config_file = if baseline && args.baseline_node_config.is_some() {
        &args.baseline_node_config
    } else {
        &args.node_config
    };
    let mut global = config_args(config_file);
    global.extend(store.global_args());
    let node = NodeProc::start_with_global(bin, dir.path(), &global, extra)?;
    let mut spec = LoadSpec {
        addr: node.addr("smtp")?,
        hello: "EHLO",
        recipients: rcpts,
        messages: prefill,
        connections: args.connections,
        size: args.size,
        max_secs: args.max_secs,
        first: 0,
    };
    if prefill > 0 {
        smtp_load::run(&spec)?;
    }
    spec.first = prefill;
    let mut figures = measure_window(&node, &mut spec, args, mode)?;
    if mode == "sieve-durable" {
        crate::bench_sieve::check_ran(&node.metrics()?, figures.messages + prefill)?;
    }
    drop(node);
    if mode != "sink" {
        let stored = figures.messages + prefill;
        store_disk(&mut figures, dir.path(), stored, on)?;
    }
    Ok(figures)
}

/// Sends `args.messages` more over `spec` (from `spec.first`, which it
/// moves on) and returns what the node did meanwhile; the disk figures are
/// left for [`store_disk`] once the node is gone.
pub(crate) fn measure_window(
    node: &NodeProc,
    spec: &mut LoadSpec,
    args: &SmtpArgs,
    mode: &'static str,
) -> anyhow::Result<RunFigures> {
    let before_metrics = node.metrics()?;
    let (cpu0, io0) = (node.cpu_seconds()?, store_usage::process_write_bytes(node.pid())?);
    let client0 = process_cpu_seconds("/proc/self/stat")?;
    let server0 = bench_store::server_cpu_seconds();
    let machine0 = machine_cpu::now()?;
    spec.messages = args.messages;
    let load = smtp_load::run(spec)?;
    spec.first += load.sent;
    let machine = machine_cpu::since(machine0)?;
    let server1 = bench_store::server_cpu_seconds();
    let client1 = process_cpu_seconds("/proc/self/stat")?;
    let (cpu1, io1) = (node.cpu_seconds()?, store_usage::process_write_bytes(node.pid())?);
    let metrics = node.metrics()?;
    if let Some(keep) = &args.metrics_dir {
        std::fs::create_dir_all(keep)?;
        let n = (1..)
            .find(|n| !keep.join(format!("{mode}-{n}.prom")).exists())
            .expect("a free name");
        std::fs::write(keep.join(format!("{mode}-{n}.prom")), &metrics)?;
    }
    // Only the delivery batches' commits (the histogram is labelled by op).
    let only = |text: &str, label: &str| {
        text.lines()
            .filter(|l| l.contains(label))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let delta = |name: &str, label: &str| {
        let (s1, c1, b) = histogram(&only(&metrics, label), name);
        let (s0, c0, _) = histogram(&only(&before_metrics, label), name);
        (s1 - s0, c1 - c0, b)
    };
    let (bsum, bcount, buckets) = delta("meshmail_batch_deliveries", "");
    let (csum, ccount, _) = delta("meshmail_kv_commit_seconds", "op=\"deliver_batch\"");
    let (apply_s, applies, _) = delta("meshmail_kv_sqlite_apply_seconds", "");
    let (write_s, _, _) = delta("meshmail_kv_sqlite_wal_write_seconds", "");
    let (sync_s, _, _) = delta("meshmail_kv_sqlite_wal_sync_seconds", "");
    let (body_s, bodies, _) = delta("meshmail_kv_txn_seconds", "op=\"deliver_batch\"");
    let per = |sum: f64, n: f64| if n > 0.0 { sum / n * 1000.0 } else { 0.0 };
    let (pages, _, _) = delta("meshmail_kv_sqlite_commit_pages", "");
    let sent = load.sent.max(1) as f64;
    Ok(RunFigures {
        mode,
        messages: load.sent,
        msg_per_s: load.sent as f64 / load.elapsed_s,
        accept_p50_ms: load.accept_p50_ms,
        accept_p99_ms: load.accept_p99_ms,
        first_quarter_msg_per_s: load.first_quarter_msg_per_s,
        last_quarter_msg_per_s: load.last_quarter_msg_per_s,
        mean_batch: if bcount > 0.0 { bsum / bcount } else { 0.0 },
        mean_commit_ms: if ccount > 0.0 { csum / ccount * 1000.0 } else { 0.0 },
        writer_busy: apply_s / load.elapsed_s.max(1e-9),
        pages_per_msg: pages / sent,
        cpu_ms_per_msg: (cpu1 - cpu0) * 1000.0 / sent,
        client_cpu_ms_per_msg: (client1 - client0) * 1000.0 / sent,
        store_server_cpu_ms_per_msg: (server1 - server0) * 1000.0 / sent,
        fsync_ms_per_commit: per(sync_s, applies),
        wal_write_ms_per_commit: per(write_s, applies),
        btree_ms_per_commit: per((apply_s - write_s - sync_s).max(0.0), applies),
        batch_txn_ms: per(body_s, bodies),
        write_amplification: io1.saturating_sub(io0) as f64 / (sent * args.size as f64),
        batch_buckets: buckets,
        ..RunFigures::default()
    }
    .with_machine(machine, load.sent))
}

/// The node's `--config FILE` arguments, if a file is given.
pub(crate) fn config_args(file: &Option<PathBuf>) -> Vec<String> {
    file.iter()
        .flat_map(|p| ["--config".to_string(), p.display().to_string()])
        .collect()
}

/// Fills in the disk figures of a run whose node has stopped: the store
/// after a WAL checkpoint, per message it holds. On FDB only the blobs:
/// the cluster's files are shared by every run and preallocated, so their
/// size says nothing about one run's messages.
pub(crate) fn store_disk(
    figures: &mut RunFigures,
    data_dir: &Path,
    stored: u64,
    store: &BenchStore,
) -> anyhow::Result<()> {
    let (sqlite, blobs) = if store.is_fdb() {
        (0, store_usage::allocated_bytes(&data_dir.join("blobs")).unwrap_or(0))
    } else {
        store_usage::checkpointed_usage(data_dir)?
    };
    let stored = stored.max(1) as f64;
    figures.disk_bytes_per_msg = (sqlite + blobs) as f64 / stored;
    figures.sqlite_bytes_per_msg = sqlite as f64 / stored;
    figures.blob_bytes_per_msg = blobs as f64 / stored;
    Ok(())
}

/// The same load against Dovecot's LMTP, to the recipients of `durable`
/// (`dovecot`) or of `spread` (`dovecot-spread`).
fn dovecot_run(bin: &Path, args: &SmtpArgs, mode: &'static str, mailboxes: usize) -> anyhow::Result<RunFigures> {
    let peer = crate::dovecot_peer::DovecotLmtp::start(bin)?;
    let client0 = process_cpu_seconds("/proc/self/stat")?;
    let machine0 = machine_cpu::now()?;
    let load = smtp_load::run(&LoadSpec {
        addr: peer.addr.clone(),
        hello: "LHLO",
        recipients: recipients(mailboxes),
        messages: args.messages,
        connections: args.connections,
        size: args.size,
        max_secs: args.max_secs,
        first: 0,
    })?;
    let machine = machine_cpu::since(machine0)?;
    let client = process_cpu_seconds("/proc/self/stat")? - client0;
    let disk = store_usage::allocated_bytes(&peer.mail_dir())?;
    Ok(RunFigures {
        mode,
        messages: load.sent,
        msg_per_s: load.sent as f64 / load.elapsed_s,
        accept_p50_ms: load.accept_p50_ms,
        accept_p99_ms: load.accept_p99_ms,
        first_quarter_msg_per_s: load.first_quarter_msg_per_s,
        last_quarter_msg_per_s: load.last_quarter_msg_per_s,
        disk_bytes_per_msg: disk as f64 / load.sent.max(1) as f64,
        blob_bytes_per_msg: disk as f64 / load.sent.max(1) as f64,
        client_cpu_ms_per_msg: client * 1000.0 / load.sent.max(1) as f64,
        ..RunFigures::default()
    }
    .with_machine(machine, load.sent))
}

/// The page size of files made by builds before `page_size_bytes` existed.
const BASELINE_PAGE_SIZE_BYTES: u32 = 4096;

/// Accounts per setup transaction: each creates a handful of mailboxes, so
/// this stays far below FDB's 10 MB / 5 s.
const ACCOUNTS_PER_TXN: usize = 50;

/// The store is set up by this build, which fences older builds out of a
/// file it opened (the `conflict_log` view of `kv::sqlite::schema`); the
/// base-* runs are an older build, given the file before any node of this
/// build ran on it: the fence goes, the older build makes its own table.
fn unfence_for_older_build(data_dir: &Path) -> anyhow::Result<()> {
    let conn = rusqlite::Connection::open(data_dir.join("meshmail.sqlite"))?;
    conn.execute_batch("DROP VIEW IF EXISTS conflict_log")?;
    Ok(())
}

/// The domain and one account per recipient, written straight to the
/// store before the node starts (as the admin commands do), with one
/// password hash for all: argon2 for 1,000 accounts would take minutes.
pub(crate) fn setup_accounts(kv: &KvConfig, rcpts: &[String]) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let db = open_kv(kv)?;
        db.run("bench_domain", |txn| async move {
            domains::add(&txn, DOMAIN).await.map(drop)
        })
        .await?;
        let hash = accounts::hash_password("bench")?;
        for chunk in rcpts.chunks(ACCOUNTS_PER_TXN) {
            let (chunk, hash) = (chunk.to_vec(), hash.clone());
            db.run("bench_accounts", move |txn| {
                let (chunk, hash) = (chunk.clone(), hash.clone());
                async move {
                    for email in &chunk {
                        accounts::add(&txn, email, &hash).await?;
                    }
                    Ok::<_, StorageError>(())
                }
            })
            .await?;
        }
        Ok::<_, anyhow::Error>(())
    })
}
