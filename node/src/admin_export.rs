//! `meshmail export ACCOUNT --format maildir|mbox DIR`: every folder of an
//! account with its messages' flags, keywords and internal dates, as a
//! maildir tree or mbox files (see `mailfmt`). Read-only, so it opens the
//! store and the blob store directly, like the other admin commands that
//! read (`queue list`, `verify ledger`), with or without a node running;
//! each page of [`ROWS_PER_READ`] messages is one read transaction (a
//! folder of any size stays within FDB's 5 s), so an export taken while
//! mail arrives is consistent per page, not as a whole.

use std::path::Path;

use anyhow::{Context, bail};
use meshmail_storage::blob::BlobStore;
use meshmail_storage::model::mailboxes::{self, Mailbox};
use meshmail_storage::model::messages::MessageMeta;
use meshmail_storage::model::{accounts, message_reads};
use meshmail_storage::{Database, ids::AccountId};

use crate::config::Config;
use crate::mailfmt::maildir::{self, FolderWriter};
use crate::mailfmt::mbox::{self, MboxWriter};

/// Message rows read per transaction (bodies are fetched after it).
const ROWS_PER_READ: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A maildir tree (Dovecot LAYOUT=fs): DIR is INBOX, DIR/Work/Projects a folder.
    Maildir,
    /// mboxrd files: DIR/INBOX.mbox, DIR/Work/Projects.mbox.
    Mbox,
}

/// Where one folder's messages go.
enum Sink {
    Maildir(FolderWriter),
    Mbox(MboxWriter),
}

impl Sink {
    fn open(format: Format, dir: &Path, folder: &str) -> anyhow::Result<Sink> {
        Ok(match format {
            Format::Maildir => Sink::Maildir(FolderWriter::create(maildir::folder_dir(dir, folder)?)?),
            Format::Mbox => {
                let path = mbox::folder_file(dir, folder);
                Sink::Mbox(MboxWriter::create(path.clone()).with_context(|| path.display().to_string())?)
            }
        })
    }

    fn write(&mut self, m: &MessageMeta, raw: &[u8]) -> anyhow::Result<()> {
        match self {
            Sink::Maildir(w) => w.write(m.uid, &m.flags, m.internal_date_ms, raw)?,
            Sink::Mbox(w) => {
                let path = w.path().display().to_string();
                w.write(&m.flags, m.internal_date_ms, raw).context(path)?
            }
        }
        Ok(())
    }

    /// Closes the folder; returns how many keywords had no maildir letter.
    fn finish(self) -> anyhow::Result<usize> {
        match self {
            Sink::Maildir(w) => Ok(w.finish()?),
            Sink::Mbox(w) => {
                w.finish()?;
                Ok(0)
            }
        }
    }
}

#[derive(Debug, Default)]
struct Tally {
    messages: usize,
    folders: usize,
    bytes: u64,
    keywords_dropped: usize,
    errors: usize,
}

pub async fn export(cfg: &Config, email: &str, format: Format, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!(
            "{} is not empty: export writes into a new or empty directory",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    let (db, blobs) = crate::store::open_with_blobs(cfg).await?;
    let email = email.trim().to_ascii_lowercase();
    let e = email.clone();
    let account = db
        .read("admin_export_account", move |txn| {
            let e = e.clone();
            async move { accounts::get(&txn, &e).await }
        })
        .await?
        .with_context(|| format!("no such account: {email}"))?;
    let id = account.id;
    let folders = db
        .read("admin_export_mailboxes", move |txn| async move {
            mailboxes::list(&txn, id).await
        })
        .await?;
    let total = message_total(&db, id, &folders).await?;
    let bar = indicatif::ProgressBar::new(total).with_style(indicatif::ProgressStyle::with_template(
        "{bar:30} exporting {prefix}: {pos}/{len} messages ({per_sec}, eta {eta}) {msg}",
    )?);
    bar.set_prefix(email.clone());
    let started = std::time::Instant::now();
    let mut tally = Tally::default();
    for mb in &folders {
        bar.set_message(mb.name.clone());
        let mut sink = Sink::open(format, dir, &mb.name).with_context(|| format!("folder {:?}", mb.name))?;
        export_folder(&db, &blobs, id, mb, &mut sink, &bar, &mut tally).await?;
        tally.keywords_dropped += sink.finish()?;
        tally.folders += 1;
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    println!(
        "exported {} messages ({} bytes) from {} folders of {email} to {} as {format:?} in {secs:.1} s \
         ({:.0} msg/s), {} keywords left out (over 26 in a maildir folder), {} errors",
        tally.messages,
        tally.bytes,
        tally.folders,
        dir.display(),
        tally.messages as f64 / secs,
        tally.keywords_dropped,
        tally.errors
    );
    if tally.errors > 0 {
        bail!("{} messages could not be exported (see the errors above)", tally.errors);
    }
    Ok(())
}

/// How many messages the folders hold (for the progress bar).
async fn message_total(db: &Database, account: AccountId, folders: &[Mailbox]) -> anyhow::Result<u64> {
    let ids: Vec<_> = folders.iter().map(|m| m.id).collect();
    let total = db
        .read("admin_export_counts", move |txn| {
            let ids = ids.clone();
            async move {
                let mut n = 0;
                for id in ids {
                    n += mailboxes::counts(&txn, account, id).await?.messages.max(0) as u64;
                }
                Ok::<_, meshmail_storage::StorageError>(n)
            }
        })
        .await?;
    Ok(total)
}

/// One folder, a page of rows per read transaction, each body read from
/// the blob store after it. A body that cannot be read is an error for
/// that message; the rest go on.
async fn export_folder(
    db: &Database,
    blobs: &BlobStore,
    account: AccountId,
    mb: &Mailbox,
    sink: &mut Sink,
    bar: &indicatif::ProgressBar,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let mailbox = mb.id;
    let mut from = 1;
    loop {
        let page = db
            .read("admin_export_rows", move |txn| async move {
                message_reads::list_meta(&txn, account, mailbox, from, None, ROWS_PER_READ).await
            })
            .await?;
        let Some(last) = page.last() else { break };
        from = last.uid + 1;
        let full = page.len() == ROWS_PER_READ;
        for m in &page {
            match blobs.get(db, &m.body).await {
                Ok(raw) => {
                    sink.write(m, &raw)?;
                    tally.messages += 1;
                    tally.bytes += raw.len() as u64;
                }
                Err(e) => {
                    tally.errors += 1;
                    bar.suspend(|| eprintln!("error: {:?} UID {}: body unreadable: {e}", mb.name, m.uid));
                }
            }
            bar.inc(1);
        }
        if !full {
            break;
        }
    }
    Ok(())
}
