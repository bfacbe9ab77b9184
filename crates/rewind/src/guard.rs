//! What stands in the way of a rewind or fork: runs going in the thread or in an overlapping
//! workspace, open tool calls, and holds of other rewinds and forks; and how `force` clears it.

use crate::error::{Error, Result};
use crate::ids::{RunId, ThreadId};
use crate::model::{roots_overlap, RunStatus};
use crate::rows::HoldRow;
use crate::runs::{active_runs, stop_runs, RunRow, ToolRow};
use crate::sql::Conn;
use crate::threads::{describe_op, Threads, POLL};
use std::path::Path;
use std::time::{Duration, Instant};

/// The state of the runs, tool calls and holds around a thread and a workspace.
#[derive(Debug, Default)]
pub(crate) struct Survey {
    /// The thread's running and paused runs.
    pub(crate) thread_runs: Vec<RunRow>,
    /// Running and paused runs of other threads in an overlapping workspace (files only).
    pub(crate) ws_runs: Vec<RunRow>,
    /// Which of those are going.
    pub(crate) going: Vec<RunId>,
    /// Which of those this handle holds.
    pub(crate) here: Vec<RunId>,
    /// Open tool calls in an overlapping workspace (files only).
    pub(crate) open_tools: Vec<ToolRow>,
    /// Holds of other operations on the thread.
    pub(crate) thread_holds: Vec<HoldRow>,
    /// Holds of other operations on an overlapping workspace (files only).
    pub(crate) ws_holds: Vec<HoldRow>,
}

/// What `force` does to the runs in the way.
#[derive(Debug, Default)]
pub(crate) struct Forced {
    /// Runs of this handle, stopped with `RUN_INTERRUPTED`.
    pub(crate) interrupted: Vec<RunId>,
    /// Durable runs of the thread another process holds, dropped (no files only).
    pub(crate) dropped: Vec<RunId>,
}

impl Survey {
    fn is_going(&self, id: &RunId) -> bool {
        self.going.contains(id)
    }

    fn is_here(&self, id: &RunId) -> bool {
        self.here.contains(id)
    }

    /// The going runs of the thread.
    pub(crate) fn going_thread(&self) -> Vec<&RunRow> {
        self.thread_runs
            .iter()
            .filter(|r| self.is_going(&r.id))
            .collect()
    }

    /// The going runs of other threads in the workspace.
    pub(crate) fn going_ws(&self) -> Vec<&RunRow> {
        self.ws_runs
            .iter()
            .filter(|r| self.is_going(&r.id))
            .collect()
    }

    /// Every going run in the way, the thread's first.
    pub(crate) fn going_ids(&self) -> Vec<RunId> {
        self.going_thread()
            .into_iter()
            .chain(self.going_ws())
            .map(|r| r.id.clone())
            .collect()
    }

    /// The paused runs of the thread.
    pub(crate) fn paused(&self) -> Vec<RunId> {
        self.thread_runs
            .iter()
            .filter(|r| r.status == RunStatus::Paused)
            .map(|r| r.id.clone())
            .collect()
    }

    /// The durable runs of the thread (running or paused).
    pub(crate) fn durable(&self) -> Vec<RunId> {
        self.thread_runs
            .iter()
            .filter(|r| r.durable)
            .map(|r| r.id.clone())
            .collect()
    }

    fn describe(&self, runs: &[&RunRow]) -> String {
        runs.iter()
            .map(|r| {
                let whose = if self.is_here(&r.id) {
                    "here"
                } else if r.durable {
                    "durable, held by another process"
                } else {
                    "held by another process"
                };
                format!("run {} of thread {} ({whose})", r.id, r.thread_id)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The workspace a rewind or fork restores: its id and canonical root.
pub(crate) type Target<'a> = Option<(&'a str, &'a Path)>;

impl Threads {
    /// Looks at what is around `thread` and, with files, the workspace at `target`.
    pub(crate) fn survey(
        &self,
        c: &Conn<'_>,
        thread: &ThreadId,
        target: Target<'_>,
        except: Option<&str>,
    ) -> Result<Survey> {
        let now = c.now_ms();
        let mut s = Survey::default();
        for row in active_runs(c)? {
            let in_thread = &row.thread_id == thread;
            let in_ws = match (target, &row.root) {
                (Some((_, root)), Some(r)) => roots_overlap(root, r),
                _ => false,
            };
            if !in_thread && !in_ws {
                continue;
            }
            if self.going(c, &row, now) {
                s.going.push(row.id.clone());
            }
            if self.here(&row) {
                s.here.push(row.id.clone());
            }
            if in_thread {
                s.thread_runs.push(row);
            } else {
                s.ws_runs.push(row);
            }
        }
        s.thread_holds = self.live_holds(c, Some(thread), None, except)?;
        if let Some((_, root)) = target {
            s.open_tools = self.open_tools(c, root, now)?;
            s.ws_holds = self
                .live_holds(c, None, Some(root), except)?
                .into_iter()
                .filter(|h| h.root.is_some())
                .collect();
        }
        Ok(s)
    }

    /// Refuses what is in the way: holds always; without `force`, going runs of the thread
    /// (`THREAD_BUSY`), and with files going runs of other threads in an overlapping workspace
    /// and open tool calls there (`WORKSPACE_BUSY`).
    pub(crate) fn refuse(
        &self,
        s: &Survey,
        thread: &ThreadId,
        target: Target<'_>,
        force: bool,
        what: &str,
    ) -> Result<()> {
        if let Some(h) = s.thread_holds.first() {
            return Err(Error::ThreadBusy {
                thread: thread.clone(),
                detail: format!("{} holds it; {what} when it is done", describe_op(&h.op)),
            });
        }
        if let (Some((ws, root)), Some(h)) = (target, s.ws_holds.first()) {
            return Err(Error::WorkspaceBusy {
                workspace: ws.to_string(),
                root: root.to_path_buf(),
                detail: format!(
                    "{} restores the overlapping workspace {}; {what} when it is done",
                    describe_op(&h.op),
                    h.root
                        .as_deref()
                        .map(|r| r.display().to_string())
                        .unwrap_or_default()
                ),
            });
        }
        if force {
            return Ok(());
        }
        let going = s.going_thread();
        if !going.is_empty() {
            return Err(Error::ThreadBusy {
                thread: thread.clone(),
                detail: format!(
                    "{} going on; wait for it, or {what} with force to stop it",
                    s.describe(&going)
                ),
            });
        }
        if let Some((ws, root)) = target {
            let going = s.going_ws();
            if !going.is_empty() {
                return Err(Error::WorkspaceBusy {
                    workspace: ws.to_string(),
                    root: root.to_path_buf(),
                    detail: format!(
                        "{} going on in the same or an overlapping workspace; wait for it, or {what} with force to stop it",
                        s.describe(&going)
                    ),
                });
            }
            if let Some(t) = s.open_tools.first() {
                return Err(Error::WorkspaceBusy {
                    workspace: ws.to_string(),
                    root: root.to_path_buf(),
                    detail: format!(
                        "tool call {} ({}) of run {} still runs in the workspace; wait for it, or {what} with force to wait for it",
                        t.id, t.name, t.run_id
                    ),
                });
            }
        }
        Ok(())
    }

    /// With `force`: stops the going runs of this handle (the thread's, and with files those
    /// in the workspace) with `RUN_INTERRUPTED`. Without files, the thread's runs another
    /// process holds are stopped too (durable ones dropped), seen at their next heartbeat; with
    /// files they are never forced: [`Threads::wait_clear`] waits for their leases.
    pub(crate) fn force_runs(
        &self,
        c: &Conn<'_>,
        s: &Survey,
        files: bool,
        reason: &str,
    ) -> Result<Forced> {
        let mut out = Forced::default();
        let candidates: Vec<&RunRow> = if files {
            s.going_thread().into_iter().chain(s.going_ws()).collect()
        } else {
            s.going_thread()
        };
        for r in candidates {
            if s.is_here(&r.id) {
                out.interrupted.push(r.id.clone());
            } else if !files {
                if r.durable {
                    out.dropped.push(r.id.clone());
                } else {
                    out.interrupted.push(r.id.clone());
                }
            }
        }
        stop_runs(c, &out.interrupted, RunStatus::Interrupted, reason)?;
        stop_runs(c, &out.dropped, RunStatus::Dropped, reason)?;
        Ok(out)
    }

    /// Waits until no run another process holds goes on in the thread or workspace (at most
    /// `lease_wait`: their leases must run out) and no tool call runs in the workspace (at most
    /// `tool_settle`). Returns whether it waited.
    pub(crate) fn wait_clear(
        &self,
        thread: &ThreadId,
        target: (&str, &Path),
        except: &str,
        tool_settle: Duration,
        lease_wait: Duration,
    ) -> Result<bool> {
        let started = Instant::now();
        let mut waited = false;
        loop {
            let s = self
                .inner
                .read(|c| self.survey(c, thread, Some(target), Some(except)))?;
            let going: Vec<&RunRow> = s.going_thread().into_iter().chain(s.going_ws()).collect();
            if going.is_empty() && s.open_tools.is_empty() {
                return Ok(waited);
            }
            let elapsed = started.elapsed();
            if !going.is_empty() && elapsed >= lease_wait {
                let detail = format!(
                    "{} still going after {} ms: a run another process holds is never forced while files are restored; \
                     try again when its lease has run out",
                    s.describe(&going),
                    lease_wait.as_millis()
                );
                return Err(if going.iter().any(|r| &r.thread_id == thread) {
                    Error::ThreadBusy {
                        thread: thread.clone(),
                        detail,
                    }
                } else {
                    Error::WorkspaceBusy {
                        workspace: target.0.to_string(),
                        root: target.1.to_path_buf(),
                        detail,
                    }
                });
            }
            if let Some(t) = s.open_tools.first().filter(|_| elapsed >= tool_settle) {
                return Err(Error::WorkspaceBusy {
                    workspace: target.0.to_string(),
                    root: target.1.to_path_buf(),
                    detail: format!(
                        "tool call {} ({}) of run {} still runs {} ms after its run was stopped; \
                         try again when it has finished",
                        t.id,
                        t.name,
                        t.run_id,
                        tool_settle.as_millis()
                    ),
                });
            }
            waited = true;
            std::thread::sleep(POLL);
        }
    }
}
