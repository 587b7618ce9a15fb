//! `meshmail-chaos run SCENARIO.toml [--out DIR]`.

use std::path::PathBuf;

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
    },
}

fn main() {
    let Command::Run {
        scenario,
        out,
        meshmail,
    } = Cli::parse().command;
    match run(scenario, out, meshmail) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("meshmail-chaos: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(scenario: PathBuf, out: Option<PathBuf>, meshmail: Option<PathBuf>) -> anyhow::Result<bool> {
    let scn = Scenario::load(&scenario)?;
    let bin = meshmail_soak::cluster::find_meshmail(meshmail.as_deref())?;
    let out = out.unwrap_or_else(|| PathBuf::from(format!("chaos-report-{}", meshmail_soak::events::unix_ms() / 1000)));
    std::fs::create_dir_all(&out)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let mut o = meshmail_chaos::runner::run(scn, &out, &bin).await?;
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
        anyhow::Ok(all_ok(&o.checks))
    })
}
