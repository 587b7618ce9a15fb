//! IMAP commands on mailboxes: SELECT/EXAMINE, CREATE, DELETE, RENAME,
//! (UN)SUBSCRIBE, LIST/LSUB, NAMESPACE, STATUS, APPEND, CLOSE/UNSELECT,
//! quotas. Message commands are in `messages`. Reads go to the
//! store; every write goes to the account's shard actor.

use bytes::Bytes;
use meshmail_actors::delivery::{DeliveryError, DeliveryRequest, Outcome, deliver};
use meshmail_actors::mailbox_ops::{MailboxOp, request};
use meshmail_actors::op_error::OpError;
use meshmail_storage::StorageError;
use meshmail_storage::ids::AccountId;
use meshmail_storage::model::mailboxes::{self, Mailbox};
use meshmail_storage::model::quota;
use meshmail_storage::model::{new_id, now_ms};

use super::list_tree::{self, Existing};
use super::view::Selected;
use super::{Login, State, Transition};
use crate::imap::wire::response::{self, ListItem, Status};
use crate::imap::wire::types::{AppendMessage, CommandKind, ListCommand, SelectParams, StatusItem, StatusValue};
use crate::ingest::ingest;
use crate::net::{Conn, ConnError};

use meshmail_storage::model::mailboxes::DELIMITER;

/// The commands of the authenticated state; `sel` is the selected mailbox
/// when there is one (for untagged updates and DELETE of it).
pub(super) async fn run(
    st: &mut State,
    login: &Login,
    sel: Option<&mut Selected>,
    conn: &mut Conn,
    tag: &str,
    kind: CommandKind,
) -> Result<Transition, ConnError> {
    use CommandKind as K;
    let account = login.account.id;
    match kind {
        K::Select { mailbox, params } => return Ok(select(st, account, conn, tag, &mailbox, params, false).await),
        K::Examine { mailbox, params } => return Ok(select(st, account, conn, tag, &mailbox, params, true).await),
        K::Create { mailbox, special_use } => create(st, account, conn, tag, &mailbox, special_use).await,
        K::Delete(name) => {
            let was_selected = sel.is_some_and(|s| s.name == mailboxes::canonical_name(&name));
            let r = write(st, account, MailboxOp::Delete { name }).await;
            reply(st, conn, tag, r, "DELETE completed");
            if was_selected {
                return Ok(Transition::Deselect);
            }
        }
        K::Rename { from, to } => {
            let r = write(st, account, MailboxOp::Rename { from, to }).await;
            reply(st, conn, tag, r, "RENAME completed");
        }
        K::Subscribe(name) => {
            let r = write(st, account, MailboxOp::Subscribe { name, subscribed: true }).await;
            reply(st, conn, tag, r, "SUBSCRIBE completed");
        }
        K::Unsubscribe(name) => {
            let r = write(
                st,
                account,
                MailboxOp::Subscribe {
                    name,
                    subscribed: false,
                },
            )
            .await;
            reply(st, conn, tag, r, "UNSUBSCRIBE completed");
        }
        K::List(cmd) => list(st, account, conn, tag, cmd, "LIST").await,
        K::Lsub { reference, pattern } => {
            let cmd = ListCommand {
                reference,
                patterns: vec![pattern],
                select_subscribed: true,
                ..Default::default()
            };
            list(st, account, conn, tag, cmd, "LSUB").await
        }
        K::Namespace => {
            conn.send(&response::namespace_line("", Some(DELIMITER), st.utf8));
            st.tagged(conn, tag, Status::Ok, None, "NAMESPACE completed");
        }
        K::Status { mailbox, items } => status(st, account, conn, tag, &mailbox, &items).await,
        K::Append { mailbox, messages } => append(st, login, sel, conn, tag, &mailbox, messages).await,
        K::GetQuotaRoot(mailbox) => {
            conn.send(&response::quotaroot_line(&mailbox, &[""], st.utf8));
            quota(st, account, conn).await;
            st.tagged(conn, tag, Status::Ok, None, "GETQUOTAROOT completed");
        }
        K::GetQuota(root) if root.is_empty() => {
            quota(st, account, conn).await;
            st.tagged(conn, tag, Status::Ok, None, "GETQUOTA completed");
        }
        K::GetQuota(_) => st.tagged(conn, tag, Status::No, Some("NONEXISTENT"), "No such quota root"),
        K::SetQuota { .. } => st.tagged(conn, tag, Status::No, Some("NOPERM"), "Quotas are set by the operator"),
        // The selected state's commands are routed to `messages`.
        _ => st.tagged(conn, tag, Status::Bad, None, "Command not valid here"),
    }
    Ok(Transition::Stay)
}

/// CREATE, with RFC 6154's USE; a trailing delimiter is dropped (RFC
/// 9051 §6.3.4: it only declares that inferiors will follow).
async fn create(
    st: &mut State,
    account: AccountId,
    conn: &mut Conn,
    tag: &str,
    mailbox: &str,
    special_use: Vec<String>,
) {
    let name = mailbox.trim_end_matches(DELIMITER).to_string();
    let special = special_use.into_iter().next();
    let r = write(
        st,
        account,
        MailboxOp::CreateUnsubscribed {
            name: name.clone(),
            special_use: special,
        },
    )
    .await;
    // OBJECTID (RFC 8474 §4.1): the new mailbox's id in the OK.
    match (&r, find(st, account, &name).await) {
        (Ok(_), Ok(Some(mb))) => {
            let code = format!("MAILBOXID ({})", crate::jmap::wire::ids::mailbox_id(mb.id));
            st.tagged(conn, tag, Status::Ok, Some(&code), "CREATE completed");
        }
        _ => reply(st, conn, tag, r, "CREATE completed"),
    }
}

async fn status(st: &mut State, account: AccountId, conn: &mut Conn, tag: &str, mailbox: &str, items: &[StatusItem]) {
    match find(st, account, mailbox).await {
        Ok(Some(mb)) => {
            let values = status_values(st, account, &mb, items).await;
            conn.send(&response::status_response_line(&mb.name, &values, st.utf8));
            st.tagged(conn, tag, Status::Ok, None, "STATUS completed");
        }
        Ok(None) => st.tagged(conn, tag, Status::No, Some("NONEXISTENT"), "No such mailbox"),
        Err(_) => st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later"),
    }
}

/// Sends a write to the account's shard actor.
pub(super) async fn write(
    st: &State,
    account: AccountId,
    op: MailboxOp,
) -> Result<meshmail_actors::mailbox_ops::OpResult, OpError> {
    request(&st.shared.ctx, account, op).await
}

fn reply<T>(st: &State, conn: &mut Conn, tag: &str, r: Result<T, OpError>, ok: &str) {
    match r {
        Ok(_) => st.tagged(conn, tag, Status::Ok, None, ok),
        Err(e) => refused(st, conn, tag, &e),
    }
}

/// The tagged NO for an operation the shard actor did not apply, with the
/// RFC 5530 response code of its kind.
pub(super) fn refused(st: &State, conn: &mut Conn, tag: &str, e: &OpError) {
    let code = match e {
        OpError::AlreadyExists(_) => "ALREADYEXISTS",
        OpError::NotFound(_) => "NONEXISTENT",
        OpError::NotAllowed(_) => "CANNOT",
        OpError::Unavailable(_) => "UNAVAILABLE",
        OpError::Failed(_) => "SERVERBUG",
    };
    st.tagged(conn, tag, Status::No, Some(code), &e.to_string());
}

pub(super) async fn find(st: &State, account: AccountId, name: &str) -> Result<Option<Mailbox>, StorageError> {
    let name = name.to_string();
    st.shared
        .ctx
        .db
        .read("imap_find", move |txn| {
            let name = name.clone();
            async move { mailboxes::find(&txn, account, &name).await }
        })
        .await
}

/// SELECT/EXAMINE. A failed one leaves the session unselected (RFC 9051
/// §6.3.2), whatever was selected before.
async fn select(
    st: &mut State,
    account: AccountId,
    conn: &mut Conn,
    tag: &str,
    name: &str,
    params: SelectParams,
    read_only: bool,
) -> Transition {
    if params.condstore || params.qresync.is_some() {
        st.condstore = true;
    }
    let mb = match find(st, account, name).await {
        Ok(Some(mb)) => mb,
        Ok(None) => {
            st.tagged(conn, tag, Status::No, Some("NONEXISTENT"), "No such mailbox");
            return Transition::Deselect;
        }
        Err(_) => {
            st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
            return Transition::Deselect;
        }
    };
    let mut sel = match Selected::open(&st.shared.ctx.db, account, &mb, read_only).await {
        Ok(s) => s,
        Err(_) => {
            st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
            return Transition::Deselect;
        }
    };
    let out = select_untagged(st, account, &mut sel, &mb).await;
    conn.send(&out);
    if let Some(q) = params.qresync.as_ref()
        && st.qresync
        && q.uidvalidity == mb.uid_validity
    {
        super::messages::qresync_select(st, conn, &sel, q).await;
    }
    let code = if read_only { "READ-ONLY" } else { "READ-WRITE" };
    st.tagged(conn, tag, Status::Ok, Some(code), "SELECT completed");
    Transition::Select(Box::new(sel))
}

/// The untagged responses SELECT and EXAMINE send before the tagged OK:
/// EXISTS, RECENT, FLAGS, the UID and id codes, and under CONDSTORE the
/// HIGHESTMODSEQ.
async fn select_untagged(st: &mut State, account: AccountId, sel: &mut Selected, mb: &Mailbox) -> Vec<u8> {
    let recent = st.settle_recent(sel, true).await;
    let mut out = Vec::new();
    out.extend_from_slice(format!("* {} EXISTS\r\n", sel.uids.len()).as_bytes());
    if let Some(line) = recent {
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(&sel.flags_lines());
    out.extend_from_slice(&response::untagged(
        Status::Ok,
        Some(&format!("UIDVALIDITY {}", mb.uid_validity)),
        "UIDs valid",
    ));
    out.extend_from_slice(&response::untagged(
        Status::Ok,
        Some(&format!("UIDNEXT {}", mb.uid_next)),
        "Predicted next UID",
    ));
    // IMAP4rev1 clients expect the first unseen message's number (RFC 3501
    // §6.3.1; IMAP4rev2 dropped it, RFC 9051 §7.1).
    if !st.rev2
        && let Some(seq) = first_unseen(st, account, sel).await
    {
        out.extend_from_slice(&response::untagged(
            Status::Ok,
            Some(&format!("UNSEEN {seq}")),
            "First unseen",
        ));
    }
    // OBJECTID (RFC 8474 §4): the JMAP Mailbox id.
    out.extend_from_slice(&response::untagged(
        Status::Ok,
        Some(&format!("MAILBOXID ({})", crate::jmap::wire::ids::mailbox_id(mb.id))),
        "Ok",
    ));
    if st.condstore {
        out.extend_from_slice(&response::untagged(
            Status::Ok,
            Some(&format!("HIGHESTMODSEQ {}", mb.highest_modseq)),
            "Highest",
        ));
    }
    out
}

/// The sequence number of the first message without `\Seen` in the view,
/// from the mailbox's unseen index (one short range read). None when all
/// are seen, the store does not answer (the SELECT goes on without it), or
/// the mailbox predates the index.
async fn first_unseen(st: &State, account: AccountId, sel: &Selected) -> Option<u32> {
    /// Unseen UIDs read: those that arrived after the view was taken are skipped.
    const CANDIDATES: usize = 16;
    if !sel.unseen_index || sel.uids.is_empty() {
        return None;
    }
    let mailbox = sel.id;
    let uids = st
        .shared
        .ctx
        .db
        .read("imap_first_unseen", move |txn| async move {
            meshmail_storage::model::messages::unseen_uids(&txn, account, mailbox, 1, CANDIDATES).await
        })
        .await
        .ok()?;
    uids.into_iter().find_map(|uid| sel.seq_of(uid))
}

async fn status_values(
    st: &State,
    account: AccountId,
    mb: &Mailbox,
    items: &[StatusItem],
) -> Vec<(StatusItem, StatusValue)> {
    let id = mb.id;
    let counts = st
        .shared
        .ctx
        .db
        .read("imap_status", move |txn| async move {
            mailboxes::counts(&txn, account, id).await
        })
        .await
        .unwrap_or_default();
    // DELETED and DELETED-STORAGE read the same rows: once for both.
    let deleted = if items
        .iter()
        .any(|i| matches!(i, StatusItem::Deleted | StatusItem::DeletedStorage))
    {
        deleted_in(st, account, mb).await
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    for item in items {
        let v = match item {
            StatusItem::Messages => counts.messages.max(0) as u64,
            StatusItem::UidNext => u64::from(mb.uid_next),
            StatusItem::UidValidity => u64::from(mb.uid_validity),
            StatusItem::Unseen => counts.unseen.max(0) as u64,
            StatusItem::Size => counts.bytes.max(0) as u64,
            StatusItem::HighestModSeq => mb.highest_modseq,
            StatusItem::Recent if st.rev2 || mb.recent_uid + 1 >= mb.uid_next => 0,
            StatusItem::Recent => meshmail_storage::model::messages::all_uids(&st.shared.ctx.db, account, id)
                .await
                .map(|u| u.iter().filter(|u| **u > mb.recent_uid).count() as u64)
                .unwrap_or(0),
            StatusItem::Deleted => deleted.len() as u64,
            StatusItem::DeletedStorage => deleted.iter().map(|m| m.body.size).sum(),
            StatusItem::MailboxId => {
                out.push((*item, StatusValue::ObjectId(crate::jmap::wire::ids::mailbox_id(id))));
                continue;
            }
        };
        out.push((*item, StatusValue::Number(v)));
    }
    out
}

/// The mailbox's messages flagged `\Deleted` (STATUS DELETED and
/// DELETED-STORAGE of a mailbox that need not be selected); empty when
/// the store cannot be read.
async fn deleted_in(
    st: &State,
    account: AccountId,
    mb: &Mailbox,
) -> Vec<meshmail_storage::model::messages::MessageMeta> {
    let db = &st.shared.ctx.db;
    let Ok(uids) = meshmail_storage::model::messages::all_uids(db, account, mb.id).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for chunk in uids.chunks(super::view::META_ROWS_PER_READ) {
        let Ok(rows) = super::view::load_meta(db, account, mb.id, chunk).await else {
            return Vec::new();
        };
        out.extend(rows.into_iter().filter(|m| m.has_flag("\\Deleted")));
    }
    out
}

async fn list(st: &mut State, account: AccountId, conn: &mut Conn, tag: &str, cmd: ListCommand, kind: &str) {
    // `LIST "" ""`: the hierarchy delimiter.
    if cmd.patterns.iter().all(|p| p.is_empty()) && !cmd.extended {
        conn.send(format!("* {kind} (\\Noselect) \"{DELIMITER}\" \"\"\r\n").as_bytes());
        st.tagged(conn, tag, Status::Ok, None, &format!("{kind} completed"));
        return;
    }
    let listing = st
        .shared
        .ctx
        .db
        .read("imap_list", move |txn| async move {
            let all = mailboxes::list(&txn, account).await?;
            let subscribed = mailboxes::subscriptions(&txn, account).await?;
            Ok::<_, StorageError>((all, subscribed))
        })
        .await;
    let Ok((all, subscribed)) = listing else {
        st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later");
        return;
    };
    let existing: Vec<Existing<'_>> = all
        .iter()
        .map(|m| Existing {
            name: &m.name,
            special_use: m.special_use.as_deref(),
        })
        .collect();
    let subscribed = subscribed.into_iter().collect();
    for entry in list_tree::entries(&cmd, kind == "LSUB", &existing, &subscribed, DELIMITER) {
        let item = ListItem {
            attributes: entry.attributes.iter().map(String::as_str).collect(),
            delimiter: Some(DELIMITER),
            name: &entry.name,
            child_subscribed: entry.child_subscribed,
            old_name: None,
        };
        conn.send(&response::list_line(kind, &item, st.utf8));
        if let Some(items) = &cmd.return_status
            && let Some(mb) = all.iter().find(|m| m.name == entry.name)
        {
            let values = status_values(st, account, mb, items).await;
            conn.send(&response::status_response_line(&mb.name, &values, st.utf8));
        }
    }
    st.tagged(conn, tag, Status::Ok, None, &format!("{kind} completed"));
}

/// `* QUOTA "" (...)`: the account's one quota root, with the resources
/// that have a limit (RFC 9208 §5.1: STORAGE in KiB, MESSAGE).
async fn quota(st: &State, id: AccountId, conn: &mut Conn) {
    let read = st
        .shared
        .ctx
        .db
        .read("imap_quota", move |txn| async move {
            Ok::<_, StorageError>((quota::get(&txn, id).await?, quota::usage(&txn, id).await?))
        })
        .await;
    let Ok((limits, usage)) = read else {
        return;
    };
    let mut resources = Vec::new();
    if let Some(l) = limits.storage_kib {
        resources.push(("STORAGE", usage.storage_kib(), l));
    }
    if let Some(l) = limits.messages {
        resources.push(("MESSAGE", usage.messages, l));
    }
    conn.send(&response::quota_line("", &resources));
}

async fn append(
    st: &mut State,
    login: &Login,
    sel: Option<&mut Selected>,
    conn: &mut Conn,
    tag: &str,
    name: &str,
    messages: Vec<AppendMessage>,
) {
    let account = &login.account;
    let mb = match find(st, account.id, name).await {
        Ok(Some(mb)) => mb,
        Ok(None) => return st.tagged(conn, tag, Status::No, Some("TRYCREATE"), "No such mailbox"),
        Err(_) => return st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later"),
    };
    let ctx = st.shared.ctx.clone();
    let mut uids = Vec::new();
    for m in messages {
        let ingested = match ingest(&ctx, Bytes::from(m.data)).await {
            Ok(i) => i,
            Err(_) => {
                return st.tagged(
                    conn,
                    tag,
                    Status::No,
                    Some("UNAVAILABLE"),
                    "Could not store the message",
                );
            }
        };
        let req = DeliveryRequest {
            acceptance_id: new_id(),
            account: account.id,
            recipient: account.email.clone(),
            mailbox: mb.name.clone(),
            body: ingested.body,
            flags: m.flags.iter().map(|f| f.as_str().to_string()).collect(),
            internal_date_ms: m.date.map_or(now_ms() as i64, |d| d.unix_ms),
            summary: ingested.summary,
            fault: None,
            from_quarantine: None,
            deadline: meshmail_actors::delivery::deadline_in(meshmail_actors::delivery::DELIVERY_DEADLINE),
        };
        match deliver(&ctx, req).await {
            Ok(Outcome::Delivered { uid, .. }) => uids.push(uid),
            Err(DeliveryError::OverQuota) => {
                // Messages before this one stay (each APPEND message is
                // its own delivery), as with any failure mid-MULTIAPPEND.
                return st.tagged(conn, tag, Status::No, Some("OVERQUOTA"), "Over quota");
            }
            Ok(Outcome::Quarantined { .. }) | Err(DeliveryError::Permanent(_)) => {
                return st.tagged(conn, tag, Status::No, Some("CANNOT"), "The message could not be stored");
            }
            Err(_) => return st.tagged(conn, tag, Status::No, Some("UNAVAILABLE"), "Try again later"),
        }
    }
    let set = uids.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(",");
    let code = format!("APPENDUID {} {set}", mb.uid_validity);
    st.sync(conn, sel, false).await;
    st.tagged(conn, tag, Status::Ok, Some(&code), "APPEND completed");
}
