//! The stat cache's file as bytes: the header, version 8 (records, then head, index and
//! footer), version 7 (the same without subtree totals in the index), version 6 (head,
//! records, index) and versions 3 to 5 (one postcard body), read and written (see the module
//! above for the format).

use super::{
    stored, CachedEntry, CachedKind, DirRecord, PrimedSet, Slot, StatCache, StatRecord, Totals,
    WriteTotals, COMPACT_RATIO,
};
use crate::watch::Token;
use cairn_store::{Hasher, ObjectId, SnapshotId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Magic at the start of a stat cache file.
pub const STATCACHE_MAGIC: &[u8; 8] = b"CAIRNSTC";
/// The stat cache format version (version 7, the index without subtree totals, version 6, the
/// head before the records, version 5, one postcard body with every record, version 4, the
/// same without the watcher's token in the header, and version 3, also without the files
/// restores wrote, are still read).
pub const STATCACHE_VERSION: u32 = 8;
/// The earlier versions still read.
const STATCACHE_VERSION_7: u32 = 7;
const STATCACHE_VERSION_6: u32 = 6;
const STATCACHE_VERSION_3: u32 = 3;
const STATCACHE_VERSION_4: u32 = 4;
const STATCACHE_VERSION_5: u32 = 5;
/// The footer of a version 7 or 8 file: where the head begins and its length, where the index
/// begins and its length, each a little-endian `u64`, then the first 8 bytes of the SHA-256 of
/// the head's and the index's bytes (a footer appended over a torn write names no garbage).
pub const FOOTER_LEN: usize = 4 * 8 + 8;
/// The footer of a version 6 file: where the records begin, where the index begins, and the
/// index's length, each a little-endian `u64`.
const FOOTER_LEN_V6: usize = 24;

/// Length of the fixed header (versions 5 and 6) after the magic and version: a flag byte, a snapshot id, the
/// start time, the body's 16-byte key, a flag byte, the watcher token's instance (16 bytes)
/// and sequence number (8), and the first 8 bytes of the SHA-256 of those.
pub const HEADER_LEN: usize = 1 + 32 + 8 + 16 + 1 + 16 + 8 + 8;
/// The header of versions 3 and 4: the same without the token.
pub const HEADER_LEN_V4: usize = 1 + 32 + 8 + 16 + 8;
/// Where the body starts in a file of `version`.
fn body_start(version: u32) -> usize {
    12 + if version >= STATCACHE_VERSION_5 {
        HEADER_LEN
    } else {
        HEADER_LEN_V4
    }
}

/// The part of the cache rewritten only when something changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatCacheBody {
    /// What names this body (see [`StatCacheFile::new_key`]); the header carries it too, and a
    /// file whose header names another body (a header confirmed over a body another process
    /// wrote meanwhile) is not used.
    pub key: [u8; 16],
    /// A fingerprint of the capture rules the exclusion decisions were made under (see
    /// [`rules_fingerprint`](super::rules_fingerprint)); all zero when no decision may be reused.
    pub rules: [u8; 32],
    /// The root's tree and total size, when the whole tree was recorded.
    pub root: Option<(ObjectId, u64)>,
    /// One record per directory walked.
    pub dirs: Vec<DirRecord>,
    /// Files restores wrote since (version 4; none in a version 3 body).
    pub primed: Vec<PrimedSet>,
}

/// A version 3 body: a version 4 one without `primed`.
#[derive(Deserialize)]
struct StatCacheBodyV3 {
    key: [u8; 16],
    rules: [u8; 32],
    root: Option<(ObjectId, u64)>,
    dirs: Vec<DirRecord>,
}

/// The stat cache as stored.
#[derive(Debug, Clone, Default)]
pub struct StatCacheFile {
    /// The snapshot its records were last confirmed by.
    pub snapshot: Option<SnapshotId>,
    /// When that snapshot started, nanoseconds since the epoch.
    pub started_ns: i64,
    /// The records.
    pub body: StatCacheBody,
}

impl StatCacheFile {
    /// A key for a body about to be written: the first 16 bytes of the SHA-256 of the snapshot,
    /// its start time, the process id and a counter of this process, so no two bodies written
    /// get the same key.
    pub fn new_key(snapshot: Option<&SnapshotId>, started_ns: i64) -> [u8; 16] {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut h = Hasher::new();
        h.update(b"cairn statcache body\0");
        if let Some(id) = snapshot {
            h.update(&id.object().0);
        }
        h.update(&started_ns.to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        h.update(
            &COUNTER
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .to_le_bytes(),
        );
        let mut key = [0u8; 16];
        key.copy_from_slice(&h.finish().0[..16]);
        key
    }

    /// A cache holding only file records (by path relative to the root), with no directory
    /// tree and no reusable exclusion decision: every file it names that still matches is not
    /// read again, and everything else is walked as without a cache.
    pub fn from_files(
        snapshot: Option<SnapshotId>,
        started_ns: i64,
        files: Vec<(Vec<u8>, StatRecord)>,
    ) -> StatCacheFile {
        let mut dirs: HashMap<Vec<u8>, Vec<CachedEntry>> = HashMap::new();
        for (path, stat) in files {
            let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
                Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
                None => (Vec::new(), path),
            };
            dirs.entry(dir).or_default().push(CachedEntry {
                name: name.into(),
                kind: CachedKind::File,
                stat,
            });
        }
        let dirs = dirs
            .into_iter()
            .map(|(path, mut entries)| {
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                DirRecord {
                    path,
                    stat: None,
                    entries,
                }
            })
            .collect();
        StatCacheFile {
            snapshot,
            started_ns,
            body: StatCacheBody {
                key: StatCacheFile::new_key(snapshot.as_ref(), started_ns),
                rules: [0; 32],
                root: None,
                dirs,
                primed: Vec::new(),
            },
        }
    }
}

/// Where a directory's record lies in a version 6 to 8 file and what the index says of it:
/// `len` bytes at `at` (from the start of the file), a record of `entries` entries, holding
/// the directory's own `lstat` when `vouched`, whose bytes' SHA-256 begins with `check` (a
/// record spoiled on disk is no record, rather than one whose blob ids are wrong), and
/// (version 8) what its whole subtree holds when that was counted and nothing in it is left
/// out.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Extent {
    pub(super) at: u64,
    pub(super) len: u32,
    pub(super) entries: u32,
    pub(super) vouched: bool,
    check: [u8; 8],
    pub(super) subtree: Option<Totals>,
}

/// An [`Extent`] as the index of a version 6 or 7 file holds it: without subtree totals.
#[derive(Debug, Clone, Copy, Deserialize)]
struct ExtentV7 {
    at: u64,
    len: u32,
    entries: u32,
    vouched: bool,
    check: [u8; 8],
}

/// A [`Place`] of a version 6 or 7 index.
#[derive(Debug, Clone, Deserialize)]
struct PlaceV7 {
    #[serde(with = "serde_bytes")]
    path: Vec<u8>,
    extent: ExtentV7,
}

impl From<PlaceV7> for Place {
    fn from(p: PlaceV7) -> Place {
        let x = p.extent;
        Place {
            path: p.path,
            extent: Extent {
                at: x.at,
                len: x.len,
                entries: x.entries,
                vouched: x.vouched,
                check: x.check,
                subtree: None,
            },
        }
    }
}

/// The head of a version 6 to 8 body: everything but the directory records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct BodyHead {
    pub(super) key: [u8; 16],
    pub(super) rules: [u8; 32],
    pub(super) root: Option<(ObjectId, u64)>,
    pub(super) primed: Vec<PrimedSet>,
}

/// A body's head as it is written: [`BodyHead`]'s fields with the records restores made
/// borrowed, not copied (issue 56: after a full restore they name every file it wrote, and a
/// copy of them, then the head encoded whole in memory, held them three times over). It
/// encodes to the same bytes as the [`BodyHead`] it stands for.
#[derive(Serialize)]
pub(super) struct HeadOut<'a> {
    pub(super) key: [u8; 16],
    pub(super) rules: [u8; 32],
    pub(super) root: Option<(ObjectId, u64)>,
    pub(super) primed: Vec<SetOut<'a>>,
}

/// A [`PrimedSet`] as written, its files borrowed (sorted by path, as a set is stored).
#[derive(Serialize)]
pub(super) struct SetOut<'a> {
    #[serde(with = "super::record::id_bytes")]
    pub(super) snapshot: ObjectId,
    #[serde(with = "serde_bytes")]
    pub(super) boot: &'a [u8],
    pub(super) files: Vec<FileOut<'a>>,
}

/// A [`super::PrimedFile`] as written.
#[derive(Serialize)]
pub(super) struct FileOut<'a> {
    #[serde(with = "serde_bytes")]
    pub(super) path: &'a [u8],
    pub(super) stat: &'a StatRecord,
}

impl<'a> SetOut<'a> {
    /// The stored form of `set`, borrowed.
    fn of(set: &'a PrimedSet) -> SetOut<'a> {
        SetOut {
            snapshot: set.snapshot,
            boot: &set.boot,
            files: set
                .files
                .iter()
                .map(|f| FileOut {
                    path: &f.path,
                    stat: &f.stat,
                })
                .collect(),
        }
    }
}

/// One entry of a version 8 body's index: the record of the directory at `path`, and where
/// (postcard encodes the nested fields as if they were this struct's own).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Place {
    #[serde(with = "serde_bytes")]
    pub(super) path: Vec<u8>,
    pub(super) extent: Extent,
}

/// The check of a record's bytes (see [`Place`]).
fn record_check(bytes: &[u8]) -> [u8; 8] {
    check_of(&[bytes])
}

/// The first 8 bytes of the SHA-256 of `parts`, one after the other.
fn check_of(parts: &[&[u8]]) -> [u8; 8] {
    let mut h = Hasher::new();
    for p in parts {
        h.update(p);
    }
    let mut out = [0u8; 8];
    out.copy_from_slice(&h.finish().0[..8]);
    out
}

/// A directory record to write: one in memory, or one where a file holds it.
enum Src<'a> {
    Record(&'a DirRecord),
    Stored(Extent),
}

impl<'a> From<&'a Slot> for Src<'a> {
    fn from(slot: &'a Slot) -> Src<'a> {
        match slot {
            Slot::Stored(x) => Src::Stored(*x),
            Slot::Held(r) => Src::Record(r),
        }
    }
}

/// What a header says.
pub(super) struct Header {
    pub(super) version: u32,
    pub(super) snapshot: Option<SnapshotId>,
    pub(super) started_ns: i64,
    pub(super) key: [u8; 16],
    pub(super) token: Option<Token>,
}

fn header(
    snapshot: Option<&SnapshotId>,
    started_ns: i64,
    key: &[u8; 16],
    token: Option<&Token>,
) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    if let Some(id) = snapshot {
        out[0] = 1;
        out[1..33].copy_from_slice(&id.object().0);
    }
    out[33..41].copy_from_slice(&started_ns.to_le_bytes());
    out[41..57].copy_from_slice(key);
    if let Some(t) = token {
        out[57] = 1;
        out[58..74].copy_from_slice(&t.instance);
        out[74..82].copy_from_slice(&t.seq.to_le_bytes());
    }
    let checked = HEADER_LEN - 8;
    let mut h = Hasher::new();
    h.update(&out[..checked]);
    out[checked..].copy_from_slice(&h.finish().0[..8]);
    out
}

/// Parses the magic, version and header at the start of `bytes`.
fn parse_header(bytes: &[u8]) -> Option<Header> {
    if bytes.len() < 12 || &bytes[..8] != STATCACHE_MAGIC {
        return None;
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().ok()?);
    if ![
        STATCACHE_VERSION,
        STATCACHE_VERSION_7,
        STATCACHE_VERSION_6,
        STATCACHE_VERSION_5,
        STATCACHE_VERSION_4,
        STATCACHE_VERSION_3,
    ]
    .contains(&version)
    {
        return None;
    }
    let hdr = bytes.get(12..body_start(version))?;
    let checked = hdr.len() - 8;
    let mut check = Hasher::new();
    check.update(&hdr[..checked]);
    if check.finish().0[..8] != hdr[checked..] {
        return None;
    }
    let snapshot = match hdr[0] {
        0 => None,
        1 => Some(SnapshotId::from(ObjectId(hdr[1..33].try_into().ok()?))),
        _ => return None,
    };
    let token = match (version >= STATCACHE_VERSION_5).then(|| hdr[57]) {
        None | Some(0) => None,
        Some(1) => Some(Token {
            instance: hdr[58..74].try_into().ok()?,
            seq: u64::from_le_bytes(hdr[74..82].try_into().ok()?),
        }),
        Some(_) => return None,
    };
    Some(Header {
        version,
        snapshot,
        started_ns: i64::from_le_bytes(hdr[33..41].try_into().ok()?),
        key: hdr[41..57].try_into().ok()?,
        token,
    })
}

/// What the header of a file being written says.
struct Top<'a> {
    snapshot: Option<&'a SnapshotId>,
    started_ns: i64,
    key: &'a [u8; 16],
    token: Option<&'a Token>,
}

fn postcard_error(e: postcard::Error) -> std::io::Error {
    // postcard reports a failed write as its own error, without the I/O error's kind.
    std::io::Error::other(format!("writing the stat cache: {e}"))
}

/// Writes a cache file of this version to `out`: magic, version, header, each directory's
/// record (see [`write_records`]), then the head, the index and the footer (see
/// [`write_tail`]). Returns the index: where each record now lies, and the file's length.
fn write_body<'a>(
    out: &mut dyn Write,
    top: &Top<'_>,
    head: &HeadOut<'_>,
    dirs: impl Iterator<Item = Written<'a>>,
    source: Option<&std::fs::File>,
) -> std::io::Result<(Vec<Place>, u64)> {
    let mut out = cairn_store::fsutil::CountingWriter { inner: out, n: 0 };
    out.write_all(STATCACHE_MAGIC)?;
    out.write_all(&STATCACHE_VERSION.to_le_bytes())?;
    out.write_all(&header(top.snapshot, top.started_ns, top.key, top.token))?;
    let mut places = Vec::new();
    write_records(&mut out, dirs, source, &mut places)?;
    write_tail(&mut out, head, &places)?;
    Ok((places, out.n))
}

/// A directory record to write, with the totals of its subtree to store beside its place.
type Written<'a> = (&'a [u8], Src<'a>, Option<Totals>);

/// Writes directory records to `out` (which counts from the start of the file), each encoded
/// from memory or its bytes copied from `source`, the file a stored one's extent points into
/// (with its check), and adds where each now lies, with its subtree's totals, to `places`. A
/// `Stored` record that cannot be read is left out (its directory is then listed as if new to
/// the cache, the rule for any record that fails). Stored records given in the order they lie
/// in `source` are read a window at a time, not one `pread` each.
fn write_records<'a>(
    out: &mut cairn_store::fsutil::CountingWriter<'_>,
    dirs: impl Iterator<Item = Written<'a>>,
    source: Option<&std::fs::File>,
    places: &mut Vec<Place>,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut window = source.map(Window::new);
    for (path, src, subtree) in dirs {
        buf.clear();
        let extent = match src {
            // Copied as they are, with their check: a record spoiled on disk stays one a
            // reader refuses (hashing every record here cost a writer more than the rest of
            // its work).
            Src::Stored(x) => match window.as_mut().map(|w| w.read(x.at, x.len, &mut buf)) {
                Some(Ok(())) => Extent { at: out.n, ..x },
                _ => continue,
            },
            Src::Record(record) => match encode_record(record, out.n, &mut buf)? {
                Some(x) => x,
                None => continue,
            },
        };
        let extent = Extent { subtree, ..extent };
        places.push(Place {
            path: path.to_vec(),
            extent,
        });
        out.write_all(&buf)?;
    }
    Ok(())
}

/// Reads the records of a file through a window of its bytes: a record inside the window is
/// copied from it, any other read from its own offset with the window after it (records read
/// in the order they lie cost one read a window).
struct Window<'f> {
    file: &'f std::fs::File,
    at: u64,
    bytes: Vec<u8>,
}

impl<'f> Window<'f> {
    /// The bytes read at once: large enough that a compaction of test262's cache (3.8 MB in
    /// 2,111 records) takes 15 reads, small beside what it writes.
    const LEN: usize = 256 << 10;

    fn new(file: &'f std::fs::File) -> Window<'f> {
        Window {
            file,
            at: 0,
            bytes: Vec::new(),
        }
    }

    /// Appends the `len` bytes at `at` to `out`.
    fn read(&mut self, at: u64, len: u32, out: &mut Vec<u8>) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let len = len as usize;
        let end = at + len as u64;
        if !(at >= self.at && end <= self.at + self.bytes.len() as u64) {
            self.bytes.resize(Self::LEN.max(len), 0);
            let mut got = 0;
            while got < len {
                match self.file.read_at(&mut self.bytes[got..], at + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.bytes.truncate(got);
            self.at = at;
            if got < len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let from = (at - self.at) as usize;
        out.extend_from_slice(&self.bytes[from..from + len]);
        Ok(())
    }
}

/// Encodes `record` into `buf` (emptied first) and says where it will lie once written at
/// `at`; `None` when it is too large for an extent.
fn encode_record(
    record: &DirRecord,
    at: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Extent>> {
    buf.clear();
    postcard::to_io(record, &mut *buf).map_err(postcard_error)?;
    Ok(extent_of(record, at, buf.len()).map(|x| Extent {
        check: record_check(buf),
        ..x
    }))
}

/// Where `record` will lie once encoded and written at `at`, its check left zero (a fixed 8
/// bytes in an index, whatever its value), without encoding it; `None` when it is too large
/// for an extent.
fn record_extent(record: &DirRecord, at: u64) -> std::io::Result<Option<Extent>> {
    let len = postcard::experimental::serialized_size(record).map_err(postcard_error)?;
    Ok(extent_of(record, at, len))
}

/// The extent of `record` encoded in `len` bytes at `at`, its check zero; `None` when its
/// length or its entries do not fit one.
fn extent_of(record: &DirRecord, at: u64, len: usize) -> Option<Extent> {
    let (Ok(len), Ok(entries)) = (u32::try_from(len), u32::try_from(record.entries.len())) else {
        return None;
    };
    Some(Extent {
        at,
        len,
        entries,
        vouched: record.stat.is_some(),
        check: [0; 8],
        subtree: None,
    })
}

/// Writes the head, the index `places` and the footer of a body to `out` (which
/// counts from the start of the file). The head and the index go out as they are encoded,
/// through the footer's check, rather than encoded whole first: for 500,000 files the index is
/// over 4 MiB, held twice over when it was copied into an appended tail (DEVELOPMENT.md, the
/// watcher's peak), and after a full restore the head holds every file it wrote.
fn write_tail(
    out: &mut cairn_store::fsutil::CountingWriter<'_>,
    head: &HeadOut<'_>,
    places: &[Place],
) -> std::io::Result<()> {
    let mut check = Hasher::new();
    let (head_at, head_len) = write_checked(out, &mut check, head)?;
    let (index_at, index_len) = write_checked(out, &mut check, places)?;
    for n in [head_at, head_len, index_at, index_len] {
        out.write_all(&n.to_le_bytes())?;
    }
    out.write_all(&check.finish().0[..8])
}

/// Encodes `value` into `out` as it goes, its bytes added to `check`; returns where it begins
/// and its length.
fn write_checked<T: Serialize + ?Sized>(
    out: &mut cairn_store::fsutil::CountingWriter<'_>,
    check: &mut Hasher,
    value: &T,
) -> std::io::Result<(u64, u64)> {
    let at = out.n;
    let mut w = std::io::BufWriter::with_capacity(
        1 << 16,
        Checking {
            inner: &mut *out,
            check,
        },
    );
    postcard::to_io(value, &mut w).map_err(postcard_error)?;
    w.flush()?;
    drop(w);
    Ok((at, out.n - at))
}

/// A writer that passes its bytes on and hashes them (for a check over what it wrote).
struct Checking<'a, W: Write> {
    inner: W,
    check: &'a mut Hasher,
}

impl<W: Write> Write for Checking<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.check.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The check a version 7 or 8 footer holds: the first 8 bytes of the SHA-256 of the head's bytes
/// and then the index's.
fn tail_check(head: &[u8], index: &[u8]) -> [u8; 8] {
    check_of(&[head, index])
}

/// Whether a file of `version` has an index (versions 6 to 8), so that its records are read
/// one at a time; older ones hold one body, decoded whole.
fn is_indexed(version: u32) -> bool {
    [STATCACHE_VERSION, STATCACHE_VERSION_7, STATCACHE_VERSION_6].contains(&version)
}

/// Reads the head and index of a version 8, 7 or 6 file (see [`parse_v7`] and [`parse_v6`]).
fn parse_indexed(
    h: &Header,
    total: u64,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<(BodyHead, Vec<Place>)> {
    match h.version {
        STATCACHE_VERSION | STATCACHE_VERSION_7 => parse_v7(h, total, read),
        STATCACHE_VERSION_6 => parse_v6(h, total, read),
        _ => None,
    }
}

/// Decodes an index of a file of `version`, which must be all of `bytes`: version 8's
/// places, or version 6's and 7's, which have no subtree totals.
fn decode_index(version: u32, bytes: &[u8]) -> Option<Vec<Place>> {
    if version == STATCACHE_VERSION {
        let (places, left): (Vec<Place>, _) = postcard::take_from_bytes(bytes).ok()?;
        return left.is_empty().then_some(places);
    }
    let (places, left): (Vec<PlaceV7>, _) = postcard::take_from_bytes(bytes).ok()?;
    left.is_empty()
        .then(|| places.into_iter().map(Place::from).collect())
}

/// The footer of `len` bytes that ends a file of `total` bytes, and where it begins.
fn read_footer(
    total: u64,
    len: usize,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<(u64, Vec<u8>)> {
    let at = total.checked_sub(len as u64)?;
    Some((at, read(at, len)?))
}

/// The `i`th little-endian `u64` of `bytes`.
fn u64_at(bytes: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
    ))
}

/// Reads the head and index of a version 7 or 8 file of `total` bytes whose header is `h`, through
/// `read(at, len)`; checks the footer's check, that the head lies after the header and before
/// the index, that every place lies between the header and the head, and that the head's key
/// is the header's.
fn parse_v7(
    h: &Header,
    total: u64,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<(BodyHead, Vec<Place>)> {
    let start = body_start(h.version) as u64;
    let (footer_at, footer) = read_footer(total, FOOTER_LEN, read)?;
    let field = |i: usize| u64_at(&footer, i);
    let (head_at, head_len, index_at, index_len) = (field(0)?, field(1)?, field(2)?, field(3)?);
    if !(start <= head_at
        && head_at.checked_add(head_len)? == index_at
        && index_at.checked_add(index_len)? == footer_at)
    {
        return None;
    }
    let head_bytes = read(head_at, usize::try_from(head_len).ok()?)?;
    let index_bytes = read(index_at, usize::try_from(index_len).ok()?)?;
    if tail_check(&head_bytes, &index_bytes)[..] != footer[32..] {
        return None;
    }
    let (head, rest): (BodyHead, _) = postcard::take_from_bytes(&head_bytes).ok()?;
    let places = decode_index(h.version, &index_bytes)?;
    let inside = |p: &Place| {
        let x = p.extent;
        x.at >= start
            && x.at
                .checked_add(u64::from(x.len))
                .is_some_and(|e| e <= head_at)
    };
    (rest.is_empty() && head.key == h.key && places.iter().all(inside)).then_some((head, places))
}

/// Reads the head and index of a version 6 file of `total` bytes whose header is `h`, through
/// `read(at, len)`; checks that every place lies between the records' start and the index and
/// that the head's key is the header's.
fn parse_v6(
    h: &Header,
    total: u64,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<(BodyHead, Vec<Place>)> {
    let start = body_start(h.version) as u64;
    let (footer_at, footer) = read_footer(total, FOOTER_LEN_V6, read)?;
    let field = |i: usize| u64_at(&footer, i);
    let (records_at, index_at, index_len) = (field(0)?, field(1)?, field(2)?);
    if !(start <= records_at
        && records_at <= index_at
        && index_at.checked_add(index_len)? == footer_at)
    {
        return None;
    }
    let head_bytes = read(start, usize::try_from(records_at - start).ok()?)?;
    let (head, rest): (BodyHead, _) = postcard::take_from_bytes(&head_bytes).ok()?;
    let index_bytes = read(index_at, usize::try_from(index_len).ok()?)?;
    let places = decode_index(h.version, &index_bytes)?;
    let inside = |p: &Place| {
        let x = p.extent;
        x.at >= records_at
            && x.at
                .checked_add(u64::from(x.len))
                .is_some_and(|e| e <= index_at)
    };
    (rest.is_empty() && head.key == h.key && places.iter().all(inside)).then_some((head, places))
}

/// Decodes the record of the directory at `path` from `bytes`, the `extent.len` bytes at
/// `extent.at`: `None` unless their check is the index's, and they decode whole, name that
/// directory and hold as many entries as the index says.
pub(super) fn decode_record(bytes: &[u8], path: &[u8], extent: &Extent) -> Option<DirRecord> {
    if record_check(bytes) != extent.check {
        return None;
    }
    let (r, rest): (DirRecord, _) = postcard::take_from_bytes(bytes).ok()?;
    (rest.is_empty() && r.path == path && r.entries.len() == extent.entries as usize).then_some(r)
}

/// The file at `path`, opened for reading with `O_NOFOLLOW` (a symlink there is an error).
fn open_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// Writes a file at `path` through a temporary file in `tmp_dir` renamed into place, and
/// returns it, open for reading and writing. The bytes are written by `write`, through a
/// buffer, never held whole in memory (a cache of 500,000 files encodes to 46 MB).
fn write_replacing<T>(
    tmp_dir: &Path,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
) -> std::io::Result<(std::fs::File, T)> {
    // Named `*.tmp` so that a collection removes one a crash leaves behind.
    let tmp = tempfile::Builder::new()
        .prefix("statcache-")
        .suffix(".tmp")
        .tempfile_in(tmp_dir)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, tmp);
    let made = write(&mut out)?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    let file = tmp.persist(path).map_err(|e| e.error)?;
    Ok((file, made))
}

/// A cache file just written: the file (open for reading), its length and its index.
type FileWritten = (std::sync::Arc<std::fs::File>, u64, Vec<Place>);

/// Reads only the header of the cache at `path`.
pub(super) fn read_header(path: &Path) -> Option<Header> {
    use std::io::Read;
    let mut bytes = [0u8; 12 + HEADER_LEN];
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < bytes.len() {
        match f.read(&mut bytes[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    parse_header(&bytes[..n])
}

impl StatCache {
    pub(super) fn open(path: &Path) -> Option<StatCache> {
        use std::os::unix::fs::FileExt;
        // Never through a symlink planted in its place (issue 34): its records would decide
        // which files are read again.
        let file = open_nofollow(path).ok()?;
        let total = file.metadata().ok()?.len();
        let read = |at: u64, len: usize| -> Option<Vec<u8>> {
            // A length beyond the file is refused before anything is allocated.
            if at.checked_add(len as u64)? > total {
                return None;
            }
            let mut buf = vec![0; len];
            file.read_exact_at(&mut buf, at).ok()?;
            Some(buf)
        };
        let first = read(0, (12 + HEADER_LEN).min(usize::try_from(total).ok()?))?;
        let h = parse_header(&first)?;
        if !is_indexed(h.version) {
            return Self::decode_whole(&read(0, usize::try_from(total).ok()?)?, &h);
        }
        let (head, places) = parse_indexed(&h, total, &read)?;
        // Only a file of this version is appended to (see `StatCache::append`).
        let len = (h.version == STATCACHE_VERSION).then_some(total);
        let source = Some((std::sync::Arc::new(file), len));
        Some(Self::from_parts(&h, head, stored(places), source))
    }

    /// Decodes cache bytes (every record of them).
    pub fn decode(bytes: &[u8]) -> Option<StatCache> {
        let h = parse_header(bytes)?;
        if !is_indexed(h.version) {
            return Self::decode_whole(bytes, &h);
        }
        let slice = |at: u64, len: usize| -> Option<&[u8]> {
            let at = usize::try_from(at).ok()?;
            bytes.get(at..at.checked_add(len)?)
        };
        let read = |at: u64, len: usize| slice(at, len).map(<[u8]>::to_vec);
        let (head, places) = parse_indexed(&h, bytes.len() as u64, &read)?;
        let mut dirs = HashMap::with_capacity(places.len());
        for p in places {
            let bytes = slice(p.extent.at, p.extent.len as usize)?;
            let r = decode_record(bytes, &p.path, &p.extent)?;
            dirs.insert(p.path, Slot::Held(std::sync::Arc::new(r)));
        }
        Some(Self::from_parts(&h, head, dirs, None))
    }

    /// Decodes a file of version 3, 4 or 5: one postcard body with every record.
    fn decode_whole(bytes: &[u8], h: &Header) -> Option<StatCache> {
        let at = bytes.get(body_start(h.version)..)?;
        let body: StatCacheBody = if h.version == STATCACHE_VERSION_3 {
            let v3: StatCacheBodyV3 = postcard::from_bytes(at).ok()?;
            StatCacheBody {
                key: v3.key,
                rules: v3.rules,
                root: v3.root,
                dirs: v3.dirs,
                primed: Vec::new(),
            }
        } else {
            postcard::from_bytes(at).ok()?
        };
        if body.key != h.key {
            return None;
        }
        Some(Self::from_body(h, body))
    }

    /// Encodes a cache file (in this version).
    pub fn encode(file: &StatCacheFile) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 << 16);
        let body = &file.body;
        let head = HeadOut {
            key: body.key,
            rules: body.rules,
            root: body.root,
            primed: body.primed.iter().map(SetOut::of).collect(),
        };
        let top = Top {
            snapshot: file.snapshot.as_ref(),
            started_ns: file.started_ns,
            key: &body.key,
            token: None,
        };
        let dirs = body
            .dirs
            .iter()
            .map(|d| (d.path.as_slice(), Src::Record(d), None));
        write_body(&mut out, &top, &head, dirs, None)
            .expect("a stat cache always encodes into memory");
        out
    }

    /// Writes as [`StatCache::save`] does; returns the file written (open for reading), its
    /// length and its index.
    pub(super) fn write(&self, tmp_dir: &Path, path: &Path) -> std::io::Result<FileWritten> {
        let head = HeadOut {
            key: self.key,
            rules: self.rules,
            root: self.root.map(|(id, size)| (id.object(), size)),
            primed: self.primed_out(),
        };
        let top = Top {
            snapshot: self.snapshot.as_ref(),
            started_ns: self.started_ns,
            key: &self.key,
            token: self.token.as_ref(),
        };
        // A failure to append (the file gone, unwritable) is met again by the whole write.
        let totals = self.totals();
        if let Ok(Some(appended)) = self.append(path, &top, &head, &totals) {
            return Ok(appended);
        }
        // The stored records in the order they lie, read a window at a time.
        let mut order: Vec<(&Vec<u8>, &Slot)> = self.dirs.iter().collect();
        order.sort_unstable_by_key(|(_, s)| match s {
            Slot::Stored(x) => x.at,
            Slot::Held(_) => u64::MAX,
        });
        let dirs = order
            .into_iter()
            .map(|(p, s)| (p.as_slice(), Src::from(s), totals.of(p, s)));
        let source = self.source.as_deref();
        let (file, (places, len)) = write_replacing(tmp_dir, path, |out| {
            write_body(out, &top, &head, dirs, source)
        })?;
        Ok((std::sync::Arc::new(file), len, places))
    }

    /// Appends the records held in memory, then the head, the index (each place with its
    /// subtree's `totals`) and the footer, to the file at `path`, and rewrites its header: see
    /// [`StatCache::save`]. `None`, with nothing written, when the file there is not `source`
    /// as long as it was read or written, another process is appending to it (its lock is
    /// held), or the file would grow beyond what [`COMPACT_RATIO`] allows.
    ///
    /// What another process may read meanwhile: the bytes a record or an index already in the
    /// file lies in are never written again, so a process holding an earlier index reads the
    /// same records; one that opens the file while it grows finds a footer that is not yet
    /// there or whose head's key is not the header's, and takes it for no cache; the header
    /// written last names the new body.
    fn append(
        &self,
        path: &Path,
        top: &Top<'_>,
        head: &HeadOut<'_>,
        totals: &WriteTotals<'_>,
    ) -> std::io::Result<Option<FileWritten>> {
        use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
        let (Some(source), Some(base)) = (&self.source, self.source_len) else {
            return Ok(None);
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        // One appender at a time: a second one finds the file longer than it knew once the
        // first is done, and writes the whole cache.
        let Ok(_locked) =
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        else {
            return Ok(None);
        };
        let (now, then) = (file.metadata()?, source.metadata()?);
        if (now.dev(), now.ino()) != (then.dev(), then.ino()) || now.len() != base {
            return Ok(None);
        }
        let mut places = Vec::with_capacity(self.dirs.len());
        let mut held = Vec::new();
        let mut live = 0u64;
        for (path, slot) in &self.dirs {
            let subtree = totals.of(path, slot);
            match slot {
                Slot::Held(r) => held.push((path.as_slice(), r.as_ref(), subtree)),
                Slot::Stored(x) => {
                    live += u64::from(x.len);
                    places.push(Place {
                        path: path.clone(),
                        extent: Extent { subtree, ..*x },
                    });
                }
            }
        }
        // The new length first, from the encoded sizes (the index's with each appended
        // record's place, whose check is a fixed 8 bytes): nothing is written unless the
        // file stays within the ratio, and nothing is held whole to find out.
        let stored = places.len();
        let mut end = base;
        for (path, record, subtree) in &held {
            let Some(extent) = record_extent(record, end)? else {
                continue;
            };
            end += u64::from(extent.len);
            places.push(Place {
                path: path.to_vec(),
                extent: Extent {
                    subtree: *subtree,
                    ..extent
                },
            });
        }
        let sized = |n: postcard::Result<usize>| n.map(|n| n as u64).map_err(postcard_error);
        let len = end
            + sized(postcard::experimental::serialized_size(head))?
            + sized(postcard::experimental::serialized_size(&places))?
            + FOOTER_LEN as u64;
        live += len - base;
        if len > COMPACT_RATIO * live {
            return Ok(None);
        }
        places.truncate(stored);
        let mut at = &file;
        std::io::Seek::seek(&mut at, std::io::SeekFrom::Start(base))?;
        let mut tail = std::io::BufWriter::with_capacity(1 << 16, at);
        let mut out = cairn_store::fsutil::CountingWriter {
            inner: &mut tail,
            n: base,
        };
        let records = held.into_iter().map(|(p, r, t)| (p, Src::Record(r), t));
        write_records(&mut out, records, None, &mut places)?;
        write_tail(&mut out, head, &places)?;
        let written = out.n;
        tail.flush()?;
        drop(tail);
        if written != len {
            return Err(std::io::Error::other(format!(
                "the stat cache's appended tail came to {written} bytes where {len} were \
                 counted"
            )));
        }
        file.write_all_at(
            &header(top.snapshot, top.started_ns, top.key, top.token),
            12,
        )?;
        Ok(Some((source.clone(), len, places)))
    }

    /// Rewrites only the header of the cache at `path` in place: its records, the body named
    /// `key`, were all confirmed, unchanged, by `snapshot`, which started at `started_ns`, with
    /// the watcher's `token`. The file must be of this version (see [`StatCache::is_current`]).
    pub fn confirm(
        path: &Path,
        snapshot: &SnapshotId,
        started_ns: i64,
        key: &[u8; 16],
        token: Option<&Token>,
    ) -> std::io::Result<()> {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        f.write_all_at(&header(Some(snapshot), started_ns, key, token), 12)
    }
}

#[cfg(test)]
mod tests {
    use super::{BodyHead, HeadOut, SetOut, Window};
    use crate::statcache::{PrimedFile, PrimedSet, StatRecord};
    use cairn_store::ObjectId;

    #[test]
    fn a_head_written_from_borrowed_records_is_the_stored_head_byte_for_byte() {
        let stat = |i: u8| StatRecord {
            dev: 1,
            ino: u64::from(i),
            mode: 0o100644,
            size: 300 + u64::from(i),
            mtime_ns: -5,
            ctime_ns: 1 << 40,
            blob: ObjectId([i; 32]),
        };
        let set = |s: u8, n: u8| PrimedSet {
            snapshot: ObjectId([s; 32]),
            boot: b"6f1c-boot".to_vec(),
            files: (0..n)
                .map(|i| PrimedFile {
                    path: format!("dir/f{i}\u{e9}").into_bytes(),
                    stat: stat(i),
                })
                .collect(),
        };
        let stored = BodyHead {
            key: [3; 16],
            rules: [4; 32],
            root: Some((ObjectId([5; 32]), 77)),
            primed: vec![set(1, 3), set(2, 0), set(9, 200)],
        };
        let borrowed = HeadOut {
            key: stored.key,
            rules: stored.rules,
            root: stored.root,
            primed: stored.primed.iter().map(SetOut::of).collect(),
        };
        let bytes = postcard::to_stdvec(&borrowed).expect("encoded");
        assert_eq!(bytes, postcard::to_stdvec(&stored).expect("encoded"));
        let back: BodyHead = postcard::from_bytes(&bytes).expect("read back");
        assert_eq!(back.primed, stored.primed);
    }

    #[test]
    fn a_window_gives_the_bytes_asked_for_in_any_order_across_its_edges_and_refuses_past_the_end() {
        let bytes: Vec<u8> = (0..(Window::LEN * 2 + 1000))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut file = tempfile::tempfile().expect("a temporary file");
        std::io::Write::write_all(&mut file, &bytes).expect("written");
        let mut w = Window::new(&file);
        let len = bytes.len() as u64;
        // In order, out of order, across the window's edge, larger than the window, at the end.
        for (at, n) in [
            (0u64, 10u32),
            (10, 100),
            (5, 3),
            (Window::LEN as u64 - 4, 8),
            (Window::LEN as u64 + 4, 20),
            (100, Window::LEN as u32 + 50),
            (len - 7, 7),
        ] {
            let mut out = vec![0xAA];
            w.read(at, n, &mut out).expect("read");
            assert_eq!(out[0], 0xAA, "appended to what was there");
            assert_eq!(out[1..], bytes[at as usize..(at + u64::from(n)) as usize]);
        }
        let mut out = Vec::new();
        assert!(w.read(len - 3, 4, &mut out).is_err(), "past the end");
    }
}
