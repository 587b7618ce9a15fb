//! Disk faults for the embedded store: the run's data directory (`OUT/data`:
//! the SQLite file and the blob directory) is a small tmpfs the runner mounts
//! (`[disk] tmpfs_mib`), so "the disk is full" is real (`ENOSPC` to every
//! writer, SQLite included) without touching this machine's own disk.
//!
//! - `disk_full`: a filler file takes every free byte of that tmpfs; heal
//!   deletes it.
//! - `blob_readonly`: the blob directory is bind-mounted read-only over
//!   itself (`EROFS` to the nodes' blob writes; as root, a `chmod` would not
//!   stop them); heal unmounts it. Bodies reach the blob directory only
//!   above `inline_max_bytes`, so scenarios set `[disk] blob_bodies = true`.
//!
//! The tmpfs is named `mmchaos-disk-<pid>` (the source column of
//! /proc/mounts), so a runner finds what a crashed runner left (its pid is
//! gone) and unmounts it at start; a lazy unmount takes the read-only bind
//! mount inside it along. Teardown runs on drop, from the panic hook and
//! after Ctrl-C (see main.rs). For FoundationDB the equivalent is a
//! storage server's disk filling up (the cluster throttles and then stops
//! commits): a manual scenario step, not automated here.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, bail};

pub const MOUNT_PREFIX: &str = "mmchaos-disk-";

/// Mount points of live tmpfs data directories in this process.
static ACTIVE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn run(args: &[&str]) -> anyhow::Result<()> {
    crate::netns::run(args).map(drop)
}

/// (source, mount point) of every mount named like ours.
fn our_mounts() -> Vec<(String, String)> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (src, at) = (f.next()?, f.next()?);
            src.starts_with(MOUNT_PREFIX).then(|| (src.to_string(), at.to_string()))
        })
        .collect()
}

/// Unmounts the data directories of runners that are gone; returns them.
pub fn remove_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for (src, at) in our_mounts() {
        let pid: Option<u32> = src.strip_prefix(MOUNT_PREFIX).and_then(|p| p.parse().ok());
        let gone = pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists());
        if gone && run(&["umount", "-l", &at]).is_ok() {
            removed.push(at);
        }
    }
    removed
}

/// Unmounts every data directory of this process (Ctrl-C, panic). Its
/// contents are gone afterwards: `DataTmpfs::finish` keeps them when asked.
pub fn teardown_all() {
    let active: Vec<PathBuf> = std::mem::take(&mut *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()))
        .into_iter()
        .collect();
    for at in active {
        let _ = run(&["umount", "-l", &at.display().to_string()]);
    }
}

/// Why a tmpfs cannot be mounted here, if it cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (mounting a tmpfs needs CAP_SYS_ADMIN)".into());
    }
    None
}

/// The run's data directory as a tmpfs of a fixed size.
pub struct DataTmpfs {
    at: PathBuf,
}

impl DataTmpfs {
    pub fn mount(at: &Path, mib: u64) -> anyhow::Result<DataTmpfs> {
        if let Some(why) = unavailable() {
            bail!("cannot give the data directory a tmpfs: {why}");
        }
        for gone in remove_stale() {
            eprintln!("chaos: unmounted {gone} (left by a runner that is gone)");
        }
        crate::netns::install_panic_hook();
        std::fs::create_dir_all(at)?;
        let src = format!("{MOUNT_PREFIX}{}", std::process::id());
        let opts = format!("size={mib}m,mode=0755");
        run(&["mount", "-t", "tmpfs", "-o", &opts, &src, &at.display().to_string()])?;
        ACTIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(at.to_path_buf());
        Ok(DataTmpfs { at: at.to_path_buf() })
    }

    /// Unmounts; with `keep`, first copies the contents to the same path
    /// on the disk underneath (a tmpfs forgets them).
    pub fn finish(self, keep: bool) -> anyhow::Result<()> {
        let copy = self.at.with_extension("kept");
        if keep {
            let _ = std::fs::remove_dir_all(&copy);
            run(&["cp", "-a", &self.at.display().to_string(), &copy.display().to_string()])?;
        }
        run(&["umount", "-l", &self.at.display().to_string()])?;
        ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.at);
        if keep {
            std::fs::remove_dir_all(&self.at)?;
            std::fs::rename(&copy, &self.at)?;
        }
        Ok(())
    }
}

impl Drop for DataTmpfs {
    fn drop(&mut self) {
        if ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.at) {
            let _ = run(&["umount", "-l", &self.at.display().to_string()]);
        }
    }
}

/// A disk fault in progress; `end` lifts it.
pub enum DiskFault {
    /// The filler file that took the tmpfs's free space.
    Full { filler: PathBuf, bytes: u64 },
    /// The blob directory's read-only bind mount.
    BlobReadonly { dir: PathBuf },
}

const FILLER: &str = ".chaos-disk-filler";

impl DiskFault {
    /// Fills the filesystem of `data_dir` to the last byte: fallocate the
    /// free space, then write until `ENOSPC` (what fallocate left).
    pub fn fill(data_dir: &Path) -> anyhow::Result<DiskFault> {
        let filler = data_dir.join(FILLER);
        let mut f = std::fs::File::create(&filler).context("creating the filler file")?;
        let free = free_bytes(data_dir)?;
        if free > 0 {
            // SAFETY: a valid open descriptor; offsets in range.
            let rc = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, free as libc::off_t) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::ENOSPC) {
                    let _ = std::fs::remove_file(&filler);
                    return Err(e).context("fallocate");
                }
            }
        }
        let chunk = vec![0u8; 4096];
        let mut f_end = f.metadata()?.len();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(f_end))?;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => f_end += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => {
                    let _ = std::fs::remove_file(&filler);
                    return Err(e).context("writing the filler file");
                }
            }
        }
        let _ = f.flush();
        Ok(DiskFault::Full { filler, bytes: f_end })
    }

    /// Makes `blob_dir` read-only (a bind mount over itself).
    pub fn blob_readonly(blob_dir: &Path) -> anyhow::Result<DiskFault> {
        std::fs::create_dir_all(blob_dir)?;
        let d = blob_dir.display().to_string();
        run(&["mount", "--bind", &d, &d])?;
        if let Err(e) = run(&["mount", "-o", "remount,bind,ro", &d]) {
            let _ = run(&["umount", &d]);
            return Err(e);
        }
        Ok(DiskFault::BlobReadonly {
            dir: blob_dir.to_path_buf(),
        })
    }

    pub fn describe(&self) -> String {
        match self {
            DiskFault::Full { filler, bytes } => format!(
                "{} filled the data directory's tmpfs ({:.1} MiB): 0 bytes free",
                filler.display(),
                *bytes as f64 / 1_048_576.0
            ),
            DiskFault::BlobReadonly { dir } => format!("{} bind-mounted read-only", dir.display()),
        }
    }

    pub fn end(self) -> anyhow::Result<()> {
        match self {
            DiskFault::Full { filler, .. } => std::fs::remove_file(&filler).context("removing the filler"),
            DiskFault::BlobReadonly { dir } => run(&["umount", &dir.display().to_string()]),
        }
    }
}

/// Free bytes for an unprivileged writer on the filesystem of `path`.
pub fn free_bytes(path: &Path) -> anyhow::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: statvfs writes into the zeroed struct; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error()).context("statvfs");
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs root: skipped elsewhere (the chaos scenario and
    /// node/tests/disk_full.rs run it for real in CI).
    #[test]
    fn fill_leaves_nothing_free_and_end_gives_it_back() {
        if unavailable().is_some() {
            eprintln!("SKIPPED: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("data");
        let t = DataTmpfs::mount(&at, 4).unwrap();
        std::fs::write(at.join("x"), b"before").unwrap();
        let f = DiskFault::fill(&at).unwrap();
        assert_eq!(free_bytes(&at).unwrap(), 0);
        let e = std::fs::write(at.join("y"), vec![1u8; 8192]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        f.end().unwrap();
        assert!(free_bytes(&at).unwrap() > 3 << 20);
        let ro = DiskFault::blob_readonly(&at.join("blobs")).unwrap();
        let e = std::fs::write(at.join("blobs/z"), b"z").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
        ro.end().unwrap();
        std::fs::write(at.join("blobs/z"), b"z").unwrap();
        t.finish(true).unwrap();
        assert_eq!(std::fs::read(at.join("x")).unwrap(), b"before", "kept after unmount");
        assert!(
            our_mounts()
                .iter()
                .all(|(_, m)| !m.starts_with(&dir.path().display().to_string()))
        );
    }
}
