//! The command line. Every subcommand's `--help` says what it does and what
//! it touches.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "meshmail",
    version,
    about = "meshmail: an actor-based distributed mail server",
    long_about = "meshmail: an actor-based distributed mail server.\n\n\
        With no configuration it runs on its embedded default: one SQLite file and a local \
        blob directory under --data-dir (./meshmail-data), listening on loopback only.\n\n\
        Quick start:\n  meshmail serve\n  meshmail domain add example.org\n  \
        echo secret | meshmail account add alice@example.org --password-stdin\n  meshmail account list"
)]
pub struct Cli {
    /// A TOML configuration file (see ops/config/). Flags override it.
    #[arg(long, global = true, env = "MESHMAIL_CONFIG")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub overrides: GlobalOverrides,

    /// Log as JSON lines instead of text (filter with MESHMAIL_LOG, e.g. "info,meshmail_storage=debug").
    #[arg(long, global = true)]
    pub log_json: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// Settings every subcommand shares.
#[derive(Debug, Args, Default)]
pub struct GlobalOverrides {
    /// Where the embedded store lives: meshmail.sqlite and blobs/ (created if missing).
    #[arg(long, global = true, env = "MESHMAIL_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node until interrupted (Ctrl-C or SIGTERM).
    Serve(ServeArgs),
    /// Manage the local mail domains.
    Domain {
        #[command(subcommand)]
        cmd: DomainCmd,
    },
    /// Manage accounts.
    Account {
        #[command(subcommand)]
        cmd: AccountCmd,
    },
}

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// This node's name in the mesh (default: node0). Each start gets a new generation.
    #[arg(long)]
    pub node_name: Option<String>,
    /// HTTP listener for /metrics, /health and /status (dev default 127.0.0.1:8080).
    #[arg(long)]
    pub http: Option<SocketAddr>,
}

#[derive(Debug, Subcommand)]
pub enum DomainCmd {
    /// Add a local domain: mail for it is accepted and stored here.
    Add { domain: String },
    /// List local domains.
    List,
}

#[derive(Debug, Subcommand)]
pub enum AccountCmd {
    /// Create an account (its domain must exist) with INBOX, Drafts, Sent, Trash, Junk and Archive.
    Add {
        /// user@domain
        email: String,
        /// Read the password from the first line of standard input (never from the command line).
        #[arg(long)]
        password_stdin: bool,
    },
    /// List accounts.
    List,
}
