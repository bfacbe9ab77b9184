//! [`CacheMemo`]: a stat cache held in memory between the snapshots of one process, and the
//! thread that writes it in the background.

use super::codec::read_header;
use super::StatCache;
use std::path::{Path, PathBuf};

/// A stat cache held in memory between the snapshots (and plans) one process takes of one
/// workspace, so that each does not read and decode the whole file again: before using it, a
/// snapshot reads the file's header only, and uses the records it holds when the header names
/// the same body (its key), with the header's snapshot and start time. Otherwise, or when the
/// memo holds another workspace's cache, the file is read as without a memo.
///
/// When a snapshot changed something, the memo also takes the cache's writing off the
/// snapshot's path: a background thread encodes and writes the file [`WRITE_DELAY`] after the
/// snapshot has returned (its manifest is durable by then; the cache only saves work). A
/// snapshot of the same workspace in the meantime takes the records from the memo and calls
/// that write off, since its own cache supersedes it: a long-lived process (the `cairn watch`
/// daemon, an agent's binding) taking a checkpoint every few seconds does not encode the whole
/// cache each time. Until then the file holds the cache before, which is as valid as any stale
/// cache (its header names the snapshot that confirmed it). Dropping the last handle writes a
/// pending cache at once, so a process that exits after a snapshot still leaves its cache;
/// [`CacheMemo::wait`] writes it on demand.
///
/// Cloning gives another handle on the same memo; `Default` is an empty one.
#[derive(Clone, Default)]
pub struct CacheMemo(std::sync::Arc<parking_lot::Mutex<Option<Held>>>);

/// How long a changed cache waits in memory before its background write starts (see
/// [`CacheMemo`]).
pub const WRITE_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

/// What a memo holds: the cache of the file at `path`, and the thread writing it, if any.
struct Held {
    path: PathBuf,
    cache: std::sync::Arc<StatCache>,
    writing: Option<Writer>,
    /// The temporary directory a pending write goes through.
    tmp: Option<PathBuf>,
}

/// The thread that writes a cache after [`WRITE_DELAY`], unless told otherwise: `true` on
/// its channel writes at once, `false` calls the write off. It returns whether it wrote, and
/// the cache read back from the file it wrote (see [`StatCache::save_settled`]).
struct Writer {
    thread: std::thread::JoinHandle<Wrote>,
    tell: std::sync::mpsc::Sender<bool>,
    /// Set by the thread once its delay is over and it writes.
    begun: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Held by a [`Writer`] while it writes and renames its file: the writes of one process land
/// in the order they began.
static WRITE_ORDER: parking_lot::Mutex<()> = parking_lot::const_mutex(());

/// What a [`Writer`] did.
enum Wrote {
    /// Called off: the file does not hold the cache.
    No,
    /// Written; the cache as the file now holds it, when it could be read back.
    Yes(Option<Box<StatCache>>),
}

impl Writer {
    /// Tells it to write now (`write`) or to call the write off if it has not begun, waits
    /// for it, and returns what it did.
    fn finish(self, write: bool) -> Wrote {
        // A writer already done has hung up: nothing to tell.
        let _ = self.tell.send(write);
        // A panic while writing only loses the file: the memo still holds the records.
        self.thread.join().unwrap_or(Wrote::No)
    }
}

impl Held {
    /// Has the pending write done now, and waits for it.
    fn wait(&mut self) {
        self.end(true);
    }

    /// Ends the pending write: done now (`write`), or called off if it has not begun. Returns
    /// whether the file holds this cache's body (written, or nothing was pending).
    fn end(&mut self, write: bool) -> bool {
        let Some(w) = self.writing.take() else {
            return true;
        };
        // A write under way that is to be called off is not waited for: a snapshot must not
        // wait while a large cache is written (a 500,000-file one takes a tenth of a second or
        // more). It is left to finish on its own (and finds the memo no longer holds its
        // cache); the snapshot's own cache is written after it.
        let begun = w.begun.load(std::sync::atomic::Ordering::Acquire);
        if !write && begun && !w.thread.is_finished() {
            return false;
        }
        match w.finish(write) {
            Wrote::No => false,
            Wrote::Yes(settled) => {
                if let Some(settled) = settled {
                    drop(self.settle(*settled));
                }
                true
            }
        }
    }

    /// Holds `settled`, the same cache read back from the file just written, in place of the
    /// one in memory, keeping the subtree totals counted so far; returns the one replaced.
    fn settle(&mut self, settled: StatCache) -> std::sync::Arc<StatCache> {
        let counted = std::mem::take(&mut *self.cache.subtrees.0.lock());
        *settled.subtrees.0.lock() = counted;
        std::mem::replace(&mut self.cache, std::sync::Arc::new(settled))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.wait();
    }
}

impl std::fmt::Debug for CacheMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self
            .0
            .lock()
            .as_ref()
            .map(|h| (h.path.clone(), h.cache.len()));
        f.debug_tuple("CacheMemo").field(&held).finish()
    }
}

impl CacheMemo {
    /// The cache at `path`: the memo's when its header names the body the memo holds (the memo
    /// is emptied: whoever takes it gives it back with [`CacheMemo::put`]), else loaded.
    pub fn load(&self, path: &Path) -> StatCache {
        let held = self.0.lock().take();
        if let Some(mut held) = held {
            let same = held.path == path;
            // Our own next snapshot supersedes a write not yet begun: it is called off.
            let written = held.end(!same);
            if same && !written {
                // The file does not hold these records, which are newer than what it holds:
                // they are used, and marked as from no file of this version, so the next
                // save writes them whole rather than confirm a header over another body.
                let shared = std::mem::take(&mut held.cache);
                let mut cache = StatCache::unshare(shared);
                cache.version = 0;
                cache.unwritten = held.tmp.take();
                return cache;
            }
            if same {
                if let Some(h) = read_header(path) {
                    if h.key == held.cache.key {
                        let shared = std::mem::take(&mut held.cache);
                        let mut cache = StatCache::unshare(shared);
                        cache.snapshot = h.snapshot;
                        cache.started_ns = h.started_ns;
                        cache.token = h.token;
                        cache.version = h.version;
                        return cache;
                    }
                }
            }
        }
        StatCache::load(path)
    }

    /// Keeps `cache`, the body of the file at `path` as it now stands. A cache read from no
    /// file (empty, its key all zero) is not kept: no header could ever name it.
    pub fn put(&self, path: &Path, mut cache: StatCache) {
        if cache.key == [0; 16] {
            return;
        }
        // Records whose write was called off and that come back unchanged (a scan's): their
        // write is scheduled again.
        if let Some(tmp) = cache.unwritten.take() {
            return self.put_and_write(&tmp, path, cache);
        }
        self.keep(Held {
            path: path.to_path_buf(),
            cache: std::sync::Arc::new(cache),
            writing: None,
            tmp: None,
        });
    }

    /// Keeps `cache` and writes it to `path` (through `tmp_dir`) on a background thread; where
    /// no thread can be started, writes it before returning.
    pub fn put_and_write(&self, tmp_dir: &Path, path: &Path, mut cache: StatCache) {
        cache.unwritten = None;
        let cache = std::sync::Arc::new(cache);
        let (shared, tmp, to) = (cache.clone(), tmp_dir.to_path_buf(), path.to_path_buf());
        let memo = std::sync::Arc::downgrade(&self.0);
        let (tell, told) = std::sync::mpsc::channel::<bool>();
        let begun = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = begun.clone();
        let writing = std::thread::Builder::new()
            .name("cairn-statcache".into())
            .spawn(move || {
                // Called off (false) before the delay ends: a newer cache supersedes this one.
                // Told to write (true), the delay over, or the memo gone: written.
                if let Ok(false) = told.recv_timeout(WRITE_DELAY) {
                    return Wrote::No;
                }
                // After any write this process left to finish on its own (see `Held::end`):
                // a newer cache is never renamed into place before an older one.
                let in_order = WRITE_ORDER.lock();
                // Called off while it waited for that one: superseded.
                if let Ok(false) = told.try_recv() {
                    return Wrote::No;
                }
                started.store(true, std::sync::atomic::Ordering::Release);
                let written = shared.save_settled(&tmp, &to);
                drop(in_order);
                let Ok(settled) = written else {
                    return Wrote::Yes(None);
                };
                Wrote::Yes(CacheMemo::install(&memo, &shared, settled).map(Box::new))
            });
        let writing = match writing {
            Ok(thread) => Some(Writer {
                thread,
                tell,
                begun,
            }),
            Err(_) => {
                let _ = cache.save(tmp_dir, path);
                None
            }
        };
        self.keep(Held {
            path: path.to_path_buf(),
            cache,
            writing,
            tmp: Some(tmp_dir.to_path_buf()),
        });
    }

    /// Puts `settled` (the cache read back from the file a writer thread just wrote) in place
    /// of `written` in the memo, when the memo still holds it and is waiting on this thread:
    /// the records in memory are dropped as soon as the file holds them, not at the next
    /// snapshot, and the thread is detached (its work is done). Otherwise gives `settled`
    /// back, for whoever waits on the thread.
    fn install(
        memo: &std::sync::Weak<parking_lot::Mutex<Option<Held>>>,
        written: &std::sync::Arc<StatCache>,
        settled: StatCache,
    ) -> Option<StatCache> {
        let Some(memo) = memo.upgrade() else {
            return Some(settled);
        };
        let mut held = memo.lock();
        let me = std::thread::current().id();
        let Some(h) = held.as_mut().filter(|h| {
            std::sync::Arc::ptr_eq(&h.cache, written)
                && h.writing
                    .as_ref()
                    .is_some_and(|w| w.thread.thread().id() == me)
        }) else {
            return Some(settled);
        };
        let detached = h.writing.take();
        let replaced = h.settle(settled);
        drop(held);
        // Outside the lock: the records, and this thread's own handle (never joined).
        drop((replaced, detached));
        None
    }

    fn keep(&self, held: Held) {
        // The one replaced (its write finished: it was waited for when taken) drops outside
        // the lock.
        let old = self.0.lock().replace(held);
        drop(old);
    }

    /// Whether the cache the last snapshot left is still waiting for its write, or being
    /// written.
    pub fn writing(&self) -> bool {
        self.0
            .lock()
            .as_ref()
            .and_then(|h| h.writing.as_ref())
            .is_some_and(|w| !w.thread.is_finished())
    }

    /// Whether the cache the last snapshot left is being written now (its delay is over): a
    /// snapshot that takes the cache meanwhile copies its records (the writer holds them) and
    /// has them written again.
    pub fn write_under_way(&self) -> bool {
        self.0
            .lock()
            .as_ref()
            .and_then(|h| h.writing.as_ref())
            .is_some_and(|w| {
                w.begun.load(std::sync::atomic::Ordering::Acquire) && !w.thread.is_finished()
            })
    }

    /// Waits until the cache the last snapshot left is written to its file.
    pub fn wait(&self) {
        let writing = self.0.lock().as_mut().and_then(|h| h.writing.take());
        let Some(Wrote::Yes(Some(settled))) = writing.map(|w| w.finish(true)) else {
            return;
        };
        // Still the cache it was written from (nothing replaced it meanwhile): the records
        // read back stand in for it.
        let mut held = self.0.lock();
        if let Some(h) = held.as_mut().filter(|h| h.writing.is_none()) {
            if h.cache.key == settled.key && h.cache.snapshot == settled.snapshot {
                drop(h.settle(*settled));
            }
        }
    }

    /// Forgets what it holds (after waiting for its write).
    pub fn clear(&self) {
        let old = self.0.lock().take();
        drop(old);
    }
}
