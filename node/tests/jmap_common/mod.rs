//! Helpers of the JMAP tests: plain HTTP with Basic credentials (for the
//! error cases a client library refuses to send) and a raw IMAP client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub fn basic(user: &str, password: &str) -> String {
    use std::fmt::Write as _;
    let raw = format!("{user}:{password}");
    // Tiny base64 (standard alphabet, padded): keeps the tests free of a
    // direct dependency for one header.
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = raw.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                let _ = out.write_char(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

/// One HTTP/1.1 request; returns (status, body).
pub fn http(addr: &str, method: &str, path: &str, auth: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(a) = auth {
        head.push_str(&format!("Authorization: {a}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, dechunk(&body))
}

/// Undoes chunked transfer encoding when the body looks chunked.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            return out;
        }
        if after.len() < n {
            return body.to_string();
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
}

pub fn api(addr: &str, auth: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, text) = http(addr, "POST", "/jmap/api", Some(auth), body.as_bytes());
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {status} {text}"));
    (status, v)
}

/// The password of every account the JMAP tests set up.
pub const PASSWORD: &str = "secret";

/// A node with these accounts (password [`PASSWORD`]) that takes Basic
/// credentials over plaintext HTTP from loopback, as the JMAP tests log in.
pub fn start_node(dir: &std::path::Path, users: &[&str]) -> crate::common::Node {
    for user in users {
        crate::common::setup_account(dir, user, PASSWORD);
    }
    crate::common::Node::start(dir, &["--allow-plaintext-auth-on-loopback"], &[])
}

/// One method call as `user` over raw HTTP (core and mail capabilities);
/// returns the arguments of its answer, after asserting the method itself
/// answered (not an error invocation).
pub fn call(node: &crate::common::Node, user: &str, method: &str, args: serde_json::Value) -> serde_json::Value {
    let resp = invoke(node, user, method, args);
    assert_eq!(resp[0], method, "the method answered, not an error: {resp}");
    resp[1].clone()
}

/// One method call as `user`; returns the whole answer invocation
/// (`[name, arguments, callId]`), an error's included.
pub fn invoke(node: &crate::common::Node, user: &str, method: &str, args: serde_json::Value) -> serde_json::Value {
    let body = serde_json::json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [[method, args, "c"]],
    });
    let (status, v) = api(node.addr("http"), &basic(user, PASSWORD), &body.to_string());
    assert_eq!(status, 200, "{v}");
    v["methodResponses"][0].clone()
}

/// A raw IMAP connection (LOGIN over plaintext from loopback).
pub struct Imap {
    r: BufReader<TcpStream>,
    w: TcpStream,
    tag: u32,
}

impl Imap {
    pub fn login(addr: &str, user: &str, password: &str) -> Imap {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut imap = Imap {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
            tag: 0,
        };
        let mut greeting = String::new();
        imap.r.read_line(&mut greeting).unwrap();
        assert!(greeting.starts_with("* OK"), "{greeting}");
        let out = imap.cmd(&format!("LOGIN {user} {password}"));
        assert!(out.last().unwrap().contains("OK"), "{out:?}");
        imap
    }

    /// Sends a command; returns every line up to and with the tagged one.
    pub fn cmd(&mut self, command: &str) -> Vec<String> {
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        self.w.write_all(format!("{tag} {command}\r\n").as_bytes()).unwrap();
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            assert!(self.r.read_line(&mut line).unwrap() > 0, "IMAP server closed");
            let done = line.starts_with(&format!("{tag} "));
            lines.push(line.trim_end().to_string());
            if done {
                return lines;
            }
        }
    }
}
