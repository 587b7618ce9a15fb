//! The POP3 wire layer: what a command line means ([`command`]), how the
//! answers are written, multi-line answers byte-stuffed ([`response`]),
//! and SASL PLAIN ([`sasl`]). Pure code, no I/O: the session decides what
//! is allowed when; this layer only says what the bytes mean. Fuzz-friendly:
//! every entry point takes bytes and never panics (`proptest`s below each,
//! and [`fuzz`], which `protocols/fuzz` and `tests/fuzz_entries.rs` drive).
//!
//! What it may touch: the standard library and parsing crates. Never
//! `pop3::session`, [`crate::net`], the actors or the store
//! (`protocols/tests/layers.rs` fails if it does).

pub mod command;
pub mod response;
pub mod sasl;

pub use command::{COMMAND_LINE_MAX, COMMAND_TEXT_MAX, Command, MessageNumber, ParseError, parse_command};
pub use response::{CapaState, Code, Stuffer};

/// The fuzz entry point: `data` as a command line, as a SASL PLAIN
/// response, and as a message encoded for RETR and for TOP. Panics only
/// if an encoded message breaks the framing a client relies on: it ends
/// in the terminating `.` line, and no other line is a lone `.`.
pub fn fuzz(data: &[u8]) {
    let _ = parse_command(data);
    let _ = sasl::decode_plain(data);
    let top_lines = data.first().map_or(0, |b| u32::from(*b % 8));
    for mut stuffer in [Stuffer::retr(), Stuffer::top(top_lines)] {
        let mut out = Vec::new();
        for chunk in data.chunks(7) {
            stuffer.push(chunk, &mut out);
        }
        stuffer.finish(&mut out);
        assert!(out.ends_with(b".\r\n"), "the answer ends in the terminator");
        let body = &out[..out.len() - 3];
        assert!(
            body.is_empty() || body.ends_with(b"\r\n"),
            "the terminator starts a line"
        );
        assert!(
            !body.split(|&b| b == b'\n').any(|l| l == b".\r" || l == b"."),
            "no line of the message reads as the terminator"
        );
    }
}
