//! POP3 answers compared with a reference server: the corpus under
//! `protocols/tests/corpus/` (and a few messages it lacks: dot-stuffing, a
//! header-only message, a long line) is APPENDed over IMAP to meshmail and
//! to Dovecot (Debian's `dovecot-pop3d`, started on loopback with a
//! throwaway config by `py/dovecot_peer.py`). STAT, LIST, UIDL, TOP and
//! RETR bytes, CAPA, the status of a script of good and bad commands in
//! both states, and what QUIT leaves behind (DELE, `\Seen`) must agree
//! except where `pop3-allowed-differences.txt` says, with the RFC section,
//! why meshmail is right.

mod common;

use common::{Node, setup_account};

/// Dovecot with its POP3 daemon (`dovecot-imapd` alone brings `dovecot`
/// without `pop3`): skipped loudly when missing, a failure under CI's
/// `MESHMAIL_REQUIRE_CLIENTS`.
fn dovecot_pop3d_available() -> bool {
    if !common::client_available("dovecot", "dovecot-pop3d") {
        return false;
    }
    let found = std::path::Path::new("/usr/lib/dovecot/pop3").exists();
    if !found {
        assert!(
            std::env::var_os("MESHMAIL_REQUIRE_CLIENTS").is_none(),
            "Dovecot's pop3 is required here: apt-get install dovecot-pop3d"
        );
        eprintln!("SKIPPED: /usr/lib/dovecot/pop3 is missing (apt-get install dovecot-pop3d); .ci/run installs it");
    }
    found
}

#[test]
fn pop3_answers_agree_with_dovecot() {
    if !dovecot_pop3d_available() {
        return;
    }
    let (user, password) = ("pop3diff@example.org", "pop3 differential secret");
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), user, password);
    let node = Node::start(
        dir.path(),
        &["--pop3", "127.0.0.1:0", "--allow-plaintext-auth-on-loopback"],
        &[],
    );
    let work = dir.path().join("dovecot-work").to_string_lossy().into_owned();
    let corpus = format!("{}/../protocols/tests/corpus", env!("CARGO_MANIFEST_DIR"));
    let allowed = format!("{corpus}/pop3-allowed-differences.txt");
    let (ok, text) = common::python_script(
        "pop3_differential.py",
        &[
            node.addr("pop3"),
            node.addr("imap"),
            user,
            password,
            &corpus,
            &allowed,
            &work,
        ],
    );
    assert!(
        text.contains("pop3 differential: 356 messages"),
        "the run compared the whole corpus: {text}"
    );
    assert!(ok, "meshmail and Dovecot disagree (see the DIFF lines)");
}
