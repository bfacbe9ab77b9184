//! The records the stat cache keeps: what each entry of a directory was, with its `lstat`
//! fields, and the files restores wrote.

use crate::exclude::ExcludeReason;
use cairn_store::{ObjectId, SnapshotId};
use serde::{Deserialize, Serialize};

/// Records of files changed this close before their snapshot started are not trusted.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

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
            dev: cairn_store::fsutil::stat_dev(st),
            ino: st.st_ino,
            mode: cairn_store::fsutil::stat_mode(st),
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
pub(super) mod id_bytes {
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

pub(super) const S_IFMT: u32 = 0o170000;
pub(super) const S_IFDIR: u32 = 0o040000;
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
pub(super) struct Primed {
    pub(super) stat: StatRecord,
    /// Shared by every record of its set (issue 56: 8 bytes a record, not 48; a full restore
    /// of 500,000 files holds a record for each).
    pub(super) origin: std::sync::Arc<Origin>,
}

/// Where records restores made come from: the snapshot that holds their blobs and the boot of
/// the machine they were written in (a [`PrimedSet`]'s).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Origin {
    pub(super) snapshot: SnapshotId,
    pub(super) boot: Box<[u8]>,
}
