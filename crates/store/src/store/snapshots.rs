//! Snapshots in the store: their manifests written, read, listed and resolved by name, and the
//! check of their labels.

use super::Store;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::{resolve_prefix, SnapshotId};
use crate::lock::OperationGuard;
use crate::manifest::Manifest;

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
