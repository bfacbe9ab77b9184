//! Errors of the snapshot layer.

use cairn_store::{Classify, ErrorKind};
use std::path::{Path, PathBuf};

/// An error taking a snapshot, scanning a workspace or computing a diff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    /// The operating system failed an operation on a workspace path.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The workspace root is missing or not a directory.
    #[error("workspace root {path} is not a directory: {detail}")]
    Root {
        /// The root given.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The workspace root is on a file system whose changes inotify does not see.
    #[error(
        "cannot watch {path}: it is on a {fs} file system, whose changes inotify does not see; \
         snapshots of it walk the tree (do not start a watcher there)"
    )]
    Unwatchable {
        /// The root.
        path: PathBuf,
        /// The file system's name.
        fs: &'static str,
    },
    /// A watcher was asked for where there is no inotify (only Linux has it).
    #[error(
        "cannot watch {path}: watching needs Linux's inotify, which this system does not have; \
         snapshots of it walk the tree (correct, slower)"
    )]
    NoWatcher {
        /// The root.
        path: PathBuf,
    },
    /// An exclude pattern does not parse.
    #[error("exclude pattern '{pattern}' is not a valid glob: {detail}")]
    BadExclude {
        /// The pattern.
        pattern: String,
        /// The parser's complaint.
        detail: String,
    },
    /// An option is malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// The caller cancelled the operation.
    #[error("the snapshot was cancelled; nothing was recorded")]
    Cancelled,
    /// The progress callback asked to stop.
    #[error("the progress callback asked to stop; nothing was recorded")]
    AbortedByCallback,
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Io { source, .. } => ErrorKind::of_io(source),
            Error::Root { .. } => ErrorKind::NotFound,
            Error::Unwatchable { .. } | Error::NoWatcher { .. } => ErrorKind::Unsupported,
            Error::BadExclude { .. } | Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::AbortedByCallback => ErrorKind::AbortedByCallback,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Store(e) => e.path(),
            Error::Io { path, .. }
            | Error::Root { path, .. }
            | Error::Unwatchable { path, .. }
            | Error::NoWatcher { path } => Some(path),
            _ => None,
        }
    }
}

/// The snapshot layer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
