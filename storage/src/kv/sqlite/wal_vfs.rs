//! A thin SQLite VFS over the platform's default one that writes a commit's
//! WAL frames in a few large `pwrite`s instead of two per frame.
//!
//! Why: SQLite appends each WAL frame as two writes (its 24-byte header,
//! then the page) and syncs once at the commit. A delivery batch writes
//! ~90 frames of 8 KiB, so a commit made ~175 `pwrite` calls (counted with
//! `strace -c` on a node under `bench smtp`), each paying the syscall, the
//! file system's per-write bookkeeping and, on this VM, the exit to the
//! hypervisor; one write of the same ~720 KB costs a fraction of that.
//!
//! Runs reach the default VFS in writes of at most [`WRITE_BYTES_MAX`]
//! (its own limit), so a batch of ~90 frames takes ~6 writes instead of ~175.
//!
//! How: only files SQLite opens as a WAL (`SQLITE_OPEN_WAL`) are wrapped;
//! the main file, the journal and temporary files are the default VFS's own
//! objects, untouched. For a WAL, writes that continue the pending run are
//! appended to a buffer; anything else (a read, a sync, a size query, a
//! truncate, a write elsewhere, close, the buffer passing
//! [`RUN_BYTES_MAX`]) first writes the run out. So every byte reaches the
//! file, in order and at the offset SQLite chose, before the `fsync` that
//! makes a commit durable, and before SQLite publishes the frames to readers
//! (which it does in the shared-memory index only after that sync): what is
//! on disk at any crash point is what plain SQLite could have left there.
//! An error writing the run is returned by the call that wrote it (at the
//! latest the commit's sync), so the commit fails instead of lying.
//!
//! A run must never outlive its transaction: if SQLite wrote frames and
//! then rolled back (a transaction that spilled dirty pages to the WAL
//! before its commit), a run kept and written later could land on frames
//! that another process committed in between. The writer therefore runs
//! with `PRAGMA cache_spill=OFF`: SQLite writes WAL frames only inside a
//! commit, and every commit ends with a sync (which writes the run) or with
//! an error from this VFS (whose flush drops the run whatever happens).
//!
//! That rests on `synchronous=FULL`, under which SQLite syncs the WAL at
//! every commit before it appends the frames to the shared-memory index.
//! Under NORMAL it does not sync, readers would look for frames still in the
//! run (a test with `Durability::Normal` failed with "disk I/O error"), so
//! the backend opens the writer through this VFS only with
//! `Durability::Full`.
//!
//! Only the write connection is opened through it ([`VFS_NAME`]); readers
//! and the checkpoint thread read committed frames, which are on disk.

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::ffi;

/// What a connection opened through this VFS must run first (see above:
/// no frames outside a commit).
pub const WRITER_PRAGMAS: &str = "PRAGMA cache_spill=OFF";
/// The name the writer's connection opens the file with.
pub const VFS_NAME: &CStr = c"meshmail-wal-runs";
/// A pending run is written once it reaches this size (bounds the buffer).
const RUN_BYTES_MAX: usize = 1 << 20;
/// Largest write handed to the default VFS: SQLite's unix VFS masks a
/// write's length to 17 bits (`seekAndWriteFd`: `nBuf &= 0x1ffff`), so a
/// larger one would be cut short and end as SQLITE_FULL (seen in the first
/// bench run). 120 KiB: 14 frames of 8 KiB in a write instead of 28 writes.
const WRITE_BYTES_MAX: usize = 120 * 1024;

/// Writes SQLite asked of wrapped WALs, and writes of runs made of them,
/// in this process: what [`counts`] returns (the metrics carry the same).
static WRITES: AtomicU64 = AtomicU64::new(0);
static RUNS: AtomicU64 = AtomicU64::new(0);

/// (WAL writes SQLite made, runs written) through this VFS so far in this
/// process.
pub fn counts() -> (u64, u64) {
    (WRITES.load(Ordering::Relaxed), RUNS.load(Ordering::Relaxed))
}

/// The default VFS this one wraps (registered once per process).
struct Inner(*mut ffi::sqlite3_vfs);
// SAFETY: a registered sqlite3_vfs is immutable and lives for the process;
// SQLite calls it from any thread.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

static REGISTERED: OnceLock<Result<Inner, c_int>> = OnceLock::new();

/// Registers the VFS (idempotent). Returns SQLite's error code on failure.
pub fn register() -> Result<(), c_int> {
    let registered = REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS or NULL;
        // the struct we register is leaked, so it outlives every connection.
        unsafe {
            let rc = ffi::sqlite3_initialize();
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            let inner = ffi::sqlite3_vfs_find(std::ptr::null());
            if inner.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            let mut vfs = *inner;
            vfs.szOsFile = (std::mem::size_of::<WalFile>() as c_int) + (*inner).szOsFile;
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.xOpen = Some(x_open);
            let rc = ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0);
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            Ok(Inner(inner))
        }
    });
    registered.as_ref().map(drop).map_err(|rc| *rc)
}

fn inner() -> *mut ffi::sqlite3_vfs {
    match REGISTERED.get() {
        Some(Ok(Inner(vfs))) => *vfs,
        _ => std::ptr::null_mut(),
    }
}

/// A wrapped WAL: our methods first (SQLite sees a `sqlite3_file`), the
/// pending run, and the default VFS's file object right behind this struct
/// (in the same allocation of `szOsFile` bytes).
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    run: *mut Run,
}

/// Bytes written by SQLite and not yet by us: `bytes` go at `offset`.
#[derive(Default)]
struct Run {
    offset: i64,
    bytes: Vec<u8>,
    /// SQLite's writes folded into `bytes` (the metric is bumped once per
    /// run, not on every frame's two writes).
    writes: u64,
}

/// The default VFS's file object behind a `WalFile`.
unsafe fn real(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    // SAFETY (caller): `file` is a WalFile of an allocation of szOsFile bytes.
    unsafe { (file as *mut u8).add(std::mem::size_of::<WalFile>()) as *mut ffi::sqlite3_file }
}

unsafe fn methods(real: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    // SAFETY (caller): `real` was opened successfully, so pMethods is set
    // and points at the default VFS's static method table.
    unsafe { &*(*real).pMethods }
}

/// Writes the pending run, if any. The run is dropped either way: on error
/// SQLite fails the transaction and rewrites whatever it needs.
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY (caller): `file` is an open WalFile.
    unsafe {
        let wal = &mut *(file as *mut WalFile);
        let run = &mut *wal.run;
        if run.bytes.is_empty() {
            return ffi::SQLITE_OK;
        }
        let real = real(file);
        let Some(write) = methods(real).xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let mut rc = ffi::SQLITE_OK;
        let mut offset = run.offset;
        for chunk in run.bytes.chunks(WRITE_BYTES_MAX) {
            // WRITE_BYTES_MAX fits a c_int.
            rc = write(real, chunk.as_ptr() as *const c_void, chunk.len() as c_int, offset);
            if rc != ffi::SQLITE_OK {
                break;
            }
            offset += chunk.len() as i64;
        }
        RUNS.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("meshmail_kv_sqlite_wal_writes_total").increment(run.writes);
        metrics::counter!("meshmail_kv_sqlite_wal_runs_total").increment(1);
        metrics::counter!("meshmail_kv_sqlite_wal_run_bytes_total").increment(run.bytes.len() as u64);
        run.bytes.clear();
        run.writes = 0;
        if run.bytes.capacity() > RUN_BYTES_MAX {
            run.bytes.shrink_to(RUN_BYTES_MAX);
        }
        rc
    }
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let inner = inner();
    // SAFETY: SQLite gives `file` szOsFile bytes (ours: WalFile + the
    // default's); `inner` is the registered default VFS.
    unsafe {
        let Some(open) = (*inner).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // Not a WAL: the default VFS's object, in place, as it is.
            return open(inner, name, file, flags, out_flags);
        }
        let real = real(file);
        (*file).pMethods = std::ptr::null();
        let rc = open(inner, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*real).pMethods.is_null() {
            return rc;
        }
        let wal = file as *mut WalFile;
        (*wal).run = Box::into_raw(Box::new(Run::default()));
        (*wal).base.pMethods = wal_methods(methods(real).iVersion);
        ffi::SQLITE_OK
    }
}

/// The method table of wrapped WALs, of the default VFS's version.
fn wal_methods(version: c_int) -> *const ffi::sqlite3_io_methods {
    static TABLES: OnceLock<[ffi::sqlite3_io_methods; 3]> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        let table = |v| ffi::sqlite3_io_methods {
            iVersion: v,
            xClose: Some(x_close),
            xRead: Some(x_read),
            xWrite: Some(x_write),
            xTruncate: Some(x_truncate),
            xSync: Some(x_sync),
            xFileSize: Some(x_file_size),
            xLock: Some(x_lock),
            xUnlock: Some(x_unlock),
            xCheckReservedLock: Some(x_check_reserved_lock),
            xFileControl: Some(x_file_control),
            xSectorSize: Some(x_sector_size),
            xDeviceCharacteristics: Some(x_device_characteristics),
            xShmMap: Some(x_shm_map),
            xShmLock: Some(x_shm_lock),
            xShmBarrier: Some(x_shm_barrier),
            xShmUnmap: Some(x_shm_unmap),
            xFetch: Some(x_fetch),
            xUnfetch: Some(x_unfetch),
        };
        [table(1), table(2), table(3)]
    });
    &tables[(version.clamp(1, 3) - 1) as usize]
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes an open WalFile once.
    unsafe {
        let flushed = flush(file);
        let real = real(file);
        let rc = match methods(real).xClose {
            Some(close) => close(real),
            None => ffi::SQLITE_OK,
        };
        let wal = file as *mut WalFile;
        drop(Box::from_raw((*wal).run));
        (*wal).run = std::ptr::null_mut();
        if flushed != ffi::SQLITE_OK { flushed } else { rc }
    }
}

unsafe extern "C" fn x_write(file: *mut ffi::sqlite3_file, data: *const c_void, amount: c_int, offset: i64) -> c_int {
    // SAFETY: `data` holds `amount` bytes (SQLite's contract); `file` is open.
    unsafe {
        let run = &mut *(*(file as *mut WalFile)).run;
        let Ok(len) = usize::try_from(amount) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let bytes = std::slice::from_raw_parts(data as *const u8, len);
        WRITES.fetch_add(1, Ordering::Relaxed);
        let end = run.offset + run.bytes.len() as i64;
        if !run.bytes.is_empty() && offset >= run.offset && offset + amount as i64 <= end {
            // A frame rewritten within the pending run (SQLite rewrites a
            // page written twice in one transaction in place).
            let at = (offset - run.offset) as usize;
            run.bytes[at..at + len].copy_from_slice(bytes);
            run.writes += 1;
            return ffi::SQLITE_OK;
        }
        if !run.bytes.is_empty() && offset != end {
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        let run = &mut *(*(file as *mut WalFile)).run;
        if run.bytes.is_empty() {
            run.offset = offset;
        }
        run.bytes.extend_from_slice(bytes);
        run.writes += 1;
        if run.bytes.len() >= RUN_BYTES_MAX {
            return flush(file);
        }
        ffi::SQLITE_OK
    }
}

/// Defines a method that writes the pending run out, then forwards the
/// call to the default VFS's file (returning `$missing` if it has no such
/// method). Reads, syncs, size queries, truncation and
/// memory maps all see the file as SQLite wrote it.
macro_rules! flush_then_forward {
    ($name:ident, $method:ident, $missing:expr, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: `file` is an open WalFile; the arguments are SQLite's.
            unsafe {
                let rc = flush(file);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                let real = real(file);
                match methods(real).$method {
                    Some(f) => f(real $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

/// Defines a method that forwards as it is: locks, sector size, shared
/// memory (which SQLite never asks of a WAL, but the table has them).
macro_rules! forward {
    ($name:ident, $method:ident, $missing:expr, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            // SAFETY: `file` is an open WalFile; the arguments are SQLite's.
            unsafe {
                let real = real(file);
                match methods(real).$method {
                    Some(f) => f(real $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

flush_then_forward!(x_read, xRead, ffi::SQLITE_IOERR_READ, (data: *mut c_void, amount: c_int, offset: i64));
flush_then_forward!(x_truncate, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, (size: i64));

/// A commit's sync: writes the run, then syncs, each timed on its own
/// (`meshmail_kv_sqlite_wal_write_seconds`, `…_wal_sync_seconds`): the two
/// stages of the commit that the disk decides, apart from SQLite's work.
unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: `file` is an open WalFile; `flags` is SQLite's.
    unsafe {
        let started = std::time::Instant::now();
        let rc = flush(file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let written = std::time::Instant::now();
        let real = real(file);
        let rc = match methods(real).xSync {
            Some(sync) => sync(real, flags),
            None => ffi::SQLITE_IOERR_FSYNC,
        };
        metrics::histogram!("meshmail_kv_sqlite_wal_write_seconds")
            .record(written.duration_since(started).as_secs_f64());
        metrics::histogram!("meshmail_kv_sqlite_wal_sync_seconds").record(written.elapsed().as_secs_f64());
        rc
    }
}
flush_then_forward!(x_file_size, xFileSize, ffi::SQLITE_IOERR_FSTAT, (size: *mut i64));
flush_then_forward!(x_fetch, xFetch, ffi::SQLITE_OK, (offset: i64, amount: c_int, out: *mut *mut c_void));
// File controls pass as they are, run or no run: SQLite ignores the result
// of hints (`sqlite3OsFileControlHint`), so a failed write of the run there
// would vanish; none of them reads what the WAL holds (a size hint may
// write zeros past the end, which the run, written later, overwrites).
forward!(x_file_control, xFileControl, ffi::SQLITE_NOTFOUND, (op: c_int, arg: *mut c_void) -> c_int);
forward!(x_unfetch, xUnfetch, ffi::SQLITE_OK, (offset: i64, p: *mut c_void) -> c_int);
forward!(x_lock, xLock, ffi::SQLITE_OK, (level: c_int) -> c_int);
forward!(x_unlock, xUnlock, ffi::SQLITE_OK, (level: c_int) -> c_int);
forward!(x_check_reserved_lock, xCheckReservedLock, ffi::SQLITE_OK, (out: *mut c_int) -> c_int);
forward!(x_sector_size, xSectorSize, 4096, () -> c_int);
forward!(x_device_characteristics, xDeviceCharacteristics, 0, () -> c_int);
forward!(x_shm_map, xShmMap, ffi::SQLITE_IOERR_SHMMAP, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int);
forward!(x_shm_lock, xShmLock, ffi::SQLITE_IOERR_SHMLOCK, (offset: c_int, n: c_int, flags: c_int) -> c_int);
forward!(x_shm_unmap, xShmUnmap, ffi::SQLITE_OK, (delete: c_int) -> c_int);

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: `file` is an open WalFile.
    unsafe {
        let real = real(file);
        if let Some(f) = methods(real).xShmBarrier {
            f(real)
        }
    }
}
