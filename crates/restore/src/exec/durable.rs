//! Durability: what staging wrote is synced before the journal makes a restore pending, and
//! what a carried-out plan changed is made durable before its journal is done.

use super::{Exec, SYNC_EACH_MAX};
use crate::error::{Error, Result};
use crate::plan::{Action, Plan};
use crate::safe::{self, Dirs};
use crate::site::Site;

impl Exec<'_> {
    /// Makes what staging wrote durable before the journal makes the restore pending (issue
    /// 57: a power cut after some renames had landed left files whose staged content never
    /// reached the disk, in neither state, and the recovery wedged): each staged file, each
    /// directory built whole under a temporary name with what it holds, and each directory
    /// they were staged in; past [`SYNC_EACH_MAX`] of them, the whole file system.
    pub(crate) fn sync_staged(&mut self) -> Result<()> {
        let prestaged = self.prestaged.iter().filter(|&&p| p).count();
        let count = self.staged.len() + prestaged + self.new_dirs.len();
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
