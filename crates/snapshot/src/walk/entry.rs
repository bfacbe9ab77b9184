//! One entry of a directory: its ignore files, its excludes, what it is, and the read of a
//! file the stat cache does not vouch for.

use super::*;

/// What reading a file gave.
pub(super) enum FileRead {
    Stored(ObjectId, StatRecord),
    Skip(SkipReason),
    Vanished,
}

impl Walker<'_> {
    /// Whether this directory's `.cairnignore` and `.gitignore` are as the cache saw them
    /// (both absent, or both present with the same, non-racy `lstat`).
    pub(super) fn ignore_files_unchanged(
        &self,
        entries: &[(&CStr, rustix::fs::Stat)],
        cached: &DirRecord,
    ) -> bool {
        IGNORE_FILES.iter().map(|f| f.to_bytes()).all(|wanted| {
            let now = entries.iter().find(|(n, _)| n.to_bytes() == wanted);
            match (now, cached.get(wanted)) {
                (None, None) => true,
                (Some((_, st)), Some(c)) => {
                    c.kind == CachedKind::File && self.cache.trusts(&c.stat, &StatRecord::of(st))
                }
                _ => false,
            }
        })
    }

    pub(super) fn ignore_files(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        entries: &[(&CStr, rustix::fs::Stat)],
        chain: &Arc<IgnoreChain>,
    ) -> Result<Arc<IgnoreChain>> {
        let mut texts = Vec::new();
        for wanted in IGNORE_FILES.map(CStr::to_bytes) {
            let Some((name, st)) = entries.iter().find(|(n, _)| n.to_bytes() == wanted) else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
                || st.st_size as u64 > IGNORE_FILE_MAX
            {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd = dir
                .fd()
                .map_err(|e| Error::io("open directory", self.abs(rel), e))?;
            if let Ok(f) = rustix::fs::openat(fd, *name, flags, Mode::empty()) {
                let mut text = Vec::new();
                let mut file = std::fs::File::from(f);
                if (&mut file)
                    .take(IGNORE_FILE_MAX)
                    .read_to_end(&mut text)
                    .is_ok()
                {
                    texts.push(text);
                }
            }
        }
        if texts.is_empty() {
            return Ok(chain.clone());
        }
        Ok(IgnoreChain::child(chain, &self.abs(rel), &texts))
    }

    /// Whether a glob or an ignore file leaves out the entry at `rel_path` (the default
    /// excludes are checked by the caller).
    pub(super) fn excluded(
        &self,
        rel_path: &[u8],
        name: &[u8],
        is_dir: bool,
        chain: &IgnoreChain,
    ) -> Option<ExcludeReason> {
        if self.rules.excludes.glob_matches(rel_path, name) {
            return Some(ExcludeReason::Glob);
        }
        if self.rules.gitignore
            && !chain.is_empty()
            && chain.is_ignored(&self.abs(rel_path), is_dir)
        {
            return Some(ExcludeReason::Ignored);
        }
        None
    }

    /// Looks at the content of one entry the cache does not vouch for (or a directory, which
    /// is always walked): its record, or `None` when it is skipped or vanished.
    pub(super) fn entry(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        w: &Work<'_>,
        chain: &Arc<IgnoreChain>,
        decisions: bool,
        partial: bool,
    ) -> Result<Option<CachedEntry>> {
        self.check_stop()?;
        let name = w.name;
        let st = &w.st;
        let name_b = name.to_bytes();
        let path = join(rel, name_b);
        let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
        if ft == rustix::fs::FileType::Directory {
            let cached_tree = w
                .cached
                .filter(|c| c.kind == CachedKind::Dir)
                .map(|c| (TreeId::from(c.stat.blob), c.stat.size));
            let sub = Handle::new(dir.child(name_b));
            return match self.walk_dir(
                &sub,
                &path,
                chain,
                cached_tree,
                decisions,
                Some(StatRecord::of(st)),
                partial,
            ) {
                Ok(out) => Ok(Some(dir_record(name_b, stat_mode(st), out.id, out.size))),
                // Gone since it was listed.
                Err(e) if errno_of(&e) == Some(Errno::NOENT) => Ok(None),
                Err(e)
                    if matches!(
                        errno_of(&e),
                        Some(Errno::NOTDIR | Errno::LOOP | Errno::XDEV)
                    ) =>
                {
                    // Replaced by something else since the lstat.
                    self.skip(path, SkipReason::Changing, true);
                    Ok(None)
                }
                Err(e) if is_unreadable_error(&e) => {
                    self.skip(path, SkipReason::Unreadable, true);
                    Ok(None)
                }
                Err(e) => Err(e),
            };
        }
        let fd = match dir.fd() {
            Ok(fd) => fd,
            Err(e) => {
                return match Errno::from_io_error(&e) {
                    // The directory went, or was replaced, since it was listed.
                    Some(Errno::NOENT) => Ok(None),
                    Some(Errno::NOTDIR | Errno::LOOP | Errno::XDEV) => {
                        self.skip(path, SkipReason::Changing, false);
                        Ok(None)
                    }
                    Some(e) if is_unreadable(e) => {
                        self.skip(path, SkipReason::Unreadable, false);
                        Ok(None)
                    }
                    _ => Err(Error::io("open directory", self.abs(rel), e)),
                };
            }
        };
        match ft {
            rustix::fs::FileType::Symlink => {
                let target = match rustix::fs::readlinkat(fd, name, Vec::new()) {
                    Ok(t) => t.into_bytes(),
                    Err(Errno::NOENT) => return Ok(None),
                    Err(Errno::INVAL) => {
                        self.skip(path, SkipReason::Changing, false);
                        return Ok(None);
                    }
                    Err(e) if is_unreadable(e) => {
                        self.skip(path, SkipReason::Unreadable, false);
                        return Ok(None);
                    }
                    Err(e) => return Err(Error::io("read link", self.abs(&path), e.into())),
                };
                let id = self.put_small(&target)?;
                self.counters.symlinks.fetch_add(1, Ordering::Relaxed);
                Ok(Some(CachedEntry {
                    name: Name::from(name_b),
                    kind: CachedKind::Symlink,
                    stat: StatRecord {
                        size: target.len() as u64,
                        blob: id,
                        ..StatRecord::of(st)
                    },
                }))
            }
            _ => self.file(fd, path, name, st),
        }
    }

    pub(super) fn file(
        &self,
        fd: &OwnedFd,
        path: Vec<u8>,
        name: &CStr,
        st: &rustix::fs::Stat,
    ) -> Result<Option<CachedEntry>> {
        if self.rules.refuse_hard_links && st.st_nlink > 1 {
            self.skip(path, SkipReason::HardLink, false);
            return Ok(None);
        }
        if st.st_size as u64 > self.rules.max_file_bytes {
            self.skip(path, SkipReason::TooLarge, false);
            return Ok(None);
        }
        let (blob, record) = match self.read_file(fd, &path, name)? {
            FileRead::Stored(id, rec) => (id, rec),
            FileRead::Skip(reason) => {
                self.skip(path, reason, false);
                return Ok(None);
            }
            FileRead::Vanished => return Ok(None),
        };
        self.counters.files.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(record.size, Ordering::Relaxed);
        Ok(Some(CachedEntry {
            name: Name::from(name.to_bytes()),
            kind: CachedKind::File,
            stat: StatRecord { blob, ..record },
        }))
    }

    /// Reads a file whole, again while it changes under us, up to [`MAX_READS`] times: the
    /// descriptor's stat before and after the read must agree (and the length read must be the
    /// size), so what is recorded is one whole version of the file, never a torn mix.
    pub(super) fn read_file(&self, fd: &OwnedFd, path: &[u8], name: &CStr) -> Result<FileRead> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        for _ in 0..MAX_READS {
            self.check_stop()?;
            let f = match rustix::fs::openat(fd, name, flags, Mode::empty()) {
                Ok(f) => f,
                Err(Errno::NOENT) => return Ok(FileRead::Vanished),
                Err(Errno::LOOP) | Err(Errno::NXIO) => {
                    return Ok(FileRead::Skip(SkipReason::Changing))
                }
                Err(e) if is_unreadable(e) => return Ok(FileRead::Skip(SkipReason::Unreadable)),
                Err(e) => return Err(Error::io("open", self.abs(path), e.into())),
            };
            let before = match rustix::fs::fstat(&f) {
                Ok(st) => st,
                Err(e) => return Err(Error::io("stat", self.abs(path), e.into())),
            };
            if rustix::fs::FileType::from_raw_mode(before.st_mode)
                != rustix::fs::FileType::RegularFile
            {
                return Ok(FileRead::Skip(SkipReason::Changing));
            }
            let rec_before = StatRecord::of(&before);
            if rec_before.size > self.rules.max_file_bytes {
                return Ok(FileRead::Skip(SkipReason::TooLarge));
            }
            let mut file = std::fs::File::from(f);
            let (id, n) = match self.put_file(&mut file, rec_before.size, path) {
                Ok(v) => v,
                Err(e) if is_unreadable_error(&e) => {
                    return Ok(FileRead::Skip(SkipReason::Unreadable))
                }
                Err(e) => return Err(e),
            };
            self.counters.hashed.fetch_add(1, Ordering::Relaxed);
            self.counters.hashed_bytes.fetch_add(n, Ordering::Relaxed);
            if let Some(hook) = READ_HOOK.get() {
                hook(&self.abs(path));
            }
            let after = rustix::fs::fstat(file.as_fd())
                .map_err(|e| Error::io("stat", self.abs(path), e.into()))?;
            let rec_after = StatRecord::of(&after);
            if rec_after.matches(&rec_before) && n == rec_before.size {
                return Ok(FileRead::Stored(id, rec_before));
            }
        }
        Ok(FileRead::Skip(SkipReason::Changing))
    }
}
