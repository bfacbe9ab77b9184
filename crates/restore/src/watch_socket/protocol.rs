//! The watcher's wire: the messages a client and the daemon exchange over the workspace's
//! socket, each framed as a little-endian length, the protocol's version ([`PROTOCOL`]) and a
//! postcard body; and where that socket is.

use crate::error::Result;
use cairn_snapshot::{Changes, Options as SnapshotOptions, Snapshot, Token, WatchStatus};
use cairn_store::Store;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The socket's file name, in the workspace's directory of the store.
pub const SOCKET_NAME: &str = "watch.sock";

/// The largest message read (a snapshot's answer holds its skipped and kept lists).
const MAX_MESSAGE: u32 = 256 << 20;

/// Begins every message, after its length: the protocol's version. A daemon and a client of
/// builds that speak another (a `cairn watch` left running across an upgrade) never decode
/// each other's messages as their own, which postcard could do without an error and with
/// another meaning (version 2 added the changed entries' names to `Scope::Partial`, version 3
/// the merged packs to `DaemonStatus`, version 4 `WalkInfo::ahead_ms` and the snapshots walked
/// ahead to `DaemonStatus`, version 5 the changes stored ahead to `DaemonStatus`, version 6
/// `Response::Working`, sent while the daemon works on a request, and
/// `DaemonStatus::took_over`, version 7 the snapshot's options and the snapshot as they are,
/// `cairn_snapshot::Options` and `cairn_snapshot::Snapshot`, version 8 `Request::Restore`, its
/// answers and `DaemonStatus::restores`): the message is refused, and the client walks (or
/// restores) itself.
const PROTOCOL: &[u8; 8] = b"CAIRNW\x00\x08";

/// How long a daemon waits for a request, and at most a client for an answer to `Changes`
/// or `Status` (each served on a thread of its own, never behind a snapshot).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// How often a daemon working on a request says so (`Response::Working`).
pub(crate) const BEAT: Duration = Duration::from_millis(250);

/// The socket of the watcher of workspace `id` in `store`.
pub fn socket_path(store: &Store, id: &str) -> Result<PathBuf> {
    Ok(store.workspace_dir(id)?.join(SOCKET_NAME))
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    Changes {
        since: Option<Token>,
    },
    /// A snapshot of workspace `of`, taken with `options` as the asking process's
    /// `Workspace::snapshot` settled them (the workspace's settings applied there, once).
    Snapshot {
        of: Box<Target>,
        options: Box<SnapshotOptions>,
    },
    Status,
    /// A restore of workspace `of`, carried out by the daemon (see [`RestoreRequest`]).
    Restore(Box<RestoreRequest>),
}

/// A restore the asking process's `Workspace::restore` hands to the daemon: its arguments as
/// they are, and the files the asking process keeps out of the workspace.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RestoreRequest {
    pub(crate) of: Target,
    /// The snapshot restored.
    pub(crate) snapshot: cairn_store::SnapshotId,
    /// How the restore is planned.
    pub(crate) planning: crate::PlanOptions,
    /// `ApplyOptions::key`.
    pub(crate) key: Option<String>,
    /// `Workspace::keep_out`'s files of the asking handle, as bytes: the daemon carries the
    /// restore out only when it keeps each of them out too.
    pub(crate) own_files: Vec<Vec<u8>>,
}

/// How a restore the daemon carried out failed, as the asking process reports it: the error's
/// kind, its message and its path.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) kind: cairn_store::ErrorKind,
    pub(crate) message: String,
    pub(crate) path: Option<Vec<u8>>,
}

/// Which workspace a request is for: a daemon takes snapshots only of the one it serves.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Target {
    #[serde(with = "cairn_store::relpath::os_path")]
    pub(crate) store: PathBuf,
    pub(crate) workspace_id: String,
    #[serde(with = "cairn_store::relpath::os_path")]
    pub(crate) root: PathBuf,
    /// The store caches a remote.
    pub(crate) remote: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    Changes(Changes),
    Snapshot(Box<Snapshot>),
    Status(Box<DaemonStatus>),
    /// The report of the restore it carried out, in JSON (postcard cannot carry its flattened
    /// summary).
    Restored(String),
    /// The restore it carried out failed (before any change, or stopped after they began and
    /// held by its journal, as the error says).
    Failed(Box<Failure>),
    /// Not for this daemon (another store, root, workspace or remote), or it failed: the
    /// caller does it itself.
    Refused(String),
    /// Not an answer: the daemon works on the request (sent at once, then every [`BEAT`]).
    Working,
}

/// What a running `cairn watch` says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DaemonStatus {
    /// Its process id.
    pub pid: u32,
    /// The workspace root.
    #[serde(with = "cairn_store::relpath::os_path")]
    #[cfg_attr(feature = "schema", schemars(with = "cairn_store::RelPath"))]
    pub root: PathBuf,
    /// The workspace id.
    pub workspace_id: String,
    /// The store.
    #[serde(with = "cairn_store::relpath::os_path")]
    #[cfg_attr(feature = "schema", schemars(with = "cairn_store::RelPath"))]
    pub store: PathBuf,
    /// Its socket.
    #[serde(with = "cairn_store::relpath::os_path")]
    #[cfg_attr(feature = "schema", schemars(with = "cairn_store::RelPath"))]
    pub socket: PathBuf,
    /// The watcher's own account (watches, unwatched subtrees, overflows, ...).
    pub watch: WatchStatus,
    /// Its resident memory (`VmRSS`), bytes: the watcher and the stat cache it keeps for the
    /// snapshots it takes.
    pub memory_bytes: u64,
    /// Its peak resident memory (`VmHWM`), bytes.
    pub peak_memory_bytes: u64,
    /// Processor time it used (user and system), milliseconds.
    pub cpu_ms: u64,
    /// Snapshots it took for other processes.
    pub snapshots: u64,
    /// Restores it carried out for other processes (see `Workspace::restore`), those that
    /// failed there counted too.
    pub restores: u64,
    /// Small packs it merged into larger ones while idle (see
    /// [`cairn_store::Store::merge_small_packs`]).
    pub packs_merged: u64,
    /// Why its last merge of small packs failed, if it did.
    pub merge_error: Option<String>,
    /// Snapshots it walked ahead, once the workspace had been quiet for its racy window after
    /// a change (see `cairn_snapshot::Ahead`).
    pub walked_ahead: u64,
    /// Snapshots it answered with one walked ahead, nothing having changed since (each
    /// then costs its manifest only).
    pub answered_ahead: u64,
    /// Changes whose objects it stored ahead, once the workspace had been quiet for a moment
    /// (20 ms) after them: the snapshot asked for within the racy window walks them again
    /// but finds its objects stored (see `Served::walk_ahead`).
    pub stored_ahead: u64,
    /// The process id of a watcher of the workspace that did not answer, killed as this one
    /// started in its place (issue 53).
    pub took_over: Option<u32>,
}

pub(crate) fn with_short_path<T>(
    path: &Path,
    f: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().len() < 100 {
        return f(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return f(path);
    };
    let dir = std::fs::File::open(dir)?;
    use std::os::fd::AsRawFd;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let out = f(&short);
    drop(dir);
    out
}

pub(crate) fn send<T: Serialize>(s: &mut UnixStream, msg: &T) -> std::io::Result<()> {
    let bytes = postcard::to_stdvec(msg).map_err(std::io::Error::other)?;
    let len = u32::try_from(PROTOCOL.len() + bytes.len()).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(4 + len as usize);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(PROTOCOL);
    out.extend_from_slice(&bytes);
    s.write_all(&out)
}

pub(crate) fn recv<T: serde::de::DeserializeOwned>(s: &mut UnixStream) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len > MAX_MESSAGE {
        return Err(std::io::Error::other(format!(
            "a message of {len} bytes is more than the {MAX_MESSAGE} a watcher sends"
        )));
    }
    let mut buf = vec![0u8; len as usize];
    s.read_exact(&mut buf)?;
    match buf.strip_prefix(PROTOCOL.as_slice()) {
        Some(body) => postcard::from_bytes(body).map_err(std::io::Error::other),
        None => Err(std::io::Error::other(
            "the other side speaks another version of the watcher's protocol (a `cairn watch` \
             of another build: `cairn watch --stop`, then start it again)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_goes_through_with_the_protocol_version_and_one_without_it_is_refused() {
        let (mut a, mut b) = UnixStream::pair().expect("a socket pair");
        send(&mut a, &Request::Status).expect("send");
        assert!(matches!(recv::<Request>(&mut b), Ok(Request::Status)));
        // What a build before the version prefix sent: a length and postcard.
        let old = postcard::to_stdvec(&Request::Changes { since: None }).expect("encodes");
        let mut raw = (old.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(&old);
        a.write_all(&raw).expect("write");
        let err = recv::<Request>(&mut b).expect_err("refused");
        assert!(err.to_string().contains("another version"), "{err}");
    }

    // Issue 56: a restore's plan options go over the wire as they are, a path that is not
    // UTF-8 among them.
    #[test]
    fn a_restore_request_carries_its_plan_options_as_they_are() {
        use cairn_store::RelPath;
        let req = RestoreRequest {
            of: Target {
                store: PathBuf::from("/s"),
                workspace_id: "ws-1".into(),
                root: PathBuf::from("/w"),
                remote: true,
            },
            snapshot: cairn_store::SnapshotId::from_hex(&"ab".repeat(32)).expect("an id"),
            planning: crate::PlanOptions {
                paths: vec![RelPath(b"src/a.rs".to_vec()), RelPath(b"bin/\xff".to_vec())],
                reference: Some(cairn_store::SnapshotId::from_hex(&"cd".repeat(32)).expect("id")),
                on_drift: crate::DriftPolicy::Refuse,
            },
            key: Some("k-1".into()),
            own_files: vec![b"/w/threads.db".to_vec()],
        };
        let (mut a, mut b) = UnixStream::pair().expect("a socket pair");
        send(&mut a, &Request::Restore(Box::new(req))).expect("send");
        match recv::<Request>(&mut b).expect("received") {
            Request::Restore(got) => {
                assert_eq!(got.planning.paths[1].0, b"bin/\xff");
                assert_eq!(got.planning.on_drift, crate::DriftPolicy::Refuse);
                assert_eq!(got.key.as_deref(), Some("k-1"));
                assert_eq!(got.snapshot.to_hex(), "ab".repeat(32));
                assert!(got.of.remote);
            }
            other => panic!("not a restore request: {other:?}"),
        }
    }

    // Issue 61: the snapshot's options go over the wire as they are, their metadata (a JSON
    // object, which postcard cannot carry as one) included.
    #[test]
    fn a_snapshot_request_carries_its_options_as_they_are() {
        let mut options = SnapshotOptions {
            label: Some("checkpoint".into()),
            protect: true,
            use_stat_cache: false,
            own_files: vec![PathBuf::from("/w/threads.db")],
            defer_compression: true,
            ..SnapshotOptions::default()
        };
        options.metadata.insert(
            "tool".into(),
            serde_json::json!({"name": "Bash", "n": [1, 2]}),
        );
        options.capture.excludes.push("target/".into());
        let target = Target {
            store: PathBuf::from("/s"),
            workspace_id: "ws-1".into(),
            root: PathBuf::from("/w"),
            remote: false,
        };
        let (mut a, mut b) = UnixStream::pair().expect("a socket pair");
        send(
            &mut a,
            &Request::Snapshot {
                of: Box::new(target),
                options: Box::new(options.clone()),
            },
        )
        .expect("send");
        match recv::<Request>(&mut b).expect("received") {
            Request::Snapshot { of, options: got } => {
                assert_eq!(*got, options);
                assert_eq!(of.workspace_id, "ws-1");
            }
            other => panic!("not a snapshot request: {other:?}"),
        }
        // In JSON the metadata stays an object.
        let json = serde_json::to_value(&options).expect("JSON");
        assert_eq!(json["metadata"]["tool"]["name"], "Bash");
    }
}
