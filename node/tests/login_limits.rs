//! Failed logins are limited per client address and per (account, client
//! address) across connections and protocols (`[auth]`), answered more
//! and more slowly before they are refused, and the refusal says when to
//! try again: IMAP
//! `NO [UNAVAILABLE] … try again in N s`, SMTP 454 4.7.0, JMAP 429 with
//! Retry-After. An account refused from one address still logs in from
//! another (issue 40 item 5). Driven over real sockets bound to
//! 127.0.0.1, .2 and .3 by `py/login_limits.py`.

mod common;

use common::{Node, python_script, setup_account, write_config};

#[test]
fn failed_logins_are_limited_per_address_not_per_account() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), "target@limits.test", "right-pw");
    setup_account(dir.path(), "other@limits.test", "right-pw");
    let cfg = write_config(
        dir.path(),
        "[auth]\nfailures_per_ip_max = 4\nfailures_per_account_max = 3\nfailure_window_s = 60\n",
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
            "target@limits.test",
            "right-pw",
            "other@limits.test",
        ],
    );
    println!("{out}");
    assert!(ok, "{out}");
    let metrics = common::http_get(node.addr("http"), "/metrics");
    let auth: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("meshmail_auth_") && !l.contains("_bucket"))
        .collect();
    println!("{}", auth.join("\n"));
    for family in [
        "meshmail_auth_rate_limited_total{by=\"ip\"}",
        "meshmail_auth_rate_limited_total{by=\"account_ip\"}",
        "meshmail_auth_delayed_total{by=\"account_ip\"}",
        "meshmail_auth_delayed_total{by=\"ip\"}",
        "meshmail_auth_delay_seconds_count",
    ] {
        assert!(metrics.contains(family), "{family} is counted:\n{}", auth.join("\n"));
    }
    assert!(
        !metrics.contains("meshmail_auth_rate_limited_total{by=\"account\"}"),
        "no account is refused everywhere"
    );
}
