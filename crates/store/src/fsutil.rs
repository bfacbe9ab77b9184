//! Small, safe file-system helpers shared by the store and the layers above: owner-only
//! creation, durable atomic writes, directory syncs and advisory locks.
//!
//! The kernel's `flock` locks used here are released when the process holding them dies, so a
//! crash never leaves a lock behind that wedges the store.

use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of every directory the store creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates.
pub const FILE_MODE: u32 = 0o600;

/// Creates `path` (and missing parents) owner-only, or checks that it is a real directory
/// (not a symlink). Modes are set explicitly, so the umask does not matter.
pub fn ensure_dir(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::corrupt(
            "store directory",
            path,
            "is not a directory (a symlink or a file stands there); the store refuses to use it",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(path)
                .map_err(|e| Error::io("create directory", path, e))?;
            fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
                .map_err(|e| Error::io("set permissions of", path, e))?;
            Ok(())
        }
        Err(e) => Err(Error::io("inspect", path, e)),
    }
}

/// Creates a new file exclusively, owner-only, for writing. Never follows a symlink.
pub fn create_new_file(path: &Path) -> Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| Error::io("create", path, e))?;
    // The umask can only remove bits from FILE_MODE; set it anyway so the mode is exact.
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| Error::io("set permissions of", path, e))?;
    Ok(f)
}

/// Whether the test-only switch removes the sync named `step` (issue 57: the power-cut
/// explorer shows it catches a missing sync). Always `false` unless the crate is built with
/// the `test-skip-sync` feature, which no package of Cairn is.
#[inline]
pub fn test_skips_sync(step: &str) -> bool {
    #[cfg(feature = "test-skip-sync")]
    {
        std::env::var("CAIRN_TEST_SKIP_SYNC").is_ok_and(|v| v == step)
    }
    #[cfg(not(feature = "test-skip-sync"))]
    {
        let _ = step;
        false
    }
}

/// Syncs a directory, so that renames and creations in it are durable.
pub fn sync_dir(path: &Path) -> Result<()> {
    let d = File::open(path).map_err(|e| Error::io("open directory", path, e))?;
    d.sync_all()
        .map_err(|e| Error::io("sync directory", path, e))
}

/// A file to sync, its path and what an error calls the step (see [`sync_while`]).
pub type ToSync<'a> = (&'a File, &'a Path, &'static str);

/// Syncs several files at once, each on a thread of its own so that all their writes are in
/// flight together (on this machine's disk two syncs one after the other cost about twice
/// one), while this thread does `work`: what needs no sync waits for none. The first error
/// wins, a sync's before the work's.
pub fn sync_while<T>(files: &[ToSync<'_>], work: impl FnOnce() -> Result<T>) -> Result<T> {
    let sync = |&(f, path, what): &ToSync<'_>| f.sync_all().map_err(|e| Error::io(what, path, e));
    std::thread::scope(|s| {
        let syncing: Vec<_> = files
            .iter()
            .map(|t| (t, s.spawn(move || sync(t))))
            .collect();
        let done = work();
        let mut synced = Ok(());
        for ((_, path, what), other) in syncing {
            let one = other
                .join()
                .unwrap_or_else(|_| Err(Error::io(what, path, std::io::Error::other("panicked"))));
            synced = synced.and(one);
        }
        synced.and(done)
    })
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The prefix of the names a restore stages its files under, beside their places in the
/// workspace: `.cairn-tmp-<journal id>-<n>`.
pub const STAGED_PREFIX: &str = ".cairn-tmp-";

/// The journal id a staged file's name carries, when `name` is one a restore gives
/// (`.cairn-tmp-r-<24 hex>-<n>` or `.cairn-tmp-key-<32 hex>-<n>`), so that such a file is
/// known as Cairn's own wherever it is found: never captured by a snapshot, never planned as
/// the user's.
pub fn staged_journal(name: &[u8]) -> Option<&str> {
    let rest = name.strip_prefix(STAGED_PREFIX.as_bytes())?;
    let (hex_len, tag) = if rest.starts_with(b"r-") {
        (24, 2)
    } else if rest.starts_with(b"key-") {
        (32, 4)
    } else {
        return None;
    };
    let id_len = tag + hex_len;
    let (id, n) = (rest.get(..id_len)?, rest.get(id_len..)?);
    let hex_ok = id[tag..]
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    let n_ok = n.len() > 1 && n[0] == b'-' && n[1..].iter().all(u8::is_ascii_digit);
    if hex_ok && n_ok {
        std::str::from_utf8(id).ok()
    } else {
        None
    }
}

/// A unique temporary file name in `dir`, tagged with `tag`, the process id and a counter.
pub fn temp_name(dir: &Path, tag: &str) -> PathBuf {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    dir.join(format!("{tag}-{}-{n}-{nanos:08x}.tmp", std::process::id()))
}

/// Writes `bytes` to `dest` durably and atomically: a temporary file in `tmp_dir` is written,
/// synced and renamed over `dest`, and `dest`'s directory is synced.
pub fn write_atomic(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> Result<()> {
    let staged = Staged::write(tmp_dir, bytes)?;
    staged.sync()?;
    staged.place(dest)
}

/// A temporary file written whole and not yet in place: [`Staged::place`] renames it over its
/// destination (after [`Staged::sync`], or after its file was synced with others, see
/// [`sync_while`]). Dropped before that, it is removed.
#[derive(Debug)]
pub struct Staged {
    file: File,
    tmp: PathBuf,
    placed: bool,
}

impl Staged {
    /// Writes `bytes` to a new temporary file in `tmp_dir`.
    pub fn write(tmp_dir: &Path, bytes: &[u8]) -> Result<Staged> {
        let tmp = temp_name(tmp_dir, "write");
        let file = create_new_file(&tmp)?;
        // From here on, a failure removes the file (see `Drop`).
        let mut staged = Staged {
            file,
            tmp,
            placed: false,
        };
        staged
            .file
            .write_all(bytes)
            .map_err(|e| Error::io("write", &staged.tmp, e))?;
        Ok(staged)
    }

    /// Its file, to be synced with others.
    pub fn to_sync(&self) -> ToSync<'_> {
        (&self.file, &self.tmp, "sync")
    }

    /// Makes its content durable.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| Error::io("sync", &self.tmp, e))
    }

    /// Renames it over `dest` and syncs `dest`'s directory. Its content must be durable first.
    pub fn place(mut self, dest: &Path) -> Result<()> {
        fs::rename(&self.tmp, dest).map_err(|e| Error::io("rename into place", dest, e))?;
        self.placed = true;
        match dest.parent() {
            Some(parent) => sync_dir(parent),
            None => Ok(()),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.placed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Removes a file if it exists; a missing file is not an error.
pub fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}

/// How to take an advisory lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Shared with other shared holders.
    Shared,
    /// Exclusive.
    Exclusive,
}

/// Takes an `flock` on `file`. With `wait == false`, returns `Ok(false)` when another holder
/// has it. A lock taken here ends only when every copy of the descriptor is closed (a child
/// forked by another thread holds one until it execs): what must end when the holder says so
/// is taken with [`HeldLock::take`].
pub fn flock(file: &File, mode: LockMode, wait: bool, path: &Path) -> Result<bool> {
    use rustix::fs::FlockOperation as Op;
    let op = match (mode, wait) {
        (LockMode::Shared, true) => Op::LockShared,
        (LockMode::Shared, false) => Op::NonBlockingLockShared,
        (LockMode::Exclusive, true) => Op::LockExclusive,
        (LockMode::Exclusive, false) => Op::NonBlockingLockExclusive,
    };
    loop {
        match rustix::fs::flock(file, op) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(false),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(Error::io("lock", path, e.into())),
        }
    }
}

/// A lock taken on an open lock file, released with `LOCK_UN` when dropped. Closing the file
/// is not enough: a child process forked by another thread of this process (between `fork`
/// and `exec`) holds a copy of the descriptor, and with it the lock, until it execs, so the
/// next attempt of this process would find its own lock still taken. `LOCK_UN` ends the lock
/// on the open file description whoever else holds a copy of it.
#[derive(Debug)]
pub struct HeldLock(File);

impl HeldLock {
    /// Takes `mode` on `file` (waiting for it with `wait`): `None` when, without waiting,
    /// another holder has it. The lock ends with `LOCK_UN` when the value is dropped.
    pub fn take(file: File, mode: LockMode, wait: bool, path: &Path) -> Result<Option<HeldLock>> {
        Ok(flock(&file, mode, wait, path)?.then_some(HeldLock(file)))
    }

    /// The open lock file.
    pub fn file(&self) -> &File {
        &self.0
    }

    /// The open lock file, to write what it records.
    pub fn file_mut(&mut self) -> &mut File {
        &mut self.0
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Opens the lock file at `path` (see [`open_lock_file`]) and takes it exclusively without
/// waiting: `None` when someone else holds it.
pub fn try_lock_exclusive(path: &Path) -> Result<Option<HeldLock>> {
    HeldLock::take(open_lock_file(path)?, LockMode::Exclusive, false, path)
}

/// Opens (creating owner-only if needed) a lock file without following a symlink.
pub fn open_lock_file(path: &Path) -> Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                // Something planted a symlink where the store keeps its lock (issue 28): it
                // is never followed, and it is not for ever an IO error with no advice.
                Error::corrupt(
                    "lock file",
                    path,
                    "a symlink stands where the store keeps a lock file, and it is never \
                     followed; remove the symlink (the lock file holds nothing: it is made \
                     again)",
                )
            } else {
                Error::io("open lock file", path, e)
            }
        })?;
    Ok(f)
}

/// Whether `a` and `b` name the same place: their canonical forms when both exist, else the
/// paths as given.
pub fn same_path(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Opens the directory `rel` (a relative path of plain components) beneath the open directory
/// `base` without following any symlink on the way: `openat2` with `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS` where the kernel has it, else one `O_NOFOLLOW` component at a time. A
/// symlinked component fails with `ELOOP` (or `ENOTDIR`), an escape with `EXDEV`; an empty,
/// `.` or `..` component with `EINVAL`.
pub fn open_dir_beneath(
    base: &impl rustix::fd::AsFd,
    rel: &[u8],
) -> std::io::Result<rustix::fd::OwnedFd> {
    open_beneath(base, rel, rustix::fs::OFlags::RDONLY)
}

/// [`open_dir_beneath`] with `O_PATH`: a descriptor that names the directory without opening
/// it for reading, cheaper to get and enough to `lstat` and open what it holds (`*at` calls)
/// but not to list it.
pub fn open_dir_path_beneath(
    base: &impl rustix::fd::AsFd,
    rel: &[u8],
) -> std::io::Result<rustix::fd::OwnedFd> {
    // `O_PATH` is Linux's; elsewhere the directory is opened for reading.
    #[cfg(target_os = "linux")]
    let access = rustix::fs::OFlags::PATH;
    #[cfg(not(target_os = "linux"))]
    let access = rustix::fs::OFlags::RDONLY;
    open_beneath(base, rel, access)
}

fn open_beneath(
    base: &impl rustix::fd::AsFd,
    rel: &[u8],
    access: rustix::fs::OFlags,
) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let flags = access | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if rel
        .split(|&b| b == b'/')
        .any(|c| c.is_empty() || c == b"." || c == b"..")
    {
        return Err(rustix::io::Errno::INVAL.into());
    }
    // `openat2` is Linux's (5.6 and later); elsewhere, and where it is refused, the walk below.
    #[cfg(target_os = "linux")]
    static NO_OPENAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    #[cfg(target_os = "linux")]
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        use rustix::fs::ResolveFlags;
        match rustix::fs::openat2(
            base,
            OsStr::from_bytes(rel),
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Ok(fd),
            Err(rustix::io::Errno::NOSYS) | Err(rustix::io::Errno::PERM) => {
                NO_OPENAT2.store(true, Ordering::Relaxed)
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut cur: Option<rustix::fd::OwnedFd> = None;
    for comp in rel.split(|&b| b == b'/') {
        let next = match &cur {
            Some(fd) => rustix::fs::openat(fd, OsStr::from_bytes(comp), flags, Mode::empty()),
            None => rustix::fs::openat(base, OsStr::from_bytes(comp), flags, Mode::empty()),
        }?;
        cur = Some(next);
    }
    cur.ok_or_else(|| rustix::io::Errno::INVAL.into())
}

/// A stat's device number as Linux types it (`u64`; macOS's `dev_t` is an `i32`).
#[allow(clippy::unnecessary_cast)] // a cast only where the field is narrower
pub fn stat_dev(st: &rustix::fs::Stat) -> u64 {
    st.st_dev as u64
}

/// A stat's full mode as Linux types it (`u32`; macOS's `mode_t` is a `u16`).
#[allow(clippy::unnecessary_cast)] // a cast only where the field is narrower
pub fn stat_mode(st: &rustix::fs::Stat) -> u32 {
    st.st_mode as u32
}

/// `mode` (Linux's `u32` mode bits) as rustix's [`Mode`](rustix::fs::Mode) on every system
/// (macOS's `mode_t` is a `u16`: the permission bits fit it).
#[allow(clippy::unnecessary_cast)] // a cast only where the type is narrower
pub fn mode_of(mode: u32) -> rustix::fs::Mode {
    rustix::fs::Mode::from_raw_mode(mode as rustix::fs::RawMode)
}

/// A writer that counts the bytes that went through it (`n`), for a format that records
/// where its parts begin, or how long a stream was.
pub struct CountingWriter<'a> {
    /// Where the bytes go.
    pub inner: &'a mut dyn Write,
    /// How many went.
    pub n: u64,
}

impl Write for CountingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
