//! Copying a snapshot, with every object it reaches that the other store lacks.

use crate::error::{Error, Result};
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::lock::OperationKind;
use crate::pack::ObjectKind;
use crate::store::Store;
use crate::tree::EntryKind;
use serde::Serialize;
use std::collections::HashSet;

/// What a copy did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CopyReport {
    /// The snapshot copied (the same id in both stores).
    pub snapshot: SnapshotId,
    /// Objects the target lacked and got.
    pub objects_copied: u64,
    /// Their bytes, before compression.
    pub bytes_copied: u64,
    /// True when the target had the snapshot already (nothing was written).
    pub already_present: bool,
}

/// Copies snapshot `id` from `src` into `dst`: every object it reaches that `dst` lacks, then the
/// manifest, byte for byte (so the id is the same). Idempotent. Both stores hold an operation
/// marker while it runs, and the snapshot is pinned in `src`.
pub fn copy_snapshot(src: &Store, id: &SnapshotId, dst: &Store) -> Result<CopyReport> {
    let _src_op = src.begin_operation(OperationKind::Copy, &[*id])?;
    let bytes = src.read_manifest_bytes(id)?;
    let manifest =
        crate::manifest::Manifest::decode(&bytes, Some(id), &src.layout().manifest_path(id))?;
    if dst.has_snapshot(id) && dst.contains(&manifest.root.0) {
        return Ok(CopyReport {
            snapshot: *id,
            objects_copied: 0,
            bytes_copied: 0,
            already_present: true,
        });
    }
    let dst_op = dst.begin_operation(OperationKind::Copy, &[*id])?;
    let writer = dst.writer(&dst_op);
    let mut report = CopyReport {
        snapshot: *id,
        objects_copied: 0,
        bytes_copied: 0,
        already_present: false,
    };
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut stack = vec![manifest.root];
    while let Some(t) = stack.pop() {
        if !seen.insert(t.0) {
            continue;
        }
        let tree = src.read_tree(&t)?;
        for e in tree.entries() {
            match e.kind {
                EntryKind::Dir => stack.push(TreeId(e.id)),
                EntryKind::File | EntryKind::Symlink => {
                    if !seen.insert(e.id) || writer.contains(&e.id) {
                        continue;
                    }
                    let n = copy_blob(src, &e.id, &writer)?;
                    report.objects_copied += 1;
                    report.bytes_copied += n;
                }
            }
        }
        if !writer.contains(&t.0) {
            let bytes = tree.encode();
            writer.put(ObjectKind::Tree, &bytes)?;
            report.objects_copied += 1;
            report.bytes_copied += bytes.len() as u64;
        }
    }
    writer.commit()?;
    dst.write_manifest_bytes(&dst_op, id, &bytes)?;
    Ok(report)
}

fn copy_blob(src: &Store, id: &ObjectId, writer: &crate::store::ObjectWriter<'_>) -> Result<u64> {
    let size = src.object_size(id).unwrap_or(0);
    if size <= writer.store().options().inline_max_bytes {
        let (_, bytes) = src.read_object(id)?;
        writer.put(ObjectKind::Blob, &bytes)?;
        return Ok(bytes.len() as u64);
    }
    // Large: stream through a pipe-like buffer file in the target's tmp/, never whole in memory.
    let tmp = crate::fsutil::temp_name(&writer.store().layout().tmp, "copy");
    let result = (|| {
        let mut f = crate::fsutil::create_new_file(&tmp)?;
        src.copy_object_to(id, &mut f).map_err(|e| e.at(&tmp))?;
        drop(f);
        let mut r = std::fs::File::open(&tmp).map_err(|e| Error::io("open", &tmp, e))?;
        let out = writer.put_blob_from(&mut r, size).map_err(|e| e.at(&tmp))?;
        if out.id != *id {
            return Err(Error::corrupt(
                format!("object {}", id.short()),
                src.path(),
                "copied bytes hash to another id",
            ));
        }
        Ok(out.size)
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

impl Store {
    /// Copies snapshot `id` into `other`; see [`copy_snapshot`].
    pub fn copy_snapshot_to(&self, id: &SnapshotId, other: &Store) -> Result<CopyReport> {
        copy_snapshot(self, id, other)
    }
}
