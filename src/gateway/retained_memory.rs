//! What the gateway keeps of memory it is done with.
//!
//! `tests/big_packets.rs::large_packets_leave_little_behind_in_the_gateway`
//! (12 clients each send a 6 MiB statement and read a 6 MiB row, then
//! close; the gateway's `RssAnon` once its pool has closed the extra
//! backend connections) kept +163 to +263 MiB for good, from two causes:
//!
//! - glibc's `malloc` raises its mmap threshold to the size of each large
//!   block freed (up to 32 MiB), so later packet-sized blocks come from its
//!   heaps, which it rarely gives back. A fixed threshold keeps them
//!   mmapped, returned as soon as freed: +65 MiB. At 1 MiB rather than
//!   glibc's starting 128 KiB: the same +26 MiB below, and a large
//!   SELECT's chunk-sized buffers stay on the heaps (at 128 KiB the
//!   gateway's CPU for a 27 MB SELECT rose by about a fifth; at 1 MiB it
//!   was within noise of the dynamic threshold, `benches/table`, two
//!   pairs of runs).
//! - `mysql_async` keeps the buffer of every packet it read or wrote in a
//!   pool for the whole process, by default 128 buffers of up to 4 MiB
//!   each (512 MiB). Kept at up to 64 KiB, the pool holds at most 8 MiB; a
//!   larger packet costs an allocation of its own, small beside copying
//!   it: +26 MiB with both.
//!
//! The driver reads its limit from the environment once, at its first use:
//! both are set before anything starts, and an operator's own values
//! (`MALLOC_MMAP_THRESHOLD_`, `MYSQL_ASYNC_BUFFER_SIZE_CAP`) win.

/// Blocks from this size up are mmapped, and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1024 * 1024;

/// Free space kept at the top of a thread's heap. With the mmap threshold
/// fixed, glibc's trim threshold stays at its starting 128 KiB, and every
/// free of a block of 64 KiB or more (a 50 KB answer's batch) trimmed the
/// heap: a `madvise`, then page faults to take the pages back for the next
/// answer, 0.7 per medium SELECT over HTTP/2 and 1.2 over HTTP/3
/// (`benches/results/profiles/gateway.md`, 2026-11-25, branch `medium`).
/// At most this much more is kept per heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 1024 * 1024;

/// What each of the driver's pooled buffers is cut down to once returned.
const DRIVER_BUFFER_CAP: usize = 64 * 1024;

/// Sets the limits unless the environment already does.
///
/// # Safety
/// Changes the process's environment: call it before any other thread
/// exists (first thing in `main`), as `std::env::set_var` requires.
pub unsafe fn bound() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: `mallopt` only sets a parameter of glibc's allocator.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_none() {
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) };
    }
    const DRIVER_VAR: &str = "MYSQL_ASYNC_BUFFER_SIZE_CAP";
    if std::env::var_os(DRIVER_VAR).is_none() {
        // SAFETY: the caller guarantees no other thread runs yet.
        unsafe { std::env::set_var(DRIVER_VAR, DRIVER_BUFFER_CAP.to_string()) };
    }
}
