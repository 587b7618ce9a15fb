//! A store that cannot write (its SQLite file locked by another process):
//! SMTP answers 4xx within `[smtp] delivery_timeout_s`, IMAP answers
//! `NO [UNAVAILABLE]` within the store's retry budget, nothing answered 4xx
//! is stored afterwards, and mail flows again once the lock is gone.

mod common;

use common::{Node, python_script, setup_account, write_config};

#[test]
fn a_locked_store_is_refused_with_4xx_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup_account(d, "u@ex.test", "pw");
    let cfg = write_config(d, "[smtp]\ndelivery_timeout_s = 3\n");
    let node = Node::start(
        d,
        &["--config", cfg.to_str().unwrap(), "--allow-plaintext-auth-on-loopback"],
        &[],
    );
    let db = d.join("meshmail.sqlite");
    let (ok, out) = python_script(
        "store_outage.py",
        &[
            db.to_str().unwrap(),
            node.addr("smtp"),
            node.addr("imap"),
            "u@ex.test",
            "pw",
            "3",
        ],
    );
    assert!(ok, "{out}");
}
