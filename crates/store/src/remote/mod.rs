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

/// A deletion candidate in the collector's list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Candidate {
    /// `packs/<id>` (the pack and its index), `large/<id>` or `packs/<id>.pack` (a pack whose
    /// index never arrived).
    key: String,
    /// When the list that first named it was published (the remote's clock), in ms; 0 in the
    /// list being written (the next collection reads the time from the object itself).
    marked_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CandidateList {
    version: u32,
    candidates: Vec<Candidate>,
}

/// A lease object's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseInfo {
    /// The host that holds it.
    pub host: String,
    /// The process that holds it.
    pub pid: u32,
    /// What it does.
    pub kind: OperationKind,
    /// When the operation began (its clock), ms since the Unix epoch.
    pub started_ms: i64,
    /// Until when the lease holds unless renewed (its clock), ms since the Unix epoch.
    pub expires_ms: i64,
    /// Snapshots the operation needs kept.
    pub pins: Vec<SnapshotId>,
    /// The format version (1).
    #[serde(default)]
    pub version: u32,
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

fn read_candidates(remote: &dyn Remote) -> Result<(CandidateList, i64)> {
    match remote.get(CANDIDATES_KEY)? {
        None => Ok((CandidateList::default(), 0)),
        Some((bytes, modified_ms)) => {
            let list: CandidateList = serde_json::from_slice(&bytes).map_err(|e| {
                remote_err(
                    remote,
                    "read the collector's candidates",
                    format!(
                        "{CANDIDATES_KEY} does not parse ({e}); delete it to start marking afresh"
                    ),
                )
            })?;
            Ok((list, modified_ms))
        }
    }
}

static LEASE_COUNTER: AtomicU64 = AtomicU64::new(0);

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "host".into())
}

#[derive(Debug)]
struct LeaseShared {
    stop: Mutex<bool>,
    wake: Condvar,
    /// The expiry of the last renewal that reached the remote.
    expires_ms: AtomicI64,
    /// Set when a renewal came after the lease had run out: the lease is lost for good.
    lost: AtomicBool,
}

/// A lease held on the remote for one operation; dropping it stops the renewals and deletes
/// the lease object.
#[derive(Debug)]
pub struct Lease {
    key: String,
    remote: Arc<dyn Remote>,
    shared: Arc<LeaseShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    fn take(config: RemoteConfig, kind: OperationKind, pins: &[SnapshotId]) -> Result<Lease> {
        let host = host_name();
        let pid = std::process::id();
        let n = LEASE_COUNTER.fetch_add(1, Ordering::Relaxed);
        let started_ms = fsutil::now_ms();
        let key = format!("leases/{host}-{pid}-{n}-{started_ms:x}");
        let ttl_ms = config.lease_ttl.as_millis() as i64;
        let mut info = LeaseInfo {
            host,
            pid,
            kind,
            started_ms,
            expires_ms: started_ms + ttl_ms,
            pins: pins.to_vec(),
            version: FORMAT_VERSION,
        };
        let body = serde_json::to_vec(&info).expect("a lease always serialises");
        config.remote.put(&key, body)?;
        let shared = Arc::new(LeaseShared {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            expires_ms: AtomicI64::new(info.expires_ms),
            lost: AtomicBool::new(false),
        });
        let thread = {
            let shared = shared.clone();
            let remote = config.remote.clone();
            let thread_key = key.clone();
            let every = config.lease_ttl / 3;
            std::thread::Builder::new()
                .name("cairn-lease".into())
                .spawn(move || loop {
                    {
                        let mut stop = shared.stop.lock();
                        if !*stop {
                            shared.wake.wait_for(&mut stop, every);
                        }
                        if *stop {
                            return;
                        }
                    }
                    let now = fsutil::now_ms();
                    if now >= shared.expires_ms.load(Ordering::Acquire) {
                        // Too late: a collector may have counted this lease as gone.
                        shared.lost.store(true, Ordering::Release);
                        return;
                    }
                    info.expires_ms = now + ttl_ms;
                    let body = serde_json::to_vec(&info).expect("a lease always serialises");
                    if remote.put(&thread_key, body).is_ok() {
                        shared.expires_ms.store(info.expires_ms, Ordering::Release);
                    }
                })
                .map_err(|e| Error::io("start the lease thread", PathBuf::from(&key), e))?
        };
        Ok(Lease {
            key,
            remote: config.remote,
            shared,
            thread: Some(thread),
        })
    }

    /// Its key on the remote.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Checks that the lease still holds, with `margin` to spare: an operation that lost its
    /// lease must not publish a manifest (a collector may have removed what it reused).
    pub fn check(&self, margin: Duration) -> Result<()> {
        let expires = self.shared.expires_ms.load(Ordering::Acquire);
        let lost = self.shared.lost.load(Ordering::Acquire);
        if lost || fsutil::now_ms() + margin.as_millis() as i64 >= expires {
            return Err(Error::Busy {
                what: format!("lease {} on {}", self.key, self.remote.location()),
                detail: "it ran out before the operation finished (the remote was unreachable, or the process was paused); nothing was published, run the operation again".into(),
            });
        }
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = self.remote.delete(&self.key);
    }
}

/// How a collection of the remote runs.
#[derive(Debug, Clone)]
pub struct RemoteGcOptions {
    /// An object is deleted only once it is older than this, and only when a collection at
    /// least this long before marked it as a candidate. Default: one hour.
    pub grace: Duration,
    /// How far the clocks of the machines sharing the remote may differ. A lease counts as
    /// live until its expiry plus this, and a lease taken less than this after a candidate was
    /// marked still keeps it. Default: one minute.
    pub clock_skew: Duration,
    /// Compute and report, delete nothing, write no candidates.
    pub dry_run: bool,
}

impl Default for RemoteGcOptions {
    fn default() -> Self {
        RemoteGcOptions {
            grace: Duration::from_secs(3600),
            clock_skew: Duration::from_secs(60),
            dry_run: false,
        }
    }
}

/// What a collection of the remote did.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct RemoteGcReport {
    /// Manifests marked (including those written during the run).
    pub snapshots: usize,
    /// Manifests that appeared while the collection ran (marked too).
    pub snapshots_during_run: usize,
    /// Objects reachable from them.
    pub reachable_objects: usize,
    /// Snapshots whose objects could not all be read: nothing was deleted.
    pub unreadable: Vec<Unreadable>,
    /// Leases live during the run.
    pub live_leases: usize,
    /// Unreachable packs and large objects listed as candidates after the run.
    pub candidates: usize,
    /// Candidates kept this time because a lease older than their marking is still live.
    pub kept_for_leases: usize,
    /// Candidates kept because they were marked, or written, less than `grace` ago.
    pub kept_for_grace: usize,
    /// Packs deleted (each with its index).
    pub packs_deleted: usize,
    /// Large objects deleted.
    pub large_deleted: usize,
    /// Bytes the remote shrank by.
    pub bytes_freed: u64,
}

/// Collects garbage on the remote of `store`, in two phases: objects that no manifest reaches
/// are *marked* (listed in `gc/candidates`, and writers stop reusing them); a later collection
/// deletes a candidate only when it is still unreachable, is older than `grace`, was marked at
/// least `grace` ago, and no lease live now began before it was marked (such an operation may
/// have reused it). Manifests written while the collection runs are marked before anything is
/// deleted. Several collectors may run at once: a candidate's marking time is only ever kept or
/// delayed. Refused (`UNSUPPORTED`) on a store without a remote.
pub fn collect(store: &Store, options: &RemoteGcOptions) -> Result<RemoteGcReport> {
    let mirror = store.mirror().ok_or_else(|| Error::Unsupported {
        what: format!("collecting a remote on {}", store.path().display()),
        detail: "this store has no remote; use gc::sweep".into(),
    })?;
    let remote = mirror.remote();
    let mut report = RemoteGcReport::default();
    let skew = options.clock_skew.as_millis() as i64;
    let grace = options.grace.as_millis() as i64;

    // Leases first: an operation that begins after this point reads the candidates we publish
    // (or the previous ones) and does not reuse them.
    let now = fsutil::now_ms();
    let mut live_lease_starts = Vec::new();
    for o in remote.list("leases/")? {
        let Some((bytes, modified_ms)) = remote.get(&o.key)? else {
            continue;
        };
        match serde_json::from_slice::<LeaseInfo>(&bytes) {
            Ok(l) if l.expires_ms + skew > now => live_lease_starts.push(l.started_ms),
            Ok(_) => {}
            // A lease that does not parse counts as live for a grace period after its writing.
            Err(_) if modified_ms + grace > now => live_lease_starts.push(0),
            Err(_) => {}
        }
    }
    report.live_leases = live_lease_starts.len();
    let (previous, published_ms) = read_candidates(remote)?;
    let mut marked: HashMap<String, i64> = HashMap::new();
    for c in previous.candidates {
        let t = if c.marked_ms == 0 {
            published_ms
        } else {
            c.marked_ms
        };
        marked.insert(c.key, t);
    }

    // The remote's objects, then every manifest.
    store.refresh()?;
    let mut objects: BTreeMap<String, RemoteObject> = BTreeMap::new();
    for o in remote
        .list("packs/")?
        .into_iter()
        .chain(remote.list("large/")?)
    {
        objects.insert(o.key.clone(), o);
    }
    let mut reachable = HashSet::new();
    let mut seen_manifests = HashSet::new();
    mark_manifests(
        store,
        mirror,
        &mut seen_manifests,
        &mut reachable,
        &mut report,
    )?;

    let unreachable = |reachable: &HashSet<ObjectId>| -> BTreeMap<String, (u64, i64, Vec<String>)> {
        let mut out = BTreeMap::new();
        let packs: HashMap<ObjectId, _> = store.packs().into_iter().map(|p| (p.id, p)).collect();
        for (key, o) in &objects {
            if let Some(id) = id_in(key, "packs/", ".idx") {
                let live = match packs.get(&id) {
                    // An entry that cannot be read: keep the pack.
                    Some(p) => p
                        .index
                        .entries()
                        .any(|e| e.map_or(true, |e| reachable.contains(&e.id))),
                    // An index we could not load: keep the pack.
                    None => true,
                };
                if !live {
                    let pack = objects.get(&pack_key(&id, "pack"));
                    let size = o.size + pack.map(|p| p.size).unwrap_or(0);
                    let modified = pack
                        .map(|p| p.modified_ms.max(o.modified_ms))
                        .unwrap_or(o.modified_ms);
                    out.insert(
                        format!("packs/{}", id.to_hex()),
                        (
                            size,
                            modified,
                            vec![pack_key(&id, "idx"), pack_key(&id, "pack")],
                        ),
                    );
                }
            } else if let Some(id) = id_in(key, "packs/", ".pack") {
                if !objects.contains_key(&pack_key(&id, "idx")) {
                    out.insert(key.clone(), (o.size, o.modified_ms, vec![key.clone()]));
                }
            } else if let Some(id) = id_in(key, "large/", "") {
                if !reachable.contains(&id) {
                    out.insert(key.clone(), (o.size, o.modified_ms, vec![key.clone()]));
                }
            }
        }
        out
    };
    let mut dead = unreachable(&reachable);
    if !report.unreadable.is_empty() {
        // What an unreadable snapshot reaches is unknown: delete nothing, mark nothing new.
        report.candidates = marked.len();
        return Ok(report);
    }

    // Candidates that may go now.
    let mut to_delete = Vec::new();
    for (key, (_, modified, _)) in &dead {
        let Some(&marked_ms) = marked.get(key) else {
            continue;
        };
        if now - marked_ms < grace || now - modified < grace {
            report.kept_for_grace += 1;
            continue;
        }
        if live_lease_starts.iter().any(|&s| s <= marked_ms + skew) {
            report.kept_for_leases += 1;
            continue;
        }
        to_delete.push(key.clone());
    }

    // Manifests written during the run keep what they reach.
    let before = seen_manifests.len();
    mark_manifests(
        store,
        mirror,
        &mut seen_manifests,
        &mut reachable,
        &mut report,
    )?;
    report.snapshots_during_run = seen_manifests.len() - before;
    if !report.unreadable.is_empty() {
        report.candidates = marked.len();
        return Ok(report);
    }
    if report.snapshots_during_run > 0 {
        store.refresh()?;
        let still = unreachable(&reachable);
        to_delete.retain(|k| still.contains_key(k));
        dead = still;
    }
    report.reachable_objects = reachable.len();
    report.snapshots = seen_manifests.len();

    if options.dry_run {
        report.candidates = dead.len();
        return Ok(report);
    }
    let mut deleted = HashSet::new();
    for key in &to_delete {
        let (size, _, keys) = &dead[key];
        for k in keys {
            remote.delete(k)?;
        }
        deleted.insert(key.clone());
        report.bytes_freed += size;
        if key.starts_with("large/") {
            report.large_deleted += 1;
        } else {
            report.packs_deleted += 1;
        }
    }
    let list = CandidateList {
        version: FORMAT_VERSION,
        candidates: dead
            .keys()
            .filter(|k| !deleted.contains(*k))
            .map(|k| Candidate {
                key: k.clone(),
                marked_ms: marked.get(k).copied().unwrap_or(0),
            })
            .collect(),
    };
    report.candidates = list.candidates.len();
    let body = serde_json::to_vec(&list).expect("a candidate list always serialises");
    remote.put(CANDIDATES_KEY, body)?;
    if !deleted.is_empty() {
        store.refresh()?;
    }
    Ok(report)
}

/// Marks every remote manifest not in `seen`.
fn mark_manifests(
    store: &Store,
    mirror: &Mirror,
    seen: &mut HashSet<SnapshotId>,
    reachable: &mut HashSet<ObjectId>,
    report: &mut RemoteGcReport,
) -> Result<()> {
    let mut new = Vec::new();
    for id in mirror.manifest_ids()? {
        if seen.insert(id) {
            new.push(id);
        }
    }
    if !new.is_empty() {
        // Packs uploaded with these manifests.
        store.refresh()?;
    }
    for id in new {
        let m = match store.read_manifest(&id) {
            Ok(m) => m,
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                report.unreadable.push(Unreadable {
                    snapshot: id,
                    error: e.to_string(),
                });
                continue;
            }
        };
        if let Err(e) = mark_tree(store, m.root, reachable) {
            report.unreadable.push(Unreadable {
                snapshot: id,
                error: e.to_string(),
            });
        }
    }
    Ok(())
}

impl Store {
    /// The remote this store mirrors into, if any.
    pub fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.mirror().map(|m| &m.config.remote)
    }

    /// Collects garbage on the remote; see [`collect`].
    pub fn collect_remote(&self, options: &RemoteGcOptions) -> Result<RemoteGcReport> {
        collect(self, options)
    }

    /// Shrinks the cache to at most `max_bytes` of packs and large objects that the remote
    /// holds, removing the least recently fetched or written first (by modification time;
    /// a pack is downloaded again when it is next read). Files the remote does not hold (an
    /// upload that failed) are never removed. Refused (`UNSUPPORTED`) without a remote.
    pub fn trim_cache(&self, max_bytes: u64) -> Result<CacheTrim> {
        let mirror = self.mirror().ok_or_else(|| Error::Unsupported {
            what: format!("trimming {}", self.path().display()),
            detail: "it caches no remote: its files are the only copy".into(),
        })?;
        self.refresh()?;
        let (on_remote_packs, on_remote_large) = {
            let st = mirror.state.read();
            (st.packs.clone(), st.large.clone())
        };
        let layout = self.layout();
        // (modified, bytes, files to remove): a pack goes with its index.
        let mut cached: Vec<(std::time::SystemTime, u64, Vec<PathBuf>)> = Vec::new();
        let files = |dir: &Path| -> Result<Vec<(String, std::fs::Metadata, PathBuf)>> {
            let mut out = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
                let entry = entry.map_err(|e| Error::io("list", dir, e))?;
                let path = entry.path();
                let meta = entry
                    .metadata()
                    .map_err(|e| Error::io("inspect", &path, e))?;
                if meta.is_file() {
                    out.push((entry.file_name().to_string_lossy().into_owned(), meta, path));
                }
            }
            Ok(out)
        };
        for (name, meta, path) in files(&layout.packs)? {
            if let Some(id) = id_in(&name, "", ".pack") {
                if on_remote_packs.contains(&id) {
                    let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                    let idx = path.with_extension("idx");
                    cached.push((modified, meta.len(), vec![idx, path]));
                }
            }
        }
        for (name, meta, path) in files(&layout.large)? {
            if let Some(id) = id_in(&name, "", "") {
                if on_remote_large.contains(&id) {
                    let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                    cached.push((modified, meta.len(), vec![path]));
                }
            }
        }
        let mut report = CacheTrim {
            cached_bytes: cached.iter().map(|c| c.1).sum(),
            ..CacheTrim::default()
        };
        cached.sort_by_key(|c| c.0);
        let mut left = report.cached_bytes;
        let mut forgotten = Vec::new();
        for (_, bytes, paths) in cached {
            if left <= max_bytes {
                break;
            }
            for p in &paths {
                fsutil::remove_if_exists(p)?;
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                if let Some(id) = name.as_deref().and_then(|n| id_in(n, "", ".pack")) {
                    forgotten.push(id);
                }
            }
            left -= bytes;
            report.removed_files += 1;
            report.removed_bytes += bytes;
        }
        report.cached_bytes = left;
        // Close the files of removed packs (freeing their space); they load again as remote.
        self.forget_packs(&forgotten);
        self.refresh()?;
        Ok(report)
    }
}

/// What [`Store::trim_cache`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct CacheTrim {
    /// Packs and large objects removed from the cache (the remote keeps them).
    pub removed_files: u64,
    /// Their bytes.
    pub removed_bytes: u64,
    /// Bytes of remote-held packs and large objects still cached.
    pub cached_bytes: u64,
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
