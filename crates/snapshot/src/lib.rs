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

pub mod diff;
pub mod error;
pub mod exclude;
pub mod statcache;
mod walk;
pub mod watch;

pub use diff::{diff_snapshots, diff_trees, diff_workspace, Change, ChangeKind, EntryInfo};
pub use error::{Error, Result};
pub use exclude::{ExcludeReason, Excludes, IgnoreChain, DEFAULT_EXCLUDES};
pub use statcache::{CacheMemo, StatCache, StatRecord};
#[doc(hidden)]
pub use walk::set_read_hook;
pub use walk::{Kept, MAX_READS};
pub use watch::{ChangeSource, Changes, Scope, Token, WatchOptions, WatchStatus, Watcher};

use cairn_store::{
    CancelToken, Manifest, ObjectId, OperationKind, Skipped, SnapshotId, Stats, Store, Tree, TreeId,
};
use statcache::Update;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use walk::{Counters, Rules, Sink, Walker};

pub use cairn_store::{CaptureSettings, DEFAULT_MAX_FILE_BYTES};

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

struct WalkOutput {
    root: TreeId,
    root_size: u64,
    skipped: Vec<Skipped>,
    kept: Vec<Kept>,
    dirs: Vec<Update>,
    trees: Option<HashMap<TreeId, Tree>>,
    stats: Stats,
    /// Files taken from the records restores made.
    primed_used: Vec<(Vec<u8>, StatRecord)>,
    /// What it walked, and why.
    walk: WalkInfo,
    /// The watcher's token to confirm the cache with, when one was asked.
    token: Option<Token>,
}

/// The paths beneath `root` of `own` files and their SQLite companions, relative to the root.
fn own_paths(root: &Path, own: &[PathBuf]) -> std::collections::HashSet<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = std::collections::HashSet::new();
    if own.is_empty() {
        return out;
    }
    let Ok(root) = std::fs::canonicalize(root) else {
        return out;
    };
    for file in own {
        let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else {
            continue;
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let Ok(parent) = std::fs::canonicalize(parent) else {
            continue;
        };
        let Ok(rel) = parent.strip_prefix(&root) else {
            continue;
        };
        let mut path = rel.as_os_str().as_bytes().to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name.as_bytes());
        for suffix in ["", "-wal", "-shm", "-journal", "-holders"] {
            let mut p = path.clone();
            p.extend_from_slice(suffix.as_bytes());
            out.insert(p);
        }
    }
    out
}

/// What the watcher answered, for one walk.
struct Asked {
    token: Option<Token>,
    partial: Option<watch::Partial>,
    reason: Option<String>,
}

/// Asks the watcher `watch` what changed since `cache` was confirmed. The answer is
/// used only when the cache can be trusted for what the watcher does not name: it is
/// confirmed by a snapshot, recorded the whole tree, and was made under the same capture
/// rules; otherwise the walk is full, and still takes the new token (the cache it leaves is
/// then confirmed with it).
fn ask(cache: &StatCache, options: &Options, watch: Option<&dyn ChangeSource>) -> Asked {
    let none = Asked {
        token: None,
        partial: None,
        reason: None,
    };
    let Some(watch) = watch.filter(|_| options.use_stat_cache) else {
        return none;
    };
    let usable = cache.snapshot.is_some()
        && cache.root.is_some()
        && cache.rules == statcache::rules_fingerprint(&options.capture);
    match watch.changes_since(if usable { cache.token } else { None }) {
        Err(e) => Asked {
            reason: Some(format!("the watcher did not answer: {e}")),
            ..none
        },
        Ok(answer) => match answer.scope {
            _ if !usable => Asked {
                token: Some(answer.token),
                partial: None,
                reason: Some(
                    "no stat cache to build on (none yet, or made under other capture settings)"
                        .into(),
                ),
            },
            Scope::Full(why) => Asked {
                token: Some(answer.token),
                partial: None,
                reason: Some(why),
            },
            Scope::Partial {
                mut dirs,
                names,
                subtrees,
                note,
            } => Asked {
                token: Some(answer.token),
                partial: Some({
                    dirs.extend(cache.unvouched());
                    watch::Partial::new(&dirs, names, &subtrees)
                }),
                reason: note,
            },
        },
    }
}

fn walk(
    store: &Store,
    root: &Path,
    cache: &StatCache,
    options: &Options,
    ctx: Context<'_>,
    sink: Sink<'_>,
    asked: Option<Asked>,
) -> Result<WalkOutput> {
    let started = Instant::now();
    let asked = asked.unwrap_or(Asked {
        token: None,
        partial: None,
        reason: None,
    });
    let (root_fd, root_st) = walk::open_root(root)?;
    // The store, and Cairn's data directory (other workspaces' stores) when the tree holds it.
    let data_dir = cairn_store::home::data_dir().ok();
    let store_dirs = [Some(store.path()), data_dir.as_deref()]
        .into_iter()
        .flatten()
        .filter_map(|p| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
        })
        .collect();
    let own_paths = own_paths(root, &options.own_files);
    let rules = Rules {
        excludes: Excludes::new(&options.capture.excludes)?,
        gitignore: options.capture.gitignore,
        max_file_bytes: options.capture.max_file_bytes,
        refuse_hard_links: options.capture.refuse_hard_links,
    };
    let no_cancel = CancelToken::new();
    let cancel = ctx.cancel.as_ref().unwrap_or(&no_cancel);
    let aborted = AtomicBool::new(false);
    let counters = Counters::default();
    let same_rules = cache.rules == statcache::rules_fingerprint(&options.capture);
    let check_objects = store.has_damage();
    let walker = Walker {
        root: root.to_path_buf(),
        store_dirs,
        own_paths,
        rules: &rules,
        sink,
        cache,
        same_rules,
        check_objects,
        cancel,
        aborted: &aborted,
        counters: &counters,
        skipped: Default::default(),
        kept: Default::default(),
        dirs: Default::default(),
        primed_used: Default::default(),
        partial: asked.partial.as_ref(),
    };
    let root_dir = walk::Handle::new(walk::DirAt::Open(root_fd));
    let root_record = statcache::StatRecord::of(&root_st);
    let run = || {
        walker.walk_dir(
            &root_dir,
            b"",
            &IgnoreChain::root(),
            cache.root,
            true,
            Some(root_record),
            true,
        )
    };
    let pool = match ctx.threads {
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map_err(|e| Error::InvalidArgument(format!("cannot start {n} threads: {e}")))?,
        ),
        None => None,
    };
    let in_pool = || match &pool {
        Some(p) => p.install(run),
        None => run(),
    };
    let root_out = match ctx.progress {
        None => in_pool(),
        Some(cb) => std::thread::scope(|s| {
            // A first report before the walk starts: a caller can stop (or cancel) a snapshot
            // deterministically before any work, whatever the size of the tree.
            if !cb(&Progress::default()) {
                aborted.store(true, Ordering::SeqCst);
            }
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let handle = s.spawn(move || {
                let r = in_pool();
                let _ = tx.send(());
                r
            });
            loop {
                let done = !matches!(
                    rx.recv_timeout(Duration::from_millis(50)),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                );
                let p = Progress {
                    files: counters.files.load(Ordering::Relaxed),
                    dirs: counters.dirs.load(Ordering::Relaxed),
                    hashed: counters.hashed.load(Ordering::Relaxed),
                    hashed_bytes: counters.hashed_bytes.load(Ordering::Relaxed),
                };
                if !cb(&p) {
                    aborted.store(true, Ordering::SeqCst);
                }
                if done {
                    break;
                }
            }
            match handle.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }),
    }?;
    if aborted.load(Ordering::SeqCst) {
        return Err(Error::AbortedByCallback);
    }
    let mut skipped = walker.skipped.into_inner();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let mut kept = walker.kept.into_inner();
    kept.sort_by(|a, b| a.path.cmp(&b.path));
    let listed = counters.listed.load(Ordering::Relaxed);
    let named = counters.named.load(Ordering::Relaxed);
    let walk_info = WalkInfo {
        walked: match (&asked.partial, listed + named) {
            (None, _) => Walked::Full,
            (Some(_), 0) => Walked::None,
            (Some(_), _) => Walked::Partial,
        },
        reason: asked.reason,
        listed,
        named,
        ahead_ms: None,
    };
    let trees = match walker.sink {
        Sink::Hash(t) => Some(t.into_inner()),
        Sink::Store(_) => None,
    };
    let stats = Stats {
        files: counters.files.load(Ordering::Relaxed),
        dirs: counters.dirs.load(Ordering::Relaxed),
        symlinks: counters.symlinks.load(Ordering::Relaxed),
        bytes: counters.bytes.load(Ordering::Relaxed),
        hashed: counters.hashed.load(Ordering::Relaxed),
        reused: counters.reused.load(Ordering::Relaxed),
        stored_bytes: 0,
        stored_objects: 0,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    Ok(WalkOutput {
        root: root_out.id,
        root_size: root_out.size,
        skipped,
        kept,
        dirs: walker.dirs.into_inner(),
        trees,
        stats,
        primed_used: walker.primed_used.into_inner(),
        walk: walk_info,
        token: asked.token,
    })
}

fn load_cache(
    store: &Store,
    workspace_id: &str,
    options: &Options,
    memo: Option<&CacheMemo>,
) -> Result<StatCache> {
    if !options.use_stat_cache {
        return Ok(StatCache::default());
    }
    let path = StatCache::path(store, workspace_id)?;
    let cache = match memo {
        Some(memo) => memo.load(&path),
        None => StatCache::load(&path),
    };
    // Trust a cache only while the snapshot it was recorded with exists: a collection may have
    // removed the blobs of a deleted one; with a remote, only while the remote holds it. The
    // same for each snapshot whose blobs the files restores wrote name.
    let mut cache = match cache.snapshot {
        Some(id) if store.holds_snapshot_everywhere(&id)? => cache,
        _ => return Ok(StatCache::default()),
    };
    if cache.has_primed() {
        let mut held = HashMap::new();
        for id in cache.primed_snapshots() {
            held.insert(id, store.holds_snapshot_everywhere(&id)?);
        }
        cache.retain_primed(|id| held.get(id).copied().unwrap_or(false));
    }
    Ok(cache)
}

static PRIMING: AtomicBool = AtomicBool::new(true);

/// Turns the priming of the stat cache by restores ([`prime`]) on or off for this process (on
/// by default). Off is the behaviour before issue 33, the snapshot after a restore reading
/// every file it wrote: for benchmarks that compare the two, side by side.
pub fn set_restore_priming(on: bool) {
    PRIMING.store(on, Ordering::Relaxed);
}

/// Whether restores prime the stat cache (see [`set_restore_priming`]).
pub fn restore_priming() -> bool {
    PRIMING.load(Ordering::Relaxed)
}

/// Records in the stat cache of `workspace_id` the files a restore wrote from the blobs of
/// `snapshot` (its target), each only where what the restore saw proves the record (see
/// [`statcache::Written`]), so that the next snapshot does not read them again; returns how
/// many it recorded. The cache must be one a snapshot confirmed (the restore's safety
/// snapshot): it keeps its header, gets a new body key, and is written as after a snapshot
/// (through `memo` when given, on a background thread). Best effort, as every cache write: a
/// cache that cannot be read or written leaves the files to be read again.
pub fn prime(
    store: &Store,
    workspace_id: &str,
    memo: Option<&CacheMemo>,
    snapshot: SnapshotId,
    written: Vec<statcache::Written>,
) -> usize {
    if written.is_empty() || !restore_priming() {
        return 0;
    }
    let Ok(path) = StatCache::path(store, workspace_id) else {
        return 0;
    };
    let mut cache = match memo {
        Some(m) => m.load(&path),
        None => StatCache::load(&path),
    };
    let n = if cache.snapshot.is_some() {
        cache.prime(snapshot, written)
    } else {
        0
    };
    let tmp = &store.layout().tmp;
    match memo {
        Some(m) if n == 0 => m.put(&path, cache),
        Some(m) => {
            cache.rekey();
            m.put_and_write(tmp, &path, cache);
        }
        None if n == 0 => {}
        None => {
            cache.rekey();
            let _ = cache.save(tmp, &path);
        }
    }
    n
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Takes a snapshot of the workspace at `root` into `store`, as workspace `workspace_id`,
/// watched and steered by `ctx`.
pub fn snapshot(
    store: &Store,
    root: &Path,
    workspace_id: &str,
    options: &Options,
    mut ctx: Context<'_>,
) -> Result<Snapshot> {
    let taken = ctx.taken.take();
    let (prepared, committed) = take(store, root, workspace_id, options, ctx, Finish::Manifest)?;
    let (id, manifest) = committed.expect("a manifest was asked for");
    prepared.finish(id, manifest, taken)
}

/// A snapshot whose walk is done and whose objects are durable in the store, without its
/// manifest yet: [`Prepared::commit`] writes the manifest and the stat cache; dropping it
/// leaves no manifest and no stat-cache change (its objects are garbage for the next
/// collection). A restore plans from one and commits it as its safety snapshot only when the
/// plan changes something.
pub struct Prepared<'s> {
    store: &'s Store,
    /// The operation it was walked under; `None` once set aside as an [`Ahead`], until that
    /// commits it under a new one.
    guard: Option<cairn_store::OperationGuard>,
    /// With [`Finish::Ahead`]: every object id the walk stored or found present.
    touched: Vec<ObjectId>,
    root: std::path::PathBuf,
    workspace_id: String,
    options: Options,
    /// The stat cache kept in memory it was walked with ([`Context::memo`]).
    memo: Option<CacheMemo>,
    started_ns: i64,
    created_ms: i64,
    cache: StatCache,
    out: WalkOutput,
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("root", &self.root)
            .field("tree", &self.out.root)
            .field("stats", &self.out.stats)
            .finish_non_exhaustive()
    }
}

impl Prepared<'_> {
    /// The root tree the snapshot will have.
    pub fn root(&self) -> TreeId {
        self.out.root
    }

    /// What it leaves out and why.
    pub fn skipped(&self) -> &[Skipped] {
        &self.out.skipped
    }

    /// Entries left in place by excludes.
    pub fn kept(&self) -> &[Kept] {
        &self.out.kept
    }

    /// What the walk cost so far.
    pub fn stats(&self) -> &Stats {
        &self.out.stats
    }

    /// What the walk looked at, and why.
    pub fn walk(&self) -> &WalkInfo {
        &self.out.walk
    }

    /// Writes the manifest, then the stat cache, and returns the snapshot.
    pub fn commit(self) -> Result<Snapshot> {
        self.commit_handing(None)
    }

    /// [`Prepared::commit`], handing the snapshot to `taken` once its manifest is durable
    /// and before the stat cache is saved (see [`Context::taken`]).
    fn commit_handing(self, taken: Option<TakenFn<'_>>) -> Result<Snapshot> {
        let manifest = manifest_of(
            &self.root,
            &self.workspace_id,
            &self.options,
            self.created_ms,
            &self.out,
        );
        let guard = self
            .guard
            .as_ref()
            .expect("a prepared snapshot keeps its operation until it is set aside, and an Ahead commits under a new one");
        let id = self.store.write_manifest(guard, &manifest)?;
        self.finish(id, manifest, taken)
    }

    /// Saves the stat cache after snapshot `id`: only its header when every directory's record is
    /// the one loaded (nothing changed), else the whole cache, updated in place from the walk. With
    /// a memo, the memo keeps the cache and a changed one is written by a background thread (see
    /// [`CacheMemo`]). Failures are ignored (see the caller).
    fn save_cache(&mut self, path: &Path, id: SnapshotId) {
        let Prepared {
            store,
            cache,
            started_ns,
            options,
            memo,
            out,
            ..
        } = self;
        let (store, started_ns, memo) = (*store, *started_ns, memo.as_ref());
        let partial = out.walk.walked != Walked::Full;
        let unchanged = cache.snapshot.is_some()
            && cache.is_current()
            && cache.root == Some((out.root, out.root_size))
            && (partial || cache.dir_count() == out.dirs.len())
            && out.dirs.iter().all(|d| matches!(d, Update::Same(_)));
        cache.snapshot = Some(id);
        cache.started_ns = started_ns;
        // A walk that asked no watcher keeps the token the cache had: its records are as of a
        // moment after that token, so what changed since the token is still all a watched
        // snapshot needs to look at.
        if out.token.is_some() {
            cache.token = out.token;
        }
        if unchanged
            && StatCache::confirm(path, &id, started_ns, cache.key(), cache.token.as_ref()).is_ok()
        {
            if let Some(memo) = memo {
                memo.put(path, std::mem::take(cache));
            }
            return;
        }
        cache.replace(
            partial,
            std::mem::take(&mut out.dirs),
            statcache::StatCacheFile::new_key(Some(&id), started_ns),
            statcache::rules_fingerprint(&options.capture),
            Some((out.root, out.root_size)),
            id,
            started_ns,
            std::mem::take(&mut out.primed_used),
        );
        let tmp = &store.layout().tmp;
        match memo {
            Some(memo) => memo.put_and_write(tmp, path, std::mem::take(cache)),
            None => {
                let _ = cache.save(tmp, path);
            }
        }
    }

    /// Saves the stat cache of snapshot `id`, whose `manifest` is written, and returns the
    /// snapshot, given first to `taken` (if any).
    fn finish(
        mut self,
        id: SnapshotId,
        manifest: Manifest,
        taken: Option<TakenFn<'_>>,
    ) -> Result<Snapshot> {
        let snapshot = Snapshot {
            id,
            root: self.out.root,
            stats: manifest.stats,
            skipped: std::mem::take(&mut self.out.skipped),
            kept: std::mem::take(&mut self.out.kept),
            manifest,
            walk: self.out.walk.clone(),
        };
        if let Some(taken) = taken {
            taken(&snapshot);
        }
        // The cache is saved after the manifest: a crash in between only costs re-reading.
        // From here on the snapshot is taken, so a cache that cannot be saved (a full disk)
        // does not fail it: the old cache stays, trusted only while its own snapshot exists.
        if self.options.use_stat_cache {
            if let Ok(cache_path) = StatCache::path(self.store, &self.workspace_id) {
                self.save_cache(&cache_path, id);
            }
        }
        Ok(snapshot)
    }
}

/// The manifest of a snapshot of the workspace at `root` whose walk gave `out`.
fn manifest_of(
    root: &Path,
    workspace_id: &str,
    options: &Options,
    created_ms: i64,
    out: &WalkOutput,
) -> Manifest {
    use std::os::unix::ffi::OsStrExt;
    Manifest {
        root: out.root,
        label: options.label.clone(),
        created_ms,
        workspace_id: workspace_id.to_string(),
        workspace_root: root.as_os_str().as_bytes().to_vec(),
        metadata: serde_json::Value::Object(options.metadata.clone()).to_string(),
        capture: options.capture.clone(),
        skipped: out.skipped.clone(),
        stats: out.stats,
        protected: options.protect,
    }
}

impl Drop for Prepared<'_> {
    /// A snapshot prepared and not committed changed no cache: what it took from the memo goes
    /// back as it was. (After a commit, the memo already holds the new cache.)
    fn drop(&mut self) {
        if let (Some(memo), Ok(path)) =
            (&self.memo, StatCache::path(self.store, &self.workspace_id))
        {
            memo.put(&path, std::mem::take(&mut self.cache));
        }
    }
}

/// The time a snapshot records (`Manifest::created_ms`): the wall clock in milliseconds, but
/// strictly increasing within the process, so that snapshots taken one after another in the
/// same millisecond (an in-process agent's checkpoints before two quick tool calls) still
/// sort in the order they were taken; who changed what (`cairn_rewind::attribute`) cuts time
/// by that order. A later call never gets an earlier or equal time; it may run ahead of the
/// wall clock by as many milliseconds as snapshots were started within one.
fn snapshot_clock() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = cairn_store::fsutil::now_ms();
    let prev = LAST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or_else(|last| last);
    now.max(prev + 1)
}

/// Walks the workspace and stores its objects, without a manifest yet: see [`Prepared`].
pub fn prepare<'s>(
    store: &'s Store,
    root: &Path,
    workspace_id: &str,
    options: &Options,
    ctx: Context<'_>,
) -> Result<Prepared<'s>> {
    take(store, root, workspace_id, options, ctx, Finish::Objects).map(|(prepared, _)| prepared)
}

/// Walks the workspace and stores its objects, as [`prepare`] does, then ends the operation
/// it did so under: see [`Ahead`].
pub fn walk_ahead<'s>(
    store: &'s Store,
    root: &Path,
    workspace_id: &str,
    options: &Options,
    ctx: Context<'_>,
) -> Result<Ahead<'s>> {
    let (mut prepared, _) = take(store, root, workspace_id, options, ctx, Finish::Ahead)?;
    prepared.guard = None;
    Ok(Ahead {
        prepared,
        walked_at: Instant::now(),
    })
}

/// A snapshot walked and stored before anyone asked for it, holding no operation: what the
/// `cairn watch` daemon takes once the workspace has been quiet, so that the snapshot asked
/// for next costs only its manifest when nothing changed since ([`Ahead::commit`]). Its
/// objects are durable in the store but named by no manifest, so a collection may remove
/// them meanwhile (and the snapshot its stat cache was recorded with may be deleted): the
/// commit checks, under a new operation, that all of them are still there. Dropping it leaves
/// no manifest and no stat-cache change, as dropping a [`Prepared`] does.
pub struct Ahead<'s> {
    prepared: Prepared<'s>,
    walked_at: Instant,
}

impl std::fmt::Debug for Ahead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ahead")
            .field("prepared", &self.prepared)
            .field("walked_at", &self.walked_at)
            .finish()
    }
}

impl Ahead<'_> {
    /// The token its walk was asked after (`None`: it asked no watcher). A watcher that
    /// reports nothing changed since it vouches that the workspace still is what was walked.
    pub fn token(&self) -> Option<Token> {
        self.prepared.out.token
    }

    /// The options it was walked with.
    pub fn options(&self) -> &Options {
        &self.prepared.options
    }

    /// Commits it as a snapshot taken now, with `label`, `metadata` and `protect` (its other
    /// options are those it was walked with): under a new operation, checks that every
    /// object its walk stored or found present is still in the store, and that the snapshot
    /// its stat cache was recorded with (and every one a restore primed it with) still
    /// exists, so every object its tree names is there; then writes the manifest and the stat
    /// cache, as [`Prepared::commit`] does, handing the snapshot to `taken` (if any) once
    /// its manifest is durable and before the stat cache is saved (see [`Context::taken`]).
    /// `Ok(None)` when a check fails: a collection or a deletion came in between, nothing
    /// was written, and the caller takes a snapshot anew. The caller must know that nothing
    /// changed in the workspace since [`Ahead::token`].
    pub fn commit(
        mut self,
        label: Option<String>,
        metadata: serde_json::Map<String, serde_json::Value>,
        protect: bool,
        taken: Option<TakenFn<'_>>,
    ) -> Result<Option<Snapshot>> {
        let store = self.prepared.store;
        let guard = store.begin_operation(OperationKind::Snapshot, &[])?;
        let cache = &self.prepared.cache;
        let mut vouching: Vec<SnapshotId> = cache.snapshot.into_iter().collect();
        vouching.extend(cache.primed_snapshots());
        for id in &vouching {
            if !store.holds_snapshot_everywhere(id)? {
                return Ok(None);
            }
        }
        if !store.all_reusable(&self.prepared.touched)? {
            return Ok(None);
        }
        let p = &mut self.prepared;
        p.guard = Some(guard);
        p.options.label = label;
        p.options.metadata = metadata;
        p.options.protect = protect;
        p.created_ms = snapshot_clock();
        p.out.walk.ahead_ms = Some(self.walked_at.elapsed().as_millis() as u64);
        self.prepared.commit_handing(taken).map(Some)
    }
}

/// What [`take`] ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// The snapshot's manifest, synced together with its objects (see
    /// [`cairn_store::ObjectWriter::commit_with_manifest`]).
    Manifest,
    /// The objects only ([`prepare`]).
    Objects,
    /// The objects only, remembering every id the walk gave the store ([`walk_ahead`]).
    Ahead,
}

/// Walks the workspace and stores its objects, ending as `finish` says; with
/// [`Finish::Manifest`], returns the snapshot's id and manifest.
fn take<'s>(
    store: &'s Store,
    root: &Path,
    workspace_id: &str,
    options: &Options,
    ctx: Context<'_>,
    finish: Finish,
) -> Result<(Prepared<'s>, Option<(SnapshotId, Manifest)>)> {
    cairn_store::check_workspace_id(workspace_id)?;
    let started_ns = now_ns();
    let created_ms = snapshot_clock();
    let memo = ctx.memo.clone();
    let cache = load_cache(store, workspace_id, options, memo.as_ref())?;
    let guard = store.begin_operation(OperationKind::Snapshot, &[])?;
    let mut writer = store.writer(&guard);
    if finish == Finish::Ahead {
        writer.remember_ids();
    }
    if options.defer_compression {
        writer.defer_compression();
    }
    // Asked after the operation began and before the walk: every change the walk may miss
    // is after the token (see `watch`).
    let asked = ask(&cache, options, ctx.watch.as_deref());
    let mut out = walk(
        store,
        root,
        &cache,
        options,
        ctx,
        Sink::Store(&writer),
        Some(asked),
    )?;
    // Committing adds no object: the figures are final.
    let written = writer.stats();
    out.stats.stored_bytes = written.stored_bytes;
    out.stats.stored_objects = written.objects;
    let touched = writer.take_remembered();
    let committed = if finish == Finish::Manifest {
        let m = manifest_of(root, workspace_id, options, created_ms, &out);
        let (_, id) = writer.commit_with_manifest(&guard, &m)?;
        Some((id, m))
    } else {
        writer.commit()?;
        None
    };
    let prepared = Prepared {
        store,
        guard: Some(guard),
        touched,
        root: root.to_path_buf(),
        workspace_id: workspace_id.to_string(),
        options: options.clone(),
        memo,
        started_ns,
        created_ms,
        cache,
        out,
    };
    Ok((prepared, committed))
}

/// Walks the live workspace without storing anything, with the stat cache of `workspace_id`
/// (read only), and returns its trees in memory.
pub fn scan(
    store: &Store,
    root: &Path,
    workspace_id: &str,
    options: &Options,
    ctx: Context<'_>,
) -> Result<Scan> {
    cairn_store::check_workspace_id(workspace_id)?;
    let memo = ctx.memo.clone();
    let cache = load_cache(store, workspace_id, options, memo.as_ref())?;
    let out = walk(
        store,
        root,
        &cache,
        options,
        ctx,
        Sink::Hash(Default::default()),
        None,
    );
    // A scan only reads the cache: what it took from the memo goes back as it was.
    if let Some(memo) = &memo {
        memo.put(&StatCache::path(store, workspace_id)?, cache);
    }
    let out = out?;
    Ok(Scan {
        root: out.root,
        trees: out.trees.unwrap_or_default(),
        skipped: out.skipped,
        kept: out.kept,
        stats: out.stats,
    })
}

#[cfg(test)]
mod clock_tests {
    #[test]
    fn the_snapshot_clock_never_repeats_a_millisecond_within_the_process() {
        let times: Vec<i64> = (0..1000).map(|_| super::snapshot_clock()).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..500)
                        .map(|_| super::snapshot_clock())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("a clock thread"))
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "two snapshots got the same time");
    }
}
