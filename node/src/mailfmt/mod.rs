//! Mail on disk, for `meshmail export` and `meshmail import`: maildir
//! trees, mbox files (mboxrd) and folders of `.eml` files. Pure format
//! code: it reads and writes files and knows nothing of the store or the
//! node; the commands (`admin_export`, `admin_import`) wire it up.
//!
//! What a message carries through every format: its folder (a meshmail
//! mailbox name, `/` between levels), its flags (the IMAP system flags and
//! keywords, as the store keeps them), its internal date and its bytes,
//! unchanged.

pub mod asctime;
pub mod flags;
pub mod maildir;
pub mod maildir_read;
pub mod mbox;
pub mod mbox_read;
pub mod source;

/// One message with what the store keeps beside its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailItem {
    /// IMAP flags: `\Seen`, `\Answered`, `\Flagged`, `\Deleted`, `\Draft`
    /// and keywords (no backslash).
    pub flags: Vec<String>,
    /// Milliseconds since the Unix epoch (IMAP INTERNALDATE, JMAP receivedAt).
    pub internal_date_ms: i64,
    /// The message exactly as stored.
    pub raw: Vec<u8>,
}

/// Why one message (or one folder) of a source could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: folder name is not UTF-8 ({lossy:?}); its messages were not imported")]
    FolderNotUtf8 { path: String, lossy: String },
    #[error("{path}: message {index} is cut short ({why}); the file looks truncated")]
    Truncated {
        path: String,
        index: usize,
        why: &'static str,
    },
    #[error("{path}: message {index} has {bytes} bytes, over the limit of {limit} bytes")]
    TooBig {
        path: String,
        index: usize,
        bytes: u64,
        limit: u64,
    },
    #[error("{path}: message {index} has no header fields (its first line is not `Name: value`)")]
    NoHeaders { path: String, index: usize },
    #[error("{path}: not an mbox file (it does not start with a `From ` line)")]
    NotMbox { path: String },
}

/// True when `raw` starts with a header field (`Name:` with a printable
/// ASCII name, RFC 5322 §2.2): a message without one is no message.
pub fn has_header(raw: &[u8]) -> bool {
    let line_end = raw.iter().position(|&b| b == b'\n').unwrap_or(raw.len());
    let line = &raw[..line_end];
    match line.iter().position(|&b| b == b':') {
        Some(0) | None => false,
        Some(colon) => line[..colon].iter().all(|&b| (33..=126).contains(&b)),
    }
}

#[cfg(test)]
mod tests {
    use super::has_header;

    #[test]
    fn a_header_field_starts_a_message() {
        assert!(has_header(b"Subject: x\r\n\r\nbody"));
        assert!(has_header(b"X-Odd-Name_1: v\n"));
        assert!(!has_header(b"just a body line\n"));
        assert!(!has_header(b"\r\nbody after an empty header"));
        assert!(!has_header(b": no name\n"));
        assert!(!has_header(b"Two words: no\n"));
        assert!(!has_header(b""));
    }
}
