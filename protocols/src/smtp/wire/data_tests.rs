use super::*;
use crate::smtp::wire::reference::{Outcome, reference_decode, stream_decode};
use proptest::prelude::*;

const BIG: DataLimits = DataLimits {
    max_message_size: 1 << 20,
    max_line_len: DATA_LINE_MAX,
};

/// Decodes `input` fed in one chunk; returns (message, consumed).
fn decode(input: &[u8], limits: DataLimits) -> (Result<Vec<u8>, DataError>, usize) {
    let mut d = DataDecoder::new(limits);
    let feed = d.feed(input);
    (d.finish(), feed.consumed)
}

#[test]
fn plain_message_and_pipelined_rest() {
    let input = b"Subject: hi\r\n\r\nbody\r\n.\r\nQUIT\r\n";
    let (msg, consumed) = decode(input, BIG);
    assert_eq!(msg.unwrap(), b"Subject: hi\r\n\r\nbody\r\n");
    assert_eq!(&input[consumed..], b"QUIT\r\n");
}

#[test]
fn empty_message() {
    let (msg, consumed) = decode(b".\r\nMAIL FROM:<>\r\n", BIG);
    assert_eq!(msg.unwrap(), b"");
    assert_eq!(consumed, 3);
}

#[test]
fn dot_unstuffing() {
    let (msg, _) = decode(b"..\r\n...\r\n.x\r\n..y\r\na.b\r\n.\r\n", BIG);
    assert_eq!(msg.unwrap(), b".\r\n..\r\nx\r\n.y\r\na.b\r\n");
    // ".\r" not followed by LF is not the end: the dot was stuffing.
    let (msg, _) = decode(b".\rx\r\n.\r\n", BIG);
    assert_eq!(msg.unwrap(), b"\rx\r\n");
}

#[test]
fn bare_lf_is_content_and_never_terminates() {
    let mut d = DataDecoder::new(BIG);
    let feed = d.feed(b"a\n.\nb\n.\r\nc\r\n");
    assert!(!feed.done, "bare-LF dot lines must not end the message");
    assert!(d.saw_bare_lf());
    let feed = d.feed(b".\r\n");
    assert!(feed.done);
    assert_eq!(d.finish().unwrap(), b"a\n.\nb\n.\r\nc\r\n");
    // A dot line after CRLF ending in bare LF is a stuffed line.
    let (msg, _) = decode(b"a\r\n.\n\r\n.\r\n", BIG);
    assert_eq!(msg.unwrap(), b"a\r\n\n\r\n");
}

#[test]
fn terminator_split_at_every_boundary() {
    let input = b"line one\r\n..dots\r\n.\r\nNOOP\r\n";
    let (whole, whole_consumed) = decode(input, BIG);
    let whole = whole.unwrap();
    for cut in 0..=input.len() {
        let mut d = DataDecoder::new(BIG);
        let a = d.feed(&input[..cut]);
        let consumed = if a.done {
            a.consumed
        } else {
            assert_eq!(a.consumed, cut);
            cut + d.feed(&input[cut..]).consumed
        };
        assert_eq!(consumed, whole_consumed, "cut at {cut}");
        assert_eq!(d.finish().unwrap(), whole, "cut at {cut}");
    }
    // Byte by byte.
    let mut d = DataDecoder::new(BIG);
    let mut consumed = 0;
    for b in input.chunks(1) {
        let f = d.feed(b);
        consumed += f.consumed;
        if f.done {
            break;
        }
    }
    assert_eq!(consumed, whole_consumed);
    // Feeding after the end takes nothing.
    assert_eq!(d.feed(b"more").consumed, 0);
}

#[test]
fn oversize_stops_buffering_but_finds_the_end() {
    let limits = DataLimits {
        max_message_size: 10,
        max_line_len: DATA_LINE_MAX,
    };
    let mut d = DataDecoder::new(limits);
    d.feed(b"0123456789abcdef\r\n");
    assert_eq!(d.limit_exceeded(), Some(DataError::Oversize));
    for _ in 0..1000 {
        assert!(!d.feed(&[b'x'; 1000]).done);
    }
    assert_eq!(d.out.capacity(), 0, "nothing is buffered past the limit");
    let f = d.feed(b"\r\n.\r\nRSET\r\n");
    assert!(f.done);
    assert_eq!(f.consumed, 5);
    assert_eq!(d.decoded_len(), 18 + 1_000_000 + 2);
    assert_eq!(d.finish(), Err(DataError::Oversize));
    // The size limit is inclusive.
    let (msg, _) = decode(b"12345678\r\n.\r\n", limits);
    assert_eq!(msg.unwrap().len(), 10);
}

#[test]
fn line_limit() {
    let line = |n: usize| {
        let mut v = vec![b'a'; n - 2];
        v.extend_from_slice(b"\r\n.\r\n");
        v
    };
    assert!(decode(&line(DATA_LINE_MAX), BIG).0.is_ok());
    assert_eq!(decode(&line(DATA_LINE_MAX + 1), BIG).0, Err(DataError::LineTooLong));
    // A stuffed dot does not count (RFC 5321 §4.5.3.1.6).
    let mut stuffed = vec![b'.'];
    stuffed.extend(line(DATA_LINE_MAX));
    assert!(decode(&stuffed, BIG).0.is_ok());
    // Unix line endings are not one long line.
    let unix = "x\n".repeat(2000) + "\r\n.\r\n";
    assert!(decode(unix.as_bytes(), BIG).0.is_ok());
    assert_eq!(DataError::LineTooLong.reply().code, 500);
    assert_eq!(DataError::Oversize.reply().code, 552);
}

#[test]
fn incomplete() {
    let mut d = DataDecoder::new(BIG);
    assert!(!d.feed(b"abc\r\n.\r").done);
    assert_eq!(d.finish(), Err(DataError::Incomplete));
}

#[test]
fn bdat_chunks() {
    let mut r = BdatReader::new(10);
    r.begin_chunk(4, false).unwrap();
    assert_eq!(r.feed(b"abcdefgh"), 4);
    assert!(r.chunk_complete());
    assert_eq!(r.begin_chunk(3, true), Ok(()));
    assert_eq!(r.feed(b"xy"), 2);
    assert_eq!(r.begin_chunk(1, true), Err(BdatError::ChunkInProgress));
    assert_eq!(r.feed(b"zQUIT"), 1);
    assert!(r.is_complete());
    assert_eq!(r.begin_chunk(1, false), Err(BdatError::AlreadyComplete));
    assert_eq!(r.finish().unwrap(), b"abcdxyz");

    // Over the limit: known at BDAT time, still consumed in full, not kept.
    let mut r = BdatReader::new(10);
    r.begin_chunk(8, false).unwrap();
    r.feed(&[0; 8]);
    r.begin_chunk(5, true).unwrap();
    assert!(r.is_oversize());
    assert_eq!(r.feed(&[1; 100]), 5);
    assert!(r.is_complete());
    assert_eq!(r.decoded_len(), 13);
    assert_eq!(r.finish(), Err(DataError::Oversize));

    let mut r = BdatReader::new(10);
    r.begin_chunk(0, true).unwrap();
    assert_eq!(r.finish().unwrap(), b"");
    let mut r = BdatReader::new(10);
    r.begin_chunk(3, false).unwrap();
    r.feed(b"abc");
    assert_eq!(r.finish(), Err(DataError::Incomplete));
}

// ---- differential test against the reference decoder ------------------

/// Pieces that make the interesting cases likely: dots at line start,
/// terminators, CR/LF oddities, long runs for the limits.
fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b".".to_vec()),
        Just(b"..".to_vec()),
        Just(b".x".to_vec()),
        Just(b"\r\n.\r\n".to_vec()),
        Just(b"\r\n..\r\n".to_vec()),
        Just(b"\r\n.\r".to_vec()),
        Just(b"\r\n.\n".to_vec()),
        Just(b"\n.\r\n".to_vec()),
        Just(b"\r\r\n".to_vec()),
        Just(b"QUIT\r\n".to_vec()),
        prop::collection::vec(any::<u8>(), 1..4),
        (1usize..80).prop_map(|n| vec![b'a'; n]),
    ]
}

fn limits() -> impl Strategy<Value = DataLimits> {
    prop_oneof![
        Just(BIG),
        (0usize..120, 0usize..40).prop_map(|(s, l)| DataLimits {
            max_message_size: s,
            max_line_len: l,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn streaming_matches_reference(
        tokens in prop::collection::vec(token(), 0..40),
        chunks in prop::collection::vec(0usize..12, 1..8),
        limits in limits(),
    ) {
        let input: Vec<u8> = tokens.concat();
        let expected: Outcome = reference_decode(&input, limits);
        prop_assert_eq!(stream_decode(&input, limits, &chunks), expected.clone());
        // And in one piece.
        prop_assert_eq!(stream_decode(&input, limits, &[]), expected);
    }
}
