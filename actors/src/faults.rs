//! Test-only fault hooks. Off unless the process runs with
//! `MESHMAIL_FAULT_HOOKS=1`; the integration tests set it to prove that a
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

pub fn hooks_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("MESHMAIL_FAULT_HOOKS").is_ok_and(|v| v == "1"))
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
