//! Runs the fuzz entry points (the same functions the cargo-fuzz targets
//! call) over 100,000 random inputs each, on stable, so CI exercises them
//! without nightly. Inputs are random bytes or mutated valid commands and
//! messages; the seed is fixed so a failure replays, and printed.

mod common;

use meshmail_protocols::smtp::wire::fuzz::{smtp_command, smtp_data};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const RUNS: usize = 100_000;

const COMMANDS: &[&[u8]] = &[
    b"EHLO mx.example.org",
    b"HELO [192.0.2.1]",
    b"EHLO [IPv6:2001:db8::1]",
    b"MAIL FROM:<john@example.org> SIZE=1000 BODY=8BITMIME SMTPUTF8 AUTH=<>",
    b"MAIL FROM: <@a.org,@b.org:x@c.org> RET=HDRS ENVID=x+2By",
    b"MAIL FROM:<>",
    b"RCPT TO:<Postmaster>",
    b"RCPT TO:<\"q \\\" x\"@[10.0.0.1]> NOTIFY=NEVER",
    "RCPT TO:<δοκιμή@παράδειγμα.δοκιμή>".as_bytes(),
    b"BDAT 1000 LAST",
    b"AUTH PLAIN dGVzdAB0ZXN0AHRlc3Q=",
    b"NOOP hello",
    b"VRFY john",
    b"DATA",
    b"STARTTLS",
];

const MESSAGES: &[&[u8]] = &[
    b"\0\0\0\0Subject: hi\r\n\r\nbody\r\n..stuffed\r\n.\r\nQUIT\r\n",
    b"\x10\x08\x01\x02.\r\n",
    b"\xff\xff\x00\x00Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b\r\nContent-Type: message/rfc822\r\n\r\nSubject: in\r\n\r\ny\r\n--b--\r\n.\r\n",
    b"\x40\x20\x07\x07From: =?UTF-8?B?w4lsb2lzZQ==?= <e@x.fr>\r\nTo: g: a@b, c@d;\r\n\r\n\n.\n\r\n.\r\n",
];

const INTERESTING: &[&[u8]] = &[
    b"\r\n",
    b"\r",
    b"\n",
    b".",
    b"\r\n.\r\n",
    b"<",
    b">",
    b"@",
    b"\"",
    b"\\",
    b":",
    b"=",
    b" ",
    b"\0",
    b"\xff",
    b"[",
    b"]",
    b"--b",
    b"\r\n\r\n",
    b"=?UTF-8?Q?=C3=A9?=",
];

fn random_input(rng: &mut StdRng, seeds: &[&[u8]]) -> Vec<u8> {
    if rng.random_bool(0.25) {
        let n = rng.random_range(0..300);
        (0..n).map(|_| rng.random()).collect()
    } else {
        let seed = seeds[rng.random_range(0..seeds.len())];
        common::mutate(rng, seed, INTERESTING)
    }
}

#[test]
fn smtp_command_on_random_inputs() {
    let seed = 0x5eed_c0de;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..RUNS {
        let input = random_input(&mut rng, COMMANDS);
        let result = std::panic::catch_unwind(|| smtp_command(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}

#[test]
fn smtp_data_on_random_inputs() {
    let seed = 0xda7a_5eed;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..RUNS {
        let input = random_input(&mut rng, MESSAGES);
        let result = std::panic::catch_unwind(|| smtp_data(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}

/// Messages for the 8BITMIME downgrade: nested multiparts with 8-bit,
/// binary, QP and base64 leaves, an encapsulated message, LF-only lines.
const MIME_MESSAGES: &[&[u8]] = &[
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\npre\xff\r\n--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ncaf\xc3\xa9 =\r\n--b\r\nContent-Type: multipart/alternative; boundary=\"c d\"\r\n\r\n--c d\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=C3=A9\xe9\r\n--c d--\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n\x00\r\x01\xff\r\n--b--\r\npost\xfe",
    b"Content-Type: message/rfc822\r\n\r\nSubject: in\r\nContent-Transfer-Encoding: base64\r\n\r\nw6k=\xff\r\n",
    b"Subject: x\n\nl\xc3\xa9\nsecond line\n",
];

#[test]
fn outbound_downgrade_on_random_inputs() {
    let seed = 0x8b17_d0e5;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..RUNS {
        let input = random_input(&mut rng, MIME_MESSAGES);
        let result = std::panic::catch_unwind(|| meshmail_protocols::outbound::downgrade::fuzz(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}

const POP3_INPUTS: &[&[u8]] = &[
    b"USER alice@example.org",
    b"PASS two words",
    b"AUTH PLAIN AGFsaWNlAHNlY3JldA==",
    b"TOP 1 10",
    b"UIDL 4294967295",
    b"Subject: x\r\n\r\n.dot\r\n..two\r\n.\r\nbare lf\nend",
];

#[test]
fn pop3_wire_on_random_inputs() {
    let seed = 0x9093_5eed;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..RUNS {
        let input = random_input(&mut rng, POP3_INPUTS);
        let result = std::panic::catch_unwind(|| meshmail_protocols::pop3::wire::fuzz(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}

const MANAGESIEVE_INPUTS: &[&[u8]] = &[
    b"AUTHENTICATE \"PLAIN\" {20+}\r\nAGFsaWNlAHNlY3JldA==\r\n",
    b"PUTSCRIPT \"a \\\"b\\\"\" {6+}\r\nkeep;\n\r\n",
    b"RENAMESCRIPT {1}\r\na \"b\"\r\n",
    b"HAVESPACE \"x\" 4294967295\r\nNOOP \"t\"\r\n",
    b"SETACTIVE \"\"\r\nGETSCRIPT {2+}\r\n\xff\xfe\r\n",
];

#[test]
fn managesieve_wire_on_random_inputs() {
    let seed = 0x5e1e_4190;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..RUNS {
        let input = random_input(&mut rng, MANAGESIEVE_INPUTS);
        let result = std::panic::catch_unwind(|| meshmail_protocols::managesieve::wire::fuzz(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}

const SIEVE_SCRIPTS: &[&[u8]] = &[
    b"require [\"fileinto\", \"variables\", \"imap4flags\"];\r\nif header :matches \"subject\" \"*hi*\" { set \"a\" \"${1}\"; addflag \"\\\\Seen\"; fileinto \"x-${a}\"; }",
    b"require [\"relational\", \"comparator-i;ascii-numeric\", \"date\", \"index\"];\nif anyof (header :count \"ge\" :comparator \"i;ascii-numeric\" \"to\" \"2\", date :index 1 :last :zone \"-0500\" \"date\" \"hour\" \"09\") { discard; } elsif not exists \"x\" { stop; } else { keep; }",
    b"require [\"vacation\", \"body\", \"editheader\", \"subaddress\", \"envelope\", \"duplicate\", \"reject\"];\nvacation :days 1 :subject \"s\" text:\nline\n..dot\n.\n;\nif body :text :contains \"body\" { addheader :last \"X-A\" \"b\"; deleteheader :index 1 \"subject\"; }\nif envelope :detail \"to\" \"tag\" { reject \"no\"; }\nif duplicate :seconds 10 { discard; }",
    b"/* c */ # c\nredirect :copy \"a@b.test\"; include :optional \"x\";",
];

#[test]
fn sieve_script_on_random_inputs() {
    let seed = 0x5137_e5ed;
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..RUNS {
        let input = random_input(&mut rng, SIEVE_SCRIPTS);
        let result = std::panic::catch_unwind(|| meshmail_protocols::sieve::fuzz::sieve_script(&input));
        assert!(result.is_ok(), "seed {seed:#x} run {i}: input {input:?}");
    }
}
