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
//! watched or not (see `walk.rs`).

use crate::statcache::RACY_WINDOW_NS;
use cairn_store::relpath::join;
use parking_lot::Mutex;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::RawDir;
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// When a directory's entries last changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    /// The token after which it changed: reported to every query since an earlier one.
    seq: u64,
    /// When the change was read.
    at: Instant,
}

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

/// So many names are remembered per directory; past it, those that the latest token no
/// longer reports are forgotten (into [`DirMarks::unnamed`]), and if that is not enough,
/// all of them. Listing a directory with this many changes costs about as much as
/// `lstat`ing them.
const MAX_NAMES: usize = 64;

/// So many marks and the oldest tokens are forgotten (they get a full walk).
const MAX_MARKS: usize = 1 << 18;
/// Issue times kept for so many tokens (an older one's time is taken as unknown).
const MAX_TOKEN_TIMES: usize = 1 << 12;

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

/// File systems whose changes inotify does not see (made on another machine, or by a FUSE
/// daemon): `statfs` magic numbers.
const UNWATCHABLE_FS: &[(i64, &str)] = &[
    (0x6969, "NFS"),
    (0x517B, "SMB"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
    (0x6573_5546, "FUSE"),
    (0x0102_1997, "9P"),
    (0x00C3_6400, "Ceph"),
    (0x5346_414F, "AFS"),
    (0x0BD0_0BD0, "Lustre"),
];

/// The mounts beneath the root (issue 53): see the module documentation.
struct Mounts {
    /// `/proc/self/mountinfo`, open: `poll` reports `POLLPRI` on it once after each change of
    /// the mount table since the last `poll` of this descriptor (proc(5)).
    fd: OwnedFd,
    /// The mounts at or beneath the root: the mount point relative to the root, and the
    /// mount's id (two mounts stacked on one point are two).
    under: BTreeSet<(Vec<u8>, u64)>,
    /// A directory was moved: the mount points beneath it moved with it, which changes no
    /// mount and so is not reported, and `under` is read again before it is compared.
    moved: bool,
}

/// The mount table of the calling process's mount namespace.
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// [`MOUNTINFO`], open to be polled.
fn open_mountinfo() -> std::io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::open(
        MOUNTINFO,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The mounts at or beneath `root` (a canonical path) in `table`, the text of
/// [`MOUNTINFO`]: each line's first field is the mount's id and its fifth the mount point,
/// with a space, tab, newline or backslash written as `\ooo` in octal.
fn mounts_under(table: &[u8], root: &[u8]) -> BTreeSet<(Vec<u8>, u64)> {
    table
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut fields = line.split(|&b| b == b' ');
            let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
            let point = unescape_octal(fields.nth(3)?);
            let rel = if root == b"/" {
                point.strip_prefix(b"/")?
            } else {
                match point.strip_prefix(root)? {
                    [] => &[],
                    [b'/', rest @ ..] => rest,
                    _ => return None,
                }
            };
            Some((rel.to_vec(), id))
        })
        .collect()
}

/// A field of [`MOUNTINFO`] with its `\ooo` escapes undone.
fn unescape_octal(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let digits = field
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)) && d[0] <= b'3');
        match (field[i], digits) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, b| n * 8 + (b - b'0')));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// `rel`'s parent directory and name (the parent of a name at the root is `""`).
fn split_parent(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (b"", rel),
    }
}

struct State {
    fd: OwnedFd,
    /// Written each time events are read (see [`Watcher::events_fd`]).
    read_events: Option<Arc<OwnedFd>>,
    root: PathBuf,
    /// (device, inode) of the root: a root replaced is a root gone.
    root_id: (u64, u64),
    skip: Vec<(u64, u64)>,
    max_watches: Option<usize>,
    racy_window: Duration,
    /// Watch descriptor to directory path (relative to the root).
    wds: HashMap<i32, Vec<u8>>,
    /// The other paths of a watched directory reachable by more than one (a bind mount of a
    /// directory of the tree elsewhere in it), by watch descriptor.
    aliases: HashMap<i32, Vec<Vec<u8>>>,
    /// Directory path to watch descriptor.
    paths: BTreeMap<Vec<u8>, i32>,
    /// The last token issued.
    seq: u64,
    /// Tokens below this are refused (a full walk), with the reason.
    floor: u64,
    floor_reason: String,
    /// Directories whose entries changed, by path.
    changed: HashMap<Vec<u8>, DirMarks>,
    /// Subtrees made or moved in, walked whole by queries before their mark.
    fresh: BTreeMap<Vec<u8>, Mark>,
    /// Subtrees not watched, and why.
    unwatched: BTreeMap<Vec<u8>, String>,
    /// The mounts beneath the root, `None` when [`MOUNTINFO`] could not be opened.
    mounts: Option<Mounts>,
    /// Subtrees walked by every snapshot because of mounts, and why: the directories holding
    /// a file bind mount, or the whole tree when the mount table cannot be read.
    mount_walked: BTreeMap<Vec<u8>, String>,
    token_times: BTreeMap<u64, Instant>,
    overflowed: bool,
    overflows: u64,
    /// How many times the inotify instance was replaced (after overflows).
    generation: u64,
    gone: bool,
    queries: u64,
    /// When the last event was read (an overflow included).
    last_event: Option<Instant>,
}

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

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        f.debug_struct("Watcher")
            .field("root", &s.root)
            .field("watches", &s.wds.len())
            .finish_non_exhaustive()
    }
}

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

fn dev_ino(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

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

/// A non-blocking eventfd, or `None` where none can be made.
fn new_eventfd() -> Option<Arc<OwnedFd>> {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .ok()
    .map(Arc::new)
}

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

fn fd_value(fd: &OwnedFd) -> i32 {
    use rustix::fd::AsRawFd;
    fd.as_raw_fd()
}

/// The name of the file system of `fd` when inotify cannot watch it.
fn unwatchable(fd: &OwnedFd) -> Option<&'static str> {
    let st = rustix::fs::fstatfs(fd).ok()?;
    #[allow(clippy::unnecessary_cast)]
    let kind = st.f_type as i64;
    UNWATCHABLE_FS
        .iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| *name)
}

thread_local! {
    static EVENT_BUF: std::cell::RefCell<Vec<MaybeUninit<u8>>> =
        std::cell::RefCell::new(vec![MaybeUninit::uninit(); 64 << 10]);
}

/// Whether `path` is `top` or lies beneath it (everything lies beneath the root, `""`).
pub(crate) fn is_under(path: &[u8], top: &[u8]) -> bool {
    top.is_empty()
        || path == top
        || (path.len() > top.len() && path.starts_with(top) && path[top.len()] == b'/')
}

impl State {
    fn mark(&self) -> Mark {
        Mark {
            seq: self.seq + 1,
            at: Instant::now(),
        }
    }

    fn status(&self) -> WatchStatus {
        let path_bytes: usize = self.paths.keys().map(|p| p.len() * 2 + 64).sum();
        let marks: usize = self
            .changed
            .iter()
            .map(|(p, d)| p.len() + 96 + d.names.keys().map(|n| n.len() + 56).sum::<usize>())
            .sum::<usize>()
            + self.fresh.keys().map(|p| p.len() + 48).sum::<usize>()
            + (self.aliases.values().flatten())
                .map(|p| p.len() * 2 + 64)
                .sum::<usize>();
        WatchStatus {
            root: self.root.to_string_lossy().into_owned(),
            watches: self.wds.len() as u64,
            unwatched: self
                .walked_always()
                .map(|(p, why)| format!("{}: {why}", String::from_utf8_lossy(p)))
                .collect(),
            changed: self.changed.len() as u64,
            overflows: self.overflows,
            queries: self.queries,
            gone: self.gone,
            table_bytes: (path_bytes + marks) as u64,
        }
    }

    /// Puts a watch on the directory at `rel` (open at `fd`, or opened beneath the root) and on
    /// every directory beneath it that has none, marking what it could not watch.
    fn watch_tree(&mut self, rel: &[u8], fd: Option<OwnedFd>) {
        let mut stack: Vec<(Vec<u8>, Option<OwnedFd>)> = vec![(rel.to_vec(), fd)];
        while let Some((rel, fd)) = stack.pop() {
            if self.paths.contains_key(&rel) {
                continue;
            }
            let fd = match fd {
                Some(fd) => fd,
                None => match open_beneath_root(&self.root, &rel) {
                    Ok(fd) => fd,
                    // Gone, or not a directory any more: its parent's events say so.
                    Err(_) => continue,
                },
            };
            let Ok(st) = rustix::fs::fstat(&fd) else {
                continue;
            };
            if !rel.is_empty() && self.skip.contains(&dev_ino(&st)) {
                continue;
            }
            if self.max_watches.is_some_and(|max| self.wds.len() >= max) {
                self.unwatched
                    .insert(rel, "the watch limit (WatchOptions::max_watches)".into());
                continue;
            }
            if !rel.is_empty() && st.st_dev != self.root_id.0 {
                if let Some(name) = unwatchable(&fd) {
                    self.unwatched.insert(
                        rel,
                        format!("a {name} file system, which inotify cannot watch"),
                    );
                    continue;
                }
            }
            let proc_path = format!("/proc/self/fd/{}", fd_value(&fd));
            let wd = match inotify::add_watch(&self.fd, proc_path.as_str(), WATCH_FLAGS) {
                Ok(wd) => wd,
                Err(Errno::NOSPC) => {
                    self.unwatched.insert(
                        rel,
                        "the kernel's watch limit (fs.inotify.max_user_watches)".into(),
                    );
                    continue;
                }
                Err(Errno::NOENT) | Err(Errno::NOTDIR) => continue,
                Err(e) => {
                    self.unwatched
                        .insert(rel, format!("inotify_add_watch failed: {e}"));
                    continue;
                }
            };
            // Two paths for one inode (a bind mount inside the tree): one watch, its events
            // reported under both.
            match self.wds.get(&wd) {
                Some(p) if *p != rel => self.aliases.entry(wd).or_default().push(rel.clone()),
                Some(_) => {}
                None => {
                    self.wds.insert(wd, rel.clone());
                }
            }
            self.paths.insert(rel.clone(), wd);
            // Listed after the watch is in place: a directory made after the listing has an
            // event, one made before is listed.
            let mut subdirs = Vec::new();
            EVENT_BUF.with(|cell| {
                let mut buf = cell.borrow_mut();
                let mut dir = RawDir::new(fd.as_fd(), &mut buf[..]);
                while let Some(Ok(entry)) = dir.next() {
                    let name = entry.file_name().to_bytes();
                    if name == b"." || name == b".." || crate::Excludes::is_default(name) {
                        continue;
                    }
                    let is_dir = match entry.file_type() {
                        rustix::fs::FileType::Directory => true,
                        rustix::fs::FileType::Unknown => rustix::fs::statat(
                            &fd,
                            entry.file_name(),
                            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                        )
                        .is_ok_and(|st| {
                            rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::Directory
                        }),
                        _ => false,
                    };
                    if is_dir {
                        subdirs.push(name.to_vec());
                    }
                }
            });
            for name in subdirs {
                let child = join(&rel, &name);
                let cfd = cairn_store::fsutil::open_dir_beneath(&fd, &name).ok();
                if cfd.is_some() {
                    stack.push((child, cfd));
                }
            }
        }
    }

    /// Forgets the watches of `rel` and every directory beneath it (moved out or deleted).
    fn unwatch_tree(&mut self, rel: &[u8]) {
        let mut gone: Vec<Vec<u8>> = Vec::new();
        if self.paths.contains_key(rel) {
            gone.push(rel.to_vec());
        }
        let mut lo = rel.to_vec();
        lo.push(b'/');
        let mut hi = rel.to_vec();
        hi.push(b'/' + 1);
        gone.extend(
            self.paths
                .range(lo.clone()..hi.clone())
                .map(|(p, _)| p.clone()),
        );
        for p in gone {
            if let Some(wd) = self.paths.remove(&p) {
                self.unwatch_path(&p, wd);
            }
        }
        let under: Vec<Vec<u8>> = self
            .unwatched
            .keys()
            .filter(|p| is_under(p, rel))
            .cloned()
            .collect();
        for p in under {
            self.unwatched.remove(&p);
        }
    }

    /// Forgets that the directory watched by `wd` is reached at `path`; its watch is removed
    /// once no path is left to it.
    fn unwatch_path(&mut self, path: &[u8], wd: i32) {
        if let Some(others) = self.aliases.get_mut(&wd) {
            if let Some(i) = others.iter().position(|p| p == path) {
                others.swap_remove(i);
            } else if self.wds.get(&wd).is_some_and(|p| p == path) {
                let next = others.pop().expect("aliases are never left empty");
                self.wds.insert(wd, next);
            }
            if others.is_empty() {
                self.aliases.remove(&wd);
            }
        } else if self.wds.get(&wd).is_some_and(|p| p == path) {
            self.wds.remove(&wd);
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Every path the directory watched by `wd` is watched at (none for a watch forgotten).
    fn paths_of(&self, wd: i32) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self.wds.get(&wd).cloned().into_iter().collect();
        if let Some(others) = self.aliases.get(&wd) {
            out.extend(others.iter().cloned());
        }
        out
    }

    /// Sees whether the mount table changed (a `poll` of its descriptor that does not wait)
    /// and if so makes each mount point beneath the root whose mounts changed walked whole by
    /// the next query, and watches it as it is now (issue 53). Returns whether the mounts
    /// beneath the root changed.
    fn check_mounts(&mut self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let Some(mounts) = &self.mounts else {
            return false;
        };
        let mut fds = [PollFd::new(&mounts.fd, PollFlags::PRI)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if !matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0) && !mounts.moved {
            return false;
        }
        // A mount over the root or one of its ancestors replaces the root.
        self.check_root();
        let table = match std::fs::read(MOUNTINFO) {
            Ok(t) => t,
            Err(e) => {
                self.forget(&format!(
                    "the mount table changed and could not be read ({MOUNTINFO}: {e})"
                ));
                return true;
            }
        };
        let under = mounts_under(&table, self.root.as_os_str().as_bytes());
        // Also read after a directory moved, so that a later change is compared with the
        // paths as they are then. A change between the move and this reading keeps the old
        // path, whose parent is no longer watched: skipped below, as the move's own events
        // made the new path walked whole and watched after it.
        let old = self
            .mounts
            .as_mut()
            .map(|m| {
                m.moved = false;
                std::mem::replace(&mut m.under, under.clone())
            })
            .unwrap_or_default();
        let mut points: Vec<Vec<u8>> = old
            .symmetric_difference(&under)
            .map(|(p, _)| p.clone())
            .collect();
        if points.is_empty() {
            // A change elsewhere (another tree's mounts, a remount).
            return false;
        }
        points.sort();
        points.dedup();
        let mark = self.mark();
        let mut done: Vec<Vec<u8>> = Vec::new();
        for rel in points {
            if rel.is_empty() || done.iter().any(|d| is_under(&rel, d)) {
                continue;
            }
            let (parent, name) = split_parent(&rel);
            // Where the watcher does not look (left out, in the store, walked every time
            // anyway), neither does this.
            if rel.split(|&b| b == b'/').any(crate::Excludes::is_default)
                || !self.paths.contains_key(parent)
            {
                continue;
            }
            let parent = parent.to_vec();
            self.note(&parent, Some(name), mark);
            self.unwatch_tree(&rel);
            self.watch_tree(&rel, None);
            self.fresh.insert(rel.clone(), mark);
            done.push(rel);
        }
        self.find_file_mounts();
        true
    }

    /// Finds the directories holding a mount of something not a directory (a file bind
    /// mount), walked by every snapshot: a write through the file's source makes its event in
    /// the source's directory, not in theirs.
    fn find_file_mounts(&mut self) {
        let Some(mounts) = &self.mounts else {
            return;
        };
        self.mount_walked.clear();
        let Ok((root_fd, _)) = crate::walk::open_root(&self.root) else {
            return;
        };
        let mut found = BTreeMap::new();
        for (rel, _) in &mounts.under {
            let (parent, name) = split_parent(rel);
            if rel.is_empty() || rel.split(|&b| b == b'/').any(crate::Excludes::is_default) {
                continue;
            }
            let dir = if parent.is_empty() {
                rustix::io::dup(&root_fd).map_err(std::io::Error::from)
            } else {
                cairn_store::fsutil::open_dir_path_beneath(&root_fd, parent)
            };
            let is_dir = dir.ok().and_then(|d| {
                rustix::fs::statat(
                    &d,
                    std::ffi::OsStr::from_bytes(name),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .ok()
            });
            if is_dir.is_some_and(|st| {
                rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory
            }) {
                found.insert(
                    parent.to_vec(),
                    format!(
                        "it holds a file bind mount ({}), whose writes make no event here",
                        String::from_utf8_lossy(name)
                    ),
                );
            }
        }
        self.mount_walked = found;
    }

    /// The subtrees walked by every snapshot, and why: those not watched, and those that
    /// mounts make walked.
    fn walked_always(&self) -> impl Iterator<Item = (&Vec<u8>, &String)> {
        self.unwatched.iter().chain(self.mount_walked.iter())
    }

    /// Reads every event queued.
    fn drain(&mut self) {
        let mut events: Vec<(i32, ReadFlags, Option<Vec<u8>>)> = Vec::new();
        EVENT_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            let mut reader = inotify::Reader::new(&self.fd, &mut buf[..]);
            loop {
                match reader.next() {
                    Ok(e) => events.push((
                        e.wd(),
                        e.events(),
                        e.file_name().map(|n| n.to_bytes().to_vec()),
                    )),
                    Err(Errno::INTR) => continue,
                    // AGAIN: nothing more; anything else: the next drain tries again.
                    Err(_) => break,
                }
            }
        });
        if !events.is_empty() {
            if let Some(fd) = &self.read_events {
                let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
            }
        }
        for (wd, mask, name) in events {
            self.event(wd, mask, name);
        }
        // After the events: a mount change before this drain is in the table now.
        if self.check_mounts() {
            self.last_event = Some(Instant::now());
            if let Some(fd) = &self.read_events {
                let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
            }
        }
        if self.changed.len() + self.fresh.len() > MAX_MARKS {
            self.forget("too many changes were remembered");
        }
    }

    fn event(&mut self, wd: i32, mask: ReadFlags, name: Option<Vec<u8>>) {
        self.last_event = Some(Instant::now());
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.overflowed = true;
            return;
        }
        let dirs = self.paths_of(wd);
        if dirs.is_empty() {
            return;
        }
        if mask.contains(ReadFlags::IGNORED) {
            self.wds.remove(&wd);
            self.aliases.remove(&wd);
            for dir in &dirs {
                if self.paths.get(dir) == Some(&wd) {
                    self.paths.remove(dir);
                }
            }
            if dirs.iter().any(|d| d.is_empty()) {
                self.gone = true;
            }
            return;
        }
        if mask.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
            if dirs.iter().any(|d| d.is_empty()) {
                self.gone = true;
            }
            return;
        }
        let mark = self.mark();
        for dir in dirs {
            self.note(&dir, name.as_deref(), mark);
            let Some(name) = &name else { continue };
            if !mask.contains(ReadFlags::ISDIR) || crate::Excludes::is_default(name) {
                continue;
            }
            let path = join(&dir, name);
            if mask.intersects(ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO) {
                if let Some(m) = &mut self.mounts {
                    m.moved = true;
                }
            }
            if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
                if mask.contains(ReadFlags::DELETE) {
                    self.dead_elsewhere(&path, mark);
                }
                self.unwatch_tree(&path);
                self.fresh.insert(path, mark);
            } else if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                // Moved within the tree (a MOVED_FROM before) or in from outside: watched
                // anew, and walked whole by the next snapshot.
                self.unwatch_tree(&path);
                self.watch_tree(&path, None);
                self.fresh.insert(path, mark);
            }
        }
    }

    /// A directory deleted at `path` that the tree still reaches by another path (the source
    /// of a bind mount in it): there it is now a dead directory, which cannot be listed, so
    /// each other path is looked at again in its parent and walked whole.
    fn dead_elsewhere(&mut self, path: &[u8], mark: Mark) {
        let Some(&wd) = self.paths.get(path) else {
            return;
        };
        for other in self.paths_of(wd) {
            if is_under(&other, path) || other.is_empty() {
                continue;
            }
            let (parent, name) = split_parent(&other);
            self.note(parent, Some(name), mark);
            self.fresh.insert(other.clone(), mark);
        }
    }

    /// Remembers that the entry `name` of `dir` changed (`None`: something in `dir` whose
    /// name the event did not give), keeping at most [`MAX_NAMES`] names per directory.
    fn note(&mut self, dir: &[u8], name: Option<&[u8]>, mark: Mark) {
        let latest = self.reports(self.seq);
        let d = self
            .changed
            .entry(dir.to_vec())
            .or_insert_with(|| DirMarks {
                last: mark,
                names: HashMap::new(),
                unnamed: None,
            });
        d.last = d.last.max(mark);
        let Some(name) = name else {
            mark.widen(&mut d.unnamed);
            return;
        };
        d.names.insert(name.to_vec(), mark);
        if d.names.len() <= MAX_NAMES {
            return;
        }
        // Forget the names a query with the latest token would not report (only older tokens
        // need them: those now list the directory whole); then, if still too many, all.
        d.names.retain(|_, m| {
            let keep = latest(m);
            if !keep {
                m.widen(&mut d.unnamed);
            }
            keep
        });
        if d.names.len() > MAX_NAMES {
            for (_, m) in d.names.drain() {
                m.widen(&mut d.unnamed);
            }
        }
    }

    /// Whether a query with the token numbered `seq` reports a mark: one made after the token,
    /// or read within the racy window before the token was issued (a file recorded then is
    /// looked at once more, as by a walk). Every mark, for a token whose time is not known
    /// (none issued, or forgotten).
    fn reports(&self, seq: u64) -> impl Fn(&Mark) -> bool {
        let cutoff = self
            .token_times
            .get(&seq)
            .and_then(|at| at.checked_sub(self.racy_window));
        move |m: &Mark| m.seq > seq || cutoff.is_none_or(|c| m.at >= c)
    }

    /// Sees whether the root is still the directory watched.
    fn check_root(&mut self) {
        let same = rustix::fs::stat(&self.root).is_ok_and(|st| dev_ino(&st) == self.root_id);
        if !same {
            self.gone = true;
        }
    }

    /// Refuses every token issued so far (they get a full walk, with `why`) and forgets the
    /// marks.
    fn forget(&mut self, why: &str) {
        self.floor = self.seq + 1;
        self.floor_reason = why.to_string();
        self.changed.clear();
        self.fresh.clear();
        self.token_times.clear();
    }

    /// After an overflow: events were lost, so every earlier token is refused, and the
    /// watches are set up again on a new inotify instance (directories made meanwhile had no
    /// watch added).
    fn rebuild(&mut self) {
        self.overflowed = false;
        self.overflows += 1;
        self.forget("the inotify queue overflowed (events were lost)");
        let Ok(fd) = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC) else {
            self.gone = true;
            return;
        };
        self.fd = fd;
        self.generation += 1;
        self.wds.clear();
        self.aliases.clear();
        self.paths.clear();
        self.unwatched.clear();
        match crate::walk::open_root(&self.root) {
            Ok((root_fd, st)) if dev_ino(&st) == self.root_id => {
                self.watch_tree(b"", Some(root_fd));
            }
            _ => self.gone = true,
        }
    }

    /// The answer to a query since `since`, with a new token.
    fn answer(&mut self, instance: [u8; 16], since: Option<Token>) -> Changes {
        self.seq += 1;
        self.queries += 1;
        let now = Instant::now();
        self.token_times.insert(self.seq, now);
        while self.token_times.len() > MAX_TOKEN_TIMES {
            self.token_times.pop_first();
        }
        let token = Token {
            instance,
            seq: self.seq,
        };
        let scope = match since {
            _ if self.gone => Scope::Full("the workspace root was moved or deleted".into()),
            None => Scope::Full("no earlier token (the first snapshot with this watcher)".into()),
            Some(t) if t.instance != instance => Scope::Full(
                "the stat cache was confirmed with another watcher (one restarted since)".into(),
            ),
            Some(t) if t.seq < self.floor => Scope::Full(self.floor_reason.clone()),
            Some(t) if t.seq >= self.seq => Scope::Full("a token this watcher never issued".into()),
            Some(t) => {
                let since_t = self.reports(t.seq);
                // The keys of `marks` that the query reports, sorted.
                let reported = |marks: &mut dyn Iterator<Item = (&Vec<u8>, &Mark)>| {
                    let mut out: Vec<Vec<u8>> = marks
                        .filter(|(_, m)| since_t(m))
                        .map(|(k, _)| k.clone())
                        .collect();
                    out.sort();
                    out
                };
                let mut dirs: Vec<Vec<u8>> = Vec::new();
                let mut names: Vec<(Vec<u8>, Vec<Vec<u8>>)> = Vec::new();
                for (p, d) in self.changed.iter().filter(|(_, d)| since_t(&d.last)) {
                    dirs.push(p.clone());
                    if d.unnamed.is_none_or(|u| !since_t(&u)) {
                        names.push((p.clone(), reported(&mut d.names.iter())));
                    }
                }
                dirs.sort();
                names.sort();
                let mut subtrees = reported(&mut self.fresh.iter());
                subtrees.extend(self.walked_always().map(|(p, _)| p.clone()));
                subtrees.sort();
                subtrees.dedup();
                let note = self.walked_always().next().map(|(first, why)| {
                    format!(
                        "{} directories not watched, walked every time ({}: {why})",
                        self.unwatched.len() + self.mount_walked.len(),
                        String::from_utf8_lossy(first)
                    )
                });
                Scope::Partial {
                    dirs,
                    names,
                    subtrees,
                    note,
                }
            }
        };
        Changes { token, scope }
    }
}

fn open_beneath_root(root: &Path, rel: &[u8]) -> std::io::Result<OwnedFd> {
    let (root_fd, _) = crate::walk::open_root(root).map_err(|_| std::io::ErrorKind::NotFound)?;
    if rel.is_empty() {
        return Ok(root_fd);
    }
    cairn_store::fsutil::open_dir_beneath(&root_fd, rel)
}

/// The set of paths a [`Scope::Partial`] names, for the walk's lookups.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    /// Directories to list again.
    pub dirs: std::collections::HashSet<Vec<u8>>,
    /// Directories of `dirs` whose changed entries are known by name, with those names.
    pub names: HashMap<Vec<u8>, Vec<Vec<u8>>>,
    /// Subtrees walked whole.
    pub subtrees: std::collections::HashSet<Vec<u8>>,
    /// Every proper ancestor of the above (the root among them when anything changed).
    pub ancestors: std::collections::HashSet<Vec<u8>>,
}

impl Partial {
    pub(crate) fn new(
        dirs: &[Vec<u8>],
        names: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
        subtrees: &[Vec<u8>],
    ) -> Partial {
        let mut out = Partial {
            dirs: dirs.iter().cloned().collect(),
            names: names.into_iter().collect(),
            subtrees: subtrees.iter().cloned().collect(),
            ancestors: Default::default(),
        };
        for p in dirs.iter().chain(subtrees) {
            let mut p = p.as_slice();
            while !p.is_empty() {
                p = match p.iter().rposition(|&b| b == b'/') {
                    Some(i) => &p[..i],
                    None => b"",
                };
                if !out.ancestors.insert(p.to_vec()) {
                    break;
                }
            }
        }
        out
    }

    /// Whether `rel` lies in (or is) a subtree walked whole.
    pub(crate) fn in_subtree(&self, rel: &[u8]) -> bool {
        if self.subtrees.is_empty() {
            return false;
        }
        if self.subtrees.contains(rel) || self.subtrees.contains(&b""[..]) {
            return true;
        }
        let mut p = rel;
        while let Some(i) = p.iter().rposition(|&b| b == b'/') {
            p = &p[..i];
            if self.subtrees.contains(p) {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
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
