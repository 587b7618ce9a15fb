//! CPU starvation really starves: a busy process gets most of a CPU, then,
//! starved (pinned beside the runner's spinner at nice 19), a small share
//! of it, then most again after the end. Measured in CPU ticks from /proc.

use std::process::{Command, Stdio};
use std::time::Duration;

use meshmail_chaos::starve::Starvation;

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn ticks_over(pid: u32, d: Duration) -> u64 {
    let a = cpu_ticks(pid);
    std::thread::sleep(d);
    cpu_ticks(pid) - a
}

#[test]
fn a_starved_process_gets_a_small_share() {
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = busy.id();
    let d = Duration::from_millis(1500);
    let free = ticks_over(pid, d);
    let s = Starvation::start(pid).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let starved = ticks_over(pid, d);
    s.end();
    let after = ticks_over(pid, d);
    let _ = busy.kill();
    let _ = busy.wait();
    eprintln!("ticks per 1.5 s: free {free}, starved {starved}, after {after}");
    // A shared 2-core machine: free gets well over a third of a CPU; nice 19
    // against a nice-0 spinner on one CPU gets a few percent.
    assert!(starved * 4 < free, "starved {starved} vs free {free}");
    assert!(starved * 4 < after, "starved {starved} vs after {after}");
}
