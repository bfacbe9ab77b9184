//! The store: objects in packs (and large blobs in files of their own), manifests, and the
//! directories the layers above keep their state in.

use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::{resolve_prefix, ObjectId, SnapshotId, TreeId};
use crate::lock::{self, MarkerInfo, OperationGuard, OperationKind};
use crate::manifest::Manifest;
use crate::pack::{self, Codec, IndexEntry, ObjectKind, PackIndex, PackWriter};
use crate::tree::Tree;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Magic at the start of a large object's file.
pub const LARGE_MAGIC: &[u8; 8] = b"CAIRNLRG";
/// Length of a large object's header.
pub const LARGE_HEADER_LEN: u64 = 24;
const LARGE_VERSION: u32 = 1;
const CHUNK: usize = 256 * 1024;

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

/// Readable snapshots (oldest first) and the ids of manifests that could not be read.
pub type SnapshotList = (Vec<SnapshotEntry>, Vec<(SnapshotId, Error)>);

/// A snapshot as listed by [`Store::list_snapshots`].
#[derive(Debug, Clone)]
pub struct SnapshotEntry {
    /// Its id.
    pub id: SnapshotId,
    /// Its manifest.
    pub manifest: Manifest,
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
        trim_heap();
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

    /// How an object of `kind` with `bytes` is stored under this store's compression
    /// setting: zstd (at most [`TREE_LEVEL`] for a tree) when that saves an eighth or more,
    /// else as it is (`None`: the bytes themselves).
    pub(crate) fn compressed(&self, kind: ObjectKind, bytes: &[u8]) -> (Codec, Option<Vec<u8>>) {
        match self.inner.options.compression {
            Compression::None => (Codec::Raw, None),
            Compression::Zstd { level } => {
                let level = match kind {
                    ObjectKind::Tree => level.min(TREE_LEVEL),
                    _ => level,
                };
                if bytes.len() < 64 {
                    return (Codec::Raw, None);
                }
                match compress_reusing_context(bytes, level) {
                    Some(c) if c.len() < bytes.len() - bytes.len() / 8 => (Codec::Zstd, Some(c)),
                    _ => (Codec::Raw, None),
                }
            }
        }
    }

    /// Starts writing objects. The writer is shared by reference between threads.
    pub fn writer<'a>(&'a self, guard: &'a OperationGuard) -> ObjectWriter<'a> {
        // Another process may have written packs since we opened: see them, to share objects.
        let refreshed = self.refresh().is_ok();
        ObjectWriter {
            store: self,
            _guard: guard,
            // With a remote, reuse needs a view taken after the operation's lease: without
            // it, a collection may have marked (and may delete) what the writer would reuse.
            reuse: refreshed || self.inner.mirror.is_none(),
            current: Mutex::new(None),
            written: Mutex::new(HashSet::new()),
            remembered: None,
            raw: false,
            stats: AtomicStats::default(),
        }
    }

    /// Writes a manifest once every object it names is durable, and returns the snapshot id.
    /// Refuses (`CORRUPT`) a manifest whose root tree the store does not hold.
    ///
    /// With a remote, the root tree must be on the remote (a writer's `commit` uploads what it
    /// wrote), the operation's lease must still hold, and the manifest is uploaded before it is
    /// written locally.
    pub fn write_manifest(&self, guard: &OperationGuard, m: &Manifest) -> Result<SnapshotId> {
        let present = |s: &Store| match &s.inner.mirror {
            Some(_) => s.reusable(&m.root.0),
            None => s.contains(&m.root.0),
        };
        if !present(self) {
            self.refresh()?;
            if !present(self) {
                return Err(Error::corrupt(
                    format!("manifest for tree {}", m.root.short()),
                    self.path(),
                    "its root tree is not in the store; write and commit the objects first",
                ));
            }
        }
        let bytes = m.encode()?;
        let id = Manifest::id_of(&bytes);
        self.write_manifest_bytes(guard, &id, &bytes)?;
        Ok(id)
    }

    pub(crate) fn write_manifest_bytes(
        &self,
        guard: &OperationGuard,
        id: &SnapshotId,
        bytes: &[u8],
    ) -> Result<()> {
        if let Some(m) = &self.inner.mirror {
            if let Some(lease) = &guard.lease {
                lease.check(m.config.lease_ttl / 6)?;
            }
            m.upload_manifest(id, bytes)?;
        }
        let path = self.inner.layout.manifest_path(id);
        fsutil::write_atomic(&self.inner.layout.tmp, &path, bytes)
    }

    /// Reads the raw bytes of a manifest.
    pub fn read_manifest_bytes(&self, id: &SnapshotId) -> Result<Vec<u8>> {
        let path = self.inner.layout.manifest_path(id);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                return Err(Error::corrupt(
                    format!("manifest {}", id.short()),
                    &path,
                    "is not a regular file",
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(m) = &self.inner.mirror {
                    if let Some(bytes) = m.fetch_manifest(id)? {
                        fsutil::write_atomic(&self.inner.layout.tmp, &path, &bytes)?;
                        return Ok(bytes);
                    }
                }
                return Err(Error::NotFound {
                    what: format!("snapshot {}", id.short()),
                    path: Some(path),
                });
            }
            Err(e) => return Err(Error::io("inspect", &path, e)),
        }
        std::fs::read(&path).map_err(|e| Error::io("read manifest", &path, e))
    }

    /// Reads and checks a snapshot's manifest.
    pub fn read_manifest(&self, id: &SnapshotId) -> Result<Manifest> {
        let bytes = self.read_manifest_bytes(id)?;
        Manifest::decode(&bytes, Some(id), &self.inner.layout.manifest_path(id))
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

    /// Whether a snapshot's manifest exists.
    /// With a remote, a manifest only the remote holds is downloaded.
    pub fn has_snapshot(&self, id: &SnapshotId) -> bool {
        let local = std::fs::symlink_metadata(self.inner.layout.manifest_path(id))
            .map(|m| m.is_file())
            .unwrap_or(false);
        local || (self.inner.mirror.is_some() && self.read_manifest_bytes(id).is_ok())
    }

    /// Whether what snapshot `id` names may be taken as stored: without a remote, whether the
    /// store holds it; with one, whether the remote holds its manifest (a snapshot taken before
    /// the store became a cache of the remote is only local, and the remote may lack every
    /// object it names: a stat cache recorded with it must not vouch for them, issue 32).
    pub fn holds_snapshot_everywhere(&self, id: &SnapshotId) -> Result<bool> {
        match &self.inner.mirror {
            None => Ok(self.has_snapshot(id)),
            Some(m) => m.holds_manifest(id),
        }
    }

    /// The ids of every manifest file, in no order; with a remote, the remote's too.
    pub fn snapshot_ids(&self) -> Result<Vec<SnapshotId>> {
        let dir = &self.inner.layout.snapshots;
        let mut out = match &self.inner.mirror {
            Some(m) => m.manifest_ids()?,
            None => Vec::new(),
        };
        let rd = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("list", dir, e))?;
            if let Some(Ok(id)) = entry.file_name().to_str().map(SnapshotId::from_hex) {
                out.push(id);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Every readable snapshot, oldest first, and the ids of those that could not be read.
    pub fn list_snapshots(&self) -> Result<SnapshotList> {
        let mut ok = Vec::new();
        let mut bad = Vec::new();
        for id in self.snapshot_ids()? {
            match self.read_manifest(&id) {
                Ok(manifest) => ok.push(SnapshotEntry { id, manifest }),
                Err(e) if e.is_not_found() => {}
                Err(e) => bad.push((id, e)),
            }
        }
        ok.sort_by_key(|e| (e.manifest.created_ms, e.id));
        Ok((ok, bad))
    }

    /// Resolves a snapshot name: a full id, a unique prefix of 4+ hex characters, or a label
    /// (the newest snapshot with that label). A prefix of one snapshot's id that is also
    /// another's label is ambiguous (`INVALID_ARGUMENT`, naming both); a full id never is.
    pub fn resolve(&self, name: &str) -> Result<SnapshotId> {
        let ids = self.snapshot_ids()?;
        let is_hex =
            name.len() >= crate::id::MIN_PREFIX_LEN && name.bytes().all(|b| b.is_ascii_hexdigit());
        let mut by_prefix = None;
        if is_hex {
            match resolve_prefix(name, "snapshot", ids.iter().map(|i| i.0)) {
                Ok(id) if name.len() == 64 => return Ok(SnapshotId(id)),
                Ok(id) => by_prefix = Some(SnapshotId(id)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let (list, _) = self.list_snapshots()?;
        let by_label = list
            .iter()
            .rev()
            .find(|e| e.manifest.label.as_deref() == Some(name))
            .map(|e| e.id);
        match (by_prefix, by_label) {
            (Some(p), Some(l)) if p != l => {
                return Err(Error::InvalidArgument(format!(
                    "the name '{name}' is ambiguous: it is a prefix of snapshot {}'s id and the \
                     label of snapshot {}; name the one you mean by its full id ({} or {})",
                    p.short(),
                    l.short(),
                    p.to_hex(),
                    l.to_hex()
                )))
            }
            (Some(id), _) | (None, Some(id)) => return Ok(id),
            (None, None) => {}
        }
        Err(Error::not_found(format!(
            "snapshot '{name}' (no id, prefix or label matches; `cairn list` shows them)"
        )))
    }

    /// Removes a manifest file. Objects stay until a collection.
    pub(crate) fn remove_manifest(&self, id: &SnapshotId) -> Result<()> {
        if let Some(m) = &self.inner.mirror {
            m.delete_manifest(id)?;
        }
        let path = self.inner.layout.manifest_path(id);
        fsutil::remove_if_exists(&path)?;
        fsutil::sync_dir(&self.inner.layout.snapshots)
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

/// The longest label a snapshot or a checkpoint may have, in bytes (issue 53.9: an agent
/// controls labels, and one of megabytes would flood every listing that shows it).
pub const MAX_LABEL_BYTES: usize = 1000;

/// Checks a snapshot's or checkpoint's label: at most [`MAX_LABEL_BYTES`] bytes, else
/// `INVALID_ARGUMENT` naming the limit.
pub fn check_label(label: &str) -> Result<()> {
    if label.len() <= MAX_LABEL_BYTES {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "a label of {} bytes is too long: labels hold at most {MAX_LABEL_BYTES} bytes; \
         shorten it, and keep longer text in the metadata",
        label.len()
    )))
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

#[derive(Debug, Clone, Copy)]
pub(crate) struct LargeHeader {
    pub(crate) kind: ObjectKind,
    pub(crate) codec: Codec,
    pub(crate) raw_len: u64,
}

pub(crate) fn read_large_header(path: &Path) -> Result<LargeHeader> {
    let f = File::open(path).map_err(|e| Error::io("open object", path, e))?;
    let mut h = [0u8; LARGE_HEADER_LEN as usize];
    f.read_exact_at(&mut h, 0).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            Error::corrupt("large object", path, "truncated header")
        }
        _ => Error::io("read object", path, e),
    })?;
    parse_large_header(&h, path)
}

fn parse_large_header(h: &[u8; LARGE_HEADER_LEN as usize], path: &Path) -> Result<LargeHeader> {
    let bad = |d: &str| Error::corrupt("large object", path, d);
    if &h[..8] != LARGE_MAGIC {
        return Err(bad("bad magic"));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != LARGE_VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: LARGE_VERSION,
        });
    }
    Ok(LargeHeader {
        kind: ObjectKind::from_code(h[12]).ok_or_else(|| bad("unknown kind"))?,
        codec: Codec::from_code(h[13]).ok_or_else(|| bad("unknown codec"))?,
        raw_len: u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")),
    })
}

fn encode_large_header(h: &LargeHeader) -> [u8; LARGE_HEADER_LEN as usize] {
    let mut out = [0u8; LARGE_HEADER_LEN as usize];
    out[..8].copy_from_slice(LARGE_MAGIC);
    out[8..12].copy_from_slice(&LARGE_VERSION.to_le_bytes());
    out[12] = h.kind.code();
    out[13] = h.codec.code();
    out[16..24].copy_from_slice(&h.raw_len.to_le_bytes());
    out
}

/// Streams a large object into `out`, checking its length and hash at the end.
pub(crate) fn copy_large(path: &Path, id: &ObjectId, out: &mut dyn Write) -> Result<ObjectKind> {
    let mut f = File::open(path).map_err(|e| Error::io("open object", path, e))?;
    let mut h = [0u8; LARGE_HEADER_LEN as usize];
    f.read_exact(&mut h).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            Error::corrupt(format!("object {}", id.short()), path, "truncated header")
        }
        _ => Error::io("read object", path, e),
    })?;
    let header = parse_large_header(&h, path)?;
    let mut hasher = crate::id::Hasher::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; CHUNK];
    let bad = |d: String| Error::corrupt(format!("object {}", id.short()), path, d);
    let mut reader: Box<dyn Read> = match header.codec {
        Codec::Raw => Box::new(f),
        Codec::Zstd => Box::new(
            zstd::stream::read::Decoder::new(f).map_err(|e| Error::io("read object", path, e))?,
        ),
    };
    loop {
        let k = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(bad(format!("does not read back: {e}"))),
        };
        hasher.update(&buf[..k]);
        n += k as u64;
        if n > header.raw_len {
            return Err(bad("longer than recorded".into()));
        }
        out.write_all(&buf[..k]).map_err(|e| Error::Stream {
            action: "write",
            source: e,
        })?;
    }
    if n != header.raw_len {
        return Err(bad(format!(
            "{n} bytes where {} were stored",
            header.raw_len
        )));
    }
    let actual = hasher.finish();
    if actual != *id {
        return Err(bad(format!("its bytes hash to {}", actual.short())));
    }
    Ok(header.kind)
}

/// What an [`ObjectWriter`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WriteStats {
    /// New objects written.
    pub objects: u64,
    /// Their bytes before compression.
    pub raw_bytes: u64,
    /// Their bytes as stored.
    pub stored_bytes: u64,
    /// Objects that were already in the store (or written earlier in the same batch).
    pub deduplicated: u64,
    /// Pack files created.
    pub packs: u64,
    /// Large objects created.
    pub large_objects: u64,
}

#[derive(Debug, Default)]
struct AtomicStats {
    objects: AtomicU64,
    raw_bytes: AtomicU64,
    stored_bytes: AtomicU64,
    deduplicated: AtomicU64,
    packs: AtomicU64,
    large_objects: AtomicU64,
}

/// The result of storing one blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOutcome {
    /// The object's id.
    pub id: ObjectId,
    /// Its length.
    pub size: u64,
    /// Whether this call wrote it (false: it was there already).
    pub written: bool,
}

/// Writes objects into new packs (and large blobs into files of their own) for one
/// operation. Use it from many threads by reference; [`ObjectWriter::commit`] makes everything
/// durable. Dropping it without committing removes its temporary files; packs it already
/// completed stay as unreferenced objects until a collection.
#[derive(Debug)]
pub struct ObjectWriter<'a> {
    store: &'a Store,
    _guard: &'a OperationGuard,
    reuse: bool,
    current: Mutex<Option<PackWriter>>,
    written: Mutex<HashSet<ObjectId>>,
    /// With [`ObjectWriter::remember_ids`]: every object id it was given, stored or not.
    remembered: Option<Mutex<Vec<ObjectId>>>,
    /// With [`ObjectWriter::defer_compression`]: packed objects are stored uncompressed.
    raw: bool,
    stats: AtomicStats,
}

impl std::fmt::Debug for PackWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackWriter")
            .field("len", &self.len())
            .finish()
    }
}

impl ObjectWriter<'_> {
    /// The store written to.
    pub fn store(&self) -> &Store {
        self.store
    }

    /// Whether `id` is available to reference: written by this writer, or present in the store
    /// and not quarantined.
    pub fn contains(&self, id: &ObjectId) -> bool {
        self.written.lock().contains(id) || (self.reuse && self.store.reusable(id))
    }

    /// From now on, stores the objects it packs uncompressed (trees, and blobs up to
    /// `inline_max_bytes`), for a snapshot that must answer soon: a merge of small packs
    /// ([`Store::merge_small_packs`]) compresses them later, as the store's compression
    /// setting says. A blob large enough for a file of its own is compressed as always.
    /// Readers take either form.
    pub fn defer_compression(&mut self) {
        self.raw = true;
    }

    /// From now on, remembers the id of every object it is given, whether it stores it or
    /// finds it present already ([`ObjectWriter::take_remembered`]): what a snapshot set aside
    /// without an operation checks is still in the store before it is committed (see
    /// [`Store::all_reusable`]).
    pub fn remember_ids(&mut self) {
        self.remembered.get_or_insert_with(Default::default);
    }

    /// The ids remembered since [`ObjectWriter::remember_ids`] (empty without it), handed
    /// over: the writer remembers from an empty list again.
    pub fn take_remembered(&mut self) -> Vec<ObjectId> {
        self.remembered
            .as_mut()
            .map(|r| std::mem::take(r.get_mut()))
            .unwrap_or_default()
    }

    /// Claims `id` for writing; false when it is already present or being written. An
    /// object bound for a pack (`packed`) is not looked for in `objects/large/` (see
    /// [`Store::reusable_looking`]).
    fn claim(&self, id: &ObjectId, packed: bool) -> bool {
        if let Some(r) = &self.remembered {
            r.lock().push(*id);
        }
        if self.reuse && self.store.reusable_looking(id, !packed) {
            return false;
        }
        self.written.lock().insert(*id)
    }

    fn compress(&self, kind: ObjectKind, bytes: &[u8]) -> (Codec, Option<Vec<u8>>) {
        if self.raw {
            return (Codec::Raw, None);
        }
        self.store.compressed(kind, bytes)
    }

    /// Stores `bytes` as one object of `kind` (in a pack), unless it is there already.
    pub fn put(&self, kind: ObjectKind, bytes: &[u8]) -> Result<PutOutcome> {
        let id = ObjectId::of(bytes);
        self.put_with_id(id, kind, bytes)
    }

    fn put_with_id(&self, id: ObjectId, kind: ObjectKind, bytes: &[u8]) -> Result<PutOutcome> {
        let size = bytes.len() as u64;
        if !self.claim(&id, true) {
            self.stats.deduplicated.fetch_add(1, Ordering::Relaxed);
            return Ok(PutOutcome {
                id,
                size,
                written: false,
            });
        }
        let (codec, compressed) = self.compress(kind, bytes);
        let stored = compressed.as_deref().unwrap_or(bytes);
        let result = (|| {
            let mut cur = self.current.lock();
            if cur.is_none() {
                *cur = Some(PackWriter::create(&self.store.inner.layout.tmp)?);
            }
            let pw = cur.as_mut().expect("created above");
            pw.append(id, kind, codec, size, stored)?;
            if pw.len() >= self.store.inner.options.pack_target_bytes {
                let full = cur.take().expect("present");
                drop(cur);
                self.install(full, None)?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.written.lock().remove(&id);
            return Err(e);
        }
        self.stats.objects.fetch_add(1, Ordering::Relaxed);
        self.stats.raw_bytes.fetch_add(size, Ordering::Relaxed);
        self.stats.stored_bytes.fetch_add(
            stored.len() as u64 + pack::RECORD_HEADER_LEN as u64,
            Ordering::Relaxed,
        );
        Ok(PutOutcome {
            id,
            size,
            written: true,
        })
    }

    /// Stores a tree.
    pub fn put_tree(&self, tree: &Tree) -> Result<TreeId> {
        let bytes = tree.encode();
        Ok(TreeId(self.put(ObjectKind::Tree, &bytes)?.id))
    }

    /// Syncs `pw` (and `with`, see [`PackWriter::finish`]), renames it into place and loads
    /// it. `false` (and nothing synced) when it holds no object.
    fn install(&self, pw: PackWriter, with: Option<fsutil::ToSync<'_>>) -> Result<bool> {
        if pw.object_count() == 0 {
            return Ok(false);
        }
        let layout = &self.store.inner.layout;
        let (id, path, index) = pw.finish(&layout.tmp, &layout.packs, with)?;
        if let Some(m) = &self.store.inner.mirror {
            m.upload_pack(&id, &path)?;
        }
        self.store.inner.packs.write().packs.insert(
            id,
            Arc::new(LoadedPack {
                id,
                path,
                index,
                file: Mutex::new(None),
            }),
        );
        self.stats.packs.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Stores a blob read from `reader`, hashing it as it is read. `size_hint` is the expected
    /// length: blobs up to `inline_max_bytes` go into a pack (read into a buffer of at most
    /// that size), larger ones are streamed into a file of their own and never held whole.
    pub fn put_blob_from(&self, reader: &mut dyn Read, size_hint: u64) -> Result<PutOutcome> {
        let inline_max = self.store.inner.options.inline_max_bytes;
        let mut head = Vec::new();
        if size_hint <= inline_max {
            let cap = usize::try_from(size_hint).unwrap_or(0);
            head.reserve(cap + 1);
            reader
                .take(inline_max + 1)
                .read_to_end(&mut head)
                .map_err(|e| Error::Stream {
                    action: "read",
                    source: e,
                })?;
            if head.len() as u64 <= inline_max {
                return self.put(ObjectKind::Blob, &head);
            }
        }
        self.put_large(head, reader, ObjectKind::Blob)
    }

    fn put_large(
        &self,
        head: Vec<u8>,
        reader: &mut dyn Read,
        kind: ObjectKind,
    ) -> Result<PutOutcome> {
        let layout = &self.store.inner.layout;
        let tmp = fsutil::temp_name(&layout.tmp, "large");
        let guard = TempFile(tmp.clone());
        let mut file = fsutil::create_new_file(&tmp)?;
        // Decide the codec from the first chunk.
        let mut first = head;
        if first.len() < CHUNK {
            let want = CHUNK - first.len();
            reader
                .take(want as u64)
                .read_to_end(&mut first)
                .map_err(|e| Error::Stream {
                    action: "read",
                    source: e,
                })?;
        }
        // Never deferred (`defer_compression`): no merge comes back to a file of its own.
        let codec = match self.store.compressed(ObjectKind::Blob, &first) {
            (Codec::Zstd, _) => Codec::Zstd,
            _ => Codec::Raw,
        };
        let level = match self.store.inner.options.compression {
            Compression::Zstd { level } => level,
            Compression::None => 0,
        };
        file.write_all(&[0u8; LARGE_HEADER_LEN as usize])
            .map_err(|e| Error::io("write", &tmp, e))?;
        let mut hasher = crate::id::Hasher::new();
        let mut n = 0u64;
        let file = {
            let mut sink: Box<dyn Write> = match codec {
                Codec::Raw => Box::new(std::io::BufWriter::with_capacity(CHUNK, &mut file)),
                Codec::Zstd => Box::new(
                    zstd::stream::write::Encoder::new(&mut file, level)
                        .map_err(|e| Error::io("compress", &tmp, e))?
                        .auto_finish(),
                ),
            };
            hasher.update(&first);
            n += first.len() as u64;
            sink.write_all(&first)
                .map_err(|e| Error::io("write", &tmp, e))?;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let k = match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(Error::Stream {
                            action: "read",
                            source: e,
                        })
                    }
                };
                hasher.update(&buf[..k]);
                n += k as u64;
                sink.write_all(&buf[..k])
                    .map_err(|e| Error::io("write", &tmp, e))?;
            }
            sink.flush().map_err(|e| Error::io("write", &tmp, e))?;
            drop(sink);
            file
        };
        let id = hasher.finish();
        let header = encode_large_header(&LargeHeader {
            kind,
            codec,
            raw_len: n,
        });
        file.write_all_at(&header, 0)
            .map_err(|e| Error::io("write", &tmp, e))?;
        if !self.claim(&id, false) {
            self.stats.deduplicated.fetch_add(1, Ordering::Relaxed);
            return Ok(PutOutcome {
                id,
                size: n,
                written: false,
            });
        }
        let stored = file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io("inspect", &tmp, e))?;
        file.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
        drop(file);
        let dest = layout.large_path(&id);
        std::fs::rename(&tmp, &dest).map_err(|e| {
            self.written.lock().remove(&id);
            Error::io("rename into place", &dest, e)
        })?;
        std::mem::forget(guard);
        fsutil::sync_dir(&layout.large)?;
        if let Some(m) = &self.store.inner.mirror {
            if let Err(e) = m.upload_large(&id, &dest) {
                self.written.lock().remove(&id);
                return Err(e);
            }
        }
        self.stats.objects.fetch_add(1, Ordering::Relaxed);
        self.stats.large_objects.fetch_add(1, Ordering::Relaxed);
        self.stats.raw_bytes.fetch_add(n, Ordering::Relaxed);
        self.stats.stored_bytes.fetch_add(stored, Ordering::Relaxed);
        Ok(PutOutcome {
            id,
            size: n,
            written: true,
        })
    }

    /// What was written so far.
    pub fn stats(&self) -> WriteStats {
        WriteStats {
            objects: self.stats.objects.load(Ordering::Relaxed),
            raw_bytes: self.stats.raw_bytes.load(Ordering::Relaxed),
            stored_bytes: self.stats.stored_bytes.load(Ordering::Relaxed),
            deduplicated: self.stats.deduplicated.load(Ordering::Relaxed),
            packs: self.stats.packs.load(Ordering::Relaxed),
            large_objects: self.stats.large_objects.load(Ordering::Relaxed),
        }
    }

    /// Syncs and installs the open pack; afterwards every object written is durable and
    /// readable by any process.
    pub fn commit(self) -> Result<WriteStats> {
        let cur = self.current.lock().take();
        if let Some(pw) = cur {
            self.install(pw, None)?;
        }
        Ok(self.stats())
    }

    /// Commits the objects written and writes the manifest `m` of a snapshot whose objects
    /// they are, in one step: what [`ObjectWriter::commit`] and then [`Store::write_manifest`]
    /// do, with the manifest's file synced together with the pack and its index (one wait
    /// for the disk fewer). The manifest is still renamed into place only once the pack is
    /// durable in its directory, so no crash leaves a manifest whose objects are missing.
    /// With a remote, the two steps are taken one after the other (the pack is uploaded
    /// before the manifest). Refuses (`CORRUPT`) a manifest whose root tree neither this
    /// writer nor the store holds.
    pub fn commit_with_manifest(
        self,
        guard: &OperationGuard,
        m: &Manifest,
    ) -> Result<(WriteStats, SnapshotId)> {
        let store = self.store;
        if store.inner.mirror.is_some() || !self.contains(&m.root.0) {
            let stats = self.commit()?;
            return Ok((stats, store.write_manifest(guard, m)?));
        }
        let bytes = m.encode()?;
        let id = Manifest::id_of(&bytes);
        let layout = &store.inner.layout;
        let staged = fsutil::Staged::write(&layout.tmp, &bytes)?;
        let cur = self.current.lock().take();
        let synced = match cur {
            Some(pw) => self.install(pw, Some(staged.to_sync()))?,
            None => false,
        };
        if !synced {
            staged.sync()?;
        }
        staged.place(&layout.manifest_path(&id))?;
        Ok((self.stats(), id))
    }
}

thread_local! {
    /// One zstd compression context per thread, set to the level asked for: creating a
    /// context costs several times compressing a 1 KiB object (measured in
    /// `docs/PERFORMANCE.md`).
    static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Compresses `bytes` at `level` with this thread's reused context.
fn compress_reusing_context(bytes: &[u8], level: i32) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        match slot.as_mut() {
            // The same context at another level (trees and blobs alternate): only its
            // parameter changes, its memory is kept.
            Some((l, c)) if *l != level => {
                c.set_compression_level(level).ok()?;
                *l = level;
            }
            Some(_) => {}
            None => *slot = Some((level, zstd::bulk::Compressor::new(level).ok()?)),
        }
        let (_, c) = slot.as_mut()?;
        c.compress(bytes).ok()
    })
}

/// Removes a temporary file when dropped (unless forgotten).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Returns the heap's free pages to the system (glibc's `malloc_trim(0)`); nothing elsewhere.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_heap() {
    // SAFETY: `malloc_trim` takes no pointer and only releases memory the allocator holds
    // free; it is safe to call from any thread at any time (glibc locks each arena it trims).
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// Limits the allocator's arenas to `n` (glibc's `M_ARENA_MAX`; nothing elsewhere), for a
/// long-lived process that takes a snapshot now and then (the `cairn watch` daemon), called
/// before it starts threads. glibc gives threads that contend an arena each, up to 8 per
/// core, and keeps in each what it freed: a daemon whose snapshots ran on a new thread each
/// and on the walk's pool held 13-16 MiB of freed memory more than live (measured when
/// this was added; see the git log).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_heap_arenas(n: i32) {
    // SAFETY: `mallopt` takes no pointer; `M_ARENA_MAX` only bounds the arenas made from now
    // on, and glibc serialises option changes against allocation.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, n);
    }
}

/// See the glibc version: nothing to limit elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_heap_arenas(_n: i32) {}

/// Has every allocation of `bytes` or more mapped on its own and unmapped when freed
/// (glibc's `M_MMAP_THRESHOLD`; nothing elsewhere), for the same long-lived process. Left
/// alone, glibc raises that threshold to the size of each large block freed (up to 32 MiB), so
/// that a process which once built a large index or table and freed it keeps the next ones
/// in its heap, where small allocations made meanwhile pin their pages. By hand, the 500k
/// watcher (its stat cache's index written as it is encoded) peaked at 50-52 MiB and held
/// 40-41 between snapshots; with the threshold fixed at 128 KiB, 47-48 and 38-39, its
/// snapshots no slower (DEVELOPMENT.md, "The watcher's peak").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn fix_mmap_threshold(bytes: i32) {
    // SAFETY: `mallopt` takes no pointer; a fixed `M_MMAP_THRESHOLD` only decides how blocks
    // allocated from now on are obtained, and glibc serialises option changes against
    // allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
}

/// See the glibc version: nothing to fix elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn fix_mmap_threshold(_bytes: i32) {}
