//! The ids of the mail data model, the one place they are defined: the
//! model's functions take them, and callers above `storage` name them from
//! here (the keyspace that encodes them is private to this crate).

/// Account ids come from one counter; mailbox ids from one per account.
pub type AccountId = i64;
pub type MailboxId = i64;
/// An IMAP UID: strictly increasing within a mailbox.
pub type Uid = u32;
