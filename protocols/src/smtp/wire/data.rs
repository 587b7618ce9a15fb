//! The message body after DATA (RFC 5321 §4.1.1.4, §4.5.2) and after BDAT
//! (RFC 3030).
//!
//! [`DataDecoder`] is a streaming state machine: it is fed the bytes read
//! from the socket in whatever chunks they come, finds the `CRLF.CRLF`
//! terminator, undoes dot-stuffing and enforces the size and line limits.
//! It looks at every input byte exactly once: what it carries from one
//! chunk to the next is a state of a few bytes, never the buffer.
//!
//! Line endings: only CRLF ends a line for the protocol, i.e. for finding
//! the terminator and for dot-unstuffing. A bare LF (or bare CR) is message
//! content and is kept as is; so `\n.\r\n` does not end the message, which
//! closes the "SMTP smuggling" ambiguity between servers that disagree on
//! bare LF. Whether one was seen is reported ([`DataDecoder::saw_bare_lf`])
//! so the session may refuse such messages. For the line-length limit only,
//! any LF ends a line, so a message with Unix line endings is not refused as
//! one giant line.

use super::reply::Reply;

/// RFC 5321 §4.5.3.1.6: a text line is at most 1000 octets including CRLF.
pub const DATA_LINE_MAX: usize = 1000;

/// Limits applied while decoding a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataLimits {
    /// Largest decoded message accepted, in octets.
    pub max_message_size: usize,
    /// Longest decoded line accepted, in octets including its line end.
    pub max_line_len: usize,
}

impl DataLimits {
    /// `max_message_size` with the RFC line limit.
    pub fn new(max_message_size: usize) -> DataLimits {
        DataLimits {
            max_message_size,
            max_line_len: DATA_LINE_MAX,
        }
    }
}

/// Why a message body was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    #[error("message exceeds the size limit")]
    Oversize,
    #[error("a line exceeds the line length limit")]
    LineTooLong,
    #[error("the end of the message has not been seen")]
    Incomplete,
}

impl DataError {
    /// The reply to send once the whole body has been read.
    pub fn reply(&self) -> Reply {
        match self {
            DataError::Oversize => Reply::message_too_big(),
            // RFC 5321 §4.5.3.1.10 words this reply as "500 Line too long".
            DataError::LineTooLong => Reply::new(500, Some((5, 5, 2)), "Line too long"),
            DataError::Incomplete => Reply::local_error(),
        }
    }
}

/// What one [`DataDecoder::feed`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feed {
    /// Input bytes used. When `done`, bytes past this (a pipelined command)
    /// belong to the caller; otherwise this is the whole input.
    pub consumed: usize,
    /// The terminator has been seen.
    pub done: bool,
}

/// Position in the line structure. Only CRLF starts a new line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line (also the very first byte: the CRLF that ended
    /// the DATA command counts as the one before a terminator).
    LineStart,
    /// A `.` at line start, not yet known to be the terminator or a stuffed dot.
    Dot,
    /// `.` CR at line start: an LF now ends the message.
    DotCr,
    /// Inside a line.
    InLine,
    /// After a CR inside a line.
    Cr,
    /// The terminator has been consumed.
    Done,
}

/// Streaming decoder of a DATA body; see the module doc.
#[derive(Debug, Clone)]
pub struct DataDecoder {
    state: State,
    limits: DataLimits,
    out: Vec<u8>,
    /// Decoded octets so far, counted on past the limit (for logs).
    size: u64,
    /// Decoded octets of the current line, line end included.
    line_len: usize,
    oversize: bool,
    line_too_long: bool,
    bare_lf: bool,
}

impl DataDecoder {
    pub fn new(limits: DataLimits) -> DataDecoder {
        DataDecoder {
            state: State::LineStart,
            limits,
            out: Vec::new(),
            size: 0,
            line_len: 0,
            oversize: false,
            line_too_long: false,
            bare_lf: false,
        }
    }

    /// Feeds the next bytes read from the connection.
    pub fn feed(&mut self, input: &[u8]) -> Feed {
        let mut i = 0;
        while i < input.len() {
            if self.state == State::InLine {
                // Fast path: copy up to the next CR or LF in one go.
                let rest = &input[i..];
                let run = rest
                    .iter()
                    .position(|&b| b == b'\r' || b == b'\n')
                    .unwrap_or(rest.len());
                if run > 0 {
                    self.emit(&rest[..run]);
                    i += run;
                    continue;
                }
            }
            let b = input[i];
            i += 1;
            match self.state {
                State::Done => {
                    i -= 1;
                    break;
                }
                State::LineStart if b == b'.' => self.state = State::Dot,
                State::LineStart | State::InLine => self.in_line(b),
                // A line that starts with a dot and is not the terminator:
                // the first dot is deleted (RFC 5321 §4.5.2), so ".." → "."
                // and ".x" → "x".
                State::Dot if b == b'\r' => self.state = State::DotCr,
                State::Dot => self.in_line(b),
                State::DotCr if b == b'\n' => {
                    self.state = State::Done;
                    break;
                }
                State::DotCr => {
                    // ".\r" then not LF: the dot was stuffing, the CR is data.
                    self.emit(b"\r");
                    self.after_cr(b);
                }
                State::Cr => self.after_cr(b),
            }
        }
        Feed {
            consumed: i,
            done: self.state == State::Done,
        }
    }

    /// A byte inside a line (not after CR).
    fn in_line(&mut self, b: u8) {
        match b {
            b'\r' => {
                self.emit(b"\r");
                self.state = State::Cr;
            }
            b'\n' => {
                self.bare_lf = true;
                self.emit_lf();
                self.state = State::InLine;
            }
            _ => {
                self.emit(&[b]);
                self.state = State::InLine;
            }
        }
    }

    /// A byte right after a CR.
    fn after_cr(&mut self, b: u8) {
        match b {
            b'\n' => {
                self.emit_lf();
                self.state = State::LineStart;
            }
            b'\r' => self.state = State::Cr,
            _ => self.state = State::InLine,
        }
        if b != b'\n' {
            self.emit(&[b]);
        }
    }

    fn emit_lf(&mut self) {
        self.emit(b"\n");
        self.line_len = 0;
    }

    /// Appends decoded bytes (an LF only as the last byte), checking limits.
    fn emit(&mut self, bytes: &[u8]) {
        self.size += bytes.len() as u64;
        self.line_len = self.line_len.saturating_add(bytes.len());
        if self.line_len > self.limits.max_line_len {
            self.line_too_long = true;
        }
        if self.size > self.limits.max_message_size as u64 {
            self.oversize = true;
        }
        if self.oversize || self.line_too_long {
            // The message will be refused: stop buffering and free what we
            // hold, but keep scanning for the terminator.
            if self.out.capacity() > 0 {
                self.out = Vec::new();
            }
        } else {
            self.out.extend_from_slice(bytes);
        }
    }

    /// The terminator has been seen.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decoded octets so far (also past the size limit).
    pub fn decoded_len(&self) -> u64 {
        self.size
    }

    /// A bare LF (not preceded by CR) occurred in the body.
    pub fn saw_bare_lf(&self) -> bool {
        self.bare_lf
    }

    /// The size limit has been exceeded.
    pub fn is_oversize(&self) -> bool {
        self.oversize
    }

    /// A line over the line limit has been seen.
    pub fn has_line_too_long(&self) -> bool {
        self.line_too_long
    }

    /// The limit already broken, if any (size first: it decides the reply).
    pub fn limit_exceeded(&self) -> Option<DataError> {
        if self.oversize {
            Some(DataError::Oversize)
        } else if self.line_too_long {
            Some(DataError::LineTooLong)
        } else {
            None
        }
    }

    /// The decoded message (the CRLF before the terminating dot included,
    /// empty for an empty message), or why there is none.
    pub fn finish(self) -> Result<Vec<u8>, DataError> {
        if let Some(e) = self.limit_exceeded() {
            return Err(e);
        }
        if self.state != State::Done {
            return Err(DataError::Incomplete);
        }
        Ok(self.out)
    }
}

/// A BDAT call made out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BdatError {
    #[error("the previous chunk has not been read yet")]
    ChunkInProgress,
    #[error("the LAST chunk has already been read")]
    AlreadyComplete,
}

/// Accounting for a message sent with BDAT chunks (RFC 3030). BDAT has no
/// dot-stuffing and no terminator: the session reads exactly the announced
/// number of octets after each command, and must read them even when the
/// message is refused, to stay in step with the client.
#[derive(Debug, Clone)]
pub struct BdatReader {
    max_message_size: usize,
    out: Vec<u8>,
    size: u64,
    remaining: u64,
    last: bool,
    oversize: bool,
}

impl BdatReader {
    pub fn new(max_message_size: usize) -> BdatReader {
        BdatReader {
            max_message_size,
            out: Vec::new(),
            size: 0,
            remaining: 0,
            last: false,
            oversize: false,
        }
    }

    /// Starts the chunk announced by `BDAT size [LAST]`. A chunk that would
    /// take the message past the limit marks it oversize at once, so
    /// nothing of it is buffered.
    pub fn begin_chunk(&mut self, size: u64, last: bool) -> Result<(), BdatError> {
        if self.remaining > 0 {
            return Err(BdatError::ChunkInProgress);
        }
        if self.last {
            return Err(BdatError::AlreadyComplete);
        }
        self.remaining = size;
        self.last = last;
        if self.size.saturating_add(size) > self.max_message_size as u64 {
            self.oversize = true;
            self.out = Vec::new();
        }
        Ok(())
    }

    /// Octets of the current chunk still to read.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Takes up to the rest of the current chunk from `input`; returns how
    /// many bytes it took (the rest belongs to the caller).
    pub fn feed(&mut self, input: &[u8]) -> usize {
        let take = usize::try_from(self.remaining).map_or(input.len(), |r| r.min(input.len()));
        let bytes = &input[..take];
        self.remaining -= take as u64;
        self.size += take as u64;
        if !self.oversize {
            self.out.extend_from_slice(bytes);
        }
        take
    }

    /// The current chunk has been read in full.
    pub fn chunk_complete(&self) -> bool {
        self.remaining == 0
    }

    /// The LAST chunk has been read in full.
    pub fn is_complete(&self) -> bool {
        self.last && self.remaining == 0
    }

    /// The message is, or will be, over the size limit.
    pub fn is_oversize(&self) -> bool {
        self.oversize
    }

    /// Octets read so far.
    pub fn decoded_len(&self) -> u64 {
        self.size
    }

    /// The message, once the LAST chunk has been read.
    pub fn finish(self) -> Result<Vec<u8>, DataError> {
        if self.oversize {
            return Err(DataError::Oversize);
        }
        if !self.is_complete() {
            return Err(DataError::Incomplete);
        }
        Ok(self.out)
    }
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
