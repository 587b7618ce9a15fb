//! Test-only fault hooks, compiled only with this crate's `fault-hooks`
//! cargo feature (`meshmail-node`'s test builds turn it on through a
//! dev-dependency, chaos builds with `--features fault-hooks`; release
//! builds and the shipped systemd unit never do), and even then off unless
//! the process runs with `MESHMAIL_FAULT_HOOKS=1`. So a release binary
//! cannot be talked into acknowledging mail without storing it by an
//! environment variable. The integration tests use the hooks to prove that a
//! poison message is quarantined and the node keeps serving.
//!
//! A delivery whose message carries the header `X-Meshmail-Fault: panic`
//! makes the commit batcher panic while it handles that delivery;
//! `X-Meshmail-Fault: drop-ack` makes the node acknowledge the delivery
//! without storing it, and `X-Meshmail-Fault: reuse-uid` gives the next
//! message of that mailbox the same UID again. The last two exist to prove
//! that the chaos checkers can fail (a lost message, a reused UID).

use std::sync::OnceLock;

pub const FAULT_HEADER: &str = "X-Meshmail-Fault";

/// Whether this build has the hooks at all (the node registers its fault
/// endpoints only then; elsewhere they are 404).
pub const COMPILED: bool = cfg!(feature = "fault-hooks");

#[cfg(feature = "fault-hooks")]
pub fn hooks_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("MESHMAIL_FAULT_HOOKS").is_ok_and(|v| v == "1"))
}

#[cfg(not(feature = "fault-hooks"))]
pub fn hooks_enabled() -> bool {
    false
}

/// IMAP sessions leave out the untagged FLAGS that announce a new keyword
/// (`MESHMAIL_FAULT_IMAP=no-flags-update`, with hooks enabled): it exists
/// to prove that the IMAP state-tracking test catches the omission.
pub fn imap_suppresses_flags_update() -> bool {
    static SUPPRESS: OnceLock<bool> = OnceLock::new();
    *SUPPRESS
        .get_or_init(|| hooks_enabled() && std::env::var("MESHMAIL_FAULT_IMAP").is_ok_and(|v| v == "no-flags-update"))
}

/// The fault a raw message asks for, if hooks are enabled.
pub fn requested_fault(raw: &[u8]) -> Option<Fault> {
    if !hooks_enabled() {
        return None;
    }
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let header = FAULT_HEADER.to_ascii_lowercase();
    [
        ("panic", Fault::PanicInBatcher),
        ("drop-ack", Fault::DropAck),
        ("reuse-uid", Fault::ReuseUid),
    ]
    .into_iter()
    .find(|(name, _)| head.contains(&format!("{header}: {name}")))
    .map(|(_, fault)| fault)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Fault {
    PanicInBatcher,
    DropAck,
    ReuseUid,
}
