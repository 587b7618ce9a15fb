//! Every supervised actor of a meshmail node (built on `ractor`): the node
//! supervisor ([`node`]), the listener supervisors with one session actor
//! per client connection ([`session`]), the mailbox shard actors — the
//! single writer of their accounts' mailboxes ([`shard`]), the commit
//! batchers that fold deliveries into one KV transaction ([`batcher`]), the
//! compactor ([`compactor`]) and the poison quarantine ([`quarantine`]). [`delivery`] is the path sessions
//! call; [`auth`] verifies passwords off the async workers, [`auth_limits`]
//! limits failed logins.
//!
//! Architecture invariant: depends only on `meshmail-storage`. Supervisors
//! override ractor's default of stopping when a child exits and restart
//! within a bounded budget ([`restart`]); a panic in a handler is contained.
//! Every actor counts itself in `meshmail_actors_live{kind}` ([`live`]).

pub mod auth;
pub mod auth_limits;
pub mod batcher;
pub mod compactor;
pub mod delivery;
pub mod faults;
pub mod live;
pub mod mailbox_ops;
pub mod node;
pub mod op_error;
pub mod quarantine;
pub mod remote;
pub mod restart;
pub mod session;
pub mod shard;
