//! `meshmail-soak bench smtp --flat-at 0,100000,1000000`: is ingest flat as
//! the store grows? One node and one store for the whole invocation, so
//! every point is measured by the same process on the same file, minutes
//! apart rather than in separate invocations: at each store size, `--runs`
//! windows of `--messages` (the durable load: `--mailboxes` recipients,
//! `--connections` sessions), then the store is filled over SMTP, unmeasured,
//! up to the next size. The report gives each point's median window and its
//! ratio to the first point's; the bar is "within 15 %" from an
//! empty store to 1,000,000 messages.
//!
//! A window moves the store on by `--messages`, so the first point's windows
//! are at 0, `messages`, 2 × `messages`... stored: "empty" is the first few
//! thousand messages, as a user starting a store would see it.
//!
//! With `--baseline-node-config FILE`, each point's windows alternate
//! between a node started with that config (`base-durable`) and one with
//! `--node-config` (`durable`), restarted on the same store between
//! windows: an A/B of one setting at every store size, in one run, without
//! filling a store twice.
//!
//! With `--flat-beside-empty`, each window at a point above 0 follows one
//! on a new empty store (mode `empty`: its own directory and node, deleted
//! after), with the big store's node stopped meanwhile and restarted for
//! its window (so the big store is measured with cold process caches, on a
//! warm OS cache). The ratio to the first point compares windows minutes
//! apart, across a fill, on a machine whose speed drifts by ±15 % over
//! that time; a pair compares windows seconds apart.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bench_smtp::{
    RunFigures, SmtpArgs, config_args, measure_window, median, meshmail_run, recipients, setup_accounts, store_disk,
};
use crate::bench_store::{BenchStore, RunStore};
use crate::http::prom_values;
use crate::node_proc::NodeProc;
use crate::smtp_load::{self, LoadSpec};

/// One measured window.
#[derive(Debug, Serialize)]
pub struct FlatWindow {
    /// The point this window belongs to (its `--flat-at` size).
    pub point: u64,
    /// Messages in the store when the window began.
    pub stored_before: u64,
    pub figures: RunFigures,
}

pub fn run(bin: &Path, args: &SmtpArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.flat_at.windows(2).all(|w| w[0] < w[1]),
        "--flat-at sizes must ascend: {:?}",
        args.flat_at
    );
    // The fills and restarts here assume the store lives in the data
    // directory; FDB runs use the modes of `bench smtp` instead.
    anyhow::ensure!(
        args.fdb_cluster.is_none(),
        "--flat-at runs on SQLite only (no --fdb-cluster)"
    );
    let dir = tempfile::tempdir()?;
    let rcpts = recipients(args.mailboxes);
    let store = RunStore::new(&BenchStore::Sqlite);
    setup_accounts(&store.kv_config(dir.path(), args.sqlite_page_size), &rcpts)?;
    let mut flat = FlatRun::start(bin, args, dir.path(), rcpts)?;
    for &point in &args.flat_at {
        if flat.spec.first < point {
            flat.fill_to(point)?;
        }
        for run in 0..args.runs {
            if args.flat_beside_empty && point > 0 {
                flat.empty_window(point, run)?;
            }
            flat.config_windows(point, run)?;
        }
    }
    let FlatRun {
        node,
        spec,
        mut windows,
        fills,
        ..
    } = flat;
    drop(node);
    if let Some(last) = windows.iter_mut().rev().find(|w| w.figures.mode != "empty") {
        store_disk(&mut last.figures, dir.path(), spec.first, &BenchStore::Sqlite)?;
    }
    print_report(args, &windows);
    for (point, h) in &fills {
        println!("node heap during the fill to {point}: {h}");
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&windows)?)?;
    }
    Ok(())
}

/// What a flat run carries from point to point: the one node on the store
/// and the mode it runs, the load (whose `first` is the store's size), and
/// what was measured so far.
struct FlatRun<'a> {
    bin: &'a Path,
    args: &'a SmtpArgs,
    dir: &'a Path,
    /// (mode, config) of the windows at each point, in turn.
    configs: Vec<(&'static str, &'a Option<PathBuf>)>,
    /// `None` only between stopping one node and starting the next: one
    /// node on the store at a time.
    node: Option<NodeProc>,
    running: &'static str,
    spec: LoadSpec,
    windows: Vec<FlatWindow>,
    fills: Vec<(u64, FillHeap)>,
}

impl<'a> FlatRun<'a> {
    /// Starts the `durable` node on the store in `dir`.
    fn start(bin: &'a Path, args: &'a SmtpArgs, dir: &'a Path, recipients: Vec<String>) -> anyhow::Result<Self> {
        let mut configs: Vec<(&'static str, &Option<PathBuf>)> = Vec::new();
        if args.baseline_node_config.is_some() {
            configs.push(("base-durable", &args.baseline_node_config));
        }
        configs.push(("durable", &args.node_config));
        let node = start_node(bin, dir, &args.node_config)?;
        let spec = LoadSpec {
            addr: node.addr("smtp")?,
            hello: "EHLO",
            recipients,
            messages: 0,
            connections: args.connections,
            size: args.size,
            // A fill of a million messages takes minutes; each window keeps
            // its own cap.
            max_secs: args.max_secs,
            first: 0,
        };
        Ok(FlatRun {
            bin,
            args,
            dir,
            configs,
            node: Some(node),
            running: "durable",
            spec,
            windows: Vec::new(),
            fills: Vec::new(),
        })
    }

    fn node(&self) -> &NodeProc {
        self.node.as_ref().expect("a node runs between windows")
    }

    /// Stops the running node (killed and reaped) before the next opens
    /// the file, then starts one with `config`.
    fn restart(&mut self, mode: &'static str, config: &Option<PathBuf>) -> anyhow::Result<()> {
        self.node = None;
        let node = start_node(self.bin, self.dir, config)?;
        self.spec.addr = node.addr("smtp")?;
        self.node = Some(node);
        self.running = mode;
        Ok(())
    }

    /// Fills the store over SMTP, unmeasured, up to `point` messages.
    fn fill_to(&mut self, point: u64) -> anyhow::Result<()> {
        let fill = point - self.spec.first;
        eprintln!("filling the store: {fill} messages (unmeasured) to {point}");
        let fill_spec = LoadSpec {
            messages: fill,
            max_secs: self.args.max_secs.max(fill / 200 + 60),
            ..self.spec.clone()
        };
        let (filled, heap) = fill_watching_heap(self.node(), &fill_spec)?;
        self.spec.first += filled.sent;
        anyhow::ensure!(filled.sent == fill, "the fill stored {} of {fill}", filled.sent);
        if let Some(h) = heap {
            eprintln!("node heap during the fill to {point}: {h}");
            self.fills.push((point, h));
        }
        Ok(())
    }

    /// A window on a new empty store beside `point`'s; the big store's node
    /// stops meanwhile (one node at a time on the machine) and the first
    /// config's starts again after.
    fn empty_window(&mut self, point: u64, run: usize) -> anyhow::Result<()> {
        let args = self.args;
        self.node = None;
        let figures = meshmail_run(self.bin, args, "empty", args.mailboxes, 0, &[])?;
        eprintln!(
            "empty store beside {point}, window {}/{}: {:.0} msg/s, {:.1} pages/msg, CPU {:.3} ms/msg, steal {:.0} %",
            run + 1,
            args.runs,
            figures.msg_per_s,
            figures.pages_per_msg,
            figures.cpu_ms_per_msg,
            figures.machine_steal * 100.0,
        );
        self.windows.push(FlatWindow {
            point,
            stored_before: 0,
            figures,
        });
        let (mode, config) = self.configs[0];
        self.restart(mode, config)
    }

    /// One measured window per config at `point`, restarting the node on
    /// the same store when the config changes.
    fn config_windows(&mut self, point: u64, run: usize) -> anyhow::Result<()> {
        let args = self.args;
        for (mode, config) in self.configs.clone() {
            if self.running != mode {
                self.restart(mode, config)?;
            }
            let stored_before = self.spec.first;
            let node = self.node.as_ref().expect("a node runs between windows");
            let figures = measure_window(node, &mut self.spec, args, mode)?;
            eprintln!(
                "{mode} at {stored_before} stored, window {}/{}: {:.0} msg/s, p99 {:.2} ms, {:.1} pages/msg, \
                 CPU {:.3} ms/msg, steal {:.0} %",
                run + 1,
                args.runs,
                figures.msg_per_s,
                figures.accept_p99_ms,
                figures.pages_per_msg,
                figures.cpu_ms_per_msg,
                figures.machine_steal * 100.0,
            );
            self.windows.push(FlatWindow {
                point,
                stored_before,
                figures,
            });
        }
        Ok(())
    }
}

fn start_node(bin: &Path, dir: &Path, config: &Option<PathBuf>) -> anyhow::Result<NodeProc> {
    NodeProc::start_with_global(bin, dir, &config_args(config), &[])
}

/// The node's heap while a fill ran, sampled every [`HEAP_SAMPLE_EVERY`]:
/// a node under sustained load must not grow with the number of messages
/// it took (an actor mailbox that gained a message per delivery did: ~107
/// bytes each, for as long as the load lasted).
#[derive(Debug)]
struct FillHeap {
    /// Messages delivered between the first and the last sample.
    messages: u64,
    /// jemalloc's `allocated` at the first sample (after a warm-up period)
    /// and the last, bytes.
    allocated_first: f64,
    allocated_last: f64,
    rss_peak_kib: u64,
}

impl std::fmt::Display for FillHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} -> {:.1} MB allocated over {} messages ({:.1} B per message), RSS peak {:.0} MB",
            self.allocated_first / 1e6,
            self.allocated_last / 1e6,
            self.messages,
            (self.allocated_last - self.allocated_first) / (self.messages.max(1) as f64),
            self.rss_peak_kib as f64 / 1024.0
        )
    }
}

const HEAP_SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the fill while a thread samples the node's allocator and ledger
/// counters; `None` when fewer than two samples came (a short fill).
fn fill_watching_heap(node: &NodeProc, spec: &LoadSpec) -> anyhow::Result<(smtp_load::LoadResult, Option<FillHeap>)> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let sampler = scope.spawn(move || {
            // (ledger entries, allocated bytes) per sample; the first
            // comes after one period, past the start-up allocations.
            let mut samples: Vec<(f64, f64)> = Vec::new();
            let mut rss_peak_kib = 0;
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEAP_SAMPLE_EVERY) {
                let Ok(text) = node.metrics() else { continue };
                let one = |name| prom_values(&text, name).first().map(|(_, v)| *v);
                if let (Some(ledger), Some(allocated)) = (
                    one("meshmail_ledger_entries_total"),
                    one("meshmail_allocator_allocated_bytes"),
                ) {
                    samples.push((ledger, allocated));
                }
                rss_peak_kib = rss_peak_kib.max(node.rss_kib().unwrap_or(0));
            }
            match (samples.first(), samples.last()) {
                (Some(first), Some(last)) if samples.len() >= 2 => Some(FillHeap {
                    messages: (last.0 - first.0) as u64,
                    allocated_first: first.1,
                    allocated_last: last.1,
                    rss_peak_kib,
                }),
                _ => None,
            }
        });
        let filled = smtp_load::run(spec);
        drop(stop);
        let heap = sampler.join().expect("heap sampler");
        Ok((filled?, heap))
    })
}

fn print_report(args: &SmtpArgs, windows: &[FlatWindow]) {
    println!(
        "bench smtp --flat-at: {} messages of {} B per window over {} connections to {} mailboxes, \
         median of {} windows per point, one node\n",
        args.messages, args.size, args.connections, args.mailboxes, args.runs
    );
    println!(
        "| mode | stored before | msg/s | x first point | accept p50 / p99 ms | mean batch | mean commit ms \
         | WAL pages/msg | node CPU ms/msg | write amp |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut modes: Vec<&str> = Vec::new();
    for w in windows {
        if !modes.contains(&w.figures.mode) {
            modes.push(w.figures.mode);
        }
    }
    modes.retain(|m| *m != "empty");
    for mode in modes {
        let mut first = None;
        for &point in &args.flat_at {
            let of_point = of_window(windows, point, mode);
            let median = |f: fn(&RunFigures) -> f64| median_of(&of_point, f);
            let rate = median(|r| r.msg_per_s);
            let base = *first.get_or_insert(rate);
            println!(
                "| {mode} | {point} | {rate:.0} | x{:.2} | {:.2} / {:.2} | {:.1} | {:.2} | {:.1} | {:.3} | {:.1} |",
                rate / base.max(1e-9),
                median(|r| r.accept_p50_ms),
                median(|r| r.accept_p99_ms),
                median(|r| r.mean_batch),
                median(|r| r.mean_commit_ms),
                median(|r| r.pages_per_msg),
                median(|r| r.cpu_ms_per_msg),
                median(|r| r.write_amplification),
            );
        }
    }
    if args.baseline_node_config.is_some() {
        println!("\nthis config / base config at each point (medians): msg/s, CPU ms/msg");
        for &point in &args.flat_at {
            let (a, b) = (
                of_window(windows, point, "durable"),
                of_window(windows, point, "base-durable"),
            );
            println!(
                "at {point}: msg/s x{:.2}, CPU x{:.2}",
                median_of(&a, |r| r.msg_per_s) / median_of(&b, |r| r.msg_per_s).max(1e-9),
                median_of(&a, |r| r.cpu_ms_per_msg) / median_of(&b, |r| r.cpu_ms_per_msg).max(1e-9),
            );
        }
    }
    if args.flat_beside_empty {
        print_beside_empty(args, windows);
    }
    if let Some(last) = windows.iter().rev().find(|w| w.figures.mode != "empty") {
        println!(
            "\ndisk at the end: {:.0} B per stored message (SQLite {:.0} + blobs {:.0}, after a checkpoint)",
            last.figures.disk_bytes_per_msg, last.figures.sqlite_bytes_per_msg, last.figures.blob_bytes_per_msg
        );
    }
}

/// Each point's `durable` windows against the `empty`-store windows run
/// just before them: the medians of both, and the median of the pairs'
/// ratios (window i on the big store / window i on an empty one).
fn print_beside_empty(args: &SmtpArgs, windows: &[FlatWindow]) {
    println!("\nthe big store / an empty store measured beside it (pairs seconds apart):\n");
    println!(
        "| stored before | big store msg/s | empty store msg/s | x (medians) | x (median of pairs) | pairs | CPU ms/msg big / empty |"
    );
    println!("|---:|---:|---:|---:|---:|---|---|");
    for &point in args.flat_at.iter().filter(|&&p| p > 0) {
        let (big, empty) = (of_window(windows, point, "durable"), of_window(windows, point, "empty"));
        let pairs: Vec<f64> = big
            .iter()
            .zip(&empty)
            .map(|(b, e)| b.msg_per_s / e.msg_per_s.max(1e-9))
            .collect();
        let rate = |of: &[&RunFigures]| median_of(of, |r| r.msg_per_s);
        let cpu = |of: &[&RunFigures]| median_of(of, |r| r.cpu_ms_per_msg);
        println!(
            "| {point} | {:.0} | {:.0} | x{:.2} | x{:.2} | {} | {:.3} / {:.3} |",
            rate(&big),
            rate(&empty),
            rate(&big) / rate(&empty).max(1e-9),
            median(pairs.clone()).unwrap_or(0.0),
            pairs.iter().map(|r| format!("x{r:.2}")).collect::<Vec<_>>().join(" "),
            cpu(&big),
            cpu(&empty),
        );
    }
    println!("\nwhere the time goes, per commit (medians, big store / empty store beside it):\n");
    println!("| stored before | WAL fsync ms | WAL write ms | B-tree work ms | batch transaction ms |");
    println!("|---:|---|---|---|---|");
    for &point in args.flat_at.iter().filter(|&&p| p > 0) {
        let (big, empty) = (of_window(windows, point, "durable"), of_window(windows, point, "empty"));
        let both = |f: fn(&RunFigures) -> f64| format!("{:.3} / {:.3}", median_of(&big, f), median_of(&empty, f));
        println!(
            "| {point} | {} | {} | {} | {} |",
            both(|r| r.fsync_ms_per_commit),
            both(|r| r.wal_write_ms_per_commit),
            both(|r| r.btree_ms_per_commit),
            both(|r| r.batch_txn_ms),
        );
    }
}

/// The figures of one point's windows of one mode.
fn of_window<'a>(windows: &'a [FlatWindow], point: u64, mode: &str) -> Vec<&'a RunFigures> {
    windows
        .iter()
        .filter(|w| w.point == point && w.figures.mode == mode)
        .map(|w| &w.figures)
        .collect()
}

fn median_of(of: &[&RunFigures], f: fn(&RunFigures) -> f64) -> f64 {
    median(of.iter().map(|r| f(r)).collect()).unwrap_or(0.0)
}
