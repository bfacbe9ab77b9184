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
use cairn_store::fsutil::{stat_dev, stat_mode};
use cairn_store::relpath::join;
use cairn_store::{
    CancelToken, EntryKind, EntryRef, Hasher, ObjectId, ObjectKind, ObjectWriter, SkipReason,
    Skipped, Tree, TreeId,
};
use parking_lot::Mutex;
use rayon::prelude::*;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{CStr, OsStr};
use std::io::Read;
#[cfg(target_os = "linux")]
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod dir;
mod entry;
mod through;

use dir::{errno_of, list, Listing};
pub(crate) use dir::{DirAt, Handle};

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
        let mut entries: Vec<(&CStr, rustix::fs::Stat)> = Vec::with_capacity(listing.count());
        for i in 0..listing.count() {
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
        let fresh = fresh.filter(|_| records.len() == listing.count() && !linked);
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
            || (is_dir && self.store_dirs.contains(&(stat_dev(st), st.st_ino)))
            || (!self.own_paths.is_empty() && self.own_paths.contains(&join(rel, name_b)))
        {
            Some(ExcludeReason::Default)
        } else if let Some(c) =
            c.filter(|c| decisions && c.stat.mode & S_IFMT == stat_mode(st) & S_IFMT)
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
            records.push(excluded_record(name_b, stat_mode(st), reason));
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
                    records.push(excluded_record(
                        name_b,
                        stat_mode(st),
                        ExcludeReason::Special,
                    ));
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
