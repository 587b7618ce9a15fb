//! Issue 39 item 2: an Email's id and IMAP EMAILID (RFC 8621 §4, RFC 8474
//! §5.1) are immutable — a JMAP mailboxIds change and an IMAP MOVE keep
//! them, a COPY is another email with its own. Written before the change
//! that makes it pass (ids are still `e<mailbox>_<uid>` of the row's
//! current place), hence ignored: run with `--ignored` to see what is
//! missing.

mod common;
mod jmap_common;

use common::{Node, setup_account, smtp_send};
use jmap_client::client::Client;
use jmap_client::email::Property;
use jmap_client::mailbox::Role;
use jmap_common::Imap;

const ALICE: &str = "alice@example.test";
const PW: &str = "secret";

async fn connect(node: &Node) -> Client {
    Client::new()
        .credentials((ALICE, PW))
        .connect(&format!("http://{}", node.addr("http")))
        .await
        .expect("jmap-client connects")
}

/// The EMAILID of message 1 of `mailbox`, through IMAP FETCH.
fn imap_email_id(imap: &mut Imap, mailbox: &str) -> String {
    let out = imap.cmd(&format!("SELECT {mailbox}"));
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let out = imap.cmd("FETCH 1 (EMAILID)");
    let line = out
        .iter()
        .find(|l| l.contains("EMAILID ("))
        .unwrap_or_else(|| panic!("no EMAILID: {out:?}"));
    let from = line.find("EMAILID (").unwrap() + "EMAILID (".len();
    line[from..].split(')').next().unwrap().to_string()
}

async fn mailbox_ids_of(client: &Client, id: &str) -> Vec<String> {
    let e = client
        .email_get(id, Some([Property::Id, Property::MailboxIds]))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{id} is notFound"));
    assert_eq!(e.id(), Some(id));
    e.mailbox_ids().iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "issue 39 item 2: email ids still follow the row's (mailbox, uid)"]
async fn moves_keep_the_email_id_and_copies_get_their_own() {
    let dir = tempfile::tempdir().unwrap();
    setup_account(dir.path(), ALICE, PW);
    let node = Node::start(dir.path(), &["--allow-plaintext-auth-on-loopback"], &[]);
    let data = format!("From: carol@remote.test\r\nTo: {ALICE}\r\nSubject: keep me\r\n\r\nbody\r\n");
    let (code, reply) = smtp_send(node.addr("smtp"), "carol@remote.test", ALICE, &data);
    assert_eq!(code, 250, "{reply}");
    let alice = connect(&node).await;
    let kept = alice
        .mailbox_create("Kept", None::<String>, Role::None)
        .await
        .unwrap()
        .id()
        .unwrap()
        .to_string();
    let filter: Option<jmap_client::core::query::Filter<jmap_client::email::query::Filter>> = None;
    let id = alice.email_query(filter, None::<Vec<_>>).await.unwrap().ids()[0].to_string();
    let mut imap = Imap::login(node.addr("imap"), ALICE, PW);
    assert_eq!(imap_email_id(&mut imap, "INBOX"), id, "EMAILID is the JMAP id");
    let state = alice.email_changes("s", None).await.unwrap().new_state().to_string();

    // JMAP mailboxIds change: the same email, elsewhere.
    alice.email_set_mailboxes(&id, vec![kept.clone()]).await.unwrap();
    assert_eq!(mailbox_ids_of(&alice, &id).await, vec![kept.clone()]);
    let changes = alice.email_changes(&state, None).await.unwrap();
    assert_eq!(
        (changes.created(), changes.updated(), changes.destroyed()),
        (&[][..], &[id.clone()][..], &[][..]),
        "a move is one update"
    );
    assert_eq!(imap_email_id(&mut imap, "Kept"), id, "EMAILID survives a JMAP move");

    // IMAP MOVE back, then an EXPUNGE where it was: still the same email.
    let out = imap.cmd("MOVE 1 INBOX");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let out = imap.cmd("EXPUNGE");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let inbox = mailbox_ids_of(&alice, &id).await;
    assert_ne!(inbox, vec![kept.clone()]);
    assert_eq!(imap_email_id(&mut imap, "INBOX"), id, "EMAILID survives an IMAP MOVE");

    // COPY: another email with its own id (maxMailboxesPerEmail is 1).
    let out = imap.cmd("COPY 1 Kept");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let copy = imap_email_id(&mut imap, "Kept");
    assert_ne!(copy, id, "a copy is another email");
    assert_eq!(mailbox_ids_of(&alice, &copy).await, [kept]);
    assert_eq!(mailbox_ids_of(&alice, &id).await, inbox, "the original stays");
}
