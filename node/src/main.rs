//! `meshmail`: the node binary. It wires the crates together and holds no
//! mail logic of its own: configuration, the command line, listeners, the
//! metrics endpoint and the admin commands.

mod admin;
mod admin_account;
mod admin_alias;
mod admin_backup;
mod admin_dns;
mod admin_export;
mod admin_http;
mod admin_import;
mod admin_mesh;
mod admin_queue;
mod admin_quota;
mod admin_sieve;
mod allocator;
mod cli;
mod cluster;
mod config;
mod config_auth;
mod config_compactor;
mod config_managesieve;
mod config_mesh;
mod config_outbound;
mod config_pop3;
mod config_publish;
mod config_upgrade;
mod config_validate;
mod day_one;
mod http;
mod http_cap;
mod http_day_one;
mod http_faults;
mod http_import;
mod http_jmap;
mod http_mesh;
mod https;
mod listeners;
mod mailfmt;
mod mesh;
mod metrics_help;
mod migrate;
mod serve;
mod serve_listeners;
mod store;
mod tls;
mod up;
mod up_restart;
mod vitals;
mod webmail;

use clap::Parser;

use cli::{
    AccountCmd, AliasCmd, BackupCmd, Cli, ClusterCmd, Command, DkimCmd, DnsCmd, DomainCmd, NodeCmd, QuarantineCmd,
    QueueCmd, QuotaCmd, SieveCmd, TokenCmd, VerifyCmd,
};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_json);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let cfg = config::Config::load(cli.config.as_deref(), &cli.overrides)?;
    // One check of every setting, after the flags are merged: a bad value
    // is refused here with its name, never clamped or found mid-start.
    let cfg = match &cli.command {
        Command::Serve(args) => cfg.with_serve_args(args),
        _ => cfg,
    };
    cfg.validate()?;
    match cli.command {
        Command::Serve(args) => {
            let opts = serve::ServeOptions { sink: args.bench_sink };
            serve::run(cfg, opts).await
        }
        Command::Domain {
            cmd: DomainCmd::Add { domain },
        } => admin::domain_add(&cfg, &domain).await,
        Command::Domain { cmd: DomainCmd::List } => admin::domain_list(&cfg).await,
        Command::Account {
            cmd: AccountCmd::Add { email, password_stdin },
        } => admin::account_add(&cfg, &email, password_stdin).await,
        Command::Account { cmd: AccountCmd::List } => admin::account_list(&cfg).await,
        Command::Account {
            cmd: AccountCmd::Delete { email, yes },
        } => admin_account::delete(&cfg, &email, yes).await,
        Command::Alias { cmd } => match cmd {
            AliasCmd::Add { address, targets } => admin_alias::add(&cfg, &address, &targets).await,
            AliasCmd::Remove { address } => admin_alias::remove(&cfg, &address).await,
            AliasCmd::List => admin_alias::list(&cfg).await,
        },
        Command::Sieve { cmd } => match cmd {
            SieveCmd::Put {
                account,
                name,
                file,
                activate,
            } => admin_sieve::put(&cfg, &account, &name, &file, activate).await,
            SieveCmd::List { account } => admin_sieve::list(&cfg, &account).await,
            SieveCmd::Activate { account, name } => admin_sieve::activate(&cfg, &account, &name).await,
            SieveCmd::Delete { account, name } => admin_sieve::delete(&cfg, &account, &name).await,
        },
        Command::Quota { cmd } => match cmd {
            QuotaCmd::Set {
                user,
                storage_kib,
                messages,
            } => admin_quota::set(&cfg, &user, storage_kib, messages).await,
            QuotaCmd::Show { user } => admin_quota::show(&cfg, &user).await,
        },
        Command::Verify {
            what: VerifyCmd::Ledger { chunk },
        } => {
            if !admin::verify_ledger(&cfg, chunk).await? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Quarantine { cmd } => match cmd {
            QuarantineCmd::List => admin::quarantine_list(&cfg).await,
            QuarantineCmd::Show { id } => admin::quarantine_show(&cfg, &id).await,
            QuarantineCmd::Redeliver { id, node } => admin::quarantine_redeliver(&id, &node).await,
            QuarantineCmd::Drop { id } => admin::quarantine_drop(&cfg, &id).await,
        },
        Command::Token {
            cmd: TokenCmd::Create { user },
        } => admin::token_create(&cfg, &user).await,
        Command::Queue { cmd } => match cmd {
            QueueCmd::List => admin_queue::list(&cfg).await,
            QueueCmd::Show { id } => admin_queue::show(&cfg, &id).await,
            QueueCmd::Retry { id } => admin_queue::retry(&cfg, &id).await,
            QueueCmd::Drop { id } => admin_queue::drop(&cfg, &id).await,
            QueueCmd::Bounce { id, reason } => admin_queue::bounce(&cfg, &id, &reason).await,
        },
        Command::Dkim { cmd } => match cmd {
            DkimCmd::Generate {
                domain,
                selector,
                algorithm,
            } => admin_queue::dkim_generate(&cfg, &domain, &selector, &algorithm).await,
            DkimCmd::Show { domain } => admin_queue::dkim_show(&cfg, &domain).await,
        },
        Command::Status { node } => {
            admin::status(&cfg).await?;
            match node {
                Some(addr) => admin_mesh::live_status(&addr).await,
                None => Ok(()),
            }
        }
        Command::Up(args) => up::run(&cfg, cli.config.as_deref(), args).await,
        Command::Node {
            cmd: NodeCmd::Drain { node, timeout_s },
        } => admin_mesh::drain(&node, timeout_s).await,
        Command::Node {
            cmd: NodeCmd::Undrain { node },
        } => admin_mesh::undrain(&node).await,
        Command::Node {
            cmd: NodeCmd::Forget { name, silence_s },
        } => admin::node_forget(&cfg, &name, silence_s).await,
        Command::Dns {
            cmd: DnsCmd::Records { domain },
        } => admin_dns::records(&cfg, &domain).await,
        Command::Export { account, format, dir } => admin_export::export(&cfg, &account, format, &dir).await,
        Command::Import { account, dir, node } => admin_import::import(&node, &account, &dir).await,
        Command::Migrate(opts) => migrate::migrate(opts).await,
        Command::Backup { cmd } => match cmd {
            BackupCmd::Create {
                dir,
                keys_per_read,
                pause_ms,
            } => {
                let pace = meshmail_storage::backup::create::Pace {
                    keys_per_read_max: keys_per_read,
                    pause_per_read: std::time::Duration::from_millis(pause_ms),
                };
                admin_backup::create(&cfg, &dir, pace).await
            }
            BackupCmd::Restore { dir, force } => admin_backup::restore(&cfg, &dir, force).await,
        },
        Command::Cluster { cmd } => match cmd {
            ClusterCmd::Init { dir } => cluster::init(&cfg, dir.as_deref()),
            ClusterCmd::Cert { node, dir } => cluster::cert(&cfg, &node, dir.as_deref()),
        },
    }
}

fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("MESHMAIL_LOG").unwrap_or_else(|_| EnvFilter::new("info,ractor_cluster=error"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
