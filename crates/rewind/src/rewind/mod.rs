//! Rewinding a thread: files, then the conversation, memory and runs, in one operation that a
//! crash cannot leave half done.
//!
//! # Order and crash safety
//!
//! 1. Everything is checked before anything changes (`VALIDATION`, `THREAD_BUSY`,
//!    `WORKSPACE_BUSY`), and the restore is planned (a dry run stops here).
//! 2. One transaction takes the thread (and with files the workspace), writes the rewind record
//!    with its idempotency key, and with `force` stops the runs in the way.
//! 3. The files are restored through [`crate::Files::apply`], journalled under a key of the
//!    record; the record then says `files_done`.
//! 4. One transaction switches the active leaf, stales memory, drops runs, completes the record
//!    and releases the thread.
//!
//! Opening the database after a crash finishes a record whose files were done (asking the
//! workspace, through [`crate::Files::finished`], when the crash came before the record said
//! so), and fails one whose files were not: the conversation is then as it was, and the same
//! key retries.

use crate::error::{DbResult, Error, Result};
use crate::files::{FileOutcome, FilePlan, Files};
use crate::guard::Survey;
use crate::ids::{CheckpointId, EntryId, RewindId, RunId, ThreadId};
use crate::lineage::{Candidate, ChosenFiles, Lineage};
use crate::memory::{mark_stale, stale_candidates};
use crate::model::{root_bytes, roots_overlap, EntryKind, EventKind, RunStatus};
use crate::names::{check_names, names_of, record_names, Continuation};
use crate::report::{
    BlockedRewind, ConversationReport, FilesReport, MemoryReport, Recovery, RewindReport,
    RunsReport, BEFORE_REWIND,
};
use crate::rows::{emit, load_entry};
use crate::runs::{active_runs, load_run, stop_runs};
use crate::sql::{params, Conn, OptionalExtension};
use crate::threads::{canonical_root, Threads};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to rewind. `Default`: files as [`crate::ThreadsOptions::rewind_files`] says (off unless
/// turned on), memory on, no dry run, no force, `tool_settle` 10 s, `lease_wait` 60 s.
///
/// # Warning
///
/// With files, a rewind rewrites and removes files of the workspace (after a safety snapshot
/// that undoes it). Look at a `dry_run` first.
#[derive(Clone)]
pub struct RewindOptions {
    /// Restore the files from the checkpoint at the point. `None`: the runtime's
    /// `rewind_files`.
    pub files: Option<bool>,
    /// Rewind the conversation, memory and runs. `false` with files: restore the files only.
    pub memory: bool,
    /// The workspace to restore (one the thread ran in).
    pub workspace: Option<Arc<dyn Files>>,
    /// Change nothing; report what would change.
    pub dry_run: bool,
    /// Stop what is in the way: the runs of this handle in the thread (and with files in the
    /// workspace), with `RUN_INTERRUPTED`; without files also the thread's runs of other
    /// processes (durable ones dropped). With files, runs another process holds are never
    /// forced: the rewind waits up to `lease_wait` for their leases to run out.
    pub force: bool,
    /// An idempotency key: repeating it returns the first result (or retries a failed one).
    pub key: Option<String>,
    /// With `force` and files: how long to wait for the tool calls of the runs it stopped.
    pub tool_settle: Duration,
    /// With `force` and files: how long to wait for the leases of runs other processes hold.
    pub lease_wait: Duration,
    /// The run whose tool asks for the rewind: rewinding its own thread (or, with files, its
    /// own workspace) is refused with `VALIDATION`.
    pub from_run: Option<RunId>,
    /// With files: restore only these paths (relative to the root; a directory with everything
    /// under it). Empty: every path.
    pub paths: Vec<cairn_store::RelPath>,
    /// With files: check for paths edited since the newest checkpoint of the thread in the
    /// workspace (the files being left) by someone other than the rewind, and refuse, keep
    /// them or overwrite them (their content is then in the safety snapshot). `None`: no check.
    pub on_drift: Option<cairn_restore::DriftPolicy>,
    /// The agent's conversation half (issue 54): what it needs to continue its conversation
    /// from the rewind's point, and names the thread is found by from then on. Checked with
    /// the other checks, kept in the rewind's record before any file changes, and its names
    /// given to the thread in the transaction that completes the rewind (or the recovery that
    /// finishes it after a crash). `None`: none.
    pub continuation: Option<Continuation>,
}

impl Default for RewindOptions {
    fn default() -> Self {
        RewindOptions {
            files: None,
            memory: true,
            workspace: None,
            dry_run: false,
            force: false,
            key: None,
            tool_settle: Duration::from_secs(10),
            lease_wait: Duration::from_secs(60),
            from_run: None,
            paths: Vec::new(),
            on_drift: None,
            continuation: None,
        }
    }
}

impl std::fmt::Debug for RewindOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewindOptions")
            .field("files", &self.files)
            .field("memory", &self.memory)
            .field("workspace", &self.workspace.as_ref().map(|w| w.id()))
            .field("dry_run", &self.dry_run)
            .field("force", &self.force)
            .field("key", &self.key)
            .field("tool_settle", &self.tool_settle)
            .field("lease_wait", &self.lease_wait)
            .field("from_run", &self.from_run)
            .field("paths", &self.paths)
            .field("on_drift", &self.on_drift)
            .field("continuation", &self.continuation)
            .finish()
    }
}

/// A rewind record, as [`Threads::rewinds`] lists them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewindRecord {
    /// Its id.
    pub id: RewindId,
    /// The thread.
    pub thread_id: ThreadId,
    /// Its idempotency key.
    pub key: Option<String>,
    /// `started`, `files_done`, `completed` or `failed`.
    pub state: String,
    /// The point (`None`: the start of the thread).
    pub to_entry_id: Option<EntryId>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it started (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it ended.
    pub finished_ms: Option<i64>,
    /// The data of its [`Continuation`], if it had one.
    pub continuation: Option<serde_json::Value>,
}

/// Which points a rewind may go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// An entry of the active branch.
    ActiveBranch,
    /// Any entry the thread sees, a branch an earlier rewind cut included (a rewind to a
    /// checkpoint).
    AnyBranch,
    /// The files only; the conversation stays.
    FilesOnly,
}

/// Where the files come from.
#[derive(Debug, Clone)]
pub(crate) enum FilesFrom {
    /// The checkpoint at the point (exact, else the nearest before).
    Auto,
    /// A user entry's own checkpoint (restore before that message).
    Entry(EntryId),
    /// A checkpoint by id (a files-only rewind to it).
    Checkpoint(CheckpointId),
}

/// What the record keeps of a rewind, to finish it after a crash.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    thread_id: ThreadId,
    point: Option<EntryId>,
    memory: bool,
    files: Option<ChosenFiles>,
    journal_key: String,
    going: Vec<RunId>,
    interrupted: Vec<RunId>,
    dropped: Vec<RunId>,
    /// The agent's conversation half (absent in records of older builds).
    #[serde(default)]
    continuation: Option<Continuation>,
}

struct RecordRow {
    id: RewindId,
    thread_id: ThreadId,
    state: String,
    holder: String,
    op: String,
    request: String,
    files: Option<String>,
    report: Option<String>,
}

impl Threads {
    /// Rewinds `thread` to `to_entry`, an entry of its active branch: files (with
    /// [`RewindOptions::files`]), then the conversation (new entries go after `to_entry`; the
    /// rest stays on its own branch, listed in `cut`), memory (items standing only on cut
    /// entries become stale) and runs (the thread's paused and durable runs are dropped).
    ///
    /// The files come from the checkpoint of the user message right after `to_entry` when only
    /// notes and session events stand between (`exact: true`; looked for on every branch, the
    /// one written last), else from the nearest user message at or before it.
    pub fn rewind(
        &self,
        thread: &ThreadId,
        to_entry: &EntryId,
        opts: &RewindOptions,
    ) -> Result<RewindReport> {
        self.run_rewind(
            thread,
            Some(to_entry.clone()),
            FilesFrom::Auto,
            opts,
            Scope::ActiveBranch,
        )
    }

    /// "Restore before this prompt": rewinds to the entry before `user_entry` (the start of
    /// the thread for its first message) with the files of `user_entry`'s own checkpoint.
    pub fn restore_before(
        &self,
        thread: &ThreadId,
        user_entry: &EntryId,
        opts: &RewindOptions,
    ) -> Result<RewindReport> {
        let entry = self.entry(user_entry)?;
        if entry.kind != EntryKind::User {
            return Err(Error::validation(
                format!(
                    "entry {user_entry} is a {} entry; restore before a user message",
                    entry.kind.name()
                ),
                Some(user_entry.to_string()),
            ));
        }
        let lin = self.inner.read(|c| Lineage::load(c, thread))?;
        if !lin.on_active(user_entry) {
            return Err(not_on_branch(thread, user_entry));
        }
        self.run_rewind(
            thread,
            entry.parent_id,
            FilesFrom::Entry(user_entry.clone()),
            opts,
            Scope::ActiveBranch,
        )
    }

    /// Restores the files of a checkpoint of the thread's lineage (taken in it or in a thread
    /// it was forked from) without touching the conversation; a checkpoint of an unrelated
    /// thread is refused with `VALIDATION`.
    pub fn restore_checkpoint(
        &self,
        thread: &ThreadId,
        checkpoint: &CheckpointId,
        opts: &RewindOptions,
    ) -> Result<RewindReport> {
        let leaf = self.thread(thread)?.active_leaf;
        self.run_rewind(
            thread,
            leaf,
            FilesFrom::Checkpoint(checkpoint.clone()),
            opts,
            Scope::FilesOnly,
        )
    }

    /// Rewinds `thread` to a checkpoint of its lineage (002's `rewind(checkpointId)`): the
    /// conversation goes to the checkpoint's point, which may be on a branch an earlier rewind
    /// cut, and with [`RewindOptions::files`] the files come back from the checkpoint
    /// (`memory: false` restores the files only, as [`Threads::restore_checkpoint`]). The point
    /// of a checkpoint taken for an entry (before a user message, a tool entry, a compaction)
    /// is the entry before it; of one taken at the leaf (by hand, or a rewind's "Before
    /// rewind" checkpoint), that leaf. So the "Before rewind" checkpoint of a rewind, restored
    /// with files, brings back the files and the conversation the rewind took away, as one
    /// operation that is itself undone by its own "Before rewind" checkpoint.
    pub fn rewind_to_checkpoint(
        &self,
        thread: &ThreadId,
        checkpoint: &CheckpointId,
        opts: &RewindOptions,
    ) -> Result<RewindReport> {
        if !opts.memory {
            return self.restore_checkpoint(thread, checkpoint, opts);
        }
        let cp = self.checkpoint_by_id(checkpoint)?;
        let lin = self.inner.read(|c| Lineage::load(c, thread))?;
        let point = match &cp.entry_id {
            Some(e) => {
                let entry = self.entry(e)?;
                let taken_for = entry
                    .checkpoint
                    .as_ref()
                    .is_some_and(|r| &r.checkpoint_id == checkpoint);
                if taken_for {
                    entry.parent_id
                } else {
                    Some(e.clone())
                }
            }
            None => None,
        };
        let seen = match &cp.entry_id {
            Some(e) => lin.entries.contains_key(e),
            None => cp.thread_id == *thread,
        };
        if !seen {
            return Err(Error::validation(
                format!(
                    "checkpoint {checkpoint} was taken in thread {}, which is not in the lineage of thread {thread}; \
                     rewind only to checkpoints of this thread or of the threads it was forked from",
                    cp.thread_id
                ),
                Some(checkpoint.to_string()),
            ));
        }
        self.run_rewind(
            thread,
            point,
            FilesFrom::Checkpoint(checkpoint.clone()),
            opts,
            Scope::AnyBranch,
        )
    }

    /// The rewind records of a thread, oldest first.
    pub fn rewinds(&self, thread: &ThreadId) -> Result<Vec<RewindRecord>> {
        self.inner.read(|c| {
            c.prepare(
                "SELECT id, thread_id, key, state, request, error, created_ms, finished_ms \
                 FROM rewinds WHERE thread_id = ?1 ORDER BY seq",
            )
            .db("read rewinds")?
            .query_map([thread], |r| {
                let request: String = r.get(4)?;
                let request = serde_json::from_str::<Request>(&request).ok();
                let continuation = request
                    .as_ref()
                    .and_then(|q| q.continuation.as_ref())
                    .map(|k| k.data.clone());
                let point = request.and_then(|q| q.point);
                Ok(RewindRecord {
                    id: r.get(0)?,
                    thread_id: r.get(1)?,
                    key: r.get(2)?,
                    state: r.get(3)?,
                    to_entry_id: point,
                    error: r.get(5)?,
                    created_ms: r.get(6)?,
                    finished_ms: r.get(7)?,
                    continuation,
                })
            })
            .db("read rewinds")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read rewinds")
        })
    }

    fn run_rewind(
        &self,
        thread: &ThreadId,
        point: Option<EntryId>,
        from: FilesFrom,
        opts: &RewindOptions,
        scope: Scope,
    ) -> Result<RewindReport> {
        let files_only = scope == Scope::FilesOnly;
        let files_on = files_only || opts.files.unwrap_or(self.inner.options.rewind_files);
        let memory = opts.memory && !files_only;
        if !files_on && !memory {
            return Err(Error::InvalidArgument(
                "a rewind with files and memory both off changes nothing; turn one of them on"
                    .into(),
            ));
        }
        let ws: Option<Arc<dyn Files>> = if files_on {
            Some(opts.workspace.clone().ok_or_else(|| {
                Error::validation(
                    format!("a rewind of thread {thread} with files needs a workspace: set RewindOptions::workspace"),
                    Some(thread.to_string()),
                )
            })?)
        } else {
            None
        };
        let ws_root = ws.as_deref().map(canonical_root);
        let target = ws
            .as_deref()
            .zip(ws_root.as_deref())
            .map(|(w, r)| (w.id(), r));

        // An idempotency key seen before.
        let mut retry: Option<RewindId> = None;
        if let (Some(key), false) = (&opts.key, opts.dry_run) {
            if let Some(rec) = self.record_by_key(thread, key)? {
                match rec.state.as_str() {
                    "completed" => return self.stored_report(&rec),
                    "failed" => retry = Some(rec.id.clone()),
                    _ if self.inner.op_alive_now(&rec.holder, &rec.op) => {
                        return Err(Error::ThreadBusy {
                            thread: thread.clone(),
                            detail: format!("rewind {} with key '{key}' is in flight; try again when it is done", rec.id),
                        })
                    }
                    _ => {
                        let ws_list: Vec<&dyn Files> = ws.as_deref().into_iter().collect();
                        self.recover_where(Some(thread), &ws_list)?;
                        let rec = self.record_by_key(thread, key)?.ok_or_else(|| {
                            Error::not_found(format!("rewind with key '{key}'"), "it was just recovered")
                        })?;
                        match rec.state.as_str() {
                            "completed" => return self.stored_report(&rec),
                            "failed" => retry = Some(rec.id.clone()),
                            _ => {
                                return Err(Error::validation(
                                    format!(
                                        "rewind {} with key '{key}' was interrupted by a crash while it restored files; \
                                         pass the workspace it restored to finish it",
                                        rec.id
                                    ),
                                    Some(rec.id.to_string()),
                                ))
                            }
                        }
                    }
                }
                let first: Request = decode(&rec.id, &rec.request)?;
                if first.point != point {
                    return Err(Error::validation(
                        format!(
                            "key '{key}' was used for rewind {} to another point; use a new key for a new rewind",
                            rec.id
                        ),
                        Some(rec.id.to_string()),
                    ));
                }
            }
        }
        // Rewinds a crash interrupted on this thread are finished (or failed) first.
        if !opts.dry_run {
            let ws_list: Vec<&dyn Files> = ws.as_deref().into_iter().collect();
            self.recover_where(Some(thread), &ws_list)?;
        }

        // Checks, before anything changes.
        let lin = self.inner.read(|c| Lineage::load(c, thread))?;
        if let Some(p) = &point {
            let reachable = scope == Scope::AnyBranch && lin.entries.contains_key(p);
            if !reachable && !lin.on_active(p) {
                let exists = self.inner.read(|c| load_entry(c, p))?.is_some();
                return Err(if exists {
                    not_on_branch(thread, p)
                } else {
                    Error::not_found(
                        format!("entry {p}"),
                        "list the thread's entries with entries()",
                    )
                });
            }
        }
        if let Some(run) = &opts.from_run {
            self.check_from_run(run, thread, ws_root.as_deref())?;
        }
        self.inner
            .read(|c| check_names(c, thread, names_of(opts.continuation.as_ref())))?;
        let chosen = match (&ws, &ws_root) {
            (Some(ws), Some(root)) => {
                let mut ch = self.choose_files(&lin, point.as_ref(), &from, ws.as_ref(), root)?;
                ch.scope.paths = opts.paths.clone();
                if let Some(on_drift) = opts.on_drift {
                    ch.scope.on_drift = on_drift;
                    ch.scope.reference =
                        self.drift_reference(&lin, &ch, ws.id())?
                            .map(|r| match ws.store() {
                                // A "before rewind" checkpoint holds the files before that rewind,
                                // which then put back its own: those are the reference.
                                Some(store) => cairn_restore::files_after(store, &r),
                                None => r,
                            });
                }
                Some(ch)
            }
            _ => None,
        };
        let mut plan = match (&ws, &chosen) {
            (Some(ws), Some(ch)) => Some(plan_restore(&self.inner, ws.as_ref(), ch)?),
            _ => None,
        };
        let survey = self.inner.read(|c| self.survey(c, thread, target, None))?;
        if opts.dry_run {
            let mut report = self.inner.read(|c| {
                dry_report(
                    c,
                    &lin,
                    point.as_ref(),
                    memory,
                    chosen.as_ref(),
                    plan.as_ref(),
                    &survey,
                )
            })?;
            report.continuation = opts.continuation.as_ref().map(|k| k.data.clone());
            return Ok(report);
        }
        self.refuse(&survey, thread, target, opts.force, "rewind")?;
        if let (Some(ws), Some(p)) = (&ws, &plan) {
            if p.busy() {
                return Err(busy_workspace(ws.as_ref(), ws_root.as_deref()));
            }
        }

        // Take the thread (and workspace), write the record, stop what force stops.
        let id = retry.clone().unwrap_or_else(RewindId::generate);
        let guard = self.inner.begin_op(format!("rewind:{id}"))?;
        let journal_key = format!("cairn-rewind-{id}");
        let mut request = Request {
            thread_id: thread.clone(),
            point: point.clone(),
            memory,
            files: chosen.clone(),
            journal_key: journal_key.clone(),
            going: survey.going_ids(),
            interrupted: Vec::new(),
            dropped: Vec::new(),
            continuation: opts.continuation.clone(),
        };
        let forced = self.inner.write("start a rewind", |c| {
            let s = self.survey(c, thread, target, Some(&guard.op))?;
            self.refuse(&s, thread, target, opts.force, "rewind")?;
            // Again where the record is written: no other rewind took a name since.
            check_names(c, thread, names_of(opts.continuation.as_ref()))?;
            let forced = if opts.force {
                self.force_runs(c, &s, files_on, &format!("RUN_INTERRUPTED: forced rewind {id}"))?
            } else {
                Default::default()
            };
            request.going = s.going_ids();
            request.interrupted = forced.interrupted.clone();
            request.dropped = forced.dropped.clone();
            supersede_dead(self, c, thread, &id)?;
            let text = serde_json::to_string(&request).map_err(|e| corrupt(&id, e))?;
            if retry.is_some() {
                c.execute(
                    "UPDATE rewinds SET state = 'started', holder = ?2, op = ?3, request = ?4, files = NULL, \
                     report = NULL, error = NULL, finished_ms = NULL WHERE id = ?1",
                    params![id, self.inner.holder_id(), guard.op, text],
                )
                .db("restart a rewind")?;
            } else {
                c.execute(
                    "INSERT INTO rewinds (id, thread_id, key, state, holder, op, request, created_ms) \
                     VALUES (?1, ?2, ?3, 'started', ?4, ?5, ?6, ?7)",
                    params![id, thread, opts.key, self.inner.holder_id(), guard.op, text, c.now_ms()],
                )
                .db("write the rewind record")?;
            }
            insert_hold(c, Some(thread), None, &guard.op, self.inner.holder_id())?;
            if let Some((ws_id, root)) = target {
                insert_hold(c, None, Some((ws_id, root)), &guard.op, self.inner.holder_id())?;
            }
            emit(
                c,
                Some(thread),
                EventKind::RewindStarted,
                serde_json::json!({
                    "rewind_id": id, "to_entry_id": point, "files": files_on, "memory": memory,
                    "key": opts.key, "interrupted": forced.interrupted,
                }),
            )?;
            Ok(forced)
        })?;
        for r in &forced.interrupted {
            self.flag_interrupted(r);
        }

        // Files.
        let mut outcome = None;
        if let (Some(ws), Some((ws_id, root)), Some(ch)) = (&ws, target, &chosen) {
            let step = (|| -> Result<FileOutcome> {
                let waited = self.wait_clear(
                    thread,
                    (ws_id, root),
                    &guard.op,
                    opts.tool_settle,
                    opts.lease_wait,
                )?;
                if waited || !forced.interrupted.is_empty() {
                    let fresh = plan_restore(&self.inner, ws.as_ref(), ch)?;
                    if fresh.busy() {
                        return Err(busy_workspace(ws.as_ref(), Some(root)));
                    }
                    plan = Some(fresh);
                }
                let p = plan
                    .as_ref()
                    .ok_or_else(|| Error::InvalidArgument("no restore plan".into()))?;
                ws.apply(p, &journal_key)
                    .map_err(|e| Error::files(ws.id(), "restore the files", e))
            })();
            match step {
                Ok(o) => {
                    let text = serde_json::to_string(&o).map_err(|e| corrupt(&id, e))?;
                    let mut applied = crate::events::restore_data(&o.report, ws.id(), ws.root());
                    applied["rewind_id"] = serde_json::json!(id);
                    applied["checkpoint_id"] = serde_json::json!(ch.checkpoint_id);
                    applied["safety_snapshot_id"] = serde_json::json!(o.safety_snapshot_id);
                    self.inner.write("record the restored files", |c| {
                        c.execute(
                            "UPDATE rewinds SET state = 'files_done', files = ?2 WHERE id = ?1",
                            params![id, text],
                        )
                        .db("record the restored files")?;
                        emit(c, Some(thread), EventKind::RestoreApplied, applied.clone())
                    })?;
                    outcome = Some(o);
                }
                Err(e) => return Err(self.fail_record(&id, &guard.op, thread, e)),
            }
        }

        // Conversation, memory, runs, in one transaction.
        let report = self.finish(&id, &guard.op, &request, outcome, false);
        drop(guard);
        report
    }

    fn check_from_run(
        &self,
        run: &RunId,
        thread: &ThreadId,
        root: Option<&std::path::Path>,
    ) -> Result<()> {
        let row = self.inner.read(|c| load_run(c, run))?.ok_or_else(|| {
            Error::not_found(
                format!("run {run}"),
                "from_run must name the run whose tool asks",
            )
        })?;
        if &row.thread_id == thread {
            return Err(Error::validation(
                format!(
                    "a tool of run {run} asks to rewind its own thread {thread}: the rewind would have to stop \
                     the run that waits for it; rewind from outside the run"
                ),
                Some(run.to_string()),
            ));
        }
        if let (Some(a), Some(b)) = (root, &row.root) {
            if roots_overlap(a, b) {
                return Err(Error::validation(
                    format!(
                        "a tool of run {run} asks to restore its own workspace ({}): the restore would have to stop \
                         the run that waits for it; rewind from outside the run",
                        b.display()
                    ),
                    Some(run.to_string()),
                ));
            }
        }
        Ok(())
    }

    /// Picks and checks the checkpoint whose files to restore.
    /// The files a rewind leaves, for its drift check: the newest checkpoint of the lineage
    /// in the workspace taken after the one restored (with other files). `None` when there is
    /// none: what changed since the restored checkpoint is then the thread's own work, as far
    /// as anyone knows, and no path is taken for another's edit.
    fn drift_reference(
        &self,
        lin: &Lineage,
        chosen: &ChosenFiles,
        workspace: &str,
    ) -> Result<Option<cairn_store::SnapshotId>> {
        let cps = self.inner.read(|c| lin.checkpoints(c))?;
        let after = cps
            .iter()
            .position(|cp| cp.id == chosen.checkpoint_id)
            .map(|i| i + 1)
            .unwrap_or(cps.len());
        Ok(cps[after..]
            .iter()
            .rev()
            .find(|cp| cp.workspace_id == workspace && cp.snapshot_id != chosen.snapshot_id)
            .map(|cp| cp.snapshot_id))
    }

    pub(crate) fn choose_files(
        &self,
        lin: &Lineage,
        point: Option<&EntryId>,
        from: &FilesFrom,
        ws: &dyn Files,
        root: &std::path::Path,
    ) -> Result<ChosenFiles> {
        let cand = match from {
            FilesFrom::Auto => point.and_then(|p| lin.at(p)),
            FilesFrom::Entry(e) => lin.of_entry(e),
            FilesFrom::Checkpoint(cp) => {
                let row = self.checkpoint_by_id(cp)?;
                Some(Candidate {
                    entry_id: row.entry_id,
                    checkpoint_id: Some(cp.clone()),
                    meta: None,
                    exact: true,
                    by_id: true,
                })
            }
        };
        let where_ = match (from, point) {
            (FilesFrom::Entry(e), _) => format!("for entry {e}"),
            (_, Some(p)) => format!("at or before entry {p}"),
            (_, None) => "at the start".to_string(),
        };
        let cand = cand.ok_or_else(|| {
            Error::validation(
                format!(
                    "thread {} has no checkpoint {where_}: there are no files to restore; rewind without files",
                    lin.thread.id
                ),
                point.map(|p| p.to_string()),
            )
        })?;
        let chosen = self.inner.read(|c| lin.check(c, &cand, ws.id(), root))?;
        let kept = ws
            .keeps(&chosen.snapshot_id)
            .map_err(|e| Error::files(ws.id(), "look up the checkpoint", e))?;
        if !kept {
            return Err(Error::validation(
                format!(
                    "checkpoint {} (snapshot {}) is no longer kept by workspace {} (it was pruned); \
                     rewind to a later point, or without files",
                    chosen.checkpoint_id,
                    chosen.snapshot_id.short(),
                    ws.id()
                ),
                Some(chosen.checkpoint_id.to_string()),
            ));
        }
        Ok(chosen)
    }

    fn record_by_key(&self, thread: &ThreadId, key: &str) -> Result<Option<RecordRow>> {
        self.inner.read(|c| {
            c.query_row(
                &format!("SELECT {RECORD_COLS} FROM rewinds WHERE thread_id = ?1 AND key = ?2"),
                params![thread, key],
                record_row,
            )
            .optional()
            .db("read a rewind record")
        })
    }

    fn stored_report(&self, rec: &RecordRow) -> Result<RewindReport> {
        let text = rec
            .report
            .as_deref()
            .ok_or_else(|| corrupt(&rec.id, "a completed rewind has no report"))?;
        decode(&rec.id, text)
    }

    /// Writes `note` as the record's message while it stays unfinished (a rewind waiting for
    /// its files' recovery), so that the thread's rewinds say where the files stand.
    fn note_record(&self, id: &RewindId, op: &str, note: &str) -> Result<()> {
        self.inner.write("note an unfinished rewind", |c| {
            c.execute(
                "UPDATE rewinds SET error = ?3 WHERE id = ?1 AND op = ?2",
                params![id, op, note],
            )
            .db("note an unfinished rewind")?;
            Ok(())
        })
    }

    /// Marks a record failed, releases its holds and says so in the events; returns `err`.
    fn fail_record(&self, id: &RewindId, op: &str, thread: &ThreadId, err: Error) -> Error {
        use cairn_store::Classify;
        let kind = err.kind();
        let message = err.to_string();
        let written = self.inner.write("record a failed rewind", |c| {
            close_record(
                c,
                id,
                op,
                thread,
                Closing::Failed(&message),
                serde_json::json!({ "rewind_id": id, "kind": kind, "message": message }),
            )
        });
        match written {
            Ok(()) => err,
            Err(_) => err,
        }
    }

    /// The last transaction: switches the active leaf, stales memory, drops runs, completes
    /// the record and releases the holds.
    fn finish(
        &self,
        id: &RewindId,
        op: &str,
        request: &Request,
        outcome: Option<FileOutcome>,
        recovered: bool,
    ) -> Result<RewindReport> {
        self.inner.write("switch the active leaf", |c| {
            let (state, report): (String, Option<String>) = c
                .query_row(
                    "SELECT state, report FROM rewinds WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .db("read a rewind record")?;
            if state == "completed" {
                if let Some(text) = report {
                    return decode(id, &text);
                }
            }
            let thread = &request.thread_id;
            let lin = Lineage::load(c, thread)?;
            let previous = lin.thread.active_leaf.clone();
            let mut conversation = ConversationReport {
                rewound: false,
                previous_leaf_id: previous.clone(),
                ..Default::default()
            };
            let mut memory = MemoryReport::default();
            let mut runs = RunsReport {
                going: request.going.clone(),
                interrupted: request.interrupted.clone(),
                paused: Vec::new(),
                durable: request.dropped.clone(),
            };
            if request.memory {
                let cut = cut_list(&lin, request.point.as_ref());
                c.execute(
                    "UPDATE threads SET active_leaf = ?2 WHERE id = ?1",
                    params![thread, request.point],
                )
                .db("switch the active leaf")?;
                conversation.rewound = previous != request.point;
                memory.staled = stale_candidates(c, thread, &cut)?;
                mark_stale(c, &memory.staled, id.as_str())?;
                conversation.cut = cut;
                conversation.restored = restored_list(&lin, request.point.as_ref());
                let mut paused = Vec::new();
                let mut durable = Vec::new();
                for r in active_runs(c)?
                    .into_iter()
                    .filter(|r| &r.thread_id == thread)
                {
                    if r.status == RunStatus::Paused {
                        paused.push(r.id.clone());
                    }
                    if r.durable {
                        durable.push(r.id.clone());
                    }
                }
                let all: Vec<RunId> = paused.iter().chain(durable.iter()).cloned().collect();
                stop_runs(
                    c,
                    &all,
                    RunStatus::Dropped,
                    &format!("dropped by rewind {id}"),
                )?;
                for r in &request.interrupted {
                    if load_run(c, r)?.is_some_and(|row| row.durable && &row.thread_id == thread)
                        && !durable.contains(r)
                    {
                        durable.push(r.clone());
                    }
                }
                runs.paused = paused;
                for r in durable {
                    if !runs.durable.contains(&r) {
                        runs.durable.push(r);
                    }
                }
            }
            let files = match (&request.files, outcome) {
                (Some(ch), Some(o)) => {
                    let mut f = files_report(ch, Some(&o.report), o.safety_snapshot_id);
                    if let Some(safety) = o.safety_snapshot_id {
                        f.before_rewind_checkpoint_id = Some(record_before_rewind(
                            c,
                            thread,
                            previous.as_ref(),
                            ch,
                            &safety,
                            id,
                        )?);
                    }
                    Some(f)
                }
                (Some(ch), None) => Some(files_report(ch, None, None)),
                _ => None,
            };
            record_names(c, thread, names_of(request.continuation.as_ref()))?;
            let report = RewindReport {
                rewind_id: Some(id.clone()),
                thread_id: thread.clone(),
                to_entry_id: request.point.clone(),
                dry_run: false,
                conversation,
                files,
                memory,
                runs,
                recovered,
                continuation: request.continuation.as_ref().map(|k| k.data.clone()),
            };
            let text = serde_json::to_string(&report).map_err(|e| corrupt(id, e))?;
            close_record(
                c,
                id,
                op,
                thread,
                Closing::Completed(&text),
                serde_json::json!({
                    "rewind_id": id, "to_entry_id": request.point, "cut": report.conversation.cut,
                    "files": report.files.is_some(), "recovered": recovered,
                }),
            )?;
            Ok(report)
        })
    }

    /// Finishes or fails the rewinds (and takes back the forks) that a crash interrupted:
    /// records whose holder is gone. A rewind whose files were done is completed; one whose
    /// files were being restored is completed when its workspace (among `workspaces`) says the
    /// restore finished, failed when it says it did not, and left for later without its
    /// workspace.
    pub fn recover(&self, workspaces: &[Arc<dyn Files>]) -> Result<Recovery> {
        let list: Vec<&dyn Files> = workspaces.iter().map(|w| w.as_ref()).collect();
        self.recover_where(None, &list)
    }

    pub(crate) fn recover_where(
        &self,
        thread: Option<&ThreadId>,
        workspaces: &[&dyn Files],
    ) -> Result<Recovery> {
        let mut out = Recovery::default();
        let records: Vec<RecordRow> = self.inner.read(|c| {
            c.prepare(&format!(
                "SELECT {RECORD_COLS} FROM rewinds WHERE state IN ('started', 'files_done') \
                 AND (CAST(?1 AS TEXT) IS NULL OR thread_id = ?1) ORDER BY seq"
            ))
            .db("read rewind records")?
            .query_map([thread], record_row)
            .db("read rewind records")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read rewind records")
        })?;
        for rec in records {
            if self.inner.op_alive_now(&rec.holder, &rec.op) {
                continue;
            }
            // Another handle may be claiming it at this very moment: leave it to that one.
            let Ok(guard) = self.inner.begin_op(format!("rewind:{}", rec.id)) else {
                continue;
            };
            let claimed = self.inner.write("claim an interrupted rewind", |c| {
                let n = c
                    .execute(
                        "UPDATE rewinds SET holder = ?2, op = ?3 WHERE id = ?1 AND holder = ?4 AND op = ?5 AND state = ?6",
                        params![rec.id, self.inner.holder_id(), guard.op, rec.holder, rec.op, rec.state],
                    )
                    .db("claim an interrupted rewind")?;
                c.execute("DELETE FROM holds WHERE op = ?1", [&rec.op])
                    .db("release a hold")?;
                Ok(n == 1)
            })?;
            if !claimed {
                continue;
            }
            let request: Request = decode(&rec.id, &rec.request)?;
            let done_files: Option<FileOutcome> = match &rec.files {
                Some(text) => Some(decode(&rec.id, text)?),
                None => None,
            };
            if rec.state == "files_done" || request.files.is_none() {
                out.completed
                    .push(self.finish(&rec.id, &guard.op, &request, done_files, true)?);
                continue;
            }
            let Some(ch) = &request.files else { continue };
            // The workspace id follows its directory (a rename, a bind mount, an adoption).
            let ws = workspaces.iter().find(|w| w.id() == ch.workspace_id);
            let Some(ws) = ws else {
                out.pending.push(rec.id.clone());
                continue;
            };
            match ws.finished(&request.journal_key, &ch.snapshot_id) {
                Ok(Some(o)) => {
                    out.completed
                        .push(self.finish(&rec.id, &guard.op, &request, Some(o), true)?);
                }
                Ok(None) => match ws.interrupted(&request.journal_key) {
                    Ok(crate::files::Interrupted::NotBegun) => {
                        let err = Error::validation(
                            format!(
                                "rewind {} was interrupted before its files were restored; the conversation is as it was: \
                                 rewind again (the same key retries)",
                                rec.id
                            ),
                            Some(rec.id.to_string()),
                        );
                        drop(self.fail_record(&rec.id, &guard.op, &rec.thread_id, err));
                        out.failed.push(rec.id.clone());
                    }
                    Ok(crate::files::Interrupted::Pending { journal, safety }) => {
                        // Part of the files are the checkpoint's: the rewind waits for the
                        // restore's recovery, and the record says where the files stand.
                        let note = format!(
                            "the files are part restored: a crash cut the restore of checkpoint {} and paths in its way \
                             stop its recovery (journal {journal}); the conversation is as it was until it finishes: \
                             resolve them and run `cairn recover` (the rewind then completes, conversation included), \
                             or end the restore with `cairn recover --give-up`{}",
                            ch.checkpoint_id,
                            safety
                                .map(|s| format!(" and put the files back as they were with `cairn restore {}`", s.short()))
                                .unwrap_or_default()
                        );
                        self.note_record(&rec.id, &guard.op, &note)?;
                        out.blocked.push(BlockedRewind {
                            rewind_id: rec.id.clone(),
                            journal,
                            message: note,
                        });
                    }
                    Ok(crate::files::Interrupted::GivenUp { journal, safety }) => {
                        let err = Error::validation(
                            format!(
                                "rewind {} failed: its restore of checkpoint {} was cut by a crash and then given up \
                                 (journal {journal}), so the files are part restored, part as they were; the \
                                 conversation is as it was: {} or rewind again",
                                rec.id,
                                ch.checkpoint_id,
                                safety
                                    .map(|s| format!("`cairn restore {}` puts the files back as they were before the rewind,", s.short()))
                                    .unwrap_or_default()
                            ),
                            Some(rec.id.to_string()),
                        );
                        drop(self.fail_record(&rec.id, &guard.op, &rec.thread_id, err));
                        out.failed.push(rec.id.clone());
                    }
                    Err(_) => out.pending.push(rec.id.clone()),
                },
                Err(_) => out.pending.push(rec.id.clone()),
            }
        }
        out.forks_taken_back = self.take_back_dead_forks()?;
        self.drop_dead_holds()?;
        Ok(out)
    }
}

/// Records the "Before rewind" checkpoint of a rewind whose restore changed files: its safety
/// snapshot, at the active leaf `previous` the rewind left.
fn record_before_rewind(
    c: &Conn<'_>,
    thread: &ThreadId,
    previous: Option<&EntryId>,
    ch: &ChosenFiles,
    safety: &cairn_store::SnapshotId,
    rewind: &RewindId,
) -> Result<CheckpointId> {
    let cp_id = CheckpointId::generate();
    c.execute(
        "INSERT INTO checkpoints (id, thread_id, entry_id, kind, label, snapshot_id, workspace_id, root, run_id, created_ms) \
         VALUES (?1, ?2, ?3, 'manual', ?4, ?5, ?6, ?7, NULL, ?8)",
        params![
            cp_id,
            thread,
            previous,
            BEFORE_REWIND,
            safety.to_hex(),
            ch.workspace_id,
            root_bytes(&ch.root),
            c.now_ms()
        ],
    )
    .db("record the Before rewind checkpoint")?;
    emit(
        c,
        Some(thread),
        EventKind::CheckpointCreated,
        serde_json::json!({
            "checkpoint_id": cp_id, "entry_id": previous, "snapshot_id": safety,
            "workspace_id": ch.workspace_id, "kind": "manual", "label": BEFORE_REWIND,
            "rewind_id": rewind,
        }),
    )?;
    Ok(cp_id)
}

/// How a rewind record ends.
enum Closing<'a> {
    /// With its report (JSON).
    Completed(&'a str),
    /// With an error message.
    Failed(&'a str),
}

/// Ends a rewind record, releases its holds and says so in the events.
fn close_record(
    c: &Conn<'_>,
    id: &RewindId,
    op: &str,
    thread: &ThreadId,
    how: Closing<'_>,
    data: serde_json::Value,
) -> Result<()> {
    let (sql, text, event) = match how {
        Closing::Completed(report) => (
            "UPDATE rewinds SET state = 'completed', report = ?2, finished_ms = ?3 WHERE id = ?1",
            report,
            EventKind::RewindCompleted,
        ),
        Closing::Failed(error) => (
            "UPDATE rewinds SET state = 'failed', error = ?2, finished_ms = ?3 WHERE id = ?1",
            error,
            EventKind::RewindFailed,
        ),
    };
    c.execute(sql, params![id, text, c.now_ms()])
        .db("close a rewind record")?;
    c.execute("DELETE FROM holds WHERE op = ?1", [op])
        .db("release a hold")?;
    emit(c, Some(thread), event, data)
}

impl Threads {
    /// Deletes the holds of operations that are gone (they are ignored anyway).
    fn drop_dead_holds(&self) -> Result<()> {
        let rows: Vec<(String, String)> = self.inner.read(|c| {
            c.prepare("SELECT DISTINCT op, holder FROM holds")
                .db("read holds")?
                .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
                .db("read holds")?
                .collect::<crate::sql::SqlResult<_>>()
                .db("read holds")
        })?;
        let dead: Vec<String> = rows
            .into_iter()
            .filter(|(op, holder)| !self.inner.op_alive_now(holder, op))
            .map(|(op, _)| op)
            .collect();
        if dead.is_empty() {
            return Ok(());
        }
        self.inner.write("drop stale holds", |c| {
            for op in &dead {
                c.execute("DELETE FROM holds WHERE op = ?1", [op])
                    .db("drop stale holds")?;
            }
            Ok(())
        })
    }
}

const RECORD_COLS: &str = "id, thread_id, state, holder, op, request, files, report";

fn record_row(r: &crate::sql::Row) -> crate::sql::SqlResult<RecordRow> {
    Ok(RecordRow {
        id: r.get(0)?,
        thread_id: r.get(1)?,
        state: r.get(2)?,
        holder: r.get(3)?,
        op: r.get(4)?,
        request: r.get(5)?,
        files: r.get(6)?,
        report: r.get(7)?,
    })
}

/// The continuations of the rewinds not finished yet (started, or with their files done), with
/// their records and threads: the names they will give are promised.
pub(crate) fn unfinished_continuations(
    c: &Conn<'_>,
) -> Result<Vec<(RewindId, ThreadId, Option<Continuation>)>> {
    let rows: Vec<(RewindId, ThreadId, String)> = c
        .prepare(
            "SELECT id, thread_id, request FROM rewinds WHERE state IN ('started', 'files_done')",
        )
        .db("read rewind records")?
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .db("read rewind records")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read rewind records")?;
    rows.into_iter()
        .map(|(id, thread, text)| {
            let request: Request = decode(&id, &text)?;
            Ok((id, thread, request.continuation))
        })
        .collect()
}

/// Marks the thread's interrupted rewinds that recovery could not decide as superseded by a
/// new one: their conversation switch must never run after it.
fn supersede_dead(threads: &Threads, c: &Conn<'_>, thread: &ThreadId, by: &RewindId) -> Result<()> {
    let rows: Vec<(RewindId, String, String)> = c
        .prepare("SELECT id, holder, op FROM rewinds WHERE thread_id = ?1 AND state IN ('started', 'files_done') AND id != ?2")
        .db("read rewind records")?
        .query_map(params![thread, by], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .db("read rewind records")?
        .collect::<crate::sql::SqlResult<_>>()
        .db("read rewind records")?;
    for (id, holder, op) in rows {
        if !threads.inner.op_alive(c, &holder, &op) {
            c.execute(
                "UPDATE rewinds SET state = 'failed', error = ?2, finished_ms = ?3 WHERE id = ?1",
                params![
                    id,
                    format!("interrupted by a crash and superseded by rewind {by}"),
                    c.now_ms()
                ],
            )
            .db("supersede a rewind")?;
        }
    }
    Ok(())
}

pub(crate) fn insert_hold(
    c: &Conn<'_>,
    thread: Option<&ThreadId>,
    ws: Option<(&str, &std::path::Path)>,
    op: &str,
    holder: &str,
) -> Result<()> {
    c.execute(
        "INSERT INTO holds (thread_id, workspace_id, root, op, holder, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![thread, ws.map(|w| w.0), ws.map(|w| root_bytes(w.1)), op, holder, c.now_ms()],
    )
    .db("hold a thread or workspace")?;
    Ok(())
}

/// The entries of the active branch that are not `point` or before it.
/// The entries a rewind to `point` puts back on the active branch: those from the root to
/// `point` that are not on it now, first entry first.
fn restored_list(lin: &Lineage, point: Option<&EntryId>) -> Vec<EntryId> {
    let active: HashSet<&EntryId> = lin.active.iter().collect();
    let mut back = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = point.cloned();
    while let Some(id) = cur {
        if !seen.insert(id.clone()) {
            break;
        }
        cur = lin.entries.get(&id).and_then(|l| l.parent_id.clone());
        if !active.contains(&id) {
            back.push(id);
        }
    }
    back.reverse();
    back
}

fn cut_list(lin: &Lineage, point: Option<&EntryId>) -> Vec<EntryId> {
    let mut keep = HashSet::new();
    let mut cur = point.cloned();
    while let Some(id) = cur {
        cur = lin.entries.get(&id).and_then(|l| l.parent_id.clone());
        if !keep.insert(id) {
            break;
        }
    }
    lin.active
        .iter()
        .filter(|e| !keep.contains(*e))
        .cloned()
        .collect()
}

/// Plans a restore of the chosen files; the thread database is kept out of it first when it
/// lies beneath the workspace (see [`crate::threads::Inner::keep_out_of`]).
pub(crate) fn plan_restore(
    db: &crate::threads::Inner,
    ws: &dyn Files,
    ch: &ChosenFiles,
) -> Result<FilePlan> {
    db.keep_out_of(ws);
    ws.plan_scoped(&ch.snapshot_id, &ch.scope)
        .map_err(|e| Error::files(ws.id(), "plan the restore", e))
}

pub(crate) fn busy_workspace(ws: &dyn Files, root: Option<&std::path::Path>) -> Error {
    Error::WorkspaceBusy {
        workspace: ws.id().to_string(),
        root: root
            .map(PathBuf::from)
            .unwrap_or_else(|| ws.root().to_path_buf()),
        detail: "a command or hold of the workspace is going on; try again when it is done".into(),
    }
}

/// The files part of a rewind's or fork's report, with the restore's report (`None`: the files
/// were not restored) as the JSON value the report keeps.
pub(crate) fn files_report(
    ch: &ChosenFiles,
    restore: Option<&cairn_restore::Report>,
    safety: Option<cairn_store::SnapshotId>,
) -> FilesReport {
    let restore = restore.map_or(serde_json::Value::Null, |r| {
        serde_json::to_value(r).expect("a restore report always serialises")
    });
    FilesReport {
        entry_id: ch.entry_id.clone(),
        checkpoint_id: ch.checkpoint_id.clone(),
        snapshot_id: ch.snapshot_id,
        exact: ch.exact,
        workspace_id: ch.workspace_id.clone(),
        root: ch.root.clone(),
        safety_snapshot_id: safety,
        before_rewind_checkpoint_id: None,
        restore,
    }
}

fn dry_report(
    c: &Conn<'_>,
    lin: &Lineage,
    point: Option<&EntryId>,
    memory: bool,
    chosen: Option<&ChosenFiles>,
    plan: Option<&FilePlan>,
    s: &Survey,
) -> Result<RewindReport> {
    let previous = lin.thread.active_leaf.clone();
    let (conversation, mem, paused, durable) = if memory {
        let cut = cut_list(lin, point);
        let staled = stale_candidates(c, &lin.thread.id, &cut)?;
        (
            ConversationReport {
                rewound: previous.as_ref() != point,
                cut,
                restored: restored_list(lin, point),
                previous_leaf_id: previous,
            },
            MemoryReport { staled },
            s.paused(),
            s.durable(),
        )
    } else {
        (
            ConversationReport {
                previous_leaf_id: previous,
                ..Default::default()
            },
            MemoryReport::default(),
            Vec::new(),
            Vec::new(),
        )
    };
    Ok(RewindReport {
        rewind_id: None,
        thread_id: lin.thread.id.clone(),
        to_entry_id: point.cloned(),
        dry_run: true,
        conversation,
        files: chosen
            .zip(plan)
            .map(|(ch, p)| files_report(ch, Some(&p.report()), None)),
        memory: mem,
        runs: RunsReport {
            going: s.going_ids(),
            interrupted: Vec::new(),
            paused,
            durable,
        },
        recovered: false,
        continuation: None,
    })
}

fn not_on_branch(thread: &ThreadId, entry: &EntryId) -> Error {
    Error::validation(
        format!(
            "entry {entry} is not on the active branch of thread {thread}; rewind to an entry of the active \
             branch (entries(thread, false)), or fork from it"
        ),
        Some(entry.to_string()),
    )
}

fn decode<T: serde::de::DeserializeOwned>(id: &impl std::fmt::Display, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| corrupt(id, e))
}

fn corrupt(id: &impl std::fmt::Display, detail: impl std::fmt::Display) -> Error {
    Error::Corrupt {
        what: format!("record {id}"),
        path: PathBuf::new(),
        detail: detail.to_string(),
    }
}
