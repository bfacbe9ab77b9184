//! Verification: re-hash every object, decode every tree and manifest, and report what is
//! missing or corrupt, per snapshot.

use crate::error::{Error, Result};
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::store::{copy_large, BrokenIndex, Store};
use crate::tree::EntryKind;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// A copy of an object that failed its check.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BadCopy {
    /// The object.
    pub id: ObjectId,
    /// The file holding the bad copy.
    #[serde(with = "crate::relpath::os_path")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::RelPath"))]
    pub path: PathBuf,
    /// What is wrong.
    pub error: String,
}

/// The check of one snapshot.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SnapshotCheck {
    /// The snapshot.
    pub id: SnapshotId,
    /// Objects it reaches that the store does not hold.
    pub missing: Vec<ObjectId>,
    /// Objects it reaches whose every copy is corrupt.
    pub corrupt: Vec<ObjectId>,
    /// Set when the manifest itself cannot be read.
    pub unreadable: Option<String>,
}

impl SnapshotCheck {
    /// Whether the snapshot can be restored in full.
    pub fn is_ok(&self) -> bool {
        self.missing.is_empty() && self.corrupt.is_empty() && self.unreadable.is_none()
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VerifyReport {
    /// Object copies checked.
    pub copies_checked: u64,
    /// Bytes checked (before compression).
    pub bytes_checked: u64,
    /// Copies that failed their check.
    pub bad_copies: Vec<BadCopy>,
    /// Objects with no good copy left.
    pub corrupt: Vec<ObjectId>,
    /// Pack indexes that could not be read.
    pub broken_indexes: Vec<BrokenIndex>,
    /// One check per snapshot.
    pub snapshots: Vec<SnapshotCheck>,
}

impl VerifyReport {
    /// Whether every snapshot is whole and no copy is bad.
    pub fn is_ok(&self) -> bool {
        self.bad_copies.is_empty()
            && self.broken_indexes.is_empty()
            && self.snapshots.iter().all(SnapshotCheck::is_ok)
    }
}

/// Checks the whole store. Ids with a bad copy are put in quarantine, so the next write of the
/// same content stores a good copy again (healing the store).
pub fn verify(store: &Store) -> Result<VerifyReport> {
    store.refresh()?;
    let mut report = VerifyReport {
        broken_indexes: store.broken_indexes(),
        ..VerifyReport::default()
    };
    let mut good: HashSet<ObjectId> = HashSet::new();
    let mut bad: HashMap<ObjectId, ()> = HashMap::new();
    for p in store.packs() {
        // With a remote, a pack only the remote holds is downloaded to be checked.
        store.ensure_pack_local(&p)?;
        for e in p.index.entries() {
            let e = e?;
            report.copies_checked += 1;
            match p.read(&e) {
                Ok(bytes) => {
                    report.bytes_checked += bytes.len() as u64;
                    good.insert(e.id);
                }
                Err(err) => {
                    bad.insert(e.id, ());
                    report.bad_copies.push(BadCopy {
                        id: e.id,
                        path: p.path.clone(),
                        error: err.to_string(),
                    });
                }
            }
        }
    }
    // With a remote, large objects only the remote holds are downloaded to be checked.
    store.fetch_remote_large()?;
    let large_dir = &store.layout().large;
    for entry in std::fs::read_dir(large_dir).map_err(|e| Error::io("list", large_dir, e))? {
        let entry = entry.map_err(|e| Error::io("list", large_dir, e))?;
        let Some(Ok(id)) = entry.file_name().to_str().map(ObjectId::from_hex) else {
            continue;
        };
        let ft = entry
            .file_type()
            .map_err(|e| Error::io("inspect", entry.path(), e))?;
        if !ft.is_file() {
            continue;
        }
        report.copies_checked += 1;
        let mut counter = Counter(0);
        match copy_large(&entry.path(), &id, &mut counter) {
            Ok(_) => {
                report.bytes_checked += counter.0;
                good.insert(id);
            }
            Err(err) => {
                bad.insert(id, ());
                report.bad_copies.push(BadCopy {
                    id,
                    path: entry.path(),
                    error: err.to_string(),
                });
            }
        }
    }
    report.corrupt = bad
        .keys()
        .filter(|id| !good.contains(id))
        .copied()
        .collect();
    report.corrupt.sort();
    let bad_ids: Vec<ObjectId> = bad.keys().copied().collect();
    store.quarantine(&bad_ids)?;

    let mut ids = store.snapshot_ids()?;
    ids.sort();
    for id in ids {
        let mut check = SnapshotCheck {
            id,
            missing: Vec::new(),
            corrupt: Vec::new(),
            unreadable: None,
        };
        match store.read_manifest(&id) {
            Err(e) if e.is_not_found() => continue,
            Err(e) => check.unreadable = Some(e.to_string()),
            Ok(m) => walk(store, m.root, &good, &bad, &mut check),
        }
        report.snapshots.push(check);
    }
    Ok(report)
}

fn walk(
    store: &Store,
    root: TreeId,
    good: &HashSet<ObjectId>,
    bad: &HashMap<ObjectId, ()>,
    check: &mut SnapshotCheck,
) {
    let mut seen = HashSet::new();
    let mut stack = vec![(root.0, true)];
    while let Some((id, is_tree)) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if !good.contains(&id) {
            if bad.contains_key(&id) {
                check.corrupt.push(id);
            } else {
                check.missing.push(id);
            }
            continue;
        }
        if is_tree {
            match store.read_tree(&TreeId(id)) {
                Ok(t) => {
                    for e in t.entries() {
                        stack.push((e.id, e.kind == EntryKind::Dir));
                    }
                }
                Err(_) => check.corrupt.push(id),
            }
        }
    }
}

struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Store {
    /// Checks the whole store; see [`verify`].
    pub fn verify(&self) -> Result<VerifyReport> {
        verify(self)
    }
}
