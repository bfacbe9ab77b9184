//! The recording file system: a FUSE passthrough over a backing directory (the `fuser` crate
//! on `/dev/fuse`, mounted by this process as root) that applies every request to the backing
//! directory and appends each operation that changes something, or makes something durable, to
//! a log, in the order it served them (one thread serves every request, so the log is an order
//! the kernel saw). Objects are named by inode numbers of its own that are never reused, so the
//! log can be replayed onto a model (see `model.rs`).

use crate::model::{Kind, Model, Op};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

/// What the file system knows, shared between the thread serving requests and the test.
pub struct State {
    backing: PathBuf,
    /// Every name of each live object: `(parent, name)`.
    links: HashMap<u64, Vec<(u64, OsString)>>,
    /// The backing directory's inode number of each live object, to our own number.
    by_backing: HashMap<u64, u64>,
    next_ino: u64,
    files: HashMap<u64, (u64, File)>,
    next_fh: u64,
    /// The operations served since the mount.
    pub log: Vec<Op>,
}

/// Locks the shared state (a panic while serving a request leaves it usable for reporting).
pub fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    /// The state of `backing`, every object in it numbered, and the model of what it holds (all
    /// of it taken as durable: the workload starts from there).
    pub fn scan(backing: &Path) -> (State, Model) {
        let mut s = State {
            backing: backing.to_path_buf(),
            links: HashMap::new(),
            by_backing: HashMap::new(),
            next_ino: ROOT + 1,
            files: HashMap::new(),
            next_fh: 1,
            log: Vec::new(),
        };
        let root_meta = std::fs::symlink_metadata(backing).expect("the backing directory");
        s.by_backing.insert(root_meta.ino(), ROOT);
        let mut model = Model::new(root_meta.mode() & 0o7777);
        let mut todo = vec![ROOT];
        while let Some(dir) = todo.pop() {
            let path = s.path(dir).expect("a scanned directory has a path");
            let mut entries: Vec<_> = std::fs::read_dir(&path)
                .expect("list the backing directory")
                .map(|e| e.expect("an entry"))
                .collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let name = e.file_name();
                let meta = std::fs::symlink_metadata(e.path()).expect("lstat");
                let known = s.by_backing.contains_key(&meta.ino());
                let ino = s.ino_for(dir, &name, &meta);
                if known {
                    model.link(ino, dir, &name);
                    continue;
                }
                let kind = kind_of(&e.path(), &meta);
                let data = if meta.is_file() {
                    std::fs::read(e.path()).expect("read a backing file")
                } else {
                    Vec::new()
                };
                model.create(dir, &name, ino, &kind, meta.mode() & 0o7777);
                model.write(ino, 0, &data);
                if meta.is_dir() {
                    todo.push(ino);
                }
            }
        }
        (s, model)
    }

    fn path(&self, ino: u64) -> Option<PathBuf> {
        if ino == ROOT {
            return Some(self.backing.clone());
        }
        let (parent, name) = self.links.get(&ino)?.first()?;
        Some(self.path(*parent)?.join(name))
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent).ok_or(Errno::ENOENT)?.join(name))
    }

    /// Our number for the object `meta` describes, known as `name` in `parent`.
    fn ino_for(&mut self, parent: u64, name: &OsStr, meta: &Metadata) -> u64 {
        if let Some(&ino) = self.by_backing.get(&meta.ino()) {
            let links = self.links.entry(ino).or_default();
            if ino != ROOT && !links.iter().any(|(p, n)| *p == parent && n == name) {
                links.push((parent, name.to_os_string()));
            }
            return ino;
        }
        self.fresh(parent, name, meta)
    }

    /// A new number for an object just made (its backing inode number may be a reused one).
    fn fresh(&mut self, parent: u64, name: &OsStr, meta: &Metadata) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.by_backing.insert(meta.ino(), ino);
        self.links.insert(ino, vec![(parent, name.to_os_string())]);
        ino
    }

    fn unlinked(&mut self, ino: u64, parent: u64, name: &OsStr) {
        let gone = match self.links.get_mut(&ino) {
            Some(links) => {
                links.retain(|(p, n)| !(*p == parent && n == name));
                links.is_empty()
            }
            None => false,
        };
        if gone {
            self.links.remove(&ino);
            self.by_backing.retain(|_, v| *v != ino);
        }
    }

    fn lookup_child(&mut self, parent: u64, name: &OsStr) -> Result<(u64, Metadata), Errno> {
        let path = self.child(parent, name)?;
        let meta = std::fs::symlink_metadata(&path)?;
        let ino = self.ino_for(parent, name, &meta);
        Ok((ino, meta))
    }

    fn made(&mut self, parent: u64, name: &OsStr, kind: Kind) -> Result<(u64, Metadata), Errno> {
        let meta = std::fs::symlink_metadata(self.child(parent, name)?)?;
        let ino = self.fresh(parent, name, &meta);
        self.log.push(Op::Create {
            parent,
            name: name.to_os_string(),
            ino,
            kind,
            mode: meta.mode() & 0o7777,
        });
        Ok((ino, meta))
    }

    fn meta(&self, ino: u64, fh: Option<FileHandle>) -> Result<Metadata, Errno> {
        if let Some((_, f)) = fh.and_then(|fh| self.files.get(&fh.0)) {
            return Ok(f.metadata()?);
        }
        if let Some((_, f)) = self.files.values().find(|(i, _)| *i == ino) {
            return Ok(f.metadata()?);
        }
        Ok(std::fs::symlink_metadata(
            self.path(ino).ok_or(Errno::ENOENT)?,
        )?)
    }

    fn open_file(&mut self, ino: u64, file: File) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.files.insert(fh, (ino, file));
        fh
    }
}

fn kind_of(path: &Path, meta: &Metadata) -> Kind {
    let ft = meta.file_type();
    if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Symlink(std::fs::read_link(path).expect("readlink").into_os_string())
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

fn attr(ino: u64, m: &Metadata) -> FileAttr {
    use std::os::unix::fs::FileTypeExt;
    let ft = m.file_type();
    let kind = if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else if ft.is_fifo() {
        FileType::NamedPipe
    } else if ft.is_socket() {
        FileType::Socket
    } else if ft.is_char_device() {
        FileType::CharDevice
    } else if ft.is_block_device() {
        FileType::BlockDevice
    } else {
        FileType::RegularFile
    };
    let t = |s: i64, ns: i64| {
        std::time::UNIX_EPOCH + Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32)
    };
    FileAttr {
        ino: INodeNo(ino),
        size: m.size(),
        blocks: m.blocks(),
        atime: t(m.atime(), m.atime_nsec()),
        mtime: t(m.mtime(), m.mtime_nsec()),
        ctime: t(m.ctime(), m.ctime_nsec()),
        crtime: std::time::UNIX_EPOCH,
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: 4096,
        flags: 0,
    }
}

/// Answers a request that made or found an object.
fn entry(reply: ReplyEntry, r: Result<(u64, Metadata), Errno>) {
    match r {
        Ok((ino, m)) => reply.entry(&TTL, &attr(ino, &m), Generation(0)),
        Err(e) => reply.error(e),
    }
}

/// Answers a request that returns nothing.
fn empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// The file system served to the kernel.
pub struct Recorder(pub Arc<Mutex<State>>);

/// Flags of the kernel's open that the backing file must not get: creation and truncation
/// came as requests of their own, appends come with their offset, and the page cache is ours.
fn backing_flags(flags: i32) -> (bool, bool, i32) {
    let acc = flags & libc_accmode();
    let read = acc != rustix::fs::OFlags::WRONLY.bits() as i32;
    let write = acc != rustix::fs::OFlags::RDONLY.bits() as i32;
    (read, write, 0)
}

fn libc_accmode() -> i32 {
    rustix::fs::OFlags::ACCMODE.bits() as i32
}

fn timespec(t: Option<TimeOrNow>) -> rustix::fs::Timespec {
    match t {
        None => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(st)) => {
            let d = st
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or(Duration::ZERO);
            rustix::fs::Timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: i64::from(d.subsec_nanos()),
            }
        }
    }
}

impl Filesystem for Recorder {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut s = lock(&self.0);
        match s.lookup_child(parent.0, name) {
            Ok((ino, m)) => reply.entry(&TTL, &attr(ino, &m), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = lock(&self.0);
        match s.meta(ino.0, fh) {
            Ok(m) => reply.attr(&TTL, &attr(ino.0, &m)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = lock(&self.0);
        let ino = ino.0;
        let r = (|| -> Result<Metadata, Errno> {
            let path = s.path(ino);
            if let Some(size) = size {
                let file = fh.and_then(|fh| s.files.get(&fh.0)).map(|(_, f)| f);
                match file {
                    Some(f) => f.set_len(size)?,
                    None => std::fs::OpenOptions::new()
                        .write(true)
                        .open(path.as_ref().ok_or(Errno::ENOENT)?)?
                        .set_len(size)?,
                }
                s.log.push(Op::Truncate { ino, size });
            }
            if let Some(mode) = mode {
                let p = path.as_ref().ok_or(Errno::ENOENT)?;
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode & 0o7777))?;
                s.log.push(Op::Chmod {
                    ino,
                    mode: mode & 0o7777,
                });
            }
            if uid.is_some() || gid.is_some() {
                let p = path.as_ref().ok_or(Errno::ENOENT)?;
                std::os::unix::fs::lchown(p, uid, gid)?;
            }
            if atime.is_some() || mtime.is_some() {
                let p = path.as_ref().ok_or(Errno::ENOENT)?;
                let times = rustix::fs::Timestamps {
                    last_access: timespec(atime),
                    last_modification: timespec(mtime),
                };
                rustix::fs::utimensat(
                    rustix::fs::CWD,
                    p,
                    &times,
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| Errno::from_i32(e.raw_os_error()))?;
            }
            s.meta(ino, fh)
        })();
        match r {
            Ok(m) => reply.attr(&TTL, &attr(ino, &m)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let s = lock(&self.0);
        match s.path(ino.0).map(std::fs::read_link) {
            Some(Ok(t)) => {
                use std::os::unix::ffi::OsStrExt;
                reply.data(t.as_os_str().as_bytes())
            }
            Some(Err(e)) => reply.error(e.into()),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let mut s = lock(&self.0);
        let r = (|| {
            let path = s.child(parent.0, name)?;
            let ft = rustix::fs::FileType::from_raw_mode(mode);
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &path,
                ft,
                rustix::fs::Mode::from_raw_mode(mode & !umask & 0o7777),
                u64::from(rdev),
            )
            .map_err(|e| Errno::from_i32(e.raw_os_error()))?;
            let kind = if ft == rustix::fs::FileType::RegularFile {
                Kind::File
            } else {
                Kind::Other
            };
            s.made(parent.0, name, kind)
        })();
        entry(reply, r);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut s = lock(&self.0);
        let r = (|| {
            let path = s.child(parent.0, name)?;
            std::fs::create_dir(&path)?;
            std::fs::set_permissions(
                &path,
                std::fs::Permissions::from_mode(mode & !umask & 0o7777),
            )?;
            s.made(parent.0, name, Kind::Dir)
        })();
        entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent.0, name, false, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent.0, name, true, reply);
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut s = lock(&self.0);
        let r = (|| {
            let path = s.child(parent.0, link_name)?;
            std::os::unix::fs::symlink(target, &path)?;
            s.made(
                parent.0,
                link_name,
                Kind::Symlink(target.as_os_str().to_os_string()),
            )
        })();
        entry(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut s = lock(&self.0);
        let r = (|| {
            let from = s.child(parent.0, name)?;
            let to = s.child(newparent.0, newname)?;
            let (ino, _) = s.lookup_child(parent.0, name)?;
            let target = s.lookup_child(newparent.0, newname).ok().map(|(i, _)| i);
            let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &from,
                rustix::fs::CWD,
                &to,
                rustix::fs::RenameFlags::from_bits_retain(flags.bits()),
            )
            .map_err(|e| Errno::from_i32(e.raw_os_error()))?;
            // The new name first: an object never has no name in between (which would forget
            // its number, and the log would name it by a new one).
            let (from_link, to_link) = (
                (parent.0, name.to_os_string()),
                (newparent.0, newname.to_os_string()),
            );
            if target != Some(ino) {
                let links = s.links.entry(ino).or_default();
                links.push(to_link.clone());
                links.retain(|l| *l != from_link);
                match target {
                    Some(t) if exchange => {
                        let links = s.links.entry(t).or_default();
                        links.push(from_link);
                        links.retain(|l| *l != to_link);
                    }
                    Some(t) => s.unlinked(t, newparent.0, newname),
                    None => {}
                }
            }
            s.log.push(Op::Rename {
                parent: parent.0,
                name: name.to_os_string(),
                newparent: newparent.0,
                newname: newname.to_os_string(),
                ino,
                exchange: if exchange { target } else { None },
            });
            Ok::<(), Errno>(())
        })();
        empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut s = lock(&self.0);
        let r = (|| {
            let from = s.path(ino.0).ok_or(Errno::ENOENT)?;
            let to = s.child(newparent.0, newname)?;
            std::fs::hard_link(&from, &to)?;
            s.links
                .entry(ino.0)
                .or_default()
                .push((newparent.0, newname.to_os_string()));
            s.log.push(Op::Link {
                ino: ino.0,
                parent: newparent.0,
                name: newname.to_os_string(),
            });
            Ok::<_, Errno>(std::fs::symlink_metadata(&to)?)
        })();
        match r {
            Ok(m) => reply.entry(&TTL, &attr(ino.0, &m), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = lock(&self.0);
        let r = (|| {
            let path = s.path(ino.0).ok_or(Errno::ENOENT)?;
            let (read, write, custom) = backing_flags(flags.0);
            let f = std::fs::OpenOptions::new()
                .read(read)
                .write(write)
                .custom_flags(custom)
                .open(&path)?;
            Ok::<_, Errno>(s.open_file(ino.0, f))
        })();
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let s = lock(&self.0);
        let Some((_, f)) = s.files.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            match f.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return reply.error(e.into()),
            }
        }
        reply.data(&buf[..got]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = lock(&self.0);
        let Some((ino, f)) = s.files.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let ino = *ino;
        match f.write_all_at(data, offset) {
            Ok(()) => {
                s.log.push(Op::Write {
                    ino,
                    offset,
                    data: data.to_vec(),
                });
                reply.written(data.len() as u32)
            }
            Err(e) => reply.error(e.into()),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.0).files.remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.0).log.push(Op::Fsync { ino: ino.0 });
        reply.ok();
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut s = lock(&self.0);
        let Some(path) = s.path(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let mut names: Vec<OsString> = match std::fs::read_dir(&path) {
            Ok(rd) => rd.flatten().map(|e| e.file_name()).collect(),
            Err(e) => return reply.error(e.into()),
        };
        names.sort();
        let mut all = vec![
            (ino.0, FileType::Directory, OsString::from(".")),
            (ino.0, FileType::Directory, OsString::from("..")),
        ];
        for n in names {
            if let Ok((child, m)) = s.lookup_child(ino.0, &n) {
                all.push((child, attr(child, &m).kind, n));
            }
        }
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.0).log.push(Op::FsyncDir { ino: ino.0 });
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = lock(&self.0);
        match rustix::fs::statvfs(&s.backing) {
            Ok(v) => reply.statfs(
                v.f_blocks,
                v.f_bfree,
                v.f_bavail,
                v.f_files,
                v.f_ffree,
                v.f_bsize as u32,
                255,
                v.f_frsize as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = lock(&self.0);
        let r = (|| {
            let path = s.child(parent.0, name)?;
            let (read, write, custom) = backing_flags(flags);
            let f = std::fs::OpenOptions::new()
                .read(read)
                .write(write)
                .create_new(true)
                .custom_flags(custom)
                .mode(mode & !umask & 0o7777)
                .open(&path)?;
            let (ino, m) = s.made(parent.0, name, Kind::File)?;
            Ok::<_, Errno>((ino, m, s.open_file(ino, f)))
        })();
        match r {
            Ok((ino, m, fh)) => reply.created(
                &TTL,
                &attr(ino, &m),
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }
}

impl Recorder {
    fn remove(&self, parent: u64, name: &OsStr, dir: bool, reply: ReplyEmpty) {
        let mut s = lock(&self.0);
        let r = (|| {
            let (ino, _) = s.lookup_child(parent, name)?;
            let path = s.child(parent, name)?;
            if dir {
                std::fs::remove_dir(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
            s.unlinked(ino, parent, name);
            s.log.push(Op::Unlink {
                parent,
                name: name.to_os_string(),
                ino,
            });
            Ok::<(), Errno>(())
        })();
        empty(reply, r);
    }
}

/// A recording file system mounted at a directory, unmounted (and its serving thread joined)
/// when dropped.
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
    /// The shared state: its `log` is the record.
    pub state: Arc<Mutex<State>>,
    /// Where it is mounted.
    pub at: PathBuf,
}

impl Mounted {
    /// Mounts a recorder of `backing` at `at`; returns the mount and the model of `backing`
    /// as it was. `Err` says why it cannot be mounted here.
    pub fn mount(backing: &Path, at: &Path) -> Result<(Mounted, Model), String> {
        let (state, model) = State::scan(backing);
        let state = Arc::new(Mutex::new(state));
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("cairn-powercut".into()),
            fuser::MountOption::DefaultPermissions,
        ];
        let session = fuser::spawn_mount(Recorder(Arc::clone(&state)), at, &config)
            .map_err(|e| format!("mounting a FUSE file system at {}: {e}", at.display()))?;
        Ok((
            Mounted {
                session: Some(session),
                state,
                at: at.to_path_buf(),
            },
            model,
        ))
    }

    /// Appends a mark (what the workload was told) to the record.
    pub fn mark(&self, op: Op) {
        lock(&self.state).log.push(op);
    }

    /// Unmounts and returns the record.
    pub fn finish(mut self) -> Vec<Op> {
        self.unmount();
        std::mem::take(&mut lock(&self.state).log)
    }

    fn unmount(&mut self) {
        if let Some(s) = self.session.take() {
            if s.umount_and_join().is_err() {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(&self.at)
                    .status();
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}
