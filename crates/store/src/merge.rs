//! Merging small packs, so that the number of packs a lookup probes stays bounded.
//!
//! Every commit that writes an object writes a pack of its own: a workspace snapshotted before
//! every message gains one small pack per message, and each lookup of an object probes every
//! pack's index (a new object, which misses, probes them all). With 290 packs, a watched
//! snapshot of 10 changed files spent about a millisecond more than with 16 in those probes
//! and in faulting their index pages in. A collection (`gc`) consolidates packs too, but it
//! marks every object reachable from every snapshot first, which costs as much as the store
//! is large; a merge copies the records of the small packs as they are into one new pack and
//! removes them, reading nothing else. The one record it changes is one stored uncompressed,
//! as a snapshot that had to answer soon stores every object it packs
//! ([`crate::ObjectWriter::defer_compression`]): it is compressed as the store's setting says
//! (the same id, the same bytes once read; one that does not compress well enough stays
//! raw). The `cairn watch` daemon merges once idle, past 32 small packs, on a thread of its
//! own that a snapshot beginning stops ([`MergeOptions::stop`]); a snapshot taken without a
//! daemon merges right after itself, past 64 packs (`MERGE_AFTER_SNAPSHOT_PACKS` in
//! `cairn-restore`).
//!
//! A merge never drops an object: every record of a pack it removes is in the new pack, which
//! is durable (synced, renamed into place, its directory synced) before any pack is removed,
//! and a pack whose records do not all read back well (or one quarantined) is left as it is.
//! It holds an operation marker, so a collection defers while it runs. A handle in another
//! process that still has a removed pack loaded finds its objects in the new one at its next
//! refresh (a read that misses refreshes). The new pack's index is new, so unreachable objects
//! it took along wait one more grace period before a collection may delete them.

use crate::error::Result;
use crate::fsutil;
use crate::id::ObjectId;
use crate::lock::OperationKind;
use crate::pack::{self, Codec, PackWriter};
use crate::Store;
use std::collections::HashSet;

/// When a merge happens and what it takes.
#[derive(Debug, Clone)]
pub struct MergeOptions {
    /// Merge once the store holds more than this many small packs (default 32).
    pub max_small_packs: usize,
    /// A pack of at most this many bytes is small (default 8 MiB). The merged pack is small
    /// too until it grows past this, and is merged again with the next ones.
    pub small_pack_bytes: u64,
    /// Looked at before each pack is copied and before the new one is made durable: once it
    /// is set, the merge stops, removes what it wrote, changes nothing and says so
    /// ([`MergeReport::stopped`]). The `cairn watch` daemon merges while idle and sets it
    /// when a snapshot is asked for, so that the snapshot does not share the machine with a
    /// merge (a merge of 32 packs of test262 snapshots compresses and hashes several
    /// megabytes).
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            max_small_packs: 32,
            small_pack_bytes: 8 << 20,
            stop: None,
        }
    }
}

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MergeReport {
    /// Packs merged (and removed).
    pub packs_merged: u64,
    /// Objects copied into the new pack.
    pub objects: u64,
    /// The new pack, if one was written.
    pub new_pack: Option<ObjectId>,
    /// Small packs left as they were: a record did not read back well, or is quarantined.
    pub kept: Vec<ObjectId>,
    /// Stopped by [`MergeOptions::stop`] before it was done: nothing was changed.
    pub stopped: bool,
}

impl Store {
    /// Merges the small packs into one when there are more than `options.max_small_packs`
    /// of them; does nothing otherwise, nor on a store that caches a remote (the remote's
    /// collector owns its packs). See the module documentation.
    pub fn merge_small_packs(&self, options: &MergeOptions) -> Result<MergeReport> {
        let mut report = MergeReport::default();
        if self.remote().is_some() {
            return Ok(report);
        }
        let _op = self.begin_operation(OperationKind::Write, &[])?;
        self.refresh()?;
        let mut small: Vec<_> = self
            .packs()
            .into_iter()
            .filter(|p| {
                std::fs::symlink_metadata(&p.path)
                    .is_ok_and(|m| m.is_file() && m.len() <= options.small_pack_bytes)
            })
            .collect();
        if small.len() <= options.max_small_packs {
            return Ok(report);
        }
        small.sort_by_key(|p| p.id);
        let layout = self.layout();
        let mut writer = PackWriter::create(&layout.tmp)?;
        let mut copied: HashSet<ObjectId> = HashSet::new();
        let mut merged = Vec::new();
        let stopped = || {
            options
                .stop
                .as_ref()
                .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
        };
        for p in small {
            if stopped() {
                // The writer, dropped, removes its file.
                report.stopped = true;
                return Ok(report);
            }
            // Gone since the refresh (another merge or a collection took it): nothing to do.
            let Ok(file) = p.file() else { continue };
            let mut records = Vec::new();
            let mut good = true;
            for e in p.index.entries() {
                // An entry that cannot be read: the pack is left as it is.
                let Ok(e) = e else {
                    good = false;
                    break;
                };
                if self.is_quarantined(&e.id) {
                    good = false;
                    break;
                }
                match pack::read_checked_record(&file, &p.path, &e) {
                    Ok(stored) => records.push((e, stored)),
                    Err(_) => {
                        good = false;
                        break;
                    }
                }
            }
            if !good {
                report.kept.push(p.id);
                continue;
            }
            for (e, stored) in records {
                if !copied.insert(e.id) {
                    continue;
                }
                // What a snapshot stored uncompressed to answer sooner
                // (`ObjectWriter::defer_compression`) is compressed here, off its path.
                let compressed = match e.codec {
                    Codec::Raw => self.compressed(e.kind, &stored),
                    _ => (e.codec, None),
                };
                match compressed {
                    (codec, Some(c)) => writer.append(e.id, e.kind, codec, e.raw_len, &c)?,
                    (_, None) => writer.append(e.id, e.kind, e.codec, e.raw_len, &stored)?,
                }
            }
            merged.push(p);
        }
        if merged.len() < 2 {
            // One pack merged alone would only be copied.
            return Ok(report);
        }
        if stopped() {
            report.stopped = true;
            return Ok(report);
        }
        let (id, _, _) = writer.finish(&layout.tmp, &layout.packs, None)?;
        report.new_pack = Some(id);
        report.objects = copied.len() as u64;
        for p in merged.iter().filter(|p| p.id != id) {
            // (A merged pack whose bytes the new one repeats exactly is the new one: kept.)
            crate::gc::remove_pack(&layout.packs, &p.id)?;
            report.packs_merged += 1;
        }
        fsutil::sync_dir(&layout.packs)?;
        self.refresh()?;
        Ok(report)
    }
}
