//! A remote object store behind the local store: the local store becomes a cache of it.
//!
//! A [`Store`] opened with [`StoreOptions::remote`](crate::StoreOptions::remote) mirrors its
//! immutable files into a remote object store (S3, GCS, Azure, a directory: see the
//! `cairn-remote` crate, which implements [`Remote`] with the `object_store` crate):
//!
//! - a committed pack is uploaded (pack first, then index) before the writer's `commit` (or
//!   the `put` that filled it) returns, a large object when it is stored, and a manifest is
//!   uploaded before it is written locally, so a remote manifest never names a missing object;
//! - a refresh lists the remote's indexes (downloading new ones into `remote/idx/`, they are
//!   small), its large objects and the collector's deletion candidates; reading an object whose
//!   pack is not local downloads that pack (checked against its id) into `objects/packs/`;
//! - a writer deduplicates only against objects the remote holds and no collection has marked
//!   for deletion, so a manifest it uploads names only objects that stay;
//! - every operation holds a lease, an object `leases/<name>` with an expiry that a background
//!   thread renews; [`collect`] is the collector of the remote, with two-phase deletes.
//!
//! The remote layout is described in `docs/FORMAT.md`.

use crate::error::{Error, ErrorKind, Result};
use crate::fsutil;
use crate::gc::{mark_tree, Unreadable};
use crate::id::{ObjectId, SnapshotId};
use crate::lock::OperationKind;
use crate::manifest::Manifest;
use crate::pack::PackIndex;
use crate::store::Store;
use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod cache;
mod gc;
mod lease;

pub use cache::CacheTrim;
use gc::read_candidates;
pub use gc::{collect, RemoteGcOptions, RemoteGcReport};
pub use lease::{Lease, LeaseInfo};

/// The key of the collector's list of deletion candidates.
pub const CANDIDATES_KEY: &str = "gc/candidates";
/// The version of the candidates list and of a lease.
const FORMAT_VERSION: u32 = 1;

/// One object listed by a [`Remote`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteObject {
    /// Its key, relative to the remote's prefix (`packs/<id>.idx`).
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written, by the remote's clock, in milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

/// Counts of the requests a [`Remote`] made and the bytes it moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RemoteStats {
    /// Every request, of any kind (a multipart upload counts each of its requests).
    pub requests: u64,
    /// Uploads (PUT, and each part of a multipart upload).
    pub puts: u64,
    /// Downloads (GET).
    pub gets: u64,
    /// Listings (each page counts once).
    pub lists: u64,
    /// Deletes.
    pub deletes: u64,
    /// Bytes uploaded (bodies only).
    pub bytes_sent: u64,
    /// Bytes downloaded (bodies only).
    pub bytes_received: u64,
    /// Time spent waiting for the remote, in microseconds (summed over threads).
    pub busy_us: u64,
}

impl RemoteStats {
    /// The difference `self - earlier`, field by field.
    pub fn since(&self, earlier: &RemoteStats) -> RemoteStats {
        RemoteStats {
            requests: self.requests.saturating_sub(earlier.requests),
            puts: self.puts.saturating_sub(earlier.puts),
            gets: self.gets.saturating_sub(earlier.gets),
            lists: self.lists.saturating_sub(earlier.lists),
            deletes: self.deletes.saturating_sub(earlier.deletes),
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
            busy_us: self.busy_us.saturating_sub(earlier.busy_us),
        }
    }
}

/// A remote object store, seen through the few calls the mirror needs. Keys are relative to
/// the remote's own prefix and use `/` as separator. Every call blocks until it is done.
/// Errors are [`Error::Remote`], classified `NOT_FOUND`, `DENIED` (bad credentials, no access)
/// or `IO` (unreachable, timed out, server error).
pub trait Remote: Send + Sync + std::fmt::Debug {
    /// Where it is, for messages (`s3://bucket/prefix`), without credentials.
    fn location(&self) -> String;
    /// Writes `bytes` at `key`, replacing what was there.
    fn put(&self, key: &str, bytes: Vec<u8>) -> Result<()>;
    /// Uploads the file at `path` to `key`, streaming it.
    fn put_file(&self, key: &str, path: &Path) -> Result<()>;
    /// Reads the object at `key` and when it was written; `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, i64)>>;
    /// Downloads the object at `key` into a new file at `path`; false when there is none.
    fn get_to_file(&self, key: &str, path: &Path) -> Result<bool>;
    /// Every object whose key starts with `prefix`.
    fn list(&self, prefix: &str) -> Result<Vec<RemoteObject>>;
    /// Deletes the object at `key`; a missing object is not an error.
    fn delete(&self, key: &str) -> Result<()>;
    /// The requests made and bytes moved so far.
    fn stats(&self) -> RemoteStats;
}

/// How a store mirrors into a remote: the remote, and how its leases behave.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// The remote object store.
    pub remote: Arc<dyn Remote>,
    /// How long a lease lasts without renewal (default 60 s); it is renewed every third of it.
    pub lease_ttl: Duration,
}

impl RemoteConfig {
    /// A configuration with the default lease time.
    pub fn new(remote: Arc<dyn Remote>) -> Self {
        RemoteConfig {
            remote,
            lease_ttl: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Default)]
struct MirrorState {
    /// Packs the remote holds (listed, or uploaded by this handle), with their index.
    packs: HashSet<ObjectId>,
    /// Large objects the remote holds.
    large: HashSet<ObjectId>,
    /// Packs a collection marked for deletion.
    doomed_packs: HashSet<ObjectId>,
    /// Large objects a collection marked for deletion.
    doomed_large: HashSet<ObjectId>,
}

/// The mirror of one store handle.
#[derive(Debug)]
pub(crate) struct Mirror {
    pub(crate) config: RemoteConfig,
    /// `remote/idx/`: the indexes of remote packs.
    idx_dir: PathBuf,
    state: RwLock<MirrorState>,
    /// One lock per pack being downloaded, so threads reading it download it once.
    fetching: Mutex<HashMap<ObjectId, Arc<Mutex<()>>>>,
    /// Manifests this handle knows the remote holds (it uploaded or fetched them).
    known_manifests: Mutex<HashSet<SnapshotId>>,
}

fn remote_err(remote: &dyn Remote, action: &str, detail: impl Into<String>) -> Error {
    Error::Remote {
        action: action.to_string(),
        location: remote.location(),
        detail: detail.into(),
        kind: ErrorKind::Io,
    }
}

/// The result of a request made on a thread of its own.
fn joined<T>(remote: &dyn Remote, r: std::thread::Result<Result<T>>) -> Result<T> {
    r.unwrap_or_else(|_| Err(remote_err(remote, "refresh", "a request thread panicked")))
}

fn pack_key(id: &ObjectId, ext: &str) -> String {
    format!("packs/{}.{ext}", id.to_hex())
}

fn large_key(id: &ObjectId) -> String {
    format!("large/{}", id.to_hex())
}

fn manifest_key(id: &SnapshotId) -> String {
    format!("snapshots/{}", id.to_hex())
}

/// The id in `<prefix><64 hex><suffix>`.
fn id_in(key: &str, prefix: &str, suffix: &str) -> Option<ObjectId> {
    let hex = key.strip_prefix(prefix)?.strip_suffix(suffix)?;
    ObjectId::from_hex(hex).ok()
}

impl Mirror {
    pub(crate) fn new(config: RemoteConfig, root: &Path) -> Result<Mirror> {
        let base = root.join("remote");
        fsutil::ensure_dir(&base)?;
        let idx_dir = base.join("idx");
        fsutil::ensure_dir(&idx_dir)?;
        Ok(Mirror {
            config,
            idx_dir,
            state: RwLock::new(MirrorState::default()),
            fetching: Mutex::new(HashMap::new()),
            known_manifests: Mutex::new(HashSet::new()),
        })
    }

    fn remote(&self) -> &dyn Remote {
        self.config.remote.as_ref()
    }

    /// Lists the remote's packs, large objects and deletion candidates, downloads the indexes
    /// this cache lacks and forgets those of packs the remote no longer has. Returns the packs
    /// the remote holds with the path of their cached index.
    pub(crate) fn sync(&self, tmp: &Path) -> Result<Vec<(ObjectId, PathBuf)>> {
        // Three independent requests, made at once: a refresh costs one round trip.
        let (listed, listed_large, candidates) = std::thread::scope(|s| {
            let large = s.spawn(|| self.remote().list("large/"));
            let candidates = s.spawn(|| read_candidates(self.remote()));
            let packs = self.remote().list("packs/");
            (
                packs,
                joined(self.remote(), large.join()),
                joined(self.remote(), candidates.join()),
            )
        });
        let (listed, listed_large, candidates) = (listed?, listed_large?, candidates?.0);
        let mut packs = HashSet::new();
        for o in &listed {
            if let Some(id) = id_in(&o.key, "packs/", ".idx") {
                packs.insert(id);
            }
        }
        let mut large = HashSet::new();
        for o in listed_large {
            if let Some(id) = id_in(&o.key, "large/", "") {
                large.insert(id);
            }
        }
        let mut doomed_packs = HashSet::new();
        let mut doomed_large = HashSet::new();
        for c in &candidates.candidates {
            if let Some(id) = id_in(&c.key, "packs/", "") {
                doomed_packs.insert(id);
            } else if let Some(id) = id_in(&c.key, "large/", "") {
                doomed_large.insert(id);
            }
        }
        // Indexes: download the missing ones (eight at a time), drop those of packs gone from
        // the remote.
        let path_of = |id: &ObjectId| self.idx_dir.join(format!("{}.idx", id.to_hex()));
        let missing: Vec<ObjectId> = packs
            .iter()
            .filter(|id| std::fs::symlink_metadata(path_of(id)).is_err())
            .copied()
            .collect();
        let fetch = |id: &ObjectId| -> Result<()> {
            let path = path_of(id);
            let tmp_path = fsutil::temp_name(tmp, "idx");
            // A pack deleted between the listing and now is going: it is left out below.
            if self.remote().get_to_file(&pack_key(id, "idx"), &tmp_path)? {
                std::fs::rename(&tmp_path, &path)
                    .map_err(|e| Error::io("rename pack index into place", &path, e))?;
            }
            Ok(())
        };
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..missing.len().min(8))
                .map(|w| {
                    let (missing, fetch) = (&missing, &fetch);
                    s.spawn(move || -> Result<()> {
                        missing.iter().skip(w).step_by(8).try_for_each(fetch)
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|t| joined(self.remote(), t.join()))
        })?;
        let out: Vec<(ObjectId, PathBuf)> = packs
            .iter()
            .map(|id| (*id, path_of(id)))
            .filter(|(_, p)| std::fs::symlink_metadata(p).is_ok())
            .collect();
        if let Ok(rd) = std::fs::read_dir(&self.idx_dir) {
            for entry in rd.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if let Some(id) = id_in(name, "", ".idx") {
                    if !packs.contains(&id) {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
        let mut st = self.state.write();
        st.packs = packs;
        st.large = large;
        st.doomed_packs = doomed_packs;
        st.doomed_large = doomed_large;
        Ok(out)
    }

    /// Whether a writer may name `id` without storing it: the remote holds it in a pack or as
    /// a large object that no collection marked for deletion.
    pub(crate) fn reusable(&self, store: &Store, id: &ObjectId) -> bool {
        let st = self.state.read();
        if st.large.contains(id) && !st.doomed_large.contains(id) {
            return true;
        }
        store.packs().iter().any(|p| {
            st.packs.contains(&p.id)
                && !st.doomed_packs.contains(&p.id)
                && p.index.lookup(id).is_some()
        })
    }

    /// Whether the remote holds `id` as a large object (that this cache may not have).
    pub(crate) fn has_large(&self, id: &ObjectId) -> bool {
        self.state.read().large.contains(id)
    }

    /// The large objects the remote holds.
    pub(crate) fn large_ids(&self) -> Vec<ObjectId> {
        self.state.read().large.iter().copied().collect()
    }

    /// Uploads a pack committed locally: the pack first, then its index.
    pub(crate) fn upload_pack(&self, id: &ObjectId, pack_path: &Path) -> Result<()> {
        self.remote().put_file(&pack_key(id, "pack"), pack_path)?;
        self.remote()
            .put_file(&pack_key(id, "idx"), &pack_path.with_extension("idx"))?;
        let cached = self.idx_dir.join(format!("{}.idx", id.to_hex()));
        let _ = std::fs::copy(pack_path.with_extension("idx"), &cached);
        let mut st = self.state.write();
        st.packs.insert(*id);
        st.doomed_packs.remove(id);
        Ok(())
    }

    /// Uploads a large object stored locally.
    pub(crate) fn upload_large(&self, id: &ObjectId, path: &Path) -> Result<()> {
        self.remote().put_file(&large_key(id), path)?;
        let mut st = self.state.write();
        st.large.insert(*id);
        st.doomed_large.remove(id);
        Ok(())
    }

    /// Downloads pack `id` into `objects/packs/` (checked against its id), with its index.
    pub(crate) fn fetch_pack(&self, id: &ObjectId, packs_dir: &Path, tmp: &Path) -> Result<()> {
        let dest = packs_dir.join(format!("{}.pack", id.to_hex()));
        let lock = self.fetching.lock().entry(*id).or_default().clone();
        let _one_at_a_time = lock.lock();
        if std::fs::symlink_metadata(&dest).is_ok() {
            return Ok(());
        }
        let tmp_path = fsutil::temp_name(tmp, "pack");
        let result = (|| {
            if !self
                .remote()
                .get_to_file(&pack_key(id, "pack"), &tmp_path)?
            {
                return Err(Error::NotFound {
                    what: format!(
                        "pack {} in {} (a collection removed it; refresh and read again)",
                        id.short(),
                        self.remote().location()
                    ),
                    path: None,
                });
            }
            let mut f =
                std::fs::File::open(&tmp_path).map_err(|e| Error::io("open", &tmp_path, e))?;
            let mut h = crate::id::Hasher::new();
            h.update_from(&mut f)
                .map_err(|e| Error::io("read", &tmp_path, e))?;
            let got = h.finish();
            if got != *id {
                return Err(Error::corrupt(
                    format!(
                        "pack {} downloaded from {}",
                        id.short(),
                        self.remote().location()
                    ),
                    &tmp_path,
                    format!("its bytes hash to {}", got.short()),
                ));
            }
            let cached_idx = self.idx_dir.join(format!("{}.idx", id.to_hex()));
            let idx_dest = packs_dir.join(format!("{}.idx", id.to_hex()));
            std::fs::rename(&tmp_path, &dest)
                .map_err(|e| Error::io("rename pack into place", &dest, e))?;
            if std::fs::symlink_metadata(&idx_dest).is_err() {
                let idx_tmp = fsutil::temp_name(tmp, "idx");
                std::fs::copy(&cached_idx, &idx_tmp)
                    .map_err(|e| Error::io("copy pack index", &cached_idx, e))?;
                std::fs::rename(&idx_tmp, &idx_dest)
                    .map_err(|e| Error::io("rename pack index into place", &idx_dest, e))?;
            }
            fsutil::sync_dir(packs_dir)
        })();
        let _ = std::fs::remove_file(&tmp_path);
        result
    }

    /// Downloads large object `id` into `objects/large/` (its hash is checked on every read).
    pub(crate) fn fetch_large(&self, id: &ObjectId, dest: &Path, tmp: &Path) -> Result<bool> {
        let tmp_path = fsutil::temp_name(tmp, "large");
        let result = (|| {
            if !self.remote().get_to_file(&large_key(id), &tmp_path)? {
                return Ok(false);
            }
            std::fs::rename(&tmp_path, dest)
                .map_err(|e| Error::io("rename into place", dest, e))?;
            Ok(true)
        })();
        let _ = std::fs::remove_file(&tmp_path);
        result
    }

    /// Uploads a manifest (after the objects it names).
    pub(crate) fn upload_manifest(&self, id: &SnapshotId, bytes: &[u8]) -> Result<()> {
        self.remote().put(&manifest_key(id), bytes.to_vec())?;
        self.known_manifests.lock().insert(*id);
        Ok(())
    }

    /// Whether the remote holds manifest `id`: known without a request when this handle
    /// uploaded or fetched it, else asked (one request).
    pub(crate) fn holds_manifest(&self, id: &SnapshotId) -> Result<bool> {
        if self.known_manifests.lock().contains(id) {
            return Ok(true);
        }
        Ok(self.fetch_manifest(id)?.is_some())
    }

    /// Downloads manifest `id`, checked against its id; `None` when the remote lacks it.
    pub(crate) fn fetch_manifest(&self, id: &SnapshotId) -> Result<Option<Vec<u8>>> {
        let Some((bytes, _)) = self.remote().get(&manifest_key(id))? else {
            return Ok(None);
        };
        if Manifest::id_of(&bytes) != *id {
            return Err(remote_err(
                self.remote(),
                "read manifest",
                format!("snapshots/{} does not hash to its name", id.to_hex()),
            ));
        }
        self.known_manifests.lock().insert(*id);
        Ok(Some(bytes))
    }

    /// The ids of the manifests the remote holds.
    pub(crate) fn manifest_ids(&self) -> Result<Vec<SnapshotId>> {
        Ok(self
            .remote()
            .list("snapshots/")?
            .iter()
            .filter_map(|o| id_in(&o.key, "snapshots/", "").map(SnapshotId))
            .collect())
    }

    /// Deletes a manifest on the remote.
    pub(crate) fn delete_manifest(&self, id: &SnapshotId) -> Result<()> {
        self.known_manifests.lock().remove(id);
        self.remote().delete(&manifest_key(id))
    }

    /// Takes a lease for an operation, renewed by a background thread until it is dropped.
    pub(crate) fn lease(&self, kind: OperationKind, pins: &[SnapshotId]) -> Result<Lease> {
        Lease::take(self.config.clone(), kind, pins)
    }
}

/// Whether a live lease on the remote of `store` (of any machine) pins snapshot `id`.
pub(crate) fn pinned_by_lease(store: &Store, id: &SnapshotId) -> Result<bool> {
    let Some(m) = store.mirror() else {
        return Ok(false);
    };
    let remote = m.remote();
    let now = fsutil::now_ms();
    for o in remote.list("leases/")? {
        if let Some((bytes, _)) = remote.get(&o.key)? {
            if let Ok(l) = serde_json::from_slice::<LeaseInfo>(&bytes) {
                if l.expires_ms > now && l.pins.contains(id) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// Loads the pack index at `path`.
pub(crate) fn load_index(path: &Path) -> Result<PackIndex> {
    PackIndex::load(path)
}
