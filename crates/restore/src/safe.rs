//! Safe placement: every access goes through directory descriptors opened beneath the
//! workspace root without following a symlink. `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` is used where the kernel has it; elsewhere each component is opened
//! with `O_NOFOLLOW` from the nearest directory already open. No path, symlink or race can make
//! an operation here write or delete outside the root: a symlinked component fails the
//! operation (`ELOOP`/`ENOTDIR`) instead of being followed.

use crate::error::{Error, Result};
use cairn_store::fsutil::mode_of;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// At most this many directory descriptors are held for later by [`Dirs`], and by a
/// restore's staging at once, and never more than a quarter of the process's limit of open
/// files (issue 56: a 500k-file tree has 41,666 directories, more than a process may hold
/// open).
pub(crate) fn max_open_dirs() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    usize::try_from(limit / 4)
        .unwrap_or(usize::MAX)
        .clamp(16, 1024)
}

/// Directory descriptors beneath one root, cached by relative path (at most
/// [`max_open_dirs`] kept).
pub(crate) struct Dirs {
    root: PathBuf,
    root_fd: Arc<OwnedFd>,
    cache: HashMap<Vec<u8>, Arc<OwnedFd>>,
    /// [`max_open_dirs`] when opened.
    max_open: usize,
}

impl Dirs {
    pub(crate) fn open(root: &Path) -> Result<Dirs> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io("open workspace root", root, e.into()))?;
        Ok(Dirs {
            root: root.to_path_buf(),
            root_fd: Arc::new(fd),
            cache: HashMap::new(),
            max_open: max_open_dirs(),
        })
    }

    /// How many directory descriptors may be kept open at once (see [`max_open_dirs`]).
    pub(crate) fn max_open(&self) -> usize {
        self.max_open
    }

    #[cfg(target_os = "linux")] // for `syncfs`, Linux's
    pub(crate) fn root_fd(&self) -> &OwnedFd {
        &self.root_fd
    }

    pub(crate) fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            return self.root.clone();
        }
        self.root.join(OsStr::from_bytes(rel))
    }

    /// The directory at `rel` (empty: the root), opened beneath the root without following
    /// any symlink (from the deepest ancestor already open; see
    /// [`cairn_store::fsutil::open_dir_beneath`]).
    pub(crate) fn dir(&mut self, rel: &[u8]) -> Result<Arc<OwnedFd>> {
        if rel.is_empty() {
            return Ok(self.root_fd.clone());
        }
        if let Some(fd) = self.cache.get(rel) {
            return Ok(fd.clone());
        }
        let mut base: Arc<OwnedFd> = self.root_fd.clone();
        let mut rest = rel;
        for (i, _) in rel.iter().enumerate().filter(|(_, &b)| b == b'/').rev() {
            if let Some(fd) = self.cache.get(&rel[..i]) {
                base = fd.clone();
                rest = &rel[i + 1..];
                break;
            }
        }
        let fd = match cairn_store::fsutil::open_dir_beneath(&*base, rest) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(Errno::INVAL.raw_os_error()) => {
                return Err(Error::InvalidArgument(format!(
                    "refusing the path {:?}: an empty, `.` or `..` component",
                    String::from_utf8_lossy(rel)
                )))
            }
            // A symlinked component gives ELOOP (or ENOTDIR); an escape EXDEV: refusals.
            Err(e) => return Err(Error::io("open directory", self.abs(rel), e)),
        };
        let fd = Arc::new(fd);
        if self.cache.len() >= self.max_open {
            // Descriptors handed out stay valid; the others are reopened when asked for.
            self.cache.clear();
        }
        self.cache.insert(rel.to_vec(), fd.clone());
        Ok(fd)
    }

    /// Forgets cached descriptors at and under `rel` (after it was removed or replaced).
    pub(crate) fn forget(&mut self, rel: &[u8]) {
        self.cache.retain(|k, _| {
            !(k.as_slice() == rel || (k.starts_with(rel) && k.get(rel.len()) == Some(&b'/')))
        });
    }
}

/// `lstat` of `name` in `dir`; `None` when absent.
pub(crate) fn lstat(dir: &impl AsFd, name: &[u8]) -> std::io::Result<Option<rustix::fs::Stat>> {
    match rustix::fs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The file type of a stat.
pub(crate) fn file_type(st: &rustix::fs::Stat) -> rustix::fs::FileType {
    rustix::fs::FileType::from_raw_mode(st.st_mode)
}

/// Creates `name` in `dir` exclusively for writing, never following a symlink.
pub(crate) fn create_file(
    dir: &impl AsFd,
    name: &[u8],
    mode: u32,
) -> std::io::Result<std::fs::File> {
    let fd = rustix::fs::openat(
        dir,
        OsStr::from_bytes(name),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode_of(mode & 0o777),
    )?;
    Ok(std::fs::File::from(fd))
}

/// Sets the permission bits of the regular file `name` in `dir`, without following a symlink.
pub(crate) fn chmod_file(dir: &impl AsFd, name: &[u8], mode: u32) -> std::io::Result<()> {
    match rustix::fs::openat(
        dir,
        OsStr::from_bytes(name),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => {
            rustix::fs::fchmod(&fd, mode_of(mode & 0o7777))?;
            Ok(())
        }
        // An unreadable file of ours: check it is not a symlink, then chmod by name.
        Err(Errno::ACCESS) => match lstat(dir, name)? {
            Some(st) if file_type(&st) == rustix::fs::FileType::RegularFile => {
                rustix::fs::chmodat(
                    dir,
                    OsStr::from_bytes(name),
                    mode_of(mode & 0o7777),
                    AtFlags::empty(),
                )?;
                Ok(())
            }
            _ => Err(Errno::LOOP.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Sets the mode of directory `fd`.
pub(crate) fn chmod_dir(fd: &impl AsFd, mode: u32) -> std::io::Result<()> {
    rustix::fs::fchmod(fd, mode_of(mode & 0o7777))?;
    Ok(())
}

/// Renames `from` in `from_dir` to `to` in `to_dir` (replacing what is there).
pub(crate) fn rename(
    from_dir: &impl AsFd,
    from: &[u8],
    to_dir: &impl AsFd,
    to: &[u8],
) -> std::io::Result<()> {
    rustix::fs::renameat(
        from_dir,
        OsStr::from_bytes(from),
        to_dir,
        OsStr::from_bytes(to),
    )?;
    Ok(())
}

/// Removes the non-directory `name` in `dir`.
pub(crate) fn unlink(dir: &impl AsFd, name: &[u8]) -> std::io::Result<()> {
    match rustix::fs::unlinkat(dir, OsStr::from_bytes(name), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Removes the empty directory `name` in `dir`.
pub(crate) fn rmdir(dir: &impl AsFd, name: &[u8]) -> std::io::Result<()> {
    match rustix::fs::unlinkat(dir, OsStr::from_bytes(name), AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates directory `name` in `dir` with exactly `mode`.
pub(crate) fn mkdir(dir: &impl AsFd, name: &[u8], mode: u32) -> std::io::Result<()> {
    mkdir_open(dir, name, mode).map(drop)
}

/// Creates directory `name` in `dir` with `mode` plus owner access (the final mode is set
/// once the restore has filled it), and returns it open.
pub(crate) fn mkdir_open(dir: &impl AsFd, name: &[u8], mode: u32) -> std::io::Result<OwnedFd> {
    rustix::fs::mkdirat(dir, OsStr::from_bytes(name), Mode::from_raw_mode(0o700))?;
    let fd = rustix::fs::openat(dir, OsStr::from_bytes(name), DIR_FLAGS, Mode::empty())?;
    rustix::fs::fchmod(&fd, mode_of((mode & 0o7777) | 0o700))?;
    Ok(fd)
}

/// Renames `from` in `from_dir` to `to` in `to_dir`, failing with `EEXIST` rather than
/// replacing anything there.
pub(crate) fn rename_noreplace(
    from_dir: &impl AsFd,
    from: &[u8],
    to_dir: &impl AsFd,
    to: &[u8],
) -> std::io::Result<()> {
    rustix::fs::renameat_with(
        from_dir,
        OsStr::from_bytes(from),
        to_dir,
        OsStr::from_bytes(to),
        rustix::fs::RenameFlags::NOREPLACE,
    )?;
    Ok(())
}

/// Removes the directory `name` in `dir` with everything in it, through descriptors and
/// without following a symlink: only for directories the restore made itself (staging).
pub(crate) fn remove_tree(dir: &impl AsFd, name: &[u8]) -> std::io::Result<()> {
    let fd = match rustix::fs::openat(dir, OsStr::from_bytes(name), DIR_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&fd)? {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push((n.to_vec(), entry.file_type()));
        }
    }
    for (n, ft) in names {
        let is_dir = match ft {
            rustix::fs::FileType::Unknown => {
                lstat(&fd, &n)?.is_some_and(|st| file_type(&st) == rustix::fs::FileType::Directory)
            }
            ft => ft == rustix::fs::FileType::Directory,
        };
        if is_dir {
            remove_tree(&fd, &n)?;
        } else {
            unlink(&fd, &n)?;
        }
    }
    rmdir(dir, name)
}

/// Creates a symlink `name` in `dir` pointing at `target`.
pub(crate) fn symlink(target: &[u8], dir: &impl AsFd, name: &[u8]) -> std::io::Result<()> {
    rustix::fs::symlinkat(OsStr::from_bytes(target), dir, OsStr::from_bytes(name))?;
    Ok(())
}

/// Reads the target of symlink `name` in `dir`.
pub(crate) fn readlink(dir: &impl AsFd, name: &[u8]) -> std::io::Result<Vec<u8>> {
    Ok(rustix::fs::readlinkat(dir, OsStr::from_bytes(name), Vec::new())?.into_bytes())
}

/// Opens regular file `name` in `dir` for reading without following a symlink.
pub(crate) fn open_read(dir: &impl AsFd, name: &[u8]) -> std::io::Result<std::fs::File> {
    let fd = rustix::fs::openat(
        dir,
        OsStr::from_bytes(name),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(std::fs::File::from(fd))
}
