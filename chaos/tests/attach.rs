//! Attach mode against a mesh the runner did not start: `meshmail up`
//! runs three nodes on its own (it writes each node's pid to
//! DATA/run/NODE.pid and restarts a node that dies); the cluster file says
//! how to reach them and kills with `kill -KILL $(cat DATA/run/node-i.pid)`;
//! `meshmail-chaos run ... --attach` puts its load on them, kills node-1
//! and a random node by those commands, and runs the usual end checks
//! (0 lost, 0 duplicated, every shard served again). A scenario that needs
//! fault endpoints is refused up front, since `up` was started without
//! MESHMAIL_FAULT_HOOKS.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `meshmail up`, stopped (SIGTERM, then SIGKILL) when dropped.
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `meshmail up` and waits for its endpoint table (the nodes are
/// ready then). `None` when it exited first; its stderr is in DATA/../up.err.
fn try_up(meshmail: &Path, data: &Path, offset: u32) -> Option<Up> {
    let err = std::fs::File::create(data.with_file_name("up.err")).expect("up.err");
    let mut child = Command::new(meshmail)
        .arg("--data-dir")
        .arg(data)
        .args(["up", "--nodes", "3", "--restart-delay-ms", "300"])
        .args(["--base-port-offset", &offset.to_string()])
        .env("MESHMAIL_LOG", "warn")
        .env_remove("MESHMAIL_FAULT_HOOKS")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .expect("meshmail up");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("status:") {
                let _ = tx.send(());
            }
        }
    });
    let up = Up(child);
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(()) => Some(up),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
        Err(e) => panic!("meshmail up printed no table in 120 s: {e}"),
    }
}

/// `meshmail up` on a free port offset. A port can still be taken between
/// the probe and `up`'s bind (a parallel test's listener); `up` then exits
/// before its table, and the next offset is tried. Returns `up` and its offset.
fn up(meshmail: &Path, data: &Path) -> (Up, u32) {
    let mut errors = Vec::new();
    for attempt in 0..3 {
        let offset = meshmail_soak::cluster::free_up_offset(3, std::process::id() + 97 * attempt).expect("offset");
        if let Some(up) = try_up(meshmail, data, offset) {
            return (up, offset);
        }
        let err = std::fs::read_to_string(data.with_file_name("up.err")).unwrap_or_default();
        errors.push(format!("offset {offset}: {err}"));
    }
    panic!(
        "meshmail up exited before its table three times:\n{}",
        errors.join("\n")
    );
}

fn cluster_file(data: &Path, offset: u32) -> String {
    let mut s = format!("data_dir = {:?}\nready_timeout_s = 60\n", data.display().to_string());
    for i in 0..3u32 {
        let port = |base: u32| base + 10 * i + offset;
        let pid = data.join("run").join(format!("node-{i}.pid"));
        s.push_str(&format!(
            r#"
[[node]]
name = "node-{i}"
http = "127.0.0.1:{}"
smtp = "127.0.0.1:{}"
submission = "127.0.0.1:{}"
imap = "127.0.0.1:{}"
kill = "kill -KILL $(cat {pid})"
# meshmail up restarts it by itself: wait (at most 10 s) for its new pid file.
restart = "for i in $(seq 100); do test -s {pid} && exit 0; sleep 0.1; done; exit 1"
"#,
            port(8080),
            port(2525),
            port(2587),
            port(1143),
            pid = pid.display()
        ));
    }
    s
}

const SCENARIO: &str = r#"name = "attach-up"
duration_s = 16
warmup_s = 4
settle_s = 4
sample_every_s = 1
recovery_limit_s = 30

[load]
accounts = 4
smtp_connections = 2
smtp_rate = 20
idle_sessions = 1
imap_readers = 1

[kills]
enabled = false

[link_drops]
enabled = false

[[schedule]]
fault = "kill"
node = "node-1"
at_s = [3]
duration_s = 1

[[schedule]]
fault = "kill"
at_s = [10]
duration_s = 1

[checks]
min_kills = 2
min_link_drops = 0
min_acked = 50
"#;

fn chaos(scenario: &Path, cluster: &Path, out: &Path) -> std::process::Output {
    let meshmail = meshmail_soak::cluster::find_meshmail(None).expect("the meshmail binary");
    Command::new(env!("CARGO_BIN_EXE_meshmail-chaos"))
        .arg("run")
        .arg(scenario)
        .arg("--attach")
        .arg(cluster)
        .arg("--out")
        .arg(out)
        .arg("--meshmail")
        .arg(meshmail)
        .output()
        .expect("meshmail-chaos")
}

#[test]
fn attach_mode_kills_and_restarts_a_mesh_started_by_meshmail_up() {
    let meshmail = meshmail_soak::cluster::find_meshmail(None).expect("the meshmail binary");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // Ports of `up` are its dev ports + 10·i + an offset whose ports are free.
    let (_up, offset) = up(&meshmail, &data);
    let cluster = tmp.path().join("cluster.toml");
    std::fs::write(&cluster, cluster_file(&data, offset)).unwrap();

    // Link drops need fault endpoints, which this `up` does not offer.
    let refused = tmp.path().join("refused.toml");
    std::fs::write(
        &refused,
        SCENARIO.replace("[link_drops]\nenabled = false", "[link_drops]\nenabled = true"),
    )
    .unwrap();
    let o = chaos(&refused, &cluster, &tmp.path().join("out-refused"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("needs fault endpoints") && stderr.contains("node-0"),
        "{stderr}"
    );

    let scenario = tmp.path().join("scenario.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let o = chaos(&scenario, &cluster, &tmp.path().join("out"));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("{stdout}");
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} line: {stdout}"))
            .to_string()
    };
    assert!(line("kills").starts_with("kills: 2 "), "{}", line("kills"));
    assert!(line("lost").starts_with("lost: 0 "), "{}", line("lost"));
    assert!(
        line("duplicated").starts_with("duplicated: 0"),
        "{}",
        line("duplicated")
    );
    assert!(line("verify_ledger").contains("exit 0"));
    // Each kill was the cluster file's command, each restart answered as a new generation.
    assert_eq!(stderr.matches(" kill node-").count(), 2, "{stderr}");
    assert_eq!(stderr.matches(" restart node-").count(), 2, "{stderr}");
}
