//! One walk of the workspace, for a snapshot or a scan: what the watcher answered, the
//! walker run on its pool with progress reported, and what it found.

use super::*;

pub(super) struct WalkOutput {
    pub(super) root: TreeId,
    pub(super) root_size: u64,
    pub(super) skipped: Vec<Skipped>,
    pub(super) kept: Vec<Kept>,
    pub(super) dirs: Vec<Update>,
    pub(super) trees: Option<HashMap<TreeId, Tree>>,
    pub(super) stats: Stats,
    /// Files taken from the records restores made.
    pub(super) primed_used: Vec<(Vec<u8>, StatRecord)>,
    /// What it walked, and why.
    pub(super) walk: WalkInfo,
    /// The watcher's token to confirm the cache with, when one was asked.
    pub(super) token: Option<Token>,
}

/// The paths beneath `root` of `own` files and their SQLite companions, relative to the root.
pub(super) fn own_paths(root: &Path, own: &[PathBuf]) -> std::collections::HashSet<Vec<u8>> {
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
pub(super) struct Asked {
    pub(super) token: Option<Token>,
    pub(super) partial: Option<watch::Partial>,
    pub(super) reason: Option<String>,
}

/// Asks the watcher `watch` what changed since `cache` was confirmed. The answer is
/// used only when the cache can be trusted for what the watcher does not name: it is
/// confirmed by a snapshot, recorded the whole tree, and was made under the same capture
/// rules; otherwise the walk is full, and still takes the new token (the cache it leaves is
/// then confirmed with it).
pub(super) fn ask(cache: &StatCache, options: &Options, watch: Option<&dyn ChangeSource>) -> Asked {
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

pub(super) fn walk(
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
