//! A directory as the walk holds it: its descriptor (opened once, or pinned, or reached
//! beneath an open ancestor) and its listing.

use super::*;

/// The names of one directory, in one buffer, each followed by its NUL.
#[derive(Default)]
pub(super) struct Listing {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Listing {
    /// How many names it holds.
    pub(super) fn count(&self) -> usize {
        self.ends.len()
    }

    /// Adds a name read from the directory, unless it is `.` or `..`.
    fn push(&mut self, name: &CStr) {
        let name = name.to_bytes_with_nul();
        if name != b".\0" && name != b"..\0" {
            self.buf.extend_from_slice(name);
            self.ends.push(self.buf.len());
        }
    }

    pub(super) fn name(&self, i: usize) -> &CStr {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        CStr::from_bytes_with_nul(&self.buf[start..self.ends[i]])
            .expect("each name was stored with one NUL at its end")
    }
}

impl Listing {
    /// The names the cache recorded for a directory (all of them, excluded ones included).
    pub(super) fn of_record(record: &DirRecord) -> Listing {
        let mut out = Listing {
            buf: Vec::new(),
            ends: Vec::with_capacity(record.entries.len()),
        };
        for e in &record.entries {
            out.buf.extend_from_slice(&e.name);
            out.buf.push(0);
            out.ends.push(out.buf.len());
        }
        out
    }
}

/// Where a directory is: open, or beneath an open ancestor by a relative path. A directory
/// whose listing the stat cache vouches for is not opened for reading unless something in it
/// must be read: it is named by an `O_PATH` descriptor (see [`Handle::pin`]), or failing that
/// its entries are `lstat`ed by path from the ancestor. Only `lstat`s go by path (an entry is
/// trusted only if device, inode, size and times all match its record, so a symlink swapped in
/// on the way can only make a file look changed); every read goes through a descriptor opened
/// beneath the ancestor without following a symlink.
pub(crate) enum DirAt<'b> {
    Open(OwnedFd),
    Beneath { base: &'b OwnedFd, path: Vec<u8> },
}

pub(crate) struct Handle<'b> {
    at: DirAt<'b>,
    opened: std::sync::OnceLock<OwnedFd>,
}

impl<'b> Handle<'b> {
    pub(crate) fn new(at: DirAt<'b>) -> Self {
        Handle {
            at,
            opened: std::sync::OnceLock::new(),
        }
    }

    /// The directory, opened (once) if it was not: a base for `*at` calls. Once [`pin`]ned it
    /// is an `O_PATH` descriptor, which cannot be listed; only an untrusted directory is
    /// listed, and it is listed before anything could pin it.
    ///
    /// [`pin`]: Handle::pin
    pub(super) fn fd(&self) -> std::io::Result<&OwnedFd> {
        match &self.at {
            DirAt::Open(fd) => Ok(fd),
            DirAt::Beneath { base, path } => {
                if let Some(fd) = self.opened.get() {
                    return Ok(fd);
                }
                let fd = cairn_store::fsutil::open_dir_beneath(*base, path)?;
                Ok(self.opened.get_or_init(|| fd))
            }
        }
    }

    /// Names the directory by an `O_PATH` descriptor when it is only reached by a path from an
    /// ancestor, so that each `lstat` of its entries resolves one name instead of the whole path
    /// again (the kernel's lookup of every component was the larger part of a walk in which
    /// nothing changed). Children are then reached from it too. Best effort: when it cannot be
    /// opened (gone, replaced), the entries are still `lstat`ed by path and fail as they would.
    pub(super) fn pin(&self) {
        if let (DirAt::Beneath { base, path }, None) = (&self.at, self.opened.get()) {
            if let Ok(fd) = cairn_store::fsutil::open_dir_path_beneath(*base, path) {
                let _ = self.opened.set(fd);
            }
        }
    }

    /// `lstat` of the entry `name`.
    pub(super) fn stat(&self, name: &CStr) -> std::result::Result<rustix::fs::Stat, Errno> {
        match (&self.at, self.opened.get()) {
            (DirAt::Open(fd), _) | (_, Some(fd)) => {
                rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
            }
            (DirAt::Beneath { base, path }, None) => {
                let mut p = Vec::with_capacity(path.len() + 1 + name.to_bytes().len());
                p.extend_from_slice(path);
                p.push(b'/');
                p.extend_from_slice(name.to_bytes());
                rustix::fs::statat(*base, OsStr::from_bytes(&p), AtFlags::SYMLINK_NOFOLLOW)
            }
        }
    }

    /// Where the subdirectory `name` is (not opened).
    pub(super) fn child(&self, name: &[u8]) -> DirAt<'_> {
        match (&self.at, self.opened.get()) {
            (DirAt::Open(fd), _) | (_, Some(fd)) => DirAt::Beneath {
                base: fd,
                path: name.to_vec(),
            },
            (DirAt::Beneath { base, path }, None) => DirAt::Beneath {
                base,
                path: join(path, name),
            },
        }
    }
}

/// The `errno` behind an error, if it is one of reading the input.
pub(super) fn errno_of(e: &Error) -> Option<Errno> {
    let source = match e {
        Error::Io { source, .. } => source,
        Error::Store(cairn_store::Error::Io {
            action: "read",
            source,
            ..
        }) => source,
        _ => return None,
    };
    source.raw_os_error().map(Errno::from_raw_os_error)
}

#[cfg(target_os = "linux")]
thread_local! {
    static DIRENT_BUF: std::cell::RefCell<Vec<MaybeUninit<u8>>> =
        std::cell::RefCell::new(vec![MaybeUninit::uninit(); 64 << 10]);
}

/// Lists the directory open at `fd` without `.` and `..` (with `getdents64` on the descriptor
/// itself: no second descriptor is opened).
#[cfg(target_os = "linux")]
pub(super) fn list(fd: &OwnedFd) -> std::io::Result<Listing> {
    DIRENT_BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        let mut out = Listing::default();
        let mut dir = rustix::fs::RawDir::new(fd.as_fd(), &mut buf[..]);
        while let Some(entry) = dir.next() {
            out.push(entry?.file_name());
        }
        Ok(out)
    })
}

/// Lists the directory open at `fd` without `.` and `..`: `getdents64` is Linux's, so
/// elsewhere `readdir` on a descriptor of its own (`rustix::fs::Dir`).
#[cfg(not(target_os = "linux"))]
pub(super) fn list(fd: &OwnedFd) -> std::io::Result<Listing> {
    let mut out = Listing::default();
    let mut dir = rustix::fs::Dir::read_from(fd)?;
    while let Some(entry) = dir.read() {
        out.push(entry?.file_name());
    }
    Ok(out)
}
