//! Errors of the restore layer.

use cairn_store::{Classify, ErrorKind, RelPath};
use std::path::{Path, PathBuf};

/// An error opening a workspace, planning or applying a restore, or taking a hold.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    /// Taking a snapshot (the safety snapshot, or the scan of a plan) failed.
    #[error(transparent)]
    Snapshot(#[from] cairn_snapshot::Error),
    /// The operating system failed an operation on a workspace path.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The absolute path concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A hold, or another restore, is in the way.
    #[error("the workspace is busy: {detail}; wait for it to finish, then try again")]
    Busy {
        /// Who holds it.
        detail: String,
    },
    /// The restore would lose data or cross a permission boundary; nothing was changed.
    #[error("restore refused before any change: {detail}: {}", list(paths))]
    Denied {
        /// Why.
        detail: String,
        /// The paths concerned.
        paths: Vec<RelPath>,
        /// The first path, absolute, for the error's `path`.
        first: Option<PathBuf>,
    },
    /// The workspace root is not a place a restore may change: it lies inside a Cairn store, or
    /// holds the workspace a snapshot was taken of. Nothing was changed.
    #[error("{detail}")]
    UnsafeRoot {
        /// What is wrong and what to do.
        detail: String,
        /// The root concerned.
        root: PathBuf,
    },
    /// A restore failed after its changes had begun: its journal holds it, and recovery (the
    /// next opening of the workspace, or `Workspace::recover`) finishes it. The kind and path
    /// are those of the failure.
    #[error(
        "{source}; the restore stopped after its changes had begun: journal {journal} holds it, \
         and `cairn recover` (or the next opening of the workspace) finishes it; the safety \
         snapshot {} holds the files as they were", safety.short()
    )]
    Unfinished {
        /// What failed.
        source: Box<Error>,
        /// The journal that holds the restore.
        journal: String,
        /// The safety snapshot taken before any change.
        safety: cairn_store::SnapshotId,
    },
    /// Someone else's edits are in the way.
    #[error("{detail}: {}", list(paths))]
    Conflict {
        /// What conflicts.
        detail: String,
        /// The paths concerned.
        paths: Vec<RelPath>,
        /// The first path, absolute.
        first: Option<PathBuf>,
    },
    /// A store move found the copy an earlier move left (`<to>.partial`) holding what the
    /// source lacks, or no source at all: it may be the only copy, and nothing was changed.
    #[error("{detail}")]
    UnfinishedMove {
        /// Both paths, what may have happened and what to do.
        detail: String,
        /// The earlier move's copy.
        partial: PathBuf,
    },
    /// An option is malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// The caller cancelled before anything changed.
    #[error("the restore was cancelled before it changed anything")]
    Cancelled,
    /// The restore a `cairn watch` daemon carried out for this process failed there: its
    /// error as the daemon classified and worded it.
    #[error("{message}")]
    Watcher {
        /// Its kind.
        kind: ErrorKind,
        /// Its message.
        message: String,
        /// The path it concerns, if any.
        path: Option<PathBuf>,
    },
}

fn list(paths: &[RelPath]) -> String {
    let mut names: Vec<String> = paths
        .iter()
        .take(10)
        .map(|p| p.display().into_owned())
        .collect();
    if paths.len() > 10 {
        names.push(format!("and {} more", paths.len() - 10));
    }
    names.join(", ")
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
            Error::Snapshot(e) => e.kind(),
            Error::Io { source, .. } => match source.raw_os_error() {
                Some(c) if c == rustix::io::Errno::LOOP.raw_os_error() => ErrorKind::Denied,
                _ => ErrorKind::of_io(source),
            },
            Error::Busy { .. } => ErrorKind::Busy,
            Error::Denied { .. } | Error::UnsafeRoot { .. } => ErrorKind::Denied,
            Error::Unfinished { source, .. } => source.kind(),
            Error::Conflict { .. } | Error::UnfinishedMove { .. } => ErrorKind::Conflict,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Watcher { kind, .. } => *kind,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Store(e) => e.path(),
            Error::Snapshot(e) => e.path(),
            Error::Io { path, .. }
            | Error::UnsafeRoot { root: path, .. }
            | Error::UnfinishedMove { partial: path, .. } => Some(path),
            Error::Watcher { path, .. } => path.as_deref(),
            Error::Denied { first, .. } | Error::Conflict { first, .. } => first.as_deref(),
            Error::Unfinished { source, .. } => source.path(),
            _ => None,
        }
    }
}

/// The restore layer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A store's `NOT_FOUND` for an object that snapshot `snapshot` names is damage, not a name
/// that does not exist: `CORRUPT`, naming the snapshot and the object (issue 29). Any other
/// error is returned as it is.
pub(crate) fn missing_object_is_damage(
    store: &cairn_store::Store,
    snapshot: &cairn_store::SnapshotId,
    e: Error,
) -> Error {
    match e {
        Error::Store(cairn_store::Error::NotFound { what, path })
            if what.starts_with("object ") =>
        {
            let gone = path
                .as_ref()
                .map(|p| format!(" ({} is missing)", p.display()))
                .unwrap_or_default();
            Error::Store(cairn_store::Error::corrupt(
                format!("snapshot {}", snapshot.short()),
                path.unwrap_or_else(|| store.path().to_path_buf()),
                format!(
                    "it names {what}, which the store does not have{gone}: the store is \
                     damaged (a snapshot of the same files heals it)"
                ),
            ))
        }
        e => e,
    }
}
