//! Workspaces, snapshots, restores and holds across the boundary.

use crate::boundary::*;
use crate::json::{self, ChangeOut, KeptOut, SnapshotOut, TakenOut};
use cairn_restore::{ApplyOptions, Context, PlanOptions, Report, Workspace, WorkspaceOptions};
use cairn_store::RelPath;
use std::ffi::{c_void, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A workspace handle: a root and the store that keeps its snapshots. Thread-safe: every
/// function taking `const cairn_workspace *` may be called from several threads at once.
pub struct cairn_workspace {
    pub(crate) ws: std::sync::Arc<Workspace>,
}

/// A hold on a workspace: while it stands, restores are refused with `CAIRN_ERR_BUSY`.
pub struct cairn_hold {
    _hold: cairn_restore::Hold,
}

/// A restore options document, split as the Rust API takes it.
struct RestoreCall {
    /// Plan only (the dry run is a plan).
    dry_run: bool,
    planning: PlanOptions,
    applying: ApplyOptions,
    /// The `on_drift` the document gave, if it gave one.
    on_drift: Option<cairn_restore::DriftPolicy>,
    cancel: Option<cairn_store::CancelToken>,
}

impl RestoreCall {
    /// The call's context: its cancel token.
    fn ctx(&self) -> Context<'static> {
        Context::with_cancel(self.cancel.clone())
    }
}

fn restore_options(bytes: &[u8], cancel: Option<&cairn_cancel>) -> FfiResult<RestoreCall> {
    let o: json::RestoreJson = json::parse(bytes, "restore options")?;
    Ok(RestoreCall {
        dry_run: o.dry_run,
        planning: PlanOptions {
            reference: match o.reference {
                Some(r) => Some(cairn_store::SnapshotId::from_hex(&r)?),
                None => None,
            },
            on_drift: o.on_drift.unwrap_or_default(),
            paths: chosen_paths(&o.paths)?,
        },
        applying: ApplyOptions::with_key(o.key),
        on_drift: o.on_drift,
        cancel: cancel.map(|c| c.token.clone()),
    })
}

/// The `"paths"` of an options document: relative to the workspace root, checked.
pub(crate) fn chosen_paths(paths: &[String]) -> FfiResult<Vec<RelPath>> {
    let given: Vec<RelPath> = paths.iter().map(|p| RelPath::from(p.as_str())).collect();
    Ok(cairn_restore::normalize_paths(&given)?)
}

/// Opens (creating its store if needed) the workspace at `root`. `options_json` may be empty:
/// `{"store": path, "id": str, "excludes": [glob], "max_file_bytes": n, "gitignore": bool,
/// "refuse_hard_links": bool, "retain": {"count": n, "max_age_ms": n, "max_total_bytes": n},
/// "gc_grace_ms": n, "recover": bool, "remote": url, "remote_options": {...}}`. Pending
/// restores a crash interrupted are completed (see `cairn_workspace_info`). Without `"store"`
/// the store is `$CAIRN_STORE`, else a `<root>/.cairn` an earlier version made, else the
/// workspace's store in the user's data directory (`$CAIRN_HOME`, else `$XDG_DATA_HOME/cairn`,
/// else `~/.local/share/cairn`), outside the workspace. A root inside a Cairn store is refused
/// with `CAIRN_ERR_DENIED`.
///
/// `"remote"` names a remote object store that holds the snapshots (`s3://bucket/prefix`,
/// `gs://bucket/prefix`, `az://container/prefix`, `file:///path`); the store directory is then
/// this machine's cache of it. `"remote_options"`: `{"endpoint": url, "region": str,
/// "access_key_id": str, "secret_access_key": str, "allow_http": bool, "connect_timeout_ms": n,
/// "request_timeout_ms": n, "max_retries": n, "retry_timeout_ms": n, "lease_ttl_ms": n,
/// "extra": {key: value}}`; unset fields come from `AWS_ENDPOINT`, `AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, ... An unreachable endpoint fails with
/// `CAIRN_ERR_IO`, refused credentials with `CAIRN_ERR_DENIED`, within seconds; messages name
/// the URL, never a key.
///
/// # Safety
/// Pointers must be valid for their lengths; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_open(
    root: *const u8,
    root_len: usize,
    options_json: *const u8,
    options_len: usize,
    out: *mut *mut cairn_workspace,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let out = arg!(out out);
        let root = arg!(bytes root, root_len, "root");
        if root.is_empty() {
            return Err(FfiError::invalid("root must not be empty"));
        }
        let o: json::OpenJson = arg!(options options_json, options_len, "workspace options");
        let mut options = WorkspaceOptions {
            store: o.store.map(PathBuf::from),
            id: o.id,
            retain: o.retain.map(|r| r.to_retention()),
            ..WorkspaceOptions::default()
        };
        o.capture.apply_to(&mut options.capture);
        if let Some(v) = o.gc_grace_ms {
            options.gc.grace = std::time::Duration::from_millis(v);
        }
        if let Some(v) = o.recover {
            options.recover = v;
        }
        match (&o.remote, &o.remote_options) {
            (Some(url), remote) => {
                let remote = remote.as_ref().map(|r| r.to_options()).unwrap_or_default();
                options.store_options = cairn_remote::store_options(url, &remote)?;
            }
            (None, Some(_)) => {
                return Err(FfiError::invalid(
                    "remote_options were given without a remote: add \"remote\": \"s3://bucket/prefix\" (or gs://, az://, file://)",
                ))
            }
            (None, None) => {}
        }
        let ws = Workspace::open(PathBuf::from(OsStr::from_bytes(root)), options)?;
        out.put(cairn_workspace {
            ws: std::sync::Arc::new(ws),
        })
    })
}

/// Frees a workspace handle. NULL is accepted. No call may still be using it.
///
/// # Safety
/// `ws` must be NULL or a live handle not in use.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_free(ws: *mut cairn_workspace) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(ws, "a workspace") }
}

/// Starts a watcher of the workspace inside this process (inotify on every directory, as
/// `cairn watch` does in a process of its own): from then on each snapshot of this handle
/// looks only at the directories that changed since the one before (where the events
/// named the entries that changed, only at those), and says so in its `walk`
/// (`{"walked": "full" | "partial" | "none", "reason", "listed", "named"}`). `options_json` may be
/// empty: `{"max_watches": n}` (directories past it are walked by every snapshot). Replaces a
/// watcher started before. Writes the watcher's status (`{"root", "watches", "unwatched",
/// "changed", "overflows", "queries", "gone", "table_bytes"}`). Refused
/// (`CAIRN_ERR_UNSUPPORTED`) on a file system inotify cannot watch (NFS, SMB, FUSE):
/// snapshots there walk.
///
/// # Safety
/// `ws` a live handle; `options_json` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_watch(
    ws: *const cairn_workspace,
    options_json: *const u8,
    options_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let o: json::WatchJson = arg!(options options_json, options_len, "watch options");
        let watcher = w.watch(&cairn_snapshot::WatchOptions {
            max_watches: o.max_watches,
            ..cairn_snapshot::WatchOptions::default()
        })?;
        out.json(&watcher.status())
    })
}

/// Stops the watcher `cairn_workspace_watch` started in this process (snapshots walk again,
/// or ask a `cairn watch` daemon). Does nothing when none runs.
///
/// # Safety
/// `ws` a live handle; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_unwatch(
    ws: *const cairn_workspace,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        arg!(handle ws, "workspace").ws.unwatch();
        Ok(())
    })
}

/// `{"id", "root", "store", "store_home", "recovered": [...], "remote"}` of a workspace.
/// `store_home` says why the store is where it is: `"given"` (the `store` option), `"env"`
/// (`$CAIRN_STORE`), `"data"` (the default: the user's data directory, outside the workspace)
/// or `"legacy"` (a `<root>/.cairn` an earlier version made). `remote` is the remote store the
/// store caches (`s3://bucket/prefix`, never with credentials), or null.
///
/// # Safety
/// `ws` a live handle; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_info(
    ws: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let doc = json::WorkspaceInfoOut {
            id: w.id(),
            root: RelPath(w.root().as_os_str().as_bytes().to_vec()),
            store: RelPath(w.store().path().as_os_str().as_bytes().to_vec()),
            store_home: w.store_home(),
            recovered: w.recovered(),
            remote: w.store().remote().map(|r| r.location()),
        };
        out.json(&doc)
    })
}

/// Takes a snapshot. `options_json` may be empty: `{"label": str, "metadata": {...},
/// "excludes": [glob], "max_file_bytes": n, "gitignore": bool, "refuse_hard_links": bool,
/// "protect": bool, "use_stat_cache": bool}`. `progress` (may be NULL) runs on this thread;
/// `cancel` may be NULL. Writes the snapshot as JSON (`id`, `label`, `stats`, `skipped`,
/// `kept`, ...) to `out`.
///
/// # Safety
/// `ws` a live handle; pointers valid for their lengths; `out` writable; `err_out` NULL or
/// writable; `cancel` NULL or a live token.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_snapshot(
    ws: *const cairn_workspace,
    options_json: *const u8,
    options_len: usize,
    progress: cairn_progress_cb,
    userdata: *mut c_void,
    cancel: *const cairn_cancel,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let o: json::SnapshotJson = arg!(options options_json, options_len, "snapshot options");
        let mut opts = w.snapshot_options();
        opts.label = o.label;
        opts.metadata = o.metadata.unwrap_or_default();
        o.capture.apply_to(&mut opts.capture);
        opts.protect = o.protect;
        if let Some(v) = o.use_stat_cache {
            opts.use_stat_cache = v;
        }
        let mut cb = |p: &cairn_snapshot::Progress| -> bool {
            let Some(f) = progress else { return true };
            let cp = cairn_progress {
                files: p.files,
                dirs: p.dirs,
                hashed: p.hashed,
                hashed_bytes: p.hashed_bytes,
            };
            // SAFETY: the caller's callback, called on its own thread with its userdata.
            unsafe { f(userdata, &cp) == 0 }
        };
        let ctx = Context {
            cancel: arg!(maybe cancel).map(|c| c.token.clone()),
            progress: progress.map(|_| &mut cb as cairn_snapshot::ProgressFn<'_>),
            ..Context::default()
        };
        let outcome = w.snapshot(&opts, ctx)?;
        let s = &outcome.snapshot;
        let doc = TakenOut {
            snapshot: SnapshotOut::new(s.id, &s.manifest),
            kept: s
                .kept
                .iter()
                .map(|k| KeptOut {
                    path: RelPath(k.path.clone()),
                    reason: k.reason,
                    is_dir: k.is_dir,
                })
                .collect(),
            prune_error: outcome.prune.and_then(|r| r.err()),
            walk: s.walk.clone(),
        };
        out.json(&doc)
    })
}

/// Lists the workspace store's snapshots, oldest first, as a JSON array.
///
/// # Safety
/// `ws` a live handle; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_list(
    ws: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let (list, _) = w.store().list_snapshots()?;
        let docs: Vec<SnapshotOut> = list
            .iter()
            .map(|e| SnapshotOut::new(e.id, &e.manifest))
            .collect();
        out.json(&docs)
    })
}

/// Shows one snapshot, named by id, unique prefix (4+ hex characters) or label.
///
/// # Safety
/// `ws` a live handle; `name` valid for `name_len`; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_show(
    ws: *const cairn_workspace,
    name: *const u8,
    name_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let id = w.store().resolve(arg!(text name, name_len, "name"))?;
        let m = w.store().read_manifest(&id)?;
        out.json(&SnapshotOut::new(id, &m))
    })
}

/// Differences from snapshot `a` to snapshot `b`, or to the live workspace when `b` is empty,
/// as a JSON array of `{"path", "kind", "old", "new"}`.
///
/// # Safety
/// `ws` a live handle; names valid for their lengths; `out` writable; `err_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_diff(
    ws: *const cairn_workspace,
    a: *const u8,
    a_len: usize,
    b: *const u8,
    b_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    // SAFETY: the same contract.
    unsafe { cairn_workspace_diff_with(ws, a, a_len, b, b_len, std::ptr::null(), 0, out, err_out) }
}

/// [`cairn_workspace_diff`] with options: `options_json` may be empty, or
/// `{"attribute": bool}`. With `"attribute": true` every change carries `"attribution"`: the
/// checkpoint intervals between `a` and `b` (cut by the workspace's snapshots taken between
/// them) the path changed in, oldest first, each `{"from", "to", "label", "checkpoint_kind"?,
/// "thread_id"?, "tool_use_id"?, "tool_name"?, "agent_id"?}`: what the checkpoint opening the
/// interval recorded of the tool call or subagent about to run (a shell command is the Bash
/// call that ran it).
///
/// # Safety
/// `ws` a live handle; names and `options_json` valid for their lengths; `out` writable;
/// `err_out` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cairn_workspace_diff_with(
    ws: *const cairn_workspace,
    a: *const u8,
    a_len: usize,
    b: *const u8,
    b_len: usize,
    options_json: *const u8,
    options_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let options: json::DiffJson = arg!(options options_json, options_len, "diff options");
        let a = w.store().resolve(arg!(text a, a_len, "a"))?;
        let b = arg!(text b, b_len, "b");
        let b = if b.is_empty() {
            None
        } else {
            Some(w.store().resolve(b)?)
        };
        let changes = match &b {
            None => cairn_snapshot::diff_workspace(w.store(), w.root(), w.id(), &a)?,
            Some(b) => cairn_snapshot::diff_snapshots(w.store(), &a, b)?,
        };
        let attributions = if options.attribute {
            cairn_rewind::attribute_changes(w.store(), Some(w.as_ref()), a, b, &changes)?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None; changes.len()]
        };
        let docs: Vec<ChangeOut> = changes
            .into_iter()
            .zip(attributions)
            .map(|(c, attribution)| ChangeOut {
                path: RelPath(c.path),
                kind: c.kind,
                old: c.old,
                new: c.new,
                attribution,
            })
            .collect();
        out.json(&docs)
    })
}

/// Deletes a snapshot and collects garbage; writes the prune report as JSON.
///
/// # Safety
/// `ws` a live handle; `name` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_delete(
    ws: *const cairn_workspace,
    name: *const u8,
    name_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let id = w.store().resolve(arg!(text name, name_len, "name"))?;
        let report = w.store().delete_snapshot(&id, &w.options().gc)?;
        out.json(&report)
    })
}

/// Applies a retention (`{"count": n, "max_age_ms": n, "max_total_bytes": n}`) and collects;
/// writes the prune report as JSON.
///
/// # Safety
/// `ws` a live handle; `retain_json` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_prune(
    ws: *const cairn_workspace,
    retain_json: *const u8,
    retain_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let r: json::RetainJson = arg!(options retain_json, retain_len, "retention", "retain");
        let report = w.store().prune(&r.to_retention(), &w.options().gc)?;
        out.json(&report)
    })
}

/// Collects garbage (`{"grace_ms": n, "clock_skew_ms": n, "dry_run": bool}`, may be empty);
/// writes the report (or, for a dry run, the plan) as JSON. On a workspace whose store caches
/// a remote, the remote's collector runs instead (unreachable objects are marked in one run and
/// deleted in a later one at least `grace_ms` after, default an hour; `clock_skew_ms` is how far
/// the machines' clocks may differ, default a minute): the report is then
/// `{"bytes_freed": n, "remote": {"snapshots", "reachable_objects", "candidates",
/// "packs_deleted", "large_deleted", "bytes_freed", ...}}`, a dry run deleting nothing.
///
/// # Safety
/// `ws` a live handle; `options_json` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_gc(
    ws: *const cairn_workspace,
    options_json: *const u8,
    options_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let o: json::GcJson = arg!(options options_json, options_len, "gc options");
        if w.store().remote().is_some() {
            let mut options = cairn_store::RemoteGcOptions {
                dry_run: o.dry_run,
                ..Default::default()
            };
            if let Some(g) = o.grace_ms {
                options.grace = std::time::Duration::from_millis(g);
            }
            if let Some(s) = o.clock_skew_ms {
                options.clock_skew = std::time::Duration::from_millis(s);
            }
            let report = w.store().collect_remote(&options)?;
            let doc = json::RemoteGcOut {
                bytes_freed: report.bytes_freed,
                remote: &report,
            };
            return out.json(&doc);
        }
        if o.clock_skew_ms.is_some() {
            return Err(FfiError::invalid(
                "clock_skew_ms applies to the collector of a remote store; this workspace's store caches none",
            ));
        }
        let mut gc = w.options().gc.clone();
        if let Some(g) = o.grace_ms {
            gc.grace = std::time::Duration::from_millis(g);
        }
        if o.dry_run {
            out.json(&cairn_store::gc::plan(w.store(), &gc)?)
        } else {
            out.json(&w.store().gc(&gc)?)
        }
    })
}

/// Shrinks the cache of a remote store to at most `max_bytes` of packs and large objects the
/// remote holds, least recently used first (they are downloaded again when next read); files
/// the remote does not hold yet are never removed. Writes `{"removed_files", "removed_bytes",
/// "cached_bytes"}`. `CAIRN_ERR_UNSUPPORTED` when the store caches no remote.
///
/// # Safety
/// `ws` a live handle; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_trim_cache(
    ws: *const cairn_workspace,
    max_bytes: u64,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let report = w.store().trim_cache(max_bytes)?;
        out.json(&report)
    })
}

/// Verifies the store: every object re-hashed, every tree and manifest decoded; writes the
/// report as JSON (`ok` says whether all is well).
///
/// # Safety
/// `ws` a live handle; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_verify(
    ws: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let report = w.store().verify()?;
        let doc = json::VerifyOut {
            report: &report,
            ok: report.is_ok(),
        };
        out.json(&doc)
    })
}

/// Copies a snapshot with its objects into the store of workspace `to`; idempotent.
///
/// # Safety
/// `ws`, `to` live handles; `name` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_copy(
    ws: *const cairn_workspace,
    name: *const u8,
    name_len: usize,
    to: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let t = &arg!(handle to, "to").ws;
        let out = arg!(out out);
        let id = w.store().resolve(arg!(text name, name_len, "name"))?;
        let report = w.store().copy_snapshot_to(&id, t.store())?;
        out.json(&report)
    })
}

/// Plans restoring a snapshot (the dry run): writes the plan as JSON. Options as for
/// `cairn_workspace_restore`.
///
/// # Safety
/// `ws` a live handle; inputs valid; `out` writable; `err_out` NULL or writable; `cancel` NULL
/// or live.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_plan(
    ws: *const cairn_workspace,
    name: *const u8,
    name_len: usize,
    options_json: *const u8,
    options_len: usize,
    cancel: *const cairn_cancel,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let id = w.store().resolve(arg!(text name, name_len, "name"))?;
        let opts = restore_options(
            arg!(bytes options_json, options_len, "options"),
            arg!(maybe cancel),
        )?;
        let plan = w.plan(&id, &opts.planning, opts.ctx())?;
        out.json(&plan)
    })
}

/// Applies a plan made by `cairn_workspace_plan` (its JSON, unchanged); writes the report.
/// Options as for `cairn_workspace_restore` (`dry_run`, `reference` and `paths` come from the
/// plan); without `"on_drift"` the plan's own is used.
///
/// # Safety
/// `ws` a live handle; inputs valid; `out` writable; `err_out` NULL or writable; `cancel` NULL
/// or live.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_apply(
    ws: *const cairn_workspace,
    plan_json: *const u8,
    plan_len: usize,
    options_json: *const u8,
    options_len: usize,
    cancel: *const cairn_cancel,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let plan_bytes = arg!(bytes plan_json, plan_len, "plan");
        let mut plan: cairn_restore::Plan = serde_json::from_slice(plan_bytes)
            .map_err(|e| FfiError::invalid(format!("the plan is not a plan document: {e}")))?;
        let option_bytes = arg!(bytes options_json, options_len, "options");
        let opts = restore_options(option_bytes, arg!(maybe cancel))?;
        // Without an `on_drift` of its own, the plan is checked again as it was made.
        if let Some(policy) = opts.on_drift {
            plan.on_drift = policy;
        }
        let report = w.apply(&plan, &opts.applying, opts.ctx())?;
        out.json(&report)
    })
}

/// Restores a snapshot: plans, then (unless `"dry_run": true`) applies. Options, may be empty:
/// `{"dry_run": bool, "reference": id, "on_drift": "overwrite"|"refuse"|"keep" (or "skip"),
/// "key": str, "paths": [path]}`: `paths` restores only those files and directories (relative
/// to the root; everything else is left as it is), `reference` is the snapshot drift is checked
/// against. Writes the report as JSON (`restored`, `deleted`, `unchanged`, `kept`, `busy`,
/// `drifted`, `paths`, `safety_snapshot_id`, ...). Returns once every change is made; `cairn_workspace_recover`
/// waits for the disk to have them.
///
/// # Safety
/// `ws` a live handle; inputs valid; `out` writable; `err_out` NULL or writable; `cancel` NULL
/// or live.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_restore(
    ws: *const cairn_workspace,
    name: *const u8,
    name_len: usize,
    options_json: *const u8,
    options_len: usize,
    cancel: *const cairn_cancel,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let id = w.store().resolve(arg!(text name, name_len, "name"))?;
        let opts = restore_options(
            arg!(bytes options_json, options_len, "options"),
            arg!(maybe cancel),
        )?;
        let report = if opts.dry_run {
            Report::dry_run(&w.plan(&id, &opts.planning, opts.ctx())?)
        } else {
            w.restore(&id, &opts.planning, &opts.applying, opts.ctx())?
        };
        out.json(&report)
    })
}

/// Completes restores a crash left pending; writes what it did as JSON. It also makes the
/// changes of finished restores durable (a restore returns once its changes are made, before
/// the disk has them; the next snapshot, restore or opening does this anyway).
///
/// # Safety
/// `ws` a live handle; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_recover(
    ws: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    // SAFETY: per the contract.
    unsafe { recoveries(ws, out, err_out, Workspace::recover) }
}

/// Finishes what `cairn_workspace_recover` can of every interrupted restore, then gives up
/// those it cannot finish (paths obstructed by later edits, or that may not be changed): each
/// is ended as it stands and reported with `"abandoned": true` and the paths left as they
/// are. Its safety snapshot still holds the files as they were. Writes the recoveries as JSON.
///
/// # Safety
/// `ws` a live handle; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_give_up(
    ws: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    // SAFETY: per the contract.
    unsafe { recoveries(ws, out, err_out, Workspace::give_up) }
}

/// `cairn_workspace_recover` and `cairn_workspace_give_up`: runs `f` on the workspace and writes
/// the recoveries it returns as JSON.
///
/// # Safety
/// As those functions.
unsafe fn recoveries(
    ws: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
    f: fn(&Workspace) -> cairn_restore::Result<Vec<cairn_restore::Recovery>>,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let r = f(w)?;
        out.json(&r)
    })
}

/// Takes a hold named `what`; `pid` >= 0 makes it last until that process exits too. Refused
/// with `CAIRN_ERR_BUSY` while a restore changes files.
///
/// # Safety
/// `ws` a live handle; `what` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_workspace_hold(
    ws: *const cairn_workspace,
    what: *const u8,
    what_len: usize,
    pid: i64,
    out: *mut *mut cairn_hold,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let w = &arg!(handle ws, "workspace").ws;
        let out = arg!(out out);
        let what = arg!(text what, what_len, "what");
        let pid = u32::try_from(pid).ok();
        out.put(cairn_hold {
            _hold: w.hold(what, pid)?,
        })
    })
}

/// Releases a hold. NULL is accepted.
///
/// # Safety
/// `hold` must be NULL or a live hold.
#[no_mangle]
pub unsafe extern "C" fn cairn_hold_free(hold: *mut cairn_hold) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(hold, "a hold") }
}
