//! ManageSieve (RFC 5804) over real sockets with Python's `managesieve`
//! library and a raw socket (`py/managesieve_suite.py`): capabilities,
//! AUTHENTICATE PLAIN (initial response and continuation), STARTTLS,
//! HAVESPACE, PUTSCRIPT with a line:column error, CHECKSCRIPT,
//! LISTSCRIPTS, SETACTIVE, GETSCRIPT, DELETESCRIPT, RENAMESCRIPT, NOOP,
//! literals of both forms, oversized and malformed input; and a script
//! activated over ManageSieve filtering the next SMTP delivery (read back
//! over IMAP). Each scenario runs on its own node (port 0 everywhere).

mod common;

use common::{Node, setup_account};

const PASSWORD: &str = "sieve secret";

/// Starts a node with ManageSieve on a free port and runs `scenario`;
/// returns the node for checks after the run.
fn run(scenario: &str, plaintext_on_loopback: bool) -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().unwrap();
    let user = format!("{}@example.org", scenario.replace('_', "-"));
    setup_account(dir.path(), &user, PASSWORD);
    let mut args = vec!["--managesieve", "127.0.0.1:0"];
    if plaintext_on_loopback {
        args.push("--allow-plaintext-auth-on-loopback");
    }
    let node = Node::start(dir.path(), &args, &[]);
    let (ok, text) = common::python_script(
        "managesieve_suite.py",
        &[
            scenario,
            node.addr("smtp"),
            node.addr("managesieve"),
            node.addr("imap"),
            &user,
            PASSWORD,
        ],
    );
    assert!(ok, "managesieve_suite.py {scenario} failed:\n{text}");
    assert!(text.contains(&format!("{scenario}: ok")), "{text}");
    (dir, node)
}

#[test]
fn script_commands_with_a_real_client() {
    run("basics", true);
}

#[test]
fn a_script_activated_over_managesieve_filters_the_next_delivery() {
    run("delivery", true);
}

#[test]
fn starttls_and_no_plaintext_login_without_tls() {
    run("starttls", false);
}

#[test]
fn literals_continuations_and_bad_input() {
    run("raw", true);
}

#[test]
fn three_failed_logins_close_the_session() {
    run("bad_login", true);
}

/// Every stage is measured, each metric with its HELP text.
#[test]
fn managesieve_metrics_are_exported() {
    let (_dir, node) = run("basics", true);
    let metrics = common::http_get(node.addr("http"), "/metrics");
    for (line, at_least) in [
        ("meshmail_managesieve_sessions_total", 1.0),
        (
            "meshmail_managesieve_commands_total{command=\"PUTSCRIPT\",outcome=\"ok\"}",
            2.0,
        ),
        (
            "meshmail_managesieve_commands_total{command=\"PUTSCRIPT\",outcome=\"no\"}",
            1.0,
        ),
        (
            "meshmail_managesieve_command_seconds_count{command=\"LISTSCRIPTS\"}",
            3.0,
        ),
        ("meshmail_managesieve_scripts_refused_total", 2.0),
    ] {
        let v = common::metric_in(&metrics, line);
        assert!(v >= at_least, "{line} = {v}, expected at least {at_least}");
    }
    for name in [
        "meshmail_managesieve_sessions_total",
        "meshmail_managesieve_commands_total",
        "meshmail_managesieve_command_seconds",
    ] {
        assert!(metrics.contains(&format!("# HELP {name} ")), "no HELP for {name}");
    }
}

/// Runs Debian's `sieve-connect` against `addr` as `user`, the password on
/// stdin (`--passwordfd 0`); STARTTLS with the node's self-signed
/// certificate, and no plaintext login (`--noclearauth`).
fn sieve_connect(addr: &str, user: &str, args: &[&str]) -> std::process::Output {
    use std::io::Write as _;
    let (host, port) = addr.rsplit_once(':').unwrap();
    let mut child = std::process::Command::new("sieve-connect")
        .args(["--server", host, "--port", port, "--user", user, "--passwordfd", "0"])
        .args(["--notlsverify", "--noclearauth", "--authmech", "PLAIN"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sieve-connect");
    writeln!(child.stdin.take().unwrap(), "{PASSWORD}").unwrap();
    child.wait_with_output().unwrap()
}

/// A second real client, Debian's Perl `sieve-connect`: upload over
/// STARTTLS, activate, list with the active marker, download, and a bad
/// script refused with its line.
#[test]
fn sieve_connect_uploads_activates_lists_and_downloads() {
    if !common::client_available("sieve-connect", "sieve-connect") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let user = "connect@example.org";
    setup_account(dir.path(), user, PASSWORD);
    let node = Node::start(dir.path(), &["--managesieve", "127.0.0.1:0"], &[]);
    let addr = node.addr("managesieve");
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let good = dir.path().join("good.sieve");
    std::fs::write(&good, "require \"fileinto\";\nfileinto \"Lists\";\n").unwrap();
    let bad = dir.path().join("bad.sieve");
    std::fs::write(&bad, "require \"fileinto\";\nfileinto \"x\"\n").unwrap();
    let good = good.to_str().unwrap();
    let up = sieve_connect(addr, user, &["--upload", "--localsieve", good, "--remotesieve", "main"]);
    assert!(up.status.success(), "upload: {}", text(&up));
    let act = sieve_connect(addr, user, &["--activate", "--remotesieve", "main"]);
    assert!(act.status.success(), "activate: {}", text(&act));
    let list = sieve_connect(addr, user, &["--list"]);
    let listed = text(&list);
    assert!(
        list.status.success() && listed.contains("\"main\" ACTIVE"),
        "list: {listed}"
    );
    let back = dir.path().join("back.sieve");
    let down = sieve_connect(
        addr,
        user,
        &[
            "--download",
            "--remotesieve",
            "main",
            "--localsieve",
            back.to_str().unwrap(),
        ],
    );
    assert!(down.status.success(), "download: {}", text(&down));
    assert_eq!(
        std::fs::read_to_string(&back).unwrap(),
        std::fs::read_to_string(good).unwrap()
    );
    let refused = sieve_connect(
        addr,
        user,
        &[
            "--upload",
            "--localsieve",
            bad.to_str().unwrap(),
            "--remotesieve",
            "bad",
        ],
    );
    assert!(!refused.status.success(), "a bad script is refused: {}", text(&refused));
    assert!(text(&refused).contains("line "), "{}", text(&refused));
}
