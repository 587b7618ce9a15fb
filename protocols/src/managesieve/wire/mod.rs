//! The ManageSieve wire layer: what a command means across its lines and
//! literals ([`command`]), script names ([`name`]), and how answers and
//! the capability list are written ([`response`]). SASL PLAIN is POP3's
//! decoder (the same RFC 4616 bytes, here carried in a string). Pure
//! code, no I/O: the session reads lines and literals and feeds them in.
//! Every entry point takes bytes and never panics ([`fuzz`], driven by
//! `tests/fuzz_entries.rs` and `protocols/fuzz`).
//!
//! What it may touch: the standard library, parsing crates, other pure
//! wire layers and the Sieve layer's constants. Never
//! `managesieve::session`, [`crate::net`], the actors or the store
//! (`protocols/tests/layers.rs` fails if it does).

pub mod command;
pub mod name;
pub mod response;

pub use crate::pop3::wire::sasl::{Plain, SaslError, decode_plain};
pub use command::{Assembler, Command, LINE_MAX, LITERAL_DISCARD_MAX, LITERAL_MAX, Need, ParseError, Token};
pub use response::{CapaState, Code, Status};

/// Feeds `data` to an [`Assembler`] as a client would send it (lines,
/// and the literals they announce), and checks that any string the
/// server writes reads back as the same bytes. Panics only if that
/// round trip fails.
pub fn fuzz(data: &[u8]) {
    let _ = assemble(data);
    let _ = name::script_name(data);
    let _ = decode_plain(data);
    if data.len() as u64 <= LITERAL_MAX {
        let mut line = b"NOOP ".to_vec();
        response::string(&mut line, data);
        line.extend_from_slice(b"\r\n");
        let (cmd, rest) = assemble(&line);
        assert_eq!(
            cmd,
            Ok(Command::Noop {
                tag: Some(data.to_vec())
            }),
            "a written string reads back"
        );
        assert!(rest.is_empty(), "the string's bytes are all consumed");
    }
}

/// One command from the front of `data` (lines split at LF, CR before it
/// dropped), and what is left.
fn assemble(mut data: &[u8]) -> (Result<Command, ParseError>, &[u8]) {
    let mut a = Assembler::new();
    loop {
        let end = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
        let line = &data[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        data = data.get(end + 1..).unwrap_or(&[]);
        match a.line(&line[..line.len().min(LINE_MAX)]) {
            Need::Done => return (a.finish(), data),
            Need::Literal(n) => {
                let take = usize::try_from(n).unwrap_or(usize::MAX).min(data.len());
                let kept = (n <= LITERAL_MAX).then(|| data[..take].to_vec());
                a.literal(kept, n);
                data = &data[take..];
            }
        }
    }
}
