//! Test-only fault hooks. Off unless the process runs with
//! `MESHMAIL_FAULT_HOOKS=1`; the integration tests set it to prove that a
//! poison message is quarantined and the node keeps serving.
//!
//! A delivery whose message carries the header `X-Meshmail-Fault: panic`
//! makes the commit batcher panic while it handles that delivery.

use std::sync::OnceLock;

pub const FAULT_HEADER: &str = "X-Meshmail-Fault";

pub fn hooks_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("MESHMAIL_FAULT_HOOKS").is_ok_and(|v| v == "1"))
}

/// The fault a raw message asks for, if hooks are enabled.
pub fn requested_fault(raw: &[u8]) -> Option<Fault> {
    if !hooks_enabled() {
        return None;
    }
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let needle = format!("{}: panic", FAULT_HEADER.to_ascii_lowercase());
    head.contains(&needle).then_some(Fault::PanicInBatcher)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    PanicInBatcher,
}
