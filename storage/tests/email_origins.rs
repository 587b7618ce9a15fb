//! A message's identity across moves (issue 39 item 2): a MOVE keeps the
//! first place the message was stored at as the row's origin and records
//! where it went under a placement key; a COPY is another message; an
//! expunge clears the placement; rows never moved stay as earlier builds
//! wrote them. Opened through `open_kv(&KvConfig::for_tests(..))`, so the
//! same test runs on FoundationDB (`MESHMAIL_TEST_STORE=fdb`).

mod common;
use common::fixture;

use meshmail_storage::ids::{AccountId, MailboxId, Uid};
use meshmail_storage::model::messages::{self, BodyRef, Change, ChangeKind, NewMessage};
use meshmail_storage::model::summary::Summary;
use meshmail_storage::model::{accounts, domains, mailboxes, message_codec, new_id, placement};
use meshmail_storage::open::{KvConfig, open_kv};
use meshmail_storage::{Database, StorageError};

/// (mailbox, UID): a first place or a current one.
type Place = (MailboxId, Uid);
/// Where a message is now and its origin, as a test compares them.
type Found = Option<(Place, Option<Place>)>;

struct Store {
    _dir: tempfile::TempDir,
    db: Database,
    account: AccountId,
    inbox: MailboxId,
    kept: MailboxId,
}

async fn store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let db = open_kv(&KvConfig::for_tests(dir.path())).unwrap();
    let (account, inbox, kept) = db
        .run("setup", |txn| async move {
            domains::add(&txn, "example.org").await?;
            let a = accounts::add(&txn, "u@example.org", "$argon2id$x").await?;
            let inbox = mailboxes::find(&txn, a.id, "INBOX").await?.unwrap();
            let kept = mailboxes::create(&fixture(&txn), a.id, "Kept", None).await?;
            Ok::<_, StorageError>((a.id, inbox.id, kept.id))
        })
        .await
        .unwrap();
    Store {
        _dir: dir,
        db,
        account,
        inbox,
        kept,
    }
}

impl Store {
    async fn deliver(&self) -> Uid {
        let (account, inbox) = (self.account, self.inbox);
        self.db
            .run("deliver", move |txn| async move {
                let msg = NewMessage {
                    body: BodyRef {
                        hash: "ab".repeat(32),
                        size: 10,
                        inline: true,
                    },
                    flags: vec![],
                    internal_date_ms: 1_700_000_000_000,
                    summary: Summary::default(),
                    acceptance_id: new_id(),
                };
                Ok::<_, StorageError>(messages::append(&fixture(&txn), account, inbox, &msg).await?.0)
            })
            .await
            .unwrap()
    }

    async fn copy(&self, from: MailboxId, uid: Uid, to: MailboxId, moving: bool) -> Uid {
        let account = self.account;
        self.db
            .run("copy", move |txn| async move {
                let (new_uid, _) = messages::copy_to(&fixture(&txn), account, from, uid, to, moving)
                    .await?
                    .unwrap();
                Ok::<_, StorageError>(new_uid)
            })
            .await
            .unwrap()
    }

    async fn expunge(&self, mailbox: MailboxId, uid: Uid) {
        let account = self.account;
        self.db
            .run("expunge", move |txn| async move {
                messages::expunge(&fixture(&txn), account, mailbox, uid)
                    .await
                    .map(|_| ())
            })
            .await
            .unwrap();
    }

    /// (where the message first stored at `first` is, its origin).
    async fn find(&self, first: Place) -> Found {
        let account = self.account;
        let (whole, hot) = self
            .db
            .read("find", move |txn| async move {
                Ok::<_, StorageError>((
                    placement_of(messages::find(&txn, account, first).await?.map(|(m, r)| (m, r.meta()))),
                    placement_of(messages::find_meta(&txn, account, first).await?),
                ))
            })
            .await
            .unwrap();
        assert_eq!(whole, hot, "find and find_meta agree");
        whole
    }

    async fn placement(&self, first: (MailboxId, Uid)) -> Option<(MailboxId, Uid)> {
        let account = self.account;
        self.db
            .read("placement", move |txn| async move {
                placement::get(&txn, account, first).await
            })
            .await
            .unwrap()
    }

    async fn changes(&self, mailbox: MailboxId) -> Vec<Change> {
        let account = self.account;
        self.db
            .read("changes", move |txn| async move {
                messages::changes_since(&txn, account, mailbox, 0, 1000).await
            })
            .await
            .unwrap()
    }

    async fn row_version(&self, mailbox: MailboxId, uid: Uid) -> Option<u8> {
        let account = self.account;
        self.db
            .read("form", move |txn| async move {
                messages::stored_form(&txn, account, mailbox, uid).await
            })
            .await
            .unwrap()
    }

    async fn dated(&self, mailbox: MailboxId) -> Vec<messages::Dated> {
        let account = self.account;
        self.db
            .read("by_date", move |txn| async move {
                messages::by_date(&txn, account, mailbox, true, 0, 100).await
            })
            .await
            .unwrap()
    }
}

fn placement_of(found: Option<(MailboxId, messages::MessageMeta)>) -> Found {
    found.map(|(m, row)| ((m, row.uid), row.origin))
}

#[tokio::test]
async fn a_move_keeps_the_first_place_and_a_copy_starts_its_own() {
    let s = store().await;
    let first = (s.inbox, s.deliver().await);
    assert_eq!(
        s.find(first).await,
        Some((first, None)),
        "a delivery is its own first place"
    );
    assert_eq!(s.row_version(first.0, first.1).await, Some(message_codec::VERSION_2));

    // MOVE INBOX → Kept: the new row names the first place, the placement
    // key points at it, the id of the new place is no email.
    let in_kept = s.copy(s.inbox, first.1, s.kept, true).await;
    assert_eq!(s.find(first).await, Some(((s.kept, in_kept), Some(first))));
    assert_eq!(s.placement(first).await, Some((s.kept, in_kept)));
    assert_eq!(
        s.find((s.kept, in_kept)).await,
        None,
        "a moved-in row is not its place's id"
    );
    assert_eq!(s.row_version(s.kept, in_kept).await, Some(message_codec::VERSION_3));
    let dated = s.dated(s.kept).await;
    assert_eq!(dated.len(), 1);
    assert_eq!(dated[0].first_place(s.kept), first, "the index names the first place");

    // The change log: the source's expunge says "moved", the arrival
    // carries the origin.
    let out = s.changes(s.inbox).await;
    let expunged = out.iter().find(|c| c.kind == ChangeKind::Expunged).unwrap();
    assert!(expunged.moved, "{out:?}");
    assert_eq!(expunged.first_place(s.inbox), first);
    let added = s.changes(s.kept).await;
    assert_eq!(added.len(), 1);
    assert_eq!(
        (added[0].kind.clone(), added[0].first_place(s.kept)),
        (ChangeKind::Added, first)
    );

    // MOVE back: still the same first place, the placement follows.
    let back = s.copy(s.kept, in_kept, s.inbox, true).await;
    assert_ne!(back, first.1, "UIDs are never reused");
    assert_eq!(s.find(first).await, Some(((s.inbox, back), Some(first))));
    assert_eq!(s.placement(first).await, Some((s.inbox, back)));

    // COPY of the moved message: another message, its own first place.
    let copy = s.copy(s.inbox, back, s.kept, false).await;
    assert_eq!(s.find((s.kept, copy)).await, Some(((s.kept, copy), None)));
    assert_eq!(s.row_version(s.kept, copy).await, Some(message_codec::VERSION_2));
    assert_eq!(
        s.find(first).await,
        Some(((s.inbox, back), Some(first))),
        "the original stays"
    );
}

#[tokio::test]
async fn expunging_a_moved_message_clears_its_placement() {
    let s = store().await;
    let first = (s.inbox, s.deliver().await);
    let other = (s.inbox, s.deliver().await);
    let moved = s.copy(s.inbox, first.1, s.kept, true).await;
    assert_eq!(s.placement(first).await, Some((s.kept, moved)));
    s.expunge(s.kept, moved).await;
    assert_eq!(s.placement(first).await, None, "no placement outlives its row");
    assert_eq!(s.find(first).await, None);
    let out = s.changes(s.kept).await;
    let gone = out.iter().find(|c| c.kind == ChangeKind::Expunged).unwrap();
    assert!(!gone.moved, "a real expunge: {out:?}");
    assert_eq!(gone.first_place(s.kept), first, "named by its id");
    // A message never moved: no placement to clear, nothing else touched.
    s.expunge(other.0, other.1).await;
    assert_eq!(s.find(other).await, None);
    assert_eq!(s.placement(other).await, None);
}

#[test]
fn change_entries_of_earlier_builds_read_and_unmoved_ones_stay_the_same() {
    let old: Change = serde_json::from_str(r#"{"modseq":5,"uid":3,"kind":"Expunged"}"#).unwrap();
    assert_eq!((old.origin, old.moved), (None, false));
    assert_eq!(old.first_place(9), (9, 3));
    let same = serde_json::to_string(&old).unwrap();
    assert_eq!(
        same, r#"{"modseq":5,"uid":3,"kind":"Expunged"}"#,
        "no new fields when unmoved"
    );
}
