//! The whole machine's CPU over a bench window, from the first line of
//! `/proc/stat`: what every process and kernel thread used (the node, the
//! load's clients, a peer like Dovecot, and the kernel's writeback and
//! journal threads, which no process's own figures count), what stayed
//! idle, and what the hypervisor took ("steal": time a virtual CPU wanted
//! to run while the host ran something else).
//!
//! On a shared VM, steal is why two runs of one build differ by a third:
//! the per-process CPU figures do not see it, and a CPU ceiling that
//! assumes whole cores overstates what the machine could carry.

use anyhow::Context;

/// Cumulative ticks of all CPUs, as `/proc/stat` gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    pub idle: u64,
    pub iowait: u64,
    pub steal: u64,
}

/// Shares of the machine's CPU time over a window, and the busy CPU
/// seconds in it (every core counted).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuShares {
    pub busy: f64,
    /// Idle and waiting for I/O (nothing runnable on that CPU).
    pub idle: f64,
    pub steal: f64,
    pub busy_seconds: f64,
}

/// Reads the machine's counters now.
pub fn now() -> anyhow::Result<CpuTicks> {
    parse(&std::fs::read_to_string("/proc/stat")?)
}

/// The aggregate `cpu ` line of a `/proc/stat` text.
pub fn parse(stat: &str) -> anyhow::Result<CpuTicks> {
    let line = stat
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .context("no aggregate cpu line in /proc/stat")?;
    let f: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("malformed cpu line in /proc/stat")?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    if f.len() < 4 {
        anyhow::bail!("cpu line of /proc/stat has {} fields", f.len());
    }
    Ok(CpuTicks {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        idle: at(3),
        iowait: at(4),
        steal: at(7),
    })
}

/// The shares between two readings (`hz`: ticks per second).
pub fn between(before: CpuTicks, after: CpuTicks, hz: f64) -> CpuShares {
    let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
    let busy = d(after.busy, before.busy);
    let idle = d(after.idle, before.idle) + d(after.iowait, before.iowait);
    let steal = d(after.steal, before.steal);
    let total = (busy + idle + steal).max(1.0);
    CpuShares {
        busy: busy / total,
        idle: idle / total,
        steal: steal / total,
        busy_seconds: busy / hz.max(1.0),
    }
}

/// Ticks per second of `/proc/stat`.
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf with a valid name has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// The shares since `before`.
pub fn since(before: CpuTicks) -> anyhow::Result<CpuShares> {
    Ok(between(before, now()?, ticks_per_second()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  3648439 518 549752 1993701 105590 0 54314 83544 0 0\n\
                        cpu0 1827845 259 253972 1063539 16188 0 23211 37672 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn the_aggregate_line_is_read_field_by_field() {
        let t = parse(STAT).unwrap();
        assert_eq!(t.busy, 3_648_439 + 518 + 549_752 + 54_314);
        assert_eq!((t.idle, t.iowait, t.steal), (1_993_701, 105_590, 83_544));
    }

    #[test]
    fn shares_split_the_window_between_busy_idle_and_stolen() {
        let before = CpuTicks {
            busy: 1_000,
            idle: 500,
            iowait: 100,
            steal: 50,
        };
        // 200 ticks: 100 busy, 40 idle + 20 iowait, 40 stolen.
        let after = CpuTicks {
            busy: 1_100,
            idle: 540,
            iowait: 120,
            steal: 90,
        };
        let s = between(before, after, 100.0);
        assert!((s.busy - 0.5).abs() < 1e-9, "{s:?}");
        assert!((s.idle - 0.3).abs() < 1e-9, "{s:?}");
        assert!((s.steal - 0.2).abs() < 1e-9, "{s:?}");
        assert!((s.busy_seconds - 1.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_text_without_the_aggregate_line_is_an_error() {
        assert!(parse("cpu0 1 2 3 4\n").is_err());
        assert!(parse("cpu  1 x 3 4\n").is_err());
    }
}
