//! The stat cache: for each directory of a workspace's last snapshot, what each of its entries
//! was (a file with its blob, a link, a directory with its tree, or an entry left out and why)
//! and the `lstat` fields that say it has not changed since. A file whose record matches is not
//! read again, and a directory whose entries all match keeps its tree id without the tree being
//! built, encoded and hashed again: a snapshot with nothing changed costs one `lstat` per entry.
//!
//! File format (version 7): `"CAIRNSTC"`, a little-endian `u32` version, a fixed header of
//! [`HEADER_LEN`] bytes (the snapshot the records were last confirmed by, when it started, the
//! key of the body, the watcher token the records were confirmed with, and a checksum of those
//! fields), then the body: each directory's record encoded on its own, the head (key, capture
//! rules, root, the files restores wrote), an index of where each record lies, and a footer of
//! [`FOOTER_LEN`] bytes that says where the head and the index lie, with a check of their
//! bytes. A process reads the header, the footer, the head and the index, and each directory's
//! record only when a walk looks at that directory (`pread`, see [`StatCache::dir`]): a
//! watched snapshot of a 500,000-file tree that changed ten files decodes a few records, and
//! the `cairn watch` daemon holds the index, not half a million records, between snapshots.
//! Version 6 (the head before the records, a footer of three `u64`s) and versions 3 to 5 (one
//! postcard-encoded [`StatCacheBody`]; 3 and 4 with a header of [`HEADER_LEN_V4`] bytes,
//! without the token) are still read, 3 to 5 whole. The key is new each time a body is
//! written and kept when only the header is rewritten, so a process that holds the body it
//! last wrote or read (see [`CacheMemo`]) knows from the header alone that it may use it
//! without reading the file.
//!
//! A body is written after the snapshot's manifest, in one of two ways. When the file at the
//! cache's path is still the one its other records were read from, as long as it was then, the
//! records that changed are appended to it with a new head, index and footer, and the header
//! is rewritten last (see [`StatCache::save`]): a snapshot that changed ten files of a
//! 500,000-file tree writes their directories' records and the index, not the 46 MB of every
//! record. Otherwise, or once the file would hold more than twice what is live, the whole body
//! is written to a temporary file renamed over the old one. When a snapshot changed nothing,
//! only the header is rewritten in place. None of this is synced: the
//! cache only saves work, a torn or stale header fails its checksum or names an older snapshot
//! (whose earlier start time is the stricter one for the racy rule), and the cache is only
//! trusted while the snapshot it names exists (a collection may have removed the blobs of a
//! deleted one). A record that cannot be read or decoded, or that names another directory
//! than its index entry, is no record: its directory is listed as if new to the cache.
//!
//! **Racy timestamps.** A file changed within [`RACY_WINDOW_NS`] before the snapshot that
//! recorded it started may change again without its times moving (file-system clocks are
//! coarse), so such a record is never trusted: the file is read again.
//!
//! **Files a restore wrote** (version 4). A restore writes each file from a blob it knows, so
//! it records them too, as `git checkout` refreshes the index: see [`Written`] for what proves
//! such a record and [`crate::prime`] for how a restore adds them. They are kept apart from the
//! directory records (which still say what the last snapshot saw, so every listing and tree
//! the cache vouches for is one a walk checked), in sets that each name the snapshot holding
//! their blobs and the boot they were written in; a walk uses one in place of reading the file
//! when the file's `lstat` matches it exactly.

use crate::exclude::ExcludeReason;
use crate::watch::Token;
use cairn_store::{CaptureSettings, Hasher, ObjectId, SnapshotId, TreeId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Magic at the start of a stat cache file.
pub const STATCACHE_MAGIC: &[u8; 8] = b"CAIRNSTC";
/// The stat cache format version (version 6, the head before the records, version 5, one
/// postcard body with every record, version 4, the same without the watcher's token in the
/// header, and version 3, also without the files restores wrote, are still read).
pub const STATCACHE_VERSION: u32 = 7;
/// The earlier versions still read.
const STATCACHE_VERSION_6: u32 = 6;
const STATCACHE_VERSION_3: u32 = 3;
const STATCACHE_VERSION_4: u32 = 4;
const STATCACHE_VERSION_5: u32 = 5;
/// The footer of a version 7 file: where the head begins and its length, where the index
/// begins and its length, each a little-endian `u64`, then the first 8 bytes of the SHA-256 of
/// the head's and the index's bytes (a footer appended over a torn write names no garbage).
pub const FOOTER_LEN: usize = 4 * 8 + 8;
/// The footer of a version 6 file: where the records begin, where the index begins, and the
/// index's length, each a little-endian `u64`.
const FOOTER_LEN_V6: usize = 24;
/// A file that would hold more than this many times the bytes of what is live in it (the
/// records its index places, its head and its index) is written whole rather than appended to:
/// it never holds more than twice what it needs, and is written whole about once every
/// (file size / bytes appended per snapshot) snapshots.
const COMPACT_RATIO: u64 = 2;
/// Records of files changed this close before their snapshot started are not trusted.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;
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

/// What identifies one unchanged file (or link, or directory entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatRecord {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Full `st_mode`.
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// The blob of its content (for a directory: its tree).
    #[serde(with = "id_bytes")]
    pub blob: ObjectId,
}

impl StatRecord {
    /// The record of an `lstat` (or `fstat`), with a zero blob.
    pub fn of(st: &rustix::fs::Stat) -> StatRecord {
        StatRecord {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            size: st.st_size as u64,
            mtime_ns: st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64,
            ctime_ns: st.st_ctime * 1_000_000_000 + st.st_ctime_nsec as i64,
            blob: ObjectId([0; 32]),
        }
    }

    /// Whether `other` (a fresh `lstat`) describes the same, unchanged file.
    pub fn matches(&self, other: &StatRecord) -> bool {
        self.dev == other.dev
            && self.ino == other.ino
            && self.mode == other.mode
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
            && self.ctime_ns == other.ctime_ns
    }

    /// Whether the record was taken too close to `started_ns` to be trusted.
    pub fn is_racy(&self, started_ns: i64) -> bool {
        self.mtime_ns >= started_ns - RACY_WINDOW_NS || self.ctime_ns >= started_ns - RACY_WINDOW_NS
    }
}

/// Object ids and names go through serde as byte strings (`serde_bytes`), one call each,
/// instead of one call per byte: encoding and decoding the 60,000 records of a large workspace
/// took three times as long the other way.
mod id_bytes {
    use cairn_store::ObjectId;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
        serde_bytes::Bytes::new(&id.0).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        serde_bytes::ByteArray::<32>::deserialize(d).map(|a| ObjectId(a.into_array()))
    }
}

/// What an entry was in the last snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CachedKind {
    /// A regular file; the record's `blob` is its content.
    File,
    /// A symbolic link; the record's `blob` is its target, `size` the target's length.
    Symlink,
    /// A directory; the record's `blob` is its tree and `size` the tree's total size (not the
    /// `lstat` size, which is not compared for directories).
    Dir,
    /// Left out of the snapshot, and why (the record is the entry's `lstat`).
    Excluded(ExcludeReason),
}

/// A directory entry's name, raw bytes, shared between the records that hold it: a record
/// rebuilt around a changed entry (a watched snapshot rebuilds every directory on the way to
/// a change) shares each other entry's name with the record it came from rather than
/// allocating and copying it. Stored as the bytes alone, as a `Vec<u8>` with `serde_bytes` was.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(std::sync::Arc<[u8]>);

impl Name {
    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::Deref for Name {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<&[u8]> for Name {
    fn from(bytes: &[u8]) -> Name {
        Name(bytes.into())
    }
}

impl From<Vec<u8>> for Name {
    fn from(bytes: Vec<u8>) -> Name {
        Name(bytes.into())
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

impl Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_bytes::serialize(&*self.0, s)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        // Borrowed from the record's bytes when the format allows it: one allocation, the
        // name's own.
        let bytes: std::borrow::Cow<'de, [u8]> = serde_bytes::deserialize(d)?;
        Ok(Name::from(&*bytes))
    }
}

/// One entry of a directory as the last snapshot saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedEntry {
    /// The entry's name, raw bytes.
    pub name: Name,
    /// What it was.
    pub kind: CachedKind,
    /// Its `lstat` fields and its object.
    pub stat: StatRecord,
}

/// The entries of one directory, sorted by name. Entries skipped (too large, unreadable,
/// changing, hard links) are not recorded: they are looked at again every time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirRecord {
    /// The directory's path relative to the root (empty for the root).
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// The directory's own `lstat` when its entries were listed: while it matches (and is not
    /// racy), the entries are the ones below and the directory is not listed again.
    pub stat: Option<StatRecord>,
    /// Its entries, sorted by name.
    pub entries: Vec<CachedEntry>,
}

impl DirRecord {
    /// The names of the subdirectories this record names that `now` (a directory's entries
    /// as a walk found them, sorted by name) no longer names as directories.
    pub fn subdirs_gone(&self, now: &[CachedEntry]) -> Vec<Vec<u8>> {
        let still = |name: &[u8]| {
            now.binary_search_by(|n| n.name.as_bytes().cmp(name))
                .ok()
                .is_some_and(|i| now[i].kind == CachedKind::Dir)
        };
        self.entries
            .iter()
            .filter(|e| e.kind == CachedKind::Dir && !still(&e.name))
            .map(|e| e.name.to_vec())
            .collect()
    }

    /// The entry named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&CachedEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_bytes().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
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
    /// [`rules_fingerprint`]); all zero when no decision may be reused.
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

/// Files one restore wrote (or a walk took from such records: see [`crate::prime`]), each
/// trusted while its `lstat` matches, without the racy rule (the record's own proof, see
/// [`Written`], stands in for it), as long as the snapshot named here exists (it holds every
/// blob named) and the machine has not restarted since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimedSet {
    /// The snapshot that holds every blob of the set.
    #[serde(with = "id_bytes")]
    pub snapshot: ObjectId,
    /// The boot the files were written in (Linux's `/proc/sys/kernel/random/boot_id`): after a
    /// restart, writes that had not reached the disk may be lost while their records are not.
    #[serde(with = "serde_bytes")]
    pub boot: Vec<u8>,
    /// The files, by path relative to the root.
    pub files: Vec<PrimedFile>,
}

/// One file of a [`PrimedSet`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimedFile {
    /// Path relative to the root, raw bytes.
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// Its `lstat` fields once in place, and its blob.
    pub stat: StatRecord,
}

/// What a restore saw of one file it wrote from a blob, for [`crate::prime`]. The record it
/// gives is `placed` with `blob`, and it is kept only when these prove that the file held the
/// blob when it was put in place and that any later write moves its `mtime`:
///
/// - `staged` (its `fstat` after its content and mode were written, under a temporary name no
///   one else writes) and `placed` (its `lstat` at its path once the restore is done) name the
///   same inode with the same mode, size and `mtime`: nothing wrote it in between (a write at a
///   later tick of the clock moves the `mtime`);
/// - `clock_ns`, a time of the same file system's clock read after every file was staged and
///   before any was put in place (the `ctime` of a probe changed then), is later than the
///   staged `mtime`: any write after the file became reachable at its path (a later event)
///   gets an `mtime` of at least `clock_ns`, so it cannot keep the recorded one. A file
///   staged in the clock's last tick before the probe fails this and is not recorded, which
///   is the racy rule for these files.
#[derive(Debug, Clone)]
pub struct Written {
    /// Path relative to the root.
    pub path: Vec<u8>,
    /// The blob the restore wrote into it.
    pub blob: ObjectId,
    /// Its `fstat` as staged.
    pub staged: StatRecord,
    /// The file system's clock between staging and placing.
    pub clock_ns: i64,
    /// Its `lstat` in place.
    pub placed: StatRecord,
}

impl Written {
    /// Whether what the restore saw proves the record (see the type's documentation).
    pub fn proves(&self) -> bool {
        let (s, p) = (&self.staged, &self.placed);
        p.mode & S_IFMT == S_IFREG
            && p.dev == s.dev
            && p.ino == s.ino
            && p.mode == s.mode
            && p.size == s.size
            && p.mtime_ns == s.mtime_ns
            && s.mtime_ns < self.clock_ns
    }
}

const S_IFMT: u32 = 0o170000;
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;

/// This boot of the machine (Linux: `/proc/sys/kernel/random/boot_id`); `None` where the system
/// does not say, and then no restore records its files.
pub fn boot_id() -> Option<&'static [u8]> {
    static BOOT: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|b| b.trim_ascii().to_vec())
            .filter(|b| !b.is_empty())
    })
    .as_deref()
}

/// A file record a restore made, in memory.
#[derive(Debug, Clone)]
struct Primed {
    stat: StatRecord,
    snapshot: SnapshotId,
    boot: std::sync::Arc<[u8]>,
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

/// The fingerprint of every capture setting that decides what is left out: the exclude globs,
/// whether ignore files count, the size limit and whether hard-linked files are refused (the
/// default excludes and how ignore files are read are fixed by the `v3` in the text: `v2`
/// decisions were made while a byte-order mark still hid an ignore file's first pattern). An exclusion decision the cache holds
/// is reused only under the same fingerprint, so a decision made under one size limit is never
/// trusted under another (issue 28); `capture` is taken apart field by field, so a new setting
/// cannot be left out. Never all zero.
pub fn rules_fingerprint(capture: &CaptureSettings) -> [u8; 32] {
    let CaptureSettings {
        excludes,
        max_file_bytes,
        gitignore,
        refuse_hard_links,
    } = capture;
    let mut h = Hasher::new();
    h.update(b"cairn capture rules v3\0");
    h.update(&[u8::from(*gitignore), u8::from(*refuse_hard_links)]);
    h.update(&max_file_bytes.to_le_bytes());
    for e in excludes {
        h.update(&(e.len() as u64).to_le_bytes());
        h.update(e.as_bytes());
    }
    h.finish().0
}

/// A loaded stat cache.
#[derive(Debug, Default, Clone)]
pub struct StatCache {
    /// The snapshot its records were last confirmed by.
    pub snapshot: Option<SnapshotId>,
    /// When that snapshot started.
    pub started_ns: i64,
    /// The capture rules fingerprint the records were made under.
    pub rules: [u8; 32],
    /// The root's tree and size.
    pub root: Option<(TreeId, u64)>,
    /// Each directory's record, by path: where the file holds it, or in memory.
    dirs: HashMap<Vec<u8>, Slot>,
    /// The version 6 or 7 file the `Stored` records are read from (opened once: a file
    /// renamed over it later does not change what this one holds).
    source: Option<std::sync::Arc<std::fs::File>>,
    /// The length of `source` when it was read or written, when it is a version 7 file (only
    /// such a file is appended to): a file appended to since by someone else is not appended
    /// to again (see [`StatCache::save`]).
    source_len: Option<u64>,
    files: usize,
    /// The key of the body these records came from (all zero when they came from no file).
    key: [u8; 16],
    /// The watcher token the records were confirmed with (see [`crate::watch`]): a snapshot
    /// asks the watcher what changed since.
    pub token: Option<Token>,
    /// The format version of the file they came from (0: none).
    version: u32,
    /// Files restores wrote, by path.
    primed: HashMap<Vec<u8>, Primed>,
    /// What a whole subtree holds, by directory: counted once by a watched snapshot that
    /// reuses it, and kept while no record in it changes (in memory only).
    subtrees: Subtrees,
    /// Set when these records came from a memo whose write was called off: the file does not
    /// hold them, and a memo given them back writes them (through this temporary directory).
    unwritten: Option<PathBuf>,
}

/// Where one directory's record is.
#[derive(Debug, Clone)]
enum Slot {
    /// In the cache's file (`StatCache::source`).
    Stored(Extent),
    /// In memory: a walk's, or decoded from a file of an earlier version.
    Held(std::sync::Arc<DirRecord>),
}

impl Slot {
    fn entries(&self) -> usize {
        match self {
            Slot::Stored(x) => x.entries as usize,
            Slot::Held(r) => r.entries.len(),
        }
    }

    fn vouched(&self) -> bool {
        match self {
            Slot::Stored(x) => x.vouched,
            Slot::Held(r) => r.stat.is_some(),
        }
    }
}

/// Where a directory's record lies in a version 6 or 7 file and what the index says of it: `len`
/// bytes at `at` (from the start of the file), a record of `entries` entries, holding the
/// directory's own `lstat` when `vouched`, whose bytes' SHA-256 begins with `check` (a record
/// spoiled on disk is no record, rather than one whose blob ids are wrong).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Extent {
    at: u64,
    len: u32,
    entries: u32,
    vouched: bool,
    check: [u8; 8],
}

/// The head of a version 6 or 7 body: everything but the directory records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct BodyHead {
    key: [u8; 16],
    rules: [u8; 32],
    root: Option<(ObjectId, u64)>,
    primed: Vec<PrimedSet>,
}

/// One entry of a version 6 or 7 body's index: the record of the directory at `path`, and where
/// (postcard encodes the nested fields as if they were this struct's own).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Place {
    #[serde(with = "serde_bytes")]
    path: Vec<u8>,
    extent: Extent,
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

/// What a subtree the cache vouches for holds, in all (see [`StatCache::subtree`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Subtree {
    pub files: u64,
    pub bytes: u64,
    pub symlinks: u64,
    pub dirs: u64,
    pub kept: Vec<crate::walk::Kept>,
}

/// The memo of [`Subtree`]s: cloned empty (a copy of a cache counts again).
#[derive(Default)]
struct Subtrees(parking_lot::Mutex<HashMap<Vec<u8>, std::sync::Arc<Subtree>>>);

impl Clone for Subtrees {
    fn clone(&self) -> Self {
        Subtrees::default()
    }
}

impl std::fmt::Debug for Subtrees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subtrees({})", self.0.lock().len())
    }
}

/// What a header says.
struct Header {
    version: u32,
    snapshot: Option<SnapshotId>,
    started_ns: i64,
    key: [u8; 16],
    token: Option<Token>,
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

/// Writes a version 7 cache file to `out`: magic, version, header, each directory's record
/// (see [`write_records`]), then the head, the index and the footer (see [`write_tail`]).
/// Returns the index: where each record now lies, and the file's length.
fn write_v7<'a>(
    out: &mut dyn Write,
    top: &Top<'_>,
    head: &BodyHead,
    dirs: impl Iterator<Item = (&'a [u8], Src<'a>)>,
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

/// Writes directory records to `out` (which counts from the start of the file), each encoded
/// from memory or its bytes copied from `source`, the file a stored one's extent points into
/// (with its check), and adds where each now lies to `places`. A `Stored` record that cannot
/// be read is left out (its directory is then listed as if new to the cache, the rule for any
/// record that fails).
fn write_records<'a>(
    out: &mut cairn_store::fsutil::CountingWriter<'_>,
    dirs: impl Iterator<Item = (&'a [u8], Src<'a>)>,
    source: Option<&std::fs::File>,
    places: &mut Vec<Place>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf: Vec<u8> = Vec::new();
    for (path, src) in dirs {
        buf.clear();
        let extent = match src {
            // Copied as they are, with their check: a record spoiled on disk stays one a
            // reader refuses (hashing every record here cost a writer more than the rest of
            // its work).
            Src::Stored(x) => {
                buf.resize(x.len as usize, 0);
                match source.map(|f| f.read_exact_at(&mut buf, x.at)) {
                    Some(Ok(())) => Extent { at: out.n, ..x },
                    _ => continue,
                }
            }
            Src::Record(record) => match encode_record(record, out.n, &mut buf)? {
                Some(x) => x,
                None => continue,
            },
        };
        places.push(Place {
            path: path.to_vec(),
            extent,
        });
        out.write_all(&buf)?;
    }
    Ok(())
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
    })
}

/// Writes the head, the index `places` and the footer of a version 7 body to `out` (which
/// counts from the start of the file). The index goes out as it is encoded, through the
/// footer's check, rather than encoded whole first: for 500,000 files it is over 4 MiB, held
/// twice over when it was copied into an appended tail (DEVELOPMENT.md, the watcher's peak).
fn write_tail(
    out: &mut cairn_store::fsutil::CountingWriter<'_>,
    head: &BodyHead,
    places: &[Place],
) -> std::io::Result<()> {
    let head_bytes = postcard::to_stdvec(head).map_err(postcard_error)?;
    let head_at = out.n;
    out.write_all(&head_bytes)?;
    let index_at = out.n;
    let mut check = Hasher::new();
    check.update(&head_bytes);
    let mut index = std::io::BufWriter::with_capacity(
        1 << 16,
        Checking {
            inner: &mut *out,
            check: &mut check,
        },
    );
    postcard::to_io(places, &mut index).map_err(postcard_error)?;
    index.flush()?;
    drop(index);
    let index_len = out.n - index_at;
    for n in [head_at, head_bytes.len() as u64, index_at, index_len] {
        out.write_all(&n.to_le_bytes())?;
    }
    out.write_all(&check.finish().0[..8])
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

/// The check a version 7 footer holds: the first 8 bytes of the SHA-256 of the head's bytes
/// and then the index's.
fn tail_check(head: &[u8], index: &[u8]) -> [u8; 8] {
    check_of(&[head, index])
}

/// Whether a file of `version` has an index (versions 6 and 7), so that its records are read
/// one at a time; older ones hold one body, decoded whole.
fn is_indexed(version: u32) -> bool {
    version == STATCACHE_VERSION || version == STATCACHE_VERSION_6
}

/// Reads the head and index of a version 7 or 6 file (see [`parse_v7`] and [`parse_v6`]).
fn parse_indexed(
    h: &Header,
    total: u64,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<(BodyHead, Vec<Place>)> {
    match h.version {
        STATCACHE_VERSION => parse_v7(h, total, read),
        STATCACHE_VERSION_6 => parse_v6(h, total, read),
        _ => None,
    }
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

/// Reads the head and index of a version 7 file of `total` bytes whose header is `h`, through
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
    let (places, left): (Vec<Place>, _) = postcard::take_from_bytes(&index_bytes).ok()?;
    let inside = |p: &Place| {
        let x = p.extent;
        x.at >= start
            && x.at
                .checked_add(u64::from(x.len))
                .is_some_and(|e| e <= head_at)
    };
    (rest.is_empty() && left.is_empty() && head.key == h.key && places.iter().all(inside))
        .then_some((head, places))
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
    let (places, left): (Vec<Place>, _) = postcard::take_from_bytes(&index_bytes).ok()?;
    let inside = |p: &Place| {
        let x = p.extent;
        x.at >= records_at
            && x.at
                .checked_add(u64::from(x.len))
                .is_some_and(|e| e <= index_at)
    };
    (rest.is_empty() && left.is_empty() && head.key == h.key && places.iter().all(inside))
        .then_some((head, places))
}

/// The name of `path` within `dir` when it lies just beneath it.
fn child_of<'p>(path: &'p [u8], dir: &[u8]) -> Option<&'p [u8]> {
    let rest = if dir.is_empty() {
        path
    } else {
        path.strip_prefix(dir)?.strip_prefix(b"/")?
    };
    (!rest.is_empty() && !rest.contains(&b'/')).then_some(rest)
}

/// The slots of the records an index places.
fn stored(places: Vec<Place>) -> HashMap<Vec<u8>, Slot> {
    places
        .into_iter()
        .map(|p| (p.path, Slot::Stored(p.extent)))
        .collect()
}

/// Decodes the record of the directory at `path` from `bytes`, the `extent.len` bytes at
/// `extent.at`: `None` unless their check is the index's, and they decode whole, name that
/// directory and hold as many entries as the index says.
fn decode_record(bytes: &[u8], path: &[u8], extent: &Extent) -> Option<DirRecord> {
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

/// One directory a walk went through, for [`StatCache::replace`].
#[derive(Debug)]
pub enum Update {
    /// Its record is the cache's, unchanged.
    Same(Vec<u8>),
    /// Its new record, other than the cache's, with the names of the subdirectories the
    /// cache's record named that it no longer does (`None` when the walk had no record of it
    /// to compare with: none, or one that could not be read).
    Fresh(DirRecord, Option<Vec<Vec<u8>>>),
}

/// Reads only the header of the cache at `path`.
fn read_header(path: &Path) -> Option<Header> {
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
    /// The path of a workspace's stat cache in the store.
    pub fn path(store: &cairn_store::Store, workspace_id: &str) -> cairn_store::Result<PathBuf> {
        Ok(store.workspace_dir(workspace_id)?.join("statcache"))
    }

    /// Loads the cache at `path`. A missing, unreadable or undecodable cache is empty: the
    /// cache only saves work, it never decides content. Of a version 6 or 7 file only the
    /// header, the head and the index are read; each record is read when asked for ([`StatCache::dir`]),
    /// from the file as it was opened here.
    pub fn load(path: &Path) -> StatCache {
        Self::open(path).unwrap_or_default()
    }

    fn open(path: &Path) -> Option<StatCache> {
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

    /// The cache of a whole body, its records held in memory.
    fn from_body(h: &Header, body: StatCacheBody) -> StatCache {
        let dirs = body
            .dirs
            .into_iter()
            .map(|d| (d.path.clone(), Slot::Held(std::sync::Arc::new(d))))
            .collect();
        let head = BodyHead {
            key: body.key,
            rules: body.rules,
            root: body.root,
            primed: body.primed,
        };
        Self::from_parts(h, head, dirs, None)
    }

    /// The cache of a header, a body's head and its records, the stored ones in `source` (a
    /// file and, when it is of this version, its length).
    fn from_parts(
        h: &Header,
        head: BodyHead,
        dirs: HashMap<Vec<u8>, Slot>,
        source: Option<(std::sync::Arc<std::fs::File>, Option<u64>)>,
    ) -> StatCache {
        let (source, source_len) = source.unzip();
        let mut primed = HashMap::new();
        for set in head.primed {
            let (snapshot, boot) = (SnapshotId::from(set.snapshot), set.boot.into());
            for f in set.files {
                let p = Primed {
                    stat: f.stat,
                    snapshot,
                    boot: std::sync::Arc::clone(&boot),
                };
                primed.insert(f.path, p);
            }
        }
        StatCache {
            snapshot: h.snapshot,
            started_ns: h.started_ns,
            rules: head.rules,
            root: head.root.map(|(id, size)| (TreeId::from(id), size)),
            files: dirs.values().map(Slot::entries).sum(),
            key: head.key,
            dirs,
            source,
            source_len: source_len.flatten(),
            primed,
            token: h.token,
            version: h.version,
            subtrees: Subtrees::default(),
            unwritten: None,
        }
    }

    /// The cache a file holds, without encoding it.
    pub fn from_file(file: StatCacheFile) -> StatCache {
        let h = Header {
            version: STATCACHE_VERSION,
            snapshot: file.snapshot,
            started_ns: file.started_ns,
            key: file.body.key,
            token: None,
        };
        Self::from_body(&h, file.body)
    }

    /// Encodes a cache file (in this version).
    pub fn encode(file: &StatCacheFile) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 << 16);
        let body = &file.body;
        let head = BodyHead {
            key: body.key,
            rules: body.rules,
            root: body.root,
            primed: body.primed.clone(),
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
            .map(|d| (d.path.as_slice(), Src::Record(d)));
        write_v7(&mut out, &top, &head, dirs, None)
            .expect("a stat cache always encodes into memory");
        out
    }

    /// The records as a file holds them, each read (sorted by path; a record that cannot be
    /// read is left out, as a write leaves it out).
    pub fn to_file(&self) -> StatCacheFile {
        let mut dirs: Vec<DirRecord> = self
            .dirs
            .iter()
            .filter_map(|(p, s)| self.record(p, s))
            .map(|r| DirRecord::clone(&r))
            .collect();
        dirs.sort_by(|a, b| a.path.cmp(&b.path));
        StatCacheFile {
            snapshot: self.snapshot,
            started_ns: self.started_ns,
            body: StatCacheBody {
                key: self.key,
                rules: self.rules,
                root: self.root.map(|(id, size)| (id.object(), size)),
                dirs,
                primed: self.primed_sets(),
            },
        }
    }

    /// Writes this cache to `path`, without syncing (see the module documentation): when the
    /// file there is still the one the records not held in memory were read from (or last
    /// written to), as long as it was then, only the records held in memory are appended to
    /// it, with a new head, index and footer, and its header is rewritten last; otherwise (or
    /// when the file would then hold more than [`COMPACT_RATIO`] times what is live), the
    /// whole cache is written to a temporary file in `tmp_dir` renamed into place, the records
    /// in memory encoded, the others copied from the file they were loaded from.
    pub fn save(&self, tmp_dir: &Path, path: &Path) -> std::io::Result<()> {
        self.write(tmp_dir, path).map(drop)
    }

    /// Writes as [`StatCache::save`] does; returns the file written (open for reading), its
    /// length and its index.
    fn write(&self, tmp_dir: &Path, path: &Path) -> std::io::Result<FileWritten> {
        let head = BodyHead {
            key: self.key,
            rules: self.rules,
            root: self.root.map(|(id, size)| (id.object(), size)),
            primed: self.primed_sets(),
        };
        let top = Top {
            snapshot: self.snapshot.as_ref(),
            started_ns: self.started_ns,
            key: &self.key,
            token: self.token.as_ref(),
        };
        // A failure to append (the file gone, unwritable) is met again by the whole write.
        if let Ok(Some(appended)) = self.append(path, &top, &head) {
            return Ok(appended);
        }
        let dirs = self.dirs.iter().map(|(p, s)| (p.as_slice(), Src::from(s)));
        let source = self.source.as_deref();
        let (file, (places, len)) = write_replacing(tmp_dir, path, |out| {
            write_v7(out, &top, &head, dirs, source)
        })?;
        Ok((std::sync::Arc::new(file), len, places))
    }

    /// Appends the records held in memory, then the head, the index and the footer, to the
    /// file at `path`, and rewrites its header: see [`StatCache::save`]. `None`, with nothing
    /// written, when the file there is not `source` as long as it was read or written, another
    /// process is appending to it (its lock is held), or the file would grow beyond what
    /// [`COMPACT_RATIO`] allows.
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
        head: &BodyHead,
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
            match slot {
                Slot::Held(r) => held.push((path.as_slice(), r.as_ref())),
                Slot::Stored(x) => {
                    live += u64::from(x.len);
                    places.push(Place {
                        path: path.clone(),
                        extent: *x,
                    });
                }
            }
        }
        // The new length first, from the encoded sizes (the index's with each appended
        // record's place, whose check is a fixed 8 bytes): nothing is written unless the
        // file stays within the ratio, and nothing is held whole to find out.
        let stored = places.len();
        let mut end = base;
        for (path, record) in &held {
            let Some(extent) = record_extent(record, end)? else {
                continue;
            };
            end += u64::from(extent.len);
            places.push(Place {
                path: path.to_vec(),
                extent,
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
        let records = held.into_iter().map(|(p, r)| (p, Src::Record(r)));
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

    /// Writes this cache as [`StatCache::save`] does and returns the same cache read from the
    /// file written: its records are no longer held in memory. A process that keeps the
    /// cache between snapshots (see [`CacheMemo`]) holds the index, not the records.
    fn save_settled(&self, tmp_dir: &Path, path: &Path) -> std::io::Result<StatCache> {
        let (file, len, places) = self.write(tmp_dir, path)?;
        let dirs = stored(places);
        Ok(StatCache {
            snapshot: self.snapshot,
            started_ns: self.started_ns,
            rules: self.rules,
            root: self.root,
            files: dirs.values().map(Slot::entries).sum(),
            dirs,
            source: Some(file),
            source_len: Some(len),
            key: self.key,
            token: self.token,
            version: STATCACHE_VERSION,
            primed: self.primed.clone(),
            subtrees: Subtrees::default(),
            unwritten: None,
        })
    }

    /// Replaces the records by the walk's: each directory it walked, either `Same` as its
    /// record here or a `Fresh` one (after a full walk, a directory it did not walk is gone,
    /// or now left out; after a `partial` one, told by a watcher what changed, it kept its
    /// record, unless it lay beneath a directory whose new record no longer names it), under
    /// a new body `key`, capture-rules fingerprint and root. The files restores wrote
    /// become `carried`: those the walk took from them and which the racy rule would still not
    /// trust under `snapshot` (which now holds their blobs), started at `started_ns`.
    #[allow(clippy::too_many_arguments)]
    pub fn replace(
        &mut self,
        partial: bool,
        walked: impl IntoIterator<Item = Update>,
        key: [u8; 16],
        rules: [u8; 32],
        root: Option<(TreeId, u64)>,
        snapshot: SnapshotId,
        started_ns: i64,
        carried: Vec<(Vec<u8>, StatRecord)>,
    ) {
        let carried: HashMap<Vec<u8>, Primed> = carried
            .into_iter()
            .filter(|(_, stat)| stat.is_racy(started_ns))
            .filter_map(|(path, stat)| {
                let boot = self.primed.get(&path)?.boot.clone();
                Some((
                    path,
                    Primed {
                        stat,
                        snapshot,
                        boot,
                    },
                ))
            })
            .collect();
        self.primed = carried;
        let mut old = std::mem::take(&mut self.dirs);
        let walked = walked.into_iter();
        let mut subtrees = self.subtrees.0.lock();
        if !partial {
            subtrees.clear();
        }
        // The subtrees forgotten because a record in them changed, counted again below.
        let mut recount: Vec<Vec<u8>> = Vec::new();
        let dirs = if partial {
            let mut gone: Vec<Vec<u8>> = Vec::new();
            for u in walked {
                let Update::Fresh(r, gone_here) = u else {
                    continue;
                };
                // Its subtree, and each one above it, holds something else now.
                let mut p = r.path.as_slice();
                loop {
                    if subtrees.remove(p).is_some() || p == r.path.as_slice() {
                        recount.push(p.to_vec());
                    }
                    match p.iter().rposition(|&b| b == b'/') {
                        Some(i) => p = &p[..i],
                        None if !p.is_empty() => p = b"",
                        None => break,
                    }
                }
                match gone_here {
                    Some(names) => {
                        gone.extend(names.iter().map(|n| cairn_store::relpath::join(&r.path, n)))
                    }
                    // A record the walk could not read: every recorded directory just
                    // beneath it that is not one now is taken as gone.
                    None if old.contains_key(&r.path) => {
                        let still =
                            |name: &[u8]| r.get(name).is_some_and(|n| n.kind == CachedKind::Dir);
                        for p in old.keys() {
                            if child_of(p, &r.path).is_some_and(|name| !still(name)) {
                                gone.push(p.clone());
                            }
                        }
                    }
                    None => {}
                }
                old.insert(r.path.clone(), Slot::Held(std::sync::Arc::new(r)));
            }
            if !gone.is_empty() {
                let in_gone = |p: &[u8]| gone.iter().any(|g| crate::watch::is_under(p, g));
                subtrees.retain(|p, _| !in_gone(p));
                old.retain(|p, _| !in_gone(p));
            }
            old
        } else {
            let mut dirs = HashMap::with_capacity(walked.size_hint().0);
            for u in walked {
                match u {
                    Update::Same(path) => {
                        if let Some(r) = old.remove(&path) {
                            dirs.insert(path, r);
                        }
                    }
                    Update::Fresh(r, _) => {
                        dirs.insert(r.path.clone(), Slot::Held(std::sync::Arc::new(r)));
                    }
                }
            }
            dirs
        };
        drop(subtrees);
        self.files = dirs.values().map(Slot::entries).sum();
        self.dirs = dirs;
        self.key = key;
        self.rules = rules;
        self.root = root;
        self.version = STATCACHE_VERSION;
        // Counted now, while the changed directories' records are in memory: the next
        // watched snapshot reuses the directories beside its changes without reading them
        // back from the file (after the cache is written, where a record read costs a
        // `pread`, a check and a decoding; a 10-file change of test262 spent a third of its
        // walk there). Deepest first, so each count finds those beneath it done.
        let depth = |p: &[u8]| p.iter().filter(|&&b| b == b'/').count();
        recount.sort_unstable_by(|a, b| depth(b).cmp(&depth(a)).then_with(|| a.cmp(b)));
        recount.dedup();
        for p in &recount {
            let _ = self.count_subtree(p);
        }
    }

    /// What the subtree at `path` holds, from the records: each directory's entries added to
    /// its subdirectories' totals, remembered until a record in it changes (so after a change
    /// only the changed directory and those above it are added up again). `None` (not
    /// remembered) when a directory in it has no record, or one that does not vouch for its
    /// listing.
    pub(crate) fn count_subtree(&self, path: &[u8]) -> Option<std::sync::Arc<Subtree>> {
        if let Some(t) = self.counted(path) {
            return Some(t);
        }
        let r = self.dir(path).filter(|r| r.stat.is_some())?;
        let mut t = Subtree {
            dirs: 1,
            ..Default::default()
        };
        for e in &r.entries {
            match e.kind {
                CachedKind::File => {
                    t.files += 1;
                    t.bytes += e.stat.size;
                }
                CachedKind::Symlink => t.symlinks += 1,
                CachedKind::Dir => {
                    let c = self.count_subtree(&cairn_store::relpath::join(path, &e.name))?;
                    t.files += c.files;
                    t.bytes += c.bytes;
                    t.symlinks += c.symlinks;
                    t.dirs += c.dirs;
                    t.kept.extend(c.kept.iter().cloned());
                }
                CachedKind::Excluded(reason) => t.kept.push(crate::walk::Kept {
                    path: cairn_store::relpath::join(path, &e.name),
                    reason,
                    is_dir: e.stat.mode & S_IFMT == S_IFDIR,
                }),
            }
        }
        let t = std::sync::Arc::new(t);
        self.subtrees.0.lock().insert(path.to_vec(), t.clone());
        Some(t)
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

    /// Whether the records came from a file of this format version (only such a file's header
    /// may be rewritten in place: an older one is shorter).
    pub fn is_current(&self) -> bool {
        self.version == STATCACHE_VERSION
    }

    /// The key of the body these records came from.
    pub fn key(&self) -> &[u8; 16] {
        &self.key
    }

    /// What the subtree at `path` holds if it was counted (see [`StatCache::count_subtree`])
    /// and no record in it changed since; never counts.
    pub(crate) fn counted(&self, path: &[u8]) -> Option<std::sync::Arc<Subtree>> {
        self.subtrees.0.lock().get(path).cloned()
    }

    /// The record of directory `path` (read from the cache's file when not in memory; `None`
    /// when there is none, or it cannot be read or decoded).
    pub fn dir(&self, path: &[u8]) -> Option<std::sync::Arc<DirRecord>> {
        self.record(path, self.dirs.get(path)?)
    }

    fn record(&self, path: &[u8], slot: &Slot) -> Option<std::sync::Arc<DirRecord>> {
        use std::os::unix::fs::FileExt;
        match slot {
            Slot::Held(r) => Some(r.clone()),
            Slot::Stored(x) => {
                let mut buf = vec![0; x.len as usize];
                self.source.as_ref()?.read_exact_at(&mut buf, x.at).ok()?;
                decode_record(&buf, path, x).map(std::sync::Arc::new)
            }
        }
    }

    /// The directories whose listing the cache does not vouch for (an entry was skipped, or
    /// a file has several links): a watched snapshot lists them every time, as a walk does.
    pub fn unvouched(&self) -> Vec<Vec<u8>> {
        self.dirs
            .iter()
            .filter(|(_, s)| !s.vouched())
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The trusted record for the file at `path` if `fresh` matches it and it is not racy.
    pub fn lookup(&self, path: &[u8], fresh: &StatRecord) -> Option<StatRecord> {
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        let d = self.dir(dir)?;
        let e = d.get(name)?;
        (e.kind == CachedKind::File && self.trusts(&e.stat, fresh)).then_some(e.stat)
    }

    /// Whether `cached` still describes the entry `fresh` was `lstat`ed from.
    pub fn trusts(&self, cached: &StatRecord, fresh: &StatRecord) -> bool {
        cached.matches(fresh) && !cached.is_racy(self.started_ns)
    }

    /// The record a restore made of the file at `path` (see [`Written`]), if `fresh` matches it.
    pub fn primed(&self, path: &[u8], fresh: &StatRecord) -> Option<&StatRecord> {
        self.primed
            .get(path)
            .map(|p| &p.stat)
            .filter(|s| s.matches(fresh))
    }

    /// Whether it holds any record a restore made.
    pub fn has_primed(&self) -> bool {
        !self.primed.is_empty()
    }

    /// Number of records restores made.
    pub fn primed_len(&self) -> usize {
        self.primed.len()
    }

    /// The snapshots the records restores made depend on.
    pub fn primed_snapshots(&self) -> Vec<SnapshotId> {
        let mut ids: Vec<SnapshotId> = self.primed.values().map(|p| p.snapshot).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Keeps only the records restores made in this boot of the machine whose snapshot `keep`
    /// accepts (one that exists, and with a remote one the remote holds).
    pub fn retain_primed(&mut self, mut keep: impl FnMut(&SnapshotId) -> bool) {
        let boot = boot_id();
        let mut kept: HashMap<SnapshotId, bool> = HashMap::new();
        self.primed.retain(|_, p| {
            Some(&*p.boot) == boot && *kept.entry(p.snapshot).or_insert_with(|| keep(&p.snapshot))
        });
    }

    /// Forgets every record a restore made (the next walk reads those files, as before
    /// version 4; benchmarks compare the two).
    pub fn clear_primed(&mut self) {
        self.primed.clear();
    }

    /// Adds the records of the files a restore wrote from the blobs of `snapshot`, each only if
    /// what the restore saw proves it ([`Written::proves`]), replacing any earlier record of the
    /// same path; returns how many it added. Nothing is added where the system gives no boot id.
    pub fn prime(
        &mut self,
        snapshot: SnapshotId,
        written: impl IntoIterator<Item = Written>,
    ) -> usize {
        let Some(boot) = boot_id() else { return 0 };
        let boot: std::sync::Arc<[u8]> = boot.into();
        let mut n = 0;
        for w in written {
            if !w.proves() {
                continue;
            }
            let stat = StatRecord {
                blob: w.blob,
                ..w.placed
            };
            let p = Primed {
                stat,
                snapshot,
                boot: boot.clone(),
            };
            self.primed.insert(w.path, p);
            n += 1;
        }
        n
    }

    /// Gives the records a new body key (before they are written as a new body).
    pub fn rekey(&mut self) {
        self.key = StatCacheFile::new_key(self.snapshot.as_ref(), self.started_ns);
        self.version = STATCACHE_VERSION;
    }

    /// The records restores made, grouped by snapshot and boot, as stored.
    fn primed_sets(&self) -> Vec<PrimedSet> {
        let mut sets: HashMap<(SnapshotId, &[u8]), Vec<PrimedFile>> = HashMap::new();
        for (path, p) in &self.primed {
            sets.entry((p.snapshot, &p.boot))
                .or_default()
                .push(PrimedFile {
                    path: path.clone(),
                    stat: p.stat,
                });
        }
        sets.into_iter()
            .map(|((snapshot, boot), mut files)| {
                files.sort_by(|a, b| a.path.cmp(&b.path));
                PrimedSet {
                    snapshot: snapshot.object(),
                    boot: boot.to_vec(),
                    files,
                }
            })
            .collect()
    }

    /// Number of directory records.
    pub fn dir_count(&self) -> usize {
        self.dirs.len()
    }

    /// The cache `shared` holds: itself when no one else holds it, else a copy that takes
    /// over its subtree totals (a writer thread still holding it does not use them).
    fn unshare(shared: std::sync::Arc<StatCache>) -> StatCache {
        std::sync::Arc::try_unwrap(shared).unwrap_or_else(|shared| {
            let copy = StatCache::clone(&shared);
            *copy.subtrees.0.lock() = std::mem::take(&mut *shared.subtrees.0.lock());
            copy
        })
    }

    /// Number of directory records held in memory (a walk's, or all of a file of an earlier
    /// version); the others are read from the cache's file when asked for.
    pub fn held(&self) -> usize {
        self.dirs
            .values()
            .filter(|s| matches!(s, Slot::Held(_)))
            .count()
    }

    /// Number of entry records.
    pub fn len(&self) -> usize {
        self.files
    }

    /// Whether the cache has no record.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }
}

/// A stat cache held in memory between the snapshots (and plans) one process takes of one
/// workspace, so that each does not read and decode the whole file again: before using it, a
/// snapshot reads the file's header only, and uses the records it holds when the header names
/// the same body (its key), with the header's snapshot and start time. Otherwise, or when the
/// memo holds another workspace's cache, the file is read as without a memo.
///
/// When a snapshot changed something, the memo also takes the cache's writing off the
/// snapshot's path: a background thread encodes and writes the file [`WRITE_DELAY`] after the
/// snapshot has returned (its manifest is durable by then; the cache only saves work). A
/// snapshot of the same workspace in the meantime takes the records from the memo and calls
/// that write off, since its own cache supersedes it: a long-lived process (the `cairn watch`
/// daemon, an agent's binding) taking a checkpoint every few seconds does not encode the whole
/// cache each time. Until then the file holds the cache before, which is as valid as any stale
/// cache (its header names the snapshot that confirmed it). Dropping the last handle writes a
/// pending cache at once, so a process that exits after a snapshot still leaves its cache;
/// [`CacheMemo::wait`] writes it on demand.
///
/// Cloning gives another handle on the same memo; `Default` is an empty one.
#[derive(Clone, Default)]
pub struct CacheMemo(std::sync::Arc<parking_lot::Mutex<Option<Held>>>);

/// How long a changed cache waits in memory before its background write starts (see
/// [`CacheMemo`]).
pub const WRITE_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

/// What a memo holds: the cache of the file at `path`, and the thread writing it, if any.
struct Held {
    path: PathBuf,
    cache: std::sync::Arc<StatCache>,
    writing: Option<Writer>,
    /// The temporary directory a pending write goes through.
    tmp: Option<PathBuf>,
}

/// The thread that writes a cache after [`WRITE_DELAY`], unless told otherwise: `true` on
/// its channel writes at once, `false` calls the write off. It returns whether it wrote, and
/// the cache read back from the file it wrote (see [`StatCache::save_settled`]).
struct Writer {
    thread: std::thread::JoinHandle<Wrote>,
    tell: std::sync::mpsc::Sender<bool>,
    /// Set by the thread once its delay is over and it writes.
    begun: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Held by a [`Writer`] while it writes and renames its file: the writes of one process land
/// in the order they began.
static WRITE_ORDER: parking_lot::Mutex<()> = parking_lot::const_mutex(());

/// What a [`Writer`] did.
enum Wrote {
    /// Called off: the file does not hold the cache.
    No,
    /// Written; the cache as the file now holds it, when it could be read back.
    Yes(Option<Box<StatCache>>),
}

impl Writer {
    /// Tells it to write now (`write`) or to call the write off if it has not begun, waits
    /// for it, and returns what it did.
    fn finish(self, write: bool) -> Wrote {
        // A writer already done has hung up: nothing to tell.
        let _ = self.tell.send(write);
        // A panic while writing only loses the file: the memo still holds the records.
        self.thread.join().unwrap_or(Wrote::No)
    }
}

impl Held {
    /// Has the pending write done now, and waits for it.
    fn wait(&mut self) {
        self.end(true);
    }

    /// Ends the pending write: done now (`write`), or called off if it has not begun. Returns
    /// whether the file holds this cache's body (written, or nothing was pending).
    fn end(&mut self, write: bool) -> bool {
        let Some(w) = self.writing.take() else {
            return true;
        };
        // A write under way that is to be called off is not waited for: a snapshot must not
        // wait while a large cache is written (a 500,000-file one takes a tenth of a second or
        // more). It is left to finish on its own (and finds the memo no longer holds its
        // cache); the snapshot's own cache is written after it.
        let begun = w.begun.load(std::sync::atomic::Ordering::Acquire);
        if !write && begun && !w.thread.is_finished() {
            return false;
        }
        match w.finish(write) {
            Wrote::No => false,
            Wrote::Yes(settled) => {
                if let Some(settled) = settled {
                    drop(self.settle(*settled));
                }
                true
            }
        }
    }

    /// Holds `settled`, the same cache read back from the file just written, in place of the
    /// one in memory, keeping the subtree totals counted so far; returns the one replaced.
    fn settle(&mut self, settled: StatCache) -> std::sync::Arc<StatCache> {
        let counted = std::mem::take(&mut *self.cache.subtrees.0.lock());
        *settled.subtrees.0.lock() = counted;
        std::mem::replace(&mut self.cache, std::sync::Arc::new(settled))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.wait();
    }
}

impl std::fmt::Debug for CacheMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self
            .0
            .lock()
            .as_ref()
            .map(|h| (h.path.clone(), h.cache.len()));
        f.debug_tuple("CacheMemo").field(&held).finish()
    }
}

impl CacheMemo {
    /// The cache at `path`: the memo's when its header names the body the memo holds (the memo
    /// is emptied: whoever takes it gives it back with [`CacheMemo::put`]), else loaded.
    pub fn load(&self, path: &Path) -> StatCache {
        let held = self.0.lock().take();
        if let Some(mut held) = held {
            let same = held.path == path;
            // Our own next snapshot supersedes a write not yet begun: it is called off.
            let written = held.end(!same);
            if same && !written {
                // The file does not hold these records, which are newer than what it holds:
                // they are used, and marked as from no file of this version, so the next
                // save writes them whole rather than confirm a header over another body.
                let shared = std::mem::take(&mut held.cache);
                let mut cache = StatCache::unshare(shared);
                cache.version = 0;
                cache.unwritten = held.tmp.take();
                return cache;
            }
            if same {
                if let Some(h) = read_header(path) {
                    if h.key == held.cache.key {
                        let shared = std::mem::take(&mut held.cache);
                        let mut cache = StatCache::unshare(shared);
                        cache.snapshot = h.snapshot;
                        cache.started_ns = h.started_ns;
                        cache.token = h.token;
                        cache.version = h.version;
                        return cache;
                    }
                }
            }
        }
        StatCache::load(path)
    }

    /// Keeps `cache`, the body of the file at `path` as it now stands. A cache read from no
    /// file (empty, its key all zero) is not kept: no header could ever name it.
    pub fn put(&self, path: &Path, mut cache: StatCache) {
        if cache.key == [0; 16] {
            return;
        }
        // Records whose write was called off and that come back unchanged (a scan's): their
        // write is scheduled again.
        if let Some(tmp) = cache.unwritten.take() {
            return self.put_and_write(&tmp, path, cache);
        }
        self.keep(Held {
            path: path.to_path_buf(),
            cache: std::sync::Arc::new(cache),
            writing: None,
            tmp: None,
        });
    }

    /// Keeps `cache` and writes it to `path` (through `tmp_dir`) on a background thread; where
    /// no thread can be started, writes it before returning.
    pub fn put_and_write(&self, tmp_dir: &Path, path: &Path, mut cache: StatCache) {
        cache.unwritten = None;
        let cache = std::sync::Arc::new(cache);
        let (shared, tmp, to) = (cache.clone(), tmp_dir.to_path_buf(), path.to_path_buf());
        let memo = std::sync::Arc::downgrade(&self.0);
        let (tell, told) = std::sync::mpsc::channel::<bool>();
        let begun = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = begun.clone();
        let writing = std::thread::Builder::new()
            .name("cairn-statcache".into())
            .spawn(move || {
                // Called off (false) before the delay ends: a newer cache supersedes this one.
                // Told to write (true), the delay over, or the memo gone: written.
                if let Ok(false) = told.recv_timeout(WRITE_DELAY) {
                    return Wrote::No;
                }
                // After any write this process left to finish on its own (see `Held::end`):
                // a newer cache is never renamed into place before an older one.
                let in_order = WRITE_ORDER.lock();
                // Called off while it waited for that one: superseded.
                if let Ok(false) = told.try_recv() {
                    return Wrote::No;
                }
                started.store(true, std::sync::atomic::Ordering::Release);
                let written = shared.save_settled(&tmp, &to);
                drop(in_order);
                let Ok(settled) = written else {
                    return Wrote::Yes(None);
                };
                Wrote::Yes(CacheMemo::install(&memo, &shared, settled).map(Box::new))
            });
        let writing = match writing {
            Ok(thread) => Some(Writer {
                thread,
                tell,
                begun,
            }),
            Err(_) => {
                let _ = cache.save(tmp_dir, path);
                None
            }
        };
        self.keep(Held {
            path: path.to_path_buf(),
            cache,
            writing,
            tmp: Some(tmp_dir.to_path_buf()),
        });
    }

    /// Puts `settled` (the cache read back from the file a writer thread just wrote) in place
    /// of `written` in the memo, when the memo still holds it and is waiting on this thread:
    /// the records in memory are dropped as soon as the file holds them, not at the next
    /// snapshot, and the thread is detached (its work is done). Otherwise gives `settled`
    /// back, for whoever waits on the thread.
    fn install(
        memo: &std::sync::Weak<parking_lot::Mutex<Option<Held>>>,
        written: &std::sync::Arc<StatCache>,
        settled: StatCache,
    ) -> Option<StatCache> {
        let Some(memo) = memo.upgrade() else {
            return Some(settled);
        };
        let mut held = memo.lock();
        let me = std::thread::current().id();
        let Some(h) = held.as_mut().filter(|h| {
            std::sync::Arc::ptr_eq(&h.cache, written)
                && h.writing
                    .as_ref()
                    .is_some_and(|w| w.thread.thread().id() == me)
        }) else {
            return Some(settled);
        };
        let detached = h.writing.take();
        let replaced = h.settle(settled);
        drop(held);
        // Outside the lock: the records, and this thread's own handle (never joined).
        drop((replaced, detached));
        None
    }

    fn keep(&self, held: Held) {
        // The one replaced (its write finished: it was waited for when taken) drops outside
        // the lock.
        let old = self.0.lock().replace(held);
        drop(old);
    }

    /// Whether the cache the last snapshot left is still waiting for its write, or being
    /// written.
    pub fn writing(&self) -> bool {
        self.0
            .lock()
            .as_ref()
            .and_then(|h| h.writing.as_ref())
            .is_some_and(|w| !w.thread.is_finished())
    }

    /// Whether the cache the last snapshot left is being written now (its delay is over): a
    /// snapshot that takes the cache meanwhile copies its records (the writer holds them) and
    /// has them written again.
    pub fn write_under_way(&self) -> bool {
        self.0
            .lock()
            .as_ref()
            .and_then(|h| h.writing.as_ref())
            .is_some_and(|w| {
                w.begun.load(std::sync::atomic::Ordering::Acquire) && !w.thread.is_finished()
            })
    }

    /// Waits until the cache the last snapshot left is written to its file.
    pub fn wait(&self) {
        let writing = self.0.lock().as_mut().and_then(|h| h.writing.take());
        let Some(Wrote::Yes(Some(settled))) = writing.map(|w| w.finish(true)) else {
            return;
        };
        // Still the cache it was written from (nothing replaced it meanwhile): the records
        // read back stand in for it.
        let mut held = self.0.lock();
        if let Some(h) = held.as_mut().filter(|h| h.writing.is_none()) {
            if h.cache.key == settled.key && h.cache.snapshot == settled.snapshot {
                drop(h.settle(*settled));
            }
        }
    }

    /// Forgets what it holds (after waiting for its write).
    pub fn clear(&self) {
        let old = self.0.lock().take();
        drop(old);
    }
}
