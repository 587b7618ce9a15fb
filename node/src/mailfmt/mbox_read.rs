//! Reading an mbox file (`meshmail import`), streaming: a file of any size
//! is read a line at a time and holds at most one message (bounded by the
//! size limit) in memory. mboxrd: every line starting with `From ` starts
//! a message, one `>` is taken off lines matching `>+From `, and the one
//! `\n` before the next `From ` line (or the end) belongs to the file, not
//! the message. `Status:`, `X-Status:` and `X-Keywords:` fields of the
//! header become flags and are removed (see `mbox`); the internal date is
//! the `From ` line's (the file's mtime when it has none).

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::mbox::is_from_line_quoted;
use super::{MailItem, ReadError, asctime, flags, has_header};

/// Bytes buffered past the size limit before a message is only counted
/// (the status fields removed later may bring it back under).
const SLACK_BYTES: u64 = 64 * 1024;

/// The messages of one mbox file, in order.
pub struct MboxReader {
    lines: BufReader<fs::File>,
    path: String,
    max_bytes: u64,
    file_mtime_ms: i64,
    /// The `From ` line that starts the next message; None at the end.
    next_from: Option<String>,
    index: usize,
}

impl MboxReader {
    pub fn open(path: &Path, max_bytes: u64, file_mtime_ms: i64) -> Result<MboxReader, ReadError> {
        let shown = path.display().to_string();
        let file = fs::File::open(path).map_err(|source| ReadError::Io {
            path: shown.clone(),
            source,
        })?;
        let mut lines = BufReader::new(file);
        let mut first = Vec::new();
        lines.read_until(b'\n', &mut first).map_err(|source| ReadError::Io {
            path: shown.clone(),
            source,
        })?;
        if first.is_empty() {
            return Ok(MboxReader {
                lines,
                path: shown,
                max_bytes,
                file_mtime_ms,
                next_from: None,
                index: 0,
            });
        }
        if !first.starts_with(b"From ") {
            return Err(ReadError::NotMbox { path: shown });
        }
        Ok(MboxReader {
            lines,
            path: shown,
            max_bytes,
            file_mtime_ms,
            next_from: Some(String::from_utf8_lossy(&first).into_owned()),
            index: 0,
        })
    }

    /// Reads the lines of the current message up to the next `From ` line
    /// or the end: (bytes kept, bytes seen, whether the last line ended).
    fn read_body(&mut self) -> Result<(Vec<u8>, u64, bool), ReadError> {
        let keep_max = self.max_bytes + SLACK_BYTES;
        let (mut kept, mut seen, mut ended) = (Vec::new(), 0u64, true);
        let mut line = Vec::new();
        self.next_from = None;
        loop {
            line.clear();
            let n = self
                .lines
                .read_until(b'\n', &mut line)
                .map_err(|source| ReadError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            if n == 0 {
                return Ok((kept, seen, ended));
            }
            if line.starts_with(b"From ") {
                self.next_from = Some(String::from_utf8_lossy(&line).into_owned());
                return Ok((kept, seen, ended));
            }
            ended = line.ends_with(b"\n");
            let unquoted: &[u8] = if line.starts_with(b">") && is_from_line_quoted(&line) {
                &line[1..]
            } else {
                &line
            };
            seen += unquoted.len() as u64;
            if seen <= keep_max {
                kept.extend_from_slice(unquoted);
            }
        }
    }
}

impl Iterator for MboxReader {
    type Item = Result<MailItem, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        let from = self.next_from.take()?;
        self.index += 1;
        let index = self.index;
        let (mut raw, seen, ended) = match self.read_body() {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if !ended {
            return Some(Err(ReadError::Truncated {
                path: self.path.clone(),
                index,
                why: "the file ends in the middle of a line",
            }));
        }
        // The separator's `\n` is the file's.
        raw.pop();
        let (flags, removed) = take_status_fields(&mut raw);
        let bytes = seen.saturating_sub(1 + removed);
        if bytes > self.max_bytes {
            return Some(Err(ReadError::TooBig {
                path: self.path.clone(),
                index,
                bytes,
                limit: self.max_bytes,
            }));
        }
        if !has_header(&raw) {
            return Some(Err(ReadError::NoHeaders {
                path: self.path.clone(),
                index,
            }));
        }
        let internal_date_ms = asctime::parse_from_line(from.trim_end()).unwrap_or(self.file_mtime_ms);
        Some(Ok(MailItem {
            flags,
            internal_date_ms,
            raw,
        }))
    }
}

/// Removes the `Status:`, `X-Status:` and `X-Keywords:` fields (with their
/// continuation lines) from `raw`'s header and returns the flags they name
/// and how many bytes went.
fn take_status_fields(raw: &mut Vec<u8>) -> (Vec<String>, u64) {
    let (mut status, mut x_status, mut keywords) = (None, None, None);
    let mut out = Vec::with_capacity(raw.len());
    let mut pos = 0;
    let mut dropping = false;
    while pos < raw.len() {
        let end = raw[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(raw.len(), |i| pos + i + 1);
        let line = &raw[pos..end];
        if line == b"\n" || line == b"\r\n" {
            break;
        }
        let continuation = line.starts_with(b" ") || line.starts_with(b"\t");
        if !continuation {
            let text = String::from_utf8_lossy(line);
            let (name, value) = text.split_once(':').unwrap_or(("", ""));
            let value = value.trim().to_string();
            dropping = true;
            match name.to_ascii_lowercase().as_str() {
                "status" => status = Some(value),
                "x-status" => x_status = Some(value),
                "x-keywords" => keywords = Some(value),
                _ => dropping = false,
            }
        }
        if !dropping {
            out.extend_from_slice(line);
        }
        pos = end;
    }
    out.extend_from_slice(&raw[pos..]);
    let removed = (raw.len() - out.len()) as u64;
    *raw = out;
    let flags = flags::from_mbox_headers(status.as_deref(), x_status.as_deref(), keywords.as_deref());
    (flags, removed)
}

#[cfg(test)]
mod tests {
    use super::super::mbox::MboxWriter;
    use super::*;

    fn read_all(path: &Path, max: u64) -> Vec<Result<MailItem, ReadError>> {
        MboxReader::open(path, max, 42).unwrap().collect()
    }

    #[test]
    fn what_the_writer_wrote_reads_back_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.mbox");
        let messages: Vec<(Vec<String>, i64, &[u8])> = vec![
            (
                vec!["\\Seen".into(), "$Label1".into()],
                1_000_000,
                b"Subject: a\r\n\r\nFrom x\r\n>From y\r\n",
            ),
            (vec![], 2_000_000, b"Subject: b\n\nno final newline"),
            (
                vec!["\\Draft".into()],
                3_000_000,
                b"Subject: c\n\nends with a blank line\n\n",
            ),
        ];
        let mut w = MboxWriter::create(path.clone()).unwrap();
        for (f, d, raw) in &messages {
            w.write(f, *d, raw).unwrap();
        }
        w.finish().unwrap();
        let got = read_all(&path, 1 << 20);
        assert_eq!(got.len(), 3);
        for ((f, d, raw), g) in messages.iter().zip(got) {
            let g = g.unwrap();
            assert_eq!(&g.raw[..], *raw);
            assert_eq!(g.internal_date_ms, *d);
            assert_eq!(flags::canonical(&g.flags), flags::canonical(f));
        }
    }

    #[test]
    fn a_cut_file_headerless_and_big_messages_are_errors_and_the_rest_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let big = "x".repeat(300);
        let text = format!(
            "From a Thu Jan  1 00:00:01 1970\nSubject: ok\nStatus: RO\n\nbody\n\n\
             From b Thu Jan  1 00:00:02 1970\nno header here\n\n\
             From c Thu Jan  1 00:00:03 1970\nSubject: big\n\n{big}\n\n\
             From d Thu Jan  1 00:00:04 1970\nSubject: cut\n\nhalf a li"
        );
        fs::write(&path, text).unwrap();
        let got = read_all(&path, 200);
        assert_eq!(got.len(), 4);
        let ok = got[0].as_ref().unwrap();
        assert_eq!(ok.raw, b"Subject: ok\n\nbody\n");
        assert_eq!(ok.flags, vec!["\\Seen".to_string()]);
        assert_eq!(ok.internal_date_ms, 1000);
        assert!(matches!(got[1], Err(ReadError::NoHeaders { index: 2, .. })));
        assert!(matches!(got[2], Err(ReadError::TooBig { index: 3, .. })));
        assert!(matches!(got[3], Err(ReadError::Truncated { index: 4, .. })));
    }

    #[test]
    fn a_file_not_starting_with_from_is_no_mbox() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        fs::write(&path, "Subject: x\n\n").unwrap();
        assert!(matches!(
            MboxReader::open(&path, 100, 0),
            Err(ReadError::NotMbox { .. })
        ));
    }
}
