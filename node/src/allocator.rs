//! The node's allocator and what it holds.
//!
//! The whole process allocates from jemalloc (`tikv-jemallocator`, built
//! unprefixed so its `malloc` also serves the C libraries: bundled SQLite,
//! FoundationDB's client). On glibc's malloc a kill-free soak grew 1–2
//! MB/min per node on a flat live heap: ~30 MB in use beside 120 MB kept
//! free inside the arenas, since glibc returns only free pages at an
//! arena's top and the churn of short-lived connection and page-cache
//! buffers left holes. A `malloc_trim(0)` every 10 s flattened the floor
//! but not the medians between trims. With jemalloc for Rust alone the
//! soak was flat, but glibc still kept 125 MB free for SQLite's 5 MB in
//! use on the node that opened the store first: hence one allocator for
//! everything. jemalloc returns unused pages by age, page by page, from
//! a background thread.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc reads its options from this symbol at its first allocation.
/// Why each:
/// - `background_thread`: purging runs on jemalloc's own thread, so an
///   idle node returns memory without an allocation to trigger it;
/// - `dirty_decay_ms:1000`: freed pages go back to the kernel within ~1 s
///   (default 10 s), so a burst's buffers do not stay resident;
/// - `muzzy_decay_ms:0`: no second, lazily-freed stage whose pages still
///   count as resident until the kernel reclaims them;
/// - `narenas:2`: one per core; more arenas only spread the same free
///   space over more places on this workload (~20 threads).
#[unsafe(export_name = "malloc_conf")]
pub static MALLOC_CONF: ConfPtr =
    ConfPtr(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:2".as_ptr());

/// A C string pointer jemalloc reads as `const char *malloc_conf`.
#[repr(transparent)]
pub struct ConfPtr(*const std::ffi::c_char);
// SAFETY: it points at a static string that is never written.
unsafe impl Sync for ConfPtr {}

/// Publishes jemalloc's own accounting, so an operator can tell a leak
/// (allocated grows) from retention (resident grows, allocated flat):
/// `meshmail_allocator_{allocated,active,resident,retained}_bytes`.
pub fn publish_stats() {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The statistics are a snapshot refreshed by advancing the epoch.
    if epoch::advance().is_err() {
        return;
    }
    let read = [
        ("meshmail_allocator_allocated_bytes", stats::allocated::read()),
        ("meshmail_allocator_active_bytes", stats::active::read()),
        ("meshmail_allocator_resident_bytes", stats::resident::read()),
        ("meshmail_allocator_retained_bytes", stats::retained::read()),
    ];
    for (name, value) in read {
        if let Ok(v) = value {
            metrics::gauge!(name).set(v as f64);
        }
    }
}
