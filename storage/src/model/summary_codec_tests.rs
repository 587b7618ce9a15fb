//! Round trips (typed values from proptest), the earlier JSON version, and
//! damaged input.

use proptest::prelude::*;

use super::*;

fn opt_s() -> impl Strategy<Value = Option<String>> {
    prop::option::of("[a-zA-Z0-9 =?<>@.ü-]{0,12}")
}

fn header_text() -> impl Strategy<Value = HeaderText> {
    ("[a-z =?]{0,10}", prop::bool::ANY, "[a-zé ]{0,10}").prop_map(|(raw, same, decoded)| HeaderText {
        decoded: if same { raw.clone() } else { decoded },
        raw,
    })
}

fn address() -> impl Strategy<Value = ImapAddress> {
    (opt_s(), opt_s(), prop::bool::ANY, opt_s(), opt_s(), opt_s()).prop_map(
        |(name, raw_name, same, adl, mailbox, host)| ImapAddress {
            raw_name: if same { name.clone() } else { raw_name },
            name,
            adl,
            mailbox,
            host,
        },
    )
}

fn addresses() -> impl Strategy<Value = AddressList> {
    (opt_s(), prop::collection::vec(address(), 0..3)).prop_map(|(raw, addresses)| AddressList { raw, addresses })
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        (opt_s(), prop::option::of(any::<i64>()), prop::option::of(header_text())),
        prop::collection::vec(header_text(), 0..2),
        (addresses(), prop::bool::ANY, addresses(), addresses(), addresses()),
        (opt_s(), opt_s(), opt_s()),
    )
        .prop_map(
            |((date, date_timestamp, subject), other_subjects, (from, sender_is_from, sender, to, cc), ids)| {
                Envelope {
                    date,
                    date_timestamp,
                    subject,
                    other_subjects,
                    // Sender and reply-to repeat From's addresses, as
                    // `summarize` makes them when absent.
                    sender: if sender_is_from {
                        AddressList {
                            raw: None,
                            addresses: from.addresses.clone(),
                        }
                    } else {
                        sender
                    },
                    reply_to: AddressList {
                        raw: Some("r".into()),
                        addresses: from.addresses.clone(),
                    },
                    from,
                    to,
                    cc: cc.clone(),
                    bcc: cc,
                    in_reply_to: ids.0,
                    message_id: ids.1,
                    references: ids.2,
                }
            },
        )
}

fn pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(("[a-z]{1,6}", "[a-zA-Z0-9\"*']{0,8}"), 0..3)
}

fn leaf() -> impl Strategy<Value = BodyPart> {
    (
        (
            "[a-z]{1,8}",
            "[a-z]{0,8}",
            prop::option::of(("[A-Za-z]{1,4}", "[A-Za-z]{0,4}")),
        ),
        (pairs(), opt_s(), opt_s(), "[0-9a-z-]{1,8}"),
        (any::<u64>(), prop::option::of(any::<u64>()), opt_s()),
        (
            prop::option::of(("[a-z]{1,8}", pairs())),
            prop::collection::vec("[a-z]{2}", 0..2),
            opt_s(),
        ),
        (any::<u64>(), any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |((media_type, subtype, written_type), (params, id, description, encoding), (size, lines, md5), d, o)| {
                BodyPart {
                    media_type,
                    subtype,
                    written_type,
                    params,
                    id,
                    description,
                    encoding,
                    size,
                    lines,
                    md5,
                    disposition: d.0.map(|(kind, params)| Disposition { kind, params }),
                    language: d.1,
                    location: d.2,
                    header_offset: o.0,
                    body_offset: o.1,
                    end_offset: o.2,
                    children: Vec::new(),
                    message: None,
                }
            },
        )
}

fn part() -> impl Strategy<Value = BodyPart> {
    leaf().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (leaf(), prop::collection::vec(inner.clone(), 1..3)).prop_map(|(mut p, children)| {
                p.children = children;
                p
            }),
            (leaf(), any::<u64>(), any::<u64>(), envelope(), inner).prop_map(|(mut p, h, b, envelope, structure)| {
                p.message = Some(Box::new(NestedMessage {
                    header_offset: h,
                    body_offset: b,
                    envelope,
                    structure,
                }));
                p
            }),
        ]
    })
}

fn summary() -> impl Strategy<Value = Summary> {
    (
        (prop::bool::ANY, any::<u64>(), any::<u64>(), any::<u64>()),
        envelope(),
        part(),
        (prop::option::of("[a-z ]{0,30}"), prop::option::of(prop::bool::ANY)),
    )
        .prop_map(
            |((parse_failed, size, header_len, body_offset), envelope, structure, (preview, has_attachment))| Summary {
                parse_failed,
                size,
                header_len,
                body_offset,
                envelope,
                structure,
                preview,
                has_attachment,
            },
        )
}

/// Runs a property over `strategy` on a thread with a 64 MiB stack. In a
/// debug build the generated summaries (and a damaged count, which can nest
/// parts down to `DEPTH_MAX`) take more than a test thread's 2 MiB now and
/// then: these properties overflowed it in CI and with PROPTEST_CASES=3000.
/// Release frames are far smaller (see the worker-sized test below).
fn check_on_a_big_stack<S: Strategy + 'static>(strategy: fn() -> S, test: fn(S::Value) -> Result<(), TestCaseError>) {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let mut config = ProptestConfig::default();
            if std::env::var_os("PROPTEST_CASES").is_none() {
                config.cases = 256;
            }
            let mut runner = proptest::test_runner::TestRunner::new(config);
            if let Err(e) = runner.run(&strategy(), test) {
                panic!("{e}");
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn version_2_round_trips_and_reads_the_envelope_or_header_length_alone() {
    check_on_a_big_stack(summary, |s| {
        let raw = encode(&s);
        prop_assert_eq!(raw[0], SUMMARY_VERSION_2);
        prop_assert_eq!(&decode(&raw).unwrap(), &s);
        prop_assert_eq!(&decode_envelope(&raw).unwrap(), &s.envelope);
        prop_assert_eq!(decode_header_len(&raw).unwrap(), s.header_len);
        Ok(())
    });
}

#[test]
fn version_1_reads_as_it_did() {
    check_on_a_big_stack(summary, |s| {
        let v1 = encode_v1(&s).unwrap();
        prop_assert_eq!(v1[0], SUMMARY_VERSION_1);
        prop_assert_eq!(&decode(&v1).unwrap(), &s);
        prop_assert_eq!(&decode_envelope(&v1).unwrap(), &s.envelope);
        prop_assert_eq!(decode_header_len(&v1).unwrap(), s.header_len);
        Ok(())
    });
}

/// Damage to an encoded summary is an error or another summary, never a
/// panic.
#[test]
fn damage_is_an_error_or_another_summary_never_a_panic() {
    let inputs = || (summary(), any::<prop::sample::Index>(), any::<u8>());
    check_on_a_big_stack(inputs, |(s, at, byte)| {
        let mut raw = encode(&s);
        let i = at.index(raw.len());
        raw[i] = byte;
        let _ = decode(&raw);
        let _ = decode_envelope(&raw);
        raw.truncate(i);
        prop_assert!(decode(&raw).is_err());
        Ok(())
    });
}

#[test]
fn a_version_1_summary_of_nulls_reads_as_the_empty_summary() {
    // Rows stored by tests and early ingest paths with no summary at all.
    let v1 = [SUMMARY_VERSION_1, 0, 0];
    assert_eq!(decode(&v1).unwrap(), Summary::default());
    assert_eq!(decode_envelope(&v1).unwrap(), Envelope::default());
    // An envelope with a null rest was dropped by the readers of then.
    let env = br#"{"subject":{"raw":"x","decoded":"x"}}"#;
    let mut v1 = vec![SUMMARY_VERSION_1];
    bytes(&mut v1, env);
    varint(&mut v1, 0);
    assert_eq!(decode(&v1).unwrap(), Summary::default());
    assert_eq!(decode_envelope(&v1).unwrap(), Envelope::default());
}

/// A summary whose structure nests `levels` deep: each level one child
/// part, or with `messages` every other level a nested message instead.
fn nested(levels: usize, messages: bool) -> Summary {
    let mut p = BodyPart::default();
    for level in 0..levels {
        p = if messages && level % 2 == 0 {
            BodyPart {
                message: Some(Box::new(NestedMessage {
                    header_offset: 1,
                    body_offset: 2,
                    envelope: Envelope::default(),
                    structure: p,
                })),
                ..BodyPart::default()
            }
        } else {
            BodyPart {
                children: vec![p],
                ..BodyPart::default()
            }
        };
    }
    Summary {
        structure: p,
        ..Summary::default()
    }
}

/// The deepest tree the decoder accepts, every level a nested message
/// (the largest frames), decodes on a thread with the 2 MiB stack of a
/// tokio worker, and summarize's deepest trees are within the bound.
#[test]
fn the_deepest_accepted_tree_decodes_on_a_worker_sized_stack() {
    const { assert!(DEPTH_MAX > 24, "stored summaries nest up to 24 levels") };
    let s = nested(DEPTH_MAX, true);
    let raw = encode(&s);
    let back = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || decode(&raw).map(|d| d == s))
        .unwrap()
        .join()
        .unwrap();
    assert!(back.unwrap(), "the deepest tree round-trips");
}

#[test]
fn unknown_versions_and_deep_nesting_are_corrupt() {
    assert!(decode(&[]).is_err());
    assert!(decode(&[3, 0]).is_err());
    assert!(decode_envelope(b"{").is_err());
    // A part tree deeper than DEPTH_MAX (each level one child).
    let s = nested(DEPTH_MAX + 1, false);
    let raw = encode(&s);
    assert!(decode(&raw).is_err());
    // The envelope still reads: it is not behind the structure.
    assert_eq!(decode_envelope(&raw).unwrap(), Envelope::default());
}
