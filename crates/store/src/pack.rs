//! Pack files and their indexes: many objects in one file, so writing N objects creates O(1)
//! files. Formats are documented in `docs/FORMAT.md`.

use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::{Hasher, ObjectId};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Magic at the start of a pack file.
pub const PACK_MAGIC: &[u8; 8] = b"CAIRNPAK";
/// Magic at the start of a pack index.
pub const INDEX_MAGIC: &[u8; 8] = b"CAIRNIDX";
/// The pack and index format version.
pub const PACK_VERSION: u32 = 1;
/// Size of the pack header.
pub const PACK_HEADER_LEN: u64 = 16;
/// Size of one record header in a pack.
pub const RECORD_HEADER_LEN: usize = 52;
/// Size of one index entry.
pub const INDEX_ENTRY_LEN: usize = 64;
const INDEX_HEADER_LEN: usize = 16 + 256 * 4;
/// The shortest index: a header, no entry and the checksum.
const MIN_INDEX_LEN: usize = INDEX_HEADER_LEN + 32;

/// What an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// File content or a symlink target.
    Blob,
    /// A directory listing.
    Tree,
}

impl ObjectKind {
    pub(crate) fn code(self) -> u8 {
        match self {
            ObjectKind::Blob => 1,
            ObjectKind::Tree => 2,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(ObjectKind::Blob),
            2 => Some(ObjectKind::Tree),
            _ => None,
        }
    }
}

/// How an object's bytes are stored. Recorded in the object's framing, never in its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// The bytes as they are.
    Raw,
    /// A zstd frame.
    Zstd,
}

impl Codec {
    pub(crate) fn code(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// Where one object lies in a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The object's id.
    pub id: ObjectId,
    /// Offset of the record header in the pack.
    pub offset: u64,
    /// Length of the object's bytes.
    pub raw_len: u64,
    /// Length of the stored (possibly compressed) bytes.
    pub stored_len: u64,
    /// Blob or tree.
    pub kind: ObjectKind,
    /// How the bytes are stored.
    pub codec: Codec,
}

/// The bytes of a pack index: built in memory, or a read-only mapping of the index file.
enum IndexBytes {
    /// Bytes in hand (the index a writer just built, or bytes given to
    /// [`PackIndex::from_bytes`]).
    Owned(Vec<u8>),
    /// The file, mapped: only the pages a lookup touches are resident.
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for IndexBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            IndexBytes::Owned(v) => v,
            IndexBytes::Mapped(m) => m,
        }
    }
}

impl std::fmt::Debug for IndexBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self {
            IndexBytes::Owned(_) => "owned",
            IndexBytes::Mapped(_) => "mapped",
        };
        write!(f, "{how} ({} bytes)", self.len())
    }
}

impl IndexBytes {
    /// Maps `file` read-only, or returns `None` where the system cannot map it (some FUSE and
    /// network file systems), for the caller to read it instead.
    #[allow(unsafe_code)]
    fn map(file: &File) -> Option<memmap2::Mmap> {
        // SAFETY: `Mmap::map` is unsafe because the slice it hands out is only as stable as
        // the file. An installed index never changes: a writer writes it under `tmp/`, syncs
        // it and renames it into `objects/packs/` (`PackWriter::finish`), nothing in Cairn
        // opens an installed index for writing, and a collection removes one by unlinking it,
        // which leaves a mapping intact (the inode lives until it is unmapped). What remains
        // is damage from outside Cairn, and it is not harmless: if another program truncates
        // the file (a `cp` or a sync tool rewriting it), or the disk or a network file system
        // fails to read a page a lookup faults in, the access raises `SIGBUS` and the process
        // (a host of the C ABI included) dies where a read would have returned CORRUPT or an
        // I/O error. Git maps its `.idx` files with the same exposure. Bytes rewritten in
        // place are seen by the next lookup: lookups bound every position by the entry count
        // validated at load and the mapping's fixed length, and an object read re-hashes what
        // it reads, so such damage gives a missing object or CORRUPT, never a wrong object.
        unsafe { memmap2::Mmap::map(file) }.ok()
    }

    /// After validation has read every page: drops this process's copies of the pages of a
    /// mapping (they stay in the page cache), and asks for no read-ahead, since a lookup
    /// touches the fan-out table and a few entries.
    #[allow(unsafe_code)]
    fn release(&self) {
        if let IndexBytes::Mapped(m) = self {
            // Advice only: a system that refuses it leaves the pages resident.
            let _ = m.advise(memmap2::Advice::Random);
            // SAFETY: `MADV_DONTNEED` is unsafe in general because it discards the content of
            // private and anonymous mappings. This is a read-only shared mapping of a file
            // (`Mmap::map` maps `MAP_SHARED`, `PROT_READ`): the advice only unmaps its pages
            // from this process, and the next access faults the same bytes back in from the
            // page cache (or the file). No slice of the mapping is written through.
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }
}

/// A loaded pack index: entries sorted by id, with a fan-out table.
#[derive(Debug)]
pub struct PackIndex {
    data: IndexBytes,
    count: usize,
}

impl PackIndex {
    /// Gives back this process's copies of the mapped index's pages that lookups faulted in
    /// (they stay in the page cache; the next lookup faults the few it needs back in). A
    /// long-lived process calls it when idle: a walk of a large tree looks every file's blob
    /// up and so touches every page.
    pub fn release_pages(&self) {
        self.data.release();
    }

    /// Maps and validates an index file. Only the pages lookups touch stay resident (the
    /// mapping is shared with the page cache, and validation's pages are given back); a file
    /// too short to be an index, or one the system cannot map, is read instead.
    pub fn load(path: &Path) -> Result<Self> {
        let read_err = |e| Error::io("read pack index", path, e);
        let mut file = File::open(path).map_err(read_err)?;
        let len = file.metadata().map_err(read_err)?.len();
        // Mapping an empty file fails: a short one is read, for `validate` to call it truncated.
        let mapped = (len >= MIN_INDEX_LEN as u64)
            .then(|| IndexBytes::map(&file))
            .flatten();
        let data = match mapped {
            Some(m) => IndexBytes::Mapped(m),
            None => {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut file, &mut v).map_err(read_err)?;
                IndexBytes::Owned(v)
            }
        };
        let idx = Self::validate(data, path)?;
        idx.data.release();
        Ok(idx)
    }

    /// Validates index bytes.
    pub fn from_bytes(data: Vec<u8>, path: &Path) -> Result<Self> {
        Self::validate(IndexBytes::Owned(data), path)
    }

    /// Whether the index is a mapping of its file (see [`PackIndex::load`]) rather than bytes
    /// held in memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.data, IndexBytes::Mapped(_))
    }

    fn validate(data: IndexBytes, path: &Path) -> Result<Self> {
        let bad = |d: String| Error::corrupt("pack index", path, d);
        if data.len() < MIN_INDEX_LEN {
            return Err(bad("truncated".into()));
        }
        if &data[..8] != INDEX_MAGIC {
            return Err(bad("bad magic".into()));
        }
        let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
        if version != PACK_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: PACK_VERSION,
            });
        }
        let count = u32::from_le_bytes(data[12..16].try_into().expect("4 bytes")) as usize;
        let expected_len = INDEX_HEADER_LEN + count * INDEX_ENTRY_LEN + 32;
        if data.len() != expected_len {
            return Err(bad(format!(
                "length {} does not match {count} entries",
                data.len()
            )));
        }
        let body = &data[..data.len() - 32];
        if ObjectId::of(body).as_bytes()[..] != data[data.len() - 32..] {
            return Err(bad("checksum mismatch".into()));
        }
        let idx = PackIndex { data, count };
        // The fan-out table must be monotone and end at count, and ids strictly ascending.
        let mut prev = 0u32;
        for b in 0..256 {
            let f = idx.fanout(b);
            if f < prev {
                return Err(bad("fan-out table is not monotone".into()));
            }
            prev = f;
        }
        if prev as usize != count {
            return Err(bad("fan-out table does not end at the entry count".into()));
        }
        for i in 0..count {
            let id = idx.id_at(i);
            let lo = if id.0[0] == 0 {
                0
            } else {
                idx.fanout(id.0[0] as usize - 1)
            };
            if (i as u32) < lo || (i as u32) >= idx.fanout(id.0[0] as usize) {
                return Err(bad(format!("entry {i} is outside its fan-out bucket")));
            }
            if i > 0 && idx.id_at(i - 1) >= id {
                return Err(bad(format!("entry {i} is not sorted")));
            }
            idx.entry_at(i)
                .map_err(|d| bad(format!("entry {i}: {d}")))?;
        }
        Ok(idx)
    }

    fn fanout(&self, byte: usize) -> u32 {
        let o = 16 + byte * 4;
        u32::from_le_bytes(self.data[o..o + 4].try_into().expect("4 bytes"))
    }

    fn id_at(&self, i: usize) -> ObjectId {
        let o = INDEX_HEADER_LEN + i * INDEX_ENTRY_LEN;
        ObjectId(self.data[o..o + 32].try_into().expect("32 bytes"))
    }

    fn entry_at(&self, i: usize) -> std::result::Result<IndexEntry, String> {
        let o = INDEX_HEADER_LEN + i * INDEX_ENTRY_LEN;
        let e = &self.data[o..o + INDEX_ENTRY_LEN];
        let u64_at = |p: usize| u64::from_le_bytes(e[p..p + 8].try_into().expect("8 bytes"));
        let kind = ObjectKind::from_code(e[56]).ok_or("unknown object kind")?;
        let codec = Codec::from_code(e[57]).ok_or("unknown codec")?;
        Ok(IndexEntry {
            id: ObjectId(e[..32].try_into().expect("32 bytes")),
            offset: u64_at(32),
            raw_len: u64_at(40),
            stored_len: u64_at(48),
            kind,
            codec,
        })
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the index lists no object.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Looks `id` up.
    pub fn lookup(&self, id: &ObjectId) -> Option<IndexEntry> {
        let b = id.0[0] as usize;
        let mut lo = if b == 0 {
            0
        } else {
            self.fanout(b - 1) as usize
        };
        // Validated at load, but a mapped file damaged since may say anything: stay in bounds.
        let mut hi = (self.fanout(b) as usize).min(self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.id_at(mid).cmp(id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.entry_at(mid).ok(),
            }
        }
        None
    }

    /// Every entry, in id order.
    pub fn entries(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        (0..self.count).filter_map(move |i| self.entry_at(i).ok())
    }

    /// Encodes entries (sorted here) into index bytes.
    pub fn encode(mut entries: Vec<IndexEntry>) -> Vec<u8> {
        entries.sort_by_key(|e| e.id);
        entries.dedup_by(|a, b| a.id == b.id);
        let mut out = Vec::with_capacity(INDEX_HEADER_LEN + entries.len() * INDEX_ENTRY_LEN + 32);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&PACK_VERSION.to_le_bytes());
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        let mut fan = [0u32; 256];
        for e in &entries {
            fan[e.id.0[0] as usize] += 1;
        }
        let mut acc = 0u32;
        for f in fan.iter() {
            acc += f;
            out.extend_from_slice(&acc.to_le_bytes());
        }
        for e in &entries {
            out.extend_from_slice(e.id.as_bytes());
            out.extend_from_slice(&e.offset.to_le_bytes());
            out.extend_from_slice(&e.raw_len.to_le_bytes());
            out.extend_from_slice(&e.stored_len.to_le_bytes());
            out.push(e.kind.code());
            out.push(e.codec.code());
            out.extend_from_slice(&[0u8; 6]);
        }
        let sum = ObjectId::of(&out);
        out.extend_from_slice(sum.as_bytes());
        out
    }
}

/// Reads a record's bytes as stored and checks that they decode to its id: what a repack or
/// a merge copies into another pack, never a copy that does not read back.
pub(crate) fn read_checked_record(file: &File, path: &Path, e: &IndexEntry) -> Result<Vec<u8>> {
    let stored = read_record(file, path, e)?;
    decode_stored(stored.clone(), e.codec, &e.id, e.raw_len, path)?;
    Ok(stored)
}

/// Reads one record's stored bytes from a pack file and checks its header against the index.
pub fn read_record(file: &File, path: &Path, e: &IndexEntry) -> Result<Vec<u8>> {
    let bad = |d: String| Error::corrupt(format!("object {}", e.id.short()), path, d);
    let read_at = |buf: &mut [u8], at: u64| {
        file.read_exact_at(buf, at).map_err(|err| match err.kind() {
            std::io::ErrorKind::UnexpectedEof => bad("the pack is truncated".into()),
            _ => Error::io("read pack", path, err),
        })
    };
    let check = |header: &[u8]| {
        if header[..32] != e.id.0 {
            return Err(bad("the record header names another object".into()));
        }
        let raw_len = u64::from_le_bytes(header[36..44].try_into().expect("8 bytes"));
        let stored_len = u64::from_le_bytes(header[44..52].try_into().expect("8 bytes"));
        if raw_len != e.raw_len || stored_len != e.stored_len || header[33] != e.codec.code() {
            return Err(bad("the record header disagrees with the index".into()));
        }
        Ok(())
    };
    // The usual record, a few KiB: header and bytes in one read (a pack too short for the
    // length the index claims fails that read).
    if e.stored_len <= ONE_READ_MAX {
        let mut buf = vec![0u8; RECORD_HEADER_LEN + e.stored_len as usize];
        read_at(&mut buf, e.offset)?;
        check(&buf[..RECORD_HEADER_LEN])?;
        buf.drain(..RECORD_HEADER_LEN);
        return Ok(buf);
    }
    let mut header = [0u8; RECORD_HEADER_LEN];
    read_at(&mut header, e.offset)?;
    check(&header)?;
    let stored_len = e.stored_len;
    // A hostile or damaged index may claim any length: check it against the file before
    // allocating, so a bad record is CORRUPT and never an out-of-memory abort.
    let file_len = file
        .metadata()
        .map_err(|err| Error::io("inspect pack", path, err))?
        .len();
    let end = e
        .offset
        .checked_add(RECORD_HEADER_LEN as u64)
        .and_then(|o| o.checked_add(stored_len));
    if end.is_none_or(|end| end > file_len) {
        return Err(bad("the pack is truncated".into()));
    }
    let len = usize::try_from(stored_len).map_err(|_| bad("record too large".into()))?;
    let mut data = vec![0u8; len];
    read_at(&mut data, e.offset + RECORD_HEADER_LEN as u64)?;
    Ok(data)
}

/// Records up to this many stored bytes are read with their header in one call, without
/// first checking the claimed length against the file's (the allocation stays small).
const ONE_READ_MAX: u64 = 1 << 20;

/// Objects up to this size are decompressed in one call into a buffer of their recorded
/// length; larger ones (a damaged index could claim any length) are streamed.
const BULK_DECODE_MAX: u64 = 16 << 20;

thread_local! {
    /// One zstd decompression context per thread.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decodes stored bytes with `codec` and checks that they hash to `id` and have `raw_len` bytes.
pub fn decode_stored(
    stored: Vec<u8>,
    codec: Codec,
    id: &ObjectId,
    raw_len: u64,
    path: &Path,
) -> Result<Vec<u8>> {
    let bad = |d: String| Error::corrupt(format!("object {}", id.short()), path, d);
    let raw = match codec {
        Codec::Raw => stored,
        // The usual case, objects in packs of a few KiB: one frame into a buffer of the
        // recorded length, with this thread's reused context (creating a context for each
        // object cost more than decompressing it). A frame that is longer fails.
        Codec::Zstd if raw_len <= BULK_DECODE_MAX => DECOMPRESSOR
            .with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.is_none() {
                    *slot = Some(zstd::bulk::Decompressor::new()?);
                }
                let d = slot.as_mut().expect("a decompressor was just made");
                let mut out = Vec::with_capacity(raw_len as usize);
                d.decompress_to_buffer(stored.as_slice(), &mut out)?;
                Ok(out)
            })
            .map_err(|err: std::io::Error| bad(format!("does not decompress: {err}")))?,
        Codec::Zstd => {
            // Stream the frame, bounded by the recorded length (plus one byte, to see a frame
            // that is longer): memory follows the real content, never a claimed length.
            use std::io::Read;
            let mut out = Vec::with_capacity((stored.len() * 4).min(1 << 22));
            zstd::stream::read::Decoder::new(stored.as_slice())
                .map_err(|err| bad(format!("does not decompress: {err}")))?
                .take(raw_len.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|err| bad(format!("does not decompress: {err}")))?;
            out
        }
    };
    if raw.len() as u64 != raw_len {
        return Err(bad(format!(
            "{} bytes where {raw_len} were stored",
            raw.len()
        )));
    }
    let actual = ObjectId::of(&raw);
    if actual != *id {
        return Err(bad(format!("its bytes hash to {}", actual.short())));
    }
    Ok(raw)
}

/// Writes one pack file in the store's `tmp/` directory; [`PackWriter::finish`] syncs it and
/// its index and renames both into place.
pub(crate) struct PackWriter {
    file: BufWriter<File>,
    tmp_path: PathBuf,
    hasher: Hasher,
    offset: u64,
    entries: Vec<IndexEntry>,
    installed: bool,
}

impl Drop for PackWriter {
    fn drop(&mut self) {
        if !self.installed {
            let _ = std::fs::remove_file(&self.tmp_path);
        }
    }
}

impl PackWriter {
    pub(crate) fn create(tmp_dir: &Path) -> Result<Self> {
        let tmp_path = fsutil::temp_name(tmp_dir, "pack");
        let file = fsutil::create_new_file(&tmp_path)?;
        let mut w = PackWriter {
            file: BufWriter::with_capacity(1 << 20, file),
            tmp_path,
            hasher: Hasher::new(),
            offset: 0,
            entries: Vec::new(),
            installed: false,
        };
        let mut header = Vec::with_capacity(PACK_HEADER_LEN as usize);
        header.extend_from_slice(PACK_MAGIC);
        header.extend_from_slice(&PACK_VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        w.write(&header)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(|e| Error::io("write pack", &self.tmp_path, e))?;
        self.hasher.update(bytes);
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Appends one object's stored bytes.
    pub(crate) fn append(
        &mut self,
        id: ObjectId,
        kind: ObjectKind,
        codec: Codec,
        raw_len: u64,
        stored: &[u8],
    ) -> Result<()> {
        let offset = self.offset;
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[..32].copy_from_slice(id.as_bytes());
        h[32] = kind.code();
        h[33] = codec.code();
        h[36..44].copy_from_slice(&raw_len.to_le_bytes());
        h[44..52].copy_from_slice(&(stored.len() as u64).to_le_bytes());
        self.write(&h)?;
        self.write(stored)?;
        self.entries.push(IndexEntry {
            id,
            offset,
            raw_len,
            stored_len: stored.len() as u64,
            kind,
            codec,
        });
        Ok(())
    }

    pub(crate) fn len(&self) -> u64 {
        self.offset
    }

    pub(crate) fn object_count(&self) -> usize {
        self.entries.len()
    }

    /// Syncs the pack, writes and syncs its index, and renames both into `packs_dir` (the index
    /// last, so a reader never sees an index whose pack is missing). The file `with` is synced
    /// together with them (a manifest to be renamed into place once the pack is). Returns the
    /// pack's id, the path of its pack file and its index.
    pub(crate) fn finish(
        mut self,
        tmp_dir: &Path,
        packs_dir: &Path,
        with: Option<fsutil::ToSync<'_>>,
    ) -> Result<(ObjectId, PathBuf, PackIndex)> {
        self.file
            .flush()
            .map_err(|e| Error::io("write pack", &self.tmp_path, e))?;
        let file = self
            .file
            .get_ref()
            .try_clone()
            .map_err(|e| Error::io("sync pack", &self.tmp_path, e))?;
        let pack_id = self.hasher.clone().finish();
        let index_bytes = PackIndex::encode(std::mem::take(&mut self.entries));
        let idx_tmp = fsutil::temp_name(tmp_dir, "idx");
        let result = (|| {
            let mut f = fsutil::create_new_file(&idx_tmp)?;
            f.write_all(&index_bytes)
                .map_err(|e| Error::io("write pack index", &idx_tmp, e))?;
            // Both durable before either is renamed into place, synced together (and with
            // the file `with`, when there is one).
            let mut files = vec![
                (&file, self.tmp_path.as_path(), "sync pack"),
                (&f, idx_tmp.as_path(), "sync pack index"),
            ];
            files.extend(with);
            fsutil::sync_together(&files)?;
            let pack_path = packs_dir.join(format!("{}.pack", pack_id.to_hex()));
            let idx_path = packs_dir.join(format!("{}.idx", pack_id.to_hex()));
            std::fs::rename(&self.tmp_path, &pack_path)
                .map_err(|e| Error::io("rename pack into place", &pack_path, e))?;
            self.installed = true;
            std::fs::rename(&idx_tmp, &idx_path)
                .map_err(|e| Error::io("rename pack index into place", &idx_path, e))?;
            fsutil::sync_dir(packs_dir)?;
            let index = PackIndex::from_bytes(index_bytes, &idx_path)?;
            Ok((pack_id, pack_path, index))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&idx_tmp);
        }
        result
    }
}
