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

/// Index files up to this size are read into memory whole; larger ones keep a key per entry
/// in memory and read their entries from the file (see [`PackIndex::load`]). 64 KiB is about
/// a thousand entries: the packs of a few snapshots, which a store merges once it has many.
const HELD_MAX: usize = 64 * 1024;

/// How many entries [`PackIndex::entries`] reads from an index file at a time (64 KiB).
const ENTRIES_PER_READ: usize = 1024;

/// Where a loaded index's entries are.
enum Entries {
    /// Every entry's bytes in memory (`count * INDEX_ENTRY_LEN`): a small index, or bytes
    /// in hand.
    Held(Vec<u8>),
    /// The index file, open, and for each entry its id's bytes 1 to 4 (the first byte is the
    /// fan-out bucket), big-endian so that they sort as the ids do: a lookup searches these
    /// in memory and reads from the file only the entries whose key matches (one, almost
    /// always), so it costs one `pread` when the object is there and none when it is not.
    File { file: File, keys: Vec<u32> },
}

/// A loaded pack index: the fan-out table and entry count, with the entries held in memory
/// (small indexes) or read from the file when a lookup needs one (large ones).
///
/// Large indexes are read rather than mapped. A mapping is only as stable as the file: one
/// truncated by another program, or a page the disk fails to read, raises `SIGBUS` and kills
/// the process (a host of the C ABI included) where a read returns an error. And on a kernel
/// whose page cache holds large folios (Linux 6.18 with ext4), a fault maps the whole folio,
/// up to 2 MiB: a dozen lookups in a 25 MiB index made all of it resident in the process
/// (DEVELOPMENT.md, "Pack indexes are read, not mapped").
pub struct PackIndex {
    path: PathBuf,
    fanout: [u32; 256],
    count: usize,
    entries: Entries,
}

impl std::fmt::Debug for PackIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match &self.entries {
            Entries::Held(_) => "held",
            Entries::File { .. } => "read from the file",
        };
        f.debug_struct("PackIndex")
            .field("path", &self.path)
            .field("count", &self.count)
            .field("entries", &how)
            .finish()
    }
}

/// An index's bytes checked as they come: the header (with the fan-out table), then the
/// entries in order, then the checksum. Both ways of loading one go through it.
struct Check<'p> {
    path: &'p Path,
    count: usize,
    fanout: [u32; 256],
    hasher: Hasher,
    seen: usize,
    last: Option<ObjectId>,
    /// The lookup keys, when the entries are to stay in the file.
    keys: Option<Vec<u32>>,
}

/// The range of entries whose id starts with `byte`, from a fan-out table.
fn bucket_of(fanout: &[u32; 256], byte: u8) -> std::ops::Range<usize> {
    let b = byte as usize;
    let lo = if b == 0 { 0 } else { fanout[b - 1] as usize };
    lo..fanout[b] as usize
}

/// What a whole index's check yields: its fan-out table, its entry count and, when asked
/// for, each entry's lookup key.
struct Checked {
    fanout: [u32; 256],
    count: usize,
    keys: Option<Vec<u32>>,
}

/// The lookup key of an id: its bytes 1 to 4, big-endian (see [`Entries::File`]).
fn key_of(id: &ObjectId) -> u32 {
    u32::from_be_bytes(id.0[1..5].try_into().expect("4 bytes"))
}

fn corrupt(path: &Path, detail: String) -> Error {
    Error::corrupt("pack index", path, detail)
}

impl<'p> Check<'p> {
    /// Checks the header of an index `file_len` bytes long: `head` holds its first
    /// `INDEX_HEADER_LEN` bytes (or all of it, when shorter).
    fn header(head: &[u8], file_len: u64, path: &'p Path, keep_keys: bool) -> Result<Self> {
        if file_len < MIN_INDEX_LEN as u64 || head.len() < INDEX_HEADER_LEN {
            return Err(corrupt(path, "truncated".into()));
        }
        if &head[..8] != INDEX_MAGIC {
            return Err(corrupt(path, "bad magic".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != PACK_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: PACK_VERSION,
            });
        }
        let count = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
        let expected_len = INDEX_HEADER_LEN + count * INDEX_ENTRY_LEN + 32;
        if file_len != expected_len as u64 {
            return Err(corrupt(
                path,
                format!("length {file_len} does not match {count} entries"),
            ));
        }
        // The fan-out table must be monotone and end at count.
        let mut fanout = [0u32; 256];
        let mut prev = 0u32;
        for (b, f) in fanout.iter_mut().enumerate() {
            let o = 16 + b * 4;
            *f = u32::from_le_bytes(head[o..o + 4].try_into().expect("4 bytes"));
            if *f < prev {
                return Err(corrupt(path, "fan-out table is not monotone".into()));
            }
            prev = *f;
        }
        if prev as usize != count {
            return Err(corrupt(
                path,
                "fan-out table does not end at the entry count".into(),
            ));
        }
        let mut hasher = Hasher::new();
        hasher.update(&head[..INDEX_HEADER_LEN]);
        Ok(Check {
            path,
            count,
            fanout,
            hasher,
            seen: 0,
            last: None,
            keys: keep_keys.then(|| Vec::with_capacity(count)),
        })
    }

    /// Checks the next entries (whole ones): each in its fan-out bucket, the ids strictly
    /// ascending, each decodable.
    fn entries(&mut self, bytes: &[u8]) -> Result<()> {
        self.hasher.update(bytes);
        for e in bytes.chunks_exact(INDEX_ENTRY_LEN) {
            let i = self.seen;
            let bad = |d: String| corrupt(self.path, format!("entry {i}: {d}"));
            let entry = decode_entry(e).map_err(|d| bad(d.into()))?;
            if !bucket_of(&self.fanout, entry.id.0[0]).contains(&i) {
                return Err(corrupt(
                    self.path,
                    format!("entry {i} is outside its fan-out bucket"),
                ));
            }
            if self.last.is_some_and(|last| last >= entry.id) {
                return Err(corrupt(self.path, format!("entry {i} is not sorted")));
            }
            self.last = Some(entry.id);
            if let Some(keys) = &mut self.keys {
                keys.push(key_of(&entry.id));
            }
            self.seen += 1;
        }
        Ok(())
    }

    /// Checks the checksum that ends the index, once every entry has been given.
    fn finish(self, checksum: &[u8]) -> Result<Checked> {
        debug_assert_eq!(self.seen, self.count, "every entry checked");
        if self.hasher.finish().as_bytes()[..] != *checksum {
            return Err(corrupt(self.path, "checksum mismatch".into()));
        }
        Ok(Checked {
            fanout: self.fanout,
            count: self.count,
            keys: self.keys,
        })
    }
}

/// Decodes one entry's 64 bytes.
fn decode_entry(e: &[u8]) -> std::result::Result<IndexEntry, &'static str> {
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

impl PackIndex {
    /// Loads and validates an index file: one up to 64 KiB is read into memory whole; a larger
    /// one is read through once (validated as it goes) and kept open, with a 4-byte key per
    /// entry in memory, a sixteenth of its size: a lookup reads one entry from it.
    pub fn load(path: &Path) -> Result<Self> {
        let read_err = |e| Error::io("read pack index", path, e);
        let mut file = File::open(path).map_err(read_err)?;
        let len = file.metadata().map_err(read_err)?.len();
        if len <= HELD_MAX as u64 {
            let mut v = Vec::with_capacity(len as usize);
            std::io::Read::read_to_end(&mut file, &mut v).map_err(read_err)?;
            return Self::from_bytes(v, path);
        }
        // Read through a buffer, never whole: the file is larger than it will be in memory.
        let mut reader =
            std::io::BufReader::with_capacity(ENTRIES_PER_READ * INDEX_ENTRY_LEN, &file);
        let mut read_exact = |buf: &mut [u8]| {
            std::io::Read::read_exact(&mut reader, buf).map_err(|e| match e.kind() {
                // Shorter than its length said a moment ago: another program truncated it.
                std::io::ErrorKind::UnexpectedEof => corrupt(path, "truncated".into()),
                _ => read_err(e),
            })
        };
        let mut head = vec![0u8; INDEX_HEADER_LEN];
        read_exact(&mut head)?;
        let mut check = Check::header(&head, len, path, true)?;
        let mut chunk = vec![0u8; ENTRIES_PER_READ * INDEX_ENTRY_LEN];
        let mut left = check.count;
        while left > 0 {
            let n = left.min(ENTRIES_PER_READ);
            read_exact(&mut chunk[..n * INDEX_ENTRY_LEN])?;
            check.entries(&chunk[..n * INDEX_ENTRY_LEN])?;
            left -= n;
        }
        let mut checksum = [0u8; 32];
        read_exact(&mut checksum)?;
        let checked = check.finish(&checksum)?;
        drop(reader);
        Ok(Self::read_from(file, path, checked))
    }

    /// An index whose entries stay in `file`, checked with their keys kept.
    fn read_from(file: File, path: &Path, checked: Checked) -> Self {
        let Checked {
            fanout,
            count,
            keys,
        } = checked;
        PackIndex {
            path: path.to_path_buf(),
            fanout,
            count,
            entries: Entries::File {
                file,
                keys: keys.expect("checked with its keys kept"),
            },
        }
    }

    /// Validates whole index bytes; with `keep_keys`, returns each entry's lookup key too.
    fn check_bytes(data: &[u8], path: &Path, keep_keys: bool) -> Result<Checked> {
        let mut check = Check::header(data, data.len() as u64, path, keep_keys)?;
        let end = data.len() - 32;
        check.entries(&data[INDEX_HEADER_LEN..end])?;
        check.finish(&data[end..])
    }

    /// The index a writer has just written and installed at `path`, from the bytes it wrote:
    /// validated, then held as [`PackIndex::load`] would hold that file (a large one read
    /// from the file, its bytes dropped: the first snapshot of a large tree writes indexes
    /// of tens of MiB).
    pub(crate) fn installed(data: Vec<u8>, path: &Path) -> Result<Self> {
        if data.len() <= HELD_MAX {
            return Self::from_bytes(data, path);
        }
        let checked = Self::check_bytes(&data, path, true)?;
        let file = File::open(path).map_err(|e| Error::io("read pack index", path, e))?;
        Ok(Self::read_from(file, path, checked))
    }

    /// Validates index bytes and holds them (their entries) in memory.
    pub fn from_bytes(mut data: Vec<u8>, path: &Path) -> Result<Self> {
        let Checked { fanout, count, .. } = Self::check_bytes(&data, path, false)?;
        let end = data.len() - 32;
        data.truncate(end);
        data.drain(..INDEX_HEADER_LEN);
        data.shrink_to_fit();
        Ok(PackIndex {
            path: path.to_path_buf(),
            fanout,
            count,
            entries: Entries::Held(data),
        })
    }

    /// Whether the index's entries stay in its file, read by the lookups that need them
    /// (a large index loaded with [`PackIndex::load`]), rather than held in memory.
    pub fn reads_from_file(&self) -> bool {
        matches!(self.entries, Entries::File { .. })
    }

    /// The bytes this index holds in memory for its entries (their bytes, or their keys).
    pub fn held_bytes(&self) -> usize {
        match &self.entries {
            Entries::Held(v) => v.capacity(),
            Entries::File { keys, .. } => keys.capacity() * 4,
        }
    }

    /// Entry `i` of a held index.
    fn held_entry(data: &[u8], i: usize) -> &[u8] {
        &data[i * INDEX_ENTRY_LEN..(i + 1) * INDEX_ENTRY_LEN]
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the index lists no object.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Looks `id` up. An index file that cannot be read any more (removed and truncated by
    /// another program, a disk error) or that changed since it was validated answers that the
    /// object is not there: never a wrong entry, since the entry read must name `id`.
    pub fn lookup(&self, id: &ObjectId) -> Option<IndexEntry> {
        let bucket = bucket_of(&self.fanout, id.0[0]);
        match &self.entries {
            Entries::Held(data) => {
                let (mut lo, mut hi) = (bucket.start, bucket.end);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    let e = Self::held_entry(data, mid);
                    match e[..32].cmp(&id.0[..]) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return decode_entry(e).ok(),
                    }
                }
                None
            }
            Entries::File { file, keys } => {
                let key = key_of(id);
                let in_bucket = &keys[bucket.clone()];
                let first = bucket.start + in_bucket.partition_point(|k| *k < key);
                let mut e = [0u8; INDEX_ENTRY_LEN];
                let same = keys[first..bucket.end].iter().take_while(|k| **k == key);
                for (i, _) in (first..).zip(same) {
                    let at = (INDEX_HEADER_LEN + i * INDEX_ENTRY_LEN) as u64;
                    file.read_exact_at(&mut e, at).ok()?;
                    match e[..32].cmp(&id.0[..]) {
                        std::cmp::Ordering::Less => continue,
                        std::cmp::Ordering::Equal => return decode_entry(&e).ok(),
                        std::cmp::Ordering::Greater => break,
                    }
                }
                None
            }
        }
    }

    /// Every entry, in id order. From an index file, read a thousand at a time: an entry that
    /// cannot be read or decoded any more (the file changed since it was validated) is an
    /// error, after which the iteration ends.
    pub fn entries(&self) -> EntryIter<'_> {
        EntryIter {
            index: self,
            next: 0,
            chunk: Vec::new(),
            chunk_start: 0,
            failed: false,
        }
    }
}

/// The entries of a [`PackIndex`], in id order (see [`PackIndex::entries`]).
pub struct EntryIter<'a> {
    index: &'a PackIndex,
    next: usize,
    /// Entries read from the file, from entry `chunk_start` on.
    chunk: Vec<u8>,
    chunk_start: usize,
    failed: bool,
}

impl std::fmt::Debug for EntryIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryIter")
            .field("next", &self.next)
            .finish()
    }
}

impl Iterator for EntryIter<'_> {
    type Item = Result<IndexEntry>;

    fn next(&mut self) -> Option<Result<IndexEntry>> {
        let index = self.index;
        if self.failed || self.next >= index.count {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let bytes = match &index.entries {
            Entries::Held(data) => PackIndex::held_entry(data, i),
            Entries::File { file, .. } => {
                let end = self.chunk_start + self.chunk.len() / INDEX_ENTRY_LEN;
                if i < self.chunk_start || i >= end {
                    let n = (index.count - i).min(ENTRIES_PER_READ);
                    self.chunk.resize(n * INDEX_ENTRY_LEN, 0);
                    self.chunk_start = i;
                    let at = (INDEX_HEADER_LEN + i * INDEX_ENTRY_LEN) as u64;
                    if let Err(e) = file.read_exact_at(&mut self.chunk, at) {
                        self.failed = true;
                        return Some(Err(match e.kind() {
                            std::io::ErrorKind::UnexpectedEof => {
                                corrupt(&index.path, "truncated since it was loaded".into())
                            }
                            _ => Error::io("read pack index", &index.path, e),
                        }));
                    }
                }
                let o = (i - self.chunk_start) * INDEX_ENTRY_LEN;
                &self.chunk[o..o + INDEX_ENTRY_LEN]
            }
        };
        match decode_entry(bytes) {
            Ok(e) => Some(Ok(e)),
            Err(d) => {
                self.failed = true;
                Some(Err(corrupt(&index.path, format!("entry {i}: {d}"))))
            }
        }
    }
}

impl PackIndex {
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

/// The SHA-256 of the first `len` bytes of `file`, a pack just written, read back from the
/// start (the page cache holds them) with [`Hasher::update_from`].
fn hash_written(file: &File, len: u64, path: &Path) -> Result<ObjectId> {
    use std::io::{Read, Seek, SeekFrom};
    let read_back = |e| Error::io("read back pack", path, e);
    let mut file = file;
    file.seek(SeekFrom::Start(0)).map_err(read_back)?;
    let mut hasher = Hasher::new();
    let read = hasher.update_from(&mut file.take(len)).map_err(read_back)?;
    if read != len {
        return Err(read_back(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{read} bytes of {len}"),
        )));
    }
    Ok(hasher.finish())
}

impl PackWriter {
    pub(crate) fn create(tmp_dir: &Path) -> Result<Self> {
        let tmp_path = fsutil::temp_name(tmp_dir, "pack");
        let file = fsutil::create_new_file(&tmp_path)?;
        let mut w = PackWriter {
            file: BufWriter::with_capacity(1 << 20, file),
            tmp_path,
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
        let index_bytes = PackIndex::encode(std::mem::take(&mut self.entries));
        let idx_tmp = fsutil::temp_name(tmp_dir, "idx");
        let result = (|| {
            let mut f = fsutil::create_new_file(&idx_tmp)?;
            f.write_all(&index_bytes)
                .map_err(|e| Error::io("write pack index", &idx_tmp, e))?;
            // Both durable before either is renamed into place, synced together (and with
            // the file `with`, when there is one). The pack's id, the SHA-256 of its bytes,
            // is read back from the file meanwhile: hashed as it was written, it took a
            // third of a millisecond from a 10-file test262 snapshot's walk (half a megabyte
            // of rebuilt trees), where the syncs wait for the disk anyway.
            let mut files = vec![
                (&file, self.tmp_path.as_path(), "sync pack"),
                (&f, idx_tmp.as_path(), "sync pack index"),
            ];
            files.extend(with);
            let pack_id =
                fsutil::sync_while(&files, || hash_written(&file, self.offset, &self.tmp_path))?;
            let pack_path = packs_dir.join(format!("{}.pack", pack_id.to_hex()));
            let idx_path = packs_dir.join(format!("{}.idx", pack_id.to_hex()));
            std::fs::rename(&self.tmp_path, &pack_path)
                .map_err(|e| Error::io("rename pack into place", &pack_path, e))?;
            self.installed = true;
            std::fs::rename(&idx_tmp, &idx_path)
                .map_err(|e| Error::io("rename pack index into place", &idx_path, e))?;
            if !fsutil::test_skips_sync("packs-dir") {
                fsutil::sync_dir(packs_dir)?;
            }
            let index = PackIndex::installed(index_bytes, &idx_path)?;
            Ok((pack_id, pack_path, index))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&idx_tmp);
        }
        result
    }
}
