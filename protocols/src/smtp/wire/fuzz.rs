//! Fuzz entry points. The cargo-fuzz targets in `protocols/fuzz` call these,
//! and so does a stable test on random inputs, so CI exercises the same code
//! without nightly. A panic here is a bug: either a parser panicked or the
//! streaming DATA decoder disagreed with the reference.

use super::command::parse_command;
use super::data::DataLimits;
use super::reference::{reference_decode, stream_decode};
use crate::summary::{Summary, summarize};

/// `parse_command` on arbitrary bytes: must return, never panic; an error
/// must render as a reply.
pub fn smtp_command(input: &[u8]) {
    match parse_command(input) {
        Ok(command) => {
            // Debug formatting walks every field.
            let _ = format!("{command:?}");
        }
        Err(e) => {
            let reply = e.reply().to_bytes();
            assert!(reply.ends_with(b"\r\n"));
        }
    }
}

/// DATA decoding of arbitrary bytes in chunkings and limits derived from
/// the input, checked against the reference decoder; then `summarize` on
/// the input and a JSON round trip of the summary.
pub fn smtp_data(input: &[u8]) {
    let (head, body) = input.split_at(input.len().min(4));
    let byte = |i: usize| head.get(i).copied().unwrap_or(0);
    // Small limits often, so that the limit paths are exercised; 0xff means
    // no practical limit.
    let limits = DataLimits {
        max_message_size: if byte(0) == 0xff {
            usize::MAX
        } else {
            usize::from(byte(0)) * 8
        },
        max_line_len: if byte(1) == 0xff {
            usize::MAX
        } else {
            usize::from(byte(1))
        },
    };
    // Chunk sizes from a small linear congruential generator, 0..=16.
    let mut seed = u32::from(byte(2)) << 8 | u32::from(byte(3));
    let chunks: Vec<usize> = (0..8)
        .map(|_| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as usize % 17
        })
        .collect();
    let expected = reference_decode(body, limits);
    let got = stream_decode(body, limits, &chunks);
    assert_eq!(got, expected, "streaming decoder disagrees with the reference");

    let summary = summarize(input);
    assert_eq!(summary.size, input.len() as u64);
    check_offsets(&summary, input.len() as u64);
    let json = serde_json::to_string(&summary).expect("summary serializes");
    let back: Summary = serde_json::from_str(&json).expect("summary deserializes");
    assert_eq!(back, summary);
}

fn check_offsets(summary: &Summary, len: u64) {
    assert!(summary.body_offset <= len);
    let mut stack = vec![&summary.structure];
    while let Some(part) = stack.pop() {
        assert!(
            part.header_offset <= part.body_offset && part.body_offset <= part.end_offset && part.end_offset <= len
        );
        stack.extend(part.children.iter());
        if let Some(m) = &part.message {
            assert!(m.header_offset <= m.body_offset && m.body_offset <= len);
            stack.push(&m.structure);
        }
    }
}
