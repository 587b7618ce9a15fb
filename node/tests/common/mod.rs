//! Helpers for tests that run the real `meshmail` binary: start a node on
//! port 0 for every listener, wait for its ready line (never sleep), and
//! run admin commands against its data directory.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub fn meshmail(data_dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meshmail"));
    cmd.arg("--data-dir")
        .arg(data_dir)
        .env("MESHMAIL_LOG", "warn,ractor_cluster=error");
    store_env(&mut cmd, data_dir);
    cmd
}

/// With `MESHMAIL_TEST_STORE=fdb`, every command on `data_dir` runs on the
/// FDB test cluster under `data_dir`'s own key prefix, the same one
/// [`open_store`] opens in the test process (see `KvConfig::for_tests`).
pub fn store_env(cmd: &mut Command, data_dir: &Path) {
    use meshmail_storage::open::KvConfig;
    if let KvConfig::Fdb {
        cluster_file,
        key_prefix,
    } = KvConfig::for_tests(data_dir)
    {
        let file = cluster_file.expect("for_tests names the cluster file");
        cmd.env("MESHMAIL_STORE", format!("fdb:{}", file.display()))
            .env("MESHMAIL_FDB_KEY_PREFIX", key_prefix);
    }
}

/// The store of the node(s) on `data_dir`, opened in the test process.
pub fn open_store(data_dir: &Path) -> meshmail_storage::Database {
    use meshmail_storage::open::{KvConfig, open_kv};
    open_kv(&KvConfig::for_tests(data_dir)).expect("open the test store")
}

pub fn run_ok(cmd: &mut Command, stdin: Option<&str>) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A running node and its endpoints by listener name.
/// `serve` flags putting every listener on a free loopback port.
pub const LISTENERS_ON_PORT_0: [&str; 14] = [
    "--smtp",
    "127.0.0.1:0",
    "--submission",
    "127.0.0.1:0",
    "--submissions",
    "127.0.0.1:0",
    "--lmtp",
    "127.0.0.1:0",
    "--http",
    "127.0.0.1:0",
    "--imap",
    "127.0.0.1:0",
    "--imaps",
    "127.0.0.1:0",
];

pub struct Node {
    pub child: Child,
    pub endpoints: HashMap<String, String>,
    pub data_dir: PathBuf,
}

impl Node {
    /// Starts `meshmail serve` with every listener on port 0 plus `extra` args.
    pub fn start(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Node {
        let mut cmd = meshmail(data_dir);
        cmd.arg("serve")
            .args(LISTENERS_ON_PORT_0)
            .args(extra)
            .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines.next().expect("ready line").unwrap();
        assert!(ready.starts_with("meshmail ready:"), "{ready}");
        let endpoints = ready
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Node {
            child,
            endpoints,
            data_dir: data_dir.to_path_buf(),
        }
    }

    pub fn addr(&self, name: &str) -> &str {
        &self.endpoints[name]
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A domain and an account with a password.
/// A node of a mesh on `dir`'s store: named `name`, mesh on a port-0 UDP
/// socket, joining through `seeds` ("NAME@HOST:PORT", empty for the
/// first), plaintext logins on loopback, with `env` set.
pub fn start_mesh_node(dir: &Path, name: &str, seeds: &str, env: &[(&str, &str)]) -> Node {
    let mut args = vec![
        "--node-name",
        name,
        "--mesh",
        "127.0.0.1:0",
        "--allow-plaintext-auth-on-loopback",
    ];
    if !seeds.is_empty() {
        args.extend(["--seeds", seeds]);
    }
    Node::start(dir, &args, env)
}

pub fn setup_account(data_dir: &Path, email: &str, password: &str) {
    let domain = email.split('@').nth(1).unwrap();
    let _ = meshmail(data_dir).args(["domain", "add", domain]).output();
    run_ok(
        meshmail(data_dir).args(["account", "add", email, "--password-stdin"]),
        Some(&format!("{password}\n")),
    );
}

pub fn write_config(dir: &Path, text: &str) -> PathBuf {
    // On FoundationDB nothing else has created the data directory yet
    // (SQLite's file does, on the embedded default).
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("meshmail.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Sends one message over a fresh SMTP connection; returns the final reply
/// code and text (the reply to the end of data, or the first refusal).
pub fn smtp_send(addr: &str, from: &str, to: &str, data: &str) -> (u16, String) {
    smtp_dialog(addr, from, to, Some(data))
}

/// One SMTP transaction up to RCPT: its reply (then QUIT).
pub fn smtp_rcpt(addr: &str, from: &str, to: &str) -> (u16, String) {
    smtp_dialog(addr, from, to, None)
}

/// EHLO, MAIL, RCPT and, with `data`, DATA: the first reply that is not
/// the expected one, or the last.
fn smtp_dialog(addr: &str, from: &str, to: &str, data: Option<&str>) -> (u16, String) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut buf = Vec::new();
    let mut reply = |s: &mut std::net::TcpStream| -> (u16, String) {
        loop {
            if let Some(pos) = buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = buf.drain(..pos + 2).collect();
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                if line.as_bytes().get(3) != Some(&b'-') {
                    return (line[..3].parse().unwrap(), line);
                }
                continue;
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed the connection");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    reply(&mut s);
    let mut steps = vec![
        ("EHLO test.example\r\n".to_string(), 250),
        (format!("MAIL FROM:<{from}>\r\n"), 250),
        (format!("RCPT TO:<{to}>\r\n"), 250),
    ];
    if data.is_some() {
        steps.push(("DATA\r\n".to_string(), 354));
    }
    let mut last = (0, String::new());
    for (cmd, want) in steps {
        s.write_all(cmd.as_bytes()).unwrap();
        last = reply(&mut s);
        if last.0 != want {
            let _ = s.write_all(b"QUIT\r\n");
            return last;
        }
    }
    if let Some(data) = data {
        s.write_all(data.as_bytes()).unwrap();
        s.write_all(b"\r\n.\r\n").unwrap();
        last = reply(&mut s);
    }
    let _ = s.write_all(b"QUIT\r\n");
    last
}

/// The value of the first line of a `/metrics` text that starts with
/// `line_start` (a name, with its labels if any); 0 when absent.
pub fn metric_in(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

pub fn http_get(addr: &str, path: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Whether an external client (swaks, mbsync) is installed. Without it the
/// test is skipped with a loud line, so `cargo test --workspace` works on a
/// fresh machine; CI installs the clients and sets MESHMAIL_REQUIRE_CLIENTS=1,
/// which turns a missing client into a failure instead.
pub fn client_available(program: &str, package: &str) -> bool {
    let found = std::process::Command::new(program).arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("MESHMAIL_REQUIRE_CLIENTS").is_none(),
            "{program} is required here: apt-get install {package}"
        );
        eprintln!("SKIPPED: {program} is not installed (apt-get install {package}); .ci/run installs it");
    }
    found
}

/// Runs `node/tests/py/SCRIPT ARGS...` with python3; (success, stdout and
/// stderr), the output also printed for a failing test's log.
pub fn python_script<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(format!("{}/tests/py/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .output()
        .expect("python3");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    (out.status.success(), text)
}

/// A node's `/status` document.
pub fn status(node: &Node) -> serde_json::Value {
    let response = http_get(node.addr("http"), "/status");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("status JSON: {e}: {response}"))
}

/// Polls `cond` every 20 ms until it holds (how long it took) or `limit` passes (a failure).
pub fn wait_for(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) -> std::time::Duration {
    let started = std::time::Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    started.elapsed()
}

/// Every node sees every other with its link up, and all `shards` are
/// owned, each by a member (as that node's last lease scan says).
pub fn converged(shards: u64, nodes: &[&Node]) -> bool {
    nodes.iter().all(|n| {
        let s = status(n);
        let links_up = s["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["link"] == "up")
            .count();
        let owners = s["owners"].as_object().unwrap();
        let owned: u64 = owners.values().map(|v| v.as_u64().unwrap()).sum();
        links_up == nodes.len() - 1 && owned == shards && owners.len() == nodes.len()
    })
}

/// One `POST path` with an empty body: (status code, body).
pub fn http_post(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The number of messages in `user`'s INBOX, over IMAP (imaplib, LOGIN).
pub fn inbox_count(imap: &str, user: &str, password: &str) -> usize {
    let (host, port) = imap.rsplit_once(':').unwrap();
    let out = Command::new("python3")
        .args(["-c", &format!(
            "import imaplib; c=imaplib.IMAP4('{host}',{port}); c.login('{user}','{password}'); print(int(c.select('INBOX')[1][0]))"
        )])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
}
