//! The one classification of errors shared by every Cairn crate, and the store's own errors.
//!
//! Every error in Cairn maps to exactly one [`ErrorKind`]. The kinds become the C status codes
//! of `cairn.h` and the exception or error types of every binding, so their numeric values are
//! stable and never reused.

use std::path::{Path, PathBuf};

/// The classification of every error Cairn reports, shared by all crates, the C ABI and the
/// bindings. The discriminants are the C status codes and never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[repr(u32)]
pub enum ErrorKind {
    /// Not an error (the C status `CAIRN_OK`).
    Ok = 0,
    /// An argument was malformed (a bad id, an ambiguous prefix, a bad option value).
    InvalidArgument = 1,
    /// The named snapshot, object, thread or entry does not exist.
    NotFound = 2,
    /// A request that is well formed but not allowed in the current state (rewind rules).
    Validation = 3,
    /// Something holds the workspace or store (a hold, a running command) and the call would race it.
    Busy = 4,
    /// A run or hold in the same or an overlapping workspace refuses a file restore.
    WorkspaceBusy = 5,
    /// A run of the thread is going on and refuses the operation.
    ThreadBusy = 6,
    /// The operation could not be done without losing data or crossing a permission boundary.
    Denied = 7,
    /// The operating system failed a read or write.
    Io = 8,
    /// Stored data does not decode or does not match its id.
    Corrupt = 9,
    /// Someone else's change is in the way (a drifted file, an obstructed journal).
    Conflict = 10,
    /// The caller cancelled the operation.
    Cancelled = 11,
    /// A run was interrupted by a forced rewind.
    RunInterrupted = 12,
    /// The platform or the store's format version does not support the request.
    Unsupported = 13,
    /// A required pointer was NULL (C ABI only).
    NullArgument = 14,
    /// A panic was caught at the C boundary.
    Panic = 15,
    /// A progress callback asked to stop.
    AbortedByCallback = 16,
}

impl ErrorKind {
    /// Every kind, in the order of their codes.
    pub const ALL: [ErrorKind; 17] = [
        ErrorKind::Ok,
        ErrorKind::InvalidArgument,
        ErrorKind::NotFound,
        ErrorKind::Validation,
        ErrorKind::Busy,
        ErrorKind::WorkspaceBusy,
        ErrorKind::ThreadBusy,
        ErrorKind::Denied,
        ErrorKind::Io,
        ErrorKind::Corrupt,
        ErrorKind::Conflict,
        ErrorKind::Cancelled,
        ErrorKind::RunInterrupted,
        ErrorKind::Unsupported,
        ErrorKind::NullArgument,
        ErrorKind::Panic,
        ErrorKind::AbortedByCallback,
    ];

    /// The stable upper-case name (`"NOT_FOUND"`), as used in JSON, the CLI and the bindings.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Ok => "OK",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::Validation => "VALIDATION",
            ErrorKind::Busy => "BUSY",
            ErrorKind::WorkspaceBusy => "WORKSPACE_BUSY",
            ErrorKind::ThreadBusy => "THREAD_BUSY",
            ErrorKind::Denied => "DENIED",
            ErrorKind::Io => "IO",
            ErrorKind::Corrupt => "CORRUPT",
            ErrorKind::Conflict => "CONFLICT",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::RunInterrupted => "RUN_INTERRUPTED",
            ErrorKind::Unsupported => "UNSUPPORTED",
            ErrorKind::NullArgument => "NULL_ARGUMENT",
            ErrorKind::Panic => "PANIC",
            ErrorKind::AbortedByCallback => "ABORTED_BY_CALLBACK",
        }
    }

    /// The stable numeric code (the C status).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The kind an I/O error of the operating system belongs to.
    pub fn of_io(err: &std::io::Error) -> ErrorKind {
        match err.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorKind::Denied,
            _ => ErrorKind::Io,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Implemented by every Cairn error: its kind, and the path or id it concerns.
pub trait Classify {
    /// The kind of this error.
    fn kind(&self) -> ErrorKind;
    /// The path the error concerns, if any.
    fn path(&self) -> Option<&Path> {
        None
    }
}

/// An error of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system failed an operation on a path of the store.
    #[error("{action} {path}: {source}")]
    Io {
        /// What the store was doing ("create directory", "read pack", ...).
        action: &'static str,
        /// The path it was working on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Reading the caller's reader or writing the caller's writer failed: the store does not
    /// know what it stands for, so the caller names its path with [`Error::at`] (every
    /// caller in Cairn does; the message never stands in a placeholder).
    #[error("{action} (the caller's stream): {source}")]
    Stream {
        /// `"read"` or `"write"`.
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Stored data does not decode or does not match its id.
    #[error("corrupt {what} at {path}: {detail}; run `cairn verify` to list what is affected")]
    Corrupt {
        /// What is corrupt ("tree 3fa2…", "pack index", "manifest").
        what: String,
        /// Where it was read from.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// No object, snapshot or file of that name exists.
    #[error("{what} not found{}", path_suffix(path))]
    NotFound {
        /// What was looked for ("snapshot 3fa2", "object …").
        what: String,
        /// Where it was looked for, if a path is concerned.
        path: Option<PathBuf>,
    },
    /// An argument was malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// Another process holds what this operation needs.
    #[error("{what} is busy: {detail}")]
    Busy {
        /// What is busy.
        what: String,
        /// Who holds it and what to do.
        detail: String,
    },
    /// The store's directory is not owned by this user, or permissions forbid the operation.
    #[error("permission denied on {path}: {detail}")]
    Denied {
        /// The path concerned.
        path: PathBuf,
        /// What to do.
        detail: String,
    },
    /// A format version this build does not read.
    #[error("{path} has format version {found}, this build reads {supported}; upgrade Cairn")]
    UnsupportedVersion {
        /// The file concerned.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The version supported.
        supported: u32,
    },
    /// The operation was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// A remote object store failed a request or refused it.
    #[error("{action} on {location}: {detail}")]
    Remote {
        /// What the store was doing ("upload pack", "list packs/").
        action: String,
        /// The remote (`s3://bucket/prefix`), never with credentials.
        location: String,
        /// What went wrong, and what to do.
        detail: String,
        /// `NOT_FOUND`, `DENIED` (credentials, access) or `IO` (unreachable, timed out).
        kind: ErrorKind,
    },
    /// The request cannot be done on this store.
    #[error("{what} is not supported: {detail}")]
    Unsupported {
        /// What was asked.
        what: String,
        /// Why, and what to do instead.
        detail: String,
    },
}

fn path_suffix(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" at {}", p.display()),
        None => String::new(),
    }
}

impl Error {
    /// An I/O error on `path` while doing `action`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// This error, with the reader or writer it failed on named as `path` (a [`Error::Stream`]
    /// becomes [`Error::Io`] on it; any other error is returned as it is).
    pub fn at(self, path: impl Into<PathBuf>) -> Self {
        match self {
            Error::Stream { action, source } => Error::Io {
                action,
                path: path.into(),
                source,
            },
            e => e,
        }
    }

    /// A corruption error.
    pub fn corrupt(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
        detail: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            what: what.into(),
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// A not-found error.
    pub fn not_found(what: impl Into<String>) -> Self {
        Error::NotFound {
            what: what.into(),
            path: None,
        }
    }

    /// Whether this error says that something does not exist.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { source, .. } | Error::Stream { source, .. } => ErrorKind::of_io(source),
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Busy { .. } => ErrorKind::Busy,
            Error::Denied { .. } => ErrorKind::Denied,
            Error::UnsupportedVersion { .. } => ErrorKind::Unsupported,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Remote { kind, .. } => *kind,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Io { path, .. } | Error::Corrupt { path, .. } | Error::Denied { path, .. } => {
                Some(path)
            }
            Error::UnsupportedVersion { path, .. } => Some(path),
            Error::NotFound { path, .. } => path.as_deref(),
            _ => None,
        }
    }
}

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
