//! The stat cache: for each directory of a workspace's last snapshot, what each of its entries
//! was (a file with its blob, a link, a directory with its tree, or an entry left out and why)
//! and the `lstat` fields that say it has not changed since. A file whose record matches is not
//! read again, and a directory whose entries all match keeps its tree id without the tree being
//! built, encoded and hashed again: a snapshot with nothing changed costs one `lstat` per entry.
//!
//! File format (version 2): `"CAIRNSTC"`, a little-endian `u32` version, a fixed header of
//! [`HEADER_LEN`] bytes (the snapshot the records were last confirmed by, when it started, and
//! a checksum of those fields), then a postcard-encoded [`StatCacheBody`]. The body is written
//! to a temporary file and renamed over the old one after the snapshot's manifest; when a
//! snapshot changed nothing, only the header is rewritten in place. Neither is synced: the
//! cache only saves work, a torn or stale header fails its checksum or names an older snapshot
//! (whose earlier start time is the stricter one for the racy rule), and the cache is only
//! trusted while the snapshot it names exists (a collection may have removed the blobs of a
//! deleted one).
//!
//! **Racy timestamps.** A file changed within [`RACY_WINDOW_NS`] before the snapshot that
//! recorded it started may change again without its times moving (file-system clocks are
//! coarse), so such a record is never trusted: the file is read again.

use crate::exclude::ExcludeReason;
use cairn_store::{Hasher, ObjectId, SnapshotId, TreeId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Magic at the start of a stat cache file.
pub const STATCACHE_MAGIC: &[u8; 8] = b"CAIRNSTC";
/// The stat cache format version.
pub const STATCACHE_VERSION: u32 = 2;
/// Records of files changed this close before their snapshot started are not trusted.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;
/// Length of the fixed header after the magic and version: a flag byte, a snapshot id, the
/// start time, and the first 8 bytes of the SHA-256 of those.
pub const HEADER_LEN: usize = 1 + 32 + 8 + 8;
const BODY_START: usize = 12 + HEADER_LEN;

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
    pub blob: ObjectId,
}

impl StatRecord {
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

/// One entry of a directory as the last snapshot saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedEntry {
    /// The entry's name, raw bytes.
    pub name: Vec<u8>,
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
    pub path: Vec<u8>,
    /// The directory's own `lstat` when its entries were listed: while it matches (and is not
    /// racy), the entries are the ones below and the directory is not listed again.
    pub stat: Option<StatRecord>,
    /// Its entries, sorted by name.
    pub entries: Vec<CachedEntry>,
}

impl DirRecord {
    /// The entry named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&CachedEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// The part of the cache rewritten only when something changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatCacheBody {
    /// A fingerprint of the capture rules the exclusion decisions were made under (see
    /// [`rules_fingerprint`]); all zero when no decision may be reused.
    pub rules: [u8; 32],
    /// The root's tree and total size, when the whole tree was recorded.
    pub root: Option<(ObjectId, u64)>,
    /// One record per directory walked.
    pub dirs: Vec<DirRecord>,
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
                name,
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
                rules: [0; 32],
                root: None,
                dirs,
            },
        }
    }
}

/// The fingerprint of capture rules that decide what is left out: the exclude globs and
/// whether ignore files count. Never all zero.
pub fn rules_fingerprint(excludes: &[String], gitignore: bool) -> [u8; 32] {
    let mut h = Hasher::new();
    h.update(b"cairn capture rules v1\0");
    h.update(&[u8::from(gitignore)]);
    for e in excludes {
        h.update(&(e.len() as u64).to_le_bytes());
        h.update(e.as_bytes());
    }
    h.finish().0
}

/// A loaded stat cache.
#[derive(Debug, Default)]
pub struct StatCache {
    /// The snapshot its records were last confirmed by.
    pub snapshot: Option<SnapshotId>,
    /// When that snapshot started.
    pub started_ns: i64,
    /// The capture rules fingerprint the records were made under.
    pub rules: [u8; 32],
    /// The root's tree and size.
    pub root: Option<(TreeId, u64)>,
    dirs: HashMap<Vec<u8>, DirRecord>,
    files: usize,
}

fn header(snapshot: Option<&SnapshotId>, started_ns: i64) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    if let Some(id) = snapshot {
        out[0] = 1;
        out[1..33].copy_from_slice(&id.object().0);
    }
    out[33..41].copy_from_slice(&started_ns.to_le_bytes());
    let mut h = Hasher::new();
    h.update(&out[..41]);
    out[41..49].copy_from_slice(&h.finish().0[..8]);
    out
}

fn parse_header(bytes: &[u8]) -> Option<(Option<SnapshotId>, i64)> {
    let hdr = bytes.get(12..BODY_START)?;
    let mut check = Hasher::new();
    check.update(&hdr[..41]);
    if check.finish().0[..8] != hdr[41..49] {
        return None;
    }
    let snapshot = match hdr[0] {
        0 => None,
        1 => Some(SnapshotId::from(ObjectId(hdr[1..33].try_into().ok()?))),
        _ => return None,
    };
    Some((snapshot, i64::from_le_bytes(hdr[33..41].try_into().ok()?)))
}

impl StatCache {
    /// The path of a workspace's stat cache in the store.
    pub fn path(store: &cairn_store::Store, workspace_id: &str) -> cairn_store::Result<PathBuf> {
        Ok(store.workspace_dir(workspace_id)?.join("statcache"))
    }

    /// Loads the cache at `path`. A missing, unreadable or undecodable cache is empty: the
    /// cache only saves work, it never decides content.
    pub fn load(path: &Path) -> StatCache {
        let Ok(bytes) = std::fs::read(path) else {
            return StatCache::default();
        };
        Self::decode(&bytes).unwrap_or_default()
    }

    /// Decodes cache bytes.
    pub fn decode(bytes: &[u8]) -> Option<StatCache> {
        if bytes.len() < BODY_START || &bytes[..8] != STATCACHE_MAGIC {
            return None;
        }
        if u32::from_le_bytes(bytes[8..12].try_into().ok()?) != STATCACHE_VERSION {
            return None;
        }
        let (snapshot, started_ns) = parse_header(bytes)?;
        let body: StatCacheBody = postcard::from_bytes(&bytes[BODY_START..]).ok()?;
        let files = body.dirs.iter().map(|d| d.entries.len()).sum();
        Some(StatCache {
            snapshot,
            started_ns,
            rules: body.rules,
            root: body.root.map(|(id, size)| (TreeId::from(id), size)),
            dirs: body.dirs.into_iter().map(|d| (d.path.clone(), d)).collect(),
            files,
        })
    }

    /// Encodes a cache file.
    pub fn encode(file: &StatCacheFile) -> Vec<u8> {
        let body = postcard::to_stdvec(&file.body).expect("a stat cache always encodes");
        let mut out = Vec::with_capacity(BODY_START + body.len());
        out.extend_from_slice(STATCACHE_MAGIC);
        out.extend_from_slice(&STATCACHE_VERSION.to_le_bytes());
        out.extend_from_slice(&header(file.snapshot.as_ref(), file.started_ns));
        out.extend_from_slice(&body);
        out
    }

    /// Writes `file` to `path` through a temporary file in `tmp_dir` renamed into place, without
    /// syncing (see the module documentation).
    pub fn save(tmp_dir: &Path, path: &Path, file: &StatCacheFile) -> std::io::Result<()> {
        // Named `*.tmp` so that a collection removes one a crash leaves behind.
        let mut tmp = tempfile::Builder::new()
            .prefix("statcache-")
            .suffix(".tmp")
            .tempfile_in(tmp_dir)?;
        tmp.write_all(&Self::encode(file))?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Rewrites only the header of the cache at `path` in place: its records were all
    /// confirmed, unchanged, by `snapshot`, which started at `started_ns`.
    pub fn confirm(path: &Path, snapshot: &SnapshotId, started_ns: i64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.write_all_at(&header(Some(snapshot), started_ns), 12)
    }

    /// The record of directory `path`.
    pub fn dir(&self, path: &[u8]) -> Option<&DirRecord> {
        self.dirs.get(path)
    }

    /// Takes the record of directory `path` out of the cache.
    pub fn take_dir(&mut self, path: &[u8]) -> Option<DirRecord> {
        self.dirs.remove(path)
    }

    /// The trusted record for the file at `path` if `fresh` matches it and it is not racy.
    pub fn lookup(&self, path: &[u8], fresh: &StatRecord) -> Option<&StatRecord> {
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        let e = self.dirs.get(dir)?.get(name)?;
        (e.kind == CachedKind::File && self.trusts(&e.stat, fresh)).then_some(&e.stat)
    }

    /// Whether `cached` still describes the entry `fresh` was `lstat`ed from.
    pub fn trusts(&self, cached: &StatRecord, fresh: &StatRecord) -> bool {
        cached.matches(fresh) && !cached.is_racy(self.started_ns)
    }

    /// Number of directory records.
    pub fn dir_count(&self) -> usize {
        self.dirs.len()
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
