//! Errors of the rewind layer, each mapped to the one kind list ([`cairn_store::ErrorKind`]).

use crate::ids::{RunId, ThreadId};
use cairn_store::{Classify, ErrorKind};
use std::path::{Path, PathBuf};

/// An error of a workspace behind the [`crate::Files`] seam (a snapshot or restore that
/// failed), carrying its own kind.
pub trait FilesFailure: std::error::Error + Classify + Send + Sync + 'static {}

impl<T: std::error::Error + Classify + Send + Sync + 'static> FilesFailure for T {}

/// A boxed error of a workspace, as the [`crate::Files`] seam returns it.
#[derive(Debug)]
pub struct FilesError(Box<dyn FilesFailure>);

impl FilesError {
    /// Wraps any classified error.
    pub fn new(err: impl FilesFailure) -> Self {
        FilesError(Box::new(err))
    }

    /// A plain error of the given kind with a message (for seams without an error type).
    pub fn msg(kind: ErrorKind, message: impl Into<String>) -> Self {
        FilesError(Box::new(Plain {
            kind,
            message: message.into(),
        }))
    }
}

impl std::fmt::Display for FilesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for FilesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Classify for FilesError {
    fn kind(&self) -> ErrorKind {
        self.0.kind()
    }
    fn path(&self) -> Option<&Path> {
        self.0.path()
    }
}

#[derive(Debug)]
struct Plain {
    kind: ErrorKind,
    message: String,
}

impl std::fmt::Display for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Plain {}

impl Classify for Plain {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// An error of the thread database, a rewind or a fork.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database (SQLite or PostgreSQL) failed.
    #[error("thread database {path}: {action}: {source}")]
    Db {
        /// What was being done ("append an entry", "switch the active leaf", ...).
        action: &'static str,
        /// The database file, or the PostgreSQL URL without its password.
        path: PathBuf,
        /// The engine's error.
        #[source]
        source: DbError,
    },
    /// A PostgreSQL thread database could not be reached, or refused the connection.
    #[error(
        "cannot connect to the thread database {url}: {source}; check the host, port, database, \
         user and password of the URL, and that the server is running"
    )]
    Connect {
        /// The URL, without its password.
        url: PathBuf,
        /// Why.
        #[source]
        source: DbError,
    },
    /// The operating system failed on a file of the database (its holder files).
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
    /// No thread, entry, run, checkpoint or memory item of that id.
    #[error("{what} not found; {hint}")]
    NotFound {
        /// What was looked for ("thread chat", "entry e_…").
        what: String,
        /// What to do.
        hint: &'static str,
    },
    /// An argument is malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// The request is well formed but breaks a rewind or fork rule; nothing was changed.
    #[error("{message}")]
    Validation {
        /// What is wrong and what to do.
        message: String,
        /// The id (entry, checkpoint, thread) the rule concerns.
        id: Option<String>,
    },
    /// A run of the thread goes on, or a rewind or fork holds it.
    #[error("thread {thread} is busy: {detail}")]
    ThreadBusy {
        /// The thread.
        thread: ThreadId,
        /// Who holds it and what to do.
        detail: String,
    },
    /// A run, tool call or hold in the same or an overlapping workspace refuses a file restore.
    #[error("workspace {workspace} ({}) is busy: {detail}", root.display())]
    WorkspaceBusy {
        /// The workspace id.
        workspace: String,
        /// Its root.
        root: PathBuf,
        /// Who holds it and what to do.
        detail: String,
    },
    /// The operation would lose data (a fork into a directory holding the source workspace,
    /// its store or the thread database, or into a directory whose files it would replace);
    /// nothing was changed.
    #[error("{message}")]
    Denied {
        /// What is wrong and what to do.
        message: String,
        /// The path concerned.
        path: PathBuf,
    },
    /// The run was interrupted or dropped by a rewind of its thread, or interrupted by a forced
    /// fork with files.
    #[error("run {run} of thread {thread} was {how} by {by}; start a new run")]
    RunInterrupted {
        /// The run.
        run: RunId,
        /// Its thread.
        thread: ThreadId,
        /// "interrupted" or "dropped".
        how: &'static str,
        /// What stopped it: "the forced rewind rw_…", "the forced fork fk_…", "the rewind rw_…".
        by: String,
    },
    /// A workspace failed a snapshot, plan or restore.
    #[error("workspace {workspace}: {action} failed: {source}")]
    Files {
        /// The workspace id.
        workspace: String,
        /// What was being done ("restore the files", "check the checkpoint", ...).
        action: &'static str,
        /// The workspace's error, with its own kind.
        #[source]
        source: FilesError,
    },
    /// The store failed (copying checkpoints between workspaces).
    #[error(transparent)]
    Store(#[from] cairn_store::Error),
    /// A record of the database does not decode.
    #[error("thread database {path}: {what} does not decode: {detail}")]
    Corrupt {
        /// What ("rewind record rw_…").
        what: String,
        /// The database file.
        path: PathBuf,
        /// The decoder's complaint.
        detail: String,
    },
    /// The database was written by a newer Cairn.
    #[error("thread database {path} has schema version {found}; this build reads up to {supported}: upgrade Cairn")]
    UnsupportedSchema {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: i64,
        /// The newest version this build reads.
        supported: i64,
    },
}

impl Error {
    pub(crate) fn not_found(what: impl Into<String>, hint: &'static str) -> Self {
        Error::NotFound {
            what: what.into(),
            hint,
        }
    }

    pub(crate) fn validation(message: impl Into<String>, id: impl Into<Option<String>>) -> Self {
        Error::Validation {
            message: message.into(),
            id: id.into(),
        }
    }

    pub(crate) fn files(workspace: &str, action: &'static str, source: FilesError) -> Self {
        Error::Files {
            workspace: workspace.to_string(),
            action,
            source,
        }
    }

    /// Fills in the database path of an error raised inside a transaction.
    pub(crate) fn at(mut self, db: &Path) -> Self {
        match &mut self {
            Error::Db { path, .. } | Error::Corrupt { path, .. } if path.as_os_str().is_empty() => {
                *path = db.to_path_buf();
            }
            _ => {}
        }
        self
    }

    /// Whether this error says that something does not exist.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// Whether this error is a refused rewind or fork rule (`VALIDATION`).
    pub fn is_validation(&self) -> bool {
        self.kind() == ErrorKind::Validation
    }
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Db { source, .. } | Error::Connect { source, .. } => source.kind(),
            Error::Io { source, .. } => ErrorKind::of_io(source),
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Validation { .. } => ErrorKind::Validation,
            Error::ThreadBusy { .. } => ErrorKind::ThreadBusy,
            Error::Denied { .. } => ErrorKind::Denied,
            Error::WorkspaceBusy { .. } => ErrorKind::WorkspaceBusy,
            Error::RunInterrupted { .. } => ErrorKind::RunInterrupted,
            Error::Files { source, .. } => source.kind(),
            Error::Store(e) => e.kind(),
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::UnsupportedSchema { .. } => ErrorKind::Unsupported,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Db { path, .. }
            | Error::Connect { url: path, .. }
            | Error::Io { path, .. }
            | Error::Corrupt { path, .. }
            | Error::UnsupportedSchema { path, .. } => Some(path),
            Error::WorkspaceBusy { root, .. } | Error::Denied { path: root, .. } => Some(root),
            Error::Files { source, .. } => source.path(),
            Error::Store(e) => e.path(),
            _ => None,
        }
    }
}

/// An error of the database engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// SQLite's error.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL's error (or the connection's).
    #[error("{}", pg_message(.0))]
    Postgres(#[from] postgres::Error),
    /// The server did not finish the connection's handshake in time.
    #[error("the server did not answer within {0:?}")]
    NoAnswer(std::time::Duration),
    /// A query that must return a row returned none.
    #[error("no row found")]
    NoRows,
    /// A column held a value of the wrong type or form.
    #[error("column {column}: {message}")]
    Value {
        /// The column's position in the query.
        column: usize,
        /// What was wrong.
        message: String,
    },
}

/// What PostgreSQL said ("FATAL: password authentication failed for user …"), or the
/// connection's error with its cause ("error connecting to server: Connection refused").
fn pg_message(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

impl DbError {
    /// The kind of error: `BUSY` when a lock was not had in time, `DENIED` for permissions
    /// and bad credentials, `NOT_FOUND` for a PostgreSQL database that does not exist,
    /// `CORRUPT` for damage, `IO` otherwise.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DbError::Sqlite(e) => match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    ErrorKind::Busy
                }
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                    ErrorKind::Corrupt
                }
                Some(rusqlite::ErrorCode::PermissionDenied | rusqlite::ErrorCode::ReadOnly) => {
                    ErrorKind::Denied
                }
                _ => ErrorKind::Io,
            },
            DbError::Postgres(e) => {
                use postgres::error::SqlState;
                match e.code() {
                    Some(c)
                        if *c == SqlState::LOCK_NOT_AVAILABLE
                            || *c == SqlState::T_R_SERIALIZATION_FAILURE
                            || *c == SqlState::T_R_DEADLOCK_DETECTED
                            || *c == SqlState::TOO_MANY_CONNECTIONS =>
                    {
                        ErrorKind::Busy
                    }
                    Some(c)
                        if *c == SqlState::INVALID_PASSWORD
                            || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                            || *c == SqlState::INSUFFICIENT_PRIVILEGE
                            || *c == SqlState::READ_ONLY_SQL_TRANSACTION =>
                    {
                        ErrorKind::Denied
                    }
                    Some(c) if *c == SqlState::INVALID_CATALOG_NAME => ErrorKind::NotFound,
                    Some(c)
                        if *c == SqlState::DATA_CORRUPTED || *c == SqlState::INDEX_CORRUPTED =>
                    {
                        ErrorKind::Corrupt
                    }
                    _ => ErrorKind::Io,
                }
            }
            DbError::NoAnswer(_) => ErrorKind::Io,
            DbError::NoRows | DbError::Value { .. } => ErrorKind::Corrupt,
        }
    }
}

/// Maps database errors to [`Error::Db`] with what was being done.
pub(crate) trait DbResult<T> {
    /// Tags the error with `action`; the database path is filled in by the caller.
    fn db(self, action: &'static str) -> Result<T>;
}

impl<T, E: Into<DbError>> DbResult<T> for std::result::Result<T, E> {
    fn db(self, action: &'static str) -> Result<T> {
        self.map_err(|source| Error::Db {
            action,
            path: PathBuf::new(),
            source: source.into(),
        })
    }
}

/// The rewind layer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
