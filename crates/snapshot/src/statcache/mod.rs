//! The stat cache: for each directory of a workspace's last snapshot, what each of its entries
//! was (a file with its blob, a link, a directory with its tree, or an entry left out and why)
//! and the `lstat` fields that say it has not changed since. A file whose record matches is not
//! read again, and a directory whose entries all match keeps its tree id without the tree being
//! built, encoded and hashed again: a snapshot with nothing changed costs one `lstat` per entry.
//!
//! File format (version 8): `"CAIRNSTC"`, a little-endian `u32` version, a fixed header of
//! [`HEADER_LEN`] bytes (the snapshot the records were last confirmed by, when it started, the
//! key of the body, the watcher token the records were confirmed with, and a checksum of those
//! fields), then the body: each directory's record encoded on its own, the head (key, capture
//! rules, root, the files restores wrote), an index of where each record lies (with what its
//! whole subtree holds, when that is known and nothing in it is left out), and a footer of
//! [`FOOTER_LEN`] bytes that says where the head and the index lie, with a check of their
//! bytes. A process reads the header, the footer, the head and the index, and each directory's
//! record only when a walk looks at that directory (`pread`, see [`StatCache::dir`]): a
//! watched snapshot of a 500,000-file tree that changed ten files decodes a few records, takes
//! every directory off the way to a change whole from its totals in the index, and the `cairn
//! watch` daemon holds the index, not half a million records, between snapshots. Version 7
//! (the same without totals), version 6 (the head before the records, a footer of three
//! `u64`s) and versions 3 to 5 (one postcard-encoded [`StatCacheBody`]; 3 and 4 with a
//! header of [`HEADER_LEN_V4`] bytes, without the token) are still read, 3 to 5 whole. The
//! key is new each time a body is written and kept when only the header is rewritten, so a
//! process that holds the body it last wrote or read (see [`CacheMemo`]) knows from the
//! header alone that it may use it without reading the file.
//!
//! A body is written after the snapshot's manifest, in one of two ways. When the file at the
//! cache's path is still the one its other records were read from, as long as it was then, the
//! records that changed are appended to it with a new head, index and footer, and the header
//! is rewritten last (see [`StatCache::save`]): a snapshot that changed ten files of a
//! 500,000-file tree writes their directories' records and the index, not the 46 MB of every
//! record. Otherwise, or once the file would hold more than twice what is live, the whole body
//! is written to a temporary file renamed over the old one. When a snapshot changed nothing,
//! only the header is rewritten in place. None of this is synced: the
//! cache only saves work, a torn or stale header fails its checksum or names an older snapshot
//! (whose earlier start time is the stricter one for the racy rule), and the cache is only
//! trusted while the snapshot it names exists (a collection may have removed the blobs of a
//! deleted one). A record that cannot be read or decoded, or that names another directory
//! than its index entry, is no record: its directory is listed as if new to the cache.
//!
//! **Racy timestamps.** A file changed within [`RACY_WINDOW_NS`] before the snapshot that
//! recorded it started may change again without its times moving (file-system clocks are
//! coarse), so such a record is never trusted: the file is read again.
//!
//! **Files a restore wrote** (version 4). A restore writes each file from a blob it knows, so
//! it records them too, as `git checkout` refreshes the index: see [`Written`] for what proves
//! such a record and [`crate::prime`] for how a restore adds them. They are kept apart from the
//! directory records (which still say what the last snapshot saw, so every listing and tree
//! the cache vouches for is one a walk checked), in sets that each name the snapshot holding
//! their blobs and the boot they were written in; a walk uses one in place of reading the file
//! when the file's `lstat` matches it exactly.

mod codec;
mod memo;
mod record;

pub use codec::{
    StatCacheBody, StatCacheFile, FOOTER_LEN, HEADER_LEN, HEADER_LEN_V4, STATCACHE_MAGIC,
    STATCACHE_VERSION,
};
pub use memo::{CacheMemo, WRITE_DELAY};
pub use record::{
    boot_id, CachedEntry, CachedKind, DirRecord, Name, PrimedFile, PrimedSet, StatRecord, Written,
    RACY_WINDOW_NS,
};

use crate::watch::Token;
use cairn_store::{CaptureSettings, Hasher, SnapshotId, TreeId};
use codec::{decode_record, BodyHead, Extent, Header, Place};
use record::{Origin, Primed, S_IFDIR, S_IFMT};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The records restores made, by path.
type Primeds = indexmap::IndexMap<Box<[u8]>, Primed>;

/// A file that would hold more than this many times the bytes of what is live in it (the
/// records its index places, its head and its index) is written whole rather than appended to:
/// it never holds more than twice what it needs, and is written whole about once every
/// (file size / bytes appended per snapshot) snapshots.
const COMPACT_RATIO: u64 = 2;

/// The fingerprint of every capture setting that decides what is left out: the exclude globs,
/// whether ignore files count, the size limit and whether hard-linked files are refused (the
/// default excludes and how ignore files are read are fixed by the `v3` in the text: `v2`
/// decisions were made while a byte-order mark still hid an ignore file's first pattern). An exclusion decision the cache holds
/// is reused only under the same fingerprint, so a decision made under one size limit is never
/// trusted under another (issue 28); `capture` is taken apart field by field, so a new setting
/// cannot be left out. Never all zero.
pub fn rules_fingerprint(capture: &CaptureSettings) -> [u8; 32] {
    let CaptureSettings {
        excludes,
        max_file_bytes,
        gitignore,
        refuse_hard_links,
    } = capture;
    let mut h = Hasher::new();
    h.update(b"cairn capture rules v3\0");
    h.update(&[u8::from(*gitignore), u8::from(*refuse_hard_links)]);
    h.update(&max_file_bytes.to_le_bytes());
    for e in excludes {
        h.update(&(e.len() as u64).to_le_bytes());
        h.update(e.as_bytes());
    }
    h.finish().0
}

/// A loaded stat cache.
#[derive(Debug, Default, Clone)]
pub struct StatCache {
    /// The snapshot its records were last confirmed by.
    pub snapshot: Option<SnapshotId>,
    /// When that snapshot started.
    pub started_ns: i64,
    /// The capture rules fingerprint the records were made under.
    pub rules: [u8; 32],
    /// The root's tree and size.
    pub root: Option<(TreeId, u64)>,
    /// Each directory's record, by path: where the file holds it, or in memory.
    dirs: HashMap<Vec<u8>, Slot>,
    /// The version 6 to 8 file the `Stored` records are read from (opened once: a file
    /// renamed over it later does not change what this one holds).
    source: Option<std::sync::Arc<std::fs::File>>,
    /// The length of `source` when it was read or written, when it is of this version (only
    /// such a file is appended to): a file appended to since by someone else is not appended
    /// to again (see [`StatCache::save`]).
    source_len: Option<u64>,
    files: usize,
    /// The key of the body these records came from (all zero when they came from no file).
    key: [u8; 16],
    /// The watcher token the records were confirmed with (see [`crate::watch`]): a snapshot
    /// asks the watcher what changed since.
    pub token: Option<Token>,
    /// The format version of the file they came from (0: none).
    version: u32,
    /// Files restores wrote, by path; shared with the cache read back from the file that holds
    /// them (issue 56: not copied after a full restore wrote every file it made into it). An
    /// `IndexMap`: its records lie in a vector sized to them and its table holds only
    /// indexes, where a `HashMap`'s table of whole records is up to half empty (at 500,000
    /// records, a million slots of 105 bytes).
    primed: std::sync::Arc<Primeds>,
    /// What a whole subtree holds, by directory: counted once by a watched snapshot that
    /// reuses it, and kept while no record in it changes (in memory only).
    subtrees: Subtrees,
    /// Set when these records came from a memo whose write was called off: the file does not
    /// hold them, and a memo given them back writes them (through this temporary directory).
    unwritten: Option<PathBuf>,
}

/// Where one directory's record is.
#[derive(Debug, Clone)]
enum Slot {
    /// In the cache's file (`StatCache::source`).
    Stored(Extent),
    /// In memory: a walk's, or decoded from a file of an earlier version.
    Held(std::sync::Arc<DirRecord>),
}

impl Slot {
    fn entries(&self) -> usize {
        match self {
            Slot::Stored(x) => x.entries as usize,
            Slot::Held(r) => r.entries.len(),
        }
    }

    fn vouched(&self) -> bool {
        match self {
            Slot::Stored(x) => x.vouched,
            Slot::Held(r) => r.stat.is_some(),
        }
    }
}

/// What a subtree the cache vouches for holds, in all (see [`StatCache::count_subtree`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Subtree {
    pub files: u64,
    pub bytes: u64,
    pub symlinks: u64,
    pub dirs: u64,
    pub kept: Vec<crate::walk::Kept>,
}

impl Subtree {
    /// Its totals, when nothing in it is left out (only such a subtree's are stored).
    fn totals(&self) -> Option<Totals> {
        self.kept.is_empty().then_some(Totals {
            files: self.files,
            bytes: self.bytes,
            symlinks: self.symlinks,
            dirs: self.dirs,
        })
    }
}

impl From<Totals> for Subtree {
    fn from(t: Totals) -> Subtree {
        Subtree {
            files: t.files,
            bytes: t.bytes,
            symlinks: t.symlinks,
            dirs: t.dirs,
            kept: Vec::new(),
        }
    }
}

/// What a whole subtree holds, as the index of a version 8 file stores it with its
/// directory's place: only for a subtree the cache vouches for in which nothing is left out,
/// so that a process that did not count it takes it whole without reading a record beneath
/// it (see [`StatCache::count_subtree`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Totals {
    files: u64,
    bytes: u64,
    symlinks: u64,
    dirs: u64,
}

impl Totals {
    /// What a directory holds itself: one directory, and its files and links.
    fn own(r: &DirRecord) -> Totals {
        let mut t = Totals {
            dirs: 1,
            ..Totals::default()
        };
        for e in &r.entries {
            match e.kind {
                CachedKind::File => {
                    t.files += 1;
                    t.bytes += e.stat.size;
                }
                CachedKind::Symlink => t.symlinks += 1,
                CachedKind::Dir | CachedKind::Excluded(_) => {}
            }
        }
        t
    }

    fn add(&mut self, t: &Totals) {
        self.files += t.files;
        self.bytes += t.bytes;
        self.symlinks += t.symlinks;
        self.dirs += t.dirs;
    }
}

/// The memo of [`Subtree`]s: cloned empty (a copy of a cache counts again).
#[derive(Default)]
struct Subtrees(parking_lot::Mutex<HashMap<Vec<u8>, std::sync::Arc<Subtree>>>);

impl Clone for Subtrees {
    fn clone(&self) -> Self {
        Subtrees::default()
    }
}

impl std::fmt::Debug for Subtrees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subtrees({})", self.0.lock().len())
    }
}

/// The subtree totals a file about to be written stores (see [`StatCache::totals`]).
struct WriteTotals<'s> {
    cache: &'s StatCache,
    /// Those of the records held in memory, by directory.
    held: HashMap<&'s [u8], Option<Totals>>,
}

impl WriteTotals<'_> {
    /// What the file stores for the subtree of directory `path`, whose record is `slot`.
    fn of(&self, path: &[u8], slot: &Slot) -> Option<Totals> {
        match slot {
            Slot::Held(_) => self.held.get(path).copied().flatten(),
            Slot::Stored(x) => x.subtree.or_else(|| self.cache.counted(path)?.totals()),
        }
    }
}

/// `path` and each directory above it, up to the root (`""`), the deepest first.
fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let p = next?;
        next = match p.iter().rposition(|&b| b == b'/') {
            Some(i) => Some(&p[..i]),
            None if !p.is_empty() => Some(&b""[..]),
            None => None,
        };
        Some(p)
    })
}

/// Forgets the subtree totals the file stored for directory `path` (something beneath it
/// changed).
fn forget_totals(dirs: &mut HashMap<Vec<u8>, Slot>, path: &[u8]) {
    if let Some(Slot::Stored(x)) = dirs.get_mut(path) {
        x.subtree = None;
    }
}

/// The name of `path` within `dir` when it lies just beneath it.
fn child_of<'p>(path: &'p [u8], dir: &[u8]) -> Option<&'p [u8]> {
    let rest = if dir.is_empty() {
        path
    } else {
        path.strip_prefix(dir)?.strip_prefix(b"/")?
    };
    (!rest.is_empty() && !rest.contains(&b'/')).then_some(rest)
}

/// The slots of the records an index places.
fn stored(places: Vec<Place>) -> HashMap<Vec<u8>, Slot> {
    places
        .into_iter()
        .map(|p| (p.path, Slot::Stored(p.extent)))
        .collect()
}

/// One directory a walk went through, for [`StatCache::replace`].
#[derive(Debug)]
pub enum Update {
    /// Its record is the cache's, unchanged.
    Same(Vec<u8>),
    /// Its new record, other than the cache's, with the names of the subdirectories the
    /// cache's record named that it no longer does (`None` when the walk had no record of it
    /// to compare with: none, or one that could not be read).
    Fresh(DirRecord, Option<Vec<Vec<u8>>>),
}

impl StatCache {
    /// The path of a workspace's stat cache in the store.
    pub fn path(store: &cairn_store::Store, workspace_id: &str) -> cairn_store::Result<PathBuf> {
        Ok(store.workspace_dir(workspace_id)?.join("statcache"))
    }

    /// Loads the cache at `path`. A missing, unreadable or undecodable cache is empty: the
    /// cache only saves work, it never decides content. Of a version 6 to 8 file only the
    /// header, the head and the index are read; each record is read when asked for ([`StatCache::dir`]),
    /// from the file as it was opened here.
    pub fn load(path: &Path) -> StatCache {
        Self::open(path).unwrap_or_default()
    }

    /// The cache of a whole body, its records held in memory.
    fn from_body(h: &Header, body: StatCacheBody) -> StatCache {
        let dirs = body
            .dirs
            .into_iter()
            .map(|d| (d.path.clone(), Slot::Held(std::sync::Arc::new(d))))
            .collect();
        let head = BodyHead {
            key: body.key,
            rules: body.rules,
            root: body.root,
            primed: body.primed,
        };
        Self::from_parts(h, head, dirs, None)
    }

    /// The cache of a header, a body's head and its records, the stored ones in `source` (a
    /// file and, when it is of this version, its length).
    fn from_parts(
        h: &Header,
        head: BodyHead,
        dirs: HashMap<Vec<u8>, Slot>,
        source: Option<(std::sync::Arc<std::fs::File>, Option<u64>)>,
    ) -> StatCache {
        let (source, source_len) = source.unzip();
        let mut primed = Primeds::default();
        primed.reserve_exact(head.primed.iter().map(|set| set.files.len()).sum());
        for set in head.primed {
            let origin = std::sync::Arc::new(Origin {
                snapshot: SnapshotId::from(set.snapshot),
                boot: set.boot.into(),
            });
            for f in set.files {
                let p = Primed {
                    stat: f.stat,
                    origin: std::sync::Arc::clone(&origin),
                };
                primed.insert(f.path.into_boxed_slice(), p);
            }
        }
        StatCache {
            snapshot: h.snapshot,
            started_ns: h.started_ns,
            rules: head.rules,
            root: head.root.map(|(id, size)| (TreeId::from(id), size)),
            files: dirs.values().map(Slot::entries).sum(),
            key: head.key,
            dirs,
            source,
            source_len: source_len.flatten(),
            primed: std::sync::Arc::new(primed),
            token: h.token,
            version: h.version,
            subtrees: Subtrees::default(),
            unwritten: None,
        }
    }

    /// The cache a file holds, without encoding it.
    pub fn from_file(file: StatCacheFile) -> StatCache {
        let h = Header {
            version: STATCACHE_VERSION,
            snapshot: file.snapshot,
            started_ns: file.started_ns,
            key: file.body.key,
            token: None,
        };
        Self::from_body(&h, file.body)
    }

    /// The records as a file holds them, each read (sorted by path; a record that cannot be
    /// read is left out, as a write leaves it out).
    pub fn to_file(&self) -> StatCacheFile {
        let mut dirs: Vec<DirRecord> = self
            .dirs
            .iter()
            .filter_map(|(p, s)| self.record(p, s))
            .map(|r| DirRecord::clone(&r))
            .collect();
        dirs.sort_by(|a, b| a.path.cmp(&b.path));
        StatCacheFile {
            snapshot: self.snapshot,
            started_ns: self.started_ns,
            body: StatCacheBody {
                key: self.key,
                rules: self.rules,
                root: self.root.map(|(id, size)| (id.object(), size)),
                dirs,
                primed: self.primed_sets(),
            },
        }
    }

    /// Writes this cache to `path`, without syncing (see the module documentation): when the
    /// file there is still the one the records not held in memory were read from (or last
    /// written to), as long as it was then, only the records held in memory are appended to
    /// it, with a new head, index and footer, and its header is rewritten last; otherwise (or
    /// when the file would then hold more than [`COMPACT_RATIO`] times what is live), the
    /// whole cache is written to a temporary file in `tmp_dir` renamed into place, the records
    /// in memory encoded, the others copied from the file they were loaded from.
    pub fn save(&self, tmp_dir: &Path, path: &Path) -> std::io::Result<()> {
        self.write(tmp_dir, path).map(drop)
    }

    /// Writes this cache as [`StatCache::save`] does and returns the same cache read from the
    /// file written: its records are no longer held in memory. A process that keeps the
    /// cache between snapshots (see [`CacheMemo`]) holds the index, not the records.
    fn save_settled(&self, tmp_dir: &Path, path: &Path) -> std::io::Result<StatCache> {
        let (file, len, places) = self.write(tmp_dir, path)?;
        let dirs = stored(places);
        Ok(StatCache {
            snapshot: self.snapshot,
            started_ns: self.started_ns,
            rules: self.rules,
            root: self.root,
            files: dirs.values().map(Slot::entries).sum(),
            dirs,
            source: Some(file),
            source_len: Some(len),
            key: self.key,
            token: self.token,
            version: STATCACHE_VERSION,
            primed: std::sync::Arc::clone(&self.primed),
            subtrees: Subtrees::default(),
            unwritten: None,
        })
    }

    /// Replaces the records by the walk's: each directory it walked, either `Same` as its
    /// record here or a `Fresh` one (after a full walk, a directory it did not walk is gone,
    /// or now left out; after a `partial` one, told by a watcher what changed, it kept its
    /// record, unless it lay beneath a directory whose new record no longer names it), under
    /// a new body `key`, capture-rules fingerprint and root. The files restores wrote
    /// become `carried`: those the walk took from them and which the racy rule would still not
    /// trust under `snapshot` (which now holds their blobs), started at `started_ns`.
    #[allow(clippy::too_many_arguments)]
    pub fn replace(
        &mut self,
        partial: bool,
        walked: impl IntoIterator<Item = Update>,
        key: [u8; 16],
        rules: [u8; 32],
        root: Option<(TreeId, u64)>,
        snapshot: SnapshotId,
        started_ns: i64,
        carried: Vec<(Vec<u8>, StatRecord)>,
    ) {
        // Carried under the new snapshot, each keeping its boot: one origin per boot.
        let mut origins: HashMap<Box<[u8]>, std::sync::Arc<Origin>> = HashMap::new();
        let carried: Primeds = carried
            .into_iter()
            .filter(|(_, stat)| stat.is_racy(started_ns))
            .filter_map(|(path, stat)| {
                let boot = &self.primed.get(path.as_slice())?.origin.boot;
                let origin = origins.entry(boot.clone()).or_insert_with(|| {
                    std::sync::Arc::new(Origin {
                        snapshot,
                        boot: boot.clone(),
                    })
                });
                Some((
                    path.into_boxed_slice(),
                    Primed {
                        stat,
                        origin: std::sync::Arc::clone(origin),
                    },
                ))
            })
            .collect();
        self.primed = std::sync::Arc::new(carried);
        let mut old = std::mem::take(&mut self.dirs);
        let walked = walked.into_iter();
        let mut subtrees = self.subtrees.0.lock();
        if !partial {
            subtrees.clear();
        }
        // The subtrees forgotten because a record in them changed, counted again below.
        let mut recount: Vec<Vec<u8>> = Vec::new();
        let dirs = if partial {
            let mut gone: Vec<Vec<u8>> = Vec::new();
            for u in walked {
                let Update::Fresh(r, gone_here) = u else {
                    continue;
                };
                // Its subtree, and each one above it, holds something else now.
                for p in ancestors(&r.path) {
                    if subtrees.remove(p).is_some() || p == r.path.as_slice() {
                        recount.push(p.to_vec());
                    }
                    forget_totals(&mut old, p);
                }
                match gone_here {
                    Some(names) => {
                        gone.extend(names.iter().map(|n| cairn_store::relpath::join(&r.path, n)))
                    }
                    // A record the walk could not read: every recorded directory just
                    // beneath it that is not one now is taken as gone.
                    None if old.contains_key(&r.path) => {
                        let still =
                            |name: &[u8]| r.get(name).is_some_and(|n| n.kind == CachedKind::Dir);
                        for p in old.keys() {
                            if child_of(p, &r.path).is_some_and(|name| !still(name)) {
                                gone.push(p.clone());
                            }
                        }
                    }
                    None => {}
                }
                old.insert(r.path.clone(), Slot::Held(std::sync::Arc::new(r)));
            }
            if !gone.is_empty() {
                let in_gone = |p: &[u8]| gone.iter().any(|g| crate::watch::is_under(p, g));
                subtrees.retain(|p, _| !in_gone(p));
                old.retain(|p, _| !in_gone(p));
            }
            old
        } else {
            let mut dirs = HashMap::with_capacity(walked.size_hint().0);
            let mut fresh = Vec::new();
            for u in walked {
                match u {
                    Update::Same(path) => {
                        if let Some(r) = old.remove(&path) {
                            dirs.insert(path, r);
                        }
                    }
                    Update::Fresh(r, _) => {
                        fresh.push(r.path.clone());
                        dirs.insert(r.path.clone(), Slot::Held(std::sync::Arc::new(r)));
                    }
                }
            }
            // A directory whose record is the same may hold one that is not: what the file
            // stored of its subtree is told no longer.
            for f in &fresh {
                for p in ancestors(f) {
                    forget_totals(&mut dirs, p);
                }
            }
            dirs
        };
        drop(subtrees);
        self.files = dirs.values().map(Slot::entries).sum();
        self.dirs = dirs;
        self.key = key;
        self.rules = rules;
        self.root = root;
        self.version = STATCACHE_VERSION;
        // Counted now, while the changed directories' records are in memory: the next
        // watched snapshot reuses the directories beside its changes without reading them
        // back from the file (after the cache is written, where a record read costs a
        // `pread`, a check and a decoding; a 10-file change of test262 spent a third of its
        // walk there). Deepest first, so each count finds those beneath it done.
        let depth = |p: &[u8]| p.iter().filter(|&&b| b == b'/').count();
        recount.sort_unstable_by(|a, b| depth(b).cmp(&depth(a)).then_with(|| a.cmp(b)));
        recount.dedup();
        for p in &recount {
            let _ = self.count_subtree(p);
        }
    }

    /// What the subtree at `path` holds: the totals the file stored with its place when it has
    /// them (version 8: a process that did not count it reads no record beneath it), else from
    /// the records, each directory's entries added to its subdirectories' totals; remembered
    /// until a record in it changes (so after a change only the changed directory and those
    /// above it are added up again). `None` (not remembered) when a directory in it has no
    /// record, or one that does not vouch for its listing.
    pub(crate) fn count_subtree(&self, path: &[u8]) -> Option<std::sync::Arc<Subtree>> {
        if let Some(t) = self.counted(path) {
            return Some(t);
        }
        let slot = self.dirs.get(path)?;
        if let Slot::Stored(Extent {
            subtree: Some(t), ..
        }) = slot
        {
            let t = std::sync::Arc::new(Subtree::from(*t));
            self.subtrees.0.lock().insert(path.to_vec(), t.clone());
            return Some(t);
        }
        let r = self.record(path, slot).filter(|r| r.stat.is_some())?;
        let mut t = Subtree::from(Totals::own(&r));
        for e in &r.entries {
            match e.kind {
                CachedKind::Dir => {
                    let c = self.count_subtree(&cairn_store::relpath::join(path, &e.name))?;
                    t.files += c.files;
                    t.bytes += c.bytes;
                    t.symlinks += c.symlinks;
                    t.dirs += c.dirs;
                    t.kept.extend(c.kept.iter().cloned());
                }
                CachedKind::Excluded(reason) => t.kept.push(crate::walk::Kept {
                    path: cairn_store::relpath::join(path, &e.name),
                    reason,
                    is_dir: e.stat.mode & S_IFMT == S_IFDIR,
                }),
                CachedKind::File | CachedKind::Symlink => {}
            }
        }
        let t = std::sync::Arc::new(t);
        self.subtrees.0.lock().insert(path.to_vec(), t.clone());
        Some(t)
    }

    /// Each directory's subtree totals as the file about to be written stores them: those the
    /// file they came from stored (and no change since made stale), those counted in this
    /// process, and those of the records held in memory, added up without reading a record
    /// from the file (a subtree with a directory whose totals are not known has none).
    fn totals(&self) -> WriteTotals<'_> {
        let mut held = HashMap::new();
        for (path, slot) in &self.dirs {
            if let Slot::Held(_) = slot {
                self.total_of(path, &mut held);
            }
        }
        WriteTotals { cache: self, held }
    }

    /// The totals of the subtree at `path` (see [`StatCache::totals`]); those of a record held
    /// in memory are remembered in `held`.
    fn total_of<'s>(
        &'s self,
        path: &[u8],
        held: &mut HashMap<&'s [u8], Option<Totals>>,
    ) -> Option<Totals> {
        let (key, slot) = self.dirs.get_key_value(path)?;
        let r = match slot {
            Slot::Stored(x) => return x.subtree.or_else(|| self.counted(path)?.totals()),
            Slot::Held(r) => r,
        };
        if let Some(t) = held.get(path) {
            return *t;
        }
        let t = match self.counted(path) {
            Some(c) => c.totals(),
            None => {
                let mut t = Totals::own(r);
                let mut whole = r.stat.is_some();
                for e in &r.entries {
                    match e.kind {
                        CachedKind::File | CachedKind::Symlink => {}
                        CachedKind::Excluded(_) => whole = false,
                        CachedKind::Dir => {
                            let child = cairn_store::relpath::join(path, &e.name);
                            match self.total_of(&child, held) {
                                Some(c) => t.add(&c),
                                None => whole = false,
                            }
                        }
                    }
                }
                whole.then_some(t)
            }
        };
        held.insert(key, t);
        t
    }

    /// Whether the records came from a file of this format version (only such a file's header
    /// may be rewritten in place: an older one is shorter).
    pub fn is_current(&self) -> bool {
        self.version == STATCACHE_VERSION
    }

    /// The key of the body these records came from.
    pub fn key(&self) -> &[u8; 16] {
        &self.key
    }

    /// What the subtree at `path` holds if it was counted (see [`StatCache::count_subtree`])
    /// and no record in it changed since; never counts.
    pub(crate) fn counted(&self, path: &[u8]) -> Option<std::sync::Arc<Subtree>> {
        self.subtrees.0.lock().get(path).cloned()
    }

    /// The record of directory `path` (read from the cache's file when not in memory; `None`
    /// when there is none, or it cannot be read or decoded).
    pub fn dir(&self, path: &[u8]) -> Option<std::sync::Arc<DirRecord>> {
        self.record(path, self.dirs.get(path)?)
    }

    fn record(&self, path: &[u8], slot: &Slot) -> Option<std::sync::Arc<DirRecord>> {
        use std::os::unix::fs::FileExt;
        match slot {
            Slot::Held(r) => Some(r.clone()),
            Slot::Stored(x) => {
                let mut buf = vec![0; x.len as usize];
                self.source.as_ref()?.read_exact_at(&mut buf, x.at).ok()?;
                decode_record(&buf, path, x).map(std::sync::Arc::new)
            }
        }
    }

    /// The directories whose listing the cache does not vouch for (an entry was skipped, or
    /// a file has several links): a watched snapshot lists them every time, as a walk does.
    pub fn unvouched(&self) -> Vec<Vec<u8>> {
        self.dirs
            .iter()
            .filter(|(_, s)| !s.vouched())
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The trusted record for the file at `path` if `fresh` matches it and it is not racy.
    pub fn lookup(&self, path: &[u8], fresh: &StatRecord) -> Option<StatRecord> {
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        let d = self.dir(dir)?;
        let e = d.get(name)?;
        (e.kind == CachedKind::File && self.trusts(&e.stat, fresh)).then_some(e.stat)
    }

    /// Whether `cached` still describes the entry `fresh` was `lstat`ed from.
    pub fn trusts(&self, cached: &StatRecord, fresh: &StatRecord) -> bool {
        cached.matches(fresh) && !cached.is_racy(self.started_ns)
    }

    /// The record a restore made of the file at `path` (see [`Written`]), if `fresh` matches it.
    pub fn primed(&self, path: &[u8], fresh: &StatRecord) -> Option<&StatRecord> {
        self.primed
            .get(path)
            .map(|p| &p.stat)
            .filter(|s| s.matches(fresh))
    }

    /// Whether it holds any record a restore made.
    pub fn has_primed(&self) -> bool {
        !self.primed.is_empty()
    }

    /// Number of records restores made.
    pub fn primed_len(&self) -> usize {
        self.primed.len()
    }

    /// The snapshots the records restores made depend on.
    pub fn primed_snapshots(&self) -> Vec<SnapshotId> {
        let mut ids: Vec<SnapshotId> = self.primed.values().map(|p| p.origin.snapshot).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Keeps only the records restores made in this boot of the machine whose snapshot `keep`
    /// accepts (one that exists, and with a remote one the remote holds).
    pub fn retain_primed(&mut self, mut keep: impl FnMut(&SnapshotId) -> bool) {
        let boot = boot_id();
        let mut kept: HashMap<SnapshotId, bool> = HashMap::new();
        std::sync::Arc::make_mut(&mut self.primed).retain(|_, p| {
            let Origin { snapshot, boot: b } = &*p.origin;
            Some(&**b) == boot && *kept.entry(*snapshot).or_insert_with(|| keep(snapshot))
        });
    }

    /// Forgets every record a restore made (the next walk reads those files, as before
    /// version 4; benchmarks compare the two).
    pub fn clear_primed(&mut self) {
        self.primed = std::sync::Arc::default();
    }

    /// Adds the records of the files a restore wrote from the blobs of `snapshot`, each only if
    /// what the restore saw proves it ([`Written::proves`]), replacing any earlier record of the
    /// same path; returns how many it added. Nothing is added where the system gives no boot id.
    pub fn prime(
        &mut self,
        snapshot: SnapshotId,
        written: impl IntoIterator<Item = Written>,
    ) -> usize {
        let Some(boot) = boot_id() else { return 0 };
        let origin = std::sync::Arc::new(Origin {
            snapshot,
            boot: boot.into(),
        });
        let mut n = 0;
        // Sized once (issue 56: growing the map by doubling held both tables at once, the
        // peak of a full restore's memory).
        let written = written.into_iter();
        let primed = std::sync::Arc::make_mut(&mut self.primed);
        primed.reserve_exact(written.size_hint().0);
        for w in written {
            if !w.proves() {
                continue;
            }
            let stat = StatRecord {
                blob: w.blob,
                ..w.placed
            };
            let p = Primed {
                stat,
                origin: std::sync::Arc::clone(&origin),
            };
            primed.insert(w.path.into_boxed_slice(), p);
            n += 1;
        }
        n
    }

    /// Gives the records a new body key (before they are written as a new body).
    pub fn rekey(&mut self) {
        self.key = StatCacheFile::new_key(self.snapshot.as_ref(), self.started_ns);
        self.version = STATCACHE_VERSION;
    }

    /// The records restores made as they are written: grouped by snapshot and boot, each
    /// group sorted by path, borrowed from the cache.
    fn primed_out(&self) -> Vec<codec::SetOut<'_>> {
        let mut sets: HashMap<(SnapshotId, &[u8]), Vec<codec::FileOut<'_>>> = HashMap::new();
        for (path, p) in self.primed.iter() {
            sets.entry((p.origin.snapshot, &p.origin.boot))
                .or_default()
                .push(codec::FileOut {
                    path,
                    stat: &p.stat,
                });
        }
        sets.into_iter()
            .map(|((snapshot, boot), mut files)| {
                files.sort_unstable_by(|a, b| a.path.cmp(b.path));
                codec::SetOut {
                    snapshot: snapshot.object(),
                    boot,
                    files,
                }
            })
            .collect()
    }

    /// The records restores made, grouped by snapshot and boot, as stored.
    fn primed_sets(&self) -> Vec<PrimedSet> {
        self.primed_out()
            .into_iter()
            .map(|set| PrimedSet {
                snapshot: set.snapshot,
                boot: set.boot.to_vec(),
                files: set
                    .files
                    .into_iter()
                    .map(|f| PrimedFile {
                        path: f.path.to_vec(),
                        stat: *f.stat,
                    })
                    .collect(),
            })
            .collect()
    }

    /// Number of directory records.
    pub fn dir_count(&self) -> usize {
        self.dirs.len()
    }

    /// The cache `shared` holds: itself when no one else holds it, else a copy that takes
    /// over its subtree totals (a writer thread still holding it does not use them).
    fn unshare(shared: std::sync::Arc<StatCache>) -> StatCache {
        std::sync::Arc::try_unwrap(shared).unwrap_or_else(|shared| {
            let copy = StatCache::clone(&shared);
            *copy.subtrees.0.lock() = std::mem::take(&mut *shared.subtrees.0.lock());
            copy
        })
    }

    /// Number of directory records held in memory (a walk's, or all of a file of an earlier
    /// version); the others are read from the cache's file when asked for.
    pub fn held(&self) -> usize {
        self.dirs
            .values()
            .filter(|s| matches!(s, Slot::Held(_)))
            .count()
    }

    /// Number of directories whose whole subtree's totals the file they were read from
    /// stores (version 8; see [`StatCache::count_subtree`]) and no change since made stale.
    pub fn stored_totals(&self) -> usize {
        self.dirs
            .values()
            .filter(|s| {
                matches!(
                    s,
                    Slot::Stored(Extent {
                        subtree: Some(_),
                        ..
                    })
                )
            })
            .count()
    }

    /// Number of entry records.
    pub fn len(&self) -> usize {
        self.files
    }

    /// Whether the cache has no record.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }
}
