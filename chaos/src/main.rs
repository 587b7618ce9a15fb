//! `meshmail-chaos run SCENARIO.toml [--out DIR] [--seed N] [--keep-data]`
//! and `meshmail-chaos compare A B`.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use meshmail_chaos::scenario::Scenario;
use meshmail_soak::checks::all_ok;

#[derive(Debug, Parser)]
#[command(name = "meshmail-chaos", version, about = "Chaos runner for a local meshmail mesh")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs a scenario (see chaos/README.md): starts its nodes and load,
    /// injects its faults, then prints one line per end check and writes
    /// the report. Exits 1 when any check fails, 2 when the run itself failed.
    Run {
        scenario: PathBuf,
        /// Report directory (default chaos-report-<unix time>/).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The meshmail binary (default: next to this one).
        #[arg(long)]
        meshmail: Option<PathBuf>,
        /// The schedules' seed (overrides the scenario's `seed`): the same
        /// seed and scenario give the same schedule (printed in report.json).
        #[arg(long)]
        seed: Option<u64>,
        /// Keep OUT/data (the nodes' store) after the checks; by default it
        /// is deleted once the report is written.
        #[arg(long)]
        keep_data: bool,
        /// Drive a mesh started elsewhere, described by this cluster file
        /// (nodes' addresses, kill and restart commands; see chaos/README.md).
        #[arg(long, value_name = "CLUSTER.toml")]
        attach: Option<PathBuf>,
    },
    /// Prints the differences between two runs: A and B are run output
    /// directories or their report.json files.
    Compare { a: PathBuf, b: PathBuf },
}

fn main() {
    let result = match Cli::parse().command {
        Command::Run {
            scenario,
            out,
            meshmail,
            seed,
            keep_data,
            attach,
        } => run(scenario, out, meshmail, seed, keep_data, attach),
        Command::Compare { a, b } => compare(&a, &b),
    };
    match result {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("meshmail-chaos: {e:#}");
            std::process::exit(2);
        }
    }
}

fn compare(a: &Path, b: &Path) -> anyhow::Result<bool> {
    let (a, b) = (meshmail_chaos::compare::load(a)?, meshmail_chaos::compare::load(b)?);
    print!("{}", meshmail_chaos::compare::render(&a, &b));
    Ok(true)
}

fn run(
    scenario: PathBuf,
    out: Option<PathBuf>,
    meshmail: Option<PathBuf>,
    seed: Option<u64>,
    keep_data: bool,
    attach: Option<PathBuf>,
) -> anyhow::Result<bool> {
    let mut scn = Scenario::load(&scenario)?;
    let cluster = attach
        .as_deref()
        .map(meshmail_soak::attached::ClusterFile::load)
        .transpose()?;
    if seed.is_some() {
        scn.seed = seed;
    }
    let bin = meshmail_soak::cluster::find_meshmail(meshmail.as_deref())?;
    let out = out.unwrap_or_else(|| PathBuf::from(format!("chaos-report-{}", meshmail_soak::events::unix_ms() / 1000)));
    std::fs::create_dir_all(&out)?;
    // Disk faults: the data directory is a small tmpfs of the run's own.
    let tmpfs = match scn.disk.tmpfs_mib {
        Some(mib) if cluster.is_none() => Some(meshmail_chaos::disk::DataTmpfs::mount(&out.join("data"), mib)?),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let passed = rt.block_on(async {
        let mut running = Box::pin(meshmail_chaos::runner::run(scn, &out, &bin, cluster.as_ref()));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut o = tokio::select! {
            o = &mut running => o?,
            _ = tokio::signal::ctrl_c() => return Ok(None),
            _ = term.recv() => return Ok(None),
        };
        let timeline: String = o
            .events
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .map(|l| l + "\n")
            .collect();
        meshmail_chaos::report::write(&mut o, &out, &timeline)?;
        for c in &o.checks {
            println!("{}", c.line());
        }
        println!("report: {}", out.join("report.md").display());
        anyhow::Ok(Some(all_ok(&o.checks)))
    });
    // Dropping the run (above, when a signal came first) killed its nodes
    // and removed its namespaces; this catches anything still registered.
    meshmail_chaos::netns::teardown_all();
    if let Some(t) = tmpfs {
        // A run that failed to complete keeps its data for the post-mortem.
        let keep = keep_data || !matches!(passed, Ok(Some(_)));
        t.finish(keep)?;
    }
    let Some(passed) = passed? else {
        eprintln!("meshmail-chaos: interrupted; nodes stopped, namespaces removed, no report");
        std::process::exit(130);
    };
    // The checks (read-back, `verify ledger`) are done: the store is only
    // evidence now, and runs are long and many.
    let data = out.join("data");
    if keep_data {
        println!("data kept: {}", data.display());
    } else if data.exists() {
        std::fs::remove_dir_all(&data).map_err(|e| anyhow::anyhow!("deleting {}: {e}", data.display()))?;
    }
    Ok(passed)
}
