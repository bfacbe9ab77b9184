//! Manifests: one per snapshot, naming its root tree and describing how it was taken.
//!
//! A manifest file is `"CAIRNMAN"`, a little-endian `u32` format version, then the
//! [`Manifest`] encoded with `postcard`. A snapshot's id is the SHA-256 of the whole file.

use crate::error::{Error, Result};
use crate::id::{ObjectId, SnapshotId, TreeId};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Magic at the start of a manifest file.
pub const MANIFEST_MAGIC: &[u8; 8] = b"CAIRNMAN";
/// The manifest format version this build writes and reads.
pub const MANIFEST_VERSION: u32 = 1;

/// Why a path was left out of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// Larger than the snapshot's `max_file_bytes`.
    TooLarge,
    /// Still changing after five reads.
    Changing,
    /// A file or directory that could not be read.
    Unreadable,
    /// A file with more than one hard link, with `refuse_hard_links`.
    HardLink,
    /// A file a restore staged (`.cairn-tmp-<journal>-<n>`): Cairn's own, never the user's;
    /// `cairn recover` removes those no restore of the workspace is finishing.
    Staged,
}

impl SkipReason {
    /// The stable name (`"too-large"`, `"changing"`, `"unreadable"`, `"hard-link"`,
    /// `"staged"`).
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::TooLarge => "too-large",
            SkipReason::Changing => "changing",
            SkipReason::Unreadable => "unreadable",
            SkipReason::HardLink => "hard-link",
            SkipReason::Staged => "staged",
        }
    }
}

/// A path a snapshot left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The path relative to the workspace root, as raw bytes.
    pub path: Vec<u8>,
    /// Why it was left out.
    pub reason: SkipReason,
    /// Whether the path is a directory (everything under it is left alone by restores).
    pub is_dir: bool,
}

/// What taking a snapshot cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    /// Files recorded.
    pub files: u64,
    /// Directories recorded (the root included).
    pub dirs: u64,
    /// Symlinks recorded.
    pub symlinks: u64,
    /// Bytes of all files recorded.
    pub bytes: u64,
    /// Files read and hashed.
    pub hashed: u64,
    /// Files taken from the stat cache without being read.
    pub reused: u64,
    /// New bytes written to the store (after compression).
    pub stored_bytes: u64,
    /// New objects written to the store.
    pub stored_objects: u64,
    /// Wall time, in milliseconds.
    pub duration_ms: u64,
}

/// The default [`CaptureSettings::max_file_bytes`]: 10 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 << 20;

/// The capture settings a snapshot was taken with; a restore of it uses the same. The one
/// owner of what a snapshot captures: `cairn_snapshot::Options`, the workspace's options and
/// the C ABI's option documents all embed it, so a new setting is a field here (recorded in
/// the manifest, and seen by the stat cache's `rules_fingerprint`). `Default` is the safest
/// choice: no globs, files up to 10 MiB, ignore files honoured, hard links taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CaptureSettings {
    /// Exclude globs, the workspace's and the call's together (defaults not included).
    pub excludes: Vec<String>,
    /// Files larger than this were skipped.
    pub max_file_bytes: u64,
    /// Whether `.gitignore` and `.cairnignore` files were honoured.
    pub gitignore: bool,
    /// Whether files with several hard links were refused.
    pub refuse_hard_links: bool,
}

impl Default for CaptureSettings {
    fn default() -> Self {
        CaptureSettings {
            excludes: Vec::new(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            gitignore: true,
            refuse_hard_links: false,
        }
    }
}

/// One snapshot's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The root tree.
    pub root: TreeId,
    /// A label for people, or the id of the entry a checkpoint was taken for.
    pub label: Option<String>,
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// The workspace it was taken of.
    pub workspace_id: String,
    /// The workspace's root, as raw bytes.
    pub workspace_root: Vec<u8>,
    /// Caller metadata: a JSON object, as text.
    pub metadata: String,
    /// How it was taken.
    pub capture: CaptureSettings,
    /// What was left out, and why.
    pub skipped: Vec<Skipped>,
    /// What it cost.
    pub stats: Stats,
    /// Protected snapshots are never dropped by retention.
    pub protected: bool,
}

impl Manifest {
    /// The file bytes of this manifest.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(MANIFEST_MAGIC);
        out.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
        let body = postcard::to_stdvec(self)
            .map_err(|e| Error::InvalidArgument(format!("cannot encode manifest: {e}")))?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The id these bytes give a snapshot.
    pub fn id_of(bytes: &[u8]) -> SnapshotId {
        SnapshotId(ObjectId::of(bytes))
    }

    /// Decodes and checks manifest file bytes. `expected` is checked against their hash.
    pub fn decode(bytes: &[u8], expected: Option<&SnapshotId>, origin: &Path) -> Result<Self> {
        let what = match expected {
            Some(id) => format!("manifest {}", id.short()),
            None => "manifest".into(),
        };
        let bad = |d: String| Error::corrupt(what.clone(), origin, d);
        if let Some(id) = expected {
            if Manifest::id_of(bytes) != *id {
                return Err(bad("its bytes do not hash to its name".into()));
            }
        }
        if bytes.len() < 12 || &bytes[..8] != MANIFEST_MAGIC {
            return Err(bad("bad magic".into()));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != MANIFEST_VERSION {
            return Err(Error::UnsupportedVersion {
                path: origin.to_path_buf(),
                found: version,
                supported: MANIFEST_VERSION,
            });
        }
        let (m, rest): (Manifest, &[u8]) = postcard::take_from_bytes(&bytes[12..])
            .map_err(|e| bad(format!("does not decode: {e}")))?;
        if !rest.is_empty() {
            return Err(bad(format!("{} trailing bytes", rest.len())));
        }
        if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&m.metadata).is_err()
        {
            return Err(bad("its metadata is not a JSON object".into()));
        }
        Ok(m)
    }
}
