//! The object writer: new objects into packs (and large blobs into files of their own) for
//! one operation, compressed as the store says.

use super::large::{encode_large_header, LargeHeader, CHUNK, LARGE_HEADER_LEN};
use super::{Compression, LoadedPack, Store, TREE_LEVEL};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::lock::OperationGuard;
use crate::manifest::Manifest;
use crate::pack::{self, Codec, ObjectKind, PackWriter};
use crate::tree::Tree;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

impl Store {
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
