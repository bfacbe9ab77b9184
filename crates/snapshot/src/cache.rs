//! The stat cache as a snapshot uses it: loaded only while the snapshots it relies on exist,
//! and primed by restores with the files they wrote.

use super::*;

pub(super) fn load_cache(
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

pub(super) static PRIMING: AtomicBool = AtomicBool::new(true);

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
    written: impl IntoIterator<Item = statcache::Written>,
) -> usize {
    let mut written = written.into_iter().peekable();
    if written.peek().is_none() || !restore_priming() {
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
