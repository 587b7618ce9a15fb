//! `meshmail-soak bench kv`: what one SQLite file commits per second.
//!
//! For each process count and each transaction size, each run starts that
//! many worker processes (this binary, `bench kv-worker`) on a fresh database
//! file; every worker commits transactions of N small writes in a closed loop
//! for a fixed time and reports each commit's latency. The parent merges the
//! latencies into one HDR histogram per run and reports the median of the
//! runs. These figures set the budget for group commit.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use meshmail_storage::StorageError;
use meshmail_storage::open::{KvConfig, open_kv};
use serde::{Deserialize, Serialize};

#[derive(Debug, Args)]
pub struct KvArgs {
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 5)]
    pub secs: u64,
    /// Runs per configuration (the report gives their median).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Writes per transaction, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    pub writes: Vec<u32>,
    /// Writer process counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,3")]
    pub procs: Vec<u32>,
    /// Bytes per value.
    #[arg(long, default_value_t = 64)]
    pub value_bytes: usize,
    /// Where the scratch databases go (default: the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub path: PathBuf,
    #[arg(long)]
    pub writes: u32,
    #[arg(long)]
    pub secs: u64,
    #[arg(long)]
    pub value_bytes: usize,
}

/// What one worker process reports.
#[derive(Debug, Serialize, Deserialize)]
struct WorkerReport {
    commits: u64,
    elapsed_s: f64,
    latencies_us: Vec<u64>,
}

/// One configuration's figures (medians over runs).
#[derive(Debug, Serialize)]
pub struct Row {
    pub procs: u32,
    pub writes_per_txn: u32,
    pub txn_per_s: f64,
    pub keys_per_s: f64,
    pub commit_p50_ms: f64,
    pub commit_p99_ms: f64,
    pub commit_max_ms: f64,
    /// Smallest share of commits any single process got (fairness).
    pub min_process_share: f64,
    pub runs: usize,
}

pub fn run(args: KvArgs) -> anyhow::Result<()> {
    if args.runs == 0 || args.secs == 0 {
        bail!("--runs and --secs must be positive");
    }
    let exe = std::env::current_exe()?;
    let total = args.procs.len() * args.writes.len() * args.runs;
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs, eta {eta} {msg}").expect("static template"),
    );
    let mut rows = Vec::new();
    for &procs in &args.procs {
        for &writes in &args.writes {
            let mut runs = Vec::new();
            for _ in 0..args.runs {
                bar.set_message(format!("{procs} proc × {writes} writes/txn"));
                runs.push(one_run(&exe, &args, procs, writes)?);
                bar.inc(1);
            }
            rows.push(median_row(procs, writes, runs));
        }
    }
    bar.finish_and_clear();
    println!("{}", markdown(&rows, &args));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&rows)?)?;
    }
    Ok(())
}

struct RunResult {
    txn_per_s: f64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
    min_share: f64,
}

fn one_run(exe: &std::path::Path, args: &KvArgs, procs: u32, writes: u32) -> anyhow::Result<RunResult> {
    let dir = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let path = dir.path().join("bench.sqlite");
    // Create the schema once so workers do not all race to do it.
    open_kv(&KvConfig::sqlite_file(path.clone()))?;
    let children = (0..procs)
        .map(|_| {
            Command::new(exe)
                .args(["bench", "kv-worker", "--path"])
                .arg(&path)
                .args(["--writes", &writes.to_string(), "--secs", &args.secs.to_string()])
                .args(["--value-bytes", &args.value_bytes.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .context("spawning a bench worker")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut hist = Histogram::<u64>::new(3).expect("valid sigfig");
    let mut counts = Vec::new();
    let mut elapsed = 0f64;
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("bench worker failed: {}", out.status);
        }
        let report: WorkerReport = serde_json::from_slice(&out.stdout).context("worker report")?;
        for l in &report.latencies_us {
            hist.record(*l).ok();
        }
        counts.push(report.commits);
        elapsed = elapsed.max(report.elapsed_s);
    }
    let total: u64 = counts.iter().sum();
    let min = counts.iter().copied().min().unwrap_or(0);
    Ok(RunResult {
        txn_per_s: total as f64 / elapsed.max(1e-9),
        p50_us: hist.value_at_quantile(0.5),
        p99_us: hist.value_at_quantile(0.99),
        max_us: hist.max(),
        min_share: if total == 0 { 0.0 } else { min as f64 / total as f64 },
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn median_row(procs: u32, writes: u32, runs: Vec<RunResult>) -> Row {
    let n = runs.len();
    let txn = median(runs.iter().map(|r| r.txn_per_s).collect());
    Row {
        procs,
        writes_per_txn: writes,
        txn_per_s: txn,
        keys_per_s: txn * writes as f64,
        commit_p50_ms: median(runs.iter().map(|r| r.p50_us as f64 / 1000.0).collect()),
        commit_p99_ms: median(runs.iter().map(|r| r.p99_us as f64 / 1000.0).collect()),
        commit_max_ms: median(runs.iter().map(|r| r.max_us as f64 / 1000.0).collect()),
        min_process_share: median(runs.iter().map(|r| r.min_share).collect()),
        runs: n,
    }
}

fn markdown(rows: &[Row], args: &KvArgs) -> String {
    let mut s = format!(
        "bench kv: SQLite, synchronous=FULL, {} s per run, median of {} runs, {}-byte values\n\n\
         | procs | writes/txn | txn/s | keys/s | commit p50 ms | commit p99 ms | commit max ms | min proc share |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.secs, args.runs, args.value_bytes
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1} | {:.2} |\n",
            r.procs,
            r.writes_per_txn,
            r.txn_per_s,
            r.keys_per_s,
            r.commit_p50_ms,
            r.commit_p99_ms,
            r.commit_max_ms,
            r.min_process_share
        ));
    }
    s
}

/// One worker: commit `writes`-key transactions in a closed loop.
pub fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let db = open_kv(&KvConfig::sqlite_file(args.path.clone()))?;
        let pid = std::process::id();
        let value = vec![0x5au8; args.value_bytes];
        let started = Instant::now();
        let deadline = started + Duration::from_secs(args.secs);
        let mut latencies_us = Vec::new();
        let mut n = 0u64;
        while Instant::now() < deadline {
            let t = Instant::now();
            let (value, writes) = (value.clone(), args.writes);
            db.run("bench_kv", move |txn| {
                let value = value.clone();
                async move {
                    for k in 0..writes {
                        // Time-ordered keys: a transaction's keys sort together.
                        txn.set(&foundationdb_tuple::pack(&("bench", pid, n, k)), &value)?;
                    }
                    Ok::<(), StorageError>(())
                }
            })
            .await?;
            latencies_us.push(t.elapsed().as_micros() as u64);
            n += 1;
        }
        let report = WorkerReport {
            commits: n,
            elapsed_s: started.elapsed().as_secs_f64(),
            latencies_us,
        };
        println!("{}", serde_json::to_string(&report)?);
        Ok(())
    })
}
