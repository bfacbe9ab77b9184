//! Retention: which snapshots to keep, deleting the others, then collecting.
//!
//! The rules, applied to snapshots that are not protected (a protected manifest, or one pinned
//! by a live operation such as a restore in progress, is never dropped):
//! 1. keep the newest `count`;
//! 2. drop any older than `max_age`;
//! 3. then drop the oldest until the objects the kept snapshots reach take at most
//!    `max_total_bytes` as stored.

use crate::error::Result;
use crate::gc::{GcOptions, GcReport};
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::store::{read_large_header, SnapshotEntry, Store};
use crate::tree::EntryKind;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// A retention policy. Every field left `None` keeps everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most this many (the newest) unprotected snapshots.
    pub count: Option<usize>,
    /// Drop unprotected snapshots older than this.
    pub max_age: Option<Duration>,
    /// Drop the oldest unprotected snapshots until the store holds at most this many bytes.
    pub max_total_bytes: Option<u64>,
}

impl Retention {
    /// Whether the policy keeps everything.
    pub fn keeps_all(&self) -> bool {
        self.count.is_none() && self.max_age.is_none() && self.max_total_bytes.is_none()
    }
}

/// What a prune or a delete did.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PruneReport {
    /// Snapshots deleted.
    pub deleted: Vec<SnapshotId>,
    /// Snapshots kept.
    pub kept: usize,
    /// The collection that followed.
    pub gc: GcReport,
}

/// Which snapshots `retention` would drop, oldest first. Changes nothing.
pub fn plan(store: &Store, retention: &Retention, now_ms: i64) -> Result<Vec<SnapshotId>> {
    let (list, _unreadable) = store.list_snapshots()?;
    let pinned: HashSet<SnapshotId> = store
        .live_operations()?
        .into_iter()
        .flat_map(|m| m.pins)
        .collect();
    let protected = |e: &SnapshotEntry| e.manifest.protected || pinned.contains(&e.id);
    // Newest first.
    let mut candidates: Vec<&SnapshotEntry> = list.iter().rev().filter(|e| !protected(e)).collect();
    let mut drop: Vec<SnapshotId> = Vec::new();
    if let Some(count) = retention.count {
        if candidates.len() > count {
            drop.extend(candidates.split_off(count).iter().map(|e| e.id));
        }
    }
    if let Some(max_age) = retention.max_age {
        let cutoff = now_ms - max_age.as_millis() as i64;
        let (young, old): (Vec<&SnapshotEntry>, Vec<&SnapshotEntry>) = candidates
            .into_iter()
            .partition(|e| e.manifest.created_ms >= cutoff);
        drop.extend(old.iter().map(|e| e.id));
        candidates = young;
    }
    if let Some(max_bytes) = retention.max_total_bytes {
        let dropped: HashSet<SnapshotId> = drop.iter().copied().collect();
        let kept: Vec<&SnapshotEntry> = list.iter().filter(|e| !dropped.contains(&e.id)).collect();
        let mut sizes = RefSizes::new(store);
        for e in &kept {
            sizes.add_root(e.manifest.root);
        }
        // Oldest candidates first.
        for e in candidates.iter().rev() {
            if sizes.total <= max_bytes {
                break;
            }
            sizes.remove_root(e.manifest.root);
            drop.push(e.id);
        }
    }
    // Report oldest first.
    let order: HashMap<SnapshotId, usize> =
        list.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
    drop.sort_by_key(|id| order.get(id).copied().unwrap_or(0));
    drop.dedup();
    Ok(drop)
}

/// Reference counts over the object graph, to know the stored size of what a set of
/// snapshots reaches as snapshots are added and removed.
struct RefSizes<'a> {
    store: &'a Store,
    refs: HashMap<ObjectId, u32>,
    children: HashMap<ObjectId, Vec<ObjectId>>,
    total: u64,
}

impl<'a> RefSizes<'a> {
    fn new(store: &'a Store) -> Self {
        RefSizes {
            store,
            refs: HashMap::new(),
            children: HashMap::new(),
            total: 0,
        }
    }

    fn stored_size(&self, id: &ObjectId) -> u64 {
        for loc in self.store.locations(id) {
            match loc {
                crate::store::Location::Pack(_, e) => return e.stored_len,
                crate::store::Location::Large(path) => {
                    if read_large_header(&path).is_ok() {
                        return std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    }
                }
            }
        }
        0
    }

    fn add_root(&mut self, root: TreeId) {
        let mut stack = vec![(root.0, true)];
        while let Some((id, is_tree)) = stack.pop() {
            let count = self.refs.entry(id).or_insert(0);
            *count += 1;
            if *count > 1 {
                continue;
            }
            self.total += self.stored_size(&id);
            if is_tree {
                let kids: Vec<(ObjectId, bool)> = match self.store.read_tree(&TreeId(id)) {
                    Ok(t) => t
                        .entries()
                        .iter()
                        .map(|e| (e.id, e.kind == EntryKind::Dir))
                        .collect(),
                    Err(_) => Vec::new(),
                };
                self.children
                    .insert(id, kids.iter().map(|(k, _)| *k).collect());
                stack.extend(kids);
            }
        }
    }

    fn remove_root(&mut self, root: TreeId) {
        let mut stack = vec![root.0];
        while let Some(id) = stack.pop() {
            let Some(count) = self.refs.get_mut(&id) else {
                continue;
            };
            *count -= 1;
            if *count > 0 {
                continue;
            }
            self.refs.remove(&id);
            self.total = self.total.saturating_sub(self.stored_size(&id));
            if let Some(kids) = self.children.remove(&id) {
                stack.extend(kids);
            }
        }
    }
}

/// Applies `retention`, then collects garbage with `gc`.
pub fn prune(store: &Store, retention: &Retention, gc: &GcOptions) -> Result<PruneReport> {
    // Refuse a symlinked store directory before removing any manifest, not in the sweep after.
    store.check_layout()?;
    let drop = plan(store, retention, crate::fsutil::now_ms())?;
    for id in &drop {
        store.remove_manifest(id)?;
    }
    let kept = store.snapshot_ids()?.len();
    let gc = collect_after_delete(store, gc)?;
    Ok(PruneReport {
        deleted: drop,
        kept,
        gc,
    })
}

/// Deletes one snapshot (protected ones too: this is an explicit request), then collects.
/// A snapshot pinned by a live operation is refused with `BUSY`.
pub fn delete_snapshot(store: &Store, id: &SnapshotId, gc: &GcOptions) -> Result<PruneReport> {
    store.check_layout()?;
    if !store.has_snapshot(id) {
        return Err(crate::error::Error::not_found(format!("snapshot {id}")));
    }
    let pinned = store
        .live_operations()?
        .into_iter()
        .any(|m| m.pins.contains(id))
        || crate::remote::pinned_by_lease(store, id)?;
    if pinned {
        return Err(crate::error::Error::Busy {
            what: format!("snapshot {}", id.short()),
            detail: "a restore or copy of it is in progress; try again when it is done".into(),
        });
    }
    store.remove_manifest(id)?;
    let kept = store.snapshot_ids()?.len();
    let gc = collect_after_delete(store, gc)?;
    Ok(PruneReport {
        deleted: vec![*id],
        kept,
        gc,
    })
}

/// The local collection after manifests were deleted. A store that caches a remote leaves its
/// objects to the remote's collector ([`crate::remote::collect`], which sees every machine's
/// manifests): the report says `deferred: true`.
fn collect_after_delete(store: &Store, gc: &GcOptions) -> Result<crate::gc::GcReport> {
    if store.remote().is_some() {
        return Ok(crate::gc::GcReport {
            deferred: true,
            ..Default::default()
        });
    }
    crate::gc::sweep(store, gc)
}

impl Store {
    /// Applies a retention policy and collects; see [`prune`].
    pub fn prune(&self, retention: &Retention, gc: &GcOptions) -> Result<PruneReport> {
        prune(self, retention, gc)
    }

    /// Deletes one snapshot and collects; see [`delete_snapshot`].
    pub fn delete_snapshot(&self, id: &SnapshotId, gc: &GcOptions) -> Result<PruneReport> {
        delete_snapshot(self, id, gc)
    }
}
