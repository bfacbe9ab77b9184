//! Rewinds, restores before an entry and forks across the boundary, with a fork's files in
//! another directory.

use super::*;

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "RewindOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RewindJson {
    files: Option<bool>,
    memory: Option<bool>,
    dry_run: bool,
    force: bool,
    key: Option<String>,
    tool_settle_ms: Option<u64>,
    lease_wait_ms: Option<u64>,
    from_run: Option<String>,
    paths: Vec<String>,
    on_drift: Option<cairn_restore::DriftPolicy>,
    continuation: Option<cairn_rewind::Continuation>,
}

pub(super) fn rewind_options(
    o: RewindJson,
    ws: Option<Arc<dyn Files>>,
) -> FfiResult<RewindOptions> {
    let mut r = RewindOptions {
        paths: crate::workspace::chosen_paths(&o.paths)?,
        on_drift: o.on_drift,
        files: o.files,
        workspace: ws,
        dry_run: o.dry_run,
        force: o.force,
        key: o.key,
        from_run: o.from_run.map(RunId::new),
        continuation: o.continuation,
        ..RewindOptions::default()
    };
    if let Some(m) = o.memory {
        r.memory = m;
    }
    if let Some(v) = ms(o.tool_settle_ms) {
        r.tool_settle = v;
    }
    if let Some(v) = ms(o.lease_wait_ms) {
        r.lease_wait = v;
    }
    Ok(r)
}

/// The rewind of `cairn_threads_rewind` (to `entry`, an entry or a checkpoint) and of
/// `cairn_threads_restore_before` (`before`: to just before user entry `entry`), once their
/// arguments are checked.
pub(super) fn rewind_like(
    t: &cairn_threads,
    thread: &str,
    entry: &str,
    options: RewindJson,
    workspace: *const cairn_workspace,
    before: bool,
) -> FfiResult<cairn_rewind::RewindReport> {
    let id = ThreadId::new(thread);
    let mut opts = rewind_options(options, t.workspace_or(workspace))?;
    let call = |opts: &RewindOptions| {
        if before {
            t.threads.restore_before(&id, &EntryId::new(entry), opts)
        } else if entry.starts_with(cairn_rewind::CheckpointId::PREFIX) {
            let cp = cairn_rewind::CheckpointId::new(entry);
            t.threads.rewind_to_checkpoint(&id, &cp, opts)
        } else {
            t.threads.rewind(&id, &EntryId::new(entry), opts)
        }
    };
    // A thread an agent wrote (Claude Code's hooks): its conversation half, prepared from the
    // plan and kept with the rewind, as `cairn rewind` does, unless the caller brings one.
    if opts.continuation.is_none()
        && cairn_agents::of_thread(&t.threads.thread(&id)?.metadata).is_some()
    {
        let plan = call(&RewindOptions {
            dry_run: true,
            ..opts.clone()
        })?;
        let half = cairn_agents::rewind::prepare_rewind(&t.threads, &id, &plan, opts.memory)?;
        opts.continuation = half.continuation;
    }
    let report = call(&opts)?;
    // An agent that keeps one history takes it back now; a failure is left for `cairn
    // resume`, which settles again (the rewind itself is done).
    let _ = cairn_agents::rewind::settle(&report);
    Ok(report)
}

/// Rewinds a thread to `entry` of its active branch, in one operation: files (with
/// `"files": true`), then conversation, memory and runs. `entry` may be a checkpoint id
/// (`cp_…`, a "Before rewind" one included) instead: the rewind goes to the checkpoint's
/// point, and with `"memory": false` restores only its files. Options, may be empty:
/// `{"files": bool, "memory": bool (default true), "dry_run": bool, "force": bool, "key":
/// str, "tool_settle_ms": n, "lease_wait_ms": n, "from_run": run id, "paths": [path],
/// "on_drift": "refuse"|"keep"|"overwrite", "continuation": {"data": any, "names": [str]}}`:
/// with files, `paths` restores only those paths (relative to the root), and `on_drift`
/// checks for paths edited since the thread's newest checkpoint in the workspace (default: no
/// check); `continuation` is the agent's conversation half, kept with the rewind (its `data`
/// comes back in the report's `continuation`) and its `names` given to the thread when the
/// rewind completes. `workspace` NULL: the default one. Writes the rewind report as JSON.
///
/// # Safety
/// `t` live; inputs valid; `workspace` NULL or live; `out` writable; `err_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_rewind(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    entry: *const u8,
    entry_len: usize,
    options_json: *const u8,
    options_len: usize,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let thread = arg!(text thread, thread_len, "thread");
        let entry = arg!(text entry, entry_len, "entry");
        let options = arg!(options options_json, options_len, "rewind options");
        out.json(&rewind_like(t, thread, entry, options, workspace, false)?)
    })
}

/// "Restore before this prompt": the rewind to just before user entry `entry`. Options and
/// result as for `cairn_threads_rewind`.
///
/// # Safety
/// As `cairn_threads_rewind`.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_restore_before(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    entry: *const u8,
    entry_len: usize,
    options_json: *const u8,
    options_len: usize,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let thread = arg!(text thread, thread_len, "thread");
        let entry = arg!(text entry, entry_len, "entry");
        let options = arg!(options options_json, options_len, "rewind options");
        out.json(&rewind_like(t, thread, entry, options, workspace, true)?)
    })
}

/// A workspace of another machine as this one sees it, for a fork's `"source_workspace_id"`:
/// its id and the root its checkpoints recorded (which need not exist here), with the store it
/// shares with the fork's workspace (the cache of their remote). It serves the checkpoints; it
/// cannot snapshot or restore the files, which are on the other machine.
pub(super) struct Elsewhere {
    id: String,
    root: std::path::PathBuf,
    store: cairn_store::Store,
}

impl Elsewhere {
    fn refuse(&self) -> cairn_rewind::FilesError {
        cairn_rewind::FilesError::new(cairn_store::Error::Unsupported {
            what: format!("changing the files of workspace {}", self.id),
            detail: "they are on another machine; only its checkpoints are read here".into(),
        })
    }
}

impl Files for Elsewhere {
    fn id(&self) -> &str {
        &self.id
    }
    fn root(&self) -> &std::path::Path {
        &self.root
    }
    fn store(&self) -> Option<&cairn_store::Store> {
        Some(&self.store)
    }
    fn checkpoint(
        &self,
        _: &cairn_rewind::CheckpointRequest,
    ) -> Result<cairn_store::SnapshotId, cairn_rewind::FilesError> {
        Err(self.refuse())
    }
    fn keeps(&self, snapshot: &cairn_store::SnapshotId) -> Result<bool, cairn_rewind::FilesError> {
        Ok(self.store.has_snapshot(snapshot))
    }
    fn plan(
        &self,
        _: &cairn_store::SnapshotId,
    ) -> Result<cairn_rewind::FilePlan, cairn_rewind::FilesError> {
        Err(self.refuse())
    }
    fn apply(
        &self,
        _: &cairn_rewind::FilePlan,
        _: &str,
    ) -> Result<cairn_rewind::FileOutcome, cairn_rewind::FilesError> {
        Err(self.refuse())
    }
    fn finished(
        &self,
        _: &str,
        _: &cairn_store::SnapshotId,
    ) -> Result<Option<cairn_rewind::FileOutcome>, cairn_rewind::FilesError> {
        Err(self.refuse())
    }
}

/// The source of a fork whose checkpoints workspace `id` took on another machine: the root
/// they recorded, and the store of `target` (which must reach them: a cache of the remote the
/// other machine wrote them into).
pub(super) fn elsewhere(
    t: &cairn_threads,
    thread: &ThreadId,
    id: &str,
    target: Option<&Arc<dyn Files>>,
) -> FfiResult<Arc<dyn Files>> {
    let target = target.ok_or_else(|| {
        FfiError::invalid("source_workspace_id needs the fork's workspace: pass one, or open the thread database with one")
    })?;
    let store = target.store().cloned().ok_or_else(|| {
        FfiError::invalid("the fork's workspace has no store to read the source's checkpoints from")
    })?;
    let root = t
        .threads
        .list_checkpoints(thread)?
        .into_iter()
        .find(|c| c.workspace_id == id)
        .map(|c| c.root)
        .ok_or_else(|| {
            FfiError::new(
                cairn_status::CAIRN_ERR_VALIDATION,
                format!(
                    "thread {thread} has no checkpoint taken in workspace {id}; name the workspace its checkpoints were taken in (cairn_threads_list_checkpoints shows them)"
                ),
            )
        })?;
    Ok(Arc::new(Elsewhere {
        id: id.to_string(),
        root,
        store,
    }))
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "ForkOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ForkJson {
    files: bool,
    source_workspace_id: Option<String>,
    new_thread_id: Option<String>,
    dry_run: bool,
    force: bool,
    replace: bool,
    tool_settle_ms: Option<u64>,
    lease_wait_ms: Option<u64>,
    metadata: Option<serde_json::Value>,
}

/// Forks a thread at `entry`: a new thread sharing the prefix. With `"files": true` the
/// fork's `workspace` gets the files as they were there (checkpoints copied from `source`'s
/// store first when it is another workspace). Options, may be empty: `{"files": bool,
/// "new_thread_id": str, "dry_run": bool, "force": bool, "replace": bool, "tool_settle_ms": n,
/// "lease_wait_ms": n, "metadata": {...}, "source_workspace_id": str}`. `workspace` and
/// `source` may be NULL (the default workspace). `"source_workspace_id"` (with `source` NULL)
/// names a workspace of another machine whose checkpoints the fork's files come from, read
/// through `workspace`'s store: the cache of the remote that machine snapshots into (see
/// `cairn_workspace_open`'s `"remote"`), the thread database being shared too. A
/// `workspace` that holds the source workspace, its store or the thread database is refused
/// with `CAIRN_DENIED`, as is one that is not empty and no workspace of the thread's family
/// unless `"replace": true`. Writes the fork report as JSON.
///
/// # Safety
/// `t` live; inputs valid; `workspace`, `source` NULL or live; `out` writable; `err_out` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_fork(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    entry: *const u8,
    entry_len: usize,
    options_json: *const u8,
    options_len: usize,
    workspace: *const cairn_workspace,
    source: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let entry = EntryId::new(arg!(text entry, entry_len, "entry"));
        let o: ForkJson = arg!(options options_json, options_len, "fork options");
        let target = t.workspace_or(workspace);
        let source = match (&o.source_workspace_id, source.is_null()) {
            (Some(other), true) => Some(elsewhere(t, &id, other, target.as_ref())?),
            (Some(_), false) => {
                return Err(FfiError::invalid(
                    "give either source or source_workspace_id, not both",
                ))
            }
            (None, _) => t.workspace_or(source),
        };
        let mut opts = ForkOptions {
            files: o.files,
            workspace: target,
            source,
            new_thread_id: o.new_thread_id.map(ThreadId::new),
            dry_run: o.dry_run,
            force: o.force,
            replace: o.replace,
            metadata: o.metadata.unwrap_or_else(|| serde_json::json!({})),
            ..ForkOptions::default()
        };
        if let Some(v) = ms(o.tool_settle_ms) {
            opts.tool_settle = v;
        }
        if let Some(v) = ms(o.lease_wait_ms) {
            opts.lease_wait = v;
        }
        out.json(&t.threads.fork(&id, &entry, &opts)?)
    })
}
