//! `meshmail-soak soak run`: a long run of the load against a local mesh
//! with no injected faults, periodic samples (rate, latency, RSS, fds,
//! actors, queue depths) and the same end checks as the chaos runner.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::checks;
use crate::cluster::{LocalMesh, find_meshmail};
use crate::harness::{EndResult, Harness};
use crate::load::LoadConfig;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Nodes in the local mesh (more than 1 needs a build with --mesh).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Run time in seconds; the run stops by itself after it.
    #[arg(long, default_value_t = 600)]
    pub duration: u64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 5)]
    pub sample_every: u64,
    /// A TOML file with the load settings (the `[load]` table of a chaos
    /// scenario, without the header); defaults otherwise.
    #[arg(long)]
    pub load: Option<PathBuf>,
    /// First port of the node port blocks (4 ports per node, 10 apart).
    #[arg(long, default_value_t = 21000)]
    pub base_port: u16,
    /// Where the report goes (default soak-report-<unix time>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    /// Fail when a node's second-half RSS trend (slope × half the run, in
    /// % of its mean) is beyond ± this (a leak); without it the trend is
    /// only reported.
    #[arg(long)]
    pub max_memory_trend_pct: Option<f64>,
    /// Keep OUT/data (the nodes' store) after the checks; deleted otherwise.
    #[arg(long)]
    pub keep_data: bool,
}

pub fn run(args: SoakArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let ok = rt.block_on(run_async(args))?;
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}

async fn run_async(args: SoakArgs) -> anyhow::Result<bool> {
    let bin = find_meshmail(args.meshmail.as_deref())?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("soak-report-{}", crate::events::unix_ms() / 1000)));
    std::fs::create_dir_all(&out)?;
    let cfg: LoadConfig = match &args.load {
        Some(p) => toml::from_str(&std::fs::read_to_string(p)?)?,
        None => LoadConfig::default(),
    };
    let data = out.join("data");
    let mesh = LocalMesh::setup(
        &bin,
        &data,
        args.nodes,
        cfg.accounts,
        args.base_port,
        Vec::new(),
        &out.join("logs"),
    )
    .await?;
    let mut h = Harness::new(mesh);
    let result = drive(&mut h, &args, &cfg, &out).await;
    // Whatever happened, no node outlives the run.
    h.mesh.stop_all().await;
    let mut end = result?;
    if let Some(max) = args.max_memory_trend_pct {
        end.checks.extend(memory_bound_checks(&end, max));
    }
    write_report(&h, &args, &cfg, &end, &out)?;
    for c in &end.checks {
        println!("{}", c.line());
    }
    println!("report: {}", out.join("report.md").display());
    // The checks (read-back, `verify ledger`) are done: the store is only evidence now.
    if !args.keep_data {
        std::fs::remove_dir_all(&data).map_err(|e| anyhow::anyhow!("deleting {}: {e}", data.display()))?;
    }
    Ok(checks::all_ok(&end.checks))
}

/// Starts the nodes, the load and the sampler, takes the warm-up quiet
/// point, runs for `--duration` noting crashed nodes, then the end checks.
async fn drive(h: &mut Harness, args: &SoakArgs, cfg: &LoadConfig, out: &Path) -> anyhow::Result<EndResult> {
    for i in 0..args.nodes {
        h.start(i).await?;
    }
    let run_for = Duration::from_secs(args.duration);
    h.start_load(cfg.clone(), run_for);
    h.start_sampler(Duration::from_secs(args.sample_every.max(1)));
    // Warm up, then the first quiet point.
    tokio::time::sleep(run_for.mul_f64(0.1).min(Duration::from_secs(60))).await;
    h.actors_start = h.quiet_point().await;
    eprintln!("soak: warm-up quiet point taken; running until {} s", args.duration);
    let until = h.t0 + run_for;
    while tokio::time::Instant::now().into_std() < until {
        tokio::time::sleep(Duration::from_secs(10)).await;
        if let Some(l) = &h.load {
            eprintln!("soak: {:.0} s, {} acked", h.elapsed_s(), l.acked());
        }
        for i in 0..h.mesh.slots.len() {
            if let Some(status) = h.mesh.crashed(i) {
                h.events
                    .note("crashed", &h.mesh.slots[i].addrs.name.clone(), 0, &status);
            }
        }
    }
    h.finish(Duration::from_secs(3), out).await
}

/// `--max-memory-trend-pct`: each node's trend within the bound.
fn memory_bound_checks(end: &EndResult, max: f64) -> Vec<checks::Check> {
    end.memory_trend_pct
        .iter()
        .map(|(node, trend)| checks::Check {
            name: format!("memory_trend_bound_{node}"),
            value: trend.map(|t| format!("{t:+.1}%")).unwrap_or_else(|| "n/a".into()),
            ok: trend.is_some_and(|t| t.abs() <= max),
            note: format!("second-half RSS trend within ±{max}% of the mean"),
        })
        .collect()
}

/// The plots, `report.md` and `report.json` into `out`.
fn write_report(h: &Harness, args: &SoakArgs, cfg: &LoadConfig, end: &EndResult, out: &Path) -> anyhow::Result<()> {
    let notes = h.plots(out);
    let samples = h.samples.lock().expect("samples");
    let mut md = format!(
        "# meshmail soak run\n\n{} node(s), {} s, load: {}\n\n## End checks\n\n```\n",
        args.nodes,
        args.duration,
        serde_json::to_string(cfg)?
    );
    for c in &end.checks {
        md.push_str(&c.line());
        md.push('\n');
    }
    md.push_str("```\n\n");
    if let Some(l) = &end.load {
        md.push_str(&l.markdown());
    }
    md.push_str("\n![RSS](memory.png)\n\n![fds](fds.png)\n\n![rate](rate.png)\n");
    for n in notes
        .iter()
        .chain(&end.actor_notes)
        .chain(&end.golden.examples)
        .chain(&end.history.examples)
    {
        md.push_str(&format!("\n- {n}"));
    }
    std::fs::write(out.join("report.md"), md)?;
    std::fs::write(
        out.join("report.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "end": end,
            "procs": samples.procs,
            "rates": samples.rates,
        }))?,
    )?;
    Ok(())
}
