//! Mark-and-sweep garbage collection, shared safely by several processes.
//!
//! [`plan`] marks every object reachable from every manifest and lists what a sweep would
//! remove; it changes nothing (it is the dry run). [`sweep`] takes `locks/gc.lock`, defers
//! (`deferred: true`) while any operation marker is held, plans again under the lock and then
//! removes only what is unreachable *and* older than the grace period: packs whose objects are
//! all dead are deleted, packs whose live share fell low or that hold a quarantined (corrupt)
//! copy are repacked (dropping the bad copy once a good one exists elsewhere), dead large
//! objects and stale temporary files are removed.
//!
//! The collector only removes names the store gives (`<hex>.pack`, `<hex>.idx`, `<hex>`,
//! `*.tmp`), only as regular files, only in directories it checked to be real directories of
//! the store. It never follows a symlink: a symlink planted in `objects/packs`, `objects/large`
//! or `tmp` is removed itself (`unlink`; what it points to is never touched), and anything else
//! that is not the store's own is reported in `foreign` and left alone.

use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::lock;
use crate::pack::{self, PackWriter};
use crate::store::{read_large_header, Store};
use crate::tree::EntryKind;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How a collection runs.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Unreachable objects younger than this are kept, for snapshots other processes are
    /// taking. Default: one hour.
    ///
    /// # Warning
    /// `Duration::ZERO` deletes unreachable objects at once; use it only when no other process
    /// shares the store.
    pub grace: Duration,
    /// A pack older than the grace period whose live share (by stored bytes) is below this is
    /// repacked. Default: 0.5.
    pub repack_below: f64,
    /// When more packs than this are older than the grace period, they are all repacked into
    /// one. Default: 64.
    pub max_packs: usize,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            grace: Duration::from_secs(3600),
            repack_below: 0.5,
            max_packs: 64,
        }
    }
}

impl GcOptions {
    /// Options with the given grace period.
    pub fn with_grace(grace: Duration) -> Self {
        GcOptions {
            grace,
            ..GcOptions::default()
        }
    }
}

/// A snapshot (or a tree of one) whose objects could not all be read while marking.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Unreadable {
    /// The snapshot concerned.
    pub snapshot: SnapshotId,
    /// What could not be read.
    pub error: String,
}

/// One pack in a plan.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PackPlan {
    /// The pack's id.
    pub pack: ObjectId,
    /// Objects it holds.
    pub objects: u64,
    /// Of those, the ones still reachable.
    pub live_objects: u64,
    /// Bytes of the pack file.
    pub bytes: u64,
}

/// What a sweep would do. Produced by [`plan`]; changing nothing, it is the dry run.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GcPlan {
    /// Snapshots marked.
    pub snapshots: usize,
    /// Objects reachable from them.
    pub reachable_objects: usize,
    /// Snapshots whose objects could not all be read; what they still reach is kept.
    pub unreadable: Vec<Unreadable>,
    /// Packs whose objects are all unreachable and old enough: deleted.
    pub delete_packs: Vec<PackPlan>,
    /// Packs to rewrite with only their live objects: those whose live share fell low, and
    /// those holding a quarantined (corrupt) copy.
    pub repack: Vec<PackPlan>,
    /// Large objects unreachable and old enough: deleted.
    pub delete_large: Vec<ObjectId>,
    /// Pack files without an index, and indexes without their pack, old enough: deleted.
    #[serde(with = "crate::relpath::os_paths")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::RelPath>"))]
    pub orphan_packs: Vec<PathBuf>,
    /// Temporary files older than the grace period, left by processes that died: deleted.
    /// Younger ones are kept, since a live writer may still be about to rename one.
    #[serde(with = "crate::relpath::os_paths")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::RelPath>"))]
    pub temp_files: Vec<PathBuf>,
    /// Unreachable objects kept because they are younger than the grace period.
    pub young_unreachable: u64,
    /// Symlinks in `objects/packs`, `objects/large` and `tmp`: never the store's own (it writes
    /// none), and one named like a pack made `verify` fail for ever (issue 28). Removed (the
    /// link itself: `unlink` never follows it).
    #[serde(with = "crate::relpath::os_paths")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::RelPath>"))]
    pub symlinks: Vec<PathBuf>,
    /// Other entries in those directories that are not the store's own (directories, foreign
    /// names): reported, never touched.
    #[serde(with = "crate::relpath::os_paths")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::RelPath>"))]
    pub foreign: Vec<PathBuf>,
}

/// What a collection did.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GcReport {
    /// True when the sweep was deferred: an operation marker was held, or the store caches a
    /// remote whose own collector decides (`remote::collect`).
    pub deferred: bool,
    /// The plan it carried out (empty when deferred).
    pub plan: GcPlan,
    /// Packs deleted.
    pub packs_deleted: usize,
    /// Packs rewritten.
    pub packs_repacked: usize,
    /// Objects removed from the store.
    pub objects_deleted: u64,
    /// Bytes the store shrank by.
    pub bytes_freed: u64,
    /// Packs not repacked because a live object in them had no good copy anywhere.
    pub kept_for_damage: Vec<ObjectId>,
}

/// The set of objects reachable from every manifest.
#[derive(Debug, Default)]
pub struct Reachable {
    /// Reachable object ids.
    pub objects: HashSet<ObjectId>,
    /// Snapshots marked.
    pub snapshots: usize,
    /// What could not be read.
    pub unreadable: Vec<Unreadable>,
}

/// Marks everything reachable from every manifest of `store`.
pub fn mark(store: &Store) -> Result<Reachable> {
    let mut r = Reachable::default();
    for id in store.snapshot_ids()? {
        let m = match store.read_manifest(&id) {
            Ok(m) => m,
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                r.unreadable.push(Unreadable {
                    snapshot: id,
                    error: e.to_string(),
                });
                continue;
            }
        };
        r.snapshots += 1;
        if let Err(e) = mark_tree(store, m.root, &mut r.objects) {
            r.unreadable.push(Unreadable {
                snapshot: id,
                error: e.to_string(),
            });
        }
    }
    Ok(r)
}

/// Marks `root` and everything under it; continues past unreadable subtrees and returns the
/// first error met.
pub(crate) fn mark_tree(store: &Store, root: TreeId, seen: &mut HashSet<ObjectId>) -> Result<()> {
    let mut first_err = None;
    let mut stack = vec![root];
    while let Some(t) = stack.pop() {
        if !seen.insert(t.0) {
            continue;
        }
        match store.read_tree(&t) {
            Ok(tree) => {
                for e in tree.entries() {
                    match e.kind {
                        EntryKind::Dir => stack.push(TreeId(e.id)),
                        _ => {
                            seen.insert(e.id);
                        }
                    }
                }
            }
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn age(path: &std::path::Path) -> Option<Duration> {
    let m = std::fs::symlink_metadata(path).ok()?;
    let t = m.modified().ok()?;
    Some(
        SystemTime::now()
            .duration_since(t)
            .unwrap_or(Duration::ZERO),
    )
}

/// A store that mirrors a remote is a cache of it: what may be removed is decided by the
/// remote's collector ([`crate::remote::collect`]), which sees every machine's manifests.
fn refuse_remote(store: &Store) -> Result<()> {
    match store.remote() {
        Some(r) => Err(Error::Unsupported {
            what: format!("a local collection of {}", store.path().display()),
            detail: format!(
                "it caches the remote {}; collect the remote with `cairn_store::remote::collect` instead",
                r.location()
            ),
        }),
        None => Ok(()),
    }
}

/// Plans a collection without changing anything: the dry run.
pub fn plan(store: &Store, options: &GcOptions) -> Result<GcPlan> {
    plan_with_reach(store, options).map(|(plan, _)| plan)
}

fn plan_with_reach(store: &Store, options: &GcOptions) -> Result<(GcPlan, HashSet<ObjectId>)> {
    refuse_remote(store)?;
    store.check_layout()?;
    store.refresh()?;
    let reach = mark(store)?;
    let layout = store.layout();
    let mut plan = GcPlan {
        snapshots: reach.snapshots,
        reachable_objects: reach.objects.len(),
        unreadable: reach.unreadable,
        ..GcPlan::default()
    };
    let old = |p: &std::path::Path| age(p).map(|a| a >= options.grace).unwrap_or(false);

    // Packs.
    let mut old_packs = Vec::new();
    let mut indexed = HashSet::new();
    for p in store.packs() {
        indexed.insert(p.id);
        let idx_path = layout.packs.join(format!("{}.idx", p.id.to_hex()));
        let total = p.index.len() as u64;
        let mut live = 0u64;
        let mut live_bytes = 0u64;
        let mut all_bytes = 0u64;
        let mut damaged = false;
        for e in p.index.entries() {
            let e = e?;
            all_bytes += e.stored_len;
            damaged |= store.is_quarantined(&e.id);
            if reach.objects.contains(&e.id) {
                live += 1;
                live_bytes += e.stored_len;
            }
        }
        let bytes = std::fs::symlink_metadata(&p.path)
            .map(|m| m.len())
            .unwrap_or(0);
        let pp = PackPlan {
            pack: p.id,
            objects: total,
            live_objects: live,
            bytes,
        };
        if !old(&idx_path) {
            plan.young_unreachable += total - live;
            continue;
        }
        if live == 0 {
            plan.delete_packs.push(pp);
        } else if damaged
            || (all_bytes > 0 && (live_bytes as f64) < options.repack_below * all_bytes as f64)
        {
            // A pack holding a copy found corrupt is rewritten too: the repack drops the bad
            // copy once a good one lies elsewhere (and keeps the pack while none does).
            plan.repack.push(pp);
        } else {
            old_packs.push(pp);
        }
    }
    if old_packs.len() + plan.repack.len() > options.max_packs {
        plan.repack.append(&mut old_packs);
    }

    // Pack files without an index, indexes without a pack, and foreign entries in packs/.
    for entry in read_dir(&layout.packs)? {
        let (name, path, ft) = entry;
        let ours = name
            .strip_suffix(".pack")
            .or_else(|| name.strip_suffix(".idx"))
            .and_then(|h| ObjectId::from_hex(h).ok());
        match ours {
            Some(id) if ft.is_file() => {
                // One half of a pack without the other (an index without its pack is what a
                // power cut can leave, issue 57), old enough.
                let other = if name.ends_with(".pack") {
                    "idx"
                } else {
                    "pack"
                };
                if !indexed.contains(&id) {
                    let other = layout.packs.join(format!("{}.{other}", id.to_hex()));
                    if std::fs::symlink_metadata(&other).is_err() && old(&path) {
                        plan.orphan_packs.push(path);
                    }
                }
            }
            _ if ft.is_symlink() => plan.symlinks.push(path),
            _ => plan.foreign.push(path),
        }
    }

    // Large objects.
    for (name, path, ft) in read_dir(&layout.large)? {
        match ObjectId::from_hex(&name) {
            Ok(id) if ft.is_file() => {
                if reach.objects.contains(&id) {
                    continue;
                }
                if old(&path) {
                    plan.delete_large.push(id);
                } else {
                    plan.young_unreachable += 1;
                }
            }
            _ if ft.is_symlink() => plan.symlinks.push(path),
            _ => plan.foreign.push(path),
        }
    }

    // Temporary files: only regular `*.tmp` files older than the grace period (a younger one
    // may belong to a writer that holds no operation marker, such as the stat cache's
    // background writer after its snapshot returned); anything else is foreign.
    for (name, path, ft) in read_dir(&layout.tmp)? {
        if ft.is_file() && name.ends_with(".tmp") {
            if old(&path) {
                plan.temp_files.push(path);
            }
        } else if ft.is_symlink() {
            plan.symlinks.push(path);
        } else {
            plan.foreign.push(path);
        }
    }
    Ok((plan, reach.objects))
}

fn read_dir(dir: &std::path::Path) -> Result<Vec<(String, PathBuf, std::fs::FileType)>> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| Error::io("inspect", dir, e))?;
    if !meta.is_dir() {
        return Err(Error::corrupt(
            "store directory",
            dir,
            "is not a real directory (a symlink?); the collector refuses to sweep it",
        ));
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let ft = entry
            .file_type()
            .map_err(|e| Error::io("inspect", entry.path(), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((name, entry.path(), ft));
    }
    Ok(out)
}

/// Removes pack `id` from `packs` (`objects/packs/`): its index first, then the pack, so a
/// crash between leaves a pack without an index (invisible), never an index without its
/// pack. Returns the bytes freed.
pub(crate) fn remove_pack(packs: &std::path::Path, id: &ObjectId) -> Result<u64> {
    let idx = packs.join(format!("{}.idx", id.to_hex()));
    let pack = packs.join(format!("{}.pack", id.to_hex()));
    Ok(remove_own_file(&idx)? + remove_own_file(&pack)?)
}

/// Removes a regular file the store owns; refuses anything that is not a regular file.
fn remove_own_file(path: &std::path::Path) -> Result<u64> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {
            let len = m.len();
            fsutil::remove_if_exists(path)?;
            Ok(len)
        }
        Ok(_) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::io("inspect", path, e)),
    }
}

/// Removes the symlink at `path` itself (never what it points to); anything else that stands
/// there now is left alone.
fn remove_symlink(path: &std::path::Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fsutil::remove_if_exists(path),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("inspect", path, e)),
    }
}

/// Collects garbage: takes the collection lock, defers while any operation marker is held,
/// otherwise plans under the lock and carries the plan out.
pub fn sweep(store: &Store, options: &GcOptions) -> Result<GcReport> {
    refuse_remote(store)?;
    // Before locking: `locks/` swapped for a symlink would make us lock, and remove stale
    // markers, outside the store.
    store.check_layout()?;
    let layout = store.layout().clone();
    let _gc = lock::gc_lock(&layout.locks)?;
    let live = lock::live_markers(&layout.locks)?;
    if !live.is_empty() {
        return Ok(GcReport {
            deferred: true,
            ..GcReport::default()
        });
    }
    // Planned under the lock: no operation can start until the sweep is done, so the plan
    // stays true while it is carried out.
    let (plan, reach) = plan_with_reach(store, options)?;
    let mut report = GcReport {
        plan: plan.clone(),
        ..GcReport::default()
    };
    let mut freed: i64 = 0;

    // Repack first, so live objects are safe in a new pack before anything is deleted.
    if !plan.repack.is_empty() {
        let packs: HashMap<ObjectId, _> = store.packs().into_iter().map(|p| (p.id, p)).collect();
        let mut writer = Some(PackWriter::create(&layout.tmp)?);
        let mut done = Vec::new();
        let mut copied: HashSet<ObjectId> = HashSet::new();
        for pp in &plan.repack {
            let Some(p) = packs.get(&pp.pack) else {
                continue;
            };
            let mut ok = true;
            let mut pending = Vec::new();
            for e in p.index.entries() {
                // An entry that cannot be read stops the collection: the pack is only
                // removed once every live object in it was copied.
                let e = e?;
                if !reach.contains(&e.id) || copied.contains(&e.id) {
                    continue;
                }
                let file = p.file()?;
                match pack::read_checked_record(&file, &p.path, &e) {
                    Ok(stored) => pending.push((e, stored)),
                    Err(_) => {
                        // A damaged copy: dropping it is fine only if a good copy lies elsewhere.
                        let elsewhere = store.packs().iter().any(|q| {
                            q.id != p.id
                                && q.index
                                    .lookup(&e.id)
                                    .map(|qe| q.read(&qe).is_ok())
                                    .unwrap_or(false)
                        }) || store.layout().large_path(&e.id).is_file();
                        if !elsewhere {
                            ok = false;
                        }
                    }
                }
            }
            if !ok {
                report.kept_for_damage.push(p.id);
                continue;
            }
            let w = writer.as_mut().expect("writer present");
            for (e, stored) in pending {
                w.append(e.id, e.kind, e.codec, e.raw_len, &stored)?;
                copied.insert(e.id);
            }
            done.push(p.clone());
        }
        let w = writer.take().expect("writer present");
        let mut new_pack = None;
        if w.object_count() > 0 {
            let (id, new_path, _) = w.finish(&layout.tmp, &layout.packs, None)?;
            freed -= std::fs::metadata(&new_path).map(|m| m.len()).unwrap_or(0) as i64;
            new_pack = Some(id);
        }
        // A pack is named by its bytes: a repacked pack whose bytes the new one repeats exactly
        // (a collection killed after writing it left it beside the packs it came from) IS the
        // new pack, and removing it would remove every object just copied (as the merge does).
        for p in done.into_iter().filter(|p| Some(p.id) != new_pack) {
            let mut dead = 0u64;
            for e in p.index.entries() {
                dead += u64::from(!reach.contains(&e?.id));
            }
            report.objects_deleted += dead;
            freed += remove_pack(&layout.packs, &p.id)? as i64;
            report.packs_repacked += 1;
        }
    }

    for pp in &plan.delete_packs {
        freed += remove_pack(&layout.packs, &pp.pack)? as i64;
        report.objects_deleted += pp.objects;
        report.packs_deleted += 1;
    }
    for id in &plan.delete_large {
        freed += remove_own_file(&layout.large_path(id))? as i64;
        report.objects_deleted += 1;
    }
    for path in plan.orphan_packs.iter().chain(plan.temp_files.iter()) {
        freed += remove_own_file(path)? as i64;
    }
    for path in &plan.symlinks {
        remove_symlink(path)?;
    }
    report.bytes_freed = freed.max(0) as u64;
    fsutil::sync_dir(&layout.packs)?;
    fsutil::sync_dir(&layout.large)?;
    store.refresh()?;
    refresh_quarantine(store)?;
    Ok(report)
}

/// Drops from the quarantine the ids whose every remaining copy now reads back well.
fn refresh_quarantine(store: &Store) -> Result<()> {
    // Read as the handle reads it: a line that is not an id, even one that is not UTF-8, is
    // ignored (issue 53: one bad byte failed every collection with `IO`).
    let ids = store.read_quarantine()?;
    if ids.is_empty() {
        return Ok(());
    }
    let mut still = HashSet::new();
    for id in ids {
        let bad_copy = store.locations(&id).iter().any(|loc| match loc {
            crate::store::Location::Pack(p, e) => p.read(e).is_err(),
            crate::store::Location::Large(path) => {
                read_large_header(path).is_err() || {
                    let mut sink = std::io::sink();
                    store.copy_object_to(&id, &mut sink).is_err()
                }
            }
        });
        if bad_copy {
            still.insert(id);
        }
    }
    store.set_quarantine(still)
}

impl Store {
    /// Collects garbage; see [`sweep`].
    pub fn gc(&self, options: &GcOptions) -> Result<GcReport> {
        sweep(self, options)
    }
}
