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
//! 4. One transaction switches the active leaf, stales memory, drops runs, cancels the prompts
//!    still queued in the thread's inbox, completes the record and releases the thread.
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

mod files;
mod record;
mod recover;

pub(crate) use files::{busy_workspace, files_report, plan_restore};
use files::{cut_list, dry_report, restored_list};
use record::{
    close_record, corrupt, decode, record_before_rewind, record_row, Closing, RECORD_COLS,
};
use recover::supersede_dead;
pub(crate) use recover::{insert_hold, unfinished_continuations};

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
                // Another call with the same key that passed the check above at the same time
                // (the MCP server's concurrent calls): its record answers, this one runs
                // nothing (issue 59; the insert failed with an IO error before).
                if let Some(key) = &opts.key {
                    let taken: Option<RewindId> = c
                        .query_row(
                            "SELECT id FROM rewinds WHERE thread_id = ?1 AND key = ?2",
                            params![thread, key],
                            |r| r.get(0),
                        )
                        .optional()
                        .db("read a rewind record")?;
                    if let Some(other) = taken {
                        return Err(Error::ThreadBusy {
                            thread: thread.clone(),
                            detail: format!(
                                "rewind {other} with key '{key}' is in flight; try again when it is done"
                            ),
                        });
                    }
                }
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
            // The prompts still queued were written for the state the rewind leaves: they are
            // cancelled here, with the rewind (and so with its recovery), never sent.
            crate::threads::cancel_queued(c, thread, id)?;
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
