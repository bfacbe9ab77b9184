//! The errors of the agent adapters, in the one kind list (`cairn_store::ErrorKind`).

use cairn_store::{Classify, ErrorKind};
use std::path::{Path, PathBuf};

/// An error of an agent adapter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A hook document is not what the agent sends.
    #[error("the hook document on stdin is not what {agent} sends: {reason}")]
    HookDocument {
        /// The agent.
        agent: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The agent's settings cannot take Cairn's hooks as they are.
    #[error("{} {reason}; fix it first, nothing was changed", path.display())]
    Settings {
        /// The settings file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A file of the agent's could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The agent's transcript does not hold what Cairn recorded of it.
    #[error("{reason} (transcript {})", path.display())]
    Transcript {
        /// The transcript.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// An entry does not say where it sits in the agent's conversation.
    #[error("{0}")]
    NoPlace(String),
    /// The agent's own interface (Codex's `codex app-server`) failed a request.
    #[error("{} app-server: {reason}", program.display())]
    AppServer {
        /// The agent's program.
        program: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::HookDocument { .. } | Error::Settings { .. } => ErrorKind::InvalidArgument,
            Error::Io { source, .. } => ErrorKind::of_io(source),
            Error::Transcript { .. } | Error::NoPlace(_) => ErrorKind::NotFound,
            Error::AppServer { .. } => ErrorKind::Io,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Settings { path, .. }
            | Error::Io { path, .. }
            | Error::Transcript { path, .. }
            | Error::AppServer { program: path, .. } => Some(path),
            Error::HookDocument { .. } | Error::NoPlace(_) => None,
        }
    }
}

/// The result of the agent adapters.
pub type Result<T, E = Error> = std::result::Result<T, E>;
