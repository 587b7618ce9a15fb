//! IMAP over real sockets: Python's imaplib suite (and QUOTA enforced at
//! SMTP, LMTP, APPEND and COPY, COMPRESS=DEFLATE, OBJECTID ids equal to
//! JMAP's, and UTF8=ACCEPT, on the same node),
//! the IDLE push latency, parked IDLE sessions, and a real client (mbsync) round trip with 1,000
//! varied messages.

mod common;

use common::{Node, setup_account};

const PASSWORD: &str = "imap secret";

fn node(dir: &std::path::Path, user: &str) -> Node {
    setup_account(dir, user, PASSWORD);
    Node::start(dir, &["--allow-plaintext-auth-on-loopback"], &[])
}

fn python(script: &str, args: &[&str]) -> String {
    let (ok, text) = common::python_script(script, args);
    assert!(ok, "{script} failed");
    text
}

#[test]
fn imaplib_suite() {
    let dir = tempfile::tempdir().unwrap();
    let user = "ivy@example.org";
    // The quota account and its limits are set with no node running.
    let limited = "quota@example.org";
    setup_account(dir.path(), limited, PASSWORD);
    let set = common::meshmail(dir.path())
        .args(["quota", "set", limited, "--storage-kib", "8", "--messages", "3"])
        .output()
        .unwrap();
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let n = node(dir.path(), user);
    python("imap_suite.py", &[n.addr("smtp"), n.addr("imap"), user, PASSWORD]);
    python(
        "imap_quota.py",
        &[n.addr("smtp"), n.addr("lmtp"), n.addr("imap"), limited, PASSWORD, user],
    );
    let out = python("imap_compress.py", &[n.addr("imap"), n.addr("imaps"), user, PASSWORD]);
    assert!(out.contains("compress over tls"), "{out}");
    let out = python("imap_objectid.py", &[n.addr("imap"), n.addr("http"), user, PASSWORD]);
    assert!(out.contains("equal JMAP's"), "{out}");
    let out = python("imap_utf8.py", &[n.addr("imap"), user, PASSWORD]);
    assert!(out.contains("APPEND UTF8"), "{out}");
    let show = common::meshmail(dir.path())
        .args(["quota", "show", limited])
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("of 8 KiB, messages 3 of 3"), "{show}");
    let verify = common::meshmail(dir.path())
        .args(["verify", "ledger"])
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}

#[test]
fn idle_push_latency_over_1000_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let user = "idle@example.org";
    let n = node(dir.path(), user);
    let out = python(
        "idle_latency.py",
        &[n.addr("smtp"), n.addr("imap"), user, PASSWORD, "1000"],
    );
    assert!(out.contains("idle push: 1000 deliveries"), "{out}");
    let metrics = common::http_get(n.addr("http"), "/metrics");
    assert!(
        metrics.contains("meshmail_imap_idle_push_seconds_count"),
        "server-side push histogram exported"
    );
}

#[test]
fn mbsync_round_trip_with_1000_varied_messages() {
    if !common::client_available("mbsync", "isync") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let user = "sync@example.org";
    let n = node(dir.path(), user);
    let out = python(
        "mbsync_roundtrip.py",
        &[
            n.addr("smtp"),
            n.addr("imap"),
            user,
            PASSWORD,
            work.path().to_str().unwrap(),
            "1000",
        ],
    );
    assert!(out.contains("bytes identical"), "{out}");
    assert!(out.contains("synced back"), "{out}");
}

/// SEARCH through the node's envelope cache (`py/search_cache.py`):
/// answers stay right through appends and expunges by another session,
/// a mailbox deleted and created again, mixed envelope and flag keys and
/// SORT, envelopes filled by FETCH ENVELOPE; the node's metrics show the
/// cache answered (hits) and was filled by FETCHes, and a node
/// with the cache off gives the same answers.
#[test]
fn search_answers_stay_right_through_the_envelope_cache() {
    for cache_mb in ["32", "0"] {
        let dir = tempfile::tempdir().unwrap();
        let user = "cache@example.org";
        let n = node_with_imap(dir.path(), user, &format!("search_cache_mb = {cache_mb}"));
        let out = python("search_cache.py", &[n.addr("imap"), user, PASSWORD]);
        assert!(out.contains("search cache ok"), "{out}");
        let metrics = common::http_get(n.addr("http"), "/metrics");
        let hits = sample(&metrics, "meshmail_imap_envelope_cache_hits_total", "");
        let fetch_fills = sample(&metrics, "meshmail_imap_envelope_cache_fetch_fills_total", "");
        if cache_mb == "0" {
            assert_eq!(hits + fetch_fills, 0.0, "the cache is off");
        } else {
            assert!(hits >= 100.0, "the cache answered no search: {hits} hits");
            assert!(fetch_fills >= 25.0, "FETCH ENVELOPE filled nothing: {fetch_fills}");
        }
    }
}

/// Parked IDLE sessions (`py/idle_park.py`, parking after 1 s): over plain
/// TCP and TLS, a parked session is woken by a delivery and pushes EXISTS,
/// parks again, answers DONE, and its sequence numbers still map to the
/// right UIDs around expunged holes; one closed while parked leaves the
/// parked gauge at zero.
#[test]
fn idle_sessions_park_and_wake_unseen_by_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let user = "park@example.org";
    let n = node_with_imap(dir.path(), user, "park_idle_after_secs = 1");
    let out = python(
        "idle_park.py",
        &[
            n.addr("smtp"),
            n.addr("imap"),
            n.addr("imaps"),
            n.addr("http"),
            user,
            PASSWORD,
        ],
    );
    assert!(out.contains("idle park ok"), "{out}");
}

/// FETCH through the node's hot-row cache (`py/hot_cache.py`): flags,
/// sizes and CHANGEDSINCE stay right through another session's STORE,
/// APPEND, EXPUNGE and a COPY of more messages than one refresh applies;
/// the node's metrics show refreshes by the change log and reloads, and a
/// node with the cache off gives the same answers.
#[test]
fn fetch_answers_stay_right_through_the_hot_row_cache() {
    for cache_mb in ["32", "0"] {
        let dir = tempfile::tempdir().unwrap();
        let user = "hot@example.org";
        let n = node_with_imap(dir.path(), user, &format!("hot_cache_mb = {cache_mb}"));
        let out = python("hot_cache.py", &[n.addr("imap"), user, PASSWORD]);
        assert!(out.contains("hot cache ok"), "{out}");
        let metrics = common::http_get(n.addr("http"), "/metrics");
        let refreshes = |kind: &str| {
            sample(
                &metrics,
                "meshmail_imap_hot_cache_refreshes_total",
                &format!("kind=\"{kind}\""),
            )
        };
        if cache_mb == "0" {
            assert_eq!(refreshes("reload") + refreshes("changes"), 0.0, "the cache is off");
        } else {
            assert!(
                refreshes("changes") >= 1.0,
                "no refresh from the change log:\n{metrics}"
            );
            assert!(refreshes("reload") >= 2.0, "no reload after the big COPY");
            assert!(refreshes("none") >= 1.0, "no FETCH answered as held");
        }
    }
}

/// The hot-row cache reloads a mailbox whose change log the compactor
/// trimmed past what it holds (`py/hot_cache_trim.py`): flags another
/// session set before the trim show in the next FETCH.
#[test]
fn fetch_stays_right_after_the_compactor_trims_the_change_log() {
    let dir = tempfile::tempdir().unwrap();
    let user = "trim@example.org";
    let n = node_with_config(
        dir.path(),
        user,
        "[imap]\nhot_cache_mb = 32\n[compactor]\ninterval_s = 1\nchange_log_window = 5\n",
    );
    let out = python("hot_cache_trim.py", &[n.addr("imap"), n.addr("http"), user, PASSWORD]);
    assert!(out.contains("trimmed log ok"), "{out}");
    let metrics = common::http_get(n.addr("http"), "/metrics");
    let reloads = sample(&metrics, "meshmail_imap_hot_cache_refreshes_total", "kind=\"reload\"");
    assert!(reloads >= 2.0, "no reload after the trim:\n{metrics}");
}

/// A node whose `[imap]` table holds `imap_toml`, with `user` set up.
fn node_with_imap(dir: &std::path::Path, user: &str, imap_toml: &str) -> Node {
    node_with_config(dir, user, &format!("[imap]\n{imap_toml}\n"))
}

/// A node started with the config file `toml`, with `user` set up.
fn node_with_config(dir: &std::path::Path, user: &str, toml: &str) -> Node {
    setup_account(dir, user, PASSWORD);
    let cfg = common::write_config(dir, toml);
    Node::start(
        dir,
        &["--allow-plaintext-auth-on-loopback", "--config", cfg.to_str().unwrap()],
        &[],
    )
}

/// The value of the first sample in Prometheus `metrics` whose line
/// starts with `name` and contains `labels` (0 when there is none).
fn sample(metrics: &str, name: &str, labels: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}
