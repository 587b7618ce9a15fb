//! `meshmail up` restarts a node that keeps dying right after start with a
//! growing, bounded delay, says so on stderr, and starts over at the base
//! delay once the node has run stably.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::meshmail;

fn delay_of(line: &str) -> f64 {
    let rest = line.split("restarting in ").nth(1).unwrap_or_else(|| panic!("{line}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

fn kill(pid: &str, signal: &str) {
    let ok = Command::new("kill").args([signal, pid]).status().unwrap().success();
    assert!(ok, "kill {signal} {pid}");
}

#[test]
fn a_node_that_cannot_start_is_restarted_with_growing_spacing() {
    let dir = tempfile::tempdir().unwrap();
    // A later race for a port only fails the test loudly, never silently.
    let offset = meshmail_soak::cluster::free_up_offset(1, std::process::id()).expect("a free port offset");
    let mut up = meshmail(dir.path())
        .args(["up", "--nodes", "1", "--base-port-offset", &offset.to_string()])
        .args(["--restart-delay-ms", "200", "--restart-delay-max-ms", "1600"])
        .args(["--restart-stable-after-s", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let stderr = up.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("up: {line}");
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    let next = |what: &str, f: &dyn Fn(&str) -> bool| -> (Instant, String) {
        loop {
            let (t, line) = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no line for {what}"));
            if f(&line) {
                return (t, line);
            }
        }
    };
    let pid_of = |line: &str| {
        line.split("(pid ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .unwrap()
            .to_string()
    };
    let (_, started) = next("node-0 started", &|l| l.starts_with("node-0 started (pid "));
    let pid = pid_of(&started);

    // Kill it and take its HTTP port before `up` restarts it: every start
    // now fails at once.
    kill(&pid, "-KILL");
    let http = (8080 + offset) as u16;
    let deadline = Instant::now() + Duration::from_secs(2);
    let blocker = loop {
        match TcpListener::bind(("127.0.0.1", http)) {
            Ok(l) => break l,
            Err(e) => {
                assert!(Instant::now() < deadline, "port {http} not freed by the kill: {e}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let exits: Vec<(Instant, String)> = (0..6)
        .map(|_| next("a node-0 exit", &|l| l.starts_with("node-0 exited")))
        .collect();
    let delays: Vec<f64> = exits.iter().map(|(_, l)| delay_of(l)).collect();
    assert_eq!(delays, vec![0.2, 0.4, 0.8, 1.6, 1.6, 1.6], "doubling, capped at 1.6 s");
    for (k, w) in exits.windows(2).enumerate() {
        let gap = w[1].0 - w[0].0;
        assert!(
            gap >= Duration::from_secs_f64(delays[k]),
            "exit {k}→{}: restarted after {gap:?}, before its {} s delay",
            k + 1,
            delays[k]
        );
    }
    assert!(
        exits[1].1.contains("crash loop, 2 quick exits in a row"),
        "{}",
        exits[1].1
    );
    assert!(exits[5].1.contains("6 quick exits"), "{}", exits[5].1);

    // The port is free again: the node comes back; once it has run for the
    // stable time a death costs only the base delay again.
    drop(blocker);
    let (back_at, restarted) = next("node-0 to come back", &|l| l.starts_with("node-0 restarted (pid "));
    let pid = pid_of(&restarted);
    let stable = Duration::from_secs(5) + Duration::from_millis(300);
    std::thread::sleep(stable.saturating_sub(back_at.elapsed())); // waits out the stable time, not readiness
    kill(&pid, "-KILL");
    let (_, exit) = next("the exit after a stable run", &|l| l.starts_with("node-0 exited"));
    assert_eq!(delay_of(&exit), 0.2, "{exit}");
    assert!(!exit.contains("crash loop"), "{exit}");
    next("node-0 to come back again", &|l| {
        l.starts_with("node-0 restarted (pid ")
    });

    kill(&up.id().to_string(), "-TERM");
    let status = up.wait().unwrap();
    assert!(status.success(), "up stops cleanly on SIGTERM: {status}");
}
