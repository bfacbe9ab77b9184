//! Staging: the content a restore writes is first put beside its place, under temporary
//! names, verified, and its records kept for the stat cache (primed once the plan is carried
//! out); a failure before any change removes what was staged.

use super::{temp_prefix, Exec, StagedStat};
use crate::error::{Error, Result};
use crate::plan::{Action, Plan};
use crate::safe;
use crate::site::Site;
use cairn_snapshot::statcache::{StatRecord, Written};
use cairn_store::fsutil::{mode_of, stat_dev, stat_mode};
use cairn_store::{Classify, ErrorKind, ObjectId, RelPath};
use rayon::prelude::*;
use rustix::fd::OwnedFd;
use std::collections::HashMap;
use std::sync::Arc;

impl Exec<'_> {
    pub(super) fn next_temp(&mut self) -> Vec<u8> {
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

    /// Writes every new content `plan` needs into temporary files beside (or above) its
    /// target, verifying each against its id; each directory the plan makes where nothing
    /// stands is built whole. Nothing in the workspace changes if this fails. What was staged
    /// is kept by the action's index in the plan (issue 56: not by a copy of its path).
    pub(crate) fn stage_plan(&mut self, plan: &Plan) -> Result<()> {
        let n = plan.actions.len();
        self.prestaged = vec![false; n];
        self.staged_stats = vec![None; n];
        self.stage_new_dirs(&plan.actions)?;
        for (i, a) in plan.actions.iter().enumerate() {
            if matches!(a, Action::WriteFile { .. }) && !self.prestaged[i] {
                self.staged_stats[i] = self.stage_one(a)?.map(StagedStat::of);
            }
        }
        Ok(())
    }

    /// Stages the content of the file action `a` (a `WriteFile`; any other is left alone) and
    /// returns its record for the stat cache, `None` where its `fstat` failed.
    pub(crate) fn stage_one(&mut self, a: &Action) -> Result<Option<StatRecord>> {
        let Action::WriteFile {
            path, blob, mode, ..
        } = a
        else {
            return Ok(None);
        };
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
        self.staging_dirs.push(dir.clone());
        self.staged.insert(path.0.clone(), (dir, name));
        Ok(st)
    }

    /// Builds each directory the plan makes where nothing stands, with everything the plan
    /// puts inside it, under a temporary name beside its place (files written in parallel): at
    /// run time one rename puts the whole directory in place, instead of one rename per file.
    /// Nothing in the workspace changes.
    fn stage_new_dirs(&mut self, actions: &[Action]) -> Result<()> {
        // Descriptors of the staged directories, at most `safe::max_open_dirs` at once: past
        // that, the files gathered so far are written and the descriptors let go, each
        // directory reopened where it stands when it is needed again (issue 56: a 500k-file
        // tree has 41,666 directories, more than a process may hold open).
        let mut staged: HashMap<Vec<u8>, Arc<OwnedFd>> = HashMap::new();
        // Where each staged directory stands beneath the root (under its temporary name).
        let mut staged_at: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut work: Vec<(Arc<OwnedFd>, usize, &Action)> = Vec::new();
        for (i, a) in actions.iter().enumerate() {
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
                        self.prestaged[i] = true;
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
                        work.push((pfd, i, a));
                        self.prestaged[i] = true;
                    }
                }
                _ => {}
            }
        }
        self.write_staged(&work)
    }

    /// Writes (and verifies) the files and symlinks `work` puts in staged directories, in
    /// parallel, keeping each file's record for the stat cache by its action's index.
    fn write_staged(&mut self, work: &[(Arc<OwnedFd>, usize, &Action)]) -> Result<()> {
        let (ws, store) = (self.ws, self.ws.store());
        let dirs = &self.dirs;
        let stats = work
            .par_iter()
            .map(|(fd, _, a)| {
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
        for ((_, i, _), st) in work.iter().zip(stats) {
            self.staged_stats[*i] = st.map(StagedStat::of);
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
    ///
    /// A file renamed into place is looked at there (`lstat`). One built inside a directory
    /// staged whole is not (issue 56: an `lstat` per file was 6% of a full restore): the
    /// directory's rename changes nothing of the file's own status, so what stands there is
    /// its staged `fstat` unless written since, and a write since moves its `mtime` past the
    /// clock read after staging, which the record's proof requires its `mtime` to be before:
    /// such a record never matches the file, and the next snapshot reads it.
    pub(crate) fn prime(&mut self, plan: &Plan) {
        // What staging kept is done with once the plan is carried out: freed before the stat
        // cache is built, the peak of a restore's memory (issue 56).
        let staged_stats = std::mem::take(&mut self.staged_stats);
        let prestaged = std::mem::take(&mut self.prestaged);
        self.staged = HashMap::new();
        // Each staged file with the clock of its file system, and whether it was built inside
        // a directory staged whole.
        let staged_files = || {
            plan.actions
                .iter()
                .enumerate()
                .filter_map(|(i, a)| match a {
                    Action::WriteFile { path, blob, .. } => {
                        let staged = staged_stats.get(i).copied().flatten()?;
                        Some(StagedFile {
                            path,
                            blob,
                            staged,
                            clock_ns: *self.clocks.get(&staged.dev)?,
                            inside: prestaged.get(i).copied().unwrap_or(false),
                        })
                    }
                    _ => None,
                })
        };
        // Files renamed into place: their directories looked up here and their `lstat`s made
        // in parallel.
        let mut fds = Vec::new();
        let mut renamed = Vec::new();
        for f in staged_files().filter(|f| !f.inside) {
            let Ok(fd) = self.dirs.dir(f.path.split_last().0) else {
                continue;
            };
            fds.push(fd);
            renamed.push(f.written());
        }
        let placed: Vec<Option<StatRecord>> = fds
            .par_iter()
            .zip(renamed.par_iter())
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
        let renamed = renamed
            .into_iter()
            .zip(placed)
            .filter_map(|(mut w, placed)| {
                w.placed = placed?;
                Some(w)
            });
        // Files built inside a directory staged whole, their records made as the cache takes
        // them in (issue 56: not held twice).
        // Counted first: the cache sizes its map from the count it is told.
        let inside = Told {
            left: staged_files().filter(|f| f.inside).count(),
            iter: staged_files().filter(|f| f.inside).map(|f| f.written()),
        };
        let written = inside.chain(renamed);
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
}

/// A file a restore staged, as the stat cache is primed from it.
struct StagedFile<'a> {
    path: &'a RelPath,
    blob: &'a ObjectId,
    /// Its `fstat` once staged.
    staged: StagedStat,
    /// Its file system's clock, read after staging.
    clock_ns: i64,
    /// Whether it was built inside a directory staged whole (not renamed into place itself).
    inside: bool,
}

impl StagedFile<'_> {
    /// What the restore saw of it, as if it stands in place as staged (a file renamed into
    /// place is then looked at there).
    fn written(&self) -> Written {
        let staged = self.staged.record(ObjectId([0; 32]));
        Written {
            path: self.path.0.clone(),
            blob: *self.blob,
            staged,
            clock_ns: self.clock_ns,
            placed: staged,
        }
    }
}

/// `iter`, telling that `left` items are left (the count of what it yields, found first).
struct Told<I> {
    iter: I,
    left: usize,
}

impl<I: Iterator> Iterator for Told<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.iter.next()?;
        self.left = self.left.saturating_sub(1);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
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
