//! Issue 39 item 2: an Email's id and IMAP EMAILID (RFC 8621 §4, RFC 8474
//! §5.1) are immutable — a JMAP mailboxIds change and an IMAP MOVE keep
//! them (ids name the message's first place, see `protocols::jmap::wire::ids`),
//! a COPY is another email with its own. Also: the source's EXPUNGE after
//! a move does not lose the id, `Email/changes` reports a move as one
//! update, blob ids and SEARCH EMAILID follow the message, and a destroy
//! by the kept id is a destroy.

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

/// `Email/changes` since `state`: (created, updated, destroyed), and the
/// new state.
async fn changes(client: &Client, state: &str) -> (Vec<String>, Vec<String>, Vec<String>, String) {
    let c = client.email_changes(state, None).await.unwrap();
    (
        c.created().to_vec(),
        c.updated().to_vec(),
        c.destroyed().to_vec(),
        c.new_state().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
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
    let blob = alice
        .email_get(&id, Some([Property::BlobId]))
        .await
        .unwrap()
        .unwrap()
        .blob_id()
        .unwrap()
        .to_string();
    let bytes = alice.download(&blob).await.unwrap();

    // JMAP mailboxIds change: the same email, elsewhere.
    alice.email_set_mailboxes(&id, vec![kept.clone()]).await.unwrap();
    assert_eq!(mailbox_ids_of(&alice, &id).await, vec![kept.clone()]);
    let (created, updated, destroyed, state) = changes(&alice, &state).await;
    assert_eq!(
        (created, updated, destroyed),
        (Vec::<String>::new(), vec![id.clone()], Vec::<String>::new()),
        "a move is one update"
    );
    assert_eq!(imap_email_id(&mut imap, "Kept"), id, "EMAILID survives a JMAP move");
    assert_eq!(alice.download(&blob).await.unwrap(), bytes, "the blob id follows it");

    // IMAP MOVE back, then an EXPUNGE where it was: still the same email.
    let out = imap.cmd("MOVE 1 INBOX");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let out = imap.cmd("EXPUNGE");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let inbox = mailbox_ids_of(&alice, &id).await;
    assert_ne!(inbox, vec![kept.clone()]);
    assert_eq!(imap_email_id(&mut imap, "INBOX"), id, "EMAILID survives an IMAP MOVE");
    let (created, updated, destroyed, state) = changes(&alice, &state).await;
    assert_eq!(
        (created, updated, destroyed),
        (Vec::<String>::new(), vec![id.clone()], Vec::<String>::new()),
        "an IMAP MOVE is one update too"
    );
    let out = imap.cmd(&format!("UID SEARCH EMAILID {id} SUBJECT keep"));
    let hits = out
        .iter()
        .find(|l| l.starts_with("* SEARCH"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(hits.split_whitespace().count(), 3, "SEARCH EMAILID finds it: {out:?}");

    // COPY: another email with its own id (maxMailboxesPerEmail is 1).
    let out = imap.cmd("COPY 1 Kept");
    assert!(out.last().unwrap().contains("OK"), "{out:?}");
    let copy = imap_email_id(&mut imap, "Kept");
    assert_ne!(copy, id, "a copy is another email");
    assert_eq!(mailbox_ids_of(&alice, &copy).await, std::slice::from_ref(&kept));
    assert_eq!(mailbox_ids_of(&alice, &id).await, inbox, "the original stays");
    let (created, _, destroyed, state) = changes(&alice, &state).await;
    assert_eq!((created, destroyed), (vec![copy.clone()], vec![]), "a copy is created");

    // Destroying by the kept id destroys the moved message, once.
    alice.email_destroy(&id).await.unwrap();
    let gone = alice.email_get(&id, Some([Property::Id])).await.unwrap();
    assert!(gone.is_none(), "destroyed: {gone:?}");
    let (created, updated, destroyed, _) = changes(&alice, &state).await;
    assert_eq!(
        (created, updated, destroyed),
        (Vec::<String>::new(), Vec::<String>::new(), vec![id.clone()])
    );
    assert_eq!(mailbox_ids_of(&alice, &copy).await, [kept], "the copy lives on");
}
