//! `meshmail backup create` and `meshmail backup restore` (issue 42 item
//! 2), as an operator runs them against a running node: messages APPENDed
//! with flags into several folders (some over the inline limit, so their
//! bodies are objects) and delivered over SMTP; SMTP ingest keeps running
//! while the backup is taken; the backup is restored into a fresh, empty
//! store, a node started on it, and IMAP must show every message
//! acknowledged before the backup began, in its folder, with its flags
//! and the same BODY[] SHA-256; `meshmail verify ledger` finds 0
//! discrepancies. A damaged chunk, a non-empty target and a full disk are
//! refused with clear errors, and a failed backup leaves no manifest.
//!
//! Runs on SQLite, and on FoundationDB with MESHMAIL_TEST_STORE=fdb.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Node, meshmail, python_script, setup_account, smtp_send, wait_for};

const USERS: [&str; 2] = ["alice@example.org", "bob@example.org"];

/// One message as IMAP shows it: [folder, BODY[] SHA-256, flags, subject].
type Shown = (String, String, Vec<String>, String);

fn dump(node: &Node, user: &str) -> Vec<Shown> {
    let (host, port) = node.addr("imap").rsplit_once(':').unwrap();
    let (ok, out) = python_script("backup.py", &["dump", host, port, user, "pw"]);
    assert!(ok, "{out}");
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

fn backup(data: &Path, cmd: &str, dir: &Path, extra: &[&str]) -> Output {
    meshmail(data)
        .args(["backup", cmd])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// SMTP deliveries in a loop until told to stop; each acknowledged one is
/// recorded with the instant its 250 arrived.
struct Ingest {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(String, Instant)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ingest {
    fn start(smtp: &str) -> Ingest {
        let (stop, acked) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let (s, a, smtp) = (stop.clone(), acked.clone(), smtp.to_string());
        let thread = std::thread::spawn(move || {
            let mut i = 0;
            while !s.load(Ordering::Relaxed) {
                let to = USERS[i % 2];
                let subject = format!("ingest {i} {to}");
                let msg = format!("From: load@example.net\r\nSubject: {subject}\r\n\r\nbody {i}\r\n");
                let (code, reply) = smtp_send(&smtp, "load@example.net", to, &msg);
                assert_eq!(code, 250, "{reply}");
                a.lock().unwrap().push((subject, Instant::now()));
                i += 1;
            }
        });
        Ingest {
            stop,
            acked,
            thread: Some(thread),
        }
    }

    fn count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Stops and returns the subjects acknowledged before `t`.
    fn stop(mut self, t: Instant) -> HashSet<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let acked = self.acked.lock().unwrap();
        acked.iter().filter(|(_, at)| *at < t).map(|(s, _)| s.clone()).collect()
    }
}

/// Every message of `expected` is in `restored` (as a multiset).
fn assert_all_present(user: &str, expected: &[Shown], restored: &[Shown]) {
    let mut left = restored.to_vec();
    for m in expected {
        let at = left
            .iter()
            .position(|r| r == m)
            .unwrap_or_else(|| panic!("{user}: {m:?} acknowledged before the backup is missing after restore"));
        left.swap_remove(at);
    }
}

#[test]
fn a_backup_taken_during_ingest_restores_every_earlier_message_and_a_clean_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let (data, data2, bk) = (dir.path().join("data"), dir.path().join("data2"), dir.path().join("bk"));
    for u in USERS {
        setup_account(&data, u, "pw");
    }
    let node = Node::start(&data, &["--allow-plaintext-auth-on-loopback"], &[]);
    let (host, port) = node.addr("imap").rsplit_once(':').unwrap();
    for u in USERS {
        let (ok, out) = python_script("backup.py", &["populate", host, port, u, "pw"]);
        assert!(ok, "{out}");
        for i in 0..5 {
            let msg = format!("From: s@example.net\r\nSubject: before {i} {u}\r\n\r\nhello {i}\r\n");
            let (code, reply) = smtp_send(node.addr("smtp"), "s@example.net", u, &msg);
            assert_eq!(code, 250, "{reply}");
        }
    }
    let before: Vec<Vec<Shown>> = USERS.iter().map(|u| dump(&node, u)).collect();

    let ingest = Ingest::start(node.addr("smtp"));
    wait_for("ingest to run", Duration::from_secs(60), || ingest.count() >= 20);
    let began = Instant::now();
    // Small, paced reads stretch the backup over many transactions while
    // the ingest writes between them.
    let out = backup(&data, "create", &bk, &["--keys-per-read", "16", "--pause-ms", "40"]);
    assert!(out.status.success(), "{}", text(&out));
    let during = ingest.count();
    let acked_before = ingest.stop(began);
    println!("{}", text(&out));
    assert!(text(&out).contains("backup complete"), "{}", text(&out));
    assert!(bk.join("manifest.json").exists());
    let source: Vec<Vec<Shown>> = USERS.iter().map(|u| dump(&node, u)).collect();
    drop(node);
    println!(
        "{} ingested before the backup began, {during} by its end",
        acked_before.len()
    );

    // Restore into a fresh store; it must be accepted by verify ledger.
    let started = Instant::now();
    let out = backup(&data2, "restore", &bk, &[]);
    assert!(out.status.success(), "{}", text(&out));
    println!("{} (restore took {:?})", text(&out), started.elapsed());
    let verify = meshmail(&data2).args(["verify", "ledger"]).output().unwrap();
    assert!(verify.status.success(), "{}", text(&verify));
    assert!(text(&verify).contains("discrepancies:  0"), "{}", text(&verify));
    let delivered = delivered_count(&text(&verify));
    let expected_min = before.iter().map(Vec::len).sum::<usize>() + acked_before.len();
    assert!(
        delivered >= expected_min,
        "{delivered} delivered in the ledger, {expected_min} acknowledged"
    );

    let node2 = Node::start(&data2, &["--allow-plaintext-auth-on-loopback"], &[]);
    for (i, u) in USERS.iter().enumerate() {
        let restored = dump(&node2, u);
        // Messages from before ingest: folder, flags and bytes as they were.
        assert_all_present(u, &before[i], &restored);
        // Ingested ones acknowledged before the backup began: as the
        // source stored them (its Received header included).
        let ingested: Vec<Shown> = source[i]
            .iter()
            .filter(|m| acked_before.contains(&m.3))
            .cloned()
            .collect();
        assert!(!ingested.is_empty(), "{u}: no ingest before the backup");
        assert_all_present(u, &ingested, &restored);
        // Nothing the source never held.
        for m in &restored {
            assert!(source[i].contains(m), "{u}: {m:?} restored but never stored");
        }
    }
    // The restored node takes new mail with fresh UIDs.
    let (code, reply) = smtp_send(
        node2.addr("smtp"),
        "s@example.net",
        USERS[0],
        "Subject: after restore\r\n\r\nx\r\n",
    );
    assert_eq!(code, 250, "{reply}");
    drop(node2);
    let verify = meshmail(&data2).args(["verify", "ledger"]).output().unwrap();
    assert!(text(&verify).contains("discrepancies:  0"), "{}", text(&verify));

    refusals(dir.path(), &data2, &bk);
}

/// A non-empty target, a damaged chunk and a missing manifest are each
/// refused, and a refused restore writes nothing.
fn refusals(dir: &Path, data2: &Path, bk: &Path) {
    // A store that holds data is refused without --force.
    let out = backup(data2, "restore", bk, &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("target store is not empty"), "{}", text(&out));

    // A truncated chunk: refused before anything is written.
    let damaged = dir.join("damaged");
    copy_dir(bk, &damaged);
    let chunk = damaged.join("ledger-000001.chunk");
    let len = std::fs::metadata(&chunk).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    let data3 = dir.join("data3");
    let out = backup(&data3, "restore", &damaged, &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("ledger-000001.chunk is damaged") && text(&out).contains("nothing was restored"),
        "{}",
        text(&out)
    );
    // ... and nothing was: the intact backup still restores there.
    let out = backup(&data3, "restore", bk, &[]);
    assert!(out.status.success(), "{}", text(&out));

    // A directory without a manifest is not a backup.
    std::fs::remove_file(damaged.join("manifest.json")).unwrap();
    let out = backup(&dir.join("data4"), "restore", &damaged, &[]);
    assert!(text(&out).contains("holds no complete backup"), "{}", text(&out));
}

/// The `delivered:` count `verify ledger` prints.
fn delivered_count(verify: &str) -> usize {
    let line = verify
        .lines()
        .find(|l| l.starts_with("delivered:"))
        .expect("a delivered line");
    line.split_whitespace().last().unwrap().parse().unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// A 5 MB tmpfs (root only: `mount -t tmpfs`), unmounted on drop.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &Path) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=5m", "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(at.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_the_backup_clearly_and_leaves_no_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    setup_account(&data, USERS[0], "pw");
    let Some(disk) = SmallDisk::mount(&dir.path().join("small")) else {
        eprintln!("SKIPPED: cannot mount a tmpfs (needs root); the disk-full case is not tested");
        return;
    };
    let node = Node::start(&data, &[], &[]);
    // ~8 MB of bodies, over the inline limit: more than the 5 MB disk.
    let big = "x".repeat(199) + "\r\n";
    for i in 0..40 {
        let msg = format!("Subject: big {i}\r\n\r\n{}", big.repeat(1000));
        let (code, reply) = smtp_send(node.addr("smtp"), "s@example.net", USERS[0], &msg);
        assert_eq!(code, 250, "{reply}");
    }
    let target = disk.0.join("bk");
    let out = backup(&data, "create", &target, &[]);
    assert!(!out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains(&format!("disk full writing the backup to {}", target.display())) && t.contains("bytes"),
        "{t}"
    );
    assert!(!target.join("manifest.json").exists());
    let left: Vec<_> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.iter().all(|n| n == "BACKUP-FAILED.txt"),
        "partial files left: {left:?}"
    );
    let out = backup(&dir.path().join("data2"), "restore", &target, &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("holds no complete backup"), "{}", text(&out));
    drop(node);
    // The same source backs up fine where there is room.
    let out = backup(&data, "create", &dir.path().join("roomy"), &[]);
    assert!(out.status.success(), "{}", text(&out));
}
