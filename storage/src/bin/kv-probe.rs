//! A child process for the backend conformance suite and writer-fairness
//! checks: it opens the same store as the test and commits in a loop, so the
//! suite can kill it, run several at once, and check what they left behind.
//!
//! ```text
//! kv-probe --sqlite PATH add KEY TIMES          # TIMES transactions of add(KEY, 1)
//! kv-probe --sqlite PATH commit-loop RUN        # prints "committed N" after each commit
//! kv-probe --sqlite PATH group-commit SECS KEYS # KEYS writes per txn for SECS; prints JSON
//! ```
//! With the `fdb` feature, `--fdb CLUSTER_FILE` opens FoundationDB instead.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meshmail_storage::kv::sqlite::{SqliteBackend, SqliteOptions};
use meshmail_storage::{Database, StorageError};

fn usage() -> ! {
    eprintln!(
        "usage: kv-probe (--sqlite PATH | --fdb CLUSTER_FILE) (add KEY TIMES | commit-loop RUN | group-commit SECS KEYS)"
    );
    std::process::exit(2)
}

fn open(kind: &str, path: &str) -> Database {
    match kind {
        "--sqlite" => Database::new(Arc::new(
            SqliteBackend::open(SqliteOptions::new(path)).expect("open sqlite"),
        )),
        #[cfg(feature = "fdb")]
        "--fdb" => Database::new(Arc::new(
            meshmail_storage::kv::fdb::FdbBackend::open(Some(std::path::Path::new(path))).expect("open fdb"),
        )),
        _ => usage(),
    }
}

/// Keys of one probe transaction: 8 data keys and a marker, all or nothing.
pub fn probe_key(run: &str, n: u64, part: u8) -> Vec<u8> {
    foundationdb_tuple::pack(&("probe", run, n, part as u16))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        usage();
    }
    let db = open(&args[0], &args[1]);
    match (args[2].as_str(), &args[3..]) {
        ("add", [key, times]) => {
            let times: u64 = times.parse().unwrap_or_else(|_| usage());
            for _ in 0..times {
                let key = key.clone().into_bytes();
                db.run("probe_add", move |txn| {
                    let key = key.clone();
                    async move { txn.add_i64(&key, 1) }
                })
                .await
                .expect("add");
            }
        }
        ("commit-loop", [run]) => {
            let mut stdout = std::io::stdout();
            for n in 0u64.. {
                let run = run.clone();
                db.run("probe_commit", move |txn| {
                    let run = run.clone();
                    async move {
                        for part in 0..9u8 {
                            txn.set(&probe_key(&run, n, part), &n.to_le_bytes())?;
                        }
                        Ok::<(), StorageError>(())
                    }
                })
                .await
                .expect("commit");
                // Reported only after commit returned: every line is a promise.
                writeln!(stdout, "committed {n}").expect("stdout");
                stdout.flush().expect("flush");
            }
        }
        ("group-commit", [secs, keys]) => {
            let secs: u64 = secs.parse().unwrap_or_else(|_| usage());
            let keys: u64 = keys.parse().unwrap_or_else(|_| usage());
            let pid = std::process::id();
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut latencies_us: Vec<u64> = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let started = Instant::now();
                db.run("probe_group", move |txn| async move {
                    for k in 0..keys {
                        // Time-ordered keys: what a batch writes sorts together.
                        let key = foundationdb_tuple::pack(&("fair", pid, n, k));
                        txn.set(&key, &[0u8; 64])?;
                    }
                    Ok::<(), StorageError>(())
                })
                .await
                .expect("group commit");
                latencies_us.push(started.elapsed().as_micros() as u64);
                n += 1;
            }
            latencies_us.sort_unstable();
            let pct = |p: f64| {
                latencies_us
                    .get(((latencies_us.len() as f64 - 1.0) * p) as usize)
                    .copied()
                    .unwrap_or(0)
            };
            println!(
                "{{\"pid\":{pid},\"commits\":{n},\"p50_us\":{},\"p99_us\":{},\"max_us\":{}}}",
                pct(0.5),
                pct(0.99),
                latencies_us.last().copied().unwrap_or(0)
            );
        }
        _ => usage(),
    }
}
