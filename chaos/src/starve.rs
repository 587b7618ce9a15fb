//! CPU starvation of one node: every thread of the node is pinned to one
//! CPU at nice 19 while a runner thread at nice 0, pinned to the same CPU,
//! spins on it; the node gets only the scraps. Heal puts the node's threads
//! back on every CPU at nice 0 and stops the spinner. Threads the node
//! creates meanwhile inherit the pinning and the nice value from their parent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::bail;

/// The CPU the starved node and the spinner share.
const CPU: usize = 0;

fn threads(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Pins thread `tid` (0: the calling thread) to `cpus`.
fn pin(tid: i32, cpus: &[usize]) -> bool {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and
    // sched_setaffinity only read and write that local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn nice(tid: i32, value: i32) -> bool {
    // SAFETY: setpriority on a thread id; no memory is touched.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, value) == 0 }
}

fn all_cpus() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// A starvation in progress; ends on [`Starvation::end`] or drop.
pub struct Starvation {
    pid: u32,
    stop: Arc<AtomicBool>,
}

impl Starvation {
    pub fn start(pid: u32) -> anyhow::Result<Starvation> {
        let tids = threads(pid);
        if tids.is_empty() {
            bail!("no threads under /proc/{pid}/task");
        }
        let pinned = tids.iter().filter(|&&t| pin(t, &[CPU]) && nice(t, 19)).count();
        if pinned == 0 {
            bail!("could not pin or renice any thread of {pid}");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("starve-spinner".into())
            .spawn(move || {
                pin(0, &[CPU]);
                while !flag.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })?;
        Ok(Starvation { pid, stop })
    }

    /// How many threads the node has (for the record).
    pub fn threads(&self) -> usize {
        threads(self.pid).len()
    }

    pub fn end(self) {
        // Drop does it.
    }
}

impl Drop for Starvation {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let cpus = all_cpus();
        for t in threads(self.pid) {
            pin(t, &cpus);
            nice(t, 0);
        }
    }
}
