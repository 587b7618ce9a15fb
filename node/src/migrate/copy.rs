//! One folder's copy: EXAMINE it on the source, read its checkpoint from
//! the node, list the UIDs above it with their sizes, then UID FETCH them
//! in batches and store each message through the node's import route
//! (`admin_import::Target`), writing the checkpoint after every batch.
//!
//! Nothing is copied twice: a kill between a batch's messages and its
//! checkpoint leaves some of that batch stored; the next run fetches the
//! batch again and skips each message whose bytes the target folder holds
//! above the checkpoint's target UID (the same SHA-256 multiset as
//! `import`). When the source's UIDVALIDITY changed, its UIDs mean nothing
//! any more: the whole folder is read again and compared with the whole
//! target folder.

use std::collections::HashMap;

use anyhow::{Context, bail};
use meshmail_storage::blob::content_hash;
use meshmail_storage::model::migration::Checkpoint;

use super::client::{Client, ImapError, quote};
use super::wire::{self, Body, Fetched, Listed};
use crate::admin_http::{self, encode};
use crate::admin_import::Target;
use crate::mailfmt::{MailItem, flags};

/// Messages per UID FETCH.
const BATCH_MESSAGES: usize = 200;
/// Body bytes per UID FETCH (by RFC822.SIZE): memory stays bounded
/// whatever the messages' sizes.
const BATCH_BYTES: u64 = 32 << 20;
/// Copies between progress lines inside a batch (without a terminal).
const PROGRESS_EVERY: usize = 50;

#[derive(Debug, Default)]
pub struct Tally {
    pub copied: usize,
    pub skipped: usize,
    pub refused: usize,
    pub folders: usize,
}

pub struct Copier {
    pub client: Client,
    pub target: Target,
    /// The checkpoints' key (`SourceUrl::key`).
    pub source: String,
    /// Ignore checkpoints (after raising the size limit, say).
    pub rescan: bool,
    pub bar: indicatif::ProgressBar,
    pub tally: Tally,
}

/// The source folder's name with our separator (`/`); INBOX is INBOX in
/// any case. A `/` inside a level of a server with another separator
/// becomes `_` (it would otherwise split the level).
pub fn map_name(name: &str, delimiter: Option<char>) -> String {
    if name.eq_ignore_ascii_case("INBOX") {
        return "INBOX".into();
    }
    match delimiter {
        Some(d) if d != '/' => name.split(d).map(|l| l.replace('/', "_")).collect::<Vec<_>>().join("/"),
        _ => name.to_string(),
    }
}

/// Flags the store takes: the system flags but `\Recent` (per session)
/// and any non-standard `\Name`, and every keyword.
fn storable(flags_in: &[String]) -> Vec<String> {
    const SYSTEM: [&str; 5] = ["\\Seen", "\\Answered", "\\Flagged", "\\Deleted", "\\Draft"];
    let kept: Vec<String> = flags_in
        .iter()
        .filter(|f| !f.starts_with('\\') || SYSTEM.iter().any(|s| s.eq_ignore_ascii_case(f)))
        .cloned()
        .collect();
    flags::canonical(&kept)
}

impl Copier {
    fn error(&mut self, e: &dyn std::fmt::Display) {
        self.tally.refused += 1;
        self.bar.suspend(|| eprintln!("error: {e}"));
    }

    /// Copies one folder; fails only when the source or the node cannot be
    /// reached (a refused message or folder is counted and reported).
    pub async fn folder(&mut self, f: &Listed) -> anyhow::Result<()> {
        let name = map_name(&f.name, f.delimiter);
        self.bar.set_message(name.clone());
        if let Err(e) = self.target.ensure_folder(&name).await {
            self.error(&format!("folder {name:?}: {e}"));
            return Ok(());
        }
        self.tally.folders += 1;
        if f.noselect {
            return Ok(());
        }
        let (mut uidvalidity, mut exists) = (None, None);
        let examined = self
            .client
            .command(&format!("EXAMINE {}", quote(&f.wire)), 0, |t| {
                uidvalidity = uidvalidity.or(wire::code_number(&t, "UIDVALIDITY"));
                exists = wire::exists(&t).or(exists);
            })
            .await;
        match examined {
            Ok(()) => {}
            // That folder alone (gone meanwhile, or not readable).
            Err(e @ ImapError::Refused { .. }) => {
                self.error(&format!("folder {:?} on the source: {e}", f.name));
                return Ok(());
            }
            Err(e) => return Err(e).with_context(|| format!("opening {:?} on the source", f.name)),
        }
        // Some servers refuse `UID FETCH 1:*` in an empty folder.
        if exists == Some(0) {
            return Ok(());
        }
        let uidvalidity = uidvalidity.unwrap_or(0);
        let start = match self.checkpoint(&f.name).await? {
            Some(c) if c.uidvalidity == uidvalidity && !self.rescan => c,
            found => {
                if found.is_some() && !self.rescan {
                    self.bar
                        .suspend(|| println!("{}: UIDVALIDITY changed: reading the whole folder again", f.name));
                }
                Checkpoint {
                    source: self.source.clone(),
                    folder: f.name.clone(),
                    uidvalidity,
                    last_uid: 0,
                    target_uid: 0,
                }
            }
        };
        let todo = self.sizes(start.last_uid).await?;
        let mut present = self.target.present(&name, start.target_uid).await?;
        let mut cp = start;
        for batch in batches(&todo, self.target.info.max_message_bytes) {
            self.batch(&name, batch, &mut present, &mut cp).await?;
        }
        Ok(())
    }

    /// Every UID above `after` with its RFC822.SIZE, in UID order.
    async fn sizes(&mut self, after: u32) -> anyhow::Result<Vec<(u32, u64)>> {
        let mut out = Vec::new();
        let cmd = format!("UID FETCH {}:* (UID RFC822.SIZE)", after.saturating_add(1));
        self.client
            .command(&cmd, 0, |t| {
                if let Some(Fetched { uid: Some(u), size, .. }) = wire::fetch_item(t) {
                    // `n:*` names the last message even when its UID is
                    // below n (RFC 3501 §6.4.8).
                    if u > after {
                        out.push((u, size.unwrap_or(0)));
                    }
                }
            })
            .await?;
        out.sort_unstable();
        out.dedup_by_key(|m| m.0);
        Ok(out)
    }

    async fn batch(
        &mut self,
        name: &str,
        batch: &[(u32, u64)],
        present: &mut HashMap<String, usize>,
        cp: &mut Checkpoint,
    ) -> anyhow::Result<()> {
        let max = self.target.info.max_message_bytes;
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            return Ok(());
        };
        let mut got: HashMap<u32, Fetched> = HashMap::new();
        if batch.iter().any(|&(_, size)| size <= max) {
            let cmd = format!("UID FETCH {}:{} (UID FLAGS INTERNALDATE BODY.PEEK[])", first.0, last.0);
            self.client
                .command(&cmd, max, |t| {
                    if let Some(f @ Fetched { uid: Some(u), .. }) = wire::fetch_item(t) {
                        got.insert(u, f);
                    }
                })
                .await?;
        }
        for &(uid, size) in batch {
            self.bar.inc(1);
            // Expunged on the source meanwhile: nothing to copy.
            let Some(f) = got.remove(&uid) else { continue };
            let raw = match f.body {
                Some(Body::Bytes(raw)) if size <= max => raw,
                Some(Body::TooBig(n)) => {
                    self.error(&format!(
                        "{name}: UID {uid} has {n} bytes, over the node's limit of {max} bytes"
                    ));
                    continue;
                }
                _ if size > max => {
                    self.error(&format!(
                        "{name}: UID {uid} has {size} bytes, over the node's limit of {max} bytes"
                    ));
                    continue;
                }
                _ => {
                    self.error(&format!("{name}: UID {uid}: the source sent no body"));
                    continue;
                }
            };
            if let Some(n) = present.get_mut(&content_hash(&raw)).filter(|n| **n > 0) {
                *n -= 1;
                self.tally.skipped += 1;
                continue;
            }
            let item = MailItem {
                flags: storable(&f.flags.unwrap_or_default()),
                internal_date_ms: f
                    .internal_date_ms
                    .unwrap_or_else(|| meshmail_storage::model::now_ms() as i64),
                raw,
            };
            match self.target.store(name, &item).await? {
                Ok(stored) => {
                    self.tally.copied += 1;
                    cp.target_uid = cp.target_uid.max(stored);
                    if self.tally.copied.is_multiple_of(PROGRESS_EVERY) {
                        self.progress(name, &format!("at UID {uid}"));
                    }
                }
                Err(why) => self.error(&format!("{name}: UID {uid} ({} bytes): {why}", item.raw.len())),
            }
        }
        cp.last_uid = last.0;
        self.put_checkpoint(cp).await?;
        self.progress(name, &format!("to UID {} (checkpoint)", cp.last_uid));
        Ok(())
    }

    /// A progress line on stdout when no bar is drawn (not a terminal):
    /// logs, and a test that kills the run half-way, read them.
    fn progress(&self, name: &str, place: &str) {
        if self.bar.is_hidden() {
            let t = &self.tally;
            println!(
                "progress: {} copied, {} skipped, {} refused; {name} {place}",
                t.copied, t.skipped, t.refused
            );
        }
    }

    async fn checkpoint(&self, folder: &str) -> anyhow::Result<Option<Checkpoint>> {
        let path = format!(
            "/admin/import/{}/checkpoint?source={}&folder={}",
            self.target.email_path(),
            encode(&self.source),
            encode(folder)
        );
        let answer = admin_http::request("GET", self.target.node(), &path, None).await?;
        if answer.code != 200 {
            bail!(
                "reading the checkpoint of {folder:?}: the node answered {}: {}",
                answer.code,
                answer.text()
            );
        }
        serde_json::from_slice(&answer.body).context("not a checkpoint")
    }

    async fn put_checkpoint(&self, cp: &Checkpoint) -> anyhow::Result<()> {
        let path = format!("/admin/import/{}/checkpoint", self.target.email_path());
        let body = serde_json::to_vec(cp)?;
        let answer = admin_http::request("PUT", self.target.node(), &path, Some(("application/json", &body))).await?;
        if answer.code != 204 {
            bail!(
                "writing the checkpoint of {:?}: the node answered {}: {}",
                cp.folder,
                answer.code,
                answer.text()
            );
        }
        Ok(())
    }
}

/// `todo` cut into runs of at most [`BATCH_MESSAGES`] messages and
/// [`BATCH_BYTES`] bytes; a message over `max` (not fetched) costs nothing.
fn batches(todo: &[(u32, u64)], max: u64) -> Vec<&[(u32, u64)]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, &(_, size)) in todo.iter().enumerate() {
        let size = if size > max { 0 } else { size };
        if i > start && (i - start == BATCH_MESSAGES || bytes + size > BATCH_BYTES) {
            out.push(&todo[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < todo.len() {
        out.push(&todo[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_take_our_separator() {
        assert_eq!(map_name("inbox", Some('.')), "INBOX");
        assert_eq!(map_name("Archive.2024.Q1", Some('.')), "Archive/2024/Q1");
        assert_eq!(map_name("a/b.c", Some('.')), "a_b/c");
        assert_eq!(map_name("Archive/2024", Some('/')), "Archive/2024");
        assert_eq!(map_name("Flat", None), "Flat");
    }

    #[test]
    fn flags_the_store_takes() {
        let f: Vec<String> = ["\\Recent", "\\Seen", "$Label1", "\\Junk", "\\flagged"]
            .map(String::from)
            .into();
        assert_eq!(storable(&f), vec!["\\flagged", "\\Seen", "$Label1"]);
    }

    #[test]
    fn batches_are_bounded_by_count_and_bytes() {
        let todo: Vec<(u32, u64)> = (1..=450).map(|u| (u, 1000)).collect();
        let b = batches(&todo, 10_000);
        assert_eq!(b.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![200, 200, 50]);
        let big: Vec<(u32, u64)> = (1..=5).map(|u| (u, 20 << 20)).collect();
        assert_eq!(batches(&big, 50 << 20).len(), 5);
        // Over the limit: not fetched, so it weighs nothing.
        let over: Vec<(u32, u64)> = (1..=3).map(|u| (u, 60 << 20)).collect();
        assert_eq!(batches(&over, 50 << 20).len(), 1);
        assert!(batches(&[], 10).is_empty());
    }
}
