//! Applying a plan: holds checked, a safety snapshot taken, the plan re-checked against it, a
//! journal synced, every new content staged and verified, then removals, creations and modes
//! in dependency order, all through directory descriptors (see `safe`).
//!
//! # Handling the return value
//! `Ok(report)`: the workspace now holds the snapshot (except what `kept` lists);
//! `report.safety_snapshot_id` undoes it. `Err` before any change (`BUSY`, `DENIED`,
//! `CONFLICT`, `IO` for a corrupt object, `CANCELLED`): nothing changed. `Err` after changes
//! began (a failing disk, a directory swapped under us): the journal stays pending and the
//! safety snapshot is kept; [`Workspace::recover`] (also run when the workspace is next opened)
//! completes it, or the safety snapshot undoes it.

use crate::error::{Error, Result};
use crate::journal::{self, Journal, State};
use crate::plan::{self, Action, Current, KeptPath, Plan, RestoreOptions};
use crate::safe::{self, Dirs};
use crate::workspace::{restore_lock_path, Workspace};
use cairn_snapshot::statcache::{StatRecord, Written};
use cairn_store::{fsutil, relpath};
use cairn_store::{
    Classify, EntryKind, ErrorKind, Hasher, ObjectId, OperationKind, RelPath, SnapshotId, Tree,
    TreeEntry, TreeId,
};
use rayon::prelude::*;
use rustix::fd::OwnedFd;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What a restore did (or, for a dry run, would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "RestoreReport"))]
pub struct Report {
    /// The snapshot restored.
    pub snapshot_id: SnapshotId,
    /// Whether this is a dry run (nothing changed).
    pub dry_run: bool,
    /// Paths written or re-made.
    pub restored: Vec<RelPath>,
    /// Paths removed.
    pub deleted: Vec<RelPath>,
    /// Files already as the snapshot holds them.
    pub unchanged: u64,
    /// Paths left alone, and why.
    pub kept: Vec<KeptPath>,
    /// Whether a hold stood.
    pub busy: bool,
    /// Paths that differed from the reference snapshot.
    pub drifted: Vec<RelPath>,
    /// The paths the restore was restricted to (empty: the whole workspace).
    #[serde(default)]
    pub paths: Vec<RelPath>,
    /// The snapshot of the files before the restore changed them (the whole workspace);
    /// restoring it (with the same `paths`, when the restore had some) undoes this.
    pub safety_snapshot_id: Option<SnapshotId>,
    /// Operations carried out.
    pub operations: u64,
    /// True when exactly the planned operations were carried out.
    pub as_planned: bool,
    /// The journal that recorded it.
    pub journal: Option<String>,
}

impl Report {
    pub(crate) fn from_plan(
        plan: &Plan,
        dry_run: bool,
        safety: Option<SnapshotId>,
        journal: Option<String>,
    ) -> Report {
        Report {
            snapshot_id: plan.snapshot_id,
            dry_run,
            restored: plan.restored.clone(),
            deleted: plan.deleted.clone(),
            unchanged: plan.unchanged,
            kept: plan.kept.clone(),
            busy: plan.busy,
            drifted: plan.drifted.clone(),
            paths: plan.paths.clone(),
            safety_snapshot_id: safety,
            operations: if dry_run {
                0
            } else {
                plan.actions.len() as u64
            },
            as_planned: true,
            journal,
        }
    }
}

/// How the executor treats the paths it changes.
pub(crate) enum Mode {
    /// A fresh apply, just re-planned against the safety snapshot.
    Apply,
    /// Completing a journal: skip paths in their target state, do those still as the safety
    /// snapshot holds them, report the rest as obstructed.
    Recover { safety: Option<SnapshotId> },
}

pub(crate) struct Exec<'a> {
    ws: &'a Workspace,
    dirs: Dirs,
    jid: String,
    mode: Mode,
    crash_after: Option<usize>,
    ops: usize,
    staged: HashMap<Vec<u8>, (Vec<u8>, Vec<u8>)>,
    counter: u64,
    /// Directories made writable for the restore, with the mode to give back.
    unlocked: Vec<(Vec<u8>, u32)>,
    /// Trees read while running, by id (the safety snapshot's, and the target's where a
    /// hard-linked file's content is looked up).
    trees: HashMap<TreeId, Tree>,
    /// Directories the plan makes where nothing stood, built whole under a temporary name
    /// beside their place: final path -> temporary name.
    new_dirs: HashMap<Vec<u8>, Vec<u8>>,
    /// Paths whose creation was already carried out inside those directories (their mode
    /// actions still run, after the rename).
    prestaged: HashSet<Vec<u8>>,
    /// The root tree of the plan being run: where a mode-only change on a hard-linked file
    /// finds the content it writes as a new file.
    target_root: Option<TreeId>,
    /// Each staged file's `fstat` once its content and mode were written, by final path: with
    /// what is seen at its place afterwards, what the stat cache is primed from (issue 33).
    staged_stats: HashMap<Vec<u8>, StatRecord>,
    /// The directories staging wrote into (or beside), where the clock is read.
    staging_dirs: Vec<Vec<u8>>,
    /// Each file system's clock (by device) read after staging, before anything was put in
    /// place: see [`Exec::read_clocks`].
    clocks: HashMap<u64, i64>,
}

/// Up to this many actions, a restore is made durable file by file (each file it wrote or
/// re-moded, then each directory whose entries it changed); above it, by one `syncfs`, which
/// also flushes whatever else is pending on the file system.
const SYNC_EACH_MAX: usize = 256;

fn temp_prefix(jid: &str) -> Vec<u8> {
    format!("{}{jid}-", fsutil::STAGED_PREFIX).into_bytes()
}

impl<'a> Exec<'a> {
    pub(crate) fn new(
        ws: &'a Workspace,
        jid: &str,
        mode: Mode,
        crash_after: Option<usize>,
    ) -> Result<Exec<'a>> {
        Ok(Exec {
            ws,
            dirs: Dirs::open(ws.root())?,
            jid: jid.to_string(),
            mode,
            crash_after,
            ops: 0,
            staged: HashMap::new(),
            counter: 0,
            unlocked: Vec::new(),
            trees: HashMap::new(),
            new_dirs: HashMap::new(),
            prestaged: HashSet::new(),
            target_root: None,
            staged_stats: HashMap::new(),
            staging_dirs: Vec::new(),
            clocks: HashMap::new(),
        })
    }

    /// Test hook: dies by SIGKILL once `crash_after` operations are done (checked before each
    /// operation and once after the last, before the journal is marked done).
    fn maybe_crash(&self) {
        if self.crash_after == Some(self.ops) {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            // SIGKILL cannot be caught; wait for it to land.
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }

    /// Runs `f` on the directory at `rel`; if it fails with `EACCES` on a directory of ours
    /// made read-only, opens it up (`u+rwx`) and tries again, giving the mode back at the end.
    fn in_dir<T>(
        &mut self,
        rel: &[u8],
        mut f: impl FnMut(&rustix::fd::OwnedFd) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let fd = self
            .dirs
            .dir(rel)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        match f(&fd) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ACCESS.raw_os_error()) => {
                let st = rustix::fs::fstat(&*fd)?;
                if st.st_uid != rustix::process::geteuid().as_raw() {
                    return Err(e);
                }
                self.unlocked.push((rel.to_vec(), st.st_mode & 0o7777));
                safe::chmod_dir(&*fd, (st.st_mode & 0o7777) | 0o700)?;
                f(&fd)
            }
            r => r,
        }
    }

    fn abs(&self, rel: &[u8]) -> std::path::PathBuf {
        self.dirs.abs(rel)
    }

    /// Removes temporary files a crashed run of this journal left in the directories it
    /// touches.
    pub(crate) fn cleanup_temp(&mut self, plan: &Plan) -> Result<()> {
        let prefix = temp_prefix(&self.jid);
        let mut dirs: Vec<Vec<u8>> = vec![Vec::new()];
        for a in &plan.actions {
            let mut p = a.path().split_last().0;
            loop {
                dirs.push(p.to_vec());
                match p.iter().rposition(|&b| b == b'/') {
                    Some(i) => p = &p[..i],
                    None => break,
                }
            }
        }
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            let Ok(fd) = self.dirs.dir(&d) else { continue };
            let Ok(list) = rustix::fs::Dir::read_from(&*fd) else {
                continue;
            };
            for entry in list.flatten() {
                let name = entry.file_name().to_bytes();
                if name.starts_with(&prefix) {
                    let is_dir = match safe::lstat(&*fd, name) {
                        Ok(Some(st)) => safe::file_type(&st) == rustix::fs::FileType::Directory,
                        _ => false,
                    };
                    if is_dir {
                        let _ = safe::remove_tree(&*fd, name);
                    } else {
                        let _ = safe::unlink(&*fd, name);
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes the staged file (or directory staged whole) at `rel`, reached beneath the root
    /// without following a symlink; one already gone is fine.
    pub(crate) fn remove_staged(&mut self, rel: &RelPath) -> Result<()> {
        let (parent, name) = rel.split_last();
        let Ok(fd) = self.dirs.dir(parent) else {
            return Ok(());
        };
        let abs = || self.ws.root().join(rel.as_path());
        let r = match safe::lstat(&*fd, name) {
            Ok(Some(st)) if safe::file_type(&st) == rustix::fs::FileType::Directory => {
                safe::remove_tree(&*fd, name)
            }
            Ok(Some(_)) => safe::unlink(&*fd, name),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        r.map_err(|e| Error::io("remove the staged file", abs(), e))
    }

    fn next_temp(&mut self) -> Vec<u8> {
        self.counter += 1;
        let mut n = temp_prefix(&self.jid);
        n.extend_from_slice(self.counter.to_string().as_bytes());
        n
    }

    /// The nearest existing ancestor directory of `path`'s parent.
    fn staging_dir(&mut self, path: &RelPath) -> Vec<u8> {
        let mut p = path.split_last().0.to_vec();
        loop {
            if self.dirs.dir(&p).is_ok() {
                return p;
            }
            match p.iter().rposition(|&b| b == b'/') {
                Some(i) => p.truncate(i),
                None => return Vec::new(),
            }
        }
    }

    /// Writes every new content into temporary files beside (or above) its target, verifying
    /// each against its id. Nothing in the workspace changes if this fails.
    pub(crate) fn stage(&mut self, actions: &[&Action]) -> Result<()> {
        self.stage_new_dirs(actions)?;
        for a in actions {
            let Action::WriteFile {
                path, blob, mode, ..
            } = a
            else {
                continue;
            };
            if self.prestaged.contains(&path.0) {
                continue;
            }
            let mut dir = self.staging_dir(path);
            let name = self.next_temp();
            let mut fd = self.dirs.dir(&dir)?;
            // A directory of ours made read-only is opened up only when the restore runs (and
            // given its mode back): staging, which changes nothing, writes into the nearest
            // ancestor that lets it instead; the rename puts the file in place (issue 32).
            let mut file = match safe::create_file(&*fd, &name, 0o600) {
                Ok(f) => f,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ACCESS.raw_os_error()) => {
                    let mut found = None;
                    while !dir.is_empty() {
                        let parent = dir.iter().rposition(|&b| b == b'/').unwrap_or(0);
                        dir.truncate(parent);
                        fd = self.dirs.dir(&dir)?;
                        if let Ok(f) = safe::create_file(&*fd, &name, 0o600) {
                            found = Some(f);
                            break;
                        }
                    }
                    match found {
                        Some(f) => f,
                        None => return Err(Error::io("stage", self.abs(&path.0), e)),
                    }
                }
                Err(e) => return Err(Error::io("stage", self.abs(&dir), e)),
            };
            let r = self.ws.store().copy_object_to(blob, &mut file);
            if let Err(e) = r {
                let _ = safe::unlink(&*fd, &name);
                return Err(stage_error(self.abs(&path.0), e));
            }
            rustix::fs::fchmod(&file, rustix::fs::Mode::from_raw_mode(mode & 0o7777))
                .map_err(|e| Error::io("set mode", self.abs(&path.0), e.into()))?;
            if let Ok(st) = rustix::fs::fstat(&file) {
                self.staged_stats
                    .insert(path.0.clone(), StatRecord::of(&st));
            }
            self.staging_dirs.push(dir.clone());
            self.staged.insert(path.0.clone(), (dir, name));
        }
        Ok(())
    }

    /// Builds each directory the plan makes where nothing stands, with everything the plan
    /// puts inside it, under a temporary name beside its place (files written in parallel): at
    /// run time one rename puts the whole directory in place, instead of one rename per file.
    /// Nothing in the workspace changes.
    fn stage_new_dirs(&mut self, actions: &[&Action]) -> Result<()> {
        let mut staged: HashMap<Vec<u8>, Arc<OwnedFd>> = HashMap::new();
        let mut work: Vec<(Arc<OwnedFd>, &Action)> = Vec::new();
        for a in actions {
            let path = &a.path().0;
            let (parent, name) = a.path().split_last();
            match a {
                Action::MakeDir { mode, .. } => {
                    if let Some(pfd) = staged.get(parent).cloned() {
                        let fd = safe::mkdir_open(&*pfd, name, *mode)
                            .map_err(|e| Error::io("stage directory", self.abs(path), e))?;
                        staged.insert(path.clone(), Arc::new(fd));
                        self.prestaged.insert(path.clone());
                        continue;
                    }
                    let Ok(pfd) = self.dirs.dir(parent) else {
                        continue;
                    };
                    if !matches!(safe::lstat(&*pfd, name), Ok(None)) {
                        continue;
                    }
                    let tmp = self.next_temp();
                    // Where the parent does not let us (a read-only directory of ours), the
                    // directory is made action by action instead.
                    let Ok(fd) = safe::mkdir_open(&*pfd, &tmp, *mode) else {
                        let _ = safe::rmdir(&*pfd, &tmp);
                        continue;
                    };
                    self.new_dirs.insert(path.clone(), tmp);
                    self.staging_dirs.push(parent.to_vec());
                    staged.insert(path.clone(), Arc::new(fd));
                }
                Action::WriteFile { .. } | Action::MakeSymlink { .. } => {
                    if let Some(pfd) = staged.get(parent) {
                        work.push((pfd.clone(), a));
                        self.prestaged.insert(path.clone());
                    }
                }
                _ => {}
            }
        }
        let store = self.ws.store();
        let dirs = &self.dirs;
        let stats = work
            .par_iter()
            .map(|(fd, a)| {
                let (_, name) = a.path().split_last();
                match a {
                    Action::WriteFile { blob, mode, .. } => {
                        let mut file = safe::create_file(&**fd, name, 0o600)
                            .map_err(|e| Error::io("stage", dirs.abs(&a.path().0), e))?;
                        store
                            .copy_object_to(blob, &mut file)
                            .map_err(|e| stage_error(dirs.abs(&a.path().0), e))?;
                        rustix::fs::fchmod(&file, rustix::fs::Mode::from_raw_mode(mode & 0o7777))
                            .map_err(|e| Error::io("set mode", dirs.abs(&a.path().0), e.into()))?;
                        Ok(rustix::fs::fstat(&file)
                            .ok()
                            .map(|st| (a.path().0.clone(), StatRecord::of(&st))))
                    }
                    Action::MakeSymlink { target, .. } => {
                        let bytes = store.read_object(target)?.1;
                        safe::symlink(&bytes, &**fd, name)
                            .map_err(|e| Error::io("make symlink", dirs.abs(&a.path().0), e))?;
                        Ok(None)
                    }
                    _ => Ok(None),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        self.staged_stats.extend(stats.into_iter().flatten());
        Ok(())
    }

    /// Reads the clock of each file system staging wrote to, once every file is staged and
    /// before any is put in place: a probe file is made beside the staged ones, its `fstat`
    /// asked for (so that, where timestamps are fine-grained only for inodes whose times were
    /// looked at, the change that follows gets one), its mode set, and the `ctime` that gave
    /// it kept, then it is removed. A file staged before that `ctime`'s tick and unchanged
    /// when the restore is done cannot have been written since it was put in place without
    /// its `mtime` moving (see `cairn_snapshot::statcache::Written`). Best effort: a file
    /// system whose clock is not read primes nothing.
    pub(crate) fn read_clocks(&mut self) {
        if !cairn_snapshot::restore_priming() {
            return;
        }
        let mut dirs = std::mem::take(&mut self.staging_dirs);
        dirs.sort();
        dirs.dedup();
        for rel in dirs {
            let Ok(fd) = self.dirs.dir(&rel) else {
                continue;
            };
            let Ok(st) = rustix::fs::fstat(&*fd) else {
                continue;
            };
            if self.clocks.contains_key(&st.st_dev) {
                continue;
            }
            let name = self.next_temp();
            let Ok(probe) = safe::create_file(&*fd, &name, 0o600) else {
                continue;
            };
            let clock = rustix::fs::fstat(&probe)
                .and_then(|_| rustix::fs::fchmod(&probe, rustix::fs::Mode::from_raw_mode(0o600)))
                .and_then(|_| rustix::fs::fstat(&probe));
            let _ = safe::unlink(&*fd, &name);
            if let Ok(after) = clock {
                let r = StatRecord::of(&after);
                self.clocks.insert(after.st_dev, r.ctime_ns.max(r.mtime_ns));
            }
        }
    }

    /// Records in the stat cache the files `plan` wrote that this run staged, each with what
    /// is now at its place (issue 33): `cairn_snapshot::prime` keeps those whose records are
    /// proven, so the next snapshot reads none of them. Best effort, after every change.
    pub(crate) fn prime(&mut self, plan: &Plan) {
        let mut written = Vec::new();
        for a in &plan.actions {
            let Action::WriteFile { path, blob, .. } = a else {
                continue;
            };
            let Some(staged) = self.staged_stats.get(&path.0).copied() else {
                continue;
            };
            let Some(&clock_ns) = self.clocks.get(&staged.dev) else {
                continue;
            };
            let (parent, name) = path.split_last();
            let Ok(fd) = self.dirs.dir(parent) else {
                continue;
            };
            let Ok(Some(st)) = safe::lstat(&*fd, name) else {
                continue;
            };
            written.push(Written {
                path: path.0.clone(),
                blob: *blob,
                staged,
                clock_ns,
                placed: StatRecord::of(&st),
            });
        }
        let ws = self.ws;
        cairn_snapshot::prime(
            ws.store(),
            ws.id(),
            Some(&ws.memo),
            plan.snapshot_id,
            written,
        );
    }

    /// Removes staged files (after a failure before any change).
    pub(crate) fn unstage(&mut self) {
        for (path, tmp) in std::mem::take(&mut self.new_dirs) {
            let parent = RelPath(path).split_last().0.to_vec();
            if let Ok(fd) = self.dirs.dir(&parent) {
                let _ = safe::remove_tree(&*fd, &tmp);
            }
        }
        let staged: Vec<(Vec<u8>, Vec<u8>)> = self.staged.drain().map(|(_, v)| v).collect();
        for (dir, name) in staged {
            if let Ok(fd) = self.dirs.dir(&dir) {
                let _ = safe::unlink(&*fd, &name);
            }
        }
    }

    fn safety_entry(&mut self, path: &[u8]) -> Result<Option<TreeEntry>> {
        let Mode::Recover {
            safety: Some(safety),
        } = self.mode
        else {
            return Ok(None);
        };
        let store = self.ws.store();
        let root = store.read_manifest(&safety)?.root;
        let read = |id: &TreeId| -> Result<Tree> { Ok(store.read_tree(id)?) };
        plan::entry_at(&mut self.trees, &read, root, path)
    }

    /// The current entry at `path` as (kind, content id, mode), hashing a file's content.
    fn current(&mut self, path: &[u8]) -> Result<Option<(EntryKind, Option<ObjectId>, u32)>> {
        let rel = RelPath(path.to_vec());
        let (parent, name) = rel.split_last();
        let fd = match self.dirs.dir(parent) {
            Ok(fd) => fd,
            Err(_) => return Ok(None),
        };
        let Some(st) =
            safe::lstat(&*fd, name).map_err(|e| Error::io("lstat", self.abs(path), e))?
        else {
            return Ok(None);
        };
        let ft = safe::file_type(&st);
        Ok(Some(match ft {
            rustix::fs::FileType::Directory => (EntryKind::Dir, None, st.st_mode),
            rustix::fs::FileType::Symlink => {
                let t = safe::readlink(&*fd, name)
                    .map_err(|e| Error::io("readlink", self.abs(path), e))?;
                (EntryKind::Symlink, Some(ObjectId::of(&t)), st.st_mode)
            }
            rustix::fs::FileType::RegularFile => {
                let mut f = safe::open_read(&*fd, name)
                    .map_err(|e| Error::io("open", self.abs(path), e))?;
                let mut h = Hasher::new();
                h.update_from(&mut f)
                    .map_err(|e| Error::io("read", self.abs(path), e))?;
                (EntryKind::File, Some(h.finish()), st.st_mode)
            }
            // Something else stands there: it matches neither side.
            _ => (EntryKind::File, None, st.st_mode),
        }))
    }

    /// In recovery: whether `path` is as the safety snapshot holds it (so the action may run).
    fn as_before(&mut self, path: &[u8]) -> Result<bool> {
        let before = self.safety_entry(path)?;
        let now = self.current(path)?;
        Ok(match (before, now) {
            (None, None) => true,
            (Some(b), Some((kind, id, mode))) => {
                b.kind == kind
                    && (kind == EntryKind::Dir
                        || (Some(b.id) == id && (kind != EntryKind::File || b.mode == mode)))
            }
            _ => false,
        })
    }

    /// Carries the plan out. Returns the obstructed paths (recovery only; an apply fails on the
    /// first error instead, its journal left pending).
    pub(crate) fn run(&mut self, plan: &Plan) -> Result<Vec<RelPath>> {
        // An apply has staged everything before it wrote its journal; a recovery stages each
        // file it finds still to do.
        let recover = matches!(self.mode, Mode::Recover { .. });
        self.target_root = Some(plan.target_root);
        let mut obstructed = Vec::new();
        // Paths the plan removes before it creates something there (a type change): for the
        // creation, "absent" is the state before it too.
        let removed: std::collections::HashSet<Vec<u8>> = plan
            .actions
            .iter()
            .filter(|a| matches!(a, Action::RemoveFile { .. } | Action::RemoveDir { .. }))
            .map(|a| a.path().0.clone())
            .collect();
        let created: HashMap<Vec<u8>, &Action> = plan
            .actions
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Action::MakeDir { .. } | Action::WriteFile { .. } | Action::MakeSymlink { .. }
                )
            })
            .map(|a| (a.path().0.clone(), a))
            .collect();
        for a in &plan.actions {
            let path = a.path().0.clone();
            if !matches!(a, Action::SetMode { .. }) && self.prestaged.contains(&path) {
                // Carried out inside a directory staged whole, which its rename put in place;
                // still one operation of the plan (a crash point like any other).
                self.maybe_crash();
                self.ops += 1;
                continue;
            }
            if recover {
                match self.recover_check(a, removed.contains(&path), created.get(&path).copied())? {
                    Check::Skip => continue,
                    Check::Obstructed => {
                        obstructed.push(a.path().clone());
                        continue;
                    }
                    Check::Do => {
                        if let Action::WriteFile { .. } = a {
                            self.stage(&[a])?;
                        }
                    }
                }
            }
            self.maybe_crash();
            match self.one(a) {
                // A path recovery is not allowed to change (another owner, immutable): left
                // as it is and reported, so the journal never wedges the workspace (issue 27);
                // `give_up` ends it.
                Err(Error::Io { source, .. })
                    if recover && source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    obstructed.push(a.path().clone());
                    continue;
                }
                r => r.map_err(|e| match e {
                    Error::Io { action, source, .. } => Error::io(action, self.abs(&path), source),
                    e => e,
                })?,
            }
            self.ops += 1;
        }
        self.maybe_crash();
        // Give back the modes of directories opened up for the restore, unless the plan set
        // them.
        let unlocked = std::mem::take(&mut self.unlocked);
        for (rel, mode) in unlocked.into_iter().rev() {
            let planned = plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::SetMode { path, dir: true, .. } if path.0 == rel));
            if !planned {
                if let Ok(fd) = self.dirs.dir(&rel) {
                    let _ = safe::chmod_dir(&*fd, mode);
                }
            }
        }
        Ok(obstructed)
    }

    fn recover_check(
        &mut self,
        a: &Action,
        removed_before: bool,
        created_after: Option<&Action>,
    ) -> Result<Check> {
        let path = a.path().0.clone();
        let now = self.current(&path)?;
        // A removal whose path already holds what the plan creates there later: done.
        if let (Action::RemoveFile { .. } | Action::RemoveDir { .. }, Some(c)) = (a, created_after)
        {
            if is_target(c, &now) {
                return Ok(Check::Skip);
            }
        }
        let creation = matches!(
            a,
            Action::MakeDir { .. } | Action::WriteFile { .. } | Action::MakeSymlink { .. }
        );
        if creation && removed_before && now.is_none() {
            return Ok(Check::Do);
        }
        Ok(match a {
            Action::RemoveFile { .. } => match now {
                None => Check::Skip,
                Some(_) if self.as_before(&path)? => Check::Do,
                Some(_) => Check::Obstructed,
            },
            Action::RemoveDir { .. } => match now {
                None => Check::Skip,
                Some((EntryKind::Dir, _, _)) => Check::Do,
                Some(_) => Check::Obstructed,
            },
            Action::MakeDir { .. } => match now {
                Some((EntryKind::Dir, _, _)) => Check::Skip,
                None => Check::Do,
                Some(_) => Check::Obstructed,
            },
            Action::WriteFile { .. } | Action::MakeSymlink { .. } => {
                if is_target(a, &now) {
                    Check::Skip
                } else if now.is_none() || self.as_before(&path)? {
                    // Nothing there (the user moved an obstruction aside, as told): writing
                    // the target loses nothing (issue 26).
                    Check::Do
                } else {
                    Check::Obstructed
                }
            }
            Action::SetMode { dir, .. } => match now {
                Some((EntryKind::Dir, _, _)) if *dir => Check::Do,
                Some((EntryKind::File, _, _)) if !*dir => Check::Do,
                _ => Check::Obstructed,
            },
        })
    }

    /// Whether the mode of the regular file `name` in `parent` must be set by rewriting it
    /// rather than in place: it has more than one hard link (its inode may be a file outside
    /// the root, which a restore must never change, issue 29), or it belongs to another user
    /// (a `chmod` would fail with `EPERM` after other changes were made, issue 27; a new file
    /// renamed over it needs only the directory, which the plan checked is ours).
    fn must_rewrite(&mut self, parent: &[u8], name: &[u8]) -> Result<bool> {
        let st = self
            .in_dir(parent, |fd| safe::lstat(fd, name))
            .map_err(|e| Error::io("lstat", self.abs(&relpath::join(parent, name)), e))?;
        let me = rustix::process::geteuid();
        Ok(st.is_some_and(|st| {
            safe::file_type(&st) == rustix::fs::FileType::RegularFile
                && (st.st_nlink > 1 || (!me.is_root() && st.st_uid != me.as_raw()))
        }))
    }

    /// The write that gives the file at `rel` its target content (from the store, never from
    /// the linked inode) and `mode` as a new file renamed over the path.
    fn rewrite_of(&mut self, rel: &RelPath, mode: u32) -> Result<Action> {
        let abs = self.abs(&rel.0);
        let missing = |what: &str| {
            Error::io(
                "set mode",
                abs.clone(),
                std::io::Error::other(format!("{what} (internal error)")),
            )
        };
        let root = self.target_root.ok_or_else(|| missing("no target tree"))?;
        let store = self.ws.store();
        let read = |id: &TreeId| -> Result<Tree> { Ok(store.read_tree(id)?) };
        match plan::entry_at(&mut self.trees, &read, root, &rel.0)? {
            Some(e) if e.kind == EntryKind::File => Ok(Action::WriteFile {
                path: rel.clone(),
                blob: e.id,
                mode,
                size: e.size,
            }),
            _ => Err(missing("the target tree has no file there")),
        }
    }

    fn one(&mut self, a: &Action) -> Result<()> {
        let rel = a.path().clone();
        let (parent, name) = rel.split_last();
        let (parent, name) = (parent.to_vec(), name.to_vec());
        let abs = self.abs(&rel.0);
        match a {
            Action::RemoveFile { .. } => self
                .in_dir(&parent, |fd| safe::unlink(fd, &name))
                .map_err(|e| Error::io("remove", abs, e)),
            Action::RemoveDir { .. } => {
                self.dirs.forget(&rel.0);
                self.in_dir(&parent, |fd| safe::rmdir(fd, &name))
                    .map_err(|e| Error::io("remove directory", abs, e))
            }
            Action::MakeDir { .. } if self.new_dirs.contains_key(&rel.0) => {
                let tmp = self.new_dirs.remove(&rel.0).expect("checked just above");
                self.in_dir(&parent, |fd| safe::rename_noreplace(fd, &tmp, fd, &name))
                    .map_err(|e| Error::io("put the staged directory in place", abs, e))
            }
            Action::MakeDir { mode, .. } => self
                .in_dir(&parent, |fd| match safe::mkdir(fd, &name, *mode) {
                    Err(e) if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) => {
                        match safe::lstat(fd, &name)? {
                            Some(st) if safe::file_type(&st) == rustix::fs::FileType::Directory => {
                                Ok(())
                            }
                            _ => Err(e),
                        }
                    }
                    r => r,
                })
                .map_err(|e| Error::io("create directory", abs, e)),
            Action::WriteFile { .. } => {
                let Some((sdir, sname)) = self.staged.remove(&rel.0) else {
                    return Err(Error::io(
                        "write",
                        abs,
                        std::io::Error::other("no staged content (internal error)"),
                    ));
                };
                let from = self.dirs.dir(&sdir)?;
                self.in_dir(&parent, |fd| safe::rename(&*from, &sname, fd, &name))
                    .map_err(|e| Error::io("rename into place", abs, e))
            }
            Action::MakeSymlink { target, .. } => {
                let bytes = self.ws.store().read_object(target)?.1;
                let tmp = self.next_temp();
                self.in_dir(&parent, |fd| {
                    safe::symlink(&bytes, fd, &tmp)?;
                    safe::rename(fd, &tmp, fd, &name).inspect_err(|_| {
                        let _ = safe::unlink(fd, &tmp);
                    })
                })
                .map_err(|e| Error::io("make symlink", abs, e))
            }
            Action::SetMode { mode, dir, .. } => {
                if *dir {
                    let fd = self.dirs.dir(&rel.0)?;
                    safe::chmod_dir(&*fd, *mode).map_err(|e| Error::io("set mode", abs, e))
                } else if self.must_rewrite(&parent, &name)? {
                    // Never in place: the other names of the inode keep their content, mode
                    // and times, and another user's file is replaced by ours. Staged and
                    // renamed as any write is.
                    let write = self.rewrite_of(&rel, *mode)?;
                    self.stage(&[&write])?;
                    self.one(&write)
                } else {
                    self.in_dir(&parent, |fd| safe::chmod_file(fd, &name, *mode))
                        .map_err(|e| Error::io("set mode", abs, e))
                }
            }
        }
    }
}

/// Makes what `plan` changed durable: for a small plan, each file it wrote or re-moded and each
/// directory whose entries it changed (what has changed since is synced as it is; what is gone
/// is passed over); for a large one, the whole file system (`syncfs`).
pub(crate) fn make_durable(ws: &Workspace, plan: &Plan) -> Result<()> {
    let mut dirs = Dirs::open(ws.root())?;
    let whole_fs = |dirs: &Dirs| {
        rustix::fs::syncfs(dirs.root_fd()).map_err(|e| Error::io("sync", ws.root(), e.into()))
    };
    if plan.actions.len() > SYNC_EACH_MAX {
        return whole_fs(&dirs);
    }
    let mut parents: Vec<&[u8]> = Vec::new();
    let mut files = Vec::new();
    for a in &plan.actions {
        let (parent, name) = a.path().split_last();
        let own = match a {
            Action::WriteFile { .. } | Action::SetMode { dir: false, .. } => {
                let Ok(fd) = dirs.dir(parent) else { continue };
                match safe::open_read(&*fd, name) {
                    Ok(f) => Some(f),
                    // Gone, or a symlink now: not what the plan made.
                    Err(e)
                        if matches!(
                            rustix::io::Errno::from_io_error(&e),
                            Some(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP)
                        ) =>
                    {
                        None
                    }
                    // Not readable (a mode without `r`): the whole file system instead.
                    Err(_) => return whole_fs(&dirs),
                }
            }
            Action::MakeDir { .. } | Action::SetMode { dir: true, .. } => dirs
                .dir(&a.path().0)
                .ok()
                .and_then(|fd| fd.try_clone().ok())
                .map(std::fs::File::from),
            Action::RemoveFile { .. } | Action::RemoveDir { .. } | Action::MakeSymlink { .. } => {
                None
            }
        };
        files.extend(own.map(|f| (f, dirs.abs(&a.path().0))));
        if !matches!(a, Action::SetMode { .. }) {
            parents.push(parent);
        }
    }
    parents.sort_unstable();
    parents.dedup();
    for p in parents {
        // A directory removed since (or by the plan) is gone; its parent is in the list.
        if let Ok(fd) = dirs.dir(p) {
            if let Ok(dup) = fd.try_clone() {
                files.push((std::fs::File::from(dup), dirs.abs(p)));
            }
        }
    }
    sync_together(files)
}

/// Syncs `files` (data and what names them) from several threads at once, so that the file
/// system commits them together instead of one journal commit after another.
fn sync_together(files: Vec<(std::fs::File, std::path::PathBuf)>) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let threads = files.len().min(16);
    let queue = parking_lot::Mutex::new(files.into_iter());
    let failed: parking_lot::Mutex<Option<Error>> = parking_lot::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some((f, path)) = queue.lock().next() else {
                    return;
                };
                if let Err(e) = f.sync_all() {
                    failed.lock().get_or_insert(Error::io("sync", path, e));
                }
            });
        }
    });
    match failed.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The error of staging content for `path` that the store could not give.
fn stage_error(path: std::path::PathBuf, e: cairn_store::Error) -> Error {
    let e = e.at(&path);
    match e.kind() {
        ErrorKind::Corrupt => Error::io(
            "stage (the stored content does not match its id; run `cairn verify`)",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        ),
        _ => e.into(),
    }
}

/// Whether `now` is what creation action `a` leaves at its path.
fn is_target(a: &Action, now: &Option<(EntryKind, Option<ObjectId>, u32)>) -> bool {
    match (a, now) {
        (Action::WriteFile { blob, mode, .. }, Some((EntryKind::File, Some(id), m))) => {
            id == blob && m & 0o7777 == mode & 0o7777
        }
        (Action::MakeSymlink { target, .. }, Some((EntryKind::Symlink, Some(id), _))) => {
            id == target
        }
        (Action::MakeDir { .. }, Some((EntryKind::Dir, _, _))) => true,
        _ => false,
    }
}

enum Check {
    Skip,
    Do,
    Obstructed,
}

/// Applies `plan` (see the module documentation for what the result means).
pub fn apply(ws: &Workspace, plan: &Plan, options: &RestoreOptions) -> Result<Report> {
    run(ws, Start::Planned(plan), options)
        .map_err(|e| crate::error::missing_object_is_damage(ws.store(), &plan.snapshot_id, e))
}

/// Where a restore's plan comes from.
enum Start<'p> {
    /// A plan made earlier: the safety snapshot is taken now, and the plan checked against it.
    Planned(&'p Plan),
    /// No plan yet: the safety snapshot's own walk is what the plan is made from, and the
    /// snapshot is kept only if the plan changes something.
    Fresh(SnapshotId),
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
    ws: &Workspace,
    capture: &cairn_store::CaptureSettings,
    target: &SnapshotId,
    paths: &[RelPath],
) -> cairn_snapshot::Options {
    let mut sopts = cairn_snapshot::Options::from_capture(capture);
    sopts.memo = Some(ws.memo.clone());
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

fn run(ws: &Workspace, start: Start<'_>, options: &RestoreOptions) -> Result<Report> {
    if let Some(key) = &options.key {
        if let Some(j) = journal::read(ws, &journal::journal_id(Some(key)))? {
            if let (true, Some(report)) = (j.finished(), j.report) {
                return Ok(report);
            }
        }
    }
    // The restore lock is taken before any journal is looked at: recovery runs only under it,
    // so no two processes ever carry out the same journal.
    let locks = &ws.store().layout().locks;
    let lock_path = restore_lock_path(locks, ws.id());
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
                    return Err(obstruction(ws, r.obstructed));
                }
                if let Some(report) = journal::read(ws, &id)?.and_then(|j| j.report) {
                    return Ok(report);
                }
            }
        }
    }
    // A restore a crash left pending must be finished first.
    for r in journal::recover_locked(ws)? {
        if !r.completed {
            return Err(obstruction(ws, r.obstructed));
        }
    }
    let holds = ws.holds()?;
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
    if options.is_cancelled() {
        return Err(Error::Cancelled);
    }
    let target = match start {
        Start::Planned(p) => p.snapshot_id,
        Start::Fresh(id) => id,
    };
    let _op = ws
        .store()
        .begin_operation(OperationKind::Restore, &[target])?;
    let fresh_plan;
    let (plan, safety) = match start {
        Start::Planned(plan) => match planned_safety(ws, plan, options)? {
            Some(safety) => (plan, safety),
            None => return Ok(Report::from_plan(plan, false, None, None)),
        },
        Start::Fresh(id) => {
            let store = ws.store();
            let manifest = store.read_manifest(&id)?;
            let paths = plan::normalize_paths(&options.paths)?;
            let mut sopts = safety_options(ws, &manifest.capture, &id, &paths);
            sopts.cancel = options.cancel.clone();
            let prepared = cairn_snapshot::prepare(store, ws.root(), ws.id(), &sopts)?;
            let tree = |id: &TreeId| -> Result<Tree> { Ok(store.read_tree(id)?) };
            fresh_plan = plan::against(
                ws,
                id,
                &manifest,
                Current {
                    root: prepared.root(),
                    trees: &tree,
                    kept: Current::from_walk(prepared.kept(), prepared.skipped()),
                },
                options.reference.as_ref(),
                options.on_drift,
                &paths,
            )?;
            if fresh_plan.is_noop() {
                // Nothing to change: no safety snapshot (the prepared one is dropped).
                return Ok(Report::from_plan(&fresh_plan, false, None, None));
            }
            (&fresh_plan, prepared.commit()?)
        }
    };
    if options.is_cancelled() {
        drop_safety(ws, &safety.id);
        return Err(Error::Cancelled);
    }
    let jid = journal::journal_id(options.key.as_deref());
    let mut j = Journal::new(
        ws,
        jid.clone(),
        options.key.clone(),
        plan.snapshot_id,
        safety.id,
        plan.clone(),
    );
    let mut exec = Exec::new(ws, &jid, Mode::Apply, options.crash_after_ops)?;
    // Stage (and verify) before the journal makes the restore pending, so a corrupt object
    // fails with nothing changed and nothing to recover. The journal is written first in the
    // staging state, so that staged files a crash leaves behind are found and removed.
    journal::create(ws, &j)?;
    let all: Vec<&Action> = plan.actions.iter().collect();
    if let Err(e) = exec.stage(&all) {
        exec.unstage();
        let _ = journal::remove(ws, &j);
        drop_safety(ws, &safety.id);
        return Err(e);
    }
    exec.read_clocks();
    if let Err(e) = journal::advance(ws, &mut j, State::Pending, true) {
        exec.unstage();
        let _ = journal::remove(ws, &j);
        drop_safety(ws, &safety.id);
        return Err(e);
    }
    if let Err(e) = exec.run(plan) {
        exec.unstage();
        return Err(Error::Unfinished {
            source: Box::new(e),
            journal: jid,
            safety: safety.id,
        });
    }
    // Every change is made. Durability is confirmed by the next snapshot, restore or opening of the
    // workspace (see the journal module), not waited for here.
    journal::advance(ws, &mut j, State::Applied, false)?;
    // The files it wrote go into the stat cache, while the restore lock is still held.
    exec.prime(plan);
    drop(lock);
    Ok(Report::from_plan(plan, false, Some(safety.id), Some(jid)))
}

/// For a plan made earlier: `None` when it changes nothing (checked again against the files as
/// they are now), else the safety snapshot taken now, after checking the plan still holds.
fn planned_safety(
    ws: &Workspace,
    plan: &Plan,
    options: &RestoreOptions,
) -> Result<Option<cairn_snapshot::Snapshot>> {
    if plan.is_noop() {
        let fresh = plan::plan(
            ws,
            &plan.snapshot_id,
            &RestoreOptions {
                reference: plan.reference,
                on_drift: options.on_drift,
                paths: plan.paths.clone(),
                ..RestoreOptions::default()
            },
        )?;
        if !fresh.is_noop() {
            return Err(changed_since(ws, plan, &fresh));
        }
        return Ok(None);
    }
    let sopts = safety_options(ws, &plan.capture, &plan.snapshot_id, &plan.paths);
    let safety = cairn_snapshot::snapshot(ws.store(), ws.root(), ws.id(), &sopts)?;
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
            options.on_drift,
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
fn drop_safety(ws: &Workspace, id: &SnapshotId) {
    let _ = ws
        .store()
        .delete_snapshot(id, &cairn_store::gc::GcOptions::default());
}

fn changed_since(ws: &Workspace, old: &Plan, new: &Plan) -> Error {
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

fn obstruction(ws: &Workspace, paths: Vec<RelPath>) -> Error {
    Error::Conflict {
        detail: "an interrupted restore cannot finish: later edits, or paths it may not change, \
                 stand in its way; resolve them and call recover (`cairn recover`), or end it as \
                 it stands with give_up (`cairn recover --give-up`)"
            .into(),
        first: paths.first().map(|p| ws.root().join(p.as_path())),
        paths,
    }
}

/// Plans and, unless `options.dry_run`, applies a restore of `snapshot`. Applying walks the
/// files once: that walk is both what the plan is made from and the safety snapshot, which is
/// written only when the plan changes something (a restore with nothing to do leaves no
/// snapshot). [`apply`] of a plan made earlier walks again for its safety snapshot and checks
/// the plan against it.
///
/// It returns once every change is made, without waiting for the disk: the next snapshot, restore
/// or opening of the workspace, or [`Workspace::recover`], makes the changes durable (see the
/// journal module for what a crash or a power cut leaves).
pub fn restore(ws: &Workspace, snapshot: &SnapshotId, options: &RestoreOptions) -> Result<Report> {
    if options.dry_run {
        let plan = plan::plan(ws, snapshot, options)?;
        return Ok(Report::from_plan(&plan, true, None, None));
    }
    run(ws, Start::Fresh(*snapshot), options)
        .map_err(|e| crate::error::missing_object_is_damage(ws.store(), snapshot, e))
}

impl Workspace {
    /// Plans a restore; see [`plan::plan`].
    pub fn plan(&self, snapshot: &SnapshotId, options: &RestoreOptions) -> Result<Plan> {
        plan::plan(self, snapshot, options)
    }

    /// Applies a plan; see [`apply`].
    pub fn apply(&self, plan: &Plan, options: &RestoreOptions) -> Result<Report> {
        apply(self, plan, options)
    }

    /// Plans and applies (or, with `dry_run`, only plans) a restore; see [`restore`].
    pub fn restore(&self, snapshot: &SnapshotId, options: &RestoreOptions) -> Result<Report> {
        restore(self, snapshot, options)
    }
}
