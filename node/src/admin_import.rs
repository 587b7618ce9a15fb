//! `meshmail import ACCOUNT DIR`: the folders and messages of a maildir
//! tree, mbox files or `.eml` files (see `mailfmt::source`) into an
//! account, through a running node (`http_import`): the node stores each
//! message as IMAP APPEND does, so every write to the mailbox goes through
//! its shard actor. This command only reads files and asks.
//!
//! Idempotent: before a folder, it fetches the SHA-256 of every message
//! already there, and a message whose bytes hash to one of them is skipped
//! (as a multiset: a folder holding two identical copies gets two). Why
//! the body hash and not Message-ID: the ID is optional (drafts, some
//! automated mail, messages without headers), and two different messages
//! may share one (a list copy and a direct copy); equal bytes are exactly
//! what a re-run brings again. Per folder, because the same message in two
//! folders is two messages.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};
use meshmail_storage::blob::content_hash;

use crate::admin_http::{self, encode};
use crate::http_import::{Digests, ImportTarget, NewFolder, Stored};
use crate::mailfmt::source::{self, SourceFolder};
use crate::mailfmt::{MailItem, flags};

/// The counts of the summary line.
#[derive(Debug, Default)]
struct Tally {
    imported: usize,
    folders: usize,
    skipped: usize,
    errors: usize,
}

/// An account on a running node, as the admin import routes show it:
/// what `import` and `migrate` store messages through.
pub struct Target {
    node: String,
    email: String,
    pub info: ImportTarget,
}

/// Why the node refused one message (the others go on).
#[derive(Debug, thiserror::Error)]
pub enum StoreRefused {
    #[error("over the node's max message size ({0} bytes)")]
    TooBig(u64),
    #[error("the node refused it ({code}): {text}")]
    Other { code: u16, text: String },
}

/// One import run: the target account and the tally.
struct Run {
    target: Target,
    bar: indicatif::ProgressBar,
    tally: Tally,
}

pub async fn import(node: &str, account: &str, dir: &Path) -> anyhow::Result<()> {
    let target = Target::open(node, account).await?;
    let folders = source::discover(dir).with_context(|| format!("reading {}", dir.display()))?;
    let started = std::time::Instant::now();
    let bar = indicatif::ProgressBar::new_spinner().with_style(indicatif::ProgressStyle::with_template(
        "{spinner} importing into {prefix}: {pos} messages read ({per_sec}) {msg}",
    )?);
    bar.set_prefix(target.info.account.clone());
    let mut run = Run {
        target,
        bar,
        tally: Tally::default(),
    };
    for folder in folders {
        match folder {
            Ok(f) => run.folder(&f).await?,
            Err(e) => run.error(&e),
        }
    }
    run.bar.finish_and_clear();
    let t = &run.tally;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    println!(
        "imported {} messages into {} folders, {} skipped (already present), {} errors ({:.1} s, {:.0} msg/s)",
        t.imported,
        t.folders,
        t.skipped,
        t.errors,
        secs,
        (t.imported + t.skipped) as f64 / secs
    );
    if t.errors > 0 {
        bail!(
            "{} messages or folders were not imported (see the errors above)",
            t.errors
        );
    }
    Ok(())
}

impl Run {
    fn error(&mut self, e: &dyn std::fmt::Display) {
        self.tally.errors += 1;
        self.bar.suspend(|| eprintln!("error: {e}"));
    }

    /// Imports one folder; an error of one message is counted and the
    /// rest go on. Fails only when the node cannot be reached.
    async fn folder(&mut self, f: &SourceFolder) -> anyhow::Result<()> {
        self.bar.set_message(f.name.clone());
        let messages = match f.messages(self.target.info.max_message_bytes) {
            Ok(m) => m,
            Err(e) => {
                self.error(&e);
                return Ok(());
            }
        };
        if let Err(e) = self.target.ensure_folder(&f.name).await {
            self.error(&format!("folder {:?}: {e}", f.name));
            return Ok(());
        }
        let mut present = self.target.present(&f.name, 0).await?;
        self.tally.folders += 1;
        for item in messages {
            self.bar.inc(1);
            let item = match item {
                Ok(i) => i,
                Err(e) => {
                    self.error(&e);
                    continue;
                }
            };
            match present.get_mut(&content_hash(&item.raw)) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    self.tally.skipped += 1;
                }
                _ => match self.target.store(&f.name, &item).await? {
                    Ok(_) => self.tally.imported += 1,
                    Err(why) => self.error(&format!(
                        "folder {:?}: a message of {} bytes: {why}",
                        f.name,
                        item.raw.len()
                    )),
                },
            }
        }
        Ok(())
    }
}

impl Target {
    /// The account on the node at `node` (its HTTP listener).
    pub async fn open(node: &str, account: &str) -> anyhow::Result<Target> {
        let email = encode(account.trim());
        let answer = admin_http::request("GET", node, &format!("/admin/import/{email}"), None).await?;
        match answer.code {
            200 => {}
            404 => bail!("no such account: {account}"),
            code => bail!("the node answered {code}: {}", answer.text()),
        }
        let info: ImportTarget = serde_json::from_slice(&answer.body).context("not an import target document")?;
        Ok(Target {
            node: node.to_string(),
            email,
            info,
        })
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The account, percent-encoded for a route's path.
    pub fn email_path(&self) -> &str {
        &self.email
    }

    /// Creates the folder unless the account has it.
    pub async fn ensure_folder(&mut self, name: &str) -> anyhow::Result<()> {
        if self.info.mailboxes.iter().any(|m| m == name) {
            return Ok(());
        }
        let body = serde_json::to_vec(&NewFolder { name: name.to_string() })?;
        let path = format!("/admin/import/{}/folders", self.email);
        let answer = admin_http::request("POST", &self.node, &path, Some(("application/json", &body))).await?;
        if answer.code != 204 {
            bail!("the node refused to create it ({}): {}", answer.code, answer.text());
        }
        self.info.mailboxes.push(name.to_string());
        Ok(())
    }

    /// How many copies of each body the folder holds (above UID
    /// `after_uid`: 0 for all).
    pub async fn present(&self, name: &str, after_uid: u32) -> anyhow::Result<HashMap<String, usize>> {
        let path = format!(
            "/admin/import/{}/digests?mailbox={}&after_uid={after_uid}",
            self.email,
            encode(name)
        );
        let answer = admin_http::request("GET", &self.node, &path, None).await?;
        if answer.code != 200 {
            bail!(
                "reading what {name:?} holds: the node answered {}: {}",
                answer.code,
                answer.text()
            );
        }
        let digests: Digests = serde_json::from_slice(&answer.body).context("not a digest list")?;
        let mut present = HashMap::new();
        for d in digests.digests {
            *present.entry(d).or_insert(0) += 1;
        }
        Ok(present)
    }

    /// Stores one message: Ok(Err(why)) when the node refused it (that
    /// message alone), Err when the node could not be reached.
    pub async fn store(&self, folder: &str, item: &MailItem) -> anyhow::Result<Result<u32, StoreRefused>> {
        let flags = flags::canonical(&item.flags).join(" ");
        let path = format!(
            "/admin/import/{}/messages?mailbox={}&flags={}&internal_date_ms={}",
            self.email,
            encode(folder),
            encode(&flags),
            item.internal_date_ms
        );
        let answer = admin_http::request("POST", &self.node, &path, Some(("message/rfc822", &item.raw))).await?;
        Ok(match answer.code {
            200 => Ok(serde_json::from_slice::<Stored>(&answer.body)
                .context("not a stored answer")?
                .uid),
            413 => Err(StoreRefused::TooBig(self.info.max_message_bytes)),
            code => Err(StoreRefused::Other {
                code,
                text: answer.text(),
            }),
        })
    }
}
