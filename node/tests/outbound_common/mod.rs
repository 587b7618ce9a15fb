//! Helpers of the outbound tests: the loopback DNS server and remote MX
//! hosts of `py/outbound_peer.py`, a node pointed at them, and the Python
//! checks of `py/outbound_check.py`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::common::{Node, meshmail, run_ok, setup_account, write_config};

pub const USER: &str = "alice@local.test";
pub const PASSWORD: &str = "outbound test password";
pub const PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py");

/// Whether the Python oracles are installed (CI installs them and sets
/// MESHMAIL_REQUIRE_CLIENTS=1, which turns a missing one into a failure).
pub fn python_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import aiosmtpd, dnslib, dkim, flufl.bounce"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("MESHMAIL_REQUIRE_CLIENTS").is_none(),
            "python3 with aiosmtpd, dnslib, dkimpy and flufl.bounce is required (.ci/requirements.txt)"
        );
        eprintln!(
            "SKIPPED: python3 with aiosmtpd/dnslib/dkimpy/flufl.bounce missing (pip install -r .ci/requirements.txt)"
        );
    }
    ok
}

/// A test's scratch directory, the peer (DNS + remote MX) writing under its
/// `mx/`, and the node's data directory `data/` (not created yet). Bind as
/// `let (_dir, peer, data) = scratch_peer();`: the peer stops before the
/// directory goes.
pub fn scratch_peer() -> (tempfile::TempDir, Peer, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mx");
    std::fs::create_dir_all(&out).unwrap();
    let peer = Peer::start(&out);
    let data = dir.path().join("data");
    (dir, peer, data)
}

/// Adds the local domain `local.test` and a DKIM key for it (selector
/// `s1`); returns the zone line `dkim generate` printed, trimmed.
pub fn local_domain_with_dkim(data: &Path) -> String {
    let _ = meshmail(data).args(["domain", "add", "local.test"]).output();
    run_ok(
        meshmail(data).args(["dkim", "generate", "local.test", "--selector", "s1"]),
        None,
    )
    .trim()
    .to_string()
}

/// The DNS server and remote MX, and the JSON lines they print.
pub struct Peer {
    child: Child,
    events: Receiver<serde_json::Value>,
    pub dns: String,
    pub mx_port: u16,
    /// The HTTPS server of MTA-STS policies (with a TLS directory).
    pub https_port: Option<u16>,
    out: PathBuf,
}

impl Peer {
    pub fn start(out: &Path) -> Peer {
        Peer::start_with(out, None)
    }

    /// With `tls` (a directory holding `cert.pem` and `key.pem`, see
    /// [`TestCa`]): also the STARTTLS MX and the HTTPS policy server.
    pub fn start_with(out: &Path, tls: Option<&Path>) -> Peer {
        let mut child = Command::new("python3")
            .arg(format!("{PY}/outbound_peer.py"))
            .arg(out)
            .args(tls)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let ready = events.recv_timeout(Duration::from_secs(30)).expect("peer ready line");
        assert_eq!(ready["event"], "ready", "{ready}");
        let mx = ready["mx"].as_str().unwrap();
        Peer {
            https_port: ready["https"]
                .as_str()
                .map(|a| a.rsplit_once(':').unwrap().1.parse().unwrap()),
            out: out.to_path_buf(),
            dns: ready["dns"].as_str().unwrap().to_string(),
            mx_port: mx.rsplit_once(':').unwrap().1.parse().unwrap(),
            events,
            child,
        }
    }

    /// Adds records to the zone the DNS server serves (read at every query).
    pub fn add_records(&self, records: &[(&str, &str, &str)]) {
        let path = self.out.join("zone.json");
        let mut zone: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let list = zone["records"].as_array_mut().unwrap();
        for (name, kind, value) in records {
            list.push(serde_json::json!([name, kind, value]));
        }
        let tmp = self.out.join("zone.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&zone).unwrap()).unwrap();
        std::fs::rename(tmp, path).unwrap();
    }

    /// Serves `text` as the MTA-STS policy of `domain` (read at every request).
    pub fn set_policy(&self, domain: &str, text: &str) {
        let dir = self.out.join("policies");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("mta-sts.{domain}")), text).unwrap();
    }

    /// The next message the MX accepted, within `timeout`.
    pub fn next_message(&self, timeout: Duration) -> Option<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) if v["event"] == "message" => return Some(v),
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // Closing stdin ends it; kill in case it hangs.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_node(dir: &Path, peer: &Peer, outbound_extra: &str) -> Node {
    setup_account(dir, USER, PASSWORD);
    let scan = if outbound_extra.contains("scan_interval_ms") {
        ""
    } else {
        "scan_interval_ms = 200\n"
    };
    let cfg = write_config(
        dir,
        &format!(
            "hostname = \"mail.local.test\"\n\
             [smtp]\nallow_plaintext_auth_on_loopback = true\n\
             [imap]\nallow_plaintext_auth_on_loopback = true\n\
             [dns]\nresolver = \"{}\"\ntimeout_ms = 2000\n\
             [outbound]\nmx_port = {}\n{scan}{outbound_extra}",
            peer.dns, peer.mx_port
        ),
    );
    Node::start(dir, &["--config", cfg.to_str().unwrap()], &[])
}

/// The value of the first `/metrics` line starting with `line_start` (0
/// when there is none: a counter not yet incremented).
pub fn metric(node: &Node, line_start: &str) -> f64 {
    crate::common::metric_in(&crate::common::http_get(node.addr("http"), "/metrics"), line_start)
}

pub fn check(args: &[&str]) -> (bool, String) {
    crate::common::python_script("outbound_check.py", args)
}

/// Submits the file at `path` as it is, with MAIL FROM `options`.
pub fn submit_file(node: &Node, rcpt: &str, path: &Path, options: &[&str]) {
    let mut args = vec![
        "submit-file",
        node.addr("submission"),
        USER,
        PASSWORD,
        USER,
        rcpt,
        path.to_str().unwrap(),
    ];
    args.extend_from_slice(options);
    let (ok, out) = check(&args);
    assert!(ok, "submission failed: {out}");
}

pub fn submit(node: &Node, rcpts: &str, subject: &str) {
    let (ok, text) = check(&["submit", node.addr("submission"), USER, PASSWORD, USER, rcpts, subject]);
    assert!(ok, "submission failed: {text}");
}

pub fn queue(dir: &Path, args: &[&str]) -> String {
    let mut cmd = meshmail(dir);
    cmd.arg("queue").args(args);
    run_ok(&mut cmd, None)
}

pub fn verify_ledger(dir: &Path) -> String {
    let out = meshmail(dir).args(["verify", "ledger"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("discrepancies:  0"), "{text}");
    text
}

/// A test CA and one server certificate (for the STARTTLS MX and the
/// MTA-STS policy host names), as PEM files in `dir`: `ca.pem` (what the
/// node trusts through `[outbound] tls_ca_file`), `cert.pem`, `key.pem`.
pub struct TestCa {
    pub dir: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path, names: &[&str]) -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        std::fs::create_dir_all(dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "meshmail outbound test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        TestCa { dir: dir.to_path_buf() }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}
