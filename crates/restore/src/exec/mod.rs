//! The executor: carries a plan's actions out through directory descriptors (see `safe`),
//! for a fresh apply or to complete a journal, and makes what a plan changed durable. Both
//! the apply (`apply`) and the journal's recovery (`journal`) run it.

use crate::error::{Error, Result};
use crate::plan::{self, Action, Plan};
use crate::safe::{self, Dirs};
use crate::site::Site;
use cairn_snapshot::statcache::{StatRecord, Written};
use cairn_store::fsutil::{mode_of, stat_dev, stat_mode};
use cairn_store::{fsutil, relpath};
use cairn_store::{
    Classify, EntryKind, ErrorKind, Hasher, ObjectId, RelPath, SnapshotId, Tree, TreeEntry, TreeId,
};
use rayon::prelude::*;
use rustix::fd::OwnedFd;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// How the executor treats the paths it changes.
pub(crate) enum Mode {
    /// A fresh apply, just re-planned against the safety snapshot.
    Apply,
    /// Completing a journal: skip paths in their target state, do those still as the safety
    /// snapshot holds them, report the rest as obstructed.
    Recover { safety: Option<SnapshotId> },
}

/// Carries out one plan's actions (for an apply, or a journal's recovery) under the journal
/// `jid`, whose name its temporary files carry.
pub(crate) struct Exec<'a> {
    ws: &'a Site,
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
        ws: &'a Site,
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
                self.unlocked.push((rel.to_vec(), stat_mode(&st) & 0o7777));
                safe::chmod_dir(&*fd, (stat_mode(&st) & 0o7777) | 0o700)?;
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
            let mut file = match safe::create_file(&*fd, &name, *mode) {
                Ok(f) => f,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ACCESS.raw_os_error()) => {
                    let mut found = None;
                    while !dir.is_empty() {
                        let parent = dir.iter().rposition(|&b| b == b'/').unwrap_or(0);
                        dir.truncate(parent);
                        fd = self.dirs.dir(&dir)?;
                        if let Ok(f) = safe::create_file(&*fd, &name, *mode) {
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
            let r = fill_staged(self.ws, &mut file, blob, *mode, || self.dirs.abs(&path.0));
            let st = match r {
                Ok(st) => st,
                Err(e) => {
                    let _ = safe::unlink(&*fd, &name);
                    return Err(e);
                }
            };
            if let Some(st) = st {
                self.staged_stats.insert(path.0.clone(), st);
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
        // Descriptors of the staged directories, at most `safe::max_open_dirs` at once: past
        // that, the files gathered so far are written and the descriptors let go, each
        // directory reopened where it stands when it is needed again (issue 56: a 500k-file
        // tree has 41,666 directories, more than a process may hold open).
        let mut staged: HashMap<Vec<u8>, Arc<OwnedFd>> = HashMap::new();
        // Where each staged directory stands beneath the root (under its temporary name).
        let mut staged_at: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut work: Vec<(Arc<OwnedFd>, &Action)> = Vec::new();
        for a in actions {
            let path = &a.path().0;
            let (parent, name) = a.path().split_last();
            if staged.len() >= self.dirs.max_open() {
                self.write_staged(&work)?;
                work.clear();
                staged.clear();
            }
            let in_staged = match staged.get(parent) {
                Some(fd) => Some(fd.clone()),
                None => match staged_at.get(parent) {
                    Some(at) => {
                        let fd = self.dirs.dir(at)?;
                        staged.insert(parent.to_vec(), fd.clone());
                        Some(fd)
                    }
                    None => None,
                },
            };
            match a {
                Action::MakeDir { mode, .. } => {
                    if let Some(pfd) = in_staged {
                        let fd = safe::mkdir_open(&*pfd, name, *mode)
                            .map_err(|e| Error::io("stage directory", self.abs(path), e))?;
                        let mut at = staged_at.get(parent).cloned().unwrap_or_default();
                        at.push(b'/');
                        at.extend_from_slice(name);
                        staged_at.insert(path.clone(), at);
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
                    let mut at = parent.to_vec();
                    if !at.is_empty() {
                        at.push(b'/');
                    }
                    at.extend_from_slice(&tmp);
                    staged_at.insert(path.clone(), at);
                    self.new_dirs.insert(path.clone(), tmp);
                    self.staging_dirs.push(parent.to_vec());
                    staged.insert(path.clone(), Arc::new(fd));
                }
                Action::WriteFile { .. } | Action::MakeSymlink { .. } => {
                    if let Some(pfd) = in_staged {
                        work.push((pfd, a));
                        self.prestaged.insert(path.clone());
                    }
                }
                _ => {}
            }
        }
        self.write_staged(&work)
    }

    /// Writes (and verifies) the files and symlinks `work` puts in staged directories, in
    /// parallel, keeping each file's record for the stat cache.
    fn write_staged(&mut self, work: &[(Arc<OwnedFd>, &Action)]) -> Result<()> {
        let (ws, store) = (self.ws, self.ws.store());
        let dirs = &self.dirs;
        let stats = work
            .par_iter()
            .map(|(fd, a)| {
                let (_, name) = a.path().split_last();
                match a {
                    Action::WriteFile { blob, mode, .. } => {
                        let mut file = safe::create_file(&**fd, name, *mode)
                            .map_err(|e| Error::io("stage", dirs.abs(&a.path().0), e))?;
                        fill_staged(ws, &mut file, blob, *mode, || dirs.abs(&a.path().0))
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
        // The records come back in `work`'s order, without a copy of each path (issue 56: the
        // paths are copied once, into the map, sized beforehand).
        self.staged_stats.reserve(stats.iter().flatten().count());
        for ((_, a), st) in work.iter().zip(stats) {
            if let Some(st) = st {
                self.staged_stats.insert(a.path().0.clone(), st);
            }
        }
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
            if self.clocks.contains_key(&stat_dev(&st)) {
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
                self.clocks
                    .insert(stat_dev(&after), r.ctime_ns.max(r.mtime_ns));
            }
        }
    }

    /// Records in the stat cache the files `plan` wrote that this run staged, each with what
    /// is now at its place (issue 33): `cairn_snapshot::prime` keeps those whose records are
    /// proven, so the next snapshot reads none of them. Best effort, after every change.
    pub(crate) fn prime(&mut self, plan: &Plan) {
        // What staging kept is done with once the plan is carried out: freed before the stat
        // cache is built, the peak of a restore's memory (issue 56).
        let staged_stats = std::mem::take(&mut self.staged_stats);
        self.prestaged = HashSet::new();
        self.staged = HashMap::new();
        // The directories are looked up here, the files' `lstat`s made in parallel.
        let mut fds = Vec::new();
        let mut written = Vec::new();
        for a in &plan.actions {
            let Action::WriteFile { path, blob, .. } = a else {
                continue;
            };
            let Some(staged) = staged_stats.get(&path.0).copied() else {
                continue;
            };
            let Some(&clock_ns) = self.clocks.get(&staged.dev) else {
                continue;
            };
            let Ok(fd) = self.dirs.dir(path.split_last().0) else {
                continue;
            };
            fds.push(fd);
            written.push(Written {
                path: path.0.clone(),
                blob: *blob,
                staged,
                clock_ns,
                placed: staged,
            });
        }
        drop(staged_stats);
        let placed: Vec<Option<StatRecord>> = fds
            .par_iter()
            .zip(written.par_iter())
            .map(|(fd, w)| {
                let name = match w.path.iter().rposition(|&b| b == b'/') {
                    Some(i) => &w.path[i + 1..],
                    None => &w.path[..],
                };
                safe::lstat(&**fd, name)
                    .ok()
                    .flatten()
                    .map(|st| StatRecord::of(&st))
            })
            .collect();
        drop(fds);
        let mut placed = placed.into_iter();
        written.retain_mut(|w| match placed.next().flatten() {
            Some(p) => {
                w.placed = p;
                true
            }
            None => false,
        });
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
            rustix::fs::FileType::Directory => (EntryKind::Dir, None, stat_mode(&st)),
            rustix::fs::FileType::Symlink => {
                let t = safe::readlink(&*fd, name)
                    .map_err(|e| Error::io("readlink", self.abs(path), e))?;
                (EntryKind::Symlink, Some(ObjectId::of(&t)), stat_mode(&st))
            }
            rustix::fs::FileType::RegularFile => {
                let mut f = safe::open_read(&*fd, name)
                    .map_err(|e| Error::io("open", self.abs(path), e))?;
                let mut h = Hasher::new();
                h.update_from(&mut f)
                    .map_err(|e| Error::io("read", self.abs(path), e))?;
                (EntryKind::File, Some(h.finish()), stat_mode(&st))
            }
            // Something else stands there: it matches neither side.
            _ => (EntryKind::File, None, stat_mode(&st)),
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

    /// Carries the plan's actions out, in order. Returns the obstructed paths (recovery only;
    /// an apply fails on the first error instead, its journal left pending).
    pub(crate) fn carry_out(&mut self, plan: &Plan) -> Result<Vec<RelPath>> {
        // An apply has staged everything before it wrote its journal; a recovery stages each
        // file it finds still to do.
        let recover = matches!(self.mode, Mode::Recover { .. });
        self.target_root = Some(plan.target_root);
        let mut obstructed = Vec::new();
        // Paths the plan removes before it creates something there (a type change): for the
        // creation, "absent" is the state before it too.
        // Only a recovery looks these up: an apply does not hold a copy of every path for them.
        let removed: std::collections::HashSet<Vec<u8>> = plan
            .actions
            .iter()
            .filter(|_| recover)
            .filter(|a| matches!(a, Action::RemoveFile { .. } | Action::RemoveDir { .. }))
            .map(|a| a.path().0.clone())
            .collect();
        let created: HashMap<Vec<u8>, &Action> = plan
            .actions
            .iter()
            .filter(|_| recover)
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
                match self.recovery_step(a, removed.contains(&path), created.get(&path).copied())? {
                    RecoveryStep::AlreadyDone => {
                        // A directory the plan made is there, its mode maybe not (issue 57: a
                        // power cut kept the mkdir and lost the chmod that followed it).
                        if let Action::MakeDir { mode, .. } = a {
                            if let Ok(fd) = self.dirs.dir(&path) {
                                safe::chmod_dir(&*fd, *mode)
                                    .map_err(|e| Error::io("set mode", self.abs(&path), e))?;
                            }
                        }
                        continue;
                    }
                    RecoveryStep::Obstructed => {
                        obstructed.push(a.path().clone());
                        continue;
                    }
                    RecoveryStep::Run => {
                        if let Action::WriteFile { .. } = a {
                            self.stage(&[a])?;
                        }
                    }
                }
            }
            self.maybe_crash();
            match self.do_action(a) {
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

    /// In recovery: what to do with action `a`, from what stands at its path now.
    /// `removed_before`: the plan removes the path before creating something there;
    /// `created_after`: the creation the plan makes there after removing it.
    fn recovery_step(
        &mut self,
        a: &Action,
        removed_before: bool,
        created_after: Option<&Action>,
    ) -> Result<RecoveryStep> {
        let path = a.path().0.clone();
        let now = self.current(&path)?;
        // A removal whose path already holds what the plan creates there later: done.
        if let (Action::RemoveFile { .. } | Action::RemoveDir { .. }, Some(c)) = (a, created_after)
        {
            if is_target(c, &now) {
                return Ok(RecoveryStep::AlreadyDone);
            }
        }
        let creation = matches!(
            a,
            Action::MakeDir { .. } | Action::WriteFile { .. } | Action::MakeSymlink { .. }
        );
        if creation && removed_before && now.is_none() {
            return Ok(RecoveryStep::Run);
        }
        Ok(match a {
            Action::RemoveFile { .. } => match now {
                None => RecoveryStep::AlreadyDone,
                Some(_) if self.as_before(&path)? => RecoveryStep::Run,
                Some(_) => RecoveryStep::Obstructed,
            },
            Action::RemoveDir { .. } => match now {
                None => RecoveryStep::AlreadyDone,
                Some((EntryKind::Dir, _, _)) => RecoveryStep::Run,
                Some(_) => RecoveryStep::Obstructed,
            },
            Action::MakeDir { .. } => match now {
                Some((EntryKind::Dir, _, _)) => RecoveryStep::AlreadyDone,
                None => RecoveryStep::Run,
                Some(_) => RecoveryStep::Obstructed,
            },
            Action::WriteFile { .. } | Action::MakeSymlink { .. } => {
                if is_target(a, &now) {
                    RecoveryStep::AlreadyDone
                } else if now.is_none() || self.as_before(&path)? {
                    // Nothing there (the user moved an obstruction aside, as told): writing
                    // the target loses nothing (issue 26).
                    RecoveryStep::Run
                } else {
                    RecoveryStep::Obstructed
                }
            }
            Action::SetMode { dir, .. } => match now {
                Some((EntryKind::Dir, _, _)) if *dir => RecoveryStep::Run,
                Some((EntryKind::File, _, _)) if !*dir => RecoveryStep::Run,
                _ => RecoveryStep::Obstructed,
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

    /// Carries out one action, opening up a read-only directory of ours where it must.
    fn do_action(&mut self, a: &Action) -> Result<()> {
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
                    self.do_action(&write)
                } else {
                    self.in_dir(&parent, |fd| safe::chmod_file(fd, &name, *mode))
                        .map_err(|e| Error::io("set mode", abs, e))
                }
            }
        }
    }
}

impl Exec<'_> {
    /// Makes what staging wrote durable before the journal makes the restore pending (issue
    /// 57: a power cut after some renames had landed left files whose staged content never
    /// reached the disk, in neither state, and the recovery wedged): each staged file, each
    /// directory built whole under a temporary name with what it holds, and each directory
    /// they were staged in; past [`SYNC_EACH_MAX`] of them, the whole file system.
    pub(crate) fn sync_staged(&mut self) -> Result<()> {
        let count = self.staged.len() + self.prestaged.len() + self.new_dirs.len();
        if count > SYNC_EACH_MAX {
            return sync_whole_fs(&self.dirs);
        }
        let mut files = Vec::new();
        let staged: Vec<(Vec<u8>, Vec<u8>)> = self.staged.values().cloned().collect();
        for (dir, name) in staged {
            let fd = self.dirs.dir(&dir)?;
            let f = safe::open_read(&*fd, &name)
                .map_err(|e| Error::io("open a staged file", self.dirs.abs(&dir), e))?;
            files.push((f, self.dirs.abs(&dir)));
        }
        // A directory built whole: everything in it (made by this restore, not followed
        // through symlinks).
        let built: Vec<std::path::PathBuf> = self
            .new_dirs
            .iter()
            .map(|(path, tmp)| {
                let parent = path
                    .iter()
                    .rposition(|&b| b == b'/')
                    .map_or(&path[..0], |i| &path[..i]);
                let mut at = parent.to_vec();
                if !at.is_empty() {
                    at.push(b'/');
                }
                at.extend_from_slice(tmp);
                self.dirs.abs(&at)
            })
            .collect();
        let mut todo = built;
        while let Some(d) = todo.pop() {
            let read = std::fs::read_dir(&d).map_err(|e| Error::io("list", &d, e))?;
            for e in read {
                let e = e.map_err(|e| Error::io("list", &d, e))?;
                let ft = e
                    .file_type()
                    .map_err(|err| Error::io("inspect", e.path(), err))?;
                if ft.is_dir() {
                    todo.push(e.path());
                } else if ft.is_file() {
                    let f = std::fs::File::open(e.path())
                        .map_err(|err| Error::io("open a staged file", e.path(), err))?;
                    files.push((f, e.path()));
                }
            }
            let f = std::fs::File::open(&d).map_err(|e| Error::io("open", &d, e))?;
            files.push((f, d));
        }
        let mut dirs = self.staging_dirs.clone();
        dirs.sort_unstable();
        dirs.dedup();
        for d in dirs {
            let fd = self.dirs.dir(&d)?;
            let dup = fd
                .try_clone()
                .map_err(|e| Error::io("open", self.dirs.abs(&d), e))?;
            files.push((std::fs::File::from(dup), self.dirs.abs(&d)));
        }
        sync_together(files)
    }
}

/// Syncs the whole file system of the root: `syncfs` on Linux, elsewhere `sync`, every file
/// system.
fn sync_whole_fs(dirs: &Dirs) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::fs::syncfs(dirs.root_fd()).map_err(|e| Error::io("sync", dirs.abs(b""), e.into()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dirs;
        rustix::fs::sync();
        Ok(())
    }
}

/// Makes what `plan` changed durable: for a small plan, each file it wrote or re-moded and each
/// directory whose entries it changed (what has changed since is synced as it is; what is gone
/// is passed over); for a large one, the whole file system (`syncfs`).
pub(crate) fn make_durable(ws: &Site, plan: &Plan) -> Result<()> {
    let mut dirs = Dirs::open(ws.root())?;
    let whole_fs = sync_whole_fs;
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

/// Writes the content `blob` into the staged `file` (created with `mode`'s permission bits, as
/// far as the umask lets them through), verifying it against its id, then gives the file its
/// mode: `open` already did where the umask kept every bit (the `fstat` taken for the stat
/// cache shows it), else one `fchmod` (issue 56: no `fchmod` per file in the common case).
/// Returns that `fstat`'s record, `None` where it could not be taken.
fn fill_staged(
    ws: &Site,
    file: &mut std::fs::File,
    blob: &ObjectId,
    mode: u32,
    abs: impl Fn() -> std::path::PathBuf,
) -> Result<Option<StatRecord>> {
    ws.store()
        .copy_object_to(blob, file)
        .map_err(|e| stage_error(abs(), e))?;
    match rustix::fs::fstat(&*file) {
        Ok(st) if stat_mode(&st) & 0o7777 == mode & 0o7777 => return Ok(Some(StatRecord::of(&st))),
        _ => {}
    }
    rustix::fs::fchmod(&*file, mode_of(mode & 0o7777))
        .map_err(|e| Error::io("set mode", abs(), e.into()))?;
    Ok(rustix::fs::fstat(&*file).ok().map(|st| StatRecord::of(&st)))
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

/// What recovery does with one action of a journal's plan.
enum RecoveryStep {
    /// Its path is already in its target state: nothing to do.
    AlreadyDone,
    /// Its path is still as the safety snapshot holds it (or empty): carry it out.
    Run,
    /// A later edit, or a path that may not be changed, stands in its way: left and reported.
    Obstructed,
}
