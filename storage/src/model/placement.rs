//! Where a message is, by its first place: the (mailbox, UID) it was first
//! stored at (delivery, import, create or COPY), which its JMAP id and IMAP
//! EMAILID name for as long as it exists. A message never moved is still
//! there; a moved one has a placement key `("eplc", account, first
//! mailbox, first UID)` naming its current place, written by the move
//! (`messages::copy_to`) and cleared by the expunge of the moved row, and
//! its row carries the first place as its origin. Both read paths check the
//! origin, so an id never names another message: the row at a first place
//! that holds a moved-in message (its origin is elsewhere) is not that id.
//!
//! Why no migration: rows without an origin keep the ids clients already
//! hold (`e<mailbox>_<uid>` of where they are). Why it is sound: mailbox
//! ids come from a per-account sequence and `uid_next` never decreases
//! (asserted in `mailboxes::put`), so a (mailbox, UID) is given to one
//! message only, ever.
//!
//! The receivedAt index (`mdat`) carries the origin of a moved row in its
//! value, so the indexed Email/query names its results without reading
//! their rows.

use super::message_reads;
use super::messages::{Message, MessageMeta};
use crate::error::{Result, StorageError};
use crate::ids::{AccountId, MailboxId, Uid};
use crate::keyspace;
use crate::kv::Txn;

/// A first place or a current place: (mailbox, UID).
pub type Place = (MailboxId, Uid);

/// Records that the message first stored at `first` is now at `now` (in
/// the move's transaction).
pub(super) fn put(txn: &Txn, account: AccountId, first: Place, now: Place) -> Result<()> {
    let mut v = Vec::with_capacity(12);
    v.extend_from_slice(&now.0.to_le_bytes());
    v.extend_from_slice(&now.1.to_le_bytes());
    txn.set(&keyspace::email_placement(account, first.0, first.1), &v)
}

/// The current place of the moved message first stored at `first`, if a
/// move recorded one.
pub async fn get(txn: &Txn, account: AccountId, first: Place) -> Result<Option<Place>> {
    let Some(v) = txn.get(&keyspace::email_placement(account, first.0, first.1)).await? else {
        return Ok(None);
    };
    let (m, u) = v
        .split_at_checked(8)
        .filter(|(_, u)| u.len() == 4)
        .ok_or_else(|| corrupt("placement", v.len()))?;
    let m = MailboxId::from_le_bytes(m.try_into().expect("8 bytes"));
    let u = Uid::from_le_bytes(u.try_into().expect("4 bytes"));
    Ok(Some((m, u)))
}

/// The message whose first place is `first` and where it is now: one row
/// read (and its summary) for a message never moved; a missing row costs
/// one placement read and the row it names.
pub async fn find(txn: &Txn, account: AccountId, first: Place) -> Result<Option<(MailboxId, Message)>> {
    if let Some(m) = message_reads::get(txn, account, first.0, first.1).await? {
        return Ok(m.origin.is_none().then_some((first.0, m)));
    }
    let Some(now) = get(txn, account, first).await? else {
        return Ok(None);
    };
    let found = message_reads::get(txn, account, now.0, now.1).await?;
    Ok(found.filter(|m| m.origin == Some(first)).map(|m| (now.0, m)))
}

/// [`find`] for the hot part alone (no summary read).
pub async fn find_meta(txn: &Txn, account: AccountId, first: Place) -> Result<Option<(MailboxId, MessageMeta)>> {
    if let Some(m) = message_reads::get_meta(txn, account, first.0, first.1).await? {
        return Ok(m.origin.is_none().then_some((first.0, m)));
    }
    let Some(now) = get(txn, account, first).await? else {
        return Ok(None);
    };
    let found = message_reads::get_meta(txn, account, now.0, now.1).await?;
    Ok(found.filter(|m| m.origin == Some(first)).map(|m| (now.0, m)))
}

/// The value of a row's receivedAt index key: its UID (u32 LE), then for
/// a moved row its origin (mailbox i64 LE, UID u32 LE). Earlier builds
/// wrote the UID alone and never read the value.
pub(super) fn encode_date_value(row: &MessageMeta) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&row.uid.to_le_bytes());
    if let Some((m, u)) = row.origin {
        v.extend_from_slice(&m.to_le_bytes());
        v.extend_from_slice(&u.to_le_bytes());
    }
    v
}

/// The origin a receivedAt index value carries (see [`encode_date_value`]).
pub(super) fn date_value_origin(v: &[u8]) -> Result<Option<Place>> {
    match v.len() {
        4 => Ok(None),
        16 => {
            let m = MailboxId::from_le_bytes(v[4..12].try_into().expect("8 bytes"));
            let u = Uid::from_le_bytes(v[12..16].try_into().expect("4 bytes"));
            Ok(Some((m, u)))
        }
        n => Err(corrupt("receivedAt index value", n)),
    }
}

fn corrupt(what: &str, len: usize) -> StorageError {
    StorageError::Corrupt {
        what: what.into(),
        detail: format!("{len} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_values_carry_the_origin_of_moved_rows_only() {
        let mut row = MessageMeta::bare(42);
        assert_eq!(encode_date_value(&row), 42u32.to_le_bytes());
        assert_eq!(date_value_origin(&encode_date_value(&row)).unwrap(), None);
        row.origin = Some((7, 3));
        assert_eq!(date_value_origin(&encode_date_value(&row)).unwrap(), Some((7, 3)));
        assert!(date_value_origin(&[1, 2, 3]).is_err());
    }
}
