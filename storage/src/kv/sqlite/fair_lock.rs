//! A fair hand-off of SQLite's single write lock between processes.
//!
//! SQLite's busy handler sleeps and retries, so a process that commits in a
//! loop re-takes the lock before a sleeping rival wakes up: measured here,
//! one writer starved for 5 s while another committed thousands of times.
//! In front of `BEGIN IMMEDIATE` every writer process therefore takes this
//! lock, built from two `flock(2)` locks and one shared counter:
//!
//! * `lock` — exclusive while a process writes. Waiters block in the kernel
//!   and are woken at release, not after a sleep.
//! * `queue` — every waiter holds it shared while waiting, so the releaser
//!   can see (`LOCK_EX|LOCK_NB` fails) that someone is waiting.
//! * a counter of acquisitions in a shared mapping of the lock file. A
//!   releaser that saw waiters steps back until the counter moves (someone
//!   else took the lock), at most [`COURTESY_MAX`], before queueing again.
//!
//! The kernel drops `flock` locks when a process dies, so a SIGKILLed holder
//! or waiter never wedges the others; the counter only ever grows, so a stale
//! value costs at most one courtesy wait.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::MmapMut;

/// Longest a releaser waits for a rival to take the lock before queueing.
pub const COURTESY_MAX: Duration = Duration::from_millis(20);
const COURTESY_POLL: Duration = Duration::from_micros(100);

pub struct FairLock {
    lock: File,
    queue: File,
    map: MmapMut,
    /// Set by a release that saw waiters: the acquisition number it held.
    courtesy: Mutex<Option<u64>>,
}

impl FairLock {
    /// Opens (creating if needed) `<base>.writer-lock` and `<base>.writer-queue`.
    pub fn open(base: &Path) -> io::Result<Self> {
        let lock_path = sibling(base, "writer-lock");
        let queue_path = sibling(base, "writer-queue");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock_path)?;
        if lock.metadata()?.len() < 4096 {
            lock.set_len(4096)?;
        }
        let queue = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(queue_path)?;
        // SAFETY: the mapping is of a file only meshmail processes touch, and
        // it is only ever accessed through the atomic below.
        let map = unsafe { MmapMut::map_mut(&lock)? };
        Ok(FairLock {
            lock,
            queue,
            map,
            courtesy: Mutex::new(None),
        })
    }

    fn counter(&self) -> &AtomicU64 {
        // SAFETY: the mapping is 4096 bytes, page-aligned (so 8-aligned), and
        // lives as long as `self`; AtomicU64 has the layout of u64.
        unsafe { &*(self.map.as_ptr() as *const AtomicU64) }
    }

    /// Blocks until this process holds the write lock. Callers serialize
    /// within the process (one writer connection), so at most one thread of
    /// a process is ever in here.
    pub fn acquire(&self) -> io::Result<FairGuard<'_>> {
        let started = Instant::now();
        let courtesy = self.courtesy.lock().expect("courtesy poisoned").take();
        if let Some(held) = courtesy {
            while self.counter().load(Ordering::Acquire) == held && started.elapsed() < COURTESY_MAX {
                std::thread::sleep(COURTESY_POLL);
            }
        }
        flock(&self.queue, libc::LOCK_SH)?;
        let locked = flock(&self.lock, libc::LOCK_EX);
        flock(&self.queue, libc::LOCK_UN)?;
        locked?;
        let acquisition = self.counter().fetch_add(1, Ordering::AcqRel) + 1;
        Ok(FairGuard {
            owner: self,
            acquisition,
            waited: started.elapsed(),
        })
    }
}

/// Holds the write lock until dropped.
pub struct FairGuard<'a> {
    owner: &'a FairLock,
    acquisition: u64,
    waited: Duration,
}

impl FairGuard<'_> {
    /// How long `acquire` waited (courtesy included).
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl Drop for FairGuard<'_> {
    fn drop(&mut self) {
        let owner = self.owner;
        let nobody_waiting = flock(&owner.queue, libc::LOCK_EX | libc::LOCK_NB).is_ok();
        if nobody_waiting {
            let _ = flock(&owner.queue, libc::LOCK_UN);
        }
        let _ = flock(&owner.lock, libc::LOCK_UN);
        if !nobody_waiting {
            *owner.courtesy.lock().expect("courtesy poisoned") = Some(self.acquisition);
        }
    }
}

fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: plain syscall on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn sibling(base: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = base.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".");
    name.push(suffix);
    base.with_file_name(name)
}
