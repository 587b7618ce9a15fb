//! Failed logins are limited per client IP and per account across
//! connections and protocols (`[auth]`), and the refusal says when to try
//! again: IMAP `NO [UNAVAILABLE] … try again in N s`, SMTP 454 4.7.0, JMAP
//! 429 with Retry-After. Driven over real sockets by `py/login_limits.py`.

mod common;

use common::{Node, python_script, setup_account, write_config};

#[test]
fn failed_logins_are_limited_across_connections() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), "mallory-target@limits.test", "right-pw");
    setup_account(dir.path(), "victim@limits.test", "right-pw");
    let cfg = write_config(
        dir.path(),
        "[auth]\nfailures_per_ip_max = 5\nfailures_per_account_max = 8\nfailure_window_s = 60\n",
    );
    let node = Node::start(
        dir.path(),
        &["--config", cfg.to_str().unwrap(), "--allow-plaintext-auth-on-loopback"],
        &[],
    );
    let (ok, out) = python_script(
        "login_limits.py",
        &[
            node.addr("imap"),
            node.addr("submission"),
            node.addr("http"),
            "mallory-target@limits.test",
            "right-pw",
            "victim@limits.test",
        ],
    );
    assert!(ok, "{out}");
    let metrics = common::http_get(node.addr("http"), "/metrics");
    assert!(
        metrics.contains("meshmail_auth_rate_limited_total{by=\"ip\"}")
            && metrics.contains("meshmail_auth_rate_limited_total{by=\"account\"}"),
        "refusals are counted by what was limited"
    );
}
