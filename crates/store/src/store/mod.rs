//! The store: objects in packs (and large blobs in files of their own), manifests, and the
//! directories the layers above keep their state in.

mod heap;
mod large;
mod snapshots;
mod writer;

pub use heap::{fix_mmap_threshold, limit_heap_arenas};
pub(crate) use large::{copy_large, read_large_header};
pub use snapshots::{check_label, SnapshotEntry, SnapshotList, MAX_LABEL_BYTES};
pub use writer::{ObjectWriter, PutOutcome, WriteStats};

use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::lock::{self, MarkerInfo, OperationGuard, OperationKind};
use crate::pack::{self, IndexEntry, ObjectKind, PackIndex};
use crate::tree::Tree;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How objects are compressed. The choice is recorded per object, never in its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Store bytes as they are.
    None,
    /// zstd at this level (1..=19) for blobs, and at most `TREE_LEVEL` (level 1) for trees. Objects
    /// that do not shrink by at least 1/8 are stored raw.
    Zstd {
        /// The zstd level.
        level: i32,
    },
}

/// The highest zstd level trees are compressed at. A tree's entries are mostly object ids,
/// which are random: a higher level finds nothing more to take out. Measured on test262's
/// largest changed tree (72,872 bytes): 43,966 bytes in 363 us at level 3, 43,155 bytes in
/// 164 us at level 1; a snapshot writes the trees of every directory above a change.
pub const TREE_LEVEL: i32 = 1;

impl Default for Compression {
    /// zstd level 3: measured (docs/PERFORMANCE.md) to shrink source-like trees 2-5x at
    /// a cost well below the hashing that precedes it.
    fn default() -> Self {
        Compression::Zstd { level: 3 }
    }
}

/// How a store is opened.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Compression of new objects.
    pub compression: Compression,
    /// A pack is closed and a new one started once it holds this many bytes.
    pub pack_target_bytes: u64,
    /// Blobs larger than this are stored in files of their own, streamed, never held in memory.
    pub inline_max_bytes: u64,
    /// Create the store if it does not exist.
    pub create: bool,
    /// A remote object store to mirror into: the store becomes its local cache (see
    /// [`crate::remote`]). `None` (the default): a local store.
    pub remote: Option<crate::remote::RemoteConfig>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            compression: Compression::default(),
            pack_target_bytes: 256 << 20,
            inline_max_bytes: 1 << 20,
            create: true,
            remote: None,
        }
    }
}

/// The paths of a store's directories.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The store's own directory.
    pub root: PathBuf,
    /// `objects/`.
    pub objects: PathBuf,
    /// `objects/packs/`: pack files and their indexes.
    pub packs: PathBuf,
    /// `objects/large/`: blobs larger than `inline_max_bytes`, one file each.
    pub large: PathBuf,
    /// `snapshots/`: one manifest per snapshot.
    pub snapshots: PathBuf,
    /// `workspaces/`: per-workspace state (stat caches).
    pub workspaces: PathBuf,
    /// `journal/`: restore and rewind journals.
    pub journal: PathBuf,
    /// `locks/`: operation markers and `gc.lock`.
    pub locks: PathBuf,
    /// `tmp/`: temporary files.
    pub tmp: PathBuf,
}

/// A store taken by [`Store::lock_idle`]: no operation starts while it is held.
#[derive(Debug)]
pub struct IdleLock {
    _held: fsutil::HeldLock,
}

/// The name of the file in a store's directory that keeps git from showing it: a store named
/// inside a workspace (`--store`, or the `.cairn` of an earlier version) never appears in
/// `git status`.
pub const GITIGNORE: &str = ".gitignore";

/// Writes `<store>/.gitignore` holding `*` when it is missing. Best effort: a store that cannot
/// be written is not refused for it.
fn write_gitignore(root: &Path) {
    let path = root.join(GITIGNORE);
    if std::fs::symlink_metadata(&path).is_err() {
        if let Ok(mut f) = fsutil::create_new_file(&path) {
            use std::io::Write;
            let _ =
                f.write_all(b"# Written by Cairn: nothing of a Cairn store belongs in git.\n*\n");
        }
    }
}

/// Whether `dir` is a Cairn store's directory: it holds the store's `objects/`, `snapshots/`
/// and `locks/` directories (real directories, not symlinks). Reads three entries' metadata.
pub fn is_store_dir(dir: &Path) -> bool {
    ["objects", "snapshots", "locks"]
        .iter()
        .all(|d| std::fs::symlink_metadata(dir.join(d)).is_ok_and(|m| m.file_type().is_dir()))
}

/// The Cairn store `path` lies in, or is: `path` itself or its nearest ancestor that
/// [`is_store_dir`]. `path` should be canonical.
pub fn store_containing(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|a| is_store_dir(a))
        .map(Path::to_path_buf)
}

impl Layout {
    fn new(root: &Path) -> Self {
        let objects = root.join("objects");
        Layout {
            root: root.to_path_buf(),
            packs: objects.join("packs"),
            large: objects.join("large"),
            objects,
            snapshots: root.join("snapshots"),
            workspaces: root.join("workspaces"),
            journal: root.join("journal"),
            locks: root.join("locks"),
            tmp: root.join("tmp"),
        }
    }

    fn dirs(&self) -> [&Path; 9] {
        [
            &self.root,
            &self.objects,
            &self.packs,
            &self.large,
            &self.snapshots,
            &self.workspaces,
            &self.journal,
            &self.locks,
            &self.tmp,
        ]
    }

    /// The quarantine list: ids found corrupt, rewritten by the next write of the same content.
    pub fn quarantine(&self) -> PathBuf {
        self.objects.join("quarantine")
    }

    /// Path of a large object.
    pub fn large_path(&self, id: &ObjectId) -> PathBuf {
        self.large.join(id.to_hex())
    }

    /// Path of a manifest.
    pub fn manifest_path(&self, id: &SnapshotId) -> PathBuf {
        self.snapshots.join(id.to_hex())
    }
}

#[derive(Debug)]
pub(crate) struct LoadedPack {
    pub(crate) id: ObjectId,
    pub(crate) path: PathBuf,
    pub(crate) index: PackIndex,
    file: Mutex<Option<Arc<File>>>,
}

impl LoadedPack {
    /// Pack `id` of `dir` (`objects/packs/`), with its index.
    fn new(id: ObjectId, dir: &Path, index: PackIndex) -> Arc<LoadedPack> {
        Arc::new(LoadedPack {
            id,
            path: dir.join(format!("{}.pack", id.to_hex())),
            index,
            file: Mutex::new(None),
        })
    }

    pub(crate) fn file(&self) -> Result<Arc<File>> {
        let mut g = self.file.lock();
        if let Some(f) = g.as_ref() {
            return Ok(f.clone());
        }
        let f =
            Arc::new(File::open(&self.path).map_err(|e| Error::io("open pack", &self.path, e))?);
        *g = Some(f.clone());
        Ok(f)
    }

    pub(crate) fn read(&self, e: &IndexEntry) -> Result<Vec<u8>> {
        let f = self.file()?;
        let stored = pack::read_record(&f, &self.path, e)?;
        pack::decode_stored(stored, e.codec, &e.id, e.raw_len, &self.path)
    }
}

/// A pack index that could not be loaded.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BrokenIndex {
    /// Its path.
    #[serde(with = "crate::relpath::os_path")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::RelPath"))]
    pub path: PathBuf,
    /// What is wrong.
    pub error: String,
}

#[derive(Debug, Default)]
struct PackSet {
    packs: HashMap<ObjectId, Arc<LoadedPack>>,
    broken: Vec<BrokenIndex>,
}

/// Where one copy of an object lies.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    Pack(Arc<LoadedPack>, IndexEntry),
    Large(PathBuf),
}

#[derive(Debug)]
struct Inner {
    layout: Layout,
    options: StoreOptions,
    packs: RwLock<PackSet>,
    /// Whether the pack indexes were loaded (by a [`Store::refresh`]). A local store loads
    /// them at the first call that needs them, not at open: a process that only reads a
    /// manifest, or hands its snapshot to a watcher daemon, never pays for reading and
    /// decoding megabytes of indexes.
    packs_loaded: std::sync::atomic::AtomicBool,
    packs_loading: Mutex<()>,
    /// Whether the packs directory changed since it was last listed (a local store's
    /// refresh lists it only then; see [`crate::packwatch`]). Held through a refresh.
    packs_watch: Mutex<crate::packwatch::PacksWatch>,
    /// Set when packs were dropped from the set without their files going away
    /// ([`Store::forget_packs`]): the next refresh lists the directory whatever the watch says.
    packs_forgotten: std::sync::atomic::AtomicBool,
    quarantine: RwLock<HashSet<ObjectId>>,
    mirror: Option<crate::remote::Mirror>,
}

/// A content-addressed store. Cheap to clone; safe to share between threads; several
/// processes may open the same store at once.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens the store at `path`, creating it (owner-only) when `options.create` is set.
    ///
    /// A store another user could change (a directory of it, or above it, owned by another
    /// user or writable by others) is refused with `DENIED` unless
    /// [`crate::location::UNSAFE_STORE_ENV`] names it; see [`crate::location`].
    ///
    /// Every directory of the store must be a real directory: a symlink standing in for one is
    /// refused (`CORRUPT`), so nothing the store writes or deletes can land outside it.
    pub fn open(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        let root = path.as_ref();
        let layout = Layout::new(root);
        if !options.create && std::fs::symlink_metadata(root).is_err() {
            return Err(Error::NotFound {
                what: "store".into(),
                path: Some(root.to_path_buf()),
            });
        }
        if std::fs::symlink_metadata(root).is_ok_and(|m| m.is_file()) {
            // A wrong path (`--store` naming a file), not a damaged store.
            return Err(Error::InvalidArgument(format!(
                "{} is a file, not a store directory; name a directory (a new one is made)",
                root.display()
            )));
        }
        // Before anything is read or made: a store another user could change is refused.
        crate::location::check_store_location(root, &layout.dirs())?;
        for d in layout.dirs() {
            fsutil::ensure_dir(d)?;
        }
        write_gitignore(root);
        let mirror = match &options.remote {
            Some(config) => Some(crate::remote::Mirror::new(config.clone(), root)?),
            None => None,
        };
        let store = Store {
            inner: Arc::new(Inner {
                layout,
                options,
                packs: RwLock::new(PackSet::default()),
                packs_loaded: std::sync::atomic::AtomicBool::new(false),
                packs_loading: Mutex::new(()),
                packs_watch: Mutex::new(Default::default()),
                packs_forgotten: std::sync::atomic::AtomicBool::new(false),
                quarantine: RwLock::new(HashSet::new()),
                mirror,
            }),
        };
        if store.inner.mirror.is_some() {
            // A remote's indexes are listed (and new ones downloaded) now, so an unreachable
            // remote is said at open.
            store.refresh()?;
        } else {
            store.load_quarantine()?;
        }
        Ok(store)
    }

    /// Checks that every directory of the store is a real directory (creating any that is
    /// missing): a symlink swapped in for one, even after the store was opened, is refused
    /// (`CORRUPT`) before anything is locked, written or deleted through it.
    pub(crate) fn check_layout(&self) -> Result<()> {
        for d in self.inner.layout.dirs() {
            fsutil::ensure_dir(d)?;
        }
        Ok(())
    }

    /// The store's directories.
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.inner.layout.root
    }

    /// The options it was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Gives back memory this process holds but does not need now: with glibc, the free
    /// pages of the heap (`malloc_trim`: glibc keeps what its per-thread arenas freed, and a
    /// walk's threads free much in the middle of them). For a long-lived process (the
    /// `cairn watch` daemon) once it is idle; nothing it gives back is lost.
    pub fn release_memory(&self) {
        heap::trim_heap();
    }

    /// Loads the indexes of packs other processes wrote since the last look, forgets packs
    /// that a collection removed, and re-reads the quarantine list (another process's verify may
    /// have added to it: a writer must not deduplicate against a copy it found corrupt).
    ///
    /// With a remote, the remote's pack indexes, large objects and deletion candidates are
    /// listed first (new indexes are downloaded; packs are downloaded when read). A local
    /// store lists its packs directory only when an inotify watch on it says an index was
    /// added or removed since the last listing (see `packwatch`): a writer's refresh costs
    /// nothing however many packs the store holds.
    pub fn refresh(&self) -> Result<()> {
        let remote_packs = match &self.inner.mirror {
            Some(m) => m.sync(&self.inner.layout.tmp)?,
            None => Vec::new(),
        };
        let dir = &self.inner.layout.packs;
        let mut watch = self.inner.packs_watch.lock();
        if self.inner.mirror.is_none()
            && !self.inner.packs_forgotten.swap(false, Ordering::AcqRel)
            && self.inner.packs_loaded.load(Ordering::Acquire)
        {
            let set = self.inner.packs.read();
            if set.broken.is_empty() && watch.unchanged(|id| set.packs.contains_key(id)) {
                drop(set);
                return self.load_quarantine();
            }
        }
        watch.arm(dir);
        let mut present = HashSet::new();
        let rd = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("list", dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(hex) = name.strip_suffix(".idx") else {
                continue;
            };
            let Ok(id) = ObjectId::from_hex(hex) else {
                continue;
            };
            present.insert(id);
        }
        let mut set = self.inner.packs.write();
        let remote_only: Vec<(ObjectId, PathBuf)> = remote_packs
            .into_iter()
            .filter(|(id, _)| !present.contains(id))
            .collect();
        set.packs
            .retain(|id, _| present.contains(id) || remote_only.iter().any(|(r, _)| r == id));
        set.broken.clear();
        for (id, idx_path) in remote_only {
            if set.packs.contains_key(&id) {
                continue;
            }
            match crate::remote::load_index(&idx_path) {
                Ok(index) => {
                    set.packs.insert(id, LoadedPack::new(id, dir, index));
                }
                Err(e) => set.broken.push(BrokenIndex {
                    path: idx_path,
                    error: e.to_string(),
                }),
            }
        }
        for id in present {
            if set.packs.contains_key(&id) {
                continue;
            }
            let idx_path = dir.join(format!("{}.idx", id.to_hex()));
            let meta = match std::fs::symlink_metadata(&idx_path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("inspect", &idx_path, e)),
            };
            if !meta.is_file() {
                set.broken.push(BrokenIndex {
                    path: idx_path,
                    error: "not a regular file".into(),
                });
                continue;
            }
            // An index without its pack names no object (issue 57): a power cut may keep the
            // index's rename and lose the pack's (they are synced together, after both), or
            // keep a collection's removal of the pack and lose that of its index. A
            // collection removes it; a writer stores the objects anew.
            let pack_path = dir.join(format!("{}.pack", id.to_hex()));
            if let Err(e) = std::fs::symlink_metadata(&pack_path) {
                if e.kind() == std::io::ErrorKind::NotFound {
                    continue;
                }
                return Err(Error::io("inspect", &pack_path, e));
            }
            match PackIndex::load(&idx_path) {
                Ok(index) => {
                    set.packs.insert(id, LoadedPack::new(id, dir, index));
                }
                Err(e) if e.is_not_found() => continue,
                Err(e) => set.broken.push(BrokenIndex {
                    path: idx_path,
                    error: e.to_string(),
                }),
            }
        }
        drop(set);
        self.inner
            .packs_loaded
            .store(true, std::sync::atomic::Ordering::Release);
        self.load_quarantine()
    }

    /// The pack set, its indexes loaded first if no refresh has yet (a failure to load them is
    /// met again, and returned, by the refresh a read that misses makes).
    fn pack_set(&self) -> parking_lot::RwLockReadGuard<'_, PackSet> {
        use std::sync::atomic::Ordering;
        if !self.inner.packs_loaded.load(Ordering::Acquire) {
            // One thread loads; the others wait for it rather than read an empty set.
            let _one = self.inner.packs_loading.lock();
            if !self.inner.packs_loaded.load(Ordering::Acquire) {
                let _ = self.refresh();
                self.inner.packs_loaded.store(true, Ordering::Release);
            }
        }
        self.inner.packs.read()
    }

    /// Drops the loaded packs `ids` (and their open files); the next refresh loads them anew.
    pub(crate) fn forget_packs(&self, ids: &[ObjectId]) {
        let mut set = self.inner.packs.write();
        for id in ids {
            set.packs.remove(id);
        }
        self.inner.packs_forgotten.store(true, Ordering::Release);
    }

    pub(crate) fn packs(&self) -> Vec<Arc<LoadedPack>> {
        self.pack_set().packs.values().cloned().collect()
    }

    /// How many packs this handle has loaded (as of its last refresh; the first call loads
    /// them). Lists nothing itself: cheap enough to ask after every snapshot.
    pub fn loaded_pack_count(&self) -> usize {
        self.pack_set().packs.len()
    }

    /// Pack indexes that could not be loaded at the last refresh.
    pub fn broken_indexes(&self) -> Vec<BrokenIndex> {
        self.pack_set().broken.clone()
    }

    fn load_quarantine(&self) -> Result<()> {
        let ids = self.read_quarantine()?;
        let mut q = self.inner.quarantine.write();
        q.clear();
        q.extend(ids);
        Ok(())
    }

    /// The ids listed in `objects/quarantine`, read from the file (the one reader of it: the
    /// handle's load and the collection's refresh share it). Bytes, not text: a line that is not
    /// an id (not even UTF-8) is ignored, as the format says, rather than failing every read of
    /// the store, or every collection, for ever (issues 29 and 53). A missing file is an empty
    /// list; a directory in its place is `CORRUPT`.
    pub(crate) fn read_quarantine(&self) -> Result<Vec<ObjectId>> {
        let path = self.inner.layout.quarantine();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ISDIR.raw_os_error()) => {
                return Err(Error::corrupt(
                    "quarantine list",
                    &path,
                    "a directory stands where the store keeps a file; remove it (the list only \
                     speeds up healing: nothing is lost)",
                ))
            }
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        Ok(bytes
            .split(|&b| b == b'\n')
            .filter_map(|l| std::str::from_utf8(l).ok())
            .filter_map(|l| ObjectId::from_hex(l.trim()).ok())
            .collect())
    }

    /// Records ids found corrupt, so the next write of the same content stores it again.
    pub(crate) fn quarantine(&self, ids: &[ObjectId]) -> Result<()> {
        let mut q = self.inner.quarantine.write();
        let new: Vec<&ObjectId> = ids.iter().filter(|id| !q.contains(id)).collect();
        if new.is_empty() {
            return Ok(());
        }
        let path = self.inner.layout.quarantine();
        // Owner-only like every file of the store (the umask cannot widen 0600), and never
        // through a symlink planted in its place.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(fsutil::FILE_MODE)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        let mut text = String::new();
        for id in &new {
            text.push_str(&id.to_hex());
            text.push('\n');
        }
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io("write", &path, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &path, e))?;
        q.extend(new.into_iter().copied());
        Ok(())
    }

    /// Replaces the quarantine list (after a collection dropped the bad copies).
    pub(crate) fn set_quarantine(&self, ids: HashSet<ObjectId>) -> Result<()> {
        let path = self.inner.layout.quarantine();
        let mut text = String::new();
        for id in &ids {
            text.push_str(&id.to_hex());
            text.push('\n');
        }
        fsutil::write_atomic(&self.inner.layout.tmp, &path, text.as_bytes())?;
        *self.inner.quarantine.write() = ids;
        Ok(())
    }

    /// Whether the store knows of damage a rewrite of the same content would heal: quarantined
    /// objects or broken pack indexes. Writers that reuse ids remembered from earlier (a stat
    /// cache) look each one up while this is so.
    pub fn has_damage(&self) -> bool {
        !self.inner.quarantine.read().is_empty() || !self.pack_set().broken.is_empty()
    }

    pub(crate) fn is_quarantined(&self, id: &ObjectId) -> bool {
        self.inner.quarantine.read().contains(id)
    }

    /// Every place a copy of `id` lies.
    pub(crate) fn locations(&self, id: &ObjectId) -> Vec<Location> {
        let mut out = self.pack_locations(id);
        out.extend(self.large_location(id));
        out
    }

    /// The packs that hold a copy of `id` (from the indexes in memory: no system call).
    fn pack_locations(&self, id: &ObjectId) -> Vec<Location> {
        let mut out = Vec::new();
        for p in self.pack_set().packs.values() {
            if let Some(e) = p.index.lookup(id) {
                out.push(Location::Pack(p.clone(), e));
            }
        }
        out
    }

    /// The large object file of `id`, when there is one.
    fn large_location(&self, id: &ObjectId) -> Option<Location> {
        let large = self.inner.layout.large_path(id);
        std::fs::symlink_metadata(&large)
            .is_ok_and(|m| m.is_file())
            .then_some(Location::Large(large))
    }

    /// The mirror of the remote, when the store has one.
    pub(crate) fn mirror(&self) -> Option<&crate::remote::Mirror> {
        self.inner.mirror.as_ref()
    }

    /// Whether a writer may name `id` without storing it again: present and not quarantined,
    /// and with a remote, held by the remote and not marked for deletion by its collector.
    pub(crate) fn reusable(&self, id: &ObjectId) -> bool {
        self.reusable_looking(id, true)
    }

    /// [`Store::reusable`], where a local store looks for a copy in `objects/large/` only
    /// when `large` says so (a remote's sets are looked at either way). A writer leaves it
    /// out for an object it would put in a pack: such a copy exists only when a process
    /// whose `inline_max_bytes` is smaller stored the same bytes, and missing it costs a
    /// second copy, in a pack, which nothing minds; looking for it costs a `stat` of a path
    /// that is not there for every new object, 9% of the processor time of a first snapshot
    /// of 500,000 files (DEVELOPMENT.md).
    pub(crate) fn reusable_looking(&self, id: &ObjectId, large: bool) -> bool {
        if self.is_quarantined(id) {
            return false;
        }
        match &self.inner.mirror {
            Some(m) => m.reusable(self, id),
            None => self.in_packs(id) || (large && self.has_large_file(id)),
        }
    }

    /// Whether `objects/large/` holds a file for `id`.
    fn has_large_file(&self, id: &ObjectId) -> bool {
        std::fs::symlink_metadata(self.inner.layout.large_path(id)).is_ok_and(|m| m.is_file())
    }

    /// Whether a pack this handle has loaded holds `id` (the first call loading them).
    fn in_packs(&self, id: &ObjectId) -> bool {
        self.pack_set()
            .packs
            .values()
            .any(|p| p.index.lookup(id).is_some())
    }

    /// Downloads the pack of `loc` when it is only on the remote.
    fn ensure_local(&self, loc: &Location) -> Result<()> {
        match loc {
            Location::Pack(p, _) => self.ensure_pack_local(p),
            Location::Large(_) => Ok(()),
        }
    }

    /// Downloads pack `p` when it is only on the remote.
    pub(crate) fn ensure_pack_local(&self, p: &LoadedPack) -> Result<()> {
        let Some(m) = &self.inner.mirror else {
            return Ok(());
        };
        if p.file.lock().is_some() || std::fs::symlink_metadata(&p.path).is_ok() {
            return Ok(());
        }
        m.fetch_pack(&p.id, &self.inner.layout.packs, &self.inner.layout.tmp)
    }

    /// Downloads large object `id` when only the remote holds it; true when it did.
    fn fetch_large(&self, id: &ObjectId) -> Result<bool> {
        match &self.inner.mirror {
            Some(m) if m.has_large(id) => {
                let dest = self.inner.layout.large_path(id);
                if std::fs::symlink_metadata(&dest).is_ok() {
                    return Ok(false);
                }
                m.fetch_large(id, &dest, &self.inner.layout.tmp)
            }
            _ => Ok(false),
        }
    }

    /// Downloads every large object the remote holds and this cache lacks.
    pub(crate) fn fetch_remote_large(&self) -> Result<()> {
        if let Some(m) = &self.inner.mirror {
            for id in m.large_ids() {
                self.fetch_large(&id)?;
            }
        }
        Ok(())
    }

    /// Whether the store holds `id` (in a pack this handle has loaded, the first call loading
    /// them, or as a large object; with a remote, in the remote as well). A pack another
    /// process wrote since this handle's last refresh is not looked at.
    pub fn contains(&self, id: &ObjectId) -> bool {
        if self.inner.mirror.as_ref().is_some_and(|m| m.has_large(id)) {
            return true;
        }
        self.in_packs(id) || self.has_large_file(id)
    }

    /// The raw length of object `id` as recorded when it was stored, if present.
    pub fn object_size(&self, id: &ObjectId) -> Option<u64> {
        let _ = self.fetch_large(id);
        for p in self.pack_set().packs.values() {
            if let Some(e) = p.index.lookup(id) {
                return Some(e.raw_len);
            }
        }
        read_large_header(&self.inner.layout.large_path(id))
            .ok()
            .map(|h| h.raw_len)
    }

    /// Reads object `id` whole, checking its hash. Large objects are read whole too: use
    /// [`Store::copy_object_to`] to stream them.
    pub fn read_object(&self, id: &ObjectId) -> Result<(ObjectKind, Vec<u8>)> {
        let mut out = Vec::new();
        let kind = self.with_verified_copy(id, |loc| match loc {
            Location::Pack(p, e) => {
                let bytes = p.read(e)?;
                out = bytes;
                Ok(e.kind)
            }
            Location::Large(path) => {
                let mut buf = Vec::new();
                let kind = copy_large(path, id, &mut buf)?;
                out = buf;
                Ok(kind)
            }
        })?;
        Ok((kind, out))
    }

    /// Streams object `id` into `out`, checking its hash; returns its length. When the content
    /// does not match its id, a `CORRUPT` error is returned after some bytes may have been
    /// written: callers write into a staging file they discard on error.
    pub fn copy_object_to(&self, id: &ObjectId, out: &mut dyn Write) -> Result<u64> {
        self.with_verified_copy(id, |loc| match loc {
            Location::Pack(p, e) => {
                let bytes = p.read(e)?;
                out.write_all(&bytes).map_err(|err| Error::Stream {
                    action: "write",
                    source: err,
                })?;
                Ok(bytes.len() as u64)
            }
            Location::Large(path) => {
                let mut counter = fsutil::CountingWriter { inner: out, n: 0 };
                copy_large(path, id, &mut counter)?;
                Ok(counter.n)
            }
        })
    }

    /// Runs `f` on each copy of `id` until one succeeds. Copies that fail their check are put in
    /// quarantine. No copy at all, even after a refresh, is `NOT_FOUND` (`CORRUPT` while a pack
    /// index cannot be read: it may hold the object).
    fn with_verified_copy<T>(
        &self,
        id: &ObjectId,
        mut f: impl FnMut(&Location) -> Result<T>,
    ) -> Result<T> {
        let mut last_err = None;
        // Each copy in turn (fetched first when only the remote has it); the first that
        // reads whole wins, else the last error is kept.
        let mut first_good = |locs: &[Location], last_err: &mut Option<Error>| -> Option<T> {
            for loc in locs {
                if let Err(e) = self.ensure_local(loc) {
                    *last_err = Some(e);
                    continue;
                }
                match f(loc) {
                    Ok(v) => return Some(v),
                    Err(e) => *last_err = Some(e),
                }
            }
            None
        };
        // The usual case first: a pack holds it and it reads whole, without a look for a
        // large object file (a failed `lstat` per object read was a tenth of a full restore's
        // system calls).
        let packs = self.pack_locations(id);
        if let Some(v) = first_good(&packs, &mut last_err) {
            return Ok(v);
        }
        let mut locs: Vec<Location> = self.large_location(id).into_iter().collect();
        if packs.is_empty() && locs.is_empty() {
            // Not here as this handle knows the store: look again (another writer may have
            // added a pack), then ask the remote for a large object.
            self.refresh()?;
            locs = self.locations(id);
            if locs.is_empty() && self.fetch_large(id)? {
                locs = self.locations(id);
            }
            if locs.is_empty() {
                // A pack index that cannot be read may well hold it: the store is damaged,
                // which is CORRUPT (and what `verify` reports), not a name that does not exist.
                if let Some(broken) = self.broken_indexes().first() {
                    return Err(Error::corrupt(
                        format!("object {id}"),
                        &broken.path,
                        format!(
                            "it is in no readable pack, and this pack index is damaged ({})",
                            broken.error
                        ),
                    ));
                }
                return Err(Error::not_found(format!("object {id}")));
            }
        }
        if let Some(v) = first_good(&locs, &mut last_err) {
            return Ok(v);
        }
        // A collection in another process may have repacked the object since this handle
        // last looked (the pack we knew is gone, its objects live in a new one): look again
        // once before failing.
        if last_err.as_ref().is_some_and(|e| e.is_not_found()) {
            self.refresh()?;
            if let Some(v) = first_good(&self.locations(id), &mut last_err) {
                return Ok(v);
            }
        }
        let err = last_err.expect("at least one location was tried");
        // An index names the object, and its pack (or large file) is gone even after a fresh
        // look: the object is not here, and the file that should hold it is named (the layer
        // that knows which snapshot needs it reports that as damage).
        let err = match err {
            Error::Io { path, source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::NotFound {
                    what: format!("object {id}"),
                    path: Some(path),
                }
            }
            e => e,
        };
        if err.kind_is_corrupt() {
            let _ = self.quarantine(&[*id]);
        }
        Err(err)
    }

    /// Reads and decodes tree `id`.
    pub fn read_tree(&self, id: &TreeId) -> Result<Tree> {
        let (kind, bytes) = self.read_object(&id.0)?;
        let origin = self.inner.layout.objects.join(id.to_hex());
        if kind != ObjectKind::Tree {
            // The same bytes may have been stored as a blob first; they still decode as a tree.
            return Tree::decode(&bytes, Some(id), &origin);
        }
        Tree::decode(&bytes, Some(id), &origin)
    }

    /// Registers an operation marker; collections defer their sweep while it is held, and
    /// retention keeps the snapshots in `pins`.
    pub fn begin_operation(
        &self,
        kind: OperationKind,
        pins: &[SnapshotId],
    ) -> Result<OperationGuard> {
        // A handle lives long (the bindings keep one open): a store directory swapped for a
        // symlink since it was opened is refused here, at the start of every operation, as it
        // is at opening, so nothing is written through it (issue 32).
        self.check_layout()?;
        let mut guard = lock::begin(&self.inner.layout.locks, &self.inner.layout.tmp, kind, pins)?;
        if let Some(m) = &self.inner.mirror {
            guard.lease = Some(m.lease(kind, pins)?);
        }
        Ok(guard)
    }

    /// Takes the store for a whole-store change (moving it): `gc.lock` exclusively, without
    /// waiting, then checks that no live process holds an operation marker. `BUSY` when a
    /// collection or any operation (snapshot, restore, copy) is going on. While the returned
    /// lock is held no operation can start.
    pub fn lock_idle(&self) -> Result<IdleLock> {
        let path = lock::gc_lock_path(&self.inner.layout.locks);
        let busy = |detail: String| Error::Busy {
            what: format!("store {}", self.path().display()),
            detail,
        };
        let Some(held) = fsutil::try_lock_exclusive(&path)? else {
            return Err(busy(
                "a collection or an operation is starting; try again when it is done".into(),
            ));
        };
        let live = lock::live_markers(&self.inner.layout.locks)?;
        if let Some(m) = live.first() {
            return Err(busy(format!(
                "process {} is using it ({:?}, {} operation(s) in all); stop it, or try again \
                 when it is done",
                m.pid,
                m.kind,
                live.len()
            )));
        }
        Ok(IdleLock { _held: held })
    }

    /// The operation markers held by live processes (stale ones are removed).
    pub fn live_operations(&self) -> Result<Vec<MarkerInfo>> {
        lock::live_markers(&self.inner.layout.locks)
    }

    /// Whether every object of `ids` may still be named without storing it again (present and
    /// not quarantined, see [`ObjectWriter::contains`]), after a refresh: packs a collection
    /// removed since this handle looked are forgotten first. Asked under an operation (so
    /// that no collection removes any of them after the answer) before committing a snapshot
    /// whose objects were written under an operation that has ended.
    pub fn all_reusable(&self, ids: &[ObjectId]) -> Result<bool> {
        self.refresh()?;
        Ok(ids.iter().all(|id| self.reusable(id)))
    }

    /// The directory for a workspace's own state (its stat cache), created owner-only.
    /// A workspace id is 1 to 64 of `[A-Za-z0-9_.-]`, not starting with a dot.
    pub fn workspace_dir(&self, workspace_id: &str) -> Result<PathBuf> {
        check_workspace_id(workspace_id)?;
        let dir = self.inner.layout.workspaces.join(workspace_id);
        fsutil::ensure_dir(&dir)?;
        Ok(dir)
    }
}

/// Checks a workspace id: 1 to 64 of `[A-Za-z0-9_.-]`, not starting with a dot.
pub fn check_workspace_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "'{id}' is not a workspace id: use 1 to 64 letters, digits, '_', '-' or '.', not starting with '.'"
        )))
    }
}

impl Error {
    fn kind_is_corrupt(&self) -> bool {
        use crate::error::Classify;
        self.kind() == crate::error::ErrorKind::Corrupt
    }
}
