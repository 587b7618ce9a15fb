//! Writing a maildir tree (`meshmail export --format maildir`).
//!
//! Layout: Dovecot's `LAYOUT=fs` — the root is INBOX (`cur/ new/ tmp/`)
//! and a folder `Work/Projects` is the maildir `Work/Projects/` below it,
//! names in UTF-8 on disk (Dovecot: `maildir:DIR:LAYOUT=fs:UTF-8`; mutt
//! opens any of the directories). Every message goes to `cur/` (through
//! `tmp/`, as the maildir spec delivers) named
//! `SECONDS.UUID_10_DIGITS.meshmail:2,FLAGS`, its mtime set to its internal
//! date (to the millisecond). Keywords are letters `a`..`z` listed in the
//! folder's `dovecot-keywords` file (`N keyword` per line, `a` = 0), as
//! Dovecot keeps them: at most 26 per folder, a 27th is left out of the
//! file names (and counted by [`FolderWriter::keywords_dropped`]).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::flags;

/// Letters for keywords in a maildir file name.
pub const KEYWORDS_MAX: usize = 26;

/// The file naming the keyword letters of one maildir folder.
pub const KEYWORDS_FILE: &str = "dovecot-keywords";

/// Why a folder or message could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("folder {0:?} cannot be a maildir directory (a level is empty, `.`-led, or cur/new/tmp)")]
    BadFolderName(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The directory of `folder` (a meshmail name, `/` between levels) under
/// `root`: INBOX is the root itself.
pub fn folder_dir(root: &Path, folder: &str) -> Result<PathBuf, WriteError> {
    if folder.eq_ignore_ascii_case("INBOX") {
        return Ok(root.to_path_buf());
    }
    let mut dir = root.to_path_buf();
    for level in folder.split('/') {
        // A level that reads as a maildir's own directory, or as a Maildir++
        // folder, would not read back as this folder.
        if level.is_empty() || level.starts_with('.') || ["cur", "new", "tmp"].contains(&level) {
            return Err(WriteError::BadFolderName(folder.to_string()));
        }
        dir.push(level);
    }
    Ok(dir)
}

/// One maildir folder being written.
pub struct FolderWriter {
    dir: PathBuf,
    keywords: Vec<String>,
    pub keywords_dropped: usize,
}

impl FolderWriter {
    /// Creates `dir`'s `cur/`, `new/` and `tmp/`.
    pub fn create(dir: PathBuf) -> Result<FolderWriter, WriteError> {
        for sub in ["cur", "new", "tmp"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).map_err(io(&d))?;
        }
        Ok(FolderWriter {
            dir,
            keywords: Vec::new(),
            keywords_dropped: 0,
        })
    }

    /// Writes one message; `unique` makes its name unique in the folder
    /// (the UID).
    pub fn write(
        &mut self,
        unique: u32,
        item_flags: &[String],
        internal_date_ms: i64,
        raw: &[u8],
    ) -> Result<(), WriteError> {
        let info = flags::maildir_info(item_flags, |k| self.letter(k));
        let secs = internal_date_ms.div_euclid(1000);
        let name = format!("{secs}.U{unique:010}.meshmail");
        let tmp = self.dir.join("tmp").join(&name);
        let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(raw).map_err(io(&tmp))?;
        f.set_modified(system_time(internal_date_ms)).map_err(io(&tmp))?;
        drop(f);
        let cur = self.dir.join("cur").join(format!("{name}:{info}"));
        fs::rename(&tmp, &cur).map_err(io(&cur))
    }

    /// The letter of keyword `k` in this folder, given one if it has none
    /// yet and there is room.
    fn letter(&mut self, k: &str) -> Option<char> {
        let i = match self.keywords.iter().position(|x| x.eq_ignore_ascii_case(k)) {
            Some(i) => i,
            None if self.keywords.len() < KEYWORDS_MAX => {
                self.keywords.push(k.to_string());
                self.keywords.len() - 1
            }
            None => {
                self.keywords_dropped += 1;
                return None;
            }
        };
        Some((b'a' + i as u8) as char)
    }

    /// Writes the folder's `dovecot-keywords` (when it has keywords).
    pub fn finish(self) -> Result<usize, WriteError> {
        if !self.keywords.is_empty() {
            let path = self.dir.join(KEYWORDS_FILE);
            let text: String = self
                .keywords
                .iter()
                .enumerate()
                .map(|(i, k)| format!("{i} {k}\n"))
                .collect();
            fs::write(&path, text).map_err(io(&path))?;
        }
        Ok(self.keywords_dropped)
    }
}

/// `ms` since the epoch as a file time (before the epoch: the epoch).
pub fn system_time(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_nest_below_the_inbox() {
        let root = Path::new("/x");
        assert_eq!(folder_dir(root, "INBOX").unwrap(), PathBuf::from("/x"));
        assert_eq!(
            folder_dir(root, "Work/Projects").unwrap(),
            PathBuf::from("/x/Work/Projects")
        );
        for bad in ["cur", "a//b", ".hidden", "a/tmp"] {
            assert!(folder_dir(root, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_message_lands_in_cur_with_its_flags_and_date() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = FolderWriter::create(dir.path().to_path_buf()).unwrap();
        let flags = vec!["\\Seen".to_string(), "$Label1".to_string()];
        w.write(7, &flags, 1_796_461_387_123, b"Subject: x\r\n\r\nhi\r\n")
            .unwrap();
        assert_eq!(w.finish().unwrap(), 0);
        let names: Vec<_> = fs::read_dir(dir.path().join("cur"))
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].file_name(), "1796461387.U0000000007.meshmail:2,Sa");
        let mtime = names[0].metadata().unwrap().modified().unwrap();
        assert_eq!(mtime, system_time(1_796_461_387_123));
        assert_eq!(
            fs::read_to_string(dir.path().join(KEYWORDS_FILE)).unwrap(),
            "0 $Label1\n"
        );
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }
}
