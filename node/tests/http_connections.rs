//! The HTTP listener's connection cap (`[jmap] max_connections`): beyond
//! it a new connection is answered 503 and closed; once a connection
//! closes, a new one is served again.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Node, write_config};

/// Sends one keep-alive request; returns the status line.
fn request(s: &mut TcpStream) -> String {
    s.write_all(b"GET /.well-known/jmap HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn connections_beyond_the_cap_get_503_and_freed_ones_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[jmap]\nmax_connections = 2\n");
    let node = Node::start(dir.path(), &[], &[("MESHMAIL_CONFIG", config.to_str().unwrap())]);
    let addr = node.addr("http");
    let mut a = connect(addr);
    let mut b = connect(addr);
    // Both held open (keep-alive), both served: 401 without credentials.
    assert!(request(&mut a).contains(" 401 "));
    assert!(request(&mut b).contains(" 401 "));
    let mut c = connect(addr);
    let status = request(&mut c);
    assert!(status.contains(" 503 "), "{status}");
    // Closing one frees its place (the server notices the close shortly).
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = request(&mut connect(addr));
        if status.contains(" 401 ") {
            break;
        }
        assert!(Instant::now() < deadline, "no connection freed: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(request(&mut b).contains(" 401 "), "the held connection still works");
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = common::http_get(addr, "/metrics");
        if m.contains("meshmail_http_connections_refused_total{listener=\"http\"}") {
            break;
        }
        assert!(Instant::now() < deadline, "{m}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
