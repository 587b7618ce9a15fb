//! What `meshmail import DIR` finds in DIR, folder by folder:
//! - a maildir tree (DIR has `cur/` or `new/`): DIR is INBOX; a
//!   subdirectory that is a maildir is a folder, nested as the directories
//!   are (Dovecot `LAYOUT=fs`, what `export` writes), and a top-level
//!   `.A.B` maildir is the folder `A/B` (Maildir++, Dovecot's default);
//! - a single file: an mbox, imported into INBOX;
//! - otherwise a folder of mbox files and `.eml` files, walked down:
//!   `Work/Projects.mbox` (or without the suffix) is the folder
//!   `Work/Projects`, and the `.eml` files of a directory are the folder of
//!   that directory (DIR itself: INBOX).
//!
//! Names are taken as UTF-8; a directory or file whose name is not is an
//! error for that folder alone.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::{MailItem, ReadError, maildir_read, mbox_read};

/// Where one folder's messages come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Maildir(PathBuf),
    Mbox(PathBuf),
    /// A directory's `.eml` files.
    Eml(PathBuf),
}

/// One folder of the source: its meshmail name and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFolder {
    pub name: String,
    pub origin: Origin,
}

/// The messages of a folder, one result each.
pub type Messages = Box<dyn Iterator<Item = Result<MailItem, ReadError>>>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn is_maildir(dir: &Path) -> bool {
    dir.join("cur").is_dir() || dir.join("new").is_dir()
}

/// The folders of `root` (see the module doc), each or its error.
pub fn discover(root: &Path) -> Result<Vec<Result<SourceFolder, ReadError>>, ReadError> {
    let meta = fs::metadata(root).map_err(io(root))?;
    let mut out = Vec::new();
    if meta.is_file() {
        out.push(Ok(SourceFolder {
            name: "INBOX".into(),
            origin: Origin::Mbox(root.to_path_buf()),
        }));
    } else if is_maildir(root) {
        out.push(Ok(SourceFolder {
            name: "INBOX".into(),
            origin: Origin::Maildir(root.to_path_buf()),
        }));
        walk_maildirs(root, &[], &mut out)?;
    } else {
        walk_files(root, &[], &mut out)?;
    }
    Ok(out)
}

/// The sorted entries of `dir`, each with its name when it is UTF-8.
fn entries(dir: &Path) -> Result<Vec<(PathBuf, Option<String>)>, ReadError> {
    let mut list = Vec::new();
    for e in fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        list.push((e.path(), e.file_name().to_str().map(str::to_string)));
    }
    list.sort();
    Ok(list)
}

fn not_utf8(path: &Path) -> ReadError {
    ReadError::FolderNotUtf8 {
        path: path.display().to_string(),
        lossy: path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
    }
}

fn walk_maildirs(
    dir: &Path,
    parents: &[String],
    out: &mut Vec<Result<SourceFolder, ReadError>>,
) -> Result<(), ReadError> {
    for (path, name) in entries(dir)? {
        if !path.is_dir() {
            continue;
        }
        let Some(name) = name else {
            out.push(Err(not_utf8(&path)));
            continue;
        };
        if ["cur", "new", "tmp"].contains(&name.as_str()) {
            continue;
        }
        if let Some(plusplus) = name.strip_prefix('.').filter(|n| parents.is_empty() && !n.is_empty()) {
            if is_maildir(&path) {
                let folder = plusplus.split('.').collect::<Vec<_>>().join("/");
                out.push(Ok(SourceFolder {
                    name: folder,
                    origin: Origin::Maildir(path),
                }));
            }
            continue;
        }
        let mut levels = parents.to_vec();
        levels.push(name);
        if is_maildir(&path) {
            out.push(Ok(SourceFolder {
                name: levels.join("/"),
                origin: Origin::Maildir(path.clone()),
            }));
        }
        walk_maildirs(&path, &levels, out)?;
    }
    Ok(())
}

fn walk_files(dir: &Path, parents: &[String], out: &mut Vec<Result<SourceFolder, ReadError>>) -> Result<(), ReadError> {
    let mut has_eml = false;
    for (path, name) in entries(dir)? {
        let Some(name) = name else {
            out.push(Err(not_utf8(&path)));
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let mut levels = parents.to_vec();
        if path.is_dir() {
            levels.push(name);
            walk_files(&path, &levels, out)?;
        } else if name.ends_with(".eml") {
            has_eml = true;
        } else {
            levels.push(name.strip_suffix(super::mbox::SUFFIX).unwrap_or(&name).to_string());
            out.push(Ok(SourceFolder {
                name: levels.join("/"),
                origin: Origin::Mbox(path),
            }));
        }
    }
    if has_eml {
        let name = if parents.is_empty() {
            "INBOX".to_string()
        } else {
            parents.join("/")
        };
        out.push(Ok(SourceFolder {
            name,
            origin: Origin::Eml(dir.to_path_buf()),
        }));
    }
    Ok(())
}

fn mtime_ms(path: &Path) -> i64 {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

impl SourceFolder {
    /// Its messages in order, each read when the iterator gets to it.
    pub fn messages(&self, max_bytes: u64) -> Result<Messages, ReadError> {
        match &self.origin {
            Origin::Mbox(path) => Ok(Box::new(mbox_read::MboxReader::open(path, max_bytes, mtime_ms(path))?)),
            Origin::Maildir(dir) => {
                let table = maildir_read::keyword_table(dir);
                let files = maildir_read::message_files(dir)?;
                Ok(Box::new(files.into_iter().enumerate().map(move |(i, f)| {
                    maildir_read::read_message(&f, i + 1, &table, max_bytes)
                })))
            }
            Origin::Eml(dir) => {
                let mut files: Vec<PathBuf> = entries(dir)?
                    .into_iter()
                    .filter(|(p, n)| n.as_deref().is_some_and(|n| n.ends_with(".eml")) && p.is_file())
                    .map(|(p, _)| p)
                    .collect();
                files.sort();
                Ok(Box::new(files.into_iter().enumerate().map(move |(i, f)| {
                    maildir_read::read_message(&f, i + 1, &[], max_bytes)
                })))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(root: &Path) -> Vec<String> {
        discover(root)
            .unwrap()
            .into_iter()
            .map(|f| match f {
                Ok(f) => f.name,
                Err(e) => format!("error: {e}"),
            })
            .collect()
    }

    #[test]
    fn a_maildir_tree_in_both_layouts() {
        let d = tempfile::tempdir().unwrap();
        for sub in [
            "cur",
            "Work/cur",
            "Work/Projects/new",
            ".Lists.rust/cur",
            "Empty/Deeper/cur",
        ] {
            fs::create_dir_all(d.path().join(sub)).unwrap();
        }
        assert_eq!(
            names(d.path()),
            ["INBOX", "Lists/rust", "Empty/Deeper", "Work", "Work/Projects"]
        );
    }

    #[test]
    fn a_folder_of_mbox_and_eml_files() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("Work")).unwrap();
        for f in ["INBOX.mbox", "Work/Projects.mbox", "Work/a.eml", "Sent", "x.eml"] {
            fs::write(d.path().join(f), "From x\n").unwrap();
        }
        assert_eq!(names(d.path()), ["INBOX", "Sent", "Work/Projects", "Work", "INBOX"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_name_that_is_not_utf8_is_an_error_for_that_folder_alone() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("cur")).unwrap();
        fs::create_dir_all(d.path().join(std::ffi::OsStr::from_bytes(b"bad\xff")).join("cur")).unwrap();
        fs::create_dir_all(d.path().join("good/cur")).unwrap();
        let got = names(d.path());
        assert_eq!(got.len(), 3);
        assert!(got[1].starts_with("error:") && got[1].contains("not UTF-8"), "{got:?}");
        assert_eq!(got[2], "good");
    }
}
