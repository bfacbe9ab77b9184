//! Applying a plan: holds checked, a safety snapshot taken, the plan re-checked against it, a
//! journal synced, every new content staged and verified, then removals, creations and modes
//! in dependency order, all through directory descriptors (see `safe`).
//!
//! # Handling the return value
//! `Ok(report)`: the workspace now holds the snapshot (except what `kept` lists);
//! `report.safety_snapshot_id` undoes it. `Err` before any change (`BUSY`, `DENIED`,
//! `CONFLICT`, `IO` for a corrupt object, `CANCELLED`): nothing changed. `Err` after changes
//! began (a failing disk, a directory swapped under us): the journal stays pending and the
//! safety snapshot is kept; [`crate::Workspace::recover`] (also run when the workspace is next opened)
//! completes it, or the safety snapshot undoes it.

use crate::error::{Error, Result};
use crate::exec::{Exec, Mode};
use crate::hold;
use crate::journal::{self, State};
use crate::plan::{self, Current, Plan, PlanOptions};
use crate::report::Report;
use crate::site::Site;
use crate::watched;
use cairn_snapshot::{Context, Walked};
use cairn_store::{fsutil, CancelToken, OperationKind, RelPath, SnapshotId, Tree, TreeId};

/// How a plan is applied (what planning decides is in [`PlanOptions`], kept in the plan).
/// `Default` is the safest choice. Applying always changes files: a dry run is a plan.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// An idempotency key: repeating a finished key returns the earlier report (without its
    /// `safety_walk`: the repeat walked nothing).
    pub key: Option<String>,
    /// Test hook (feature `test-hooks`, for crash tests only): the process kills itself with
    /// SIGKILL after this many operations.
    #[cfg(feature = "test-hooks")]
    pub crash_after_ops: Option<usize>,
    /// Test hook (feature `test-hooks`): the restore stops after this many operations with
    /// an error, its journal left pending as a death there leaves it (what a `cairn watch`
    /// daemon killed mid-restore leaves; see `watch::dying`).
    #[cfg(feature = "test-hooks")]
    pub stop_after_ops: Option<usize>,
}

impl ApplyOptions {
    /// Options with the idempotency key `key`, the rest as by default (what a caller outside
    /// the tests sets: the other field exists only with `test-hooks`).
    pub fn with_key(key: Option<String>) -> Self {
        ApplyOptions {
            key,
            #[cfg(feature = "test-hooks")]
            crash_after_ops: None,
            #[cfg(feature = "test-hooks")]
            stop_after_ops: None,
        }
    }

    /// Whether the restore must run in the calling process: a crash test's hook kills that
    /// process (a restore handed to the `cairn watch` daemon would not).
    pub(crate) fn bound_to_process(&self) -> bool {
        self.crash_after_ops().is_some()
    }

    /// After how many operations the process kills itself (never without `test-hooks`).
    fn crash_after_ops(&self) -> Option<usize> {
        #[cfg(feature = "test-hooks")]
        return self.crash_after_ops;
        #[cfg(not(feature = "test-hooks"))]
        None
    }
}

/// Applies `plan` (see the module documentation for what the result means); `ctx` watches
/// and steers the walk of its safety snapshot.
pub(crate) fn apply(
    ws: &Site,
    plan: &Plan,
    options: &ApplyOptions,
    ctx: Context<'_>,
) -> Result<Report> {
    guarded_restore(ws, PlanSource::Earlier(plan), options, ctx)
        .map_err(|e| crate::error::missing_object_is_damage(ws.store(), &plan.snapshot_id, e))
}

/// Where a restore's plan comes from.
enum PlanSource<'p> {
    /// A plan made earlier: the safety snapshot is taken now, and the plan checked against it.
    Earlier(&'p Plan),
    /// No plan yet: the safety snapshot's own walk is what the plan is made from (with these
    /// options), and the snapshot is kept only if the plan changes something.
    SafetyWalk(SnapshotId, &'p PlanOptions),
}

/// The snapshot whose files the workspace held once Cairn was done at the moment `snap` was
/// taken: a safety snapshot of a whole restore (`"cairn": "safety"`, `"restoring": ID`, no
/// `paths`) was followed by that restore, so the files were then its target; any other
/// snapshot stands for itself. What a drift check compares with: after a rewind, the files
/// it put back are the thread's, not someone else's edits. A manifest that cannot be read
/// stands for itself.
pub fn files_after(store: &cairn_store::Store, snap: &SnapshotId) -> SnapshotId {
    let Ok(m) = store.read_manifest(snap) else {
        return *snap;
    };
    let Ok(meta) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&m.metadata)
    else {
        return *snap;
    };
    if meta.get("cairn").and_then(|v| v.as_str()) != Some("safety") || meta.contains_key("paths") {
        return *snap;
    }
    meta.get("restoring")
        .and_then(|v| v.as_str())
        .and_then(|hex| hex.parse::<SnapshotId>().ok())
        .filter(|target| store.has_snapshot(target))
        .unwrap_or(*snap)
}

/// The snapshot options of a safety snapshot before restoring `target`: the target's own
/// capture settings, so it keeps every path the plan changes or deletes.
///
/// With chosen paths it is still a snapshot of the whole workspace (outside them the files are
/// the same before and after the restore), its metadata naming them under `paths`: restoring
/// it with those paths undoes exactly the restore.
fn safety_options(
    ws: &Site,
    capture: &cairn_store::CaptureSettings,
    target: &SnapshotId,
    paths: &[RelPath],
) -> cairn_snapshot::Options {
    let mut sopts = cairn_snapshot::Options {
        capture: capture.clone(),
        ..cairn_snapshot::Options::default()
    };
    sopts.own_files = ws.own_files();
    sopts.label = Some(format!("safety before restoring {}", target.short()));
    if !paths.is_empty() {
        sopts.metadata.insert(
            "paths".into(),
            serde_json::json!(paths
                .iter()
                .map(|p| String::from_utf8_lossy(&p.0).into_owned())
                .collect::<Vec<_>>()),
        );
    }
    sopts
        .metadata
        .insert("cairn".into(), serde_json::json!("safety"));
    sopts
        .metadata
        .insert("restoring".into(), serde_json::json!(target.to_hex()));
    sopts
}

/// A restore under guard: a finished idempotency key answers with its report; else, under the
/// workspace's restore lock, a pending journal is finished first, holds are checked, the
/// safety snapshot taken (and a plan made earlier checked against it), the journal written,
/// every content staged, and the plan carried out.
fn guarded_restore(
    ws: &Site,
    source: PlanSource<'_>,
    options: &ApplyOptions,
    ctx: Context<'_>,
) -> Result<Report> {
    let cancel = ctx.cancel.clone();
    let cancelled = || cancel.as_ref().is_some_and(CancelToken::is_cancelled);
    if let Some(key) = &options.key {
        if let Some(j) = journal::read(ws, &journal::journal_id(Some(key)))? {
            if let (true, Some(report)) = (j.finished(), j.report) {
                return Ok(report);
            }
        }
    }
    // The restore lock is taken before any journal is looked at: recovery runs only under it,
    // so no two processes ever carry out the same journal.
    let lock_path = ws.restore_lock_path();
    let Some(lock) = fsutil::try_lock_exclusive(&lock_path)? else {
        return Err(Error::Busy {
            detail: "another restore of this workspace is running, or a hold is being taken".into(),
        });
    };
    if let Some(key) = &options.key {
        if let Some(j) = journal::read(ws, &journal::journal_id(Some(key)))? {
            if let (true, Some(report)) = (j.finished(), &j.report) {
                return Ok(report.clone());
            }
            if j.state == State::Staging {
                // The same key died while staging: nothing changed; start afresh.
                journal::abandon(ws, &j)?;
            } else {
                // The same key left pending by a crash: finish it, and report as it would have.
                let id = j.id.clone();
                let r = journal::recover_one(ws, j)?;
                if !r.completed {
                    return Err(obstruction(ws, std::slice::from_ref(&r)));
                }
                if let Some(report) = journal::read(ws, &id)?.and_then(|j| j.report) {
                    return Ok(report);
                }
            }
        }
    }
    let target = match source {
        PlanSource::Earlier(p) => p.snapshot_id,
        PlanSource::SafetyWalk(id, _) => id,
    };
    // A restore a crash or a failure left pending must be finished first, unless this one is
    // its undo: restoring its safety snapshot, the files as they were before it. Then it is
    // given up (ended as it stands) and the undo goes on, its own safety snapshot keeping what
    // the unfinished restore had changed (issue 53: the undo its error names was refused
    // until `cairn recover --give-up`).
    let stuck: Vec<journal::Recovery> = journal::recover_locked(ws)?
        .into_iter()
        .filter(|r| !r.completed)
        .collect();
    if !stuck.is_empty() {
        if stuck.iter().all(|r| r.safety == Some(target)) {
            journal::give_up_locked(ws)?;
        } else {
            return Err(obstruction(ws, &stuck));
        }
    }
    let holds = hold::list(ws)?;
    if !holds.is_empty() {
        return Err(Error::Busy {
            detail: format!(
                "held by {}",
                holds
                    .iter()
                    .map(|h| match h.pid {
                        Some(pid) => format!("{} (process {pid})", h.what),
                        None => h.what.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    if cancelled() {
        return Err(Error::Cancelled);
    }
    let _op = ws
        .store()
        .begin_operation(OperationKind::Restore, &[target])?;
    let (plan, safety) = match source {
        PlanSource::Earlier(plan) => match planned_safety(ws, plan, ctx)? {
            Some(safety) => (std::borrow::Cow::Borrowed(plan), safety),
            None => return Ok(Report::from_plan(plan, false, None, None)),
        },
        PlanSource::SafetyWalk(id, planning) => {
            let store = ws.store();
            let manifest = store.read_manifest(&id)?;
            let paths = plan::normalize_paths(&planning.paths)?;
            let sopts = safety_options(ws, &manifest.capture, &id, &paths);
            let tree = |id: &TreeId| -> Result<Tree> { Ok(store.read_tree(id)?) };
            let walked = checked_walk(
                ws,
                &sopts,
                ctx,
                |prepared| {
                    plan::against(
                        ws,
                        id,
                        &manifest,
                        Current {
                            root: prepared.root(),
                            trees: &tree,
                            kept: Current::from_walk(prepared.kept(), prepared.skipped()),
                        },
                        planning.reference.as_ref(),
                        planning.on_drift,
                        &paths,
                    )
                },
                |prepared, made| {
                    (!made.is_noop())
                        .then(|| watched::unseen_change(ws.root(), prepared, made))
                        .flatten()
                },
            )?;
            if walked.made.is_noop() {
                // Nothing to change: no safety snapshot (the prepared one is dropped).
                return Ok(Report::from_plan(&walked.made, false, None, None));
            }
            let safety = commit_safety(walked.prepared, walked.missed)?;
            (std::borrow::Cow::Owned(walked.made), safety)
        }
    };
    if cancelled() {
        drop_safety(ws, &safety.id);
        return Err(Error::Cancelled);
    }
    let jid = journal::journal_id(options.key.as_deref());
    let mut exec = Exec::new(ws, &jid, Mode::Apply, options.crash_after_ops())?;
    #[cfg(feature = "test-hooks")]
    exec.stop_after(options.stop_after_ops);
    // Stage (and verify) before the journal makes the restore pending, so a corrupt object
    // fails with nothing changed and nothing to recover. The journal is written first in the
    // staging state, so that staged files a crash leaves behind are found and removed.
    let mut j = journal::Live::create(ws, &jid, options.key.as_deref(), &safety.id, &plan)?;
    if let Err(e) = exec.stage_plan(&plan) {
        exec.unstage();
        let _ = j.remove(ws);
        drop_safety(ws, &safety.id);
        return Err(e);
    }
    // What is staged reaches the disk before the journal says pending (issue 57); before the
    // clocks are read, which takes the list of directories staged in.
    if let Err(e) = exec.sync_staged() {
        exec.unstage();
        let _ = j.remove(ws);
        drop_safety(ws, &safety.id);
        return Err(e);
    }
    exec.read_clocks();
    if let Err(e) = j.advance(ws, State::Pending, true) {
        exec.unstage();
        let _ = j.remove(ws);
        drop_safety(ws, &safety.id);
        return Err(e);
    }
    if let Err(e) = exec.carry_out(&plan) {
        exec.unstage();
        return Err(Error::Unfinished {
            source: Box::new(e),
            journal: jid,
            safety: safety.id,
        });
    }
    // Every change is made. Durability is confirmed by the next snapshot, restore or opening of the
    // workspace (see the journal module), not waited for here.
    j.advance(ws, State::Applied, false)?;
    // The files it wrote go into the stat cache, while the restore lock is still held.
    exec.prime(&plan);
    drop(lock);
    // A plan made here gives the report its lists rather than a copy of them (issue 56: at
    // 500k files, 41 MB more at the end of the restore).
    let mut report = match plan {
        std::borrow::Cow::Owned(plan) => Report::of_plan(plan, Some(safety.id), jid),
        std::borrow::Cow::Borrowed(plan) => {
            Report::from_plan(plan, false, Some(safety.id), Some(jid))
        }
    };
    report.safety_walk = Some(safety.walk);
    Ok(report)
}

/// A safety snapshot's walk, not yet committed, with what was made from it.
struct Checked<'s, T> {
    prepared: cairn_snapshot::Prepared<'s>,
    made: T,
    /// The path that showed a watcher had missed a change, when the walk was taken again.
    missed: Option<RelPath>,
}

/// Walks the workspace for a safety snapshot with `sopts` and `ctx` and makes `made_of` it.
/// When a watcher spared the walk, `unseen` checks the plan against the walk's records (see
/// [`crate::watched`]): a path it names was not as recorded, so the watcher missed a change
/// and the walk is taken again, whole.
fn checked_walk<'s, T>(
    ws: &'s Site,
    sopts: &cairn_snapshot::Options,
    ctx: Context<'_>,
    mut made_of: impl FnMut(&cairn_snapshot::Prepared<'s>) -> Result<T>,
    unseen: impl Fn(&cairn_snapshot::Prepared<'s>, &T) -> Option<RelPath>,
) -> Result<Checked<'s, T>> {
    let mut ctx = ws.walk_context(ctx);
    let mut missed = None;
    loop {
        let prepared =
            cairn_snapshot::prepare(ws.store(), ws.root(), ws.id(), sopts, reborrow(&mut ctx))?;
        let made = made_of(&prepared)?;
        let missed_at = match prepared.walk().walked {
            Walked::Full => None,
            Walked::Partial | Walked::None => unseen(&prepared, &made),
        };
        match missed_at {
            None => {
                return Ok(Checked {
                    prepared,
                    made,
                    missed,
                })
            }
            Some(path) => {
                missed = Some(path);
                ctx.watch = None;
            }
        }
    }
}

/// Commits a safety snapshot's walk; its walk's reason names `missed` when a watcher's miss
/// made it walk whole.
fn commit_safety(
    prepared: cairn_snapshot::Prepared<'_>,
    missed: Option<RelPath>,
) -> Result<cairn_snapshot::Snapshot> {
    let mut safety = prepared.commit()?;
    if let Some(path) = missed {
        safety.walk.reason = Some(format!(
            "the watcher had not reported a change to {}: walked whole",
            String::from_utf8_lossy(&path.0)
        ));
    }
    Ok(safety)
}

/// `ctx` again, for one more walk: its progress callback lent, nothing to hand a snapshot to.
fn reborrow<'b>(ctx: &'b mut Context<'_>) -> Context<'b> {
    Context {
        cancel: ctx.cancel.clone(),
        progress: match &mut ctx.progress {
            Some(p) => Some(&mut **p),
            None => None,
        },
        threads: ctx.threads,
        taken: None,
        memo: ctx.memo.clone(),
        watch: ctx.watch.clone(),
    }
}

/// For a plan made earlier: `None` when it changes nothing (checked again against the files as
/// they are now), else the safety snapshot taken now, after checking the plan still holds
/// (with the plan's own drift policy). The walk is not cancelled midway (the caller checks
/// the token before and after it); `ctx` gives it its progress and threads.
fn planned_safety(
    ws: &Site,
    plan: &Plan,
    ctx: Context<'_>,
) -> Result<Option<cairn_snapshot::Snapshot>> {
    let ctx = Context {
        cancel: None,
        ..ctx
    };
    if plan.is_noop() {
        let fresh = plan::plan(
            ws,
            &plan.snapshot_id,
            &PlanOptions {
                reference: plan.reference,
                on_drift: plan.on_drift,
                paths: plan.paths.clone(),
            },
            ctx,
        )?;
        if !fresh.is_noop() {
            return Err(changed_since(ws, plan, &fresh));
        }
        return Ok(None);
    }
    let sopts = safety_options(ws, &plan.capture, &plan.snapshot_id, &plan.paths);
    let walked = checked_walk(
        ws,
        &sopts,
        ctx,
        |_| Ok(()),
        |prepared, ()| watched::unseen_change(ws.root(), prepared, plan),
    )?;
    let safety = commit_safety(walked.prepared, walked.missed)?;
    // Re-check the plan against what the safety snapshot saw.
    if safety.root != plan.current_root {
        let store = ws.store();
        let tree = |id: &TreeId| -> Result<Tree> { Ok(store.read_tree(id)?) };
        let target = store.read_manifest(&plan.snapshot_id)?;
        let fresh = plan::against(
            ws,
            plan.snapshot_id,
            &target,
            Current {
                root: safety.root,
                trees: &tree,
                kept: Current::from_walk(&safety.kept, &safety.skipped),
            },
            plan.reference.as_ref(),
            plan.on_drift,
            &plan.paths,
        )?;
        if fresh.actions != plan.actions {
            drop_safety(ws, &safety.id);
            return Err(changed_since(ws, plan, &fresh));
        }
    }
    Ok(Some(safety))
}

/// Deletes the safety snapshot of a restore that failed before it changed anything (issue 32):
/// the files are still those it holds, so it would only be a snapshot nobody asked for. The
/// stat cache it wrote names it, so it is not trusted once the snapshot is gone.
fn drop_safety(ws: &Site, id: &SnapshotId) {
    let _ = ws
        .store()
        .delete_snapshot(id, &cairn_store::gc::GcOptions::default());
}

fn changed_since(ws: &Site, old: &Plan, new: &Plan) -> Error {
    let mut paths: Vec<RelPath> = new
        .actions
        .iter()
        .filter(|a| !old.actions.contains(a))
        .chain(old.actions.iter().filter(|a| !new.actions.contains(a)))
        .map(|a| a.path().clone())
        .collect();
    paths.sort();
    paths.dedup();
    Error::Conflict {
        detail: "the workspace changed since the plan was made; plan again (nothing was changed)"
            .into(),
        first: paths.first().map(|p| ws.root().join(p.as_path())),
        paths,
    }
}

/// The refusal of a restore while `stuck` (restores left unfinished) cannot finish: it names
/// the ways on, their undo (restoring their safety snapshot) included.
fn obstruction(ws: &Site, stuck: &[journal::Recovery]) -> Error {
    let paths: Vec<RelPath> = stuck.iter().flat_map(|r| r.obstructed.clone()).collect();
    let undo: Vec<String> = stuck
        .iter()
        .filter_map(|r| r.safety)
        .map(|s| format!("`cairn restore {}`", s.to_hex()))
        .collect();
    let undo = match undo.len() {
        0 => String::new(),
        1 => format!(
            ", or undo it by restoring its safety snapshot ({})",
            undo[0]
        ),
        _ => format!(
            ", or undo each by restoring its safety snapshot ({})",
            undo.join(", ")
        ),
    };
    Error::Conflict {
        detail: format!(
            "an interrupted restore cannot finish: later edits, or paths it may not change, \
             stand in its way; resolve them and call recover (`cairn recover`), or end it as it \
             stands with give_up (`cairn recover --give-up`){undo}"
        ),
        first: paths.first().map(|p| ws.root().join(p.as_path())),
        paths,
    }
}

/// Plans a restore of `snapshot` with `planning` and applies it (see
/// [`crate::Workspace::restore`]); `ctx` watches and steers its one walk.
pub(crate) fn restore(
    ws: &Site,
    snapshot: &SnapshotId,
    planning: &PlanOptions,
    options: &ApplyOptions,
    ctx: Context<'_>,
) -> Result<Report> {
    guarded_restore(
        ws,
        PlanSource::SafetyWalk(*snapshot, planning),
        options,
        ctx,
    )
    .map_err(|e| crate::error::missing_object_is_damage(ws.store(), snapshot, e))
}
