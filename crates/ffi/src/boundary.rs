//! The boundary: status codes, error objects, buffers, cancel tokens, and the panic boundary.

use cairn_store::{Classify, ErrorKind};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A status code. `CAIRN_OK` (0) is success; every other value is one kind of error. Values
/// are stable and never reused.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum cairn_status {
    /// Success.
    CAIRN_OK = 0,
    /// An argument was malformed (a bad id, an ambiguous prefix, bad JSON options).
    CAIRN_ERR_INVALID_ARGUMENT = 1,
    /// The named snapshot, object, thread or entry does not exist.
    CAIRN_ERR_NOT_FOUND = 2,
    /// A well-formed request that the current state does not allow.
    CAIRN_ERR_VALIDATION = 3,
    /// A hold or another operation is in the way.
    CAIRN_ERR_BUSY = 4,
    /// A run or hold in the same or an overlapping workspace refuses a file restore.
    CAIRN_ERR_WORKSPACE_BUSY = 5,
    /// A run of the thread is going on.
    CAIRN_ERR_THREAD_BUSY = 6,
    /// Refused: it would lose data or cross a permission boundary.
    CAIRN_ERR_DENIED = 7,
    /// The operating system failed a read or write.
    CAIRN_ERR_IO = 8,
    /// Stored data does not decode or does not match its id.
    CAIRN_ERR_CORRUPT = 9,
    /// Someone else's change is in the way.
    CAIRN_ERR_CONFLICT = 10,
    /// Cancelled through a `cairn_cancel` token.
    CAIRN_ERR_CANCELLED = 11,
    /// A run was interrupted by a forced rewind.
    CAIRN_ERR_RUN_INTERRUPTED = 12,
    /// Not supported here.
    CAIRN_ERR_UNSUPPORTED = 13,
    /// A required pointer was NULL.
    CAIRN_ERR_NULL_ARGUMENT = 14,
    /// A panic was caught at the boundary (a bug in Cairn; please report it).
    CAIRN_ERR_PANIC = 15,
    /// A progress callback returned non-zero.
    CAIRN_ERR_ABORTED_BY_CALLBACK = 16,
}

/// The status table, written once (issue 30): each status with the error kind it stands for,
/// its stable name and its description. `From<ErrorKind>`, `cairn_status_name` and
/// `cairn_status_str` are made from it; the enum above stays written out for cbindgen, and
/// `the_status_table_covers_every_kind_once_with_its_name` checks that the two agree.
macro_rules! status_table {
    ($($status:ident = $kind:ident, $name:literal, $text:literal;)*) => {
        impl From<ErrorKind> for cairn_status {
            fn from(k: ErrorKind) -> Self {
                match k {
                    $(ErrorKind::$kind => cairn_status::$status,)*
                }
            }
        }

        /// The stable name of a status value, `"UNKNOWN"` for one this library does not know.
        fn status_name(status: u32) -> &'static std::ffi::CStr {
            $(if status == cairn_status::$status as u32 {
                return $name;
            })*
            c"UNKNOWN"
        }

        /// The description of a status value, `"unknown status"` for one this library does
        /// not know.
        fn status_text(status: u32) -> &'static std::ffi::CStr {
            $(if status == cairn_status::$status as u32 {
                return $text;
            })*
            c"unknown status"
        }

        /// Every status of the table.
        #[cfg(test)]
        const ALL_STATUSES: &[cairn_status] = &[$(cairn_status::$status),*];
    };
}

status_table! {
    CAIRN_OK = Ok, c"OK", c"ok";
    CAIRN_ERR_INVALID_ARGUMENT = InvalidArgument, c"INVALID_ARGUMENT", c"invalid argument";
    CAIRN_ERR_NOT_FOUND = NotFound, c"NOT_FOUND", c"not found";
    CAIRN_ERR_VALIDATION = Validation, c"VALIDATION", c"validation failed";
    CAIRN_ERR_BUSY = Busy, c"BUSY", c"busy";
    CAIRN_ERR_WORKSPACE_BUSY = WorkspaceBusy, c"WORKSPACE_BUSY", c"workspace busy";
    CAIRN_ERR_THREAD_BUSY = ThreadBusy, c"THREAD_BUSY", c"thread busy";
    CAIRN_ERR_DENIED = Denied, c"DENIED", c"denied";
    CAIRN_ERR_IO = Io, c"IO", c"input/output error";
    CAIRN_ERR_CORRUPT = Corrupt, c"CORRUPT", c"corrupt data";
    CAIRN_ERR_CONFLICT = Conflict, c"CONFLICT", c"conflict";
    CAIRN_ERR_CANCELLED = Cancelled, c"CANCELLED", c"cancelled";
    CAIRN_ERR_RUN_INTERRUPTED = RunInterrupted, c"RUN_INTERRUPTED", c"run interrupted";
    CAIRN_ERR_UNSUPPORTED = Unsupported, c"UNSUPPORTED", c"unsupported";
    CAIRN_ERR_NULL_ARGUMENT = NullArgument, c"NULL_ARGUMENT", c"null argument";
    CAIRN_ERR_PANIC = Panic, c"PANIC", c"panic";
    CAIRN_ERR_ABORTED_BY_CALLBACK = AbortedByCallback, c"ABORTED_BY_CALLBACK", c"aborted by callback";
}

/// A borrowed view of bytes owned by the library; valid as long as the object it came from.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cairn_bytes {
    /// The first byte (NULL when `len` is 0).
    pub data: *const u8,
    /// The number of bytes.
    pub len: usize,
}

impl cairn_bytes {
    fn of(b: &[u8]) -> Self {
        cairn_bytes {
            data: if b.is_empty() {
                std::ptr::null()
            } else {
                b.as_ptr()
            },
            len: b.len(),
        }
    }
    const EMPTY: cairn_bytes = cairn_bytes {
        data: std::ptr::null(),
        len: 0,
    };
}

/// An error: its kind (a `cairn_status`), a message that says what to do, and the path or id
/// it concerns. Owned by the caller; free it with `cairn_error_free`.
pub struct cairn_error {
    status: cairn_status,
    message: Vec<u8>,
    path: Vec<u8>,
}

/// An owned byte buffer (a JSON document, a path). Free it with `cairn_buf_free`.
pub struct cairn_buf {
    bytes: Vec<u8>,
}

/// A cancellation token: `cairn_cancel_cancel` may be called from any thread while an
/// operation that was given the token runs; the operation stops with `CAIRN_ERR_CANCELLED`.
pub struct cairn_cancel {
    pub(crate) token: cairn_store::CancelToken,
}

/// Progress of a long operation, passed to a `cairn_progress_cb`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct cairn_progress {
    /// Files recorded so far.
    pub files: u64,
    /// Directories entered so far.
    pub dirs: u64,
    /// Files read so far.
    pub hashed: u64,
    /// Bytes read so far.
    pub hashed_bytes: u64,
}

/// A progress callback. Called only on the thread that called the function, one call at a
/// time, with `userdata` first; valid only during that call. Return 0 to go on; any other
/// value stops the operation with `CAIRN_ERR_ABORTED_BY_CALLBACK`, leaving nothing half-done.
pub type cairn_progress_cb = Option<
    unsafe extern "C" fn(userdata: *mut std::ffi::c_void, progress: *const cairn_progress) -> i32,
>;

/// An error on the Rust side of the boundary.
pub(crate) struct FfiError {
    pub status: cairn_status,
    pub message: String,
    pub path: Vec<u8>,
}

impl FfiError {
    pub(crate) fn new(status: cairn_status, message: impl Into<String>) -> Self {
        FfiError {
            status,
            message: message.into(),
            path: Vec::new(),
        }
    }
    pub(crate) fn null(what: &str) -> Self {
        FfiError::new(
            cairn_status::CAIRN_ERR_NULL_ARGUMENT,
            format!("{what} must not be NULL"),
        )
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        FfiError::new(cairn_status::CAIRN_ERR_INVALID_ARGUMENT, message)
    }
}

impl<E: Classify + std::fmt::Display> From<E> for FfiError {
    fn from(e: E) -> Self {
        use std::os::unix::ffi::OsStrExt;
        FfiError {
            status: e.kind().into(),
            message: e.to_string(),
            path: e
                .path()
                .map(|p| p.as_os_str().as_bytes().to_vec())
                .unwrap_or_default(),
        }
    }
}

pub(crate) type FfiResult<T> = Result<T, FfiError>;

/// What a caught panic said.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Frees a handle this library boxed, inside the panic boundary: dropping one can reach code
/// that may panic (a thread database's PostgreSQL connection closing, a hold's file), and a
/// panic must never unwind into C. A free returns nothing, so a caught panic is said on stderr
/// (the handle's memory is released all the same, or leaked where the drop stopped).
///
/// # Safety
/// `ptr` must be NULL or come from `Box::into_raw` in this library, not freed before.
pub(crate) unsafe fn free_boxed<T>(ptr: *mut T, what: &str) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: per this function's contract.
    let owned = unsafe { Box::from_raw(ptr) };
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(owned))) {
        eprintln!(
            "cairn: a panic was caught while freeing {what} ({}); this is a bug in Cairn, please report it",
            panic_text(&*panic)
        );
        // Its payload is not dropped: that could panic again, outside any boundary.
        std::mem::forget(panic);
    }
}

/// Runs `body` inside the panic boundary; writes the error to `err_out` (if not NULL).
pub(crate) fn boundary(
    err_out: *mut *mut cairn_error,
    body: impl FnOnce() -> FfiResult<()>,
) -> cairn_status {
    let result = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(panic) => {
            let what = panic_text(&*panic);
            Err(FfiError::new(
                cairn_status::CAIRN_ERR_PANIC,
                format!("internal error ({what}); this is a bug in Cairn, please report it"),
            ))
        }
    };
    match result {
        Ok(()) => cairn_status::CAIRN_OK,
        Err(e) => {
            let status = e.status;
            if !err_out.is_null() {
                let boxed = Box::new(cairn_error {
                    status,
                    message: e.message.into_bytes(),
                    path: e.path,
                });
                // SAFETY: err_out is non-null and, per the API contract, points to writable
                // storage for one pointer.
                unsafe { *err_out = Box::into_raw(boxed) };
            }
            status
        }
    }
}

/// Reads `(ptr, len)` as bytes; `(NULL, 0)` is empty; `(NULL, n>0)` is a NULL argument.
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes when not NULL.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> FfiResult<&'a [u8]> {
    if ptr.is_null() {
        if len == 0 {
            return Ok(&[]);
        }
        return Err(FfiError::null(what));
    }
    // SAFETY: non-null and valid for `len` bytes per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Reads `(ptr, len)` as UTF-8 text.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn text<'a>(ptr: *const u8, len: usize, what: &str) -> FfiResult<&'a str> {
    // SAFETY: forwarded contract.
    let b = unsafe { bytes(ptr, len, what) }?;
    std::str::from_utf8(b).map_err(|_| FfiError::invalid(format!("{what} is not UTF-8")))
}

/// An out-pointer checked non-NULL (by [`arg!`]`(out p)`): writing the function's output
/// through it is safe, and done once (`put` takes it).
pub(crate) struct Out<T>(*mut *mut T);

impl<T> Out<T> {
    /// Checks `p`, named `what` in the error.
    ///
    /// # Safety
    /// `p` must be NULL or writable for one pointer until the function returns.
    pub(crate) unsafe fn new(p: *mut *mut T, what: &str) -> FfiResult<Self> {
        if p.is_null() {
            Err(FfiError::null(what))
        } else {
            Ok(Out(p))
        }
    }

    /// Writes `value`, boxed: the caller owns it (and frees it with its `_free`).
    pub(crate) fn put(self, value: T) -> FfiResult<()> {
        // SAFETY: non-NULL and writable, as `new` was told.
        unsafe { *self.0 = Box::into_raw(Box::new(value)) };
        Ok(())
    }
}

impl Out<cairn_buf> {
    /// Writes `v` as a JSON document.
    pub(crate) fn json<V: serde::Serialize>(self, v: &V) -> FfiResult<()> {
        self.bytes(crate::json::to_vec(v))
    }

    /// Writes `bytes` (text that is not a JSON document).
    pub(crate) fn bytes(self, bytes: Vec<u8>) -> FfiResult<()> {
        self.put(cairn_buf { bytes })
    }
}

/// One argument of an exported function, checked and as Rust sees it; on a bad one, returns
/// its error from the enclosing body (which runs inside [`boundary`]). This is the prologue
/// every function repeated (rustls-ffi's `try_ref_from_ptr!`, `try_slice!`...): the safety
/// of each form is the function's contract, which says what every pointer is.
///
/// - `arg!(handle p, "what")`: the live handle `p` as `&T`; NULL is `CAIRN_ERR_NULL_ARGUMENT`
///   ("what must not be NULL").
/// - `arg!(maybe p)`: a handle that may be NULL, as `Option<&T>`.
/// - `arg!(out p)`: the out-pointer `p`, checked non-NULL, as an [`Out`].
/// - `arg!(bytes p, len, "what")`: `(p, len)` as `&[u8]` (`(NULL, 0)` is empty).
/// - `arg!(text p, len, "what")`: `(p, len)` as UTF-8 `&str`.
/// - `arg!(options p, len, "what")`: `(p, len)` parsed as an options document (empty: the
///   defaults; unknown fields refused), named "what" in errors; the argument itself is
///   "options", or the name given last (`arg!(options p, len, "what", "arg")`).
macro_rules! arg {
    (handle $p:expr, $what:expr) => {
        // SAFETY: NULL or a live handle of this library, per the function's contract.
        unsafe { $crate::boundary::handle($p, $what) }?
    };
    (maybe $p:expr) => {
        // SAFETY: NULL or a live handle of this library, per the function's contract.
        unsafe { $p.as_ref() }
    };
    (out $p:expr) => {
        // SAFETY: NULL or writable for one pointer, per the function's contract.
        unsafe { $crate::boundary::Out::new($p, "out") }?
    };
    (bytes $p:expr, $len:expr, $what:expr) => {
        // SAFETY: NULL or valid for `len` bytes, per the function's contract.
        unsafe { $crate::boundary::bytes($p, $len, $what) }?
    };
    (text $p:expr, $len:expr, $what:expr) => {
        // SAFETY: NULL or valid for `len` bytes, per the function's contract.
        unsafe { $crate::boundary::text($p, $len, $what) }?
    };
    (options $p:expr, $len:expr, $what:expr) => {
        arg!(options $p, $len, $what, "options")
    };
    (options $p:expr, $len:expr, $what:expr, $name:expr) => {
        $crate::json::parse(arg!(bytes $p, $len, $name), $what)?
    };
}

/// Dereferences a handle, or fails with `CAIRN_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `p` must be NULL or a live handle of type `T` from this library.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> FfiResult<&'a T> {
    // SAFETY: per the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| FfiError::null(what))
}

/// The status of an error (`CAIRN_ERR_NULL_ARGUMENT` for NULL).
///
/// # Safety
/// `err` must be NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cairn_error_status(err: *const cairn_error) -> cairn_status {
    // SAFETY: per the contract.
    match unsafe { err.as_ref() } {
        Some(e) => e.status,
        None => cairn_status::CAIRN_ERR_NULL_ARGUMENT,
    }
}

/// The error's message (UTF-8, not NUL-terminated), valid until `cairn_error_free`.
///
/// # Safety
/// `err` must be NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cairn_error_message(err: *const cairn_error) -> cairn_bytes {
    // SAFETY: per the contract.
    match unsafe { err.as_ref() } {
        Some(e) => cairn_bytes::of(&e.message),
        None => cairn_bytes::EMPTY,
    }
}

/// The path (raw bytes) or id the error concerns, empty when none; valid until
/// `cairn_error_free`.
///
/// # Safety
/// `err` must be NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cairn_error_path(err: *const cairn_error) -> cairn_bytes {
    // SAFETY: per the contract.
    match unsafe { err.as_ref() } {
        Some(e) => cairn_bytes::of(&e.path),
        None => cairn_bytes::EMPTY,
    }
}

/// Frees an error. NULL is accepted. Must not be called twice.
///
/// # Safety
/// `err` must be NULL or an error from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cairn_error_free(err: *mut cairn_error) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(err, "an error") }
}

/// The buffer's bytes, valid until `cairn_buf_free`.
///
/// # Safety
/// `buf` must be NULL or a buffer from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cairn_buf_bytes(buf: *const cairn_buf) -> cairn_bytes {
    // SAFETY: per the contract.
    match unsafe { buf.as_ref() } {
        Some(b) => cairn_bytes::of(&b.bytes),
        None => cairn_bytes::EMPTY,
    }
}

/// Frees a buffer. NULL is accepted. Must not be called twice.
///
/// # Safety
/// `buf` must be NULL or a buffer from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn cairn_buf_free(buf: *mut cairn_buf) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(buf, "a buffer") }
}

/// A static, NUL-terminated description of a status ("not found", ...).
#[no_mangle]
pub extern "C" fn cairn_status_str(status: u32) -> *const std::ffi::c_char {
    status_text(status).as_ptr()
}

/// The stable name of a status (`"NOT_FOUND"`), NUL-terminated and static; `"UNKNOWN"` for a
/// value this library does not know.
#[no_mangle]
pub extern "C" fn cairn_status_name(status: u32) -> *const std::ffi::c_char {
    status_name(status).as_ptr()
}

/// The library's version, NUL-terminated and static ("0.1.0").
#[no_mangle]
pub extern "C" fn cairn_version() -> *const std::ffi::c_char {
    static V: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    V.as_ptr().cast()
}

/// The library's ABI version (`CAIRN_ABI_VERSION` of the header it was built with).
#[no_mangle]
pub extern "C" fn cairn_abi_version() -> u32 {
    crate::CAIRN_ABI_VERSION
}

/// Creates a cancellation token.
///
/// # Safety
/// `out` must be writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_cancel_new(
    out: *mut *mut cairn_cancel,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        arg!(out out).put(cairn_cancel {
            token: cairn_store::CancelToken::new(),
        })
    })
}

/// Cancels: every operation given this token stops at its next check. Safe from any thread,
/// any number of times.
///
/// # Safety
/// `cancel` must be NULL or a live token.
#[no_mangle]
pub unsafe extern "C" fn cairn_cancel_cancel(cancel: *const cairn_cancel) -> cairn_status {
    boundary(std::ptr::null_mut(), || {
        arg!(handle cancel, "cancel").token.cancel();
        Ok(())
    })
}

/// Frees a token. NULL is accepted. No operation may still be using it.
///
/// # Safety
/// `cancel` must be NULL or a live token not used by a running call.
#[no_mangle]
pub unsafe extern "C" fn cairn_cancel_free(cancel: *mut cairn_cancel) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(cancel, "a cancel token") }
}

/// Test hook: panics inside the boundary, to show a panic becomes `CAIRN_ERR_PANIC`.
///
/// # Safety
/// `err_out` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_debug_panic(err_out: *mut *mut cairn_error) -> cairn_status {
    boundary(err_out, || panic!("cairn_debug_panic was called"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle whose drop panics: what a free must survive.
    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("dropping the handle failed");
        }
    }

    #[test]
    #[allow(unsafe_code)]
    fn a_panic_while_a_handle_is_freed_is_caught_and_never_unwinds_into_c() {
        let handle = Box::into_raw(Box::new(PanicsOnDrop));
        let unwound = std::panic::catch_unwind(|| {
            // SAFETY: boxed just above, freed once.
            unsafe { free_boxed(handle, "a test handle") }
        });
        assert!(unwound.is_ok(), "the panic left the free function");
        // NULL is a no-op.
        // SAFETY: NULL is allowed.
        unsafe { free_boxed(std::ptr::null_mut::<PanicsOnDrop>(), "nothing") };
    }

    #[test]
    fn the_status_table_covers_every_kind_once_with_its_name() {
        assert_eq!(ALL_STATUSES.len(), ErrorKind::ALL.len());
        let mut seen = std::collections::HashSet::new();
        for kind in ErrorKind::ALL {
            let status = cairn_status::from(kind) as u32;
            assert!(seen.insert(status), "{kind:?} shares status {status}");
            assert_eq!(status_name(status).to_str(), Ok(kind.name()), "{kind:?}");
            assert_ne!(
                status_text(status).to_bytes(),
                b"unknown status",
                "{kind:?}"
            );
        }
        assert_eq!(status_name(999).to_bytes(), b"UNKNOWN");
        assert_eq!(status_text(999).to_bytes(), b"unknown status");
    }
}
