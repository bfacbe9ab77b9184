//! The parallel walker.
//!
//! Depth-first and parallel with rayon: each directory is opened relative to its parent's
//! descriptor with `O_NOFOLLOW`, its entries are read and `lstat`ed (never followed), excludes
//! are applied, files are looked up in the stat cache and read only when it does not vouch for
//! them, and trees are built bottom-up as the recursion returns.

use crate::error::{Error, Result};
use crate::exclude::{ExcludeReason, Excludes, IgnoreChain};
use crate::statcache::{CachedEntry, CachedKind, DirRecord, Name, StatCache, StatRecord, Update};
use crate::watch::Partial;
use cairn_store::relpath::join;
use cairn_store::{
    CancelToken, EntryKind, EntryRef, Hasher, ObjectId, ObjectKind, ObjectWriter, SkipReason,
    Skipped, Tree, TreeId,
};
use parking_lot::Mutex;
use rayon::prelude::*;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, RawDir};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{CStr, OsStr};
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// How many times a file that changes while it is read is read again.
pub const MAX_READS: usize = 5;

/// A test hook: called with a file's absolute path after each read of it and before the
/// descriptor is looked at again (see [`set_read_hook`]).
static READ_HOOK: std::sync::OnceLock<fn(&Path)> = std::sync::OnceLock::new();

/// Tests only: installs, once per process, a function called after every read of a file and
/// before its stat is compared, so a test can change the file between the two (a file that
/// never holds still). Returns `false` when one was installed already. The hook sees every
/// file of every snapshot of the process: let it act only on the paths it is meant for.
#[doc(hidden)]
pub fn set_read_hook(hook: fn(&Path)) -> bool {
    READ_HOOK.set(hook).is_ok()
}
const IGNORE_FILE_MAX: u64 = 1 << 20;

/// An entry left in place and out of the snapshot, and why (reported to restores).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    /// Path relative to the root, raw bytes.
    pub path: Vec<u8>,
    /// Why it was left out.
    pub reason: ExcludeReason,
    /// Whether it is a directory.
    pub is_dir: bool,
}

/// Where the walker puts what it reads.
pub(crate) enum Sink<'a> {
    /// Into the store.
    Store(&'a ObjectWriter<'a>),
    /// Nowhere: contents are hashed only, trees kept in memory.
    Hash(Mutex<HashMap<TreeId, Tree>>),
}

/// The capture rules of one walk.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub excludes: Excludes,
    pub gitignore: bool,
    pub max_file_bytes: u64,
    pub refuse_hard_links: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub files: AtomicU64,
    pub dirs: AtomicU64,
    pub symlinks: AtomicU64,
    pub bytes: AtomicU64,
    pub hashed: AtomicU64,
    pub hashed_bytes: AtomicU64,
    pub reused: AtomicU64,
    /// Directories whose entries were `lstat`ed (the others were taken from the cache).
    pub listed: AtomicU64,
    /// Directories of which only the entries a watcher named were `lstat`ed.
    pub named: AtomicU64,
}

pub(crate) struct Walker<'a> {
    pub root: PathBuf,
    /// The store's directory and Cairn's data directory (device, inode): left out wherever
    /// the walk meets them.
    pub store_dirs: Vec<(u64, u64)>,
    /// Paths (relative to the root) of files Cairn keeps beneath it, with their SQLite
    /// companions (`Options::own_files`): left out as the store is.
    pub own_paths: std::collections::HashSet<Vec<u8>>,
    pub rules: &'a Rules,
    pub sink: Sink<'a>,
    pub cache: &'a StatCache,
    /// Whether the cache's exclusion decisions were made under these rules.
    pub same_rules: bool,
    /// Whether every object taken from the cache must be looked up in the store (it has
    /// quarantined objects or broken indexes, which a rewrite of the content heals).
    pub check_objects: bool,
    pub cancel: &'a CancelToken,
    pub aborted: &'a AtomicBool,
    pub counters: &'a Counters,
    pub skipped: Mutex<Vec<Skipped>>,
    pub kept: Mutex<Vec<Kept>>,
    pub dirs: Mutex<Vec<Update>>,
    /// Files taken from the records restores made (see [`StatCache::primed`]), by path.
    pub primed_used: Mutex<Vec<(Vec<u8>, StatRecord)>>,
    /// What a watcher says changed since the cache was confirmed: every other directory
    /// keeps its record and tree without being looked at (see [`crate::watch`]).
    pub partial: Option<&'a Partial>,
}

/// A walked directory: its tree (stored, or the cache's when nothing in it changed) and the
/// tree's total size.
pub(crate) struct DirOut {
    pub id: TreeId,
    pub size: u64,
}

/// The record of an entry left out: only its type counts (a decision is reused for an entry
/// of the same name and type), so churn in an ignored file does not change its directory's
/// record.
fn excluded_record(name: &[u8], mode: u32, reason: ExcludeReason) -> CachedEntry {
    CachedEntry {
        name: Name::from(name),
        kind: CachedKind::Excluded(reason),
        stat: StatRecord {
            dev: 0,
            ino: 0,
            mode: mode & S_IFMT,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            blob: ObjectId([0; 32]),
        },
    }
}

/// The record of a directory entry: its mode and its tree (times change with every entry
/// made and removed inside, which the tree already says).
fn dir_record(name: &[u8], mode: u32, tree: TreeId, size: u64) -> CachedEntry {
    CachedEntry {
        name: Name::from(name),
        kind: CachedKind::Dir,
        stat: StatRecord {
            dev: 0,
            ino: 0,
            mode,
            size,
            mtime_ns: 0,
            ctime_ns: 0,
            blob: tree.object(),
        },
    }
}

const S_IFMT: u32 = 0o170000;
const S_IFDIR: u32 = 0o040000;

fn is_unreadable(e: Errno) -> bool {
    matches!(e, Errno::ACCESS | Errno::PERM | Errno::IO)
}

/// Whether an error met while reading means the entry cannot be read (skipped as
/// `unreadable`) rather than that the snapshot must fail.
fn is_unreadable_error(e: &Error) -> bool {
    // Only a failure to read the input; a failure to write the store fails the snapshot.
    errno_of(e).is_some_and(is_unreadable)
}

enum FileRead {
    Stored(ObjectId, StatRecord),
    Skip(SkipReason),
    Vanished,
}

/// The names of one directory, in one buffer, each followed by its NUL.
struct Listing {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Listing {
    fn name(&self, i: usize) -> &CStr {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        CStr::from_bytes_with_nul(&self.buf[start..self.ends[i]])
            .expect("each name was stored with one NUL at its end")
    }
}

impl Listing {
    /// The names the cache recorded for a directory (all of them, excluded ones included).
    fn of_record(record: &DirRecord) -> Listing {
        let mut out = Listing {
            buf: Vec::new(),
            ends: Vec::with_capacity(record.entries.len()),
        };
        for e in &record.entries {
            out.buf.extend_from_slice(&e.name);
            out.buf.push(0);
            out.ends.push(out.buf.len());
        }
        out
    }
}

/// Where a directory is: open, or beneath an open ancestor by a relative path. A directory
/// whose listing the stat cache vouches for is not opened for reading unless something in it
/// must be read: it is named by an `O_PATH` descriptor (see [`Handle::pin`]), or failing that
/// its entries are `lstat`ed by path from the ancestor. Only `lstat`s go by path (an entry is
/// trusted only if device, inode, size and times all match its record, so a symlink swapped in
/// on the way can only make a file look changed); every read goes through a descriptor opened
/// beneath the ancestor without following a symlink.
pub(crate) enum DirAt<'b> {
    Open(OwnedFd),
    Beneath { base: &'b OwnedFd, path: Vec<u8> },
}

pub(crate) struct Handle<'b> {
    at: DirAt<'b>,
    opened: std::sync::OnceLock<OwnedFd>,
}

impl<'b> Handle<'b> {
    pub(crate) fn new(at: DirAt<'b>) -> Self {
        Handle {
            at,
            opened: std::sync::OnceLock::new(),
        }
    }

    /// The directory, opened (once) if it was not: a base for `*at` calls. Once [`pin`]ned it
    /// is an `O_PATH` descriptor, which cannot be listed; only an untrusted directory is
    /// listed, and it is listed before anything could pin it.
    ///
    /// [`pin`]: Handle::pin
    fn fd(&self) -> std::io::Result<&OwnedFd> {
        match &self.at {
            DirAt::Open(fd) => Ok(fd),
            DirAt::Beneath { base, path } => {
                if let Some(fd) = self.opened.get() {
                    return Ok(fd);
                }
                let fd = cairn_store::fsutil::open_dir_beneath(*base, path)?;
                Ok(self.opened.get_or_init(|| fd))
            }
        }
    }

    /// Names the directory by an `O_PATH` descriptor when it is only reached by a path from an
    /// ancestor, so that each `lstat` of its entries resolves one name instead of the whole path
    /// again (the kernel's lookup of every component was the larger part of a walk in which
    /// nothing changed). Children are then reached from it too. Best effort: when it cannot be
    /// opened (gone, replaced), the entries are still `lstat`ed by path and fail as they would.
    fn pin(&self) {
        if let (DirAt::Beneath { base, path }, None) = (&self.at, self.opened.get()) {
            if let Ok(fd) = cairn_store::fsutil::open_dir_path_beneath(*base, path) {
                let _ = self.opened.set(fd);
            }
        }
    }

    /// `lstat` of the entry `name`.
    fn stat(&self, name: &CStr) -> std::result::Result<rustix::fs::Stat, Errno> {
        match (&self.at, self.opened.get()) {
            (DirAt::Open(fd), _) | (_, Some(fd)) => {
                rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
            }
            (DirAt::Beneath { base, path }, None) => {
                let mut p = Vec::with_capacity(path.len() + 1 + name.to_bytes().len());
                p.extend_from_slice(path);
                p.push(b'/');
                p.extend_from_slice(name.to_bytes());
                rustix::fs::statat(*base, OsStr::from_bytes(&p), AtFlags::SYMLINK_NOFOLLOW)
            }
        }
    }

    /// Where the subdirectory `name` is (not opened).
    fn child(&self, name: &[u8]) -> DirAt<'_> {
        match (&self.at, self.opened.get()) {
            (DirAt::Open(fd), _) | (_, Some(fd)) => DirAt::Beneath {
                base: fd,
                path: name.to_vec(),
            },
            (DirAt::Beneath { base, path }, None) => DirAt::Beneath {
                base,
                path: join(path, name),
            },
        }
    }
}

/// The `errno` behind an error, if it is one of reading the input.
fn errno_of(e: &Error) -> Option<Errno> {
    let source = match e {
        Error::Io { source, .. } => source,
        Error::Store(cairn_store::Error::Io {
            action: "read",
            source,
            ..
        }) => source,
        _ => return None,
    };
    source.raw_os_error().map(Errno::from_raw_os_error)
}

thread_local! {
    static DIRENT_BUF: std::cell::RefCell<Vec<MaybeUninit<u8>>> =
        std::cell::RefCell::new(vec![MaybeUninit::uninit(); 64 << 10]);
}

/// Lists the directory open at `fd` without `.` and `..` (with `getdents64` on the descriptor
/// itself: no second descriptor is opened).
fn list(fd: &OwnedFd) -> std::io::Result<Listing> {
    DIRENT_BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        let mut out = Listing {
            buf: Vec::new(),
            ends: Vec::new(),
        };
        let mut dir = RawDir::new(fd.as_fd(), &mut buf[..]);
        while let Some(entry) = dir.next() {
            let entry = entry?;
            let name = entry.file_name().to_bytes_with_nul();
            if name == b".\0" || name == b"..\0" {
                continue;
            }
            out.buf.extend_from_slice(name);
            out.ends.push(out.buf.len());
        }
        Ok(out)
    })
}

/// The ignore files a directory may hold, in the order their rules apply.
const IGNORE_FILES: [&CStr; 2] = [c".cairnignore", c".gitignore"];

/// `records` sorted by name, when those before `base` already are (the record's entries a
/// partial walk kept) and those from it are few, in any order (the ones it looked at): each
/// of these goes where a search puts it, and the entries are moved rather than sorted again.
fn merge_sorted(mut records: Vec<CachedEntry>, base: usize) -> Vec<CachedEntry> {
    let mut tail = records.split_off(base);
    if tail.is_empty() {
        return records;
    }
    tail.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    // A few (a watched snapshot's changed files in one directory): each put in its place,
    // moving what follows it, rather than every entry moved into a new vector.
    if tail.len() <= MERGE_IN_PLACE {
        for t in tail {
            let at = records.partition_point(|e| e.name < t.name);
            records.insert(at, t);
        }
        return records;
    }
    let at: Vec<usize> = tail
        .iter()
        .map(|t| records.partition_point(|e| e.name < t.name))
        .collect();
    let mut out = Vec::with_capacity(records.len() + tail.len());
    let mut head = records.into_iter();
    let mut moved = 0;
    for (t, at) in tail.into_iter().zip(at) {
        out.extend(head.by_ref().take(at - moved));
        moved = at;
        out.push(t);
    }
    out.extend(head);
    out
}

/// Up to how many entries [`merge_sorted`] inserts one by one.
const MERGE_IN_PLACE: usize = 8;

/// Whether one of `entries` is a regular file with more than one link.
fn has_linked_file(entries: &[(&CStr, rustix::fs::Stat)]) -> bool {
    entries.iter().any(|(_, st)| {
        st.st_nlink > 1
            && rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
    })
}

/// Where [`Walker::look_all`] looks: the directory, its cache record, and how decisions are
/// made beneath it.
struct Look<'a, 'h> {
    dir: &'a Handle<'h>,
    rel: &'a [u8],
    cached: Option<&'a DirRecord>,
    decisions: bool,
    chain: &'a Arc<IgnoreChain>,
    partial: bool,
}

/// Files, bytes and reused files counted by [`Walker::look`].
#[derive(Default)]
struct Tally {
    files: u64,
    bytes: u64,
    reused: u64,
}

/// An entry whose content must be looked at: a directory to walk, or a file or link the cache
/// does not vouch for.
struct Work<'l> {
    name: &'l CStr,
    st: rustix::fs::Stat,
    cached: Option<&'l CachedEntry>,
}

impl Walker<'_> {
    fn check_stop(&self) -> Result<()> {
        if self.aborted.load(Ordering::Relaxed) {
            return Err(Error::AbortedByCallback);
        }
        if self.cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    fn abs(&self, rel: &[u8]) -> PathBuf {
        self.root.join(OsStr::from_bytes(rel))
    }

    fn skip(&self, path: Vec<u8>, reason: SkipReason, is_dir: bool) {
        self.skipped.lock().push(Skipped {
            path,
            reason,
            is_dir,
        });
    }

    fn keep(&self, path: Vec<u8>, reason: ExcludeReason, is_dir: bool) {
        self.kept.lock().push(Kept {
            path,
            reason,
            is_dir,
        });
    }

    fn put_small(&self, bytes: &[u8]) -> Result<ObjectId> {
        match &self.sink {
            Sink::Store(w) => Ok(w.put(ObjectKind::Blob, bytes)?.id),
            Sink::Hash(_) => Ok(ObjectId::of(bytes)),
        }
    }

    /// Whether an object the cache names may be used as it is.
    fn present(&self, id: &ObjectId) -> bool {
        match &self.sink {
            Sink::Store(w) if self.check_objects => w.contains(id),
            _ => true,
        }
    }

    fn put_file(&self, file: &mut std::fs::File, size: u64, rel: &[u8]) -> Result<(ObjectId, u64)> {
        match &self.sink {
            Sink::Store(w) => {
                let out = w
                    .put_blob_from(file, size)
                    .map_err(|e| e.at(self.abs(rel)))?;
                Ok((out.id, out.size))
            }
            Sink::Hash(_) => {
                let mut h = Hasher::new();
                let n = h
                    .update_from(file)
                    .map_err(|e| Error::io("read", self.abs(rel), e))?;
                Ok((h.finish(), n))
            }
        }
    }

    /// Walks the directory at `dir` (at `rel`, empty for the root) and stores its tree.
    /// `cached_tree` is the tree the cache says it had; `decisions` whether the exclusion
    /// decisions the cache holds for the directories above still stand (same rules, same
    /// ignore files); `fresh` the directory's own `lstat` (its listing is taken from the cache
    /// when that matches the cache's record of it); `partial` whether a watcher's answer
    /// decides what is looked at beneath it (off beneath a directory whose ignore files
    /// changed, or one new to the cache: everything there is walked).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn walk_dir(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        chain: &Arc<IgnoreChain>,
        cached_tree: Option<(TreeId, u64)>,
        decisions: bool,
        fresh: Option<StatRecord>,
        partial: bool,
    ) -> Result<DirOut> {
        self.check_stop()?;
        // A directory off every path to a change whose subtree was counted and has not
        // changed since: reused without reading its record (a watched snapshot passes every
        // subdirectory of each directory on the way to a change, hundreds of records to
        // read and decode otherwise). A subtree is counted only from a record that vouches
        // for it and forgotten when a record in it changes (see
        // [`StatCache::count_subtree`]), so this is what the `reuse` below would decide.
        if let (true, Some(scope), Some((id, size))) = (partial, self.partial, cached_tree) {
            if !self.check_objects
                && !scope.in_subtree(rel)
                && !scope.dirs.contains(rel)
                && !scope.ancestors.contains(rel)
            {
                if let Some(t) = self.cache.counted(rel) {
                    self.taken(t.files, t.bytes, t.symlinks, t.dirs, t.kept.clone());
                    return Ok(DirOut { id, size });
                }
            }
        }
        let record = self.cache.dir(rel);
        let cached = record.as_deref();
        let mut partial = partial;
        if let (true, Some(scope)) = (partial, self.partial) {
            if scope.in_subtree(rel) {
                partial = false;
            } else if let (Some(c), Some((id, size))) = (cached, cached_tree) {
                if c.stat.is_some() && !self.check_objects {
                    // Rebuilt from its record: on the way to a change (no entry of its own
                    // changed), or with the entries the watcher named.
                    let names: Option<&[Vec<u8>]> = if scope.dirs.contains(rel) {
                        scope.names.get(rel).map(Vec::as_slice)
                    } else if scope.ancestors.contains(rel) {
                        Some(&[])
                    } else if self.reuse(rel) {
                        return Ok(DirOut { id, size });
                    } else {
                        None
                    };
                    if let Some(names) = names {
                        if let Some(out) =
                            self.through(dir, rel, chain, (id, size), c, names, decisions)?
                        {
                            return Ok(out);
                        }
                    }
                }
            }
        }
        self.counters.dirs.fetch_add(1, Ordering::Relaxed);
        self.counters.listed.fetch_add(1, Ordering::Relaxed);
        let listing = match (cached, &fresh) {
            (Some(c), Some(f)) if c.stat.is_some_and(|s| self.cache.trusts(&s, f)) => {
                dir.pin();
                Listing::of_record(c)
            }
            _ => {
                let fd = dir
                    .fd()
                    .map_err(|e| Error::io("open directory", self.abs(rel), e))?;
                list(fd).map_err(|e| Error::io("list", self.abs(rel), e))?
            }
        };
        // lstat each entry; one that vanished since the listing is left out.
        let mut entries: Vec<(&CStr, rustix::fs::Stat)> = Vec::with_capacity(listing.ends.len());
        for i in 0..listing.ends.len() {
            let name = listing.name(i);
            match dir.stat(name) {
                Ok(st) => entries.push((name, st)),
                Err(Errno::NOENT) => {}
                Err(e) if is_unreadable(e) => {
                    self.skip(join(rel, name.to_bytes()), SkipReason::Unreadable, false)
                }
                Err(e) => {
                    return Err(Error::io(
                        "lstat",
                        self.abs(&join(rel, name.to_bytes())),
                        e.into(),
                    ))
                }
            }
        }
        let decisions = decisions
            && self.same_rules
            && cached.is_some_and(|c| self.ignore_files_unchanged(&entries, c));
        // Ignore files changed here (or the directory is new to the cache): every decision
        // beneath is made again, so everything beneath is walked.
        let partial = partial && decisions;
        let chain = if self.rules.gitignore {
            self.ignore_files(dir, rel, &entries, chain)?
        } else {
            chain.clone()
        };
        let mut records: Vec<CachedEntry> = Vec::with_capacity(entries.len());
        let look = Look {
            dir,
            rel,
            cached,
            decisions,
            chain: &chain,
            partial,
        };
        self.look_all(&look, &entries, &mut records)?;
        records.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let out = self.tree_of(&records, cached, cached_tree, None)?;
        // A listing is vouched for only when every name in it has a record: a file skipped
        // (too large, hard-linked, unreadable, changing) or gone has none, and a listing taken
        // from the records would leave it out of every later snapshot, however the rules
        // change or the file is edited, while the directory's own `lstat` stays the same
        // (issue 28). Such a directory is listed again by the next walk.
        //
        // Nor is a listing that holds a file with more than one link: a write through a link
        // outside the directory makes no inotify event in it, so a watched snapshot must
        // always look at such a directory (a walk finds the change by the file's `lstat`).
        let linked = has_linked_file(&entries);
        let fresh = fresh.filter(|_| records.len() == listing.ends.len() && !linked);
        let new = if cached.is_some_and(|c| c.entries == records && c.stat == fresh) {
            Update::Same(rel.to_vec())
        } else {
            let gone = cached.map(|c| c.subdirs_gone(&records));
            let record = DirRecord {
                path: rel.to_vec(),
                stat: fresh,
                entries: records,
            };
            Update::Fresh(record, gone)
        };
        self.dirs.lock().push(new);
        Ok(out)
    }

    /// Decides what one `lstat`ed entry of the directory `at` is: left out (its record
    /// pushed), vouched for by the cache or a restore's record (its record pushed and
    /// counted in `tally`), skipped, or to be looked at (pushed on `work`).
    fn look<'l>(
        &self,
        at: &Look<'l, '_>,
        name: &'l CStr,
        st: &rustix::fs::Stat,
        tally: &mut Tally,
        records: &mut Vec<CachedEntry>,
        work: &mut Vec<Work<'l>>,
    ) {
        let (rel, decisions) = (at.rel, at.decisions);
        let name_b = name.to_bytes();
        let c = at.cached.and_then(|d| d.get(name_b));
        let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
        let is_dir = ft == rustix::fs::FileType::Directory;
        if cairn_store::fsutil::staged_journal(name_b).is_some() {
            // A restore's staged file (one a crash, or a copy of the tree, left): Cairn's
            // own, never the user's. Recorded as skipped, so restores leave it alone.
            self.skip(join(rel, name_b), SkipReason::Staged, is_dir);
            return;
        }
        let reason = if Excludes::is_default(name_b)
            || (is_dir && self.store_dirs.contains(&(st.st_dev, st.st_ino)))
            || (!self.own_paths.is_empty() && self.own_paths.contains(&join(rel, name_b)))
        {
            Some(ExcludeReason::Default)
        } else if let Some(c) =
            c.filter(|c| decisions && c.stat.mode & S_IFMT == st.st_mode & S_IFMT)
        {
            match c.kind {
                CachedKind::Excluded(r) => Some(r),
                _ => None,
            }
        } else {
            self.excluded(&join(rel, name_b), name_b, is_dir, at.chain)
        };
        if let Some(reason) = reason {
            self.keep(join(rel, name_b), reason, is_dir);
            records.push(excluded_record(name_b, st.st_mode, reason));
            return;
        }
        let fresh = StatRecord::of(st);
        let trusted = c.filter(|c| {
            self.cache.trusts(&c.stat, &fresh)
                && self.present(&c.stat.blob)
                && match (c.kind, ft) {
                    (CachedKind::File, rustix::fs::FileType::RegularFile) => {
                        fresh.size <= self.rules.max_file_bytes
                            && !(self.rules.refuse_hard_links && st.st_nlink > 1)
                    }
                    (CachedKind::Symlink, rustix::fs::FileType::Symlink) => true,
                    _ => false,
                }
        });
        // A file a restore wrote and recorded, unchanged since: its blob, without reading
        // it (the record's own proof stands in for the racy rule; see `Written`).
        if trusted.is_none()
            && self.cache.has_primed()
            && ft == rustix::fs::FileType::RegularFile
            && fresh.size <= self.rules.max_file_bytes
            && !(self.rules.refuse_hard_links && st.st_nlink > 1)
        {
            let path = join(rel, name_b);
            if let Some(p) = self
                .cache
                .primed(&path, &fresh)
                .filter(|p| self.present(&p.blob))
            {
                tally.files += 1;
                tally.bytes += p.size;
                tally.reused += 1;
                records.push(CachedEntry {
                    name: Name::from(name_b),
                    kind: CachedKind::File,
                    stat: *p,
                });
                self.primed_used.lock().push((path, *p));
                return;
            }
        }
        match trusted {
            Some(c) => {
                if c.kind == CachedKind::File {
                    tally.files += 1;
                    tally.bytes += c.stat.size;
                    tally.reused += 1;
                } else {
                    self.counters.symlinks.fetch_add(1, Ordering::Relaxed);
                }
                records.push(c.clone());
            }
            None => match ft {
                rustix::fs::FileType::Directory
                | rustix::fs::FileType::RegularFile
                | rustix::fs::FileType::Symlink => work.push(Work {
                    name,
                    st: *st,
                    cached: c,
                }),
                _ => {
                    self.keep(join(rel, name_b), ExcludeReason::Special, false);
                    records.push(excluded_record(name_b, st.st_mode, ExcludeReason::Special));
                }
            },
        }
    }

    /// Decides each of `entries` (`lstat`ed, of the directory `at`) with [`Walker::look`],
    /// reads those the cache does not vouch for (in parallel) and pushes every record on
    /// `records`; returns how many it pushed.
    fn look_all<'l>(
        &self,
        at: &Look<'l, '_>,
        entries: &[(&'l CStr, rustix::fs::Stat)],
        records: &mut Vec<CachedEntry>,
    ) -> Result<usize> {
        let before = records.len();
        let mut work: Vec<Work<'l>> = Vec::new();
        let mut tally = Tally::default();
        for (name, st) in entries {
            self.look(at, name, st, &mut tally, records, &mut work);
        }
        self.tally(&tally);
        let one = |w: &Work<'_>| self.entry(at.dir, at.rel, w, at.chain, at.decisions, at.partial);
        let worked: Vec<Result<Option<CachedEntry>>> = if work.len() > 1 {
            work.par_iter().map(one).collect()
        } else {
            work.iter().map(one).collect()
        };
        for r in worked {
            if let Some(e) = r? {
                records.push(e);
            }
        }
        Ok(records.len() - before)
    }

    /// Adds what [`Walker::look`] counted to the walk's counters.
    fn tally(&self, t: &Tally) {
        self.counters.files.fetch_add(t.files, Ordering::Relaxed);
        self.counters.bytes.fetch_add(t.bytes, Ordering::Relaxed);
        self.counters.reused.fetch_add(t.reused, Ordering::Relaxed);
    }

    /// The tree of a directory's `records` (sorted by name): the cached one when its included
    /// entries are the cache's (`known`: whether they are, when the caller knows, so that
    /// they are not compared), else built and stored.
    fn tree_of(
        &self,
        records: &[CachedEntry],
        cached: Option<&DirRecord>,
        cached_tree: Option<(TreeId, u64)>,
        known: Option<bool>,
    ) -> Result<DirOut> {
        let included = |e: &&CachedEntry| !matches!(e.kind, CachedKind::Excluded(_));
        let same_tree = known.unwrap_or_else(|| {
            cached.is_some_and(|c| {
                records
                    .iter()
                    .filter(included)
                    .eq(c.entries.iter().filter(included))
            })
        });
        match cached_tree {
            Some((id, size)) if same_tree && self.present(&id.object()) => Ok(DirOut { id, size }),
            _ => {
                let entries = records.iter().filter(included).map(|e| EntryRef {
                    name: &e.name,
                    kind: match e.kind {
                        CachedKind::Dir => EntryKind::Dir,
                        CachedKind::Symlink => EntryKind::Symlink,
                        _ => EntryKind::File,
                    },
                    mode: e.stat.mode,
                    size: e.stat.size,
                    id: e.stat.blob,
                });
                match &self.sink {
                    // Encoded from the records, whose names are not copied.
                    Sink::Store(w) => {
                        let (bytes, size) = cairn_store::encode_sorted(entries)?;
                        let id = TreeId::from(w.put(ObjectKind::Tree, &bytes)?.id);
                        Ok(DirOut { id, size })
                    }
                    Sink::Hash(trees) => {
                        let tree = Tree::new(entries.map(|e| e.to_entry()).collect())?;
                        let size = tree.total_size();
                        let id = tree.id();
                        trees.lock().insert(id, tree);
                        Ok(DirOut { id, size })
                    }
                }
            }
        }
    }

    /// Counts what was taken from the cache's records without looking (files, their bytes,
    /// links, directories) and reports its excluded entries, as a walk would have.
    fn taken(&self, files: u64, bytes: u64, symlinks: u64, dirs: u64, kept: Vec<Kept>) {
        let c = self.counters;
        c.files.fetch_add(files, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.reused.fetch_add(files, Ordering::Relaxed);
        c.symlinks.fetch_add(symlinks, Ordering::Relaxed);
        c.dirs.fetch_add(dirs, Ordering::Relaxed);
        if !kept.is_empty() {
            self.kept.lock().extend(kept);
        }
    }

    /// A directory the watcher vouches for, with everything beneath it (nothing there changed
    /// since the cache was confirmed): its records are counted and its excluded entries
    /// reported as a walk would, without a system call. `false` when some directory beneath
    /// has no record, or one the cache does not vouch for (it held an entry skipped, or a
    /// file with several links): then the directory is walked.
    fn reuse(&self, rel: &[u8]) -> bool {
        let Some(t) = self.cache.count_subtree(rel) else {
            return false;
        };
        self.taken(t.files, t.bytes, t.symlinks, t.dirs, t.kept.clone());
        true
    }

    /// A directory whose own entries did not change but beneath which something did, or
    /// whose changed entries the watcher named (`names`, sorted): its entries are the cache's
    /// record (not `lstat`ed) but for those named, which are `lstat`ed and looked at as a walk
    /// does; each subdirectory on the way to a change is walked, and the tree is built again
    /// if something changed. `None` when what it finds does not agree with the record (an
    /// ignore file named, or one or a subdirectory gone or replaced since): then the
    /// directory is walked.
    #[allow(clippy::too_many_arguments)]
    fn through(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        chain: &Arc<IgnoreChain>,
        tree: (TreeId, u64),
        record: &DirRecord,
        names: &[Vec<u8>],
        decisions: bool,
    ) -> Result<Option<DirOut>> {
        let scope = self.partial.expect("only called in a partial walk");
        if names
            .iter()
            .any(|n| IGNORE_FILES.iter().any(|f| f.to_bytes() == n.as_slice()))
        {
            return Ok(None);
        }
        let mut ignore: Vec<(&CStr, rustix::fs::Stat)> = Vec::new();
        if self.rules.gitignore {
            for name in IGNORE_FILES {
                if record.get(name.to_bytes()).is_some() {
                    match dir.stat(name) {
                        Ok(st) => ignore.push((name, st)),
                        Err(_) => return Ok(None),
                    }
                }
            }
        }
        if !self.ignore_files_unchanged(&ignore, record) {
            return Ok(None);
        }
        let chain = if self.rules.gitignore {
            self.ignore_files(dir, rel, &ignore, chain)?
        } else {
            chain.clone()
        };
        // The named entries still there, as they are now.
        let mut named: Vec<(std::ffi::CString, rustix::fs::Stat)> = Vec::with_capacity(names.len());
        // An entry that cannot be `lstat`ed is left out, so the listing is not vouched for.
        let mut unreadable = false;
        for n in names {
            let Ok(name) = std::ffi::CString::new(n.clone()) else {
                return Ok(None);
            };
            match dir.stat(&name) {
                Ok(st) => named.push((name, st)),
                Err(Errno::NOENT) => {}
                Err(e) if is_unreadable(e) => {
                    self.skip(join(rel, n), SkipReason::Unreadable, false);
                    unreadable = true;
                }
                Err(e) => return Err(Error::io("lstat", self.abs(&join(rel, n)), e.into())),
            }
        }
        // The record's entries but the named ones (both sorted by name): the slices between
        // them, found by a search per name rather than a comparison per entry.
        let mut records: Vec<CachedEntry> = Vec::with_capacity(record.entries.len() + 1);
        let mut from = 0;
        for n in names {
            let rest = &record.entries[from..];
            if let Ok(at) = rest.binary_search_by(|e| e.name.as_bytes().cmp(n)) {
                records.extend_from_slice(&rest[..at]);
                from += at + 1;
            }
        }
        records.extend_from_slice(&record.entries[from..]);
        let mut changed = !names.is_empty();
        // A subdirectory's record replaced or removed below: the entries differ from the
        // record's whatever the named ones turn out to be.
        let mut subdir_changed = false;
        // What is taken from the record without looking: its files and links, and each
        // subdirectory off the way to every change, whole (added up here and counted once,
        // after every subdirectory that could send the directory to be walked was looked at).
        let (mut files, mut bytes, mut symlinks, mut dirs) = (0u64, 0u64, 0u64, 1u64);
        let mut kept = Vec::new();
        // The subdirectories on the way to a change (or that the cache cannot vouch for),
        // each `lstat`ed first: one gone or replaced since leaves the directory to be walked
        // before anything beneath it was.
        let mut descend: Vec<(usize, std::ffi::CString, rustix::fs::Stat)> = Vec::new();
        // Each subdirectory's path, written over the directory's own.
        let mut path = rel.to_vec();
        if !rel.is_empty() {
            path.push(b'/');
        }
        let prefix = path.len();
        for (i, e) in records.iter().enumerate() {
            match e.kind {
                CachedKind::File => {
                    files += 1;
                    bytes += e.stat.size;
                }
                CachedKind::Symlink => symlinks += 1,
                CachedKind::Excluded(reason) => kept.push(Kept {
                    path: join(rel, &e.name),
                    reason,
                    is_dir: e.stat.mode & S_IFMT == S_IFDIR,
                }),
                CachedKind::Dir => {
                    path.truncate(prefix);
                    path.extend_from_slice(&e.name);
                    // A subdirectory off the way to every change is taken whole from the
                    // cache (as `reuse` takes it), unless the cache cannot vouch for all of it.
                    let off_the_way = !(scope.dirs.contains(&path)
                        || scope.ancestors.contains(&path)
                        || scope.in_subtree(&path));
                    if let Some(t) = off_the_way
                        .then(|| self.cache.count_subtree(&path))
                        .flatten()
                    {
                        files += t.files;
                        bytes += t.bytes;
                        symlinks += t.symlinks;
                        dirs += t.dirs;
                        kept.extend(t.kept.iter().cloned());
                        continue;
                    }
                    let Ok(name) = std::ffi::CString::new(e.name.to_vec()) else {
                        return Ok(None);
                    };
                    match dir.stat(&name) {
                        Ok(st)
                            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::Directory =>
                        {
                            descend.push((i, name, st));
                        }
                        _ => return Ok(None),
                    }
                }
            }
        }
        // Walked in rayon's pool when there are several (changes in several subtrees), as a
        // listing's entries are (`look_all`).
        let one = |(i, name, st): &(usize, std::ffi::CString, rustix::fs::Stat)| {
            let work = Work {
                name,
                st: *st,
                cached: Some(&records[*i]),
            };
            self.entry(dir, rel, &work, &chain, true, true)
        };
        let walked: Vec<Result<Option<CachedEntry>>> = if descend.len() > 1 {
            descend.par_iter().map(one).collect()
        } else {
            descend.iter().map(one).collect()
        };
        // From the last, so that a removal leaves the places still to come where they were.
        for ((i, _, _), now) in descend.iter().zip(walked).rev() {
            match now? {
                Some(new) => {
                    if new != records[*i] {
                        records[*i] = new;
                        changed = true;
                        subdir_changed = true;
                    }
                }
                None => {
                    records.remove(*i);
                    changed = true;
                    subdir_changed = true;
                }
            }
        }
        self.taken(files, bytes, symlinks, dirs, kept);
        if !changed {
            return Ok(Some(DirOut {
                id: tree.0,
                size: tree.1,
            }));
        }
        // The named entries, looked at as a walk looks at a listing's.
        if !names.is_empty() {
            self.counters.named.fetch_add(1, Ordering::Relaxed);
        }
        let present: Vec<(&CStr, rustix::fs::Stat)> =
            named.iter().map(|(n, st)| (n.as_c_str(), *st)).collect();
        let look = Look {
            dir,
            rel,
            cached: Some(record),
            decisions: decisions && self.same_rules,
            chain: &chain,
            partial: true,
        };
        let base = records.len();
        let recorded = self.look_all(&look, &present, &mut records)?;
        let records = merge_sorted(records, base);
        // The same entries as the record's when no subdirectory's changed and each named one
        // is as the record has it (or absent from both): every other entry is the record's.
        // The same tree when that holds of the entries it includes (not the excluded ones).
        let now = |n: &[u8]| {
            records
                .binary_search_by(|e| e.name.as_bytes().cmp(n))
                .ok()
                .map(|i| &records[i])
        };
        fn included(e: Option<&CachedEntry>) -> Option<&CachedEntry> {
            e.filter(|e| !matches!(e.kind, CachedKind::Excluded(_)))
        }
        let same_entries = !subdir_changed && names.iter().all(|n| now(n) == record.get(n));
        let same_tree = !subdir_changed
            && names
                .iter()
                .all(|n| included(now(n)) == included(record.get(n)));
        let out = self.tree_of(&records, Some(record), Some(tree), Some(same_tree))?;
        // As for a listing (see `walk_dir`): vouched for only when every entry present has a
        // record and none is a file with several links.
        let vouched = recorded == present.len() && !has_linked_file(&present) && !unreadable;
        let stat = record.stat.filter(|_| vouched);
        let new = if same_entries && record.stat == stat {
            Update::Same(rel.to_vec())
        } else {
            let gone = Some(record.subdirs_gone(&records));
            let new = DirRecord {
                path: rel.to_vec(),
                stat,
                entries: records,
            };
            Update::Fresh(new, gone)
        };
        self.dirs.lock().push(new);
        Ok(Some(out))
    }

    /// Whether this directory's `.cairnignore` and `.gitignore` are as the cache saw them
    /// (both absent, or both present with the same, non-racy `lstat`).
    fn ignore_files_unchanged(
        &self,
        entries: &[(&CStr, rustix::fs::Stat)],
        cached: &DirRecord,
    ) -> bool {
        IGNORE_FILES.iter().map(|f| f.to_bytes()).all(|wanted| {
            let now = entries.iter().find(|(n, _)| n.to_bytes() == wanted);
            match (now, cached.get(wanted)) {
                (None, None) => true,
                (Some((_, st)), Some(c)) => {
                    c.kind == CachedKind::File && self.cache.trusts(&c.stat, &StatRecord::of(st))
                }
                _ => false,
            }
        })
    }

    fn ignore_files(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        entries: &[(&CStr, rustix::fs::Stat)],
        chain: &Arc<IgnoreChain>,
    ) -> Result<Arc<IgnoreChain>> {
        let mut texts = Vec::new();
        for wanted in IGNORE_FILES.map(CStr::to_bytes) {
            let Some((name, st)) = entries.iter().find(|(n, _)| n.to_bytes() == wanted) else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
                || st.st_size as u64 > IGNORE_FILE_MAX
            {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd = dir
                .fd()
                .map_err(|e| Error::io("open directory", self.abs(rel), e))?;
            if let Ok(f) = rustix::fs::openat(fd, *name, flags, Mode::empty()) {
                let mut text = Vec::new();
                let mut file = std::fs::File::from(f);
                if (&mut file)
                    .take(IGNORE_FILE_MAX)
                    .read_to_end(&mut text)
                    .is_ok()
                {
                    texts.push(text);
                }
            }
        }
        if texts.is_empty() {
            return Ok(chain.clone());
        }
        Ok(IgnoreChain::child(chain, &self.abs(rel), &texts))
    }

    /// Whether a glob or an ignore file leaves out the entry at `rel_path` (the default
    /// excludes are checked by the caller).
    fn excluded(
        &self,
        rel_path: &[u8],
        name: &[u8],
        is_dir: bool,
        chain: &IgnoreChain,
    ) -> Option<ExcludeReason> {
        if self.rules.excludes.glob_matches(rel_path, name) {
            return Some(ExcludeReason::Glob);
        }
        if self.rules.gitignore
            && !chain.is_empty()
            && chain.is_ignored(&self.abs(rel_path), is_dir)
        {
            return Some(ExcludeReason::Ignored);
        }
        None
    }

    /// Looks at the content of one entry the cache does not vouch for (or a directory, which
    /// is always walked): its record, or `None` when it is skipped or vanished.
    fn entry(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        w: &Work<'_>,
        chain: &Arc<IgnoreChain>,
        decisions: bool,
        partial: bool,
    ) -> Result<Option<CachedEntry>> {
        self.check_stop()?;
        let name = w.name;
        let st = &w.st;
        let name_b = name.to_bytes();
        let path = join(rel, name_b);
        let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
        if ft == rustix::fs::FileType::Directory {
            let cached_tree = w
                .cached
                .filter(|c| c.kind == CachedKind::Dir)
                .map(|c| (TreeId::from(c.stat.blob), c.stat.size));
            let sub = Handle::new(dir.child(name_b));
            return match self.walk_dir(
                &sub,
                &path,
                chain,
                cached_tree,
                decisions,
                Some(StatRecord::of(st)),
                partial,
            ) {
                Ok(out) => Ok(Some(dir_record(name_b, st.st_mode, out.id, out.size))),
                // Gone since it was listed.
                Err(e) if errno_of(&e) == Some(Errno::NOENT) => Ok(None),
                Err(e)
                    if matches!(
                        errno_of(&e),
                        Some(Errno::NOTDIR | Errno::LOOP | Errno::XDEV)
                    ) =>
                {
                    // Replaced by something else since the lstat.
                    self.skip(path, SkipReason::Changing, true);
                    Ok(None)
                }
                Err(e) if is_unreadable_error(&e) => {
                    self.skip(path, SkipReason::Unreadable, true);
                    Ok(None)
                }
                Err(e) => Err(e),
            };
        }
        let fd = match dir.fd() {
            Ok(fd) => fd,
            Err(e) => {
                return match Errno::from_io_error(&e) {
                    // The directory went, or was replaced, since it was listed.
                    Some(Errno::NOENT) => Ok(None),
                    Some(Errno::NOTDIR | Errno::LOOP | Errno::XDEV) => {
                        self.skip(path, SkipReason::Changing, false);
                        Ok(None)
                    }
                    Some(e) if is_unreadable(e) => {
                        self.skip(path, SkipReason::Unreadable, false);
                        Ok(None)
                    }
                    _ => Err(Error::io("open directory", self.abs(rel), e)),
                };
            }
        };
        match ft {
            rustix::fs::FileType::Symlink => {
                let target = match rustix::fs::readlinkat(fd, name, Vec::new()) {
                    Ok(t) => t.into_bytes(),
                    Err(Errno::NOENT) => return Ok(None),
                    Err(Errno::INVAL) => {
                        self.skip(path, SkipReason::Changing, false);
                        return Ok(None);
                    }
                    Err(e) if is_unreadable(e) => {
                        self.skip(path, SkipReason::Unreadable, false);
                        return Ok(None);
                    }
                    Err(e) => return Err(Error::io("read link", self.abs(&path), e.into())),
                };
                let id = self.put_small(&target)?;
                self.counters.symlinks.fetch_add(1, Ordering::Relaxed);
                Ok(Some(CachedEntry {
                    name: Name::from(name_b),
                    kind: CachedKind::Symlink,
                    stat: StatRecord {
                        size: target.len() as u64,
                        blob: id,
                        ..StatRecord::of(st)
                    },
                }))
            }
            _ => self.file(fd, path, name, st),
        }
    }

    fn file(
        &self,
        fd: &OwnedFd,
        path: Vec<u8>,
        name: &CStr,
        st: &rustix::fs::Stat,
    ) -> Result<Option<CachedEntry>> {
        if self.rules.refuse_hard_links && st.st_nlink > 1 {
            self.skip(path, SkipReason::HardLink, false);
            return Ok(None);
        }
        if st.st_size as u64 > self.rules.max_file_bytes {
            self.skip(path, SkipReason::TooLarge, false);
            return Ok(None);
        }
        let (blob, record) = match self.read_file(fd, &path, name)? {
            FileRead::Stored(id, rec) => (id, rec),
            FileRead::Skip(reason) => {
                self.skip(path, reason, false);
                return Ok(None);
            }
            FileRead::Vanished => return Ok(None),
        };
        self.counters.files.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(record.size, Ordering::Relaxed);
        Ok(Some(CachedEntry {
            name: Name::from(name.to_bytes()),
            kind: CachedKind::File,
            stat: StatRecord { blob, ..record },
        }))
    }

    /// Reads a file whole, again while it changes under us, up to [`MAX_READS`] times: the
    /// descriptor's stat before and after the read must agree (and the length read must be the
    /// size), so what is recorded is one whole version of the file, never a torn mix.
    fn read_file(&self, fd: &OwnedFd, path: &[u8], name: &CStr) -> Result<FileRead> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        for _ in 0..MAX_READS {
            self.check_stop()?;
            let f = match rustix::fs::openat(fd, name, flags, Mode::empty()) {
                Ok(f) => f,
                Err(Errno::NOENT) => return Ok(FileRead::Vanished),
                Err(Errno::LOOP) | Err(Errno::NXIO) => {
                    return Ok(FileRead::Skip(SkipReason::Changing))
                }
                Err(e) if is_unreadable(e) => return Ok(FileRead::Skip(SkipReason::Unreadable)),
                Err(e) => return Err(Error::io("open", self.abs(path), e.into())),
            };
            let before = match rustix::fs::fstat(&f) {
                Ok(st) => st,
                Err(e) => return Err(Error::io("stat", self.abs(path), e.into())),
            };
            if rustix::fs::FileType::from_raw_mode(before.st_mode)
                != rustix::fs::FileType::RegularFile
            {
                return Ok(FileRead::Skip(SkipReason::Changing));
            }
            let rec_before = StatRecord::of(&before);
            if rec_before.size > self.rules.max_file_bytes {
                return Ok(FileRead::Skip(SkipReason::TooLarge));
            }
            let mut file = std::fs::File::from(f);
            let (id, n) = match self.put_file(&mut file, rec_before.size, path) {
                Ok(v) => v,
                Err(e) if is_unreadable_error(&e) => {
                    return Ok(FileRead::Skip(SkipReason::Unreadable))
                }
                Err(e) => return Err(e),
            };
            self.counters.hashed.fetch_add(1, Ordering::Relaxed);
            self.counters.hashed_bytes.fetch_add(n, Ordering::Relaxed);
            if let Some(hook) = READ_HOOK.get() {
                hook(&self.abs(path));
            }
            let after = rustix::fs::fstat(file.as_fd())
                .map_err(|e| Error::io("stat", self.abs(path), e.into()))?;
            let rec_after = StatRecord::of(&after);
            if rec_after.matches(&rec_before) && n == rec_before.size {
                return Ok(FileRead::Stored(id, rec_before));
            }
        }
        Ok(FileRead::Skip(SkipReason::Changing))
    }
}

impl IgnoreChain {
    /// Whether no rule is in the chain.
    pub fn is_empty(&self) -> bool {
        self.matchers_empty()
    }
}

/// Opens the workspace root (following a symlink given as the root itself, as a user expects).
pub(crate) fn open_root(root: &Path) -> Result<(OwnedFd, rustix::fs::Stat)> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(root, flags, Mode::empty()).map_err(|e| match e {
        Errno::NOENT => Error::Root {
            path: root.to_path_buf(),
            detail: "it does not exist".into(),
        },
        Errno::NOTDIR => Error::Root {
            path: root.to_path_buf(),
            detail: "it is not a directory".into(),
        },
        e => Error::io("open workspace root", root, e.into()),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("stat", root, e.into()))?;
    Ok((fd, st))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(names: &[String]) -> Vec<CachedEntry> {
        let tree = TreeId::from(ObjectId([0; 32]));
        names
            .iter()
            .map(|n| dir_record(n.as_bytes(), 0o040755, tree, 0))
            .collect()
    }

    #[test]
    fn merging_a_few_or_many_entries_into_sorted_ones_gives_them_all_sorted() {
        let head: Vec<String> = (0..60).map(|i| format!("e{:03}", i * 2)).collect();
        // Around, between and beyond the sorted ones, each count given in reverse order.
        for k in [0, 1, 2, 7, 8, 9, 31] {
            let tail: Vec<String> = (0..k).rev().map(|i| format!("e{:03}", i * 4 + 1)).collect();
            let mut all = head.clone();
            all.extend(tail.iter().cloned());
            let merged = merge_sorted(entries(&all), head.len());
            all.sort();
            let names: Vec<&[u8]> = merged.iter().map(|e| e.name.as_bytes()).collect();
            let want: Vec<&[u8]> = all.iter().map(|n| n.as_bytes()).collect();
            assert_eq!(names, want, "{k} entries merged");
        }
    }
}
