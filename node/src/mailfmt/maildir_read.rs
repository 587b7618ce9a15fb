//! Reading one maildir folder (`meshmail import`): the messages of its
//! `new/` and `cur/` (never `tmp/`, where deliveries are unfinished), flags
//! from the file name's info, keywords through the folder's
//! `dovecot-keywords`, the internal date from the file's mtime.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::maildir::KEYWORDS_FILE;
use super::{MailItem, ReadError, flags, has_header};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The message files of the maildir `dir`, ordered by the time their name
/// starts with (maildir names are `SECONDS.unique.host`), then by name.
pub fn message_files(dir: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let mut files = Vec::new();
    for sub in ["new", "cur"] {
        let d = dir.join(sub);
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries {
            let e = e.map_err(io(&d))?;
            if e.file_type().map_err(io(&d))?.is_file() && !e.file_name().as_encoded_bytes().starts_with(b".") {
                files.push(e.path());
            }
        }
    }
    files.sort_by_cached_key(|p| {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let secs: u64 = name.split('.').next().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
        (secs, name)
    });
    Ok(files)
}

/// The keywords of `dir`'s letters: `dovecot-keywords`, `N keyword` per
/// line (absent: none).
pub fn keyword_table(dir: &Path) -> Vec<Option<String>> {
    let mut table = vec![None; 26];
    let Ok(text) = fs::read_to_string(dir.join(KEYWORDS_FILE)) else {
        return table;
    };
    for line in text.lines() {
        if let Some((n, k)) = line.split_once(' ')
            && let Ok(n) = n.parse::<usize>()
            && n < table.len()
            && !k.is_empty()
        {
            table[n] = Some(k.to_string());
        }
    }
    table
}

/// Reads one message file; `index` (1-based) names it in errors.
pub fn read_message(
    path: &Path,
    index: usize,
    keywords: &[Option<String>],
    max_bytes: u64,
) -> Result<MailItem, ReadError> {
    let meta = fs::metadata(path).map_err(io(path))?;
    let shown = path.display().to_string();
    if meta.len() > max_bytes {
        return Err(ReadError::TooBig {
            path: shown,
            index,
            bytes: meta.len(),
            limit: max_bytes,
        });
    }
    let raw = fs::read(path).map_err(io(path))?;
    if !has_header(&raw) {
        return Err(ReadError::NoHeaders { path: shown, index });
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let info = name.rsplit_once(':').map_or("", |(_, info)| info);
    let flags = flags::from_maildir_info(info, |c| keywords.get((c as u8 - b'a') as usize).cloned().flatten());
    let mtime = meta.modified().map_err(io(path))?;
    let internal_date_ms = match mtime.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    };
    Ok(MailItem {
        flags,
        internal_date_ms,
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::super::maildir::{FolderWriter, system_time};
    use super::*;

    #[test]
    fn what_the_writer_wrote_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = FolderWriter::create(dir.path().to_path_buf()).unwrap();
        let a = ["\\Seen", "\\Flagged", "$Label1"].map(String::from).to_vec();
        w.write(2, &a, 2_000_500, b"Subject: a\r\n\r\na\r\n").unwrap();
        w.write(10, &["todo".to_string()], 1_000_000, b"Subject: b\n\nb\n")
            .unwrap();
        w.finish().unwrap();
        let files = message_files(dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let table = keyword_table(dir.path());
        let first = read_message(&files[0], 1, &table, 1 << 20).unwrap();
        assert_eq!(first.raw, b"Subject: b\n\nb\n", "the older one first");
        assert_eq!(first.flags, vec!["todo".to_string()]);
        assert_eq!(first.internal_date_ms, 1_000_000);
        let second = read_message(&files[1], 2, &table, 1 << 20).unwrap();
        assert_eq!(flags::canonical(&second.flags), flags::canonical(&a));
        assert_eq!(
            fs::metadata(&files[1]).unwrap().modified().unwrap(),
            system_time(2_000_500)
        );
    }

    #[test]
    fn too_big_and_headerless_messages_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("cur")).unwrap();
        let big = dir.path().join("cur/1.a.h:2,");
        fs::write(&big, vec![b'x'; 100]).unwrap();
        assert!(matches!(
            read_message(&big, 1, &[], 99),
            Err(ReadError::TooBig { bytes: 100, .. })
        ));
        assert!(matches!(
            read_message(&big, 1, &[], 100),
            Err(ReadError::NoHeaders { .. })
        ));
    }
}
