//! A deliberately naive DATA decoder, the oracle for differential tests of
//! [`DataDecoder`](crate::smtp::wire::data::DataDecoder): it sees the whole input at
//! once, searches for the terminator from the start, splits into lines and
//! unstuffs them. Quadratic in places, obviously right, never used to serve.

use super::data::{DataDecoder, DataLimits};

/// Everything the two decoders must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub done: bool,
    /// Input bytes used (all of them when not done).
    pub consumed: usize,
    /// The message, when done and within limits.
    pub message: Option<Vec<u8>>,
    /// Decoded length (when done).
    pub decoded_len: Option<u64>,
    pub oversize: bool,
    pub line_too_long: bool,
    pub bare_lf: bool,
}

/// Decodes `input` the simple way.
pub fn reference_decode(input: &[u8], limits: DataLimits) -> Outcome {
    // The CRLF that ended the DATA command precedes the first line, so an
    // immediate ".\r\n" is the terminator of an empty message.
    let mut framed = b"\r\n".to_vec();
    framed.extend_from_slice(input);
    let Some(at) = (0..framed.len()).find(|&i| framed[i..].starts_with(b"\r\n.\r\n")) else {
        return Outcome {
            done: false,
            consumed: input.len(),
            message: None,
            decoded_len: None,
            oversize: false,
            line_too_long: false,
            bare_lf: false,
        };
    };
    // Wire text of the message: up to and including the CRLF before ".".
    let wire = &framed[2..at + 2];
    let consumed = at + 3;

    // Split after each CRLF; every line is non-empty and ends with CRLF.
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    for i in 0..wire.len() {
        if wire[i] == b'\n' && i > 0 && wire[i - 1] == b'\r' {
            lines.push(&wire[start..=i]);
            start = i + 1;
        }
    }
    let mut message = Vec::new();
    for line in lines {
        // Never the bare "." line: that would have been the terminator.
        if line[0] == b'.' {
            message.extend_from_slice(&line[1..]);
        } else {
            message.extend_from_slice(line);
        }
    }

    let bare_lf = (0..wire.len()).any(|i| wire[i] == b'\n' && (i == 0 || wire[i - 1] != b'\r'));
    let oversize = message.len() > limits.max_message_size;
    let line_too_long = message
        .split_inclusive(|&b| b == b'\n')
        .any(|line| line.len() > limits.max_line_len);
    Outcome {
        done: true,
        consumed,
        decoded_len: Some(message.len() as u64),
        message: (!oversize && !line_too_long).then_some(message),
        oversize,
        line_too_long,
        bare_lf,
    }
}

/// Runs the streaming decoder over `input` cut into chunks of the given
/// sizes (cycled; a zero size feeds an empty chunk), and reports the same
/// facts as [`reference_decode`].
pub fn stream_decode(input: &[u8], limits: DataLimits, chunk_sizes: &[usize]) -> Outcome {
    let mut decoder = DataDecoder::new(limits);
    // All-zero sizes would never make progress: feed everything at once.
    let all_zero = chunk_sizes.iter().all(|&s| s == 0);
    let mut pos: usize = 0;
    let mut consumed = 0;
    for k in 0.. {
        let size = if all_zero {
            input.len()
        } else {
            chunk_sizes[k % chunk_sizes.len()]
        };
        let end = pos.saturating_add(size).min(input.len());
        let feed = decoder.feed(&input[pos..end]);
        consumed += feed.consumed;
        if feed.done {
            break;
        }
        // Not done: the decoder must have used the whole chunk.
        assert_eq!(feed.consumed, end - pos, "decoder left bytes of an unfinished chunk");
        pos = end;
        if pos >= input.len() {
            break;
        }
    }
    let done = decoder.is_done();
    let bare_lf = decoder.saw_bare_lf();
    let decoded_len = decoder.decoded_len();
    let oversize = decoder.is_oversize();
    let line_too_long = decoder.has_line_too_long();
    let message = decoder.finish().ok();
    if !done {
        return Outcome {
            done,
            consumed,
            message: None,
            decoded_len: None,
            oversize: false,
            line_too_long: false,
            bare_lf: false,
        };
    }
    Outcome {
        done,
        consumed,
        message,
        decoded_len: Some(decoded_len),
        oversize,
        line_too_long,
        bare_lf,
    }
}
