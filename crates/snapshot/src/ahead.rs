//! A snapshot walked ahead, before anyone asked for it (the `cairn watch` daemon's, once
//! the workspace is quiet), committed later when nothing changed since.

use super::*;

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
