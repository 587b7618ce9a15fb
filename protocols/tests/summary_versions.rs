//! Stored summaries written by the build before binary summaries still
//! decode to exactly what this build computes: `fixtures/summaries-v1.txt`
//! holds, for every 12th message of `corpus/`, the `msum` value (summary
//! version 1, JSON) and a whole version-1 message row (summary inside) as
//! that build (cabddb6) wrote them, produced by its own code. Each must
//! decode — whole and envelope alone — to `summarize` of the same message,
//! and the binary form this build writes must round-trip to it too.

use meshmail_protocols::summary::summarize;
use meshmail_storage::model::{message_codec, summary_codec};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn summaries_of_the_previous_build_decode_identically() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests");
    let fixture = std::fs::read_to_string(format!("{dir}/fixtures/summaries-v1.txt")).unwrap();
    let (mut checked, mut v1_bytes, mut v2_bytes, mut env_bytes) = (0, 0, 0, 0);
    for line in fixture.lines().filter(|l| !l.starts_with('#')) {
        let mut f = line.split(' ');
        let (name, msum, row) = (f.next().unwrap(), unhex(f.next().unwrap()), unhex(f.next().unwrap()));
        let raw = std::fs::read(format!("{dir}/corpus/{name}")).unwrap();
        let want = summarize(&raw);
        assert_eq!(msum[0], summary_codec::SUMMARY_VERSION_1, "{name}");
        assert_eq!(summary_codec::decode(&msum).unwrap(), want, "{name}: msum v1");
        assert_eq!(
            summary_codec::decode_envelope(&msum).unwrap(),
            want.envelope,
            "{name}: envelope of msum v1"
        );
        assert_eq!(row[0], message_codec::VERSION_1, "{name}");
        let whole = message_codec::decode(&row).unwrap();
        assert_eq!(whole.summary, want, "{name}: v1 row");
        // The previous build's bytes are what this build's legacy writer
        // produces (tests build old stores with it).
        assert_eq!(summary_codec::encode_v1(&want).unwrap(), msum, "{name}: encode_v1");
        assert_eq!(message_codec::encode_v1(&whole).unwrap(), row, "{name}: row encode_v1");
        let v2 = summary_codec::encode(&want);
        assert_eq!(summary_codec::decode(&v2).unwrap(), want, "{name}: v2");
        assert!(
            v2.len() < msum.len(),
            "{name}: v2 {} bytes, v1 {}",
            v2.len(),
            msum.len()
        );
        checked += 1;
        v1_bytes += msum.len();
        v2_bytes += v2.len();
        // The envelope's length prefix (a varint; envelopes are under
        // 16 KB) says how much a SEARCH decodes.
        env_bytes += match v2[1] {
            b if b < 0x80 => usize::from(b),
            b => usize::from(b & 0x7f) | usize::from(v2[2]) << 7,
        };
    }
    assert!(checked >= 25, "{checked} fixtures");
    eprintln!("{checked} summaries: v1 (JSON) {v1_bytes} bytes, v2 {v2_bytes} bytes, of which envelopes ~{env_bytes}");
}
