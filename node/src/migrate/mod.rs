//! `meshmail migrate imap://USER@HOST:PORT --account ACCOUNT`: every
//! folder, message, flag, keyword and internal date of an account on
//! another IMAP server, copied into ACCOUNT through the running node's
//! import routes (the node's shard actors and ledger write, as for
//! `meshmail import`, on SQLite and FoundationDB alike). This command only
//! reads the source and asks the node.
//!
//! - `url`: the source URL and the TLS / plaintext rule;
//! - `client`, `wire`: a small IMAP client;
//! - `copy`: per folder, batches of UID FETCH and the checkpoints
//!   (UIDVALIDITY and the highest UID copied, kept in the store by the
//!   node: `model::migration`), so a rerun resumes and copies only what is
//!   new.

mod client;
mod copy;
mod url;
mod wire;

use std::io::BufRead;
use std::path::Path;

use anyhow::{Context, bail};

use crate::admin_import::Target;
use client::Client;
use url::SourceUrl;

/// What the command line gave.
pub use crate::cli::MigrateArgs as Options;

/// The password: the first line of stdin, or a file's content without
/// its final line break. Never from the command line (`ps` shows it).
fn password(opts: &Options) -> anyhow::Result<String> {
    let mut text = match (&opts.password_file, opts.password_stdin) {
        (Some(p), false) => read_file(p)?,
        (None, true) => {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            line
        }
        _ => bail!("give the source password with --password-stdin or --password-file FILE (one of them)"),
    };
    for end in ["\n", "\r"] {
        if text.ends_with(end) {
            text.pop();
        }
    }
    if text.is_empty() {
        bail!("the source password is empty");
    }
    Ok(text)
}

fn read_file(p: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
}

pub async fn migrate(opts: Options) -> anyhow::Result<()> {
    let url = SourceUrl::parse(&opts.url, opts.plaintext_on_loopback)?;
    // Refused before anything is read or sent: no password prompt, no
    // connection, for a plaintext URL off loopback.
    let addr = url.resolve().await?;
    let password = password(&opts)?;
    let ca = match &opts.tls_ca {
        Some(p) => Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    let target = Target::open(&opts.node, &opts.account).await?;
    let mut client = Client::connect(&url, addr, ca.as_deref()).await?;
    client.login(&url.user, &password).await?;
    let mut folders = Vec::new();
    client
        .command("LIST \"\" \"*\"", 0, |t| folders.extend(wire::list_item(&t)))
        .await?;
    // Parents before children, INBOX first.
    folders.sort_by_key(|f| (!f.name.eq_ignore_ascii_case("INBOX"), f.name.clone()));
    let started = std::time::Instant::now();
    let bar = indicatif::ProgressBar::new_spinner().with_style(indicatif::ProgressStyle::with_template(
        "{spinner} migrating into {prefix}: {pos} messages read ({per_sec}) {msg}",
    )?);
    bar.set_prefix(target.info.account.clone());
    let mut copier = copy::Copier {
        client,
        target,
        source: url.key(),
        rescan: opts.rescan,
        bar,
        tally: copy::Tally::default(),
    };
    for f in &folders {
        copier.folder(f).await?;
    }
    copier.bar.finish_and_clear();
    copier.client.logout().await;
    let t = &copier.tally;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    println!(
        "migrated {} messages into {} folders from {}, {} skipped (already present), {} refused ({:.1} s, {:.0} msg/s)",
        t.copied,
        t.folders,
        url.key(),
        t.skipped,
        t.refused,
        secs,
        t.copied as f64 / secs
    );
    if t.refused > 0 {
        bail!(
            "{} messages or folders were not copied (see the errors above)",
            t.refused
        );
    }
    Ok(())
}
