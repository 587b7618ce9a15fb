//! IMAP answers compared with a reference server: the corpus under
//! `protocols/tests/corpus/` (344 varied messages, 24 of them reply chains
//! for THREAD) is APPENDed to meshmail and to Dovecot (Debian's
//! `dovecot-imapd`, started on loopback with a throwaway config by
//! `py/dovecot_peer.py`), and FETCH items, SEARCH queries, SORT and THREAD
//! answers must agree except where `allowed-differences.txt` says, with the
//! RFC section, why meshmail is right.

mod common;

use common::{Node, setup_account};

#[test]
fn fetch_and_search_agree_with_dovecot() {
    if !common::client_available("dovecot", "dovecot-imapd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (user, password) = ("diff@example.org", "differential secret");
    setup_account(dir.path(), user, password);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let corpus = format!("{}/../protocols/tests/corpus", env!("CARGO_MANIFEST_DIR"));
    let work = dir.path().join("dovecot-work");
    let allowed = format!("{corpus}/allowed-differences.txt");
    let work = work.to_string_lossy().into_owned();
    let (ok, text) = common::python_script(
        "imap_differential.py",
        &[node.addr("imap"), user, password, &corpus, &allowed, &work],
    );
    assert!(
        text.contains("differential: 344 messages"),
        "the run compared the whole corpus"
    );
    assert!(ok, "meshmail and Dovecot disagree (see the DIFF lines)");
}
