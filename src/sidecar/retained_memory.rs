//! When the sidecar's allocator gives freed memory back to the system.
//!
//! glibc trims a thread's heap each time a block of 64 KiB or more is
//! freed while the free space at the heap's top exceeds its trim threshold
//! (128 KiB, until a block above the mmap threshold has been freed). One
//! answer of 50 KB freed such a block (the HTTP/2 frame it came in, the
//! MySQL packets it went out as) once per query: a `madvise` that handed
//! the pages back, then the page faults of taking them again for the next
//! answer — 7 % of the sidecar's samples on the loopback medium SELECT
//! (`benches/results/profiles/sidecar.md`, 2026-11-25, branch `medium`).
//!
//! Fixed thresholds instead: the top of a heap is trimmed once it holds
//! 1 MiB free, and blocks from 1 MiB up are mmapped and unmapped when freed
//! (the gateway's choice, `gateway::retained_memory`; a fixed trim
//! threshold also fixes the mmap threshold, which would otherwise stay at
//! 128 KiB). At most 1 MiB more per thread's heap is kept between
//! answers. An operator's `MALLOC_TRIM_THRESHOLD_` or
//! `MALLOC_MMAP_THRESHOLD_` wins.

/// Free space kept at the top of a heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 1024 * 1024;

/// Blocks from this size up are mmapped, and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1024 * 1024;

/// Sets both thresholds unless the environment already does.
pub fn bound() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_none() {
            // SAFETY: `mallopt` only sets a parameter of glibc's allocator.
            unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) };
        }
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
            // SAFETY: as above.
            unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        }
    }
}
