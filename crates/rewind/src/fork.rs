//! Forking a thread: a new thread that shares the prefix of another up to an entry (no
//! payload is copied), optionally with the files as they were there.

use crate::error::{DbResult, Error, Result};
use crate::files::Files;
use crate::ids::{CheckpointId, EntryId, ForkId, ThreadId};
use crate::lineage::{ChosenFiles, Lineage};
use crate::model::{CheckpointRef, EventKind};
use crate::names::check_id_free;
use crate::report::{ForkReport, RunsReport};
use crate::rewind::{busy_workspace, files_report, insert_hold, plan_restore, FilesFrom};
use crate::rows::{emit, load_checkpoint, note_workspace};
use crate::sql::params;
use crate::threads::{canonical_root, Threads};
use cairn_store::{SnapshotId, Store};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How to fork. `Default`: no files, a new thread id, `tool_settle` 10 s, `lease_wait` 60 s.
#[derive(Clone)]
pub struct ForkOptions {
    /// Give the fork's workspace the files as they were at the point.
    pub files: bool,
    /// The fork's workspace (required with files).
    pub workspace: Option<Arc<dyn Files>>,
    /// Where the checkpoints are kept; `workspace` by default. When it is another store, every
    /// checkpoint of the branch is copied into the fork's workspace's store first.
    pub source: Option<Arc<dyn Files>>,
    /// The new thread's id; one that names a thread already is refused with `VALIDATION`.
    pub new_thread_id: Option<ThreadId>,
    /// Make nothing; report what would be made.
    pub dry_run: bool,
    /// Stop what is in the way, as a rewind does.
    pub force: bool,
    /// With files: replace the contents of a fork workspace that exists, is not empty and is
    /// no workspace of the thread's family (refused with `DENIED` otherwise; see
    /// [`Threads::check_fork_target`]).
    pub replace: bool,
    /// With `force` and files: how long to wait for tool calls of the runs it stopped.
    pub tool_settle: Duration,
    /// With `force` and files: how long to wait for the leases of runs other processes hold.
    pub lease_wait: Duration,
    /// The caller's metadata for the new thread (a JSON object).
    pub metadata: serde_json::Value,
}

impl Default for ForkOptions {
    fn default() -> Self {
        ForkOptions {
            files: false,
            workspace: None,
            source: None,
            new_thread_id: None,
            dry_run: false,
            force: false,
            replace: false,
            tool_settle: Duration::from_secs(10),
            lease_wait: Duration::from_secs(60),
            metadata: serde_json::Value::Object(Default::default()),
        }
    }
}

impl std::fmt::Debug for ForkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkOptions")
            .field("files", &self.files)
            .field("workspace", &self.workspace.as_ref().map(|w| w.id()))
            .field("source", &self.source.as_ref().map(|w| w.id()))
            .field("new_thread_id", &self.new_thread_id)
            .field("dry_run", &self.dry_run)
            .field("force", &self.force)
            .field("replace", &self.replace)
            .field("tool_settle", &self.tool_settle)
            .field("lease_wait", &self.lease_wait)
            .finish()
    }
}

/// The files part of a fork, prepared and checked.
struct Prepared {
    ws: Arc<dyn Files>,
    root: std::path::PathBuf,
    chosen: ChosenFiles,
    /// Snapshots of the branch the fork's store lacks (copied before the restore).
    to_copy: Vec<SnapshotId>,
    stores: Option<(Store, Store)>,
}

impl Threads {
    /// Forks `thread` at `at_entry` (any entry it sees): a new thread whose active leaf is
    /// `at_entry`, sharing the entries up to it with their checkpoint references. When the
    /// files at the point come from the user message right after it, the fork names that
    /// checkpoint (`file_checkpoint_at`), so rewinding or forking the fork at its point
    /// restores the same files. With files, the fork's workspace gets the files as they were
    /// at the point, after a safety snapshot; every check runs before the fork is made, and a
    /// fork whose files fail is taken back whole.
    pub fn fork(
        &self,
        thread: &ThreadId,
        at_entry: &EntryId,
        opts: &ForkOptions,
    ) -> Result<ForkReport> {
        let lin = self.inner.read(|c| Lineage::load(c, thread))?;
        if !lin.entries.contains_key(at_entry) {
            let exists = self
                .inner
                .read(|c| crate::rows::load_entry(c, at_entry))?
                .is_some();
            return Err(if exists {
                Error::validation(
                    format!("entry {at_entry} is not an entry of thread {thread}; fork from an entry it sees"),
                    Some(at_entry.to_string()),
                )
            } else {
                Error::not_found(
                    format!("entry {at_entry}"),
                    "list the thread's entries with entries(thread, true)",
                )
            });
        }
        if !opts.metadata.is_object() {
            return Err(Error::InvalidArgument(
                "fork metadata must be a JSON object".into(),
            ));
        }
        let new_id = match &opts.new_thread_id {
            Some(id) => {
                id.check()?;
                self.inner.read(|c| check_id_free(c, id))?;
                id.clone()
            }
            None => ThreadId::generate(),
        };
        // The checkpoint the fork names at its point: only one the layer recorded.
        let file_checkpoint_at: Option<CheckpointRef> = match lin.exact_at(at_entry) {
            Some(cand) => self.inner.read(|c| {
                let Some(id) = &cand.checkpoint_id else {
                    return Ok(None);
                };
                let Some(cp) = load_checkpoint(c, id)? else {
                    return Ok(None);
                };
                let genuine = cand.by_id || cp.entry_id == cand.entry_id;
                let meta_ok = cand.meta.as_ref().is_none_or(|m| {
                    m.get("snapshot_id").and_then(|v| v.as_str())
                        == Some(cp.snapshot_id.to_hex().as_str())
                });
                Ok((genuine && meta_ok).then(|| cp.reference()))
            })?,
            None => None,
        };
        let prepared = if opts.files {
            Some(self.prepare_fork_files(&lin, at_entry, opts)?)
        } else {
            None
        };
        let target = prepared.as_ref().map(|p| (p.ws.id(), p.root.as_path()));
        let survey = self.inner.read(|c| self.survey(c, thread, target, None))?;

        if opts.dry_run {
            let files = match &prepared {
                Some(p) => Some(self.dry_plan(p)?),
                None => None,
            };
            return Ok(ForkReport {
                thread_id: new_id,
                source_thread_id: thread.clone(),
                at_entry_id: at_entry.clone(),
                dry_run: true,
                file_checkpoint_at,
                snapshots_copied: prepared
                    .as_ref()
                    .map(|p| p.to_copy.clone())
                    .unwrap_or_default(),
                files,
                runs: RunsReport {
                    going: survey.going_ids(),
                    ..Default::default()
                },
            });
        }
        if prepared.is_some() {
            self.refuse(&survey, thread, target, opts.force, "fork")?;
        }
        // Check the plan before the fork is made (the safety snapshot's rules included).
        if let Some(p) = &prepared {
            if let Some((src, dst)) = &p.stores {
                if !dst.has_snapshot(&p.chosen.snapshot_id) {
                    // The plan needs the checkpoint in the fork's store: copy it now; it is
                    // taken back with the fork if anything fails.
                    cairn_store::copy::copy_snapshot(src, &p.chosen.snapshot_id, dst)?;
                }
            }
            let plan = plan_restore(&self.inner, p.ws.as_ref(), &p.chosen);
            let plan = match plan {
                Ok(plan) if plan.busy() => Err(busy_workspace(p.ws.as_ref(), Some(&p.root))),
                other => other,
            };
            if let Err(e) = plan {
                self.forget_copies(p, &[p.chosen.snapshot_id]);
                return Err(e);
            }
        }

        let fork_id = ForkId::generate();
        let guard = self.inner.begin_op(format!("fork:{fork_id}"))?;
        let fcp_id: Option<CheckpointId> =
            file_checkpoint_at.as_ref().map(|r| r.checkpoint_id.clone());
        let files_on = prepared.is_some();
        let forked = self.inner.write("make a fork", |c| {
            check_id_free(c, &new_id)?;
            let mut forced = crate::guard::Forced::default();
            let mut going = Vec::new();
            if files_on {
                let s = self.survey(c, thread, target, Some(&guard.op))?;
                self.refuse(&s, thread, target, opts.force, "fork")?;
                going = s.going_ids();
                if opts.force {
                    forced = self.force_runs(c, &s, true, &format!("RUN_INTERRUPTED: forced fork {fork_id}"))?;
                }
            }
            let horizon: i64 = c
                .query_row("SELECT coalesce(max(seq), 0) FROM checkpoints", (), |r| r.get(0))
                .db("read checkpoints")?;
            c.execute(
                "INSERT INTO threads (id, created_ms, state, parent_thread, fork_entry, file_checkpoint_at, \
                   fork_checkpoint_seq, active_leaf, metadata) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?5, ?8)",
                params![
                    new_id,
                    c.now_ms(),
                    if files_on { "pending" } else { "ready" },
                    thread,
                    at_entry,
                    fcp_id,
                    horizon,
                    opts.metadata.to_string()
                ],
            )
            .db("make a fork")?;
            if let Some(ws) = &opts.workspace {
                note_workspace(c, &new_id, ws.id(), &canonical_root(ws.as_ref()))?;
            }
            c.execute(
                "INSERT INTO forks (id, thread_id, fork_thread, at_entry, state, holder, op, workspace_id, root, created_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    fork_id,
                    thread,
                    new_id,
                    at_entry,
                    if files_on { "started" } else { "completed" },
                    self.inner.holder_id(),
                    guard.op,
                    target.map(|t| t.0),
                    target.map(|t| crate::model::root_bytes(t.1)),
                    c.now_ms()
                ],
            )
            .db("record a fork")?;
            if files_on {
                insert_hold(c, Some(thread), None, &guard.op, self.inner.holder_id())?;
                insert_hold(c, Some(&new_id), target, &guard.op, self.inner.holder_id())?;
            } else {
                emit(
                    c,
                    Some(thread),
                    EventKind::ForkCreated,
                    serde_json::json!({
                        "thread_id": new_id, "source_thread_id": thread, "at_entry_id": at_entry,
                        "files": false, "file_checkpoint_at": fcp_id,
                    }),
                )?;
            }
            Ok((going, forced))
        });
        let (going, forced) = match forked {
            Ok(v) => v,
            Err(e) => {
                if let Some(p) = &prepared {
                    self.forget_copies(p, &[p.chosen.snapshot_id]);
                }
                return Err(e);
            }
        };
        for r in &forced.interrupted {
            self.flag_interrupted(r);
        }
        let mut report = ForkReport {
            thread_id: new_id.clone(),
            source_thread_id: thread.clone(),
            at_entry_id: at_entry.clone(),
            dry_run: false,
            file_checkpoint_at,
            snapshots_copied: Vec::new(),
            files: None,
            runs: RunsReport {
                going,
                interrupted: forced.interrupted.clone(),
                ..Default::default()
            },
        };
        let Some(p) = prepared else {
            return Ok(report);
        };

        // Files: copy the branch's checkpoints, restore, then make the fork visible.
        let mut copied: Vec<SnapshotId> = Vec::new();
        let step = (|| -> Result<crate::files::FileOutcome> {
            if let Some((src, dst)) = &p.stores {
                for id in &p.to_copy {
                    let done = cairn_store::copy::copy_snapshot(src, id, dst)?;
                    if !done.already_present || *id == p.chosen.snapshot_id {
                        copied.push(*id);
                    }
                }
            }
            self.wait_clear(
                thread,
                (p.ws.id(), &p.root),
                &guard.op,
                opts.tool_settle,
                opts.lease_wait,
            )?;
            let plan = plan_restore(&self.inner, p.ws.as_ref(), &p.chosen)?;
            if plan.busy() {
                return Err(busy_workspace(p.ws.as_ref(), Some(&p.root)));
            }
            p.ws.apply(&plan, &format!("cairn-fork-{fork_id}"))
                .map_err(|e| Error::files(p.ws.id(), "restore the fork's files", e))
        })();
        let outcome = match step {
            Ok(o) => o,
            Err(e) => {
                let mut forget = copied.clone();
                if !forget.contains(&p.chosen.snapshot_id)
                    && p.to_copy.contains(&p.chosen.snapshot_id)
                {
                    forget.push(p.chosen.snapshot_id);
                }
                self.take_back_fork(&fork_id, &new_id, &e.to_string())?;
                self.forget_copies(&p, &forget);
                return Err(e);
            }
        };
        report.snapshots_copied = p.to_copy.clone();
        report.files = Some(files_report(
            &p.chosen,
            Some(&outcome.report),
            outcome.safety_snapshot_id,
        ));
        let text = serde_json::to_string(&report).unwrap_or_default();
        self.inner.write("complete a fork", |c| {
            c.execute("UPDATE threads SET state = 'ready' WHERE id = ?1", [&new_id])
                .db("complete a fork")?;
            c.execute(
                "UPDATE forks SET state = 'completed', report = ?2, copied = ?3, finished_ms = ?4 WHERE id = ?1",
                params![fork_id, text, serde_json::to_string(&copied).unwrap_or_default(), c.now_ms()],
            )
            .db("complete a fork")?;
            c.execute("DELETE FROM holds WHERE op = ?1", [&guard.op])
                .db("release a hold")?;
            emit(
                c,
                Some(thread),
                EventKind::ForkCreated,
                serde_json::json!({
                    "thread_id": new_id, "source_thread_id": thread, "at_entry_id": at_entry,
                    "files": true, "snapshots_copied": report.snapshots_copied,
                    "file_checkpoint_at": report.file_checkpoint_at.as_ref().map(|r| &r.checkpoint_id),
                }),
            )
        })?;
        drop(guard);
        Ok(report)
    }

    fn prepare_fork_files(
        &self,
        lin: &Lineage,
        at: &EntryId,
        opts: &ForkOptions,
    ) -> Result<Prepared> {
        let ws = opts.workspace.clone().ok_or_else(|| {
            Error::validation(
                format!(
                    "a fork of thread {} with files needs a workspace: set ForkOptions::workspace",
                    lin.thread.id
                ),
                Some(lin.thread.id.to_string()),
            )
        })?;
        let source = opts.source.clone().unwrap_or_else(|| ws.clone());
        self.check_fork_target(
            &lin.thread.id,
            source.as_ref(),
            ws.root(),
            ws.store().map(|s| s.path()),
            opts.replace,
        )?;
        let root = canonical_root(ws.as_ref());
        let source_root = canonical_root(source.as_ref());
        let chosen = self.choose_files(
            lin,
            Some(at),
            &FilesFrom::Auto,
            source.as_ref(),
            &source_root,
        )?;
        let same = match (source.store(), ws.store()) {
            (Some(a), Some(b)) => cairn_store::fsutil::same_path(a.path(), b.path()),
            _ => source.id() == ws.id() && source_root == root,
        };
        let mut to_copy = Vec::new();
        let mut stores = None;
        if !same {
            let (Some(src), Some(dst)) = (source.store(), ws.store()) else {
                return Err(Error::validation(
                    format!(
                        "the checkpoints of workspace {} cannot be copied into workspace {}: both need a local store",
                        source.id(),
                        ws.id()
                    ),
                    Some(ws.id().to_string()),
                ));
            };
            // Every checkpoint of the branch up to the point, and the one restored.
            let mut ancestors = HashSet::new();
            let mut cur = Some(at.clone());
            while let Some(id) = cur {
                cur = lin.entries.get(&id).and_then(|l| l.parent_id.clone());
                if !ancestors.insert(id) {
                    break;
                }
            }
            let cps = self.inner.read(|c| lin.checkpoints(c))?;
            let mut seen = HashSet::new();
            for cp in cps {
                let on_branch = cp.entry_id.as_ref().is_some_and(|e| ancestors.contains(e))
                    || cp.id == chosen.checkpoint_id
                    || lin.file_checkpoint_at.as_ref() == Some(&cp.id);
                if on_branch
                    && seen.insert(cp.snapshot_id)
                    && !dst.has_snapshot(&cp.snapshot_id)
                    && src.has_snapshot(&cp.snapshot_id)
                {
                    to_copy.push(cp.snapshot_id);
                }
            }
            stores = Some((src.clone(), dst.clone()));
        }
        Ok(Prepared {
            ws,
            root,
            chosen,
            to_copy,
            stores,
        })
    }

    /// Refuses, with `DENIED` and before anything is made, a fork of `thread` whose files would
    /// go to `target` (a directory that may not exist yet) when that would lose data:
    /// - `target` holds the source workspace (it is an ancestor of its root): the restore
    ///   would delete it;
    /// - `target` lies inside a Cairn store or holds the source's store or the thread
    ///   database;
    /// - `target` exists and holds files (besides `target_store` and the names every snapshot
    ///   leaves out: `.git`, `node_modules`, `.cairn`), and is no workspace of the thread's
    ///   family (the thread, the threads it was forked from, and their forks), unless
    ///   `replace`: those files would be replaced.
    ///
    /// The source workspace itself as the target is not checked here (a fork into the
    /// workspace it came from restores as a rewind does).
    pub fn check_fork_target(
        &self,
        thread: &ThreadId,
        source: &dyn Files,
        target: &Path,
        target_store: Option<&Path>,
        replace: bool,
    ) -> Result<()> {
        let target = canonical_lenient(target);
        let source_root = canonical_root(source);
        if target == source_root {
            return Ok(());
        }
        let denied = |message: String| Error::Denied {
            message,
            path: target.clone(),
        };
        if source_root.starts_with(&target) {
            return Err(denied(format!(
                "cannot fork into {}: it holds the source workspace {}, which the fork's files \
                 would replace; choose a directory outside it (a sibling such as {})",
                target.display(),
                source_root.display(),
                source_root.with_file_name("fork").display()
            )));
        }
        let mut protected: Vec<(&str, PathBuf)> = Vec::new();
        if let Some(store) = source.store() {
            protected.push((
                "the source workspace's store",
                canonical_lenient(store.path()),
            ));
        }
        if !crate::db::is_pg_url(&self.path().to_string_lossy()) {
            protected.push(("the thread database", canonical_lenient(self.path())));
        }
        if let Some(store) = cairn_store::store_containing(&target) {
            protected.push(("a Cairn store", store));
        }
        for (what, path) in &protected {
            if path.starts_with(&target) || target.starts_with(path) {
                let how = if target == *path {
                    "it is"
                } else if target.starts_with(path) {
                    "it lies inside"
                } else {
                    "it holds"
                };
                return Err(denied(format!(
                    "cannot fork into {}: {how} {what} {}, which the fork's files would \
                     destroy; choose a directory outside it",
                    target.display(),
                    path.display(),
                )));
            }
        }
        if replace {
            return Ok(());
        }
        let own_store = target_store.map(canonical_lenient);
        let mut found: Vec<String> = Vec::new();
        if let Ok(dir) = std::fs::read_dir(&target) {
            for e in dir.flatten() {
                let name = e.file_name();
                let skip = cairn_snapshot::DEFAULT_EXCLUDES
                    .iter()
                    .any(|d| std::ffi::OsStr::new(d) == name)
                    || own_store.as_deref() == Some(target.join(&name).as_path());
                if !skip {
                    found.push(name.to_string_lossy().into_owned());
                }
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        let ours: i64 = self.inner.read(|c| {
            c.query_row(
                "WITH RECURSIVE up(id, parent) AS ( \
                   SELECT id, parent_thread FROM threads WHERE id = ?1 \
                   UNION SELECT t.id, t.parent_thread FROM threads t JOIN up ON t.id = up.parent), \
                 family(id) AS ( \
                   SELECT id FROM up WHERE parent IS NULL \
                   UNION SELECT t.id FROM threads t JOIN family ON t.parent_thread = family.id) \
                 SELECT count(*) FROM thread_workspaces w JOIN family ON w.thread_id = family.id \
                 WHERE w.root = ?2",
                params![thread, crate::model::root_bytes(&target)],
                |r| r.get(0),
            )
            .db("read a thread's workspaces")
        })?;
        if ours > 0 {
            return Ok(());
        }
        found.sort();
        let shown = found.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        let more = if found.len() > 5 {
            format!(" and {} more", found.len() - 5)
        } else {
            String::new()
        };
        Err(denied(format!(
            "cannot fork into {}: it is not empty (it holds {shown}{more}) and is no workspace \
             of thread {thread} or its forks, so the fork's files would replace what is there; \
             choose a new directory, or pass --force (the API's replace option) to replace its \
             contents (a dry run with it lists what would be deleted)",
            target.display()
        )))
    }

    /// A dry run's plan: into another store, the checkpoint is copied for the plan and
    /// removed again.
    fn dry_plan(&self, p: &Prepared) -> Result<crate::report::FilesReport> {
        let mut copied = false;
        if let Some((src, dst)) = &p.stores {
            if !dst.has_snapshot(&p.chosen.snapshot_id) {
                cairn_store::copy::copy_snapshot(src, &p.chosen.snapshot_id, dst)?;
                copied = true;
            }
        }
        let plan = plan_restore(&self.inner, p.ws.as_ref(), &p.chosen);
        if copied {
            self.forget_copies(p, &[p.chosen.snapshot_id]);
        }
        let plan = plan?;
        Ok(files_report(&p.chosen, Some(&plan.report()), None))
    }

    /// Deletes snapshots copied into the fork's store for a fork that did not happen (or a dry
    /// run), and the packs and indexes the copies wrote: the collection after the deletion
    /// has no grace period, which is safe because it defers while any process has an
    /// operation going on in that store (snapshots, restores and copies all register one),
    /// and it repacks nothing.
    fn forget_copies(&self, p: &Prepared, ids: &[SnapshotId]) {
        let at_once = cairn_store::gc::GcOptions {
            grace: std::time::Duration::ZERO,
            repack_below: 0.0,
            max_packs: usize::MAX,
        };
        if let Some((_, dst)) = &p.stores {
            for id in ids {
                if p.to_copy.contains(id) && dst.has_snapshot(id) {
                    let _ = dst.delete_snapshot(id, &at_once);
                }
            }
        }
    }

    /// Takes back a pending fork: its thread, its workspace link, its holds.
    fn take_back_fork(&self, fork: &ForkId, thread: &ThreadId, why: &str) -> Result<()> {
        self.inner.write("take back a fork", |c| {
            c.execute("DELETE FROM holds WHERE op = ?1", [format!("fork:{fork}")])
                .db("release a hold")?;
            c.execute(
                "DELETE FROM thread_workspaces WHERE thread_id = ?1",
                [thread],
            )
            .db("take back a fork")?;
            c.execute(
                "DELETE FROM thread_names WHERE thread_id = ?1 \
                 AND thread_id IN (SELECT id FROM threads WHERE state = 'pending')",
                [thread],
            )
            .db("take back a fork")?;
            c.execute(
                "DELETE FROM threads WHERE id = ?1 AND state = 'pending'",
                [thread],
            )
            .db("take back a fork")?;
            c.execute(
                "UPDATE forks SET state = 'failed', error = ?2, finished_ms = ?3 WHERE id = ?1",
                params![fork, why, c.now_ms()],
            )
            .db("take back a fork")?;
            Ok(())
        })
    }

    /// Takes back the forks a crash left half made.
    pub(crate) fn take_back_dead_forks(&self) -> Result<Vec<ThreadId>> {
        let rows: Vec<(ForkId, ThreadId, String, String)> = self.inner.read(|c| {
            c.prepare("SELECT id, fork_thread, holder, op FROM forks WHERE state = 'started'")
                .db("read forks")?
                .query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .db("read forks")?
                .collect::<crate::sql::SqlResult<_>>()
                .db("read forks")
        })?;
        let mut out = Vec::new();
        for (id, thread, holder, op) in rows {
            if !self.inner.op_alive_now(&holder, &op) {
                self.take_back_fork(
                    &id,
                    &thread,
                    "interrupted by a crash before its files were restored",
                )?;
                out.push(thread);
            }
        }
        Ok(out)
    }
}

/// `path` made canonical as far as it exists: its nearest existing ancestor canonicalized, the
/// rest of it appended (a fork's directory may not be made yet).
fn canonical_lenient(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = path;
    loop {
        if let Ok(c) = std::fs::canonicalize(cur) {
            return rest.iter().rev().fold(c, |acc, part| acc.join(part));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                cur = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
