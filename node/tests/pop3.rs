//! POP3 over real sockets with Python's poplib (`py/pop3_suite.py`): CAPA,
//! USER/PASS and AUTH PLAIN, STAT/LIST/UIDL/RETR/TOP with byte-stuffing,
//! DELE applied at QUIT only (IMAP then shows the messages gone), RSET, a
//! dropped connection deleting nothing, STLS and POP3S, failed logins, and
//! over-long lines, a maildrop read in more than one page, and fetchmail
//! (Debian) keeping, then deleting over POP3S. Each scenario runs on its own node (port 0 for every
//! listener) after three messages were delivered over SMTP.

mod common;

use common::{Node, setup_account};

const PASSWORD: &str = "pop3 secret";

/// Starts a node with POP3 and POP3S on free ports and runs `scenario`.
fn run(scenario: &str, plaintext_on_loopback: bool) {
    let dir = tempfile::tempdir().unwrap();
    let user = format!("{}@example.org", scenario.replace('_', "-"));
    setup_account(dir.path(), &user, PASSWORD);
    let mut args = vec!["--pop3", "127.0.0.1:0", "--pop3s", "127.0.0.1:0"];
    if plaintext_on_loopback {
        args.push("--allow-plaintext-auth-on-loopback");
    }
    let node = Node::start(dir.path(), &args, &[]);
    let (ok, text) = common::python_script(
        "pop3_suite.py",
        &[
            scenario,
            node.addr("smtp"),
            node.addr("pop3"),
            node.addr("pop3s"),
            node.addr("imap"),
            node.addr("http"),
            &user,
            PASSWORD,
        ],
    );
    assert!(ok, "pop3_suite.py {scenario} failed:\n{text}");
    assert!(text.contains(&format!("{scenario}: ok")), "{text}");
}

#[test]
fn capa_user_pass_and_auth_plain() {
    run("capa_and_logins", true);
}

#[test]
fn stat_list_uidl_retr_top_and_byte_stuffing() {
    run("listing", true);
}

#[test]
fn dele_is_applied_at_quit() {
    run("dele_quit", true);
}

/// fetchmail (Debian), the POP3 client of many older setups: plaintext on
/// loopback with `keep`, then POP3S deleting, then nothing left (exit 1).
#[test]
fn fetchmail_fetches_keeps_and_deletes() {
    if common::client_available("fetchmail", "fetchmail") {
        run("fetchmail", true);
    }
}

#[test]
fn rset_undoes_dele() {
    run("dele_rset", true);
}

#[test]
fn a_dropped_connection_deletes_nothing() {
    run("dele_drop", true);
}

#[test]
fn stls_and_pop3s_and_no_plaintext_login_without_tls() {
    run("stls", false);
}

#[test]
fn a_maildrop_larger_than_one_read() {
    run("big_inbox", true);
}

#[test]
fn three_failed_logins_close_the_session() {
    run("bad_login", true);
}

#[test]
fn long_lines_and_bad_commands_never_crash() {
    run("long_lines", true);
}

/// On a two-node mesh, POP3 on one node and IMAP on the other, both ways:
/// one of the two runs is on the node that does not own the account's
/// shard, so its QUIT's expunge goes to the owner over the mesh.
#[test]
fn dele_at_quit_reaches_the_shard_owner_across_the_mesh() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let user = "mesh@example.org";
    setup_account(dir, user, PASSWORD);
    common::run_ok(common::meshmail(dir).args(["cluster", "init"]), None);
    for n in ["node-a", "node-b"] {
        common::run_ok(common::meshmail(dir).args(["cluster", "cert", n]), None);
    }
    let pop3 = [
        "--pop3",
        "127.0.0.1:0",
        "--allow-plaintext-auth-on-loopback",
        "--mesh",
        "127.0.0.1:0",
    ];
    let a = Node::start(dir, &[&["--node-name", "node-a"], &pop3[..]].concat(), &[]);
    let seed = format!("node-a@{}", a.addr("mesh"));
    let b = Node::start(
        dir,
        &[&["--node-name", "node-b", "--seeds", &seed], &pop3[..]].concat(),
        &[],
    );
    common::wait_for("the mesh to converge", std::time::Duration::from_secs(60), || {
        common::converged(1024, &[&a, &b])
    });
    for (pop, imap) in [(&a, &b), (&b, &a)] {
        let (ok, text) = common::python_script(
            "pop3_suite.py",
            &[
                "dele_newest",
                pop.addr("smtp"),
                pop.addr("pop3"),
                pop.addr("pop3"),
                imap.addr("imap"),
                pop.addr("http"),
                user,
                PASSWORD,
            ],
        );
        assert!(ok && text.contains("dele_newest: ok"), "{text}");
    }
}

/// The POP3 stages are measured, each metric with its HELP text.
#[test]
fn pop3_metrics_are_exported() {
    let dir = tempfile::tempdir().unwrap();
    let user = "metrics@example.org";
    setup_account(dir.path(), user, PASSWORD);
    let node = Node::start(
        dir.path(),
        &["--pop3", "127.0.0.1:0", "--allow-plaintext-auth-on-loopback"],
        &[],
    );
    let (ok, text) = common::python_script(
        "pop3_suite.py",
        &[
            "dele_quit",
            node.addr("smtp"),
            node.addr("pop3"),
            node.addr("pop3"),
            node.addr("imap"),
            node.addr("http"),
            user,
            PASSWORD,
        ],
    );
    assert!(ok, "{text}");
    let metrics = common::http_get(node.addr("http"), "/metrics");
    for (line, at_least) in [
        ("meshmail_pop3_sessions_total{listener=\"pop3\"}", 2.0),
        ("meshmail_pop3_commands_total{command=\"DELE\"}", 2.0),
        ("meshmail_pop3_command_seconds_count{command=\"RETR\"}", 1.0),
        ("meshmail_pop3_errors_total{command=\"DELE\"}", 1.0),
        ("meshmail_pop3_expunged_total", 1.0),
    ] {
        let v = common::metric_in(&metrics, line);
        assert!(v >= at_least, "{line} = {v}, expected at least {at_least}");
    }
    for name in ["meshmail_pop3_sessions_total", "meshmail_pop3_command_seconds"] {
        assert!(metrics.contains(&format!("# HELP {name} ")), "no HELP for {name}");
    }
}
