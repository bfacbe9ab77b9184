//! The executor: carries a plan's actions out through directory descriptors (see `safe`),
//! for a fresh apply or to complete a journal, and makes what a plan changed durable. Both
//! the apply (`apply`) and the journal's recovery (`journal`) run it.

mod durable;
mod stage;

pub(crate) use durable::make_durable;

use crate::error::{Error, Result};
use crate::plan::{self, Action, Plan};
use crate::safe::{self, Dirs};
use crate::site::Site;
use cairn_snapshot::statcache::StatRecord;
use cairn_store::fsutil::stat_mode;
use cairn_store::{fsutil, relpath};
use cairn_store::{EntryKind, Hasher, ObjectId, RelPath, SnapshotId, Tree, TreeEntry, TreeId};
use std::collections::HashMap;

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
    /// Test hook: stop with an error after this many operations (never set outside tests).
    stop_after: Option<usize>,
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
    /// By action index: whether its creation was already carried out inside those
    /// directories (their mode actions still run, after the rename). Empty in a recovery.
    prestaged: Vec<bool>,
    /// The root tree of the plan being run: where a mode-only change on a hard-linked file
    /// finds the content it writes as a new file.
    target_root: Option<TreeId>,
    /// By action index: each staged file's `fstat` once its content and mode were written;
    /// with what is seen at its place afterwards, what the stat cache is primed from (issue
    /// 33). Empty in a recovery.
    staged_stats: Vec<Option<StagedStat>>,
    /// The directories staging wrote into (or beside), where the clock is read.
    staging_dirs: Vec<Vec<u8>>,
    /// Each file system's clock (by device) read after staging, before anything was put in
    /// place: see [`Exec::read_clocks`].
    clocks: HashMap<u64, i64>,
}

/// A staged file's `fstat`: a [`StatRecord`] without its blob, which the plan's action names
/// (issue 56: 56 bytes an action where the record took 88).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StagedStat {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    mode: u32,
}

impl StagedStat {
    /// What of `r` is kept.
    fn of(r: StatRecord) -> StagedStat {
        StagedStat {
            dev: r.dev,
            ino: r.ino,
            size: r.size,
            mtime_ns: r.mtime_ns,
            ctime_ns: r.ctime_ns,
            mode: r.mode,
        }
    }

    /// The record again, with `blob`.
    fn record(self, blob: ObjectId) -> StatRecord {
        StatRecord {
            dev: self.dev,
            ino: self.ino,
            mode: self.mode,
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            blob,
        }
    }
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
            stop_after: None,
            ops: 0,
            staged: HashMap::new(),
            counter: 0,
            unlocked: Vec::new(),
            trees: HashMap::new(),
            new_dirs: HashMap::new(),
            prestaged: Vec::new(),
            target_root: None,
            staged_stats: Vec::new(),
            staging_dirs: Vec::new(),
            clocks: HashMap::new(),
        })
    }

    /// Test hook: the run stops once `stop_after` operations are done, as if its process had
    /// died there, with an error (see `ApplyOptions::stop_after_ops`).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn stop_after(&mut self, ops: Option<usize>) {
        self.stop_after = ops;
    }

    /// Test hook: dies by SIGKILL once `crash_after` operations are done, or stops with an
    /// error once `stop_after` are (checked before each operation and once after the last,
    /// before the journal is marked done).
    fn maybe_crash(&self) -> Result<()> {
        if self.stop_after == Some(self.ops) {
            return Err(Error::io(
                "carry out",
                self.ws.root().to_path_buf(),
                std::io::Error::other("stopped by a test hook, as if the process had died"),
            ));
        }
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
        Ok(())
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
        for (i, a) in plan.actions.iter().enumerate() {
            let path = a.path().0.clone();
            if !matches!(a, Action::SetMode { .. }) && self.prestaged.get(i) == Some(&true) {
                // Carried out inside a directory staged whole, which its rename put in place;
                // still one operation of the plan (a crash point like any other).
                self.maybe_crash()?;
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
                        self.stage_one(a)?;
                    }
                }
            }
            self.maybe_crash()?;
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
        self.maybe_crash()?;
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
                    self.stage_one(&write)?;
                    self.do_action(&write)
                } else {
                    self.in_dir(&parent, |fd| safe::chmod_file(fd, &name, *mode))
                        .map_err(|e| Error::io("set mode", abs, e))
                }
            }
        }
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
