//! The watcher of a workspace, shared by every Cairn process that snapshots it (issue 23).
//!
//! `cairn watch` runs a [`cairn_snapshot::Watcher`] in a process of its own and answers on a
//! Unix socket in the store (`<store>/workspaces/<id>/watch.sock`), one request per
//! connection, each a length-prefixed postcard message:
//!
//! - `Changes { since }`: what changed since a token (see [`cairn_snapshot::watch`]); a
//!   snapshot in another process walks only that ([`Client`] is that process's
//!   [`ChangeSource`]);
//! - `Snapshot(..)`: the daemon takes the snapshot itself, with the stat cache it keeps in
//!   memory, and answers with it. [`Workspace::snapshot`] sends this first, when nothing
//!   binds the snapshot to the calling process (no cancel token, no progress callback): a
//!   short-lived process (the command line, a hook) then neither reads nor writes the stat
//!   cache file, which costs more than the snapshot itself on a large tree. A daemon that
//!   serves another store, root or workspace id, or another remote setting, refuses, and the
//!   caller asks `Changes` instead and walks what it is told;
//! - `Restore(..)`: the daemon carries out a restore for the asking process (see
//!   `Workspace::restore`), with the same plan, journal, safety snapshot and checks, and
//!   answers with its report or its error; it refuses one of another workspace, one whose
//!   handle keeps out a file the daemon does not, and one from a process of another user or
//!   group;
//! - `Status`: what `cairn watch --status` shows ([`DaemonStatus`]).
//!
//! No daemon (no socket, or a socket nobody listens on): the snapshot walks, as without a
//! watcher. `CAIRN_WATCH=off` in the environment makes a process ignore any daemon.
//! `Workspace::watch` runs the same watcher inside the calling process instead.
//!
//! A daemon that does not answer (stopped with SIGSTOP or Ctrl-Z, or stuck) holds no client
//! past [`ANSWER_WITHIN`] (issue 53): the connection is made within it, the daemon says it
//! works on a request at once and again every `BEAT` (250 ms) until it answers, and a client that
//! hears nothing for that long walks by itself, saying why in the snapshot's
//! `walk.reason`. One daemon per workspace is decided by a lock beside the socket:
//! `cairn watch --stop` and a new `cairn watch` find a daemon that does not answer by it, and
//! kill it.
//!
//! The daemon ([`serve`]) is here, above the workspace it serves; the socket's protocol, its
//! lock and the client's side are below the workspace (the crate's `watch_socket` module,
//! whose public items this module re-exports), so neither imports the other in a circle.

mod daemon;

pub use crate::watch_socket::client::{
    daemon_allowed, find, kill_silent, listening, runs, status, wait_gone, Client, Found,
    ANSWER_WITHIN,
};
pub use crate::watch_socket::protocol::{socket_path, DaemonStatus, SOCKET_NAME};
#[cfg(feature = "test-hooks")]
pub use daemon::dying;
pub use daemon::{serve, ServeEnd};

#[cfg(doc)]
use crate::workspace::Workspace;
#[cfg(doc)]
use cairn_snapshot::ChangeSource;
