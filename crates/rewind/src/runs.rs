//! Runs with leases, their tool calls, and the guards they raise against rewinds.
//!
//! A run is *going* while its status is `running`, its lease has not run out and the handle
//! that holds it is alive. Leases live in the database, so a run of one process is seen by
//! every other; a process that stops renewing (or dies) stops counting once its lease runs out.
//! Tool calls are counted from [`Threads::tool_start`] to [`Threads::tool_finish`]: a tool call
//! may outlive its run, and counts until it finishes or its lease runs out.

use crate::error::{DbResult, Error, Result};
use crate::files::Files;
use crate::ids::{RunId, ThreadId, ToolCallId};
use crate::model::{root_bytes, root_path, roots_overlap, RunInfo, RunStatus, ThreadRuns};
use crate::policy::{Checkpoints, EffectivePolicy};
use crate::rows::{conv, note_workspace, require_thread, BadValue};
use crate::sql::{params, Conn, OptionalExtension};
use crate::threads::{canonical_root, Threads, POLL};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to begin a run. `Default`: no workspace, not durable, a 30 s lease, wait up to 10
/// minutes for a rewind that holds the thread.
#[derive(Clone)]
pub struct RunOptions {
    /// The workspace the run edits; checkpoints are taken of it.
    pub workspace: Option<Arc<dyn Files>>,
    /// The run survives its process: another process may resume it, and a rewind drops it.
    pub durable: bool,
    /// How long the run counts as going without a heartbeat.
    pub lease: Duration,
    /// The run whose tool call started this one (a subagent): it takes no checkpoints.
    pub parent_run: Option<RunId>,
    /// The agent level of the checkpoint policy.
    pub agent_checkpoints: Option<Checkpoints>,
    /// The run level of the checkpoint policy.
    pub checkpoints: Option<Checkpoints>,
    /// Fail with `THREAD_BUSY` (or `WORKSPACE_BUSY`) at once while a rewind or fork holds the
    /// thread or workspace, instead of waiting for it.
    pub reject_if_busy: bool,
    /// How long to wait for such a hold at most.
    pub wait: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            workspace: None,
            durable: false,
            lease: Duration::from_secs(30),
            parent_run: None,
            agent_checkpoints: None,
            checkpoints: None,
            reject_if_busy: false,
            wait: Duration::from_secs(600),
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("workspace", &self.workspace.as_ref().map(|w| w.id()))
            .field("durable", &self.durable)
            .field("lease", &self.lease)
            .field("parent_run", &self.parent_run)
            .field("agent_checkpoints", &self.agent_checkpoints)
            .field("checkpoints", &self.checkpoints)
            .field("reject_if_busy", &self.reject_if_busy)
            .field("wait", &self.wait)
            .finish()
    }
}

pub(crate) struct RunShared {
    pub(crate) workspace: Option<Arc<dyn Files>>,
    pub(crate) policy: EffectivePolicy,
    pub(crate) subagent: bool,
    pub(crate) lease: Duration,
    pub(crate) interrupted: AtomicBool,
}

/// A run held by this handle. Cheap to clone.
#[derive(Clone)]
pub struct Run {
    id: RunId,
    thread: ThreadId,
    pub(crate) shared: Arc<RunShared>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("id", &self.id)
            .field("thread", &self.thread)
            .field("subagent", &self.shared.subagent)
            .finish_non_exhaustive()
    }
}

impl Run {
    /// Its id.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// Its thread.
    pub fn thread_id(&self) -> &ThreadId {
        &self.thread
    }

    /// Whether it was started from another run's tool call (it takes no checkpoints).
    pub fn is_subagent(&self) -> bool {
        self.shared.subagent
    }

    /// The checkpoint policy it was started with.
    pub fn policy(&self) -> &EffectivePolicy {
        &self.shared.policy
    }

    /// Whether a rewind of this handle interrupted or dropped it (a rewind of another process
    /// is seen at the next [`Threads::heartbeat`]).
    pub fn is_interrupted(&self) -> bool {
        self.shared.interrupted.load(Ordering::SeqCst)
    }
}

/// A run row, for guards.
#[derive(Debug, Clone)]
pub(crate) struct RunRow {
    pub(crate) id: RunId,
    pub(crate) thread_id: ThreadId,
    pub(crate) workspace_id: Option<String>,
    pub(crate) root: Option<PathBuf>,
    pub(crate) durable: bool,
    pub(crate) parent_run: Option<RunId>,
    pub(crate) holder: String,
    pub(crate) status: RunStatus,
    pub(crate) lease_expires_ms: i64,
    pub(crate) started_ms: i64,
    pub(crate) open_tools: u64,
    /// Why it ended (`ended`, `RUN_INTERRUPTED: forced rewind rw_…`, `dropped by rewind rw_…`).
    pub(crate) end_reason: Option<String>,
}

const RUN_COLS: &str =
    "r.id, r.thread_id, r.workspace_id, r.root, r.durable, r.parent_run, r.holder, \
     r.status, r.lease_expires_ms, r.started_ms, \
     (SELECT count(*) FROM tool_calls t WHERE t.run_id = r.id AND t.finished_ms IS NULL), r.end_reason";

fn run_row(r: &crate::sql::Row) -> crate::sql::SqlResult<RunRow> {
    let status: String = r.get(7)?;
    Ok(RunRow {
        id: r.get(0)?,
        thread_id: r.get(1)?,
        workspace_id: r.get(2)?,
        root: r.get::<_, Option<Vec<u8>>>(3)?.map(root_path),
        durable: r.get(4)?,
        parent_run: r.get(5)?,
        holder: r.get(6)?,
        status: conv(7, RunStatus::parse(&status).ok_or(BadValue(status.clone())))?,
        lease_expires_ms: r.get(8)?,
        started_ms: r.get(9)?,
        open_tools: r.get::<_, i64>(10)? as u64,
        end_reason: r.get(11)?,
    })
}

/// An open tool call, for guards.
#[derive(Debug, Clone)]
pub(crate) struct ToolRow {
    pub(crate) id: ToolCallId,
    pub(crate) run_id: RunId,
    pub(crate) name: String,
    pub(crate) root: Option<PathBuf>,
}

impl Threads {
    /// Begins a run of `thread`. While a rewind or fork holds the thread (or, for a run with a
    /// workspace, an overlapping workspace), it waits for it, or fails with `THREAD_BUSY`
    /// (`WORKSPACE_BUSY`) with [`RunOptions::reject_if_busy`].
    pub fn begin_run(&self, thread: &ThreadId, opts: RunOptions) -> Result<Run> {
        if opts.lease.is_zero() {
            return Err(Error::InvalidArgument(
                "a run's lease must be longer than zero".into(),
            ));
        }
        let root = opts.workspace.as_deref().map(canonical_root);
        let ws_id = opts.workspace.as_ref().map(|w| w.id().to_string());
        let subagent = opts.parent_run.is_some();
        let policy = self.policy_for(&opts, subagent);
        self.settle_thread(thread, opts.workspace.as_deref())?;
        let id = RunId::generate();
        let deadline = Instant::now() + opts.wait;
        loop {
            let outcome = self.inner.write("begin a run", |c| {
                require_thread(c, thread)?;
                if let Some(parent) = &opts.parent_run {
                    if load_run(c, parent)?.is_none() {
                        return Err(Error::not_found(
                            format!("run {parent}"),
                            "a subagent's parent_run must name a run that exists",
                        ));
                    }
                }
                if let Err(e) = self.check_not_held(c, thread) {
                    if self.live_holds(c, Some(thread), None, None)?.is_empty() {
                        // A rewind a crash interrupted: waiting does not help.
                        return Err(e);
                    }
                }
                if let Some(h) = self.live_holds(c, Some(thread), root.as_deref(), None)?.first() {
                    let by = crate::threads::describe_op(&h.op);
                    return Ok(Err(if h.thread_id.as_ref() == Some(thread) || root.is_none() {
                        Error::ThreadBusy {
                            thread: thread.clone(),
                            detail: format!("{by} holds it; the run may start when it is done"),
                        }
                    } else {
                        Error::WorkspaceBusy {
                            workspace: h.workspace_id.clone().unwrap_or_default(),
                            root: h.root.clone().unwrap_or_default(),
                            detail: format!("{by} restores it; the run may start when it is done"),
                        }
                    }));
                }
                let now = c.now_ms();
                c.execute(
                    "INSERT INTO runs (id, thread_id, workspace_id, root, durable, parent_run, policy, holder, status, \
                       lease_ms, lease_expires_ms, started_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?9, ?10, ?11)",
                    params![
                        id,
                        thread,
                        ws_id,
                        root.as_deref().map(root_bytes),
                        opts.durable,
                        opts.parent_run,
                        serde_json::to_string(&policy).unwrap_or_else(|_| "{}".into()),
                        self.inner.holder_id(),
                        opts.lease.as_millis() as i64,
                        now + opts.lease.as_millis() as i64,
                        now
                    ],
                )
                .db("begin a run")?;
                if let (Some(ws), Some(root)) = (&ws_id, &root) {
                    note_workspace(c, thread, ws, root)?;
                }
                Ok(Ok(()))
            })?;
            match outcome {
                Ok(()) => break,
                Err(busy) if opts.reject_if_busy || Instant::now() >= deadline => return Err(busy),
                Err(_) => std::thread::sleep(POLL),
            }
        }
        Ok(self.register_run(id, thread.clone(), &opts, policy, subagent))
    }

    /// The checkpoint policy of a run: none for a subagent, else the three levels resolved.
    fn policy_for(&self, opts: &RunOptions, subagent: bool) -> EffectivePolicy {
        if subagent {
            return EffectivePolicy::off();
        }
        EffectivePolicy::resolve(
            self.inner.options.checkpoints.as_ref(),
            opts.agent_checkpoints.as_ref(),
            opts.checkpoints.as_ref(),
        )
    }

    /// Keeps a run of this handle in memory, to flag it when a rewind here stops it.
    fn register_run(
        &self,
        id: RunId,
        thread: ThreadId,
        opts: &RunOptions,
        policy: EffectivePolicy,
        subagent: bool,
    ) -> Run {
        let shared = Arc::new(RunShared {
            workspace: opts.workspace.clone(),
            policy,
            subagent,
            lease: opts.lease,
            interrupted: AtomicBool::new(false),
        });
        self.inner
            .runs
            .lock()
            .insert(id.clone(), Arc::downgrade(&shared));
        Run { id, thread, shared }
    }

    /// Renews a run's lease, and those of its open tool calls. A run a rewind interrupted or
    /// dropped gets `RUN_INTERRUPTED` (its open tool calls are still renewed: they go on until
    /// they finish).
    pub fn heartbeat(&self, run: &Run) -> Result<()> {
        let lease = run.shared.lease.as_millis() as i64;
        let status = self.inner.write("renew a run's lease", |c| {
            let row = require_run(c, run.id())?;
            if !self.here(&row) {
                return Err(Error::InvalidArgument(format!(
                    "run {} was taken over by another process (adopt_run); stop this one",
                    run.id()
                )));
            }
            let until = c.now_ms() + lease;
            c.execute(
                "UPDATE tool_calls SET lease_expires_ms = ?2 WHERE run_id = ?1 AND finished_ms IS NULL",
                params![run.id(), until],
            )
            .db("renew tool calls")?;
            if matches!(row.status, RunStatus::Running | RunStatus::Paused) {
                c.execute(
                    "UPDATE runs SET lease_expires_ms = ?2 WHERE id = ?1",
                    params![run.id(), until],
                )
                .db("renew a run's lease")?;
            }
            Ok((row.status, row.end_reason))
        })?;
        self.status_result(run, status.0, status.1.as_deref())
    }

    /// Pauses a run (waiting for an approval, say): it no longer goes on, and a rewind drops it.
    pub fn pause_run(&self, run: &Run) -> Result<()> {
        self.set_status(run, RunStatus::Paused)
    }

    /// Resumes a paused run. A run a rewind dropped gets `RUN_INTERRUPTED`.
    pub fn resume_run(&self, run: &Run) -> Result<()> {
        self.set_status(run, RunStatus::Running)
    }

    fn set_status(&self, run: &Run, to: RunStatus) -> Result<()> {
        let lease = run.shared.lease.as_millis() as i64;
        let status = self.inner.write("change a run's state", |c| {
            let row = require_run(c, run.id())?;
            if matches!(row.status, RunStatus::Running | RunStatus::Paused) {
                if to == RunStatus::Running {
                    self.check_not_held(c, run.thread_id())?;
                }
                c.execute(
                    "UPDATE runs SET status = ?2, lease_expires_ms = ?3 WHERE id = ?1",
                    params![run.id(), to.name(), c.now_ms() + lease],
                )
                .db("change a run's state")?;
                return Ok((to, None));
            }
            Ok((row.status, row.end_reason))
        })?;
        self.status_result(run, status.0, status.1.as_deref())
    }

    /// Ends a run; returns how it ended (`Ended`, or `Interrupted`/`Dropped` when a rewind
    /// stopped it first). Its open tool calls still count until they finish.
    pub fn end_run(&self, run: &Run) -> Result<RunStatus> {
        let status = self.inner.write("end a run", |c| {
            let row = require_run(c, run.id())?;
            if matches!(row.status, RunStatus::Running | RunStatus::Paused) {
                c.execute(
                    "UPDATE runs SET status = 'ended', ended_ms = ?2, end_reason = 'ended' WHERE id = ?1",
                    params![run.id(), c.now_ms()],
                )
                .db("end a run")?;
                return Ok(RunStatus::Ended);
            }
            Ok(row.status)
        })?;
        self.inner.runs.lock().remove(run.id());
        Ok(status)
    }

    /// Counts a tool call of a running run until [`Threads::tool_finish`]. A run a rewind
    /// stopped gets `RUN_INTERRUPTED`.
    pub fn tool_start(&self, run: &Run, name: &str) -> Result<ToolCallId> {
        let id = ToolCallId::generate();
        let lease = run.shared.lease.as_millis() as i64;
        let status = self.inner.write("start a tool call", |c| {
            let row = require_run(c, run.id())?;
            if row.status == RunStatus::Running {
                c.execute(
                    "INSERT INTO tool_calls (id, run_id, name, workspace_id, root, started_ms, lease_expires_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        id,
                        run.id(),
                        name,
                        row.workspace_id,
                        row.root.as_deref().map(root_bytes),
                        c.now_ms(),
                        c.now_ms() + lease
                    ],
                )
                .db("start a tool call")?;
            }
            Ok((row.status, row.end_reason))
        })?;
        let (status, reason) = status;
        match status {
            RunStatus::Running => Ok(id),
            RunStatus::Paused => Err(Error::InvalidArgument(format!(
                "run {} is paused; resume it before calling tools",
                run.id()
            ))),
            other => self
                .status_result(run, other, reason.as_deref())
                .map(|_| id),
        }
    }

    /// Ends the count of a tool call (idempotent).
    pub fn tool_finish(&self, call: &ToolCallId) -> Result<()> {
        self.inner.write("finish a tool call", |c| {
            let n = c
                .execute(
                    "UPDATE tool_calls SET finished_ms = coalesce(finished_ms, ?2) WHERE id = ?1",
                    params![call, c.now_ms()],
                )
                .db("finish a tool call")?;
            if n == 0 {
                return Err(Error::not_found(
                    format!("tool call {call}"),
                    "tool_start returns the ids",
                ));
            }
            Ok(())
        })
    }

    /// A run as the database knows it.
    pub fn run_info(&self, id: &RunId) -> Result<RunInfo> {
        self.inner.read(|c| {
            let row = require_run(c, id)?;
            Ok(self.info(c, &row, c.now_ms()))
        })
    }

    /// The runs of a thread that a rewind looks at: going, paused and durable.
    pub fn runs(&self, thread: &ThreadId) -> Result<ThreadRuns> {
        self.inner.read(|c| {
            require_thread(c, thread)?;
            let now = c.now_ms();
            let mut out = ThreadRuns::default();
            for row in active_runs(c)?
                .into_iter()
                .filter(|r| &r.thread_id == thread)
            {
                let info = self.info(c, &row, now);
                if info.going {
                    out.going.push(info.clone());
                }
                if row.status == RunStatus::Paused {
                    out.paused.push(info.clone());
                }
                if row.durable {
                    out.durable.push(info);
                }
            }
            Ok(out)
        })
    }

    /// Takes over a durable run that no process holds any more (its lease ran out or its
    /// process is gone), to resume it here with `opts` (its workspace and policy).
    pub fn adopt_run(&self, id: &RunId, opts: RunOptions) -> Result<Run> {
        let root = opts.workspace.as_deref().map(canonical_root);
        let row = self.inner.write("adopt a run", |c| {
            let now = c.now_ms();
            let row = require_run(c, id)?;
            if !row.durable {
                return Err(Error::validation(
                    format!("run {id} is not durable; only durable runs can be resumed by another process"),
                    Some(id.to_string()),
                ));
            }
            if !matches!(row.status, RunStatus::Running | RunStatus::Paused) {
                return Err(self.interrupted_error(
                    &row.id,
                    &row.thread_id,
                    row.status,
                    row.end_reason.as_deref(),
                ));
            }
            if self.going(c, &row, now) {
                return Err(Error::ThreadBusy {
                    thread: row.thread_id.clone(),
                    detail: format!("run {id} is held by another process until its lease runs out"),
                });
            }
            self.check_not_held(c, &row.thread_id)?;
            c.execute(
                "UPDATE runs SET holder = ?2, status = 'running', lease_ms = ?3, lease_expires_ms = ?4, \
                 workspace_id = coalesce(?5, workspace_id), root = coalesce(?6, root) WHERE id = ?1",
                params![
                    id,
                    self.inner.holder_id(),
                    opts.lease.as_millis() as i64,
                    now + opts.lease.as_millis() as i64,
                    opts.workspace.as_ref().map(|w| w.id().to_string()),
                    root.as_deref().map(root_bytes)
                ],
            )
            .db("adopt a run")?;
            Ok(row)
        })?;
        let subagent = row.parent_run.is_some();
        let policy = self.policy_for(&opts, subagent);
        Ok(self.register_run(id.clone(), row.thread_id, &opts, policy, subagent))
    }

    pub(crate) fn check_run_alive(&self, run: &Run) -> Result<()> {
        self.inner.read(|c| self.check_run_alive_in(c, run))
    }

    pub(crate) fn check_run_alive_in(&self, c: &Conn<'_>, run: &Run) -> Result<()> {
        let row = require_run(c, run.id())?;
        self.status_result(run, row.status, row.end_reason.as_deref())
    }

    fn status_result(&self, run: &Run, status: RunStatus, reason: Option<&str>) -> Result<()> {
        match status {
            RunStatus::Running | RunStatus::Paused => Ok(()),
            RunStatus::Ended => Err(Error::InvalidArgument(format!(
                "run {} has ended; begin a new run",
                run.id()
            ))),
            other => {
                run.shared.interrupted.store(true, Ordering::SeqCst);
                Err(self.interrupted_error(run.id(), run.thread_id(), other, reason))
            }
        }
    }

    /// `RUN_INTERRUPTED` for a run stopped with `status`, naming what stopped it (from the
    /// run's `reason`: a forced rewind, a forced fork, a rewind that dropped it).
    pub(crate) fn interrupted_error(
        &self,
        run: &RunId,
        thread: &ThreadId,
        status: RunStatus,
        reason: Option<&str>,
    ) -> Error {
        let by = match reason {
            Some(r) => {
                let what = r.strip_prefix("RUN_INTERRUPTED: ").unwrap_or(r);
                format!("the {}", what.strip_prefix("dropped by ").unwrap_or(what))
            }
            None => "a rewind".to_string(),
        };
        Error::RunInterrupted {
            run: run.clone(),
            thread: thread.clone(),
            how: if status == RunStatus::Dropped {
                "dropped"
            } else {
                "interrupted"
            },
            by,
        }
    }

    /// Whether a run goes on: running, lease not run out, its holder alive.
    pub(crate) fn going(&self, c: &Conn<'_>, row: &RunRow, now: i64) -> bool {
        row.status == RunStatus::Running
            && row.lease_expires_ms > now
            && self.inner.holder.is_alive(c, &row.holder)
    }

    pub(crate) fn here(&self, row: &RunRow) -> bool {
        row.holder == self.inner.holder_id()
    }

    pub(crate) fn info(&self, c: &Conn<'_>, row: &RunRow, now: i64) -> RunInfo {
        RunInfo {
            id: row.id.clone(),
            thread_id: row.thread_id.clone(),
            workspace_id: row.workspace_id.clone(),
            root: row.root.clone(),
            durable: row.durable,
            parent_run: row.parent_run.clone(),
            status: row.status,
            going: self.going(c, row, now),
            here: self.here(row),
            lease_expires_ms: row.lease_expires_ms,
            open_tool_calls: row.open_tools,
            started_ms: row.started_ms,
        }
    }

    /// Open tool calls (lease not run out, holder alive) in workspaces overlapping `root`.
    pub(crate) fn open_tools(&self, c: &Conn<'_>, root: &Path, now: i64) -> Result<Vec<ToolRow>> {
        let rows: Vec<(ToolRow, i64, String)> = c
            .prepare(
                "SELECT t.id, t.run_id, t.name, t.root, t.lease_expires_ms, r.holder \
                 FROM tool_calls t JOIN runs r ON r.id = t.run_id WHERE t.finished_ms IS NULL",
            )
            .db("read open tool calls")?
            .query_map((), |r| {
                let tool = ToolRow {
                    id: r.get(0)?,
                    run_id: r.get(1)?,
                    name: r.get(2)?,
                    root: r.get::<_, Option<Vec<u8>>>(3)?.map(root_path),
                };
                Ok((tool, r.get(4)?, r.get(5)?))
            })
            .db("read open tool calls")?
            .collect::<crate::sql::SqlResult<_>>()
            .db("read open tool calls")?;
        Ok(rows
            .into_iter()
            .filter(|(_, expires, holder)| *expires > now && self.inner.holder.is_alive(c, holder))
            .map(|(tool, ..)| tool)
            .filter(|t| t.root.as_deref().is_some_and(|r| roots_overlap(r, root)))
            .collect())
    }

    /// Marks a run of this handle interrupted in memory.
    pub(crate) fn flag_interrupted(&self, id: &RunId) {
        if let Some(shared) = self.inner.runs.lock().get(id).and_then(|w| w.upgrade()) {
            shared.interrupted.store(true, Ordering::SeqCst);
        }
    }
}

/// Runs that are running or paused.
pub(crate) fn active_runs(c: &Conn<'_>) -> Result<Vec<RunRow>> {
    c.prepare(&format!(
        "SELECT {RUN_COLS} FROM runs r WHERE r.status IN ('running', 'paused') ORDER BY r.seq"
    ))
    .db("read runs")?
    .query_map((), run_row)
    .db("read runs")?
    .collect::<crate::sql::SqlResult<_>>()
    .db("read runs")
}

pub(crate) fn load_run(c: &Conn<'_>, id: &RunId) -> Result<Option<RunRow>> {
    c.query_row(
        &format!("SELECT {RUN_COLS} FROM runs r WHERE r.id = ?1"),
        [id],
        run_row,
    )
    .optional()
    .db("read a run")
}

fn require_run(c: &Conn<'_>, id: &RunId) -> Result<RunRow> {
    load_run(c, id)?
        .ok_or_else(|| Error::not_found(format!("run {id}"), "begin_run returns the runs"))
}

/// Sets runs' status (interrupted or dropped) with an end reason.
pub(crate) fn stop_runs(
    c: &Conn<'_>,
    ids: &[RunId],
    status: RunStatus,
    reason: &str,
) -> Result<()> {
    for id in ids {
        c.execute(
            "UPDATE runs SET status = ?2, ended_ms = ?3, end_reason = ?4 \
             WHERE id = ?1 AND status IN ('running', 'paused')",
            params![id, status.name(), c.now_ms(), reason],
        )
        .db("stop a run")?;
    }
    Ok(())
}
