//! What a snapshotting process does with the watcher of its workspace: finds its socket, asks
//! it within bounds ([`ANSWER_WITHIN`]), waits while it says it works on the request, and
//! when it does not answer, walks by itself and says why.

use super::lock;
#[cfg(doc)]
use super::protocol::BEAT;
use super::protocol::{
    recv, send, socket_path, with_short_path, DaemonStatus, Request, Response, RestoreRequest,
    Target, TIMEOUT,
};
use crate::error::{Error, Result};
use cairn_snapshot::{ChangeSource, Changes, Options as SnapshotOptions, Snapshot, Token};
use cairn_store::Store;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a client waits for a connection, and then for each sign of life of the daemon
/// (`Response::Working`, sent at once and every [`BEAT`], or the answer), before it walks by
/// itself (issue 53): a daemon stopped or stuck costs a client this much, well within Claude
/// Code's 60 s hook timeout.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// How often a client that has heard nothing from the daemon looks whether its process is
/// stopped (from the lock's holder and `/proc`), to walk at once rather than at
/// [`ANSWER_WITHIN`].
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// How long at most a client waits for a snapshot the daemon takes for it while the daemon
/// keeps saying it works on it: as long as a first walk of a large tree may take. Past it (a
/// daemon alive but stuck), the client takes the snapshot itself. A daemon that dies closes
/// the connection, and one that says nothing for [`ANSWER_WITHIN`] is left: the client walks.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether this process may use a daemon (`CAIRN_WATCH=off` says no).
pub fn daemon_allowed() -> bool {
    !matches!(
        std::env::var("CAIRN_WATCH").as_deref(),
        Ok("off" | "0" | "no" | "false")
    )
}

/// The socket of the daemon of workspace `id` in `store` when one may be used (`CAIRN_WATCH`
/// is not `off`) and the socket exists; whether anyone still listens on it is for a
/// connection to tell.
pub(crate) fn socket_in_use(store: &Store, id: &str) -> Option<PathBuf> {
    if !daemon_allowed() {
        return None;
    }
    let socket = socket_path(store, id).ok()?;
    std::fs::symlink_metadata(&socket).is_ok().then_some(socket)
}

/// Whether a daemon listens on the socket at `path` (it may be too busy to answer a status
/// in time: listening is what tells a live daemon from a dead one's socket).
pub fn listening(path: &Path) -> bool {
    connect(path).is_ok()
}

/// Connects to the socket at `path`: by a short `/proc/self/fd/N/...` name when the path is
/// longer than a socket address holds. Within [`ANSWER_WITHIN`] (`SO_SNDTIMEO` bounds a Unix
/// socket's `connect`): a daemon that does not accept, its queue of connections full, fails
/// it with `TimedOut`.
pub(crate) fn connect(path: &Path) -> std::io::Result<UnixStream> {
    use rustix::net::{sockopt, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    with_short_path(path, |p| {
        // `SOCK_CLOEXEC` is not on every system (macOS): there, `FD_CLOEXEC` set after.
        #[cfg(target_os = "linux")]
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        #[cfg(not(target_os = "linux"))]
        let fd = {
            let fd = rustix::net::socket_with(
                AddressFamily::UNIX,
                SocketType::STREAM,
                SocketFlags::empty(),
                None,
            )?;
            rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC)?;
            fd
        };
        sockopt::set_socket_timeout(&fd, sockopt::Timeout::Send, Some(ANSWER_WITHIN))?;
        match rustix::net::connect(&fd, &SocketAddrUnix::new(p)?) {
            Ok(()) => Ok(UnixStream::from(fd)),
            Err(rustix::io::Errno::AGAIN) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no connection within {} s (its queue of connections is full: the watcher \
                     process is stopped or stuck)",
                    ANSWER_WITHIN.as_secs()
                ),
            )),
            Err(e) => Err(e.into()),
        }
    })
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum NoAnswer {
    /// Nobody listens: no socket, or a dead watcher's.
    Nobody,
    /// Somebody listens but said nothing for [`ANSWER_WITHIN`] (stopped, or stuck), or
    /// failed otherwise (closed the connection, spoke another protocol): why.
    Silent(String),
}

impl NoAnswer {
    fn of(e: std::io::Error) -> NoAnswer {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::NotFound | K::ConnectionRefused => NoAnswer::Nobody,
            K::WouldBlock => NoAnswer::Silent(format!(
                "no answer within {} s (the watcher process is stopped or stuck)",
                ANSWER_WITHIN.as_secs()
            )),
            K::TimedOut => NoAnswer::Silent(e.to_string()),
            _ => NoAnswer::Silent(e.to_string()),
        }
    }
}

/// One request, one answer: the daemon says `Working` at once and then every [`BEAT`]
/// until it answers; each sign of life is awaited for [`ANSWER_WITHIN`] (less when the
/// watcher's process is seen stopped: looked at every [`LOOK_EVERY`] of silence), the answer
/// for `total` at most.
pub(crate) fn ask(
    path: &Path,
    req: &Request,
    total: Duration,
) -> std::result::Result<Response, NoAnswer> {
    use std::io::{Error as IoError, ErrorKind};
    let mut s = connect(path).map_err(NoAnswer::of)?;
    let asked = std::time::Instant::now();
    let lock = lock::lock_path(path);
    let mut frames = || -> std::io::Result<Response> {
        s.set_write_timeout(Some(ANSWER_WITHIN))?;
        send(&mut s, req)?;
        let mut heard = std::time::Instant::now();
        loop {
            let left = total.saturating_sub(asked.elapsed());
            if left.is_zero() {
                return Err(IoError::new(
                    ErrorKind::TimedOut,
                    format!(
                        "working, but no answer within {} s (the watcher process is stuck)",
                        total.as_secs()
                    ),
                ));
            }
            let silent = heard.elapsed();
            if silent >= ANSWER_WITHIN {
                return Err(ErrorKind::WouldBlock.into());
            }
            if silent >= LOOK_EVERY {
                if let Some(pid) = lock::stopped_holder(&lock) {
                    return Err(IoError::new(
                        ErrorKind::TimedOut,
                        format!(
                            "its process {pid} is stopped (SIGSTOP, or Ctrl-Z in its terminal)"
                        ),
                    ));
                }
            }
            if !readable(&s, LOOK_EVERY.min(ANSWER_WITHIN - silent).min(left)) {
                continue;
            }
            s.set_read_timeout(Some(ANSWER_WITHIN.min(left)))?;
            match recv(&mut s)? {
                Response::Working => heard = std::time::Instant::now(),
                answer => return Ok(answer),
            }
        }
    };
    frames().map_err(|e| match NoAnswer::of(e) {
        // Connected, then refused or closed: it listens, but did not answer.
        NoAnswer::Nobody => NoAnswer::Silent("the connection was refused".into()),
        silent => silent,
    })
}

/// Whether `stream` has something to read (or was closed) within `within`.
fn readable(stream: &UnixStream, within: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(stream, PollFlags::IN)];
    let timeout = rustix::event::Timespec {
        tv_sec: within.as_secs() as i64,
        tv_nsec: i64::from(within.subsec_nanos()),
    };
    poll(&mut fds, Some(&timeout)).is_ok_and(|n| n > 0)
}

/// A daemon's answers to the snapshots of this process: its [`ChangeSource`].
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    /// Why the daemon is not asked: it did not answer this process already.
    silent: Option<String>,
}

impl Client {
    /// The client of the daemon listening at `socket`.
    pub fn new(socket: PathBuf) -> Client {
        Client {
            socket,
            silent: None,
        }
    }
}

impl ChangeSource for Client {
    fn changes_since(&self, since: Option<Token>) -> std::result::Result<Changes, String> {
        if let Some(why) = &self.silent {
            return Err(format!("{}: {why}", self.socket.display()));
        }
        match ask(&self.socket, &Request::Changes { since }, TIMEOUT) {
            Ok(Response::Changes(c)) => Ok(c),
            Ok(other) => Err(format!("unexpected answer {other:?}")),
            Err(NoAnswer::Nobody) => Err(format!("{}: nobody listens", self.socket.display())),
            Err(NoAnswer::Silent(why)) => Err(format!("{}: {why}", self.socket.display())),
        }
    }
}

/// What the daemon of workspace `id` in `store` says of itself; `None` when none answers.
pub fn status(store: &Store, id: &str) -> Result<Option<DaemonStatus>> {
    Ok(match find(store, id)? {
        Found::Running(st) => Some(*st),
        Found::None | Found::Silent { .. } => None,
    })
}

/// The watcher of a workspace, as [`find`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// None runs.
    None,
    /// One runs and answered with its account.
    Running(Box<DaemonStatus>),
    /// A process holds the workspace's watcher lock but did not answer (stopped, with
    /// SIGSTOP or Ctrl-Z, or stuck): snapshots walk meanwhile (issue 53).
    Silent {
        /// Its process id, when it can be told.
        pid: Option<u32>,
        /// Why it is taken for silent.
        why: String,
    },
}

/// Finds the watcher of workspace `id` in `store`: asks it for its account, and when it does
/// not answer, looks for the process holding its lock.
pub fn find(store: &Store, id: &str) -> Result<Found> {
    let socket = socket_path(store, id)?;
    let why = match ask(&socket, &Request::Status, TIMEOUT) {
        Ok(Response::Status(s)) => return Ok(Found::Running(s)),
        Ok(other) => {
            return Err(Error::InvalidArgument(format!(
                "the watcher at {} answered {other:?} to a status request",
                socket.display()
            )))
        }
        Err(NoAnswer::Nobody) => {
            // A watcher starting (it has its lock, not yet its socket) is taken for none; a
            // stopped one whose socket was removed is not.
            let pid = lock::holder(&lock::lock_path(&socket))?.filter(|&p| lock::stopped(p));
            return Ok(match pid {
                Some(pid) => Found::Silent {
                    pid: Some(pid),
                    why: "stopped, and nothing listens on its socket".into(),
                },
                None => Found::None,
            });
        }
        Err(NoAnswer::Silent(why)) => why,
    };
    let lock = lock::lock_path(&socket);
    if !lock::held(&lock)? {
        // A socket somebody listens on without the lock: a watcher of an older build.
        return Ok(Found::None);
    }
    Ok(Found::Silent {
        pid: lock::holder(&lock)?,
        why,
    })
}

/// Ends the watcher of workspace `id` in `store`, process `pid`, which does not answer (see
/// [`Found::Silent`]): kills it with SIGKILL (its state is safe to kill at any point: its
/// snapshots are written as any process's, and the kernel drops its lock) and removes the
/// socket it leaves. Refused for this very process.
pub fn kill_silent(store: &Store, id: &str, pid: u32) -> Result<()> {
    let socket = socket_path(store, id)?;
    if let Some(_held) = lock::kill(pid, &lock::lock_path(&socket))? {
        let _ = std::fs::remove_file(&socket);
    }
    Ok(())
}

/// Waits up to `within` for the watcher of workspace `id` in `store` to end (its lock
/// free): whether it did.
pub fn wait_gone(store: &Store, id: &str, within: Duration) -> Result<bool> {
    let lock = lock::lock_path(&socket_path(store, id)?);
    let started = std::time::Instant::now();
    while lock::held(&lock)? {
        if started.elapsed() >= within {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(true)
}

/// Whether a watcher of workspace `id` in `store` runs, answering or not (its lock is held).
pub fn runs(store: &Store, id: &str) -> Result<bool> {
    lock::held(&lock::lock_path(&socket_path(store, id)?))
}

/// How a delegation went.
pub(crate) enum Delegated {
    /// The daemon took it.
    Taken(Box<Snapshot>),
    /// A daemon runs but does not take it: ask it what changed instead.
    Ask(Client),
    /// No daemon.
    None,
}

/// Has the daemon listening at `socket` take the snapshot of `target` that `options`
/// describe, as they are (`take`; else, or when it refuses, only its client is returned).
pub(crate) fn delegate(
    socket: PathBuf,
    target: Target,
    options: &SnapshotOptions,
    take: bool,
) -> Delegated {
    if !take {
        return Delegated::Ask(Client::new(socket));
    }
    let req = Request::Snapshot {
        of: Box::new(target),
        options: Box::new(options.clone()),
    };
    match ask(&socket, &req, SNAPSHOT_TIMEOUT) {
        Ok(Response::Snapshot(snapshot)) => Delegated::Taken(snapshot),
        Ok(_) => Delegated::Ask(Client::new(socket)),
        Err(NoAnswer::Nobody) => Delegated::None,
        // Not asked again: the walk says why it walked whole.
        Err(NoAnswer::Silent(why)) => Delegated::Ask(Client {
            socket,
            silent: Some(why),
        }),
    }
}

/// How long at most a client waits for a restore the daemon carries out for it while the
/// daemon keeps saying it works on it: a full restore of a large tree takes minutes. Past it,
/// the client restores itself (and meets `BUSY` while the daemon's restore holds the lock).
const RESTORE_TIMEOUT: Duration = Duration::from_secs(3600);

/// How a restore handed to the daemon went.
pub(crate) enum Restored {
    /// Carried out: its report.
    Done(Box<crate::Report>),
    /// Carried out, and failed there: the daemon's error.
    Failed(Error),
    /// Not carried out by the daemon: refused (another workspace, files kept out it does not
    /// keep out) or unanswered. The caller restores itself, with this client as its walk's
    /// watcher (one that found the daemon silent asks it nothing more): a restore the daemon
    /// began and did not answer holds the workspace's restore lock while it runs (the caller
    /// meets `BUSY`) and its journal after it (the caller finishes it first), so nothing is
    /// done twice over and nothing is left half done.
    NotDone(Client),
}

/// Hands the restore `req` to the daemon on `socket`.
pub(crate) fn restore(socket: PathBuf, req: RestoreRequest) -> Restored {
    match ask(&socket, &Request::Restore(Box::new(req)), RESTORE_TIMEOUT) {
        Ok(Response::Restored(json)) => match serde_json::from_str(&json) {
            Ok(report) => Restored::Done(Box::new(report)),
            // Carried out, but its report does not read: the error says what to look at.
            Err(e) => Restored::Failed(Error::Watcher {
                kind: cairn_store::ErrorKind::Corrupt,
                message: format!(
                    "the watcher at {} restored, but its report does not read ({e}); `cairn \
                     list` lists the safety snapshot it took",
                    socket.display()
                ),
                path: Some(socket.clone()),
            }),
        },
        Ok(Response::Failed(f)) => Restored::Failed(Error::Watcher {
            kind: f.kind,
            message: f.message,
            path: f.path.map(|p| {
                use std::os::unix::ffi::OsStringExt;
                PathBuf::from(std::ffi::OsString::from_vec(p))
            }),
        }),
        Ok(_) | Err(NoAnswer::Nobody) => Restored::NotDone(Client::new(socket)),
        Err(NoAnswer::Silent(why)) => Restored::NotDone(Client {
            socket,
            silent: Some(why),
        }),
    }
}
