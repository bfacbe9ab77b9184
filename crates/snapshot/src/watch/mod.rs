//! Watching a workspace with inotify, so that a snapshot reads only the directories that
//! changed (issue 23).
//!
//! A [`Watcher`] puts an inotify watch on every directory of the workspace (never following
//! a symlink, leaving out the default excludes and the store) and keeps, for each directory
//! whose entries changed, the sequence number of the token after which it changed. A snapshot
//! asks it "what changed since token T" ([`ChangeSource::changes_since`], T being the token
//! the stat cache was last confirmed with) and gets a new token and a [`Scope`]: the
//! directories to list again, the subtrees to walk whole (made or moved in since, or not
//! watched), or the whole tree with the reason. Every other directory keeps its stat-cache
//! record and its tree without a system call.
//!
//! **Why this never misses what a walk sees.** The kernel queues an inotify event inside the
//! system call that makes the change, so once a change has returned, a read of the queue
//! finds it. Each token is issued only after the queue was drained, and the snapshot that
//! gets it walks only after that: a change made before the drain is seen by that walk, a
//! change made after it is an event the next query reports. Whenever that chain breaks, the
//! answer is a full (or partial) walk with the reason:
//!
//! - the queue overflowed (`IN_Q_OVERFLOW`): events were lost, so every token issued before
//!   is refused and the watches are set up again from scratch;
//! - a watch could not be added (`max_user_watches` reached, or [`WatchOptions::max_watches`]):
//!   that subtree is walked by every snapshot;
//! - a directory was made or moved in: its subtree is walked whole once (files made in it
//!   before its watch was added have no event);
//! - the token names another watcher (one restarted), is older than what is remembered, or
//!   there is none: a full walk;
//! - the root was moved or deleted: a full walk (and a daemon stops);
//! - a file system was mounted or unmounted beneath the root, or a bind mount made or undone
//!   (issue 53): what the path holds changed with no event in the directory above it. The
//!   watcher keeps the mounts beneath the root from `/proc/self/mountinfo`, whose descriptor
//!   `poll` reports (`POLLPRI`) after each change of the mount table; each mount point whose
//!   mounts changed is walked whole once and watched as it is now. The table is the mount
//!   namespace of the watcher's process: a `cairn watch` daemon sees its own (a snapshot walked
//!   in another namespace, as a container may have, sees mounts of that one the daemon does
//!   not). A directory holding a file bind mount is walked by every snapshot (a write through
//!   the file's source makes its event in the source's directory).
//!
//! A directory reachable by two paths (a bind mount of a directory of the tree elsewhere in
//! it) has one watch, whose events are reported under every path it is watched by.
//!
//! Directories whose entries changed within [`RACY_WINDOW_NS`] before the token's time are
//! reported again, so a file recorded in its racy window is looked at by the next snapshot
//! too, as without a watcher.
//!
//! Known limits, as for Git's fsmonitor and Watchman: a write through a shared `mmap` and a
//! write through a hard link from outside the workspace make no event in its directories. A
//! walk finds a hard-linked file changed by its `lstat`; so a directory holding a file with
//! more than one link is never vouched for by the stat cache and is listed by every snapshot,
//! watched or not (see the `walk` module).
//!
//! **Elsewhere than Linux** there is no inotify: [`Watcher::start`] refuses, and every
//! snapshot walks the tree (correct, slower), as on a file system inotify cannot watch.

use crate::statcache::RACY_WINDOW_NS;
use rustix::fd::OwnedFd;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
#[cfg(target_os = "linux")]
use {
    cairn_store::relpath::join,
    parking_lot::Mutex,
    rustix::fd::AsFd,
    rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags},
    rustix::fs::RawDir,
    rustix::io::Errno,
    std::collections::{BTreeMap, BTreeSet},
    std::mem::MaybeUninit,
    std::os::unix::ffi::OsStrExt,
    std::sync::atomic::{AtomicBool, Ordering},
};

#[cfg(target_os = "linux")]
mod mounts;
mod partial;
#[cfg(target_os = "linux")]
mod state;

#[cfg(target_os = "linux")]
use mounts::{mounts_under, open_mountinfo, unwatchable, Mounts, MOUNTINFO};
pub(crate) use partial::Partial;
#[cfg(target_os = "linux")]
use state::State;

/// What a snapshot confirmed its stat cache with: the watcher that issued it and the
/// sequence number of the query. Stored in the stat cache's header (version 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Token {
    /// The watcher: random per watcher (a restarted one has another).
    pub instance: [u8; 16],
    /// The query's number, increasing within the watcher.
    pub seq: u64,
}

/// What a snapshot must walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scope {
    /// The whole tree, and why.
    Full(String),
    /// Only these (an empty scope: nothing changed).
    Partial {
        /// Directories (relative to the root, empty for the root) whose entries changed: each
        /// is listed again and its entries `lstat`ed, unless `names` says which entries.
        dirs: Vec<Vec<u8>>,
        /// For directories of `dirs` whose changed entries are all known by name (the
        /// events named them): those names, sorted. Only they are `lstat`ed; every other entry
        /// keeps its stat-cache record. A directory of `dirs` not here is listed whole.
        names: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
        /// Subtrees walked whole: made or moved in since, or not watched.
        subtrees: Vec<Vec<u8>>,
        /// Why part of the tree is walked every time (directories not watched), if it is.
        note: Option<String>,
    },
}

/// The answer to [`ChangeSource::changes_since`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    /// The token to confirm the stat cache with after this snapshot.
    pub token: Token,
    /// What changed since the token asked about.
    pub scope: Scope,
}

/// Something that tells what changed in a workspace since a token: a [`Watcher`] in this
/// process, or the `cairn watch` daemon over its socket (`cairn_restore::watch`).
pub trait ChangeSource: Send + Sync + std::fmt::Debug {
    /// Drains what is pending and says what changed since `since` (`None`: no earlier token).
    /// An error (the daemon gone, a broken answer) makes the snapshot walk, with the error
    /// as its reason.
    fn changes_since(&self, since: Option<Token>) -> Result<Changes, String>;
}

/// How a watcher is set up.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// At most this many watches (below the kernel's `max_user_watches`, which also stops
    /// it): directories past it are walked by every snapshot. `None`: only the kernel's limit.
    pub max_watches: Option<usize>,
    /// Directories never watched nor walked into (the store, Cairn's data directory), by
    /// path; they are told apart by device and inode.
    pub skip_dirs: Vec<PathBuf>,
    /// Read events on a thread of the watcher's own as they come (the default). Off, events
    /// are read only when a snapshot asks, and the kernel's queue may overflow in between
    /// (tests use it to force an overflow).
    pub background: bool,
    /// Directories changed within this long before a token was issued are reported again to
    /// the query after it (default: the stat cache's racy window, [`RACY_WINDOW_NS`]), so a
    /// file recorded within its racy window is looked at once more, as a walk would. Events
    /// alone already say every change (see the module documentation); tests set it to zero
    /// to check that they do.
    pub racy_window: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            max_watches: None,
            skip_dirs: Vec::new(),
            background: true,
            racy_window: Duration::from_nanos(RACY_WINDOW_NS as u64),
        }
    }
}

/// What a watcher says of itself (`cairn watch --status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchStatus {
    /// The workspace root watched (as text: a byte that is not UTF-8 shows as U+FFFD).
    pub root: String,
    /// Directories watched.
    pub watches: u64,
    /// Subtrees not watched (walked by every snapshot), and why, by path: those inotify
    /// cannot watch, and those mounts make walked (a directory holding a file bind mount).
    pub unwatched: Vec<String>,
    /// Directories remembered as changed.
    pub changed: u64,
    /// Times the kernel's queue overflowed (each refused the tokens before it).
    pub overflows: u64,
    /// Queries answered.
    pub queries: u64,
    /// Whether the root was moved or deleted (the watcher is of no more use).
    pub gone: bool,
    /// Bytes the watcher's own tables take, about (paths and marks).
    pub table_bytes: u64,
}

#[cfg(target_os = "linux")]
/// When a directory's entries last changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    /// The token after which it changed: reported to every query since an earlier one.
    seq: u64,
    /// When the change was read.
    at: Instant,
}

#[cfg(target_os = "linux")]
impl Mark {
    /// A mark that a query reports whenever it reports `self` or `other` (a later token and
    /// a later time: whether a query reports a mark grows with both).
    fn max(self, other: Mark) -> Mark {
        Mark {
            seq: self.seq.max(other.seq),
            at: self.at.max(other.at),
        }
    }

    /// Widens `slot` to cover `self` too (see [`Mark::max`]).
    fn widen(self, slot: &mut Option<Mark>) {
        *slot = Some(slot.map_or(self, |s| s.max(self)));
    }
}

#[cfg(target_os = "linux")]
/// What changed in one directory: when, and which entries by name.
#[derive(Debug, Clone)]
struct DirMarks {
    /// The latest change.
    last: Mark,
    /// The entries changed, each with its latest change.
    names: HashMap<Vec<u8>, Mark>,
    /// A change whose name is not in `names` (an event without a name, or names forgotten to
    /// keep the table small): a query that reports it lists the directory whole.
    unnamed: Option<Mark>,
}

#[cfg(target_os = "linux")]
/// So many names are remembered per directory; past it, those that the latest token no
/// longer reports are forgotten (into [`DirMarks::unnamed`]), and if that is not enough,
/// all of them. Listing a directory with this many changes costs about as much as
/// `lstat`ing them.
const MAX_NAMES: usize = 64;

#[cfg(target_os = "linux")]
/// So many marks and the oldest tokens are forgotten (they get a full walk).
const MAX_MARKS: usize = 1 << 18;
#[cfg(target_os = "linux")]
/// Issue times kept for so many tokens (an older one's time is taken as unknown).
const MAX_TOKEN_TIMES: usize = 1 << 12;

#[cfg(target_os = "linux")]
const WATCH_FLAGS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::EXCL_UNLINK);

#[cfg(target_os = "linux")]
/// `rel`'s parent directory and name (the parent of a name at the root is `""`).
fn split_parent(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (b"", rel),
    }
}

#[cfg(target_os = "linux")]
/// Watches a workspace: see the module documentation.
pub struct Watcher {
    state: Arc<Mutex<State>>,
    instance: [u8; 16],
    stop: Arc<AtomicBool>,
    /// Written to wake the thread when the watcher is dropped, so it ends at once.
    wake: Option<Arc<OwnedFd>>,
    /// The state's [`State::read_events`], handed out without taking the state's lock.
    read_events: Option<Arc<OwnedFd>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(target_os = "linux")]
impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        f.debug_struct("Watcher")
            .field("root", &s.root)
            .field("watches", &s.wds.len())
            .finish_non_exhaustive()
    }
}

#[cfg(target_os = "linux")]
fn new_instance() -> [u8; 16] {
    let mut h = cairn_store::Hasher::new();
    h.update(b"cairn watcher\0");
    h.update(&std::process::id().to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.update(&now.to_le_bytes());
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    h.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    if let Ok(b) = std::fs::read("/proc/sys/kernel/random/uuid") {
        h.update(&b);
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finish().0[..16]);
    out
}

#[cfg(target_os = "linux")]
fn dev_ino(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

#[cfg(target_os = "linux")]
impl Watcher {
    /// Starts watching the workspace at `root`: a watch on every directory (which takes a
    /// walk of the directories), then, with [`WatchOptions::background`], a thread that reads
    /// events as they come. Refused when the root is on a file system inotify cannot watch
    /// (NFS, SMB, FUSE, ...): snapshots of it walk.
    pub fn start(root: &Path, options: &WatchOptions) -> crate::Result<Watcher> {
        let root = std::fs::canonicalize(root).map_err(|e| crate::Error::Root {
            path: root.to_path_buf(),
            detail: format!("cannot watch it: {e}"),
        })?;
        let (root_fd, root_st) = crate::walk::open_root(&root)?;
        if let Some(fs) = unwatchable(&root_fd) {
            return Err(crate::Error::Unwatchable { path: root, fs });
        }
        let skip = options
            .skip_dirs
            .iter()
            .filter_map(|p| {
                use std::os::unix::fs::MetadataExt;
                std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
            })
            .collect();
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)
            .map_err(|e| crate::Error::io("start inotify", &root, e.into()))?;
        let events_read = new_eventfd();
        // Opened before the table is read: a change after the reading is reported.
        let mounts = open_mountinfo().and_then(|fd| {
            let table = std::fs::read(MOUNTINFO)?;
            Ok(Mounts {
                fd,
                under: mounts_under(&table, root.as_os_str().as_bytes()),
                moved: false,
            })
        });
        let mut mount_walked = BTreeMap::new();
        if let Err(e) = &mounts {
            mount_walked.insert(
                Vec::new(),
                format!("mounts cannot be followed ({MOUNTINFO}: {e})"),
            );
        }
        let mut state = State {
            fd,
            root: root.clone(),
            root_id: dev_ino(&root_st),
            skip,
            max_watches: options.max_watches,
            racy_window: options.racy_window,
            wds: HashMap::new(),
            aliases: HashMap::new(),
            paths: BTreeMap::new(),
            seq: 0,
            floor: 1,
            floor_reason: "no earlier token".into(),
            changed: HashMap::new(),
            fresh: BTreeMap::new(),
            unwatched: BTreeMap::new(),
            mounts: mounts.ok(),
            mount_walked,
            token_times: BTreeMap::new(),
            overflowed: false,
            overflows: 0,
            generation: 0,
            gone: false,
            queries: 0,
            last_event: None,
            read_events: events_read.clone(),
        };
        state.watch_tree(b"", Some(root_fd));
        state.find_file_mounts();
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        // Without an eventfd the thread still sees `stop` within its poll's timeout.
        let wake = new_eventfd();
        let thread = if options.background {
            let (state, stop, woken) = (state.clone(), stop.clone(), wake.clone());
            // The thread's own: each open of the table is told of a change once.
            let mounts = open_mountinfo().ok();
            Some(
                std::thread::Builder::new()
                    .name("cairn-watch".into())
                    .spawn(move || read_events(&state, &stop, woken.as_deref(), mounts))
                    .map_err(|e| crate::Error::io("start the watcher thread", &root, e))?,
            )
        } else {
            None
        };
        Ok(Watcher {
            state,
            instance: new_instance(),
            stop,
            wake,
            read_events: events_read,
            thread,
        })
    }

    /// What the watcher says of itself.
    pub fn status(&self) -> WatchStatus {
        let mut s = self.state.lock();
        s.drain();
        s.status()
    }

    /// Whether the root was moved or deleted: nothing more to watch.
    pub fn is_gone(&self) -> bool {
        let mut s = self.state.lock();
        s.drain();
        s.gone
    }

    /// When it last read an event (any change in the workspace, or an overflow); `None`
    /// before the first. Reads what is pending first.
    pub fn last_event(&self) -> Option<Instant> {
        let mut s = self.state.lock();
        s.drain();
        s.last_event
    }

    /// Times the kernel's queue overflowed since the watcher started (each refused the tokens
    /// before it). Reads what is pending first.
    pub fn overflows(&self) -> u64 {
        let mut s = self.state.lock();
        s.drain();
        s.overflows + u64::from(s.overflowed)
    }

    /// How long before a token a directory's change is reported again to the query after it
    /// ([`WatchOptions::racy_window`]): a snapshot walked ahead stands in for one asked for
    /// later only when its walk began longer than this after the last change.
    pub fn racy_window(&self) -> Duration {
        self.state.lock().racy_window
    }

    /// This watcher's instance (the first half of its tokens).
    pub fn instance(&self) -> [u8; 16] {
        self.instance
    }

    /// A descriptor that becomes readable whenever the watcher has read events (an eventfd),
    /// for a loop that acts a moment after changes to poll beside its own;
    /// [`Watcher::clear_events_fd`] makes it unreadable again. `None` when no eventfd could
    /// be made.
    pub fn events_fd(&self) -> Option<Arc<OwnedFd>> {
        self.read_events.clone()
    }

    /// Makes [`Watcher::events_fd`] unreadable until the next events are read.
    pub fn clear_events_fd(&self) {
        if let Some(fd) = &self.read_events {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(fd.as_fd(), &mut count);
        }
    }
}

#[cfg(target_os = "linux")]
/// A non-blocking eventfd, or `None` where none can be made.
fn new_eventfd() -> Option<Arc<OwnedFd>> {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .ok()
    .map(Arc::new)
}

#[cfg(target_os = "linux")]
impl ChangeSource for Watcher {
    fn changes_since(&self, since: Option<Token>) -> Result<Changes, String> {
        let mut s = self.state.lock();
        s.drain();
        if s.overflowed {
            s.rebuild();
        }
        Ok(s.answer(self.instance, since))
    }
}

#[cfg(target_os = "linux")]
impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = &self.wake {
            let _ = rustix::io::write(w.as_fd(), &1u64.to_ne_bytes());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(target_os = "linux")]
/// The watcher's thread: waits for events (at most 200 ms at a time) and reads them as they
/// come, so the kernel's queue does not fill between snapshots; once a second it checks that
/// the root is still there. `wake`, when readable, means the watcher is being dropped;
/// `mounts` (the mount table, open), when it reports `POLLPRI`, that the mounts changed.
fn read_events(
    state: &Mutex<State>,
    stop: &AtomicBool,
    wake: Option<&OwnedFd>,
    mounts: Option<OwnedFd>,
) {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut watched: Option<(u64, OwnedFd)> = None;
    let mut last_root_check = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        // A rebuild replaced the descriptor: poll the new one.
        {
            let s = state.lock();
            if watched.as_ref().is_none_or(|(g, _)| *g != s.generation) {
                match rustix::io::dup(&s.fd) {
                    Ok(fd) => watched = Some((s.generation, fd)),
                    Err(_) => return,
                }
            }
        }
        let Some((_, fd)) = &watched else { return };
        let mut fds = vec![PollFd::new(fd, PollFlags::IN)];
        // Not `IN`, which the table always reports.
        if let Some(m) = &mounts {
            fds.push(PollFd::new(m, PollFlags::PRI));
        }
        if let Some(w) = wake {
            fds.push(PollFd::new(w, PollFlags::IN));
        }
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        let ready = matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
            && (fds[0].revents().contains(PollFlags::IN)
                || (mounts.is_some()
                    && fds[1].revents().intersects(PollFlags::PRI | PollFlags::ERR)));
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let mut s = state.lock();
        if ready {
            s.drain();
            if s.overflowed {
                s.rebuild();
            }
        }
        if last_root_check.elapsed() > Duration::from_secs(1) {
            last_root_check = Instant::now();
            s.check_root();
        }
    }
}

#[cfg(target_os = "linux")]
fn fd_value(fd: &OwnedFd) -> i32 {
    use rustix::fd::AsRawFd;
    fd.as_raw_fd()
}

#[cfg(target_os = "linux")]
thread_local! {
    static EVENT_BUF: std::cell::RefCell<Vec<MaybeUninit<u8>>> =
        std::cell::RefCell::new(vec![MaybeUninit::uninit(); 64 << 10]);
}

/// Elsewhere than Linux: no watcher can start (there is no inotify), so there is never one to
/// ask, and every snapshot walks. The type is uninhabited: its methods cannot be called.
#[cfg(not(target_os = "linux"))]
pub struct Watcher {
    never: std::convert::Infallible,
}

#[cfg(not(target_os = "linux"))]
impl std::fmt::Debug for Watcher {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.never {}
    }
}

#[cfg(not(target_os = "linux"))]
impl Watcher {
    /// Refused: watching needs Linux's inotify; snapshots of `root` walk the tree.
    pub fn start(root: &Path, _options: &WatchOptions) -> crate::Result<Watcher> {
        Err(crate::Error::NoWatcher {
            path: root.to_path_buf(),
        })
    }

    /// What the watcher says of itself.
    pub fn status(&self) -> WatchStatus {
        match self.never {}
    }

    /// Whether the root was moved or deleted.
    pub fn is_gone(&self) -> bool {
        match self.never {}
    }

    /// When it last read an event.
    pub fn last_event(&self) -> Option<Instant> {
        match self.never {}
    }

    /// Times the kernel's queue overflowed.
    pub fn overflows(&self) -> u64 {
        match self.never {}
    }

    /// How long before a token a directory's change is reported again.
    pub fn racy_window(&self) -> Duration {
        match self.never {}
    }

    /// This watcher's instance.
    pub fn instance(&self) -> [u8; 16] {
        match self.never {}
    }

    /// A descriptor readable whenever the watcher has read events.
    pub fn events_fd(&self) -> Option<Arc<OwnedFd>> {
        match self.never {}
    }

    /// Makes [`Watcher::events_fd`] unreadable until the next events are read.
    pub fn clear_events_fd(&self) {
        match self.never {}
    }
}

#[cfg(not(target_os = "linux"))]
impl ChangeSource for Watcher {
    fn changes_since(&self, _since: Option<Token>) -> Result<Changes, String> {
        match self.never {}
    }
}

/// Whether `path` is `top` or lies beneath it (everything lies beneath the root, `""`).
pub(crate) fn is_under(path: &[u8], top: &[u8]) -> bool {
    top.is_empty()
        || path == top
        || (path.len() > top.len() && path.starts_with(top) && path[top.len()] == b'/')
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_mounts_beneath_the_root_are_read_from_mountinfo_with_its_escapes_undone() {
        // Issue 53: `/proc/self/mountinfo` writes a space in a mount point as `\040` and a
        // backslash as `\134`; a sibling whose name begins with the root's is not beneath it.
        let table = b"22 1 0:21 / / rw - ext4 /dev/sda1 rw\n\
            40 22 0:40 / /home/u/ws rw - ext4 /dev/sdb1 rw\n\
            41 40 0:41 / /home/u/ws/my\\040mnt rw - tmpfs tmpfs rw\n\
            42 22 0:42 / /home/u/ws2 rw - tmpfs tmpfs rw\n\
            43 41 0:43 /sub /home/u/ws/my\\040mnt/b\\134c\\0 rw - tmpfs tmpfs rw\n";
        let got: Vec<(Vec<u8>, u64)> = mounts_under(table, b"/home/u/ws").into_iter().collect();
        assert_eq!(
            got,
            vec![
                (b"".to_vec(), 40),
                (b"my mnt".to_vec(), 41),
                (b"my mnt/b\\c\\0".to_vec(), 43)
            ]
        );
        assert_eq!(
            mounts_under(table, b"/").len(),
            5,
            "everything is beneath /"
        );
    }
}
