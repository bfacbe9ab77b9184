//! One watcher per workspace, decided by a lock (issue 53): `watch.lock` beside the socket,
//! `flock`ed exclusively by the daemon for its whole life and holding its process id (text,
//! one line). The kernel drops the lock when the daemon dies, however it dies, so a lock
//! held is a daemon alive (perhaps stopped, or stuck); its process id is what `cairn watch
//! --stop` and a new `cairn watch` kill when it does not answer. The file is never removed:
//! a lock file unlinked while another process waits on it would let two holders in.

use crate::error::{Error, Result};
use cairn_store::fsutil::{HeldLock, LockMode};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file's name, beside the socket.
pub(crate) const LOCK_NAME: &str = "watch.lock";

/// The lock file beside the socket `socket`.
pub(crate) fn lock_path(socket: &Path) -> PathBuf {
    socket.with_file_name(LOCK_NAME)
}

fn open(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(cairn_store::fsutil::FILE_MODE)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| Error::io("open the watcher's lock", path, e))
}

/// Takes the lock at `path` without waiting and writes this process's id in it: `None` when
/// another process holds it.
pub(crate) fn try_take(path: &Path) -> Result<Option<HeldLock>> {
    let Some(held) = HeldLock::take(open(path)?, LockMode::Exclusive, false, path)? else {
        return Ok(None);
    };
    let mut f = held.file();
    let written = f
        .set_len(0)
        .and_then(|()| f.rewind())
        .and_then(|()| writeln!(f, "{}", std::process::id()));
    written.map_err(|e| Error::io("write the watcher's process id to", path, e))?;
    Ok(Some(held))
}

/// Whether a process holds the lock at `path` (a daemon, or one starting).
pub(crate) fn held(path: &Path) -> Result<bool> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(false);
    }
    Ok(try_take_quietly(path)?.is_none())
}

/// The lock, taken only to see that it is free (and dropped at once): no process id written.
fn try_take_quietly(path: &Path) -> Result<Option<HeldLock>> {
    Ok(HeldLock::take(
        open(path)?,
        LockMode::Exclusive,
        false,
        path,
    )?)
}

/// The process that holds the lock at `path`: the id written in it, once that process is seen
/// to have the file open (a holder that has just taken the lock may not have written its id
/// yet, and the id left there may by now be another process's). `None`: the lock is free,
/// or its holder cannot be told.
pub(crate) fn holder(path: &Path) -> Result<Option<u32>> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if !held(path)? {
            return Ok(None);
        }
        let mut text = String::new();
        let _ = open(path)?.read_to_string(&mut text);
        if let Ok(pid) = text.trim().parse::<u32>() {
            if has_open(pid, path) {
                return Ok(Some(pid));
            }
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` has the file at `path` open.
fn has_open(pid: u32, path: &Path) -> bool {
    let Ok(want) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino())
    })
}

/// Whether process `pid` is stopped (by SIGSTOP, or Ctrl-Z in its terminal), from
/// `/proc/<pid>/stat`.
pub(crate) fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string))
        })
        .is_some_and(|state| state == "T" || state == "t")
}

/// The process holding the lock at `path` when it is stopped (see [`stopped`]): a client
/// waiting for its answer walks at once. Quick, no waiting: a holder not yet known is not.
pub(crate) fn stopped_holder(path: &Path) -> Option<u32> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    let pid = text.trim().parse::<u32>().ok()?;
    (stopped(pid) && has_open(pid, path) && held(path).unwrap_or(false)).then_some(pid)
}

/// Kills process `pid` (SIGKILL, which also ends a stopped process), never this one, and
/// waits until the lock at `path` is free (the kernel drops it as the process dies): the lock,
/// taken, or `None` when another watcher took it first.
pub(crate) fn kill(pid: u32, path: &Path) -> Result<Option<HeldLock>> {
    if pid == std::process::id() {
        return Err(Error::Busy {
            detail: format!(
                "the watcher holding {} is this very process (pid {pid}); it is not killed",
                path.display()
            ),
        });
    }
    let raw = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let Some(target) = raw else {
        return Err(Error::InvalidArgument(format!(
            "{} names process {pid}, which is no process id",
            path.display()
        )));
    };
    match rustix::process::kill_process(target, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => {
            return Err(Error::Busy {
                detail: format!(
                    "the watcher (process {pid}) does not answer and cannot be killed: {e}; \
                     kill it yourself (`kill -9 {pid}`)"
                ),
            })
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(taken) = try_take(path)? {
            return Ok(Some(taken));
        }
        // Another watcher may have taken it as soon as it was free.
        if holder(path)?.is_some_and(|p| p != pid) || Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
