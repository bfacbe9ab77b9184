//! The stat cache: for each file of a workspace's last snapshot, the `lstat` fields that say
//! it has not changed, and its blob id. A file whose record matches is not read again.
//!
//! File format: `"CAIRNSTC"`, a little-endian `u32` version, then a postcard-encoded
//! [`StatCacheFile`]. It is written atomically after the snapshot's manifest, and only trusted
//! while that snapshot exists (a collection may have removed the blobs of a deleted one).
//!
//! **Racy timestamps.** A file changed within [`RACY_WINDOW_NS`] before the snapshot that
//! recorded it started may change again without its times moving (file-system clocks are
//! coarse), so such a record is never trusted: the file is read again.

use cairn_store::{ObjectId, SnapshotId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Magic at the start of a stat cache file.
pub const STATCACHE_MAGIC: &[u8; 8] = b"CAIRNSTC";
/// The stat cache format version.
pub const STATCACHE_VERSION: u32 = 1;
/// Records of files changed this close before their snapshot started are not trusted.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// What identifies one unchanged file.
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
    /// The blob of its content.
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

/// The stat cache as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatCacheFile {
    /// The snapshot it was recorded with.
    pub snapshot: Option<SnapshotId>,
    /// When that snapshot started, nanoseconds since the epoch.
    pub started_ns: i64,
    /// One record per file, by path relative to the root.
    pub entries: Vec<(Vec<u8>, StatRecord)>,
}

/// A loaded stat cache.
#[derive(Debug, Default)]
pub struct StatCache {
    /// The snapshot it was recorded with.
    pub snapshot: Option<SnapshotId>,
    /// When that snapshot started.
    pub started_ns: i64,
    map: HashMap<Vec<u8>, StatRecord>,
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
        if bytes.len() < 12 || &bytes[..8] != STATCACHE_MAGIC {
            return None;
        }
        if u32::from_le_bytes(bytes[8..12].try_into().ok()?) != STATCACHE_VERSION {
            return None;
        }
        let f: StatCacheFile = postcard::from_bytes(&bytes[12..]).ok()?;
        Some(StatCache {
            snapshot: f.snapshot,
            started_ns: f.started_ns,
            map: f.entries.into_iter().collect(),
        })
    }

    /// Encodes a cache file.
    pub fn encode(file: &StatCacheFile) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + file.entries.len() * 96);
        out.extend_from_slice(STATCACHE_MAGIC);
        out.extend_from_slice(&STATCACHE_VERSION.to_le_bytes());
        out.extend_from_slice(&postcard::to_stdvec(file).expect("a stat cache always encodes"));
        out
    }

    /// The trusted record for `path` if `fresh` matches it and it is not racy.
    pub fn lookup(&self, path: &[u8], fresh: &StatRecord) -> Option<&StatRecord> {
        let r = self.map.get(path)?;
        (r.matches(fresh) && !r.is_racy(self.started_ns)).then_some(r)
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the cache has no record.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
