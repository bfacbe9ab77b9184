//! The daemon: serves a workspace's watcher on its socket (one daemon per workspace, by its
//! lock), takes the snapshots other processes ask for, and while idle merges small packs,
//! gives memory back and walks ahead.

mod state;

#[cfg(doc)]
use self::state::MERGES_STOPPED_AT_MOST;
use self::state::{Asked, Count, Merges, StoreAhead, Tally};
use crate::error::{Error, Result};
use crate::watch_socket::client::{ask, connect, NoAnswer};
use crate::watch_socket::lock;
use crate::watch_socket::protocol::{
    recv, send, socket_path, with_short_path, DaemonStatus, Failure, Request, Response,
    RestoreRequest, Target, BEAT, TIMEOUT,
};
use crate::workspace::Workspace;
use cairn_snapshot::{
    ChangeSource, Changes, Context, Options as SnapshotOptions, Snapshot, Watcher,
};
#[cfg(doc)]
use cairn_store::Store;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How many times in a row a new `cairn watch` finds a running watcher silent, when it is
/// not stopped, before it kills it and takes over (a stopped one is killed at once): a
/// watcher merely slow to answer on a loaded machine is not killed for one late answer.
const SILENT_PROBES_BEFORE_KILL: u32 = 3;

/// How long the daemon waits after a snapshot before it gives back the memory that snapshot
/// left (see `Served::release_when_idle`): past the stat cache's write delay, so that the
/// records of a changed cache have gone to the file first.
const RELEASE_AFTER: Duration =
    Duration::from_secs(cairn_snapshot::statcache::WRITE_DELAY.as_secs() + 1);

/// How much the daemon's resident memory must have grown since it last gave memory back
/// before it does again (see `Served::release_when_idle`), KiB.
const RELEASE_GROWTH_KIB: u64 = 16 * 1024;

/// How long after the watcher's racy window (see [`Watcher::racy_window`]) past the last change
/// the daemon walks ahead (see `Served::walk_ahead`): the walk's token must come later than the
/// window, or the next question would name the changed directories again.
const AHEAD_MARGIN: Duration = Duration::from_millis(20);

/// How long the workspace must have been quiet after a change before the daemon stores that
/// change's objects (see `Served::walk_ahead`), well within the racy window: Watchman's
/// default settle time.
const STORE_AFTER: Duration = Duration::from_millis(20);

/// How [`serve`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeEnd {
    /// Asked to stop.
    Stopped,
    /// The workspace root was moved or deleted.
    RootGone,
    /// The store was deleted.
    StoreGone,
    /// No process asked it anything for the idle time it was given (see [`serve`]).
    Idle,
}

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn cpu_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // After the command's name in parentheses: state, ..., utime (14th), stime (15th).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    let hz = rustix::param::clock_ticks_per_second().max(1);
    ticks * 1000 / hz
}

/// Serves the workspace `ws`, watched by `watcher`, on its socket until `stop` is set, the root
/// goes, or the store does; `ready` is called once the socket listens. One daemon serves a
/// workspace: it holds the watcher's lock beside the socket (see [`lock`]) for its life, taken
/// before it touches the socket. Refused with `BUSY` naming the process when another daemon
/// holds it and answers; one that holds it and does not answer (stopped, or silent
/// [`SILENT_PROBES_BEFORE_KILL`] times in a row) is killed and this one takes over (said in
/// [`DaemonStatus::took_over`]). The daemon holds no lock of the store: every request is
/// served as any Cairn process would do it, with the store's own locking. Each connection is
/// served on a thread of its own, so a status or a `Changes` question never waits behind a
/// snapshot; the snapshots it takes for others are taken one at a time. With `idle_exit`, it
/// also ends once no process has connected for that long (checked every second, never while
/// it takes a snapshot): a watcher started on first use does not hold its watches and memory
/// for ever, and the next use starts one again.
pub fn serve(
    ws: &Workspace,
    watcher: Arc<Watcher>,
    stop: &AtomicBool,
    idle_exit: Option<Duration>,
    ready: impl FnOnce(&DaemonStatus),
) -> Result<ServeEnd> {
    let socket = socket_path(ws.store(), ws.id())?;
    let (_lock, took_over) = take_lock(ws, &socket)?;
    // With the lock, a socket somebody listens on is a watcher of an older build, which
    // takes no lock; one nobody listens on, a dead watcher's, is taken over.
    if let Ok(other) = connect(&socket) {
        #[cfg(target_os = "linux")]
        let who = rustix::net::sockopt::socket_peercred(&other)
            .map(|c| format!("process {}", c.pid.as_raw_nonzero()))
            .unwrap_or_else(|_| "its process unknown".into());
        // `SO_PEERCRED` is Linux's.
        #[cfg(not(target_os = "linux"))]
        let who = {
            let _ = other;
            "its process unknown"
        };
        return Err(Error::Busy {
            detail: format!(
                "a watcher of another build of Cairn listens on {} ({who}); stop it with that \
                 build's `cairn watch --stop`",
                socket.display()
            ),
        });
    }
    let _ = std::fs::remove_file(&socket);
    let listener = with_short_path(&socket, |p| UnixListener::bind(p))
        .map_err(|e| Error::io("listen on", &socket, e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("listen on", &socket, e))?;
    let bound = file_id(&socket);
    let served = Served {
        ws,
        watcher,
        socket: socket.clone(),
        tally: Tally::default(),
        merges: Merges::default(),
        taking: parking_lot::Mutex::new(()),
        last_snapshot: parking_lot::Mutex::new(None),
        released_kib: std::sync::atomic::AtomicU64::new(0),
        ahead: parking_lot::Mutex::new(None),
        asked: Asked::default(),
        walking_ahead: AtomicBool::new(false),
        store_ahead: StoreAhead::default(),
        cache_writing: AtomicBool::new(false),
        took_over,
    };
    ready(&served.status());
    let store_dir = ws.store().path().to_path_buf();
    let read_events = served.watcher.events_fd();
    let end = std::thread::scope(|scope| {
        let mut last_check = std::time::Instant::now();
        let mut last_request = std::time::Instant::now();
        let end = loop {
            if stop.load(Ordering::SeqCst) {
                break ServeEnd::Stopped;
            }
            if served.release_when_idle() {
                let served = &served;
                let spawned = std::thread::Builder::new()
                    .name("cairn-watch-merge".into())
                    .spawn_scoped(scope, move || served.merge());
                if spawned.is_err() {
                    served.merges.unclaim();
                }
            }
            served.settle_written();
            if last_check.elapsed() > Duration::from_secs(1) {
                last_check = std::time::Instant::now();
                if served.watcher.is_gone() {
                    break ServeEnd::RootGone;
                }
                if std::fs::symlink_metadata(&store_dir).is_err() {
                    break ServeEnd::StoreGone;
                }
                if idle_exit.is_some_and(|d| last_request.elapsed() >= d)
                    && served.taking.try_lock().is_some()
                {
                    break ServeEnd::Idle;
                }
            }
            let ahead_due = served.ahead_due();
            if let Some((_, store_only)) =
                ahead_due.filter(|&(due, _)| due <= std::time::Instant::now())
            {
                if !served.walking_ahead.swap(true, Ordering::SeqCst) {
                    let served = &served;
                    let spawned = std::thread::Builder::new()
                        .name("cairn-watch-ahead".into())
                        .spawn_scoped(scope, move || {
                            served.walk_ahead(store_only);
                            served.walking_ahead.store(false, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        served.walking_ahead.store(false, Ordering::SeqCst);
                    }
                }
            }
            match listener.accept() {
                Ok((stream, _)) => {
                    last_request = std::time::Instant::now();
                    let served = &served;
                    let spawned = std::thread::Builder::new()
                        .name("cairn-watch-client".into())
                        .spawn_scoped(scope, move || served.one(stream));
                    // No thread to be had: the client times out and walks.
                    drop(spawned);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    use rustix::event::{poll, PollFd, PollFlags};
                    // Woken by a request, or by changes the watcher read: a store ahead is
                    // due a moment after them.
                    let mut fds = vec![PollFd::new(&listener, PollFlags::IN)];
                    if let Some(fd) = &read_events {
                        fds.push(PollFd::new(&**fd, PollFlags::IN));
                    }
                    // Woken in time for a walk ahead that falls due before the next look.
                    let wait = ahead_due
                        .map(|(due, _)| due.saturating_duration_since(std::time::Instant::now()))
                        .unwrap_or(Duration::MAX)
                        .clamp(Duration::from_millis(1), Duration::from_millis(250));
                    let timeout = rustix::event::Timespec {
                        tv_sec: 0,
                        tv_nsec: wait.as_nanos() as i64,
                    };
                    let _ = poll(&mut fds, Some(&timeout));
                    if fds
                        .get(1)
                        .is_some_and(|f| f.revents().contains(PollFlags::IN))
                    {
                        served.watcher.clear_events_fd();
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        // A merge under way stops, rather than hold the daemon's end.
        served.merges.stop();
        end
    });
    // Only our own socket (still holding the lock: no other daemon has bound since, unless
    // it killed this one, which then never gets here).
    if bound.is_some() && file_id(&socket) == bound {
        let _ = std::fs::remove_file(&socket);
    }
    Ok(end)
}

/// Takes the watcher's lock of `ws` (beside `socket`) for a daemon about to serve: at once
/// when free; refused with `BUSY` naming the holder when it answers; when it does not (stopped,
/// or silent [`SILENT_PROBES_BEFORE_KILL`] times in a row), its process is killed and the lock
/// taken over (its pid returned). A holder that does not listen yet (a daemon starting) is
/// waited for.
fn take_lock(
    ws: &Workspace,
    socket: &Path,
) -> Result<(cairn_store::fsutil::HeldLock, Option<u32>)> {
    let path = lock::lock_path(socket);
    let busy = |who: String| Error::Busy {
        detail: format!(
            "a watcher already runs for {} ({who}, socket {}); stop it with `cairn watch --stop`",
            ws.root().display(),
            socket.display()
        ),
    };
    let mut silent = 0;
    let mut waited = std::time::Instant::now();
    loop {
        if let Some(held) = lock::try_take(&path)? {
            return Ok((held, None));
        }
        match ask(socket, &Request::Status, TIMEOUT) {
            Ok(Response::Status(st)) => return Err(busy(format!("process {}", st.pid))),
            Ok(_) => return Err(busy("it did not say which process".into())),
            Err(NoAnswer::Nobody) => {
                // Starting (or a prober's moment with the lock): wait for it to listen,
                // unless it is stopped.
                let stopped =
                    lock::holder(&path)?.filter(|&p| lock::stopped(p) && p != std::process::id());
                if let Some(pid) = stopped {
                    if let Some(held) = lock::kill(pid, &path)? {
                        return Ok((held, Some(pid)));
                    }
                    waited = std::time::Instant::now();
                    continue;
                }
                if waited.elapsed() > TIMEOUT {
                    let who = match lock::holder(&path)? {
                        Some(pid) => format!("process {pid}, which does not listen"),
                        None => "it does not listen".into(),
                    };
                    return Err(busy(who));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(NoAnswer::Silent(why)) => {
                silent += 1;
                let pid = lock::holder(&path)?;
                if pid.is_none() && !lock::held(&path)? {
                    continue;
                }
                if !pid.is_some_and(lock::stopped) && silent < SILENT_PROBES_BEFORE_KILL {
                    continue;
                }
                let Some(pid) = pid.filter(|&p| p != std::process::id()) else {
                    return Err(busy(format!(
                        "it does not answer ({why}) and its process cannot be killed from here"
                    )));
                };
                if let Some(held) = lock::kill(pid, &path)? {
                    return Ok((held, Some(pid)));
                }
                // Another took it first: ask that one.
                silent = 0;
                waited = std::time::Instant::now();
            }
        }
    }
}

/// The connection of a request, its answer sent once (`true` once sent), and `Working` before
/// it (see [`Served::one`]).
struct Reply(parking_lot::Mutex<(UnixStream, bool)>);

impl Reply {
    /// Says the daemon works on the request, unless it answered already: whether the client
    /// is still there.
    fn working(&self) -> bool {
        let mut r = self.0.lock();
        let (stream, answered) = &mut *r;
        *answered || send(stream, &Response::Working).is_ok()
    }

    /// Sends the answer, once.
    fn answer(&self, answer: &Response) {
        let mut r = self.0.lock();
        let (stream, answered) = &mut *r;
        if !std::mem::replace(answered, true) {
            let _ = send(stream, answer);
        }
    }
}

/// Test hook (feature `test-hooks`): a daemon's restore that dies midway. A daemon in the
/// test's own process cannot be killed, so its next restore of a workspace stops after a
/// number of operations with its journal pending, as a death there leaves it, and the
/// connection is closed unanswered, as a death closes it.
#[cfg(feature = "test-hooks")]
pub mod dying {
    use std::path::{Path, PathBuf};

    /// Workspaces (by root) whose daemon's next restore dies, and after how many operations.
    static DYING: parking_lot::Mutex<Vec<(PathBuf, usize)>> = parking_lot::Mutex::new(Vec::new());

    /// The next restore the daemon of the workspace at `root` carries out dies after `ops`
    /// operations.
    pub fn next_restore(root: &Path, ops: usize) {
        DYING.lock().push((root.to_path_buf(), ops));
    }

    /// After how many operations the restore about to run in the workspace at `root` dies,
    /// if it was told to (once).
    pub(super) fn take(root: &Path) -> Option<usize> {
        let mut dying = DYING.lock();
        let at = dying.iter().position(|(r, _)| r == root)?;
        Some(dying.remove(at).1)
    }
}

/// Whether the client at the other end of `stream` has closed it (it gave up waiting).
fn hung_up(stream: &UnixStream) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    // `POLLRDHUP` is Linux's; elsewhere a hang-up shows as `POLLHUP` (reported unasked).
    #[cfg(target_os = "linux")]
    let (asked, closed) = (
        PollFlags::RDHUP,
        PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR,
    );
    #[cfg(not(target_os = "linux"))]
    let (asked, closed) = (PollFlags::empty(), PollFlags::HUP | PollFlags::ERR);
    let mut fds = [PollFd::new(stream, asked)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&zero)).is_ok_and(|n| n > 0) && fds[0].revents().intersects(closed)
}

/// The effective user and group ids of the process at the other end of `stream`, as it
/// connected (`SO_PEERCRED`, Linux's; `None` elsewhere).
fn peer_ids(stream: &UnixStream) -> Option<(u32, u32)> {
    #[cfg(target_os = "linux")]
    return rustix::net::sockopt::socket_peercred(stream)
        .ok()
        .map(|c| (c.uid.as_raw(), c.gid.as_raw()));
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        None
    }
}

/// This process's effective user and group ids.
fn own_ids() -> (u32, u32) {
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
}

/// Whether the daemon, running as `own`, carries out a restore for a process running as
/// `peer`: only for the same user and group. A restore writes the files as whoever runs it,
/// so one carried out for another user (root's `sudo cairn restore` beside the user's
/// watcher) would give them another owner than the caller's own restore would; and one it
/// cannot tell is left to the caller too.
fn same_user(peer: Option<(u32, u32)>, own: (u32, u32)) -> std::result::Result<(), String> {
    match peer {
        Some(p) if p == own => Ok(()),
        Some((uid, gid)) => Err(format!(
            "the asking process runs as user {uid}, group {gid}, and this watcher as user {}, \
             group {}: a restore writes files as whoever asks for it",
            own.0, own.1
        )),
        None => Err("this system does not say which user the asking process runs as".into()),
    }
}

/// The device and inode of the file at `path`.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

struct Served<'a> {
    ws: &'a Workspace,
    watcher: Arc<Watcher>,
    socket: PathBuf,
    /// What it counts for its status.
    tally: Tally,
    /// The merges of small packs while idle (see [`Served::merge`]).
    merges: Merges,
    /// Held while one is taken, so they are taken one at a time.
    taking: parking_lot::Mutex<()>,
    /// When the last snapshot taken for others ended, until the memory it left is given
    /// back (see [`Served::release_when_idle`]).
    last_snapshot: parking_lot::Mutex<Option<std::time::Instant>>,
    /// The process's resident memory (`VmRSS`, KiB) after it last gave memory back when idle
    /// or after a stat cache write ([`Served::give_back_memory`]). The trim before a walk
    /// ahead leaves it as it was, on purpose: measured from just before that walk, the walk's
    /// own growth would make the idle release trim after it, and the snapshot asked for next
    /// would fault those pages in again (DEVELOPMENT.md, the walk ahead and memory).
    released_kib: std::sync::atomic::AtomicU64,
    /// The snapshot walked ahead, not yet asked for (see [`Served::walk_ahead`]).
    ahead: parking_lot::Mutex<Option<cairn_snapshot::Ahead<'a>>>,
    /// What the last snapshot asked for left for the walks ahead.
    asked: Asked,
    /// A walk ahead runs.
    walking_ahead: AtomicBool,
    /// The store ahead under way, and the snapshots asked for that wait to begin.
    store_ahead: StoreAhead,
    /// A stat cache write was pending at the last look (see [`Served::settle_written`]).
    cache_writing: AtomicBool,
    /// The watcher this one killed as it started, for not answering.
    took_over: Option<u32>,
}

impl Served<'_> {
    /// Once no snapshot has been taken for [`RELEASE_AFTER`] and the stat cache the last one
    /// left is written (the daemon then holds its index, not its records: see
    /// [`cairn_snapshot::CacheMemo`]), says that a merge of the store's small packs is due
    /// (`true`: the loop runs [`Served::merge`] on a thread of its own) and gives back the
    /// memory the snapshots since the last time used and no longer need, if the process grew
    /// by [`RELEASE_GROWTH_KIB`] since:
    /// the heap's free pages and the pack index pages lookups faulted in
    /// ([`Store::release_memory`]). A walk of a large tree (the first one, or one after a
    /// queue overflow) frees far more than it keeps, and the allocator would otherwise hold
    /// it for the daemon's whole life. Small snapshots leave it be: the pages given back are
    /// faulted in again by the next snapshot, which cost a 10-file snapshot of a 500,000-file
    /// tree about 4 ms when done after each one.
    fn release_when_idle(&self) -> bool {
        let mut last = self.last_snapshot.lock();
        let Some(at) = *last else { return false };
        let memo = &self.ws.site.memo;
        if at.elapsed() < RELEASE_AFTER || memo.writing() {
            return false;
        }
        // A snapshot under way: the next turn of the loop after it looks again.
        let Some(_none_taken) = self.taking.try_lock() else {
            return false;
        };
        *last = None;
        drop(last);
        // The write is done: its records, if the writer could not put the file's in their
        // place itself, are put there now.
        memo.wait();
        let grown =
            proc_status_kib("VmRSS:").saturating_sub(self.released_kib.load(Ordering::Relaxed));
        if grown >= RELEASE_GROWTH_KIB {
            self.give_back_memory();
        }
        // Set free while no snapshot is under way: one that begins after this stops it.
        self.merges.claim()
    }

    /// Merges the store's small packs once there are many: each snapshot that wrote an
    /// object added a pack, and every lookup probes every pack. Off any snapshot's path: on
    /// a thread of its own, so that the loop goes on accepting requests, and stopped as soon
    /// as a snapshot begins (`merge_stop`), which would otherwise share the two cores with
    /// it (a merge of 32 packs of test262 snapshots compresses and hashes several megabytes)
    /// or, as before, wait for it; the next idle moment merges again. After
    /// [`MERGES_STOPPED_AT_MOST`] merges stopped in a row (snapshots that always come just
    /// as the daemon begins to merge), the next one is not stopped: packs would pile up.
    fn merge(&self) {
        self.merges.run(self.ws.store());
    }

    /// Once the stat cache write a snapshot left is done, and no snapshot is under way: puts
    /// the cache read back from the file in the memo in place of the records in memory (see
    /// [`cairn_snapshot::CacheMemo::wait`]) and gives the heap's free pages back. Until then
    /// the daemon held both (the written cache's index alone is 6.3 MiB for 500k files), and
    /// glibc kept what was freed: the 500k daemon's resident memory grew by 6-13 MiB after
    /// each such write (DEVELOPMENT.md). A snapshot that comes after faults in the few pages
    /// it needs; the write itself runs 2 s after a snapshot, in a pause.
    fn settle_written(&self) {
        let memo = &self.ws.site.memo;
        let writing = memo.writing();
        if !self.cache_writing.swap(writing, Ordering::Relaxed) || writing {
            return;
        }
        // A snapshot under way takes the cache from the memo itself.
        let Some(_none_taken) = self.taking.try_lock() else {
            return;
        };
        memo.wait();
        self.give_back_memory();
    }

    /// Gives the heap's free pages back ([`Store::release_memory`]) and records the resident
    /// memory after it, from which [`Served::release_when_idle`] measures growth.
    fn give_back_memory(&self) {
        self.ws.store().release_memory();
        self.released_kib
            .store(proc_status_kib("VmRSS:"), Ordering::Relaxed);
    }

    /// When the next walk ahead is due, and whether it only stores: once a snapshot was asked
    /// for (its options are the ones walked with; never with a remote, whose cache the
    /// remote's collector owns) and the workspace changed since the last snapshot began,
    /// [`STORE_AFTER`] of quiet after the last change to store its objects (once per snapshot
    /// asked for, when that comes before the walk ahead), and the watcher's racy window (plus
    /// [`AHEAD_MARGIN`]) to walk ahead: only a walk whose token comes later than that stands
    /// in for a snapshot asked for afterwards. `None`: none is due.
    fn ahead_due(&self) -> Option<(std::time::Instant, bool)> {
        if self.ws.options().store_options.remote.is_some()
            || !self.asked.any()
            || self.walking_ahead.load(Ordering::SeqCst)
        {
            return None;
        }
        let last = self.watcher.last_event()?;
        if self.asked.covers(last) {
            return None;
        }
        let walk = last + self.watcher.racy_window() + AHEAD_MARGIN;
        let store = last + STORE_AFTER;
        if store < walk && self.asked.store_allowed() {
            return Some((store, true));
        }
        Some((walk, false))
    }

    /// Walks ahead: takes a snapshot's walk and objects (see [`cairn_snapshot::walk_ahead`])
    /// with the options of the last snapshot asked for, holding no operation afterwards, so
    /// that the next snapshot asked for, if nothing changed meanwhile, only writes its
    /// manifest ([`Served::answer_ahead`]). Not while a snapshot is taken (it covers the
    /// changes itself) nor while a restore of the workspace is unfinished. A walk ahead that
    /// fails is left: the snapshot asked for next walks as it would have.
    ///
    /// With `store_only` (a moment after a change, within the racy window), the walk is
    /// dropped once its objects are durable: the watcher will report the directories it
    /// read again (their files were recorded in their racy window), so it cannot stand in
    /// for a snapshot, but the snapshot asked for next walks them and finds every object it
    /// needs stored, and writes its manifest alone, not a pack of its trees and files with
    /// it. Its objects are named by no manifest until then (a collection past its grace
    /// period removes them, and the snapshot stores them again). The stat cache goes back
    /// to the memo as it was, its write still pending, and the heap is not trimmed first:
    /// the snapshot asked for next would fault its pages in again.
    fn walk_ahead(&self, store_only: bool) {
        let Some(_one_at_a_time) = self.taking.try_lock() else {
            return;
        };
        self.merges.stop();
        let Some(opts) = self.asked.options() else {
            return;
        };
        if store_only {
            self.asked.store_begins();
        } else {
            self.asked.walk_begins(&self.watcher);
        }
        // The one walked before is stale: its stat cache goes back to the memo first.
        drop(self.ahead.lock().take());
        if crate::journal::any_unfinished(&self.ws.site).unwrap_or(true) {
            return;
        }
        let ws = self.ws;
        // Only worth it when it walks no more than the changes: not after an overflow (the
        // whole tree), nor with subtrees without a watch (every snapshot walks them).
        if store_only
            && (self.asked.overflowed_since(&self.watcher)
                || !self.watcher.status().unwatched.is_empty())
        {
            return;
        }
        // A stat cache write under way is waited for (taken meanwhile, the cache would be
        // copied and written again); one still waiting for its delay is called off by the
        // walk and set again when the walk is dropped.
        if store_only && ws.site.memo.write_under_way() {
            ws.site.memo.wait();
        }
        if !store_only {
            // The stat cache the last snapshot left is written first (now, rather than when
            // its delay is over), and the walk takes the cache read back from the file, whose
            // records stay there until looked at: taken while its write was under way, it
            // was copied (the writer still held it). Then the heap's free pages are given
            // back, which the walk faults in again as it needs them, so the snapshot asked
            // for next finds them: the 500k daemon's heap grew by 12-15 MiB a walk ahead, to
            // 65 MiB resident and a peak of 71; with both, 39-40 MiB resident and a peak of
            // 55 (DEVELOPMENT.md). Off every caller's path: the walk ahead runs while the
            // workspace is quiet.
            ws.site.memo.wait();
            // Not `give_back_memory`: see `released_kib`.
            ws.store().release_memory();
        }
        // A snapshot asked for from here on cancels a store ahead; one already waiting to
        // begin (it may have looked for a token to cancel before this one was set) keeps it
        // from beginning.
        let cancel = store_only.then(cairn_store::cancel::CancelToken::new);
        if let Some(cancel) = &cancel {
            if !self.store_ahead.begin(cancel) {
                return;
            }
        }
        let walked = cairn_snapshot::walk_ahead(
            ws.store(),
            ws.root(),
            ws.id(),
            &SnapshotOptions {
                // Stored raw, as a snapshot asked for at once stores them, and compressed by
                // the merge once idle: the snapshot asked for next may be waiting for it.
                defer_compression: store_only,
                ..opts
            },
            self.context(cancel),
        );
        self.store_ahead.end();
        *self.last_snapshot.lock() = Some(std::time::Instant::now());
        match walked {
            Ok(ahead) if store_only => {
                self.tally.add(Count::StoredAhead);
                // Dropped before the next snapshot can begin: its stat cache is back in the
                // memo for it.
                drop(ahead);
            }
            Ok(ahead) => {
                self.tally.add(Count::WalkedAhead);
                *self.ahead.lock() = Some(ahead);
            }
            Err(_) => {}
        }
    }

    /// The snapshot walked ahead, committed as the one asked for with `opts` (the options
    /// [`Workspace::snapshot`] takes it with), when it can stand in for it: it was walked with
    /// the same capture settings, stat-cache use and own files, and the watcher reports
    /// nothing changed since its token. A restore a crash left unfinished is finished first,
    /// as for any snapshot. The snapshot is counted and handed to `answer` as soon as its
    /// manifest is durable, before the stat cache takes the walk's records in (as a snapshot
    /// asked for at once is). `None` (and nothing written): the caller takes the snapshot.
    fn answer_ahead(
        &self,
        opts: &SnapshotOptions,
        answer: cairn_snapshot::TakenFn<'_>,
    ) -> Option<()> {
        let ahead = self.ahead.lock().take()?;
        crate::journal::finish_before_snapshot(&self.ws.site).ok()?;
        let walked = ahead.options();
        if walked.capture != opts.capture
            || walked.use_stat_cache != opts.use_stat_cache
            || walked.own_files != opts.own_files
        {
            return None;
        }
        match self.watcher.changes_since(Some(ahead.token()?)) {
            Ok(Changes {
                scope:
                    cairn_snapshot::Scope::Partial {
                        dirs,
                        subtrees,
                        note: None,
                        ..
                    },
                ..
            }) if dirs.is_empty() && subtrees.is_empty() => {}
            _ => return None,
        }
        let mut counted = |s: &Snapshot| {
            self.tally.add(Count::AnsweredAhead);
            answer(s);
        };
        ahead
            .commit(
                opts.label.clone(),
                opts.metadata.clone(),
                opts.protect,
                Some(&mut counted),
            )
            .ok()??;
        let _ = crate::journal::confirm_applied(&self.ws.site);
        Some(())
    }

    fn status(&self) -> DaemonStatus {
        DaemonStatus {
            pid: std::process::id(),
            root: self.ws.root().to_path_buf(),
            workspace_id: self.ws.id().to_string(),
            store: self.ws.store().path().to_path_buf(),
            socket: self.socket.clone(),
            watch: self.watcher.status(),
            memory_bytes: proc_status_kib("VmRSS:") * 1024,
            peak_memory_bytes: proc_status_kib("VmHWM:") * 1024,
            cpu_ms: cpu_ms(),
            snapshots: self.tally.get(Count::Snapshots),
            restores: self.tally.get(Count::Restores),
            packs_merged: self.merges.packs_merged(),
            merge_error: self.merges.error(),
            walked_ahead: self.tally.get(Count::WalkedAhead),
            answered_ahead: self.tally.get(Count::AnsweredAhead),
            stored_ahead: self.tally.get(Count::StoredAhead),
            took_over: self.took_over,
        }
    }

    /// Serves one connection: reads its request, says `Working` at once and every [`BEAT`]
    /// (on a thread of its own) until the answer goes out. A request whose client has gone
    /// already (it gave up while this daemon was stopped) is dropped; one whose client goes
    /// while it is served is cancelled (the snapshot it asked for is not taken for nobody).
    fn one(&self, mut stream: UnixStream) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(TIMEOUT));
        let _ = stream.set_write_timeout(Some(TIMEOUT));
        let Ok(req) = recv::<Request>(&mut stream) else {
            return;
        };
        if hung_up(&stream) {
            return;
        }
        let peer = peer_ids(&stream);
        let reply = Reply(parking_lot::Mutex::new((stream, false)));
        if !reply.working() {
            return;
        }
        let cancel = cairn_store::cancel::CancelToken::new();
        let (done, beats) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let (reply, cancel) = (&reply, &cancel);
            let _ = std::thread::Builder::new()
                .name("cairn-watch-beat".into())
                .spawn_scoped(scope, move || {
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        beats.recv_timeout(BEAT)
                    {
                        if !reply.working() {
                            cancel.cancel();
                            return;
                        }
                    }
                });
            let answer = match req {
                Request::Changes { since } => match self.watcher.changes_since(since) {
                    Ok(c) => Some(Response::Changes(c)),
                    Err(e) => Some(Response::Refused(e)),
                },
                Request::Status => Some(Response::Status(Box::new(self.status()))),
                Request::Snapshot { of, options } => self.snapshot(&of, &options, reply, cancel),
                Request::Restore(req) => match same_user(peer, own_ids()) {
                    Ok(()) => self.restore(&req, reply, cancel),
                    Err(why) => Some(Response::Refused(why)),
                },
            };
            if let Some(answer) = answer {
                reply.answer(&answer);
            }
            drop(done);
        });
    }

    /// What the daemon's own walks use: its watcher, the workspace's stat cache kept in
    /// memory, and `cancel`.
    fn context(&self, cancel: Option<cairn_store::cancel::CancelToken>) -> Context<'_> {
        Context {
            cancel,
            memo: Some(self.ws.site.memo.clone()),
            watch: Some(self.watcher.clone()),
            ..Context::default()
        }
    }

    /// Counts the snapshot `s` taken, and the answer that carries it.
    fn taken(&self, s: &Snapshot) -> Response {
        *self.last_snapshot.lock() = Some(std::time::Instant::now());
        self.tally.add(Count::Snapshots);
        Response::Snapshot(Box::new(s.clone()))
    }

    /// Waits for the turn of a snapshot or restore asked for (they are taken one at a time;
    /// a store ahead under way stops, what it stored found by the walk that follows, and none
    /// begins until this one has) and stops a merge under way. `None`: its client went away
    /// while it waited for the one before (`cancel`).
    fn turn(
        &self,
        cancel: &cairn_store::cancel::CancelToken,
    ) -> Option<parking_lot::MutexGuard<'_, ()>> {
        let turn = self.store_ahead.asked(|| self.taking.lock());
        if cancel.is_cancelled() {
            return None;
        }
        self.merges.stop();
        Some(turn)
    }

    /// Carries out the restore `req` asked for (see [`Workspace::restore`]) with the daemon's
    /// watcher and the stat cache it keeps, and returns the answer, or `None` when it was sent
    /// on `reply` already: as soon as the restore returned. Then, off the asking process's
    /// path, the restore's changes are made durable (its journal confirmed), which the next
    /// command would otherwise do before anything else. One at a time with the snapshots;
    /// the snapshot walked ahead is dropped first (its stat cache goes back to the memo for
    /// the restore's walk, and the restore changes the files it stood for). `cancel` (the
    /// client went away) stops it only before its changes begin, as it stops any restore.
    fn restore(
        &self,
        req: &RestoreRequest,
        reply: &Reply,
        cancel: &cairn_store::cancel::CancelToken,
    ) -> Option<Response> {
        let ws = self.ws;
        let _turn = self.turn(cancel)?;
        if let Err(why) = ws.accept_restore(req) {
            return Some(Response::Refused(why));
        }
        drop(self.ahead.lock().take());
        let options = crate::ApplyOptions::with_key(req.key.clone());
        #[cfg(feature = "test-hooks")]
        let options = crate::ApplyOptions {
            stop_after_ops: dying::take(ws.root()),
            ..options
        };
        let outcome = ws.restore_for_daemon(
            &req.snapshot,
            &req.planning,
            &options,
            self.context(Some(cancel.clone())),
        );
        #[cfg(feature = "test-hooks")]
        if options.stop_after_ops.is_some() {
            // Unanswered: the connection closes as the daemon's death would close it.
            return None;
        }
        *self.last_snapshot.lock() = Some(std::time::Instant::now());
        let answer = match outcome {
            Ok(report) => match serde_json::to_string(&report) {
                Ok(json) => Response::Restored(json),
                Err(e) => Response::Failed(Box::new(Failure {
                    kind: cairn_store::ErrorKind::Corrupt,
                    message: format!("the restore's report does not write as JSON: {e}"),
                    path: None,
                })),
            },
            Err(e) => {
                use cairn_store::Classify;
                use std::os::unix::ffi::OsStrExt;
                Response::Failed(Box::new(Failure {
                    kind: e.kind(),
                    message: e.to_string(),
                    path: e.path().map(|p| p.as_os_str().as_bytes().to_vec()),
                }))
            }
        };
        self.tally.add(Count::Restores);
        reply.answer(&answer);
        // Best effort, as after a snapshot: a failure leaves the journal to the next command.
        let _ = crate::journal::confirm_applied(&ws.site);
        None
    }

    /// Takes the snapshot of `of` with `options` (as the asking process's
    /// [`Workspace::snapshot`] settled them) and returns the answer, or `None` when it was sent
    /// on `reply` already: as soon as the snapshot was durable, before the stat cache was
    /// brought up to date for the next one (see [`cairn_snapshot::Context::taken`]), or when
    /// its client went away (`cancel`).
    fn snapshot(
        &self,
        of: &Target,
        options: &SnapshotOptions,
        reply: &Reply,
        cancel: &cairn_store::cancel::CancelToken,
    ) -> Option<Response> {
        let ws = self.ws;
        let _turn = self.turn(cancel)?;
        if let Err(why) = ws.serves(of) {
            return Some(Response::Refused(why));
        }
        // Asked for before a walk ahead (right after a change): what it packs is stored
        // uncompressed, and compressed by the merge this daemon makes once idle (a store that
        // caches a remote never merges, so it compresses them now).
        let opts = SnapshotOptions {
            defer_compression: ws.options().store_options.remote.is_none(),
            ..options.clone()
        };
        self.asked.snapshot_asked(
            SnapshotOptions {
                label: None,
                metadata: Default::default(),
                protect: false,
                defer_compression: false,
                ..opts.clone()
            },
            &self.watcher,
        );
        let mut answered = false;
        let mut answer = |s: &Snapshot| {
            reply.answer(&self.taken(s));
            answered = true;
        };
        if self.answer_ahead(&opts, &mut answer).is_some() {
            return None;
        }
        let ctx = Context {
            taken: Some(&mut answer),
            ..self.context(Some(cancel.clone()))
        };
        let outcome = ws.snapshot_for_daemon(&opts, ctx);
        if answered {
            return None;
        }
        Some(match outcome {
            Ok(out) => self.taken(&out.snapshot),
            // The caller takes it itself, and meets the error itself.
            Err(e) => {
                *self.last_snapshot.lock() = Some(std::time::Instant::now());
                Response::Refused(e.to_string())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_is_carried_out_only_for_a_process_of_the_same_user_and_group() {
        assert_eq!(same_user(Some((1000, 1000)), (1000, 1000)), Ok(()));
        for peer in [Some((0, 0)), Some((1000, 27)), Some((0, 1000)), None] {
            assert!(same_user(peer, (1000, 1000)).is_err(), "{peer:?}");
        }
        // This process, at the other end of a socket pair, is its own user.
        let (a, _b) = UnixStream::pair().expect("a socket pair");
        assert_eq!(same_user(peer_ids(&a), own_ids()), Ok(()));
    }
}
