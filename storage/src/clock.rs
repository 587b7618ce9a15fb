//! The node's one wall clock: every wall-time read of the data model (a
//! lease's `acquired_ms`, a node's `seen_ms` that `node forget` judges
//! silence by, an outbound claim's `until_ms` and the `now` it is compared
//! with, idempotency markers, upload TTLs) goes through [`now_ms`].
//!
//! It can carry an offset, so chaos runs and tests can make one node's
//! clock jump (ahead or back) and show that nothing safety-relevant trusts
//! it: the shard fence is the lease *epoch* in the store
//! ([`crate::model::nodes::check_lease`] reads no clock), and failure
//! detection runs on each observer's monotonic clock (`Instant`), which a
//! wall-clock step does not move. The offset can only be set in a build
//! with the `fault-hooks` feature (the node's fault endpoint
//! `POST /admin/faults/clock-jump`); elsewhere it is always 0.
//!
//! Not routed through here, on purpose: the SQLite backend's conflict log
//! (it stands in for the store's own versioning, which a node's clock does
//! not drive in FoundationDB), TLS certificate validity (rustls reads
//! the system clock itself) and the `/mesh/events` timestamps (the chaos
//! runner merges every node's events into one timeline by them).

use std::sync::atomic::{AtomicI64, Ordering};

/// The offset added to the system clock, milliseconds (0 unless a fault set it).
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Largest offset a fault may set: ±10 days, far beyond any period the
/// code knows (claims 30 min, markers 15 min, leases have none).
pub const OFFSET_MAX_MS: i64 = 10 * 24 * 3600 * 1000;

/// The system clock, milliseconds since the Unix epoch, without the offset.
pub fn system_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The node's wall clock: the system clock plus the offset.
pub fn now_ms() -> u64 {
    let offset = OFFSET_MS.load(Ordering::Relaxed);
    system_now_ms().saturating_add_signed(offset)
}

/// The current offset, milliseconds.
pub fn offset_ms() -> i64 {
    OFFSET_MS.load(Ordering::Relaxed)
}

/// Whether this build can skew the clock at all.
pub const SETTABLE: bool = cfg!(feature = "fault-hooks");

/// Sets the offset (clamped to ±[`OFFSET_MAX_MS`]) and returns what was
/// set. Test-only: in a build without the `fault-hooks` feature it does
/// nothing and returns `None`, so no release binary can be skewed.
pub fn set_offset_ms(ms: i64) -> Option<i64> {
    if !SETTABLE {
        return None;
    }
    let ms = ms.clamp(-OFFSET_MAX_MS, OFFSET_MAX_MS);
    OFFSET_MS.store(ms, Ordering::Relaxed);
    metrics::gauge!("meshmail_clock_offset_seconds").set(ms as f64 / 1000.0);
    Some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_feature_the_clock_cannot_be_skewed() {
        if !SETTABLE {
            assert_eq!(set_offset_ms(3_600_000), None);
            assert_eq!(offset_ms(), 0);
        }
    }

    #[cfg(feature = "fault-hooks")]
    #[test]
    fn the_offset_moves_now_and_nothing_else() {
        let before = system_now_ms();
        assert_eq!(set_offset_ms(3_600_000), Some(3_600_000));
        let skewed = now_ms();
        assert!(skewed >= before + 3_600_000, "{skewed} vs {before}");
        assert!(system_now_ms() < before + 60_000, "the system clock is untouched");
        assert_eq!(set_offset_ms(i64::MAX), Some(OFFSET_MAX_MS), "clamped");
        set_offset_ms(0);
        assert!(now_ms() < before + 60_000);
    }
}
