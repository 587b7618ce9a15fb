//! `meshmail-soak`: benchmarks and load for meshmail.

use clap::{Parser, Subcommand};

use meshmail_soak::bench_kv;

#[derive(Debug, Parser)]
#[command(
    name = "meshmail-soak",
    version,
    about = "Benchmarks, load generation and long-run verifiers for meshmail"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks. Figures are medians of several runs; use a release build.
    Bench {
        #[command(subcommand)]
        what: Bench,
    },
    /// Long runs against a local mesh with periodic samples and end checks.
    Soak {
        #[command(subcommand)]
        what: Soak,
    },
}

#[derive(Debug, Subcommand)]
enum Soak {
    /// Runs the load (SMTP, IDLE, IMAP read/flag mix) against N local nodes
    /// for --duration seconds, samples rate, latency, RSS, fds, actors and
    /// queue depths, then checks: nothing lost or duplicated, ledger
    /// verified, UIDs/MODSEQs monotonic, no leaked actors. Exits 1 on any
    /// failed check.
    Run(meshmail_soak::soak_run::SoakArgs),
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// The storage layer: committed transactions/s and commit latency for
    /// several writes per transaction, from 1 and from several OS processes
    /// sharing one SQLite file (each run on a fresh file).
    Kv(bench_kv::KvArgs),
    /// SMTP ingest: N messages over C connections against one node, durable
    /// and in the server's no-storage sink mode, in the same run.
    Smtp(meshmail_soak::bench_smtp::SmtpArgs),
    /// IMAP: FETCH/SEARCH/STORE throughput with N sessions, and RSS per
    /// idle authenticated session with many IDLE sessions on one node.
    Imap(meshmail_soak::bench_imap::ImapArgs),
    /// A person with a big mailbox: APPEND a varied ~10 KB folder, SELECT +
    /// FETCH, four SEARCHes, STORE; SELECT, FETCH FLAGS and UID SEARCH
    /// UNSEEN on a 30,000-message INBOX; side by side with Dovecot's IMAP
    /// when installed, medians of --runs.
    Mailbox(meshmail_soak::bench_mailbox::MailboxArgs),
    /// Cold start: from exec to the ready line and to the first client
    /// served (LOGIN, SELECT, FETCH FLAGS) on a store holding --messages.
    Coldstart(meshmail_soak::bench_coldstart::ColdstartArgs),
    /// Memory after an imaptest-like burst: N IMAP clients for S seconds,
    /// then idle; RSS, SQLite's heap and threads before, through and after.
    Burst(meshmail_soak::bench_burst::BurstArgs),
    /// Outbound delivery: N messages submitted with AUTH over C connections
    /// to one node relaying to a local sink MX; msg/s and queue-to-remote
    /// latency p50/p99.
    Outbound(meshmail_soak::bench_outbound::OutboundArgs),
    /// The webmail path over JMAP: login + inbox load in bursts of 5,
    /// Email/query + Email/get of 50, sends through EmailSubmission/set;
    /// paired runs A/B/A with the node's CPU seconds and peak RSS.
    Jmap(meshmail_soak::bench_jmap::JmapArgs),
    /// Internal: one worker process of `bench kv`.
    #[command(hide = true)]
    KvWorker(bench_kv::WorkerArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench { what: Bench::Kv(args) } => bench_kv::run(args),
        Command::Bench {
            what: Bench::Smtp(args),
        } => meshmail_soak::bench_smtp::run(args),
        Command::Bench {
            what: Bench::Imap(args),
        } => meshmail_soak::bench_imap::run(args),
        Command::Bench {
            what: Bench::Mailbox(args),
        } => meshmail_soak::bench_mailbox::run(args),
        Command::Bench {
            what: Bench::Coldstart(args),
        } => meshmail_soak::bench_coldstart::run(args),
        Command::Bench {
            what: Bench::Burst(args),
        } => meshmail_soak::bench_burst::run(args),
        Command::Bench {
            what: Bench::Outbound(args),
        } => meshmail_soak::bench_outbound::run(args),
        Command::Bench {
            what: Bench::Jmap(args),
        } => meshmail_soak::bench_jmap::run(args),
        Command::Bench {
            what: Bench::KvWorker(args),
        } => bench_kv::worker(args),
        Command::Soak { what: Soak::Run(args) } => meshmail_soak::soak_run::run(args),
    }
}
