//! Deterministic generated mail for `bench mailbox`: varied senders,
//! subjects, sizes and MIME shapes from a seed, so every server (and every
//! run) gets byte-identical messages, and the bench knows the right answer
//! to each SEARCH it sends.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One generated message and what the bench needs to know about it.
pub struct GenMessage {
    /// The raw message, CRLF line ends.
    pub raw: Vec<u8>,
    /// APPENDed with `\Seen`.
    pub seen: bool,
    pub subject: String,
    /// The From header field as written.
    pub from: String,
}

const FIRST: [&str; 24] = [
    "Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kaja", "Luca", "Maya",
    "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wen", "Yusuf",
];
const LAST: [&str; 12] = [
    "Martin",
    "Okafor",
    "Lindqvist",
    "Sato",
    "Moreau",
    "Kowalski",
    "Haddad",
    "Novak",
    "Costa",
    "Berg",
    "Ivanova",
    "Reyes",
];
const DOMAINS: [&str; 8] = [
    "example.com",
    "example.org",
    "mail.example.net",
    "corp.example",
    "lists.example.com",
    "shop.example",
    "uni.example.edu",
    "example.co.uk",
];
const TOPICS: [&str; 20] = [
    "quarterly report",
    "invoice",
    "meeting notes",
    "travel plans",
    "build failure",
    "release checklist",
    "lunch on Friday",
    "contract draft",
    "newsletter",
    "password reset",
    "shipping update",
    "team offsite",
    "budget review",
    "holiday photos",
    "conference talk",
    "server migration",
    "code review",
    "reading list",
    "support ticket",
    "weekly digest",
];
const WORDS: [&str; 32] = [
    "the",
    "mailbox",
    "server",
    "quickly",
    "delivered",
    "message",
    "about",
    "yesterday",
    "please",
    "review",
    "attached",
    "numbers",
    "before",
    "tomorrow",
    "because",
    "storage",
    "index",
    "flags",
    "search",
    "client",
    "thanks",
    "regards",
    "schedule",
    "project",
    "update",
    "question",
    "answer",
    "draft",
    "final",
    "version",
    "team",
    "list",
];

fn words(rng: &mut StdRng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 80);
    let mut line = 0usize;
    while out.len() < bytes {
        let w = WORDS[rng.random_range(0..WORDS.len())];
        if line + w.len() + 1 > 72 {
            out.push_str("\r\n");
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(w);
        line += w.len();
    }
    out.push_str("\r\n");
    out
}

fn base64_lines(rng: &mut StdRng, bytes: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes + bytes / 38);
    let mut n = 0;
    while n < bytes {
        for _ in 0..76 {
            out.push(ALPHABET[rng.random_range(0..64)] as char);
        }
        out.push_str("\r\n");
        n += 78;
    }
    out
}

fn headers(rng: &mut StdRng, i: usize, seed: u64, subject: &str, from: &str) -> String {
    let to = format!(
        "{} <{}@{}>",
        FIRST[rng.random_range(0..FIRST.len())],
        "bench",
        DOMAINS[0]
    );
    // One message a minute, backwards from a fixed day.
    let minutes = 1_000_000 - i as u64;
    let (day, min) = (minutes / 1440, minutes % 1440);
    let date = format!(
        "{}, {:02} Nov 2026 {:02}:{:02}:00 +0000",
        ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][(day % 7) as usize],
        1 + day % 28,
        min / 60,
        min % 60
    );
    format!(
        "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nDate: {date}\r\n\
         Message-ID: <{i}.{seed}@bench.example>\r\nMIME-Version: 1.0\r\n"
    )
}

fn sender(rng: &mut StdRng) -> String {
    let first = FIRST[rng.random_range(0..FIRST.len())];
    let last = LAST[rng.random_range(0..LAST.len())];
    let domain = DOMAINS[rng.random_range(0..DOMAINS.len())];
    format!(
        "{first} {last} <{}.{}@{domain}>",
        first.to_ascii_lowercase(),
        last.to_ascii_lowercase()
    )
}

fn subject(rng: &mut StdRng, i: usize) -> String {
    let topic = TOPICS[rng.random_range(0..TOPICS.len())];
    match rng.random_range(0..10) {
        0..=1 => format!("Re: {topic} ({i})"),
        2 => format!("Fwd: {topic} #{i}"),
        _ => format!("{}{} {i}", topic[..1].to_ascii_uppercase(), &topic[1..]),
    }
}

/// The folder of the issue: `n` varied messages of about 10 KB (2–40 KB),
/// 60 % text/plain, 25 % multipart/alternative, 15 % multipart/mixed with
/// a base64 attachment; about 30 % APPENDed `\Seen`.
pub fn folder(n: usize, seed: u64) -> Vec<GenMessage> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let from = sender(&mut rng);
            let subject = subject(&mut rng, i);
            let size = if rng.random_range(0..10) == 0 {
                rng.random_range(20_000..40_000)
            } else {
                rng.random_range(2_000..14_000)
            };
            let mut raw = headers(&mut rng, i, seed, &subject, &from);
            match rng.random_range(0..20) {
                0..=11 => {
                    raw.push_str("Content-Type: text/plain; charset=utf-8\r\n\r\n");
                    raw.push_str(&words(&mut rng, size));
                }
                12..=16 => {
                    let b = format!("alt-{i}-{seed}");
                    raw.push_str(&format!(
                        "Content-Type: multipart/alternative; boundary=\"{b}\"\r\n\r\n\
                         --{b}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
                    ));
                    raw.push_str(&words(&mut rng, size / 3));
                    raw.push_str(&format!(
                        "--{b}\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body><p>\r\n"
                    ));
                    raw.push_str(&words(&mut rng, size * 2 / 3));
                    raw.push_str(&format!("</p></body></html>\r\n--{b}--\r\n"));
                }
                _ => {
                    let b = format!("mix-{i}-{seed}");
                    raw.push_str(&format!(
                        "Content-Type: multipart/mixed; boundary=\"{b}\"\r\n\r\n\
                         --{b}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
                    ));
                    raw.push_str(&words(&mut rng, size / 4));
                    raw.push_str(&format!(
                        "--{b}\r\nContent-Type: application/pdf; name=\"report-{i}.pdf\"\r\n\
                         Content-Disposition: attachment; filename=\"report-{i}.pdf\"\r\n\
                         Content-Transfer-Encoding: base64\r\n\r\n"
                    ));
                    raw.push_str(&base64_lines(&mut rng, size * 3 / 4));
                    raw.push_str(&format!("--{b}--\r\n"));
                }
            }
            GenMessage {
                raw: raw.into_bytes(),
                seen: rng.random_range(0..10) < 3,
                subject,
                from,
            }
        })
        .collect()
}

/// The big INBOX: `n` text/plain messages of 1 KiB, varied senders and
/// subjects; one in 20 unseen (a read-mostly INBOX).
pub fn inbox(n: usize, seed: u64) -> Vec<GenMessage> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x1b1b);
    (0..n)
        .map(|i| {
            let from = sender(&mut rng);
            let subject = subject(&mut rng, i);
            let mut raw = headers(&mut rng, i, seed, &subject, &from);
            raw.push_str("Content-Type: text/plain; charset=utf-8\r\n\r\n");
            // Words up to a little under 1 KiB, then one filler line to
            // exactly 1 KiB (`words` overshoots by at most a word + CRLF).
            let mut text = words(&mut rng, 1024usize.saturating_sub(raw.len() + 16).max(16));
            let fill = 1024usize.saturating_sub(raw.len() + text.len() + 2);
            if fill > 0 {
                text.push_str(&"-".repeat(fill));
                text.push_str("\r\n");
            }
            raw.push_str(&text);
            GenMessage {
                raw: raw.into_bytes(),
                seen: i % 20 != 0,
                subject,
                from,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_varied() {
        let a = folder(200, 7);
        let b = folder(200, 7);
        assert!(a.iter().zip(&b).all(|(x, y)| x.raw == y.raw && x.seen == y.seen));
        let mean = a.iter().map(|m| m.raw.len()).sum::<usize>() / a.len();
        assert!((6_000..16_000).contains(&mean), "mean size {mean}");
        assert!(a.iter().any(|m| m.raw.windows(9).any(|w| w == b"multipart")));
        assert!(a.iter().any(|m| m.seen) && a.iter().any(|m| !m.seen));
        let senders: std::collections::HashSet<&str> = a.iter().map(|m| m.from.as_str()).collect();
        assert!(senders.len() > 50, "{} senders", senders.len());
        for m in inbox(50, 7) {
            assert!((1000..=1024).contains(&m.raw.len()), "{}", m.raw.len());
            assert!(m.raw.ends_with(b"\r\n"));
        }
    }
}
