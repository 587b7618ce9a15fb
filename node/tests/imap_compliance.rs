//! IMAP details an outside compliance suite checks (issue 40), with
//! imaplib and the raw wire (`py/imap_compliance.py`): `OK [UNSEEN n]` on
//! SELECT and EXAMINE for IMAP4rev1 clients, not for IMAP4rev2 ones;
//! SEARCH HEADER over repeated and folded fields; the untagged
//! HIGHESTMODSEQ of the first FETCH MODSEQ and the MODSEQ of ESEARCH
//! answers (RFC 7162); LIST/LSUB over subscriptions (RFC 3501, RFC 5258);
//! SORT base subjects and `i;ascii-casemap` (RFC 5256, answers checked
//! against Dovecot's).

mod common;

use common::{Node, python_script, setup_account, smtp_send};

const USER: &str = "comply@example.org";

#[test]
fn select_answers_what_imap4rev1_clients_expect() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), USER, "pw");
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    for i in 1..=3 {
        let (code, text) = smtp_send(
            node.addr("smtp"),
            "a@example.net",
            USER,
            &format!("Subject: m{i}\r\n\r\nbody {i}\r\n"),
        );
        assert_eq!(code, 250, "{text}");
    }
    let (ok, text) = python_script("imap_compliance.py", &[node.addr("imap"), USER, "pw"]);
    assert!(ok, "{text}");
    assert!(text.contains("imap compliance: ok"), "{text}");
}
