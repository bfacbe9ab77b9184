//! The thread database's events across the boundary.

use super::*;

/// Events after `cursor` (0: from the start), at most `limit` (0: 1000), as JSON; each has a
/// `cursor` to pass next time. Two processes see the same events.
///
/// # Safety
/// `t` live; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_events(
    t: *const cairn_threads,
    cursor: i64,
    limit: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let limit = if limit == 0 { 1000 } else { limit };
        out.json(&t.threads.events_since(cursor, limit)?)
    })
}
