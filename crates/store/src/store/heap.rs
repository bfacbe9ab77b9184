//! Calls to the process's allocator (glibc) for the long-lived `cairn watch` daemon: the only
//! `unsafe` code of the crate.

/// Returns the heap's free pages to the system (glibc's `malloc_trim(0)`); nothing elsewhere.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(super) fn trim_heap() {
    // SAFETY: `malloc_trim` takes no pointer and only releases memory the allocator holds
    // free; it is safe to call from any thread at any time (glibc locks each arena it trims).
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn trim_heap() {}

/// Limits the allocator's arenas to `n` (glibc's `M_ARENA_MAX`; nothing elsewhere), for a
/// long-lived process that takes a snapshot now and then (the `cairn watch` daemon), called
/// before it starts threads. glibc gives threads that contend an arena each, up to 8 per
/// core, and keeps in each what it freed: a daemon whose snapshots ran on a new thread each
/// and on the walk's pool held 13-16 MiB of freed memory more than live (measured when
/// this was added; see the git log).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_heap_arenas(n: i32) {
    // SAFETY: `mallopt` takes no pointer; `M_ARENA_MAX` only bounds the arenas made from now
    // on, and glibc serialises option changes against allocation.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, n);
    }
}

/// See the glibc version: nothing to limit elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_heap_arenas(_n: i32) {}

/// Has every allocation of `bytes` or more mapped on its own and unmapped when freed
/// (glibc's `M_MMAP_THRESHOLD`; nothing elsewhere), for the same long-lived process. Left
/// alone, glibc raises that threshold to the size of each large block freed (up to 32 MiB), so
/// that a process which once built a large index or table and freed it keeps the next ones
/// in its heap, where small allocations made meanwhile pin their pages. By hand, the 500k
/// watcher (its stat cache's index written as it is encoded) peaked at 50-52 MiB and held
/// 40-41 between snapshots; with the threshold fixed at 128 KiB, 47-48 and 38-39, its
/// snapshots no slower (DEVELOPMENT.md, "The watcher's peak").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn fix_mmap_threshold(bytes: i32) {
    // SAFETY: `mallopt` takes no pointer; a fixed `M_MMAP_THRESHOLD` only decides how blocks
    // allocated from now on are obtained, and glibc serialises option changes against
    // allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
}

/// See the glibc version: nothing to fix elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn fix_mmap_threshold(_bytes: i32) {}
