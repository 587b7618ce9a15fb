//! The JMAP methods, one file per family (see [`crate::jmap`]). Each
//! parses its arguments with [`crate::jmap::wire`], reads from the store
//! through `jmap::store`, and writes through the account's shard actor
//! (`mailbox_ops::request`, `delivery::deliver`) or, for
//! EmailSubmission, through [`crate::accept`]; Sieve scripts through
//! [`crate::managesieve::scripts`], the operations ManageSieve uses. Never through `smtp`'s
//! session; only the reply text of `deliveryStatus.smtpReply` comes from
//! `smtp::session::replies`.

pub mod blob;
pub mod email_build;
pub mod email_filter;
pub mod email_get;
pub mod email_import;
pub mod email_query;
pub mod email_query_index;
pub mod email_set;
pub mod identity;
pub mod mailbox;
pub mod mailbox_set;
pub mod sieve;
pub mod sieve_set;
pub mod submission;
pub mod thread;
pub mod vacation;
