//! Taking a snapshot: the operation, the walk and its objects, then the manifest and the
//! stat cache ([`snapshot`]); or the objects alone, the manifest later ([`Prepared`]).

use super::*;

pub(super) fn now_ns() -> i64 {
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
    pub(super) store: &'s Store,
    /// The operation it was walked under; `None` once set aside as an [`Ahead`], until that
    /// commits it under a new one.
    pub(super) guard: Option<cairn_store::OperationGuard>,
    /// With [`Finish::Ahead`]: every object id the walk stored or found present.
    pub(super) touched: Vec<ObjectId>,
    pub(super) root: std::path::PathBuf,
    pub(super) workspace_id: String,
    pub(super) options: Options,
    /// The stat cache kept in memory it was walked with ([`Context::memo`]).
    pub(super) memo: Option<CacheMemo>,
    pub(super) started_ns: i64,
    pub(super) created_ms: i64,
    pub(super) cache: StatCache,
    pub(super) out: WalkOutput,
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

    /// The record of directory `dir` (relative to the root) that the snapshot's entries there
    /// come from: the walk's own for a directory it listed, else the stat cache's, which a
    /// watcher vouched for; `None` when there is none. An entry a record does not name was
    /// absent, or looked at but not recorded (too large, changing, a hard link).
    ///
    /// A restore planned from a watched walk compares what it will overwrite or remove with
    /// these records before changing anything (see `cairn_restore::apply`).
    pub fn dir_record(&self, dir: &[u8]) -> Option<std::sync::Arc<statcache::DirRecord>> {
        let fresh = self.out.dirs.iter().find_map(|u| match u {
            statcache::Update::Fresh(r, _) if r.path == dir => Some(r),
            _ => None,
        });
        match fresh {
            Some(r) => Some(std::sync::Arc::new(r.clone())),
            None => self.cache.dir(dir),
        }
    }

    /// Writes the manifest, then the stat cache, and returns the snapshot.
    pub fn commit(self) -> Result<Snapshot> {
        self.commit_handing(None)
    }

    /// [`Prepared::commit`], handing the snapshot to `taken` once its manifest is durable
    /// and before the stat cache is saved (see [`Context::taken`]).
    pub(super) fn commit_handing(self, taken: Option<TakenFn<'_>>) -> Result<Snapshot> {
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
pub(super) fn manifest_of(
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
pub(super) fn snapshot_clock() -> i64 {
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

/// What [`take`] ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finish {
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
pub(super) fn take<'s>(
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
