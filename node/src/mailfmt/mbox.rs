//! Writing mbox files (`meshmail export --format mbox`), in the mboxrd
//! variant: each message follows a `From MAILER-DAEMON <asctime date>`
//! line (its internal date, UTC, to the second), every line of it that
//! matches `>*From ` gets one more `>`, and one `\n` ends it. The flags go
//! in `Status:`, `X-Status:` and `X-Keywords:` fields written above the
//! message's own header fields (see `flags`), with the message's own line
//! ending; `mbox_read` removes them again, so the message's bytes come back
//! unchanged. Layout of an export: `DIR/INBOX.mbox`, and a folder
//! `Work/Projects` in `DIR/Work/Projects.mbox`.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{asctime, flags};

/// The file name suffix of an exported mbox folder.
pub const SUFFIX: &str = ".mbox";

/// The file of `folder` (a meshmail name) under `root`.
pub fn folder_file(root: &Path, folder: &str) -> PathBuf {
    let mut path = root.to_path_buf();
    for level in folder.split('/') {
        path.push(level);
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(SUFFIX);
    path.set_file_name(name);
    path
}

/// One mbox file being written.
pub struct MboxWriter {
    out: BufWriter<fs::File>,
    path: PathBuf,
}

impl MboxWriter {
    pub fn create(path: PathBuf) -> std::io::Result<MboxWriter> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let out = BufWriter::new(fs::File::create(&path)?);
        Ok(MboxWriter { out, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(&mut self, item_flags: &[String], internal_date_ms: i64, raw: &[u8]) -> std::io::Result<()> {
        writeln!(self.out, "From MAILER-DAEMON {}", asctime::format(internal_date_ms))?;
        let eol: &[u8] = if raw.split(|&b| b == b'\n').next().is_some_and(|l| l.ends_with(b"\r")) {
            b"\r\n"
        } else {
            b"\n"
        };
        let (status, x_status, keywords) = flags::mbox_headers(item_flags);
        for (name, value) in [
            ("Status", Some(status)),
            ("X-Status", x_status),
            ("X-Keywords", keywords),
        ] {
            if let Some(v) = value {
                write!(self.out, "{name}: {v}")?;
                self.out.write_all(eol)?;
            }
        }
        for line in raw.split_inclusive(|&b| b == b'\n') {
            if is_from_line_quoted(line) {
                self.out.write_all(b">")?;
            }
            self.out.write_all(line)?;
        }
        self.out.write_all(b"\n")
    }

    pub fn finish(mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// True for a line `>*From ` (mboxrd quotes these, and unquotes one `>`).
pub fn is_from_line_quoted(line: &[u8]) -> bool {
    let gt = line.iter().take_while(|&&b| b == b'>').count();
    line[gt..].starts_with(b"From ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_map_to_files() {
        assert_eq!(folder_file(Path::new("/d"), "INBOX"), PathBuf::from("/d/INBOX.mbox"));
        assert_eq!(
            folder_file(Path::new("/d"), "Work/Pro"),
            PathBuf::from("/d/Work/Pro.mbox")
        );
    }

    #[test]
    fn from_lines_are_quoted_once_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.mbox");
        let mut w = MboxWriter::create(path.clone()).unwrap();
        let raw = b"Subject: q\r\n\r\nFrom here\r\n>From there\r\nno From\r\n";
        w.write(&["\\Seen".to_string(), "\\Flagged".to_string()], 0, raw)
            .unwrap();
        w.finish().unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "From MAILER-DAEMON Thu Jan  1 00:00:00 1970\nStatus: RO\r\nX-Status: F\r\nSubject: q\r\n\r\n\
             >From here\r\n>>From there\r\nno From\r\n\n"
        );
    }
}
