//! The parallel walker.
//!
//! Depth-first and parallel with rayon: each directory is opened relative to its parent's
//! descriptor with `O_NOFOLLOW`, its entries are read and `lstat`ed (never followed), excludes
//! are applied, files are looked up in the stat cache and read only when it does not vouch for
//! them, and trees are built bottom-up as the recursion returns.

use crate::error::{Error, Result};
use crate::exclude::{ExcludeReason, Excludes, IgnoreChain};
use crate::statcache::{StatCache, StatRecord};
use cairn_store::relpath::join;
use cairn_store::{
    CancelToken, EntryKind, Hasher, ObjectId, ObjectKind, ObjectWriter, SkipReason, Skipped, Tree,
    TreeEntry, TreeId,
};
use parking_lot::Mutex;
use rayon::prelude::*;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// How many times a file that changes while it is read is read again.
pub const MAX_READS: usize = 5;
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
}

pub(crate) struct Walker<'a> {
    pub root: PathBuf,
    pub store_dir: Option<(u64, u64)>,
    pub rules: &'a Rules,
    pub sink: Sink<'a>,
    pub cache: &'a StatCache,
    pub cancel: &'a CancelToken,
    pub aborted: &'a AtomicBool,
    pub counters: &'a Counters,
    pub skipped: Mutex<Vec<Skipped>>,
    pub kept: Mutex<Vec<Kept>>,
    pub records: Mutex<Vec<(Vec<u8>, StatRecord)>>,
}

fn record_of(st: &rustix::fs::Stat) -> StatRecord {
    StatRecord {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
        mtime_ns: st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64,
        ctime_ns: st.st_ctime * 1_000_000_000 + st.st_ctime_nsec as i64,
        blob: ObjectId([0; 32]),
    }
}

fn is_unreadable(e: Errno) -> bool {
    matches!(e, Errno::ACCESS | Errno::PERM | Errno::IO)
}

/// Whether an error met while reading means the entry cannot be read (skipped as
/// `unreadable`) rather than that the snapshot must fail.
fn is_unreadable_error(e: &Error) -> bool {
    let source = match e {
        Error::Io { source, .. } => source,
        // Only a failure to read the input; a failure to write the store fails the snapshot.
        Error::Store(cairn_store::Error::Io {
            action: "read",
            source,
            ..
        }) => source,
        _ => return false,
    };
    source
        .raw_os_error()
        .map(|c| is_unreadable(Errno::from_raw_os_error(c)))
        .unwrap_or(false)
}

enum FileRead {
    Stored(ObjectId, StatRecord),
    Skip(SkipReason),
    Vanished,
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

    pub(crate) fn put_tree_inner(&self, tree: Tree) -> Result<TreeId> {
        match &self.sink {
            Sink::Store(w) => Ok(w.put_tree(&tree)?),
            Sink::Hash(trees) => {
                let id = tree.id();
                trees.lock().insert(id, tree);
                Ok(id)
            }
        }
    }

    fn put_small(&self, bytes: &[u8]) -> Result<ObjectId> {
        match &self.sink {
            Sink::Store(w) => Ok(w.put(ObjectKind::Blob, bytes)?.id),
            Sink::Hash(_) => Ok(ObjectId::of(bytes)),
        }
    }

    fn put_file(&self, file: &mut std::fs::File, size: u64, rel: &[u8]) -> Result<(ObjectId, u64)> {
        match &self.sink {
            Sink::Store(w) => {
                let out = w.put_blob_from(file, size)?;
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

    /// Walks the directory open at `fd` (at `rel`, empty for the root) and returns its tree.
    pub(crate) fn walk_dir(
        &self,
        fd: &OwnedFd,
        rel: &[u8],
        chain: &Arc<IgnoreChain>,
    ) -> Result<(Tree, u64)> {
        self.check_stop()?;
        self.counters.dirs.fetch_add(1, Ordering::Relaxed);
        let mut names: Vec<CString> = Vec::new();
        let dir = rustix::fs::Dir::read_from(fd)
            .map_err(|e| Error::io("list", self.abs(rel), e.into()))?;
        for entry in dir {
            let entry = entry.map_err(|e| Error::io("list", self.abs(rel), e.into()))?;
            let name = entry.file_name();
            let b = name.to_bytes();
            if b == b"." || b == b".." {
                continue;
            }
            names.push(name.to_owned());
        }
        // lstat each entry; one that vanished since the listing is left out.
        let mut entries: Vec<(CString, rustix::fs::Stat)> = Vec::with_capacity(names.len());
        for name in names {
            match rustix::fs::statat(fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
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
        let chain = if self.rules.gitignore {
            self.ignore_files(fd, rel, &entries, chain)
        } else {
            chain.clone()
        };
        let results: Vec<Result<Option<TreeEntry>>> = entries
            .par_iter()
            .map(|(name, st)| self.entry(fd, rel, name.as_c_str(), st, &chain))
            .collect();
        let mut tree_entries = Vec::with_capacity(results.len());
        for r in results {
            if let Some(e) = r? {
                tree_entries.push(e);
            }
        }
        let tree = Tree::new(tree_entries)?;
        let size = tree.total_size();
        Ok((tree, size))
    }

    fn ignore_files(
        &self,
        fd: &OwnedFd,
        rel: &[u8],
        entries: &[(CString, rustix::fs::Stat)],
        chain: &Arc<IgnoreChain>,
    ) -> Arc<IgnoreChain> {
        let mut texts = Vec::new();
        for wanted in [&b".cairnignore"[..], &b".gitignore"[..]] {
            let Some((name, st)) = entries.iter().find(|(n, _)| n.to_bytes() == wanted) else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
                || st.st_size as u64 > IGNORE_FILE_MAX
            {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            if let Ok(f) = rustix::fs::openat(fd, name.as_c_str(), flags, Mode::empty()) {
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
            return chain.clone();
        }
        IgnoreChain::child(chain, &self.abs(rel), &texts)
    }

    fn excluded(
        &self,
        rel_path: &[u8],
        name: &[u8],
        st: &rustix::fs::Stat,
        is_dir: bool,
        chain: &IgnoreChain,
    ) -> Option<ExcludeReason> {
        if Excludes::is_default(name) {
            return Some(ExcludeReason::Default);
        }
        if is_dir && self.store_dir == Some((st.st_dev, st.st_ino)) {
            return Some(ExcludeReason::Default);
        }
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

    fn entry(
        &self,
        fd: &OwnedFd,
        rel: &[u8],
        name: &CStr,
        st: &rustix::fs::Stat,
        chain: &Arc<IgnoreChain>,
    ) -> Result<Option<TreeEntry>> {
        self.check_stop()?;
        let name_b = name.to_bytes();
        let path = join(rel, name_b);
        let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
        let is_dir = ft == rustix::fs::FileType::Directory;
        if let Some(reason) = self.excluded(&path, name_b, st, is_dir, chain) {
            self.keep(path, reason, is_dir);
            return Ok(None);
        }
        match ft {
            rustix::fs::FileType::Directory => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let sub = match rustix::fs::openat(fd, name, flags, Mode::empty()) {
                    Ok(f) => f,
                    Err(Errno::NOENT) => return Ok(None),
                    Err(Errno::NOTDIR) | Err(Errno::LOOP) => {
                        // Replaced by something else since the lstat.
                        self.skip(path, SkipReason::Changing, true);
                        return Ok(None);
                    }
                    Err(e) if is_unreadable(e) => {
                        self.skip(path, SkipReason::Unreadable, true);
                        return Ok(None);
                    }
                    Err(e) => return Err(Error::io("open directory", self.abs(&path), e.into())),
                };
                match self.walk_dir(&sub, &path, chain) {
                    Ok((tree, size)) => {
                        let id = self.put_tree_inner(tree)?;
                        Ok(Some(TreeEntry {
                            name: name_b.to_vec(),
                            kind: EntryKind::Dir,
                            mode: st.st_mode,
                            size,
                            id: id.0,
                        }))
                    }
                    Err(e) if is_unreadable_error(&e) => {
                        self.skip(path, SkipReason::Unreadable, true);
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            }
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
                Ok(Some(TreeEntry {
                    name: name_b.to_vec(),
                    kind: EntryKind::Symlink,
                    mode: st.st_mode,
                    size: target.len() as u64,
                    id,
                }))
            }
            rustix::fs::FileType::RegularFile => self.file(fd, path, name, st),
            _ => {
                self.keep(path, ExcludeReason::Special, false);
                Ok(None)
            }
        }
    }

    fn file(
        &self,
        fd: &OwnedFd,
        path: Vec<u8>,
        name: &CStr,
        st: &rustix::fs::Stat,
    ) -> Result<Option<TreeEntry>> {
        if self.rules.refuse_hard_links && st.st_nlink > 1 {
            self.skip(path, SkipReason::HardLink, false);
            return Ok(None);
        }
        let fresh = record_of(st);
        let reusable = self
            .cache
            .lookup(&path, &fresh)
            .filter(|r| match &self.sink {
                Sink::Store(w) => w.contains(&r.blob),
                Sink::Hash(_) => true,
            });
        let (blob, record) = if let Some(r) = reusable {
            self.counters.reused.fetch_add(1, Ordering::Relaxed);
            (r.blob, *r)
        } else {
            if fresh.size > self.rules.max_file_bytes {
                self.skip(path, SkipReason::TooLarge, false);
                return Ok(None);
            }
            match self.read_file(fd, &path, name)? {
                FileRead::Stored(id, rec) => (id, rec),
                FileRead::Skip(reason) => {
                    self.skip(path, reason, false);
                    return Ok(None);
                }
                FileRead::Vanished => return Ok(None),
            }
        };
        self.counters.files.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(record.size, Ordering::Relaxed);
        let name_b = name.to_bytes().to_vec();
        let mode = record.mode;
        let size = record.size;
        self.records
            .lock()
            .push((path, StatRecord { blob, ..record }));
        Ok(Some(TreeEntry {
            name: name_b,
            kind: EntryKind::File,
            mode,
            size,
            id: blob,
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
            let rec_before = record_of(&before);
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
            let after = rustix::fs::fstat(file.as_fd())
                .map_err(|e| Error::io("stat", self.abs(path), e.into()))?;
            let rec_after = record_of(&after);
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
