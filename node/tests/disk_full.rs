//! A full disk under the store: the node's data directory is a 24 MiB
//! tmpfs, filled to the last byte by the test. SMTP answers 452 4.3.1 at
//! once, IMAP APPEND `NO [UNAVAILABLE]`, nothing answered 4xx is stored,
//! and mail flows again once space is freed. Needs root (to mount the
//! tmpfs): prints `SKIPPED:` otherwise, unless MESHMAIL_REQUIRE_CLIENTS=1.

mod common;

use std::process::Command;

use common::{Node, python_script, setup_account, write_config};

/// Unmounts the tmpfs when the test ends, passed or not.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(at: &std::path::Path, mib: u32) -> Option<Tmpfs> {
    std::fs::create_dir_all(at).unwrap();
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "meshmail-test-disk"])
        .arg(at)
        .output()
        .expect("mount");
    if out.status.success() {
        return Some(Tmpfs(at.to_path_buf()));
    }
    let why = String::from_utf8_lossy(&out.stderr);
    if std::env::var("MESHMAIL_REQUIRE_CLIENTS").as_deref() == Ok("1") {
        panic!("mounting a tmpfs is required (MESHMAIL_REQUIRE_CLIENTS=1): {why}");
    }
    eprintln!("SKIPPED: cannot mount a tmpfs (needs root): {why}");
    None
}

#[test]
fn a_full_disk_is_refused_with_452_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let Some(_tmpfs) = mount_tmpfs(&d, 24) else { return };
    setup_account(&d, "u@ex.test", "pw");
    // Every body to the blob directory, so each delivery needs new space
    // (SQLite may still commit into pages its files already hold).
    let cfg = write_config(&d, "inline_max_bytes = 0\n");
    let node = Node::start(
        &d,
        &["--config", cfg.to_str().unwrap(), "--allow-plaintext-auth-on-loopback"],
        &[],
    );
    let (ok, out) = python_script(
        "disk_full.py",
        &[
            d.to_str().unwrap(),
            node.addr("smtp"),
            node.addr("imap"),
            "u@ex.test",
            "pw",
        ],
    );
    assert!(ok, "{out}");
    drop(node);
}
