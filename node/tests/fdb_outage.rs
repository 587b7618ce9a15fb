//! FoundationDB down and back (issue 38 item 6, its short version): a node
//! on a private one-process cluster takes mail; every `fdbserver` is
//! SIGKILLed and restarted 10 s later. While the cluster is gone, SMTP
//! answers 4xx within the delivery timeout (never 250 for what was not
//! kept) and the node does not crash; after it is back, mail flows again
//! without restarting the node, INBOX holds exactly what was answered 250,
//! and `verify ledger` finds every acceptance. The cluster is the test's
//! own (its own port and files), not the shared test cluster, so killing
//! it disturbs no other test. Needs `--features fdb` and `MESHMAIL_FDB_BIN`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Node, meshmail, run_ok, smtp_send, wait_for, write_config};
use meshmail_storage::open::KvConfig;

const USER: &str = "u@ex.test";
/// How long the cluster stays down.
const OUTAGE: Duration = Duration::from_secs(10);
/// `[smtp] delivery_timeout_s` of the node: the longest a 4xx may take,
/// plus one commit attempt (FDB's 5 s transaction timeout).
const DELIVERY_TIMEOUT_S: u64 = 3;

/// A private FoundationDB cluster: `processes` fdbservers on loopback, each
/// a coordinator (so one lost process leaves a quorum), in `dir`.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    ports: Vec<u16>,
    servers: Vec<Option<Child>>,
}

impl Cluster {
    fn file(&self) -> PathBuf {
        self.dir.join("fdb.cluster")
    }

    fn start_server(&mut self, i: usize) {
        let port = self.ports[i];
        let own = self.dir.join(port.to_string());
        std::fs::create_dir_all(own.join("data")).unwrap();
        std::fs::create_dir_all(own.join("logs")).unwrap();
        let server = Command::new(self.bin.join("fdbserver"))
            .args(["-p", &format!("127.0.0.1:{port}"), "-C"])
            .arg(self.file())
            .arg("-d")
            .arg(own.join("data"))
            .arg("-L")
            .arg(own.join("logs"))
            // A zone of its own each: `double` keeps two copies in two zones,
            // which one machine's processes otherwise are not.
            .args([
                "--locality-zoneid",
                &format!("z{port}"),
                "--locality-machineid",
                &format!("m{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start fdbserver");
        self.servers[i] = Some(server);
    }

    fn start_all(&mut self) {
        for i in 0..self.ports.len() {
            self.start_server(i);
        }
    }

    fn cli(&self, command: &str) -> String {
        let out = Command::new(self.bin.join("fdbcli"))
            .arg("-C")
            .arg(self.file())
            .args(["--exec", command, "--timeout", "10"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One process: `configure new single ssd`; three: `double`.
    fn new(bin: &str, dir: &Path, processes: usize) -> Cluster {
        let ports: Vec<u16> = (0..processes)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        std::fs::create_dir_all(dir).unwrap();
        let coordinators: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        std::fs::write(
            dir.join("fdb.cluster"),
            format!("outage:test@{}\n", coordinators.join(",")),
        )
        .unwrap();
        let mut c = Cluster {
            bin: PathBuf::from(bin),
            dir: dir.to_path_buf(),
            ports,
            servers: (0..processes).map(|_| None).collect(),
        };
        c.start_all();
        let mode = if processes >= 3 { "double" } else { "single" };
        c.cli(&format!("configure new {mode} ssd"));
        c.wait_available();
        c
    }

    /// Until a write commits (`status` itself can hang while a process
    /// is down, though the database serves reads and writes).
    fn wait_available(&self) {
        wait_for("the cluster to take a write", Duration::from_secs(120), || {
            self.cli("writemode on; set meshmail-test-probe 1")
                .contains("Committed")
        });
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut s) = self.servers[i].take() {
            let _ = s.kill();
            let _ = s.wait();
        }
    }

    fn kill_all(&mut self) {
        for i in 0..self.ports.len() {
            self.kill(i);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// `meshmail` on the private cluster instead of the test pass's store.
fn on(cluster: &Cluster, dir: &Path) -> Command {
    let mut cmd = meshmail(dir);
    cmd.env("MESHMAIL_STORE", format!("fdb:{}", cluster.file().display()))
        .env_remove("MESHMAIL_FDB_KEY_PREFIX");
    cmd
}

fn message(subject: &str) -> String {
    format!("From: a@remote.test\r\nTo: {USER}\r\nSubject: {subject}\r\n\r\nbody of {subject}\r\n")
}

fn inbox_subjects(imap: &str) -> Vec<String> {
    let (host, port) = imap.rsplit_once(':').unwrap();
    let script = format!(
        "import imaplib; c=imaplib.IMAP4('{host}',{port}); c.login('{USER}','pw'); c.select('INBOX')\n\
         t,d=c.fetch('1:*','(BODY.PEEK[HEADER.FIELDS (SUBJECT)])')\n\
         print('\\n'.join(sorted(p[1].decode().split(':',1)[1].strip() for p in d if isinstance(p,tuple))))"
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `MESHMAIL_FDB_BIN`, or None after saying SKIPPED (a failure in the FDB pass).
fn fdb_bin() -> Option<String> {
    let bin = std::env::var("MESHMAIL_FDB_BIN").ok().filter(|_| cfg!(feature = "fdb"));
    if bin.is_none() {
        assert!(!KvConfig::testing_on_fdb(), "the FDB test pass needs MESHMAIL_FDB_BIN");
        eprintln!("SKIPPED: needs a build with --features fdb and MESHMAIL_FDB_BIN (.ci/fdb.sh start exports it)");
    }
    bin
}

/// A private cluster of `processes`, the account, and a node on them.
fn setup(bin: &str, d: &Path, processes: usize) -> (Cluster, Node) {
    let cluster = Cluster::new(bin, &d.join("fdb"), processes);
    let _ = on(&cluster, d).args(["domain", "add", "ex.test"]).output();
    run_ok(
        on(&cluster, d).args(["account", "add", USER, "--password-stdin"]),
        Some("pw\n"),
    );
    let cfg = write_config(d, &format!("[smtp]\ndelivery_timeout_s = {DELIVERY_TIMEOUT_S}\n"));
    let store = format!("fdb:{}", cluster.file().display());
    let node = Node::start(
        d,
        &["--config", cfg.to_str().unwrap(), "--allow-plaintext-auth-on-loopback"],
        &[("MESHMAIL_STORE", store.as_str()), ("MESHMAIL_FDB_KEY_PREFIX", "")],
    );
    (cluster, node)
}

#[test]
fn foundationdb_down_and_back_answers_4xx_then_takes_mail_again_without_a_restart() {
    let Some(bin) = fdb_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut cluster, mut node) = setup(&bin, d, 1);
    let smtp = node.addr("smtp").to_string();
    let mut kept = Vec::new();
    let (code, text) = smtp_send(&smtp, "a@remote.test", USER, &message("before"));
    assert_eq!(code, 250, "{text}");
    kept.push("before".to_string());

    cluster.kill_all();
    let down = Instant::now();
    let mut refused = 0;
    let mut n = 0;
    while down.elapsed() < OUTAGE {
        n += 1;
        let subject = format!("during-{n}");
        let started = Instant::now();
        let (code, text) = smtp_send(&smtp, "a@remote.test", USER, &message(&subject));
        let took = started.elapsed();
        assert_ne!(code, 250, "250 for {subject} while FoundationDB was down: {text}");
        assert!((400..500).contains(&code), "{subject}: {code} {text}");
        assert!(
            took < Duration::from_secs(DELIVERY_TIMEOUT_S + 8),
            "{subject}: the 4xx took {took:?}"
        );
        refused += 1;
    }
    assert!(
        node.child.try_wait().unwrap().is_none(),
        "the node died with the cluster"
    );
    assert!(refused >= 1);

    cluster.start_all();
    cluster.wait_available();
    // The node's client reconnects by itself: mail is taken again within a
    // bound, by the same process.
    let back = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let subject = format!("after-{attempt}");
        let (code, text) = smtp_send(&smtp, "a@remote.test", USER, &message(&subject));
        if code == 250 {
            kept.push(subject);
            break;
        }
        assert!((400..500).contains(&code), "{subject}: {code} {text}");
        assert!(
            back.elapsed() < Duration::from_secs(60),
            "no 250 within 60 s of recovery"
        );
    }
    eprintln!(
        "fdb outage: {refused} refused with 4xx in {OUTAGE:?}, mail taken again {:.1} s after recovery",
        back.elapsed().as_secs_f64()
    );
    assert!(node.child.try_wait().unwrap().is_none(), "the node restarted");

    kept.sort();
    assert_eq!(
        inbox_subjects(node.addr("imap")),
        kept,
        "INBOX holds exactly what was answered 250"
    );
    let report = run_ok(on(&cluster, d).args(["verify", "ledger"]), None);
    eprintln!("{report}");
    node.kill();
}

/// A three-process cluster (`double` redundancy, three coordinators) loses
/// one `fdbserver` at a time, SIGKILLed and restarted, `FDB_PROCESS_KILLS`
/// times (20 by default) while one client sends mail: no 250 is lost or
/// stored twice (INBOX = exactly the messages answered 250), every refusal
/// is a 4xx, the node lives through all of it, and the ledger verifies.
#[test]
fn a_three_process_cluster_loses_one_fdbserver_at_a_time_and_no_acknowledged_mail() {
    let Some(bin) = fdb_bin() else { return };
    let kills: usize = std::env::var("FDB_PROCESS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut cluster, mut node) = setup(&bin, d, 3);
    let smtp = node.addr("smtp").to_string();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (smtp, stop) = (smtp.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut kept, mut refused) = (Vec::new(), 0);
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let subject = format!("m-{n}");
                let (code, text) = smtp_send(&smtp, "a@remote.test", USER, &message(&subject));
                match code {
                    250 => kept.push(subject),
                    400..=499 => refused += 1,
                    _ => panic!("{subject}: {code} {text}"),
                }
            }
            (kept, refused)
        })
    };
    let started = Instant::now();
    for k in 0..kills {
        let victim = k % 3;
        cluster.kill(victim);
        // Down long enough for the cluster to notice and recover without it.
        std::thread::sleep(Duration::from_millis(1500));
        cluster.start_server(victim);
        cluster.wait_available();
        assert!(node.child.try_wait().unwrap().is_none(), "the node died at kill {k}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut kept, refused) = sender.join().unwrap();
    eprintln!(
        "fdb process kills: {kills} in {:.0} s; {} answered 250, {refused} refused with 4xx",
        started.elapsed().as_secs_f64(),
        kept.len()
    );
    assert!(!kept.is_empty());
    kept.sort();
    let mut stored = inbox_subjects(node.addr("imap"));
    stored.sort();
    assert_eq!(stored, kept, "INBOX holds exactly what was answered 250, each once");
    let report = run_ok(on(&cluster, d).args(["verify", "ledger"]), None);
    assert!(report.contains(&format!("delivered:      {}", kept.len())), "{report}");
    node.kill();
}
