//! What a snapshot is asked for: its plain [`Options`], and the [`Context`] of one call
//! (what watches and steers it, and the resources it uses).

use super::*;

/// Progress of a walk, as reported to a progress callback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// Files recorded so far.
    pub files: u64,
    /// Directories entered so far.
    pub dirs: u64,
    /// Files read so far.
    pub hashed: u64,
    /// Bytes read so far.
    pub hashed_bytes: u64,
}

/// A progress callback: called on the calling thread only, once before the walk starts (all
/// counts zero), then about every 50 ms while it runs, and once at its end; returning `false`
/// stops the walk with `ABORTED_BY_CALLBACK`.
pub type ProgressFn<'a> = &'a mut dyn FnMut(&Progress) -> bool;

/// A callback given the snapshot as soon as it is durable (see [`Context::taken`]).
pub type TakenFn<'a> = &'a mut dyn FnMut(&Snapshot);

/// How to take a snapshot: what it captures and what it records, as plain data (it derives
/// serde, so the `cairn watch` daemon's protocol carries it as it is). `Default` is the
/// safest choice. What one call is watched and steered with, and the resources it uses (the
/// stat cache kept in memory, a watcher), are its [`Context`], apart, as gitoxide's
/// `gix-dir` keeps its `Context` apart from its `Options`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Options {
    /// What the snapshot captures (recorded in its manifest); its exclude globs add up with
    /// the workspace's.
    pub capture: CaptureSettings,
    /// A label for people (or the entry id a checkpoint is taken for).
    pub label: Option<String>,
    /// Caller metadata: a JSON object (in a format that is not human-readable, such as the
    /// watcher's postcard, carried as its JSON text).
    #[serde(with = "json_object")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Mark the snapshot protected from retention.
    pub protect: bool,
    /// Trust the stat cache. Off: every file is read and hashed again.
    pub use_stat_cache: bool,
    /// Files Cairn itself keeps that may lie beneath the root (a thread database named with
    /// `--threads-db`): each, with its companions (SQLite's `-wal`, `-shm`, `-journal`, and
    /// the `-holders` directory of the thread database's handles), is left
    /// out wherever the walk meets it, as the store is (excluded by default, so a plan never
    /// writes or deletes it). A path outside the root is ignored.
    #[serde(with = "cairn_store::relpath::os_paths")]
    pub own_files: Vec<PathBuf>,
    /// Store the objects this snapshot packs uncompressed, for a snapshot that must answer
    /// soon (the `cairn watch` daemon's, asked for right after a change): compressing the
    /// trees of a few large directories and of every directory above them was a third of
    /// such a snapshot's work, and the changed files half of what each of them cost. A
    /// merge of small packs compresses them later ([`cairn_store::Store::merge_small_packs`]);
    /// a file large enough for a file of its own is compressed as always.
    pub defer_compression: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            capture: CaptureSettings::default(),
            label: None,
            metadata: serde_json::Map::new(),
            protect: false,
            use_stat_cache: true,
            own_files: Vec::new(),
            defer_compression: false,
        }
    }
}

/// [`Options::metadata`] through serde: the JSON object itself in a human-readable format,
/// its JSON text in another (postcard cannot carry a `serde_json::Value`, which asks the
/// format what comes next).
mod json_object {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    type Object = serde_json::Map<String, serde_json::Value>;

    pub(super) fn serialize<S: Serializer>(map: &Object, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            map.serialize(s)
        } else {
            serde_json::Value::Object(map.clone())
                .to_string()
                .serialize(s)
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Object, D::Error> {
        if d.is_human_readable() {
            Object::deserialize(d)
        } else {
            let text = String::deserialize(d)?;
            serde_json::from_str(&text).map_err(serde::de::Error::custom)
        }
    }
}

/// What one walk (a snapshot, a scan, the walk of a restore) is watched and steered with,
/// and the resources it uses, apart from what it does (its plain [`Options`]), as gitoxide's
/// `gix-dir` keeps its `Context` apart from its `Options`. `Default`: no cancel token, no
/// progress, rayon's global pool, the stat cache read from its file, no watcher.
#[derive(Default)]
pub struct Context<'a> {
    /// A token another thread may cancel (`CANCELLED`).
    pub cancel: Option<CancelToken>,
    /// A progress callback, run on the calling thread (see [`ProgressFn`]).
    pub progress: Option<ProgressFn<'a>>,
    /// Worker threads; `None` uses rayon's global pool (one per core).
    pub threads: Option<usize>,
    /// Called once, on the calling thread, with the snapshot [`snapshot`] took, as soon as
    /// its manifest is durable and before the stat cache is brought up to date for the next
    /// one (the changed directories' records taken in, their subtrees counted again, the
    /// write to the file scheduled): a caller that hands the snapshot on (the `cairn watch`
    /// daemon, to the process that asked) does so that much sooner. [`snapshot`] still
    /// returns the snapshot afterwards.
    pub taken: Option<TakenFn<'a>>,
    /// Where this process keeps the workspace's stat cache between snapshots, so that one does
    /// not read and decode the whole file when the file still holds what the memo does (see
    /// [`CacheMemo`]). `None` reads the file every time. A `Workspace` sets its own.
    pub memo: Option<CacheMemo>,
    /// A watcher of the workspace (see [`watch`]): the snapshot asks it what changed since
    /// the stat cache was confirmed and looks only there; without one, or when it cannot
    /// say, the snapshot walks the whole tree ([`Snapshot::walk`] says which and why).
    pub watch: Option<std::sync::Arc<dyn ChangeSource>>,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.is_some())
            .field("threads", &self.threads)
            .field("taken", &self.taken.is_some())
            .field("memo", &self.memo.is_some())
            .field("watch", &self.watch.is_some())
            .finish()
    }
}

impl Context<'_> {
    /// A context with only the cancel token `cancel` (no progress, the global pool).
    pub fn with_cancel(cancel: Option<CancelToken>) -> Self {
        Context {
            cancel,
            ..Context::default()
        }
    }
}
