//! `cairn-snapshot`: takes snapshots of a workspace into a [`cairn_store::Store`], in time
//! proportional to what changed.
//!
//! A snapshot walks the workspace in parallel (rayon), never following a symlink, applies the
//! excludes (see [`exclude`] for the precedence), reads only the files the stat cache does not
//! vouch for, and builds trees bottom-up. Objects are durable before the manifest names them;
//! a snapshot that fails or is cancelled leaves no manifest, no stat-cache change and no
//! temporary file.
//!
//! ```
//! use cairn_snapshot::{snapshot, Context, Options};
//! use cairn_store::{Store, StoreOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("a.txt"), "hello\n")?;
//! let store = Store::open(dir.path().join(".cairn"), StoreOptions::default())?;
//! let snap = snapshot(&store, dir.path(), "demo", &Options::default(), Context::default())?;
//! assert_eq!(snap.stats.files, 1);
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod ahead;
mod cache;
pub mod diff;
mod drive;
pub mod error;
pub mod exclude;
mod options;
pub mod statcache;
mod take;
mod walk;
pub mod watch;

pub use ahead::{walk_ahead, Ahead};
pub use cache::{prime, restore_priming, set_restore_priming};
pub use options::{Context, Options, Progress, ProgressFn, TakenFn};
pub use take::{prepare, scan, snapshot, Prepared};

pub use diff::{diff_snapshots, diff_trees, diff_workspace, Change, ChangeKind, EntryInfo};
pub use error::{Error, Result};
pub use exclude::{ExcludeReason, Excludes, IgnoreChain, DEFAULT_EXCLUDES};
pub use statcache::{CacheMemo, StatCache, StatRecord};
#[doc(hidden)]
pub use walk::set_read_hook;
pub use walk::{Kept, MAX_READS};
pub use watch::{ChangeSource, Changes, Scope, Token, WatchOptions, WatchStatus, Watcher};

use cache::load_cache;
use cairn_store::{
    CancelToken, Manifest, ObjectId, OperationKind, Skipped, SnapshotId, Stats, Store, Tree, TreeId,
};
use drive::{ask, walk, WalkOutput};
use statcache::Update;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use take::{snapshot_clock, take, Finish};
use walk::{Counters, Rules, Sink, Walker};

pub use cairn_store::{CaptureSettings, DEFAULT_MAX_FILE_BYTES};

/// How much of the tree a snapshot looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Walked {
    /// Every directory (no watcher, or one that could not vouch for the stat cache).
    Full,
    /// Only the directories a watcher said changed.
    Partial,
    /// Nothing: the watcher said nothing changed.
    None,
}

/// What a snapshot walked, and why (see [`watch`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WalkInfo {
    /// How much of the tree it looked at.
    pub walked: Walked,
    /// Why it walked what it did, when a watcher was asked and the walk was not the least
    /// it could be (an overflow, a watch limit, a restarted watcher, no earlier token, ...).
    pub reason: Option<String>,
    /// Directories it listed, `lstat`ing every entry.
    pub listed: u64,
    /// Directories of which it `lstat`ed only the entries the watcher named as changed (every
    /// other entry's record taken from the stat cache).
    #[serde(default)]
    pub named: u64,
    /// Set when the walk was done before the snapshot was asked for (by the `cairn watch`
    /// daemon once the workspace was quiet, see [`Ahead`]) and nothing changed since: how
    /// many milliseconds before. Its other figures are that walk's.
    #[serde(default)]
    pub ahead_ms: Option<u64>,
}

/// A snapshot taken (it derives serde: the `cairn watch` daemon answers with it as it is).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Its id.
    pub id: SnapshotId,
    /// Its root tree.
    pub root: TreeId,
    /// What it cost.
    pub stats: Stats,
    /// What it left out and why.
    pub skipped: Vec<Skipped>,
    /// Entries left in place by excludes (not recorded in the manifest).
    pub kept: Vec<Kept>,
    /// Its manifest.
    pub manifest: Manifest,
    /// What it walked, and why.
    pub walk: WalkInfo,
}

/// A walk of the live workspace that stores nothing: contents are hashed only and trees kept in
/// memory. Restore plans and live diffs are computed from it.
#[derive(Debug, Clone)]
pub struct Scan {
    /// The root tree the workspace would have as a snapshot.
    pub root: TreeId,
    /// Every tree of the walk, by id.
    pub trees: HashMap<TreeId, Tree>,
    /// What a snapshot would skip.
    pub skipped: Vec<Skipped>,
    /// Entries excluded or special, left in place.
    pub kept: Vec<Kept>,
    /// What the walk cost (`stored_*` are zero).
    pub stats: Stats,
}
