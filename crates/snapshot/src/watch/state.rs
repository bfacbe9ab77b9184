//! The watcher's state: its inotify watches, the marks of what changed in each directory,
//! the tokens issued, and the answer to "what changed since this token".

use super::*;

pub(super) struct State {
    pub(super) fd: OwnedFd,
    /// Written each time events are read (see [`Watcher::events_fd`]).
    pub(super) read_events: Option<Arc<OwnedFd>>,
    pub(super) root: PathBuf,
    /// (device, inode) of the root: a root replaced is a root gone.
    pub(super) root_id: (u64, u64),
    pub(super) skip: Vec<(u64, u64)>,
    pub(super) max_watches: Option<usize>,
    pub(super) racy_window: Duration,
    /// Watch descriptor to directory path (relative to the root).
    pub(super) wds: HashMap<i32, Vec<u8>>,
    /// The other paths of a watched directory reachable by more than one (a bind mount of a
    /// directory of the tree elsewhere in it), by watch descriptor.
    pub(super) aliases: HashMap<i32, Vec<Vec<u8>>>,
    /// Directory path to watch descriptor.
    pub(super) paths: BTreeMap<Vec<u8>, i32>,
    /// The last token issued.
    pub(super) seq: u64,
    /// Tokens below this are refused (a full walk), with the reason.
    pub(super) floor: u64,
    pub(super) floor_reason: String,
    /// Directories whose entries changed, by path.
    pub(super) changed: HashMap<Vec<u8>, DirMarks>,
    /// Subtrees made or moved in, walked whole by queries before their mark.
    pub(super) fresh: BTreeMap<Vec<u8>, Mark>,
    /// Subtrees not watched, and why.
    pub(super) unwatched: BTreeMap<Vec<u8>, String>,
    /// The mounts beneath the root, `None` when [`MOUNTINFO`] could not be opened.
    pub(super) mounts: Option<Mounts>,
    /// Subtrees walked by every snapshot because of mounts, and why: the directories holding
    /// a file bind mount, or the whole tree when the mount table cannot be read.
    pub(super) mount_walked: BTreeMap<Vec<u8>, String>,
    pub(super) token_times: BTreeMap<u64, Instant>,
    pub(super) overflowed: bool,
    pub(super) overflows: u64,
    /// How many times the inotify instance was replaced (after overflows).
    pub(super) generation: u64,
    pub(super) gone: bool,
    pub(super) queries: u64,
    /// When the last event was read (an overflow included).
    pub(super) last_event: Option<Instant>,
}

impl State {
    pub(super) fn mark(&self) -> Mark {
        Mark {
            seq: self.seq + 1,
            at: Instant::now(),
        }
    }

    pub(super) fn status(&self) -> WatchStatus {
        let path_bytes: usize = self.paths.keys().map(|p| p.len() * 2 + 64).sum();
        let marks: usize = self
            .changed
            .iter()
            .map(|(p, d)| p.len() + 96 + d.names.keys().map(|n| n.len() + 56).sum::<usize>())
            .sum::<usize>()
            + self.fresh.keys().map(|p| p.len() + 48).sum::<usize>()
            + (self.aliases.values().flatten())
                .map(|p| p.len() * 2 + 64)
                .sum::<usize>();
        WatchStatus {
            root: self.root.to_string_lossy().into_owned(),
            watches: self.wds.len() as u64,
            unwatched: self
                .walked_always()
                .map(|(p, why)| format!("{}: {why}", String::from_utf8_lossy(p)))
                .collect(),
            changed: self.changed.len() as u64,
            overflows: self.overflows,
            queries: self.queries,
            gone: self.gone,
            table_bytes: (path_bytes + marks) as u64,
        }
    }

    /// Puts a watch on the directory at `rel` (open at `fd`, or opened beneath the root) and on
    /// every directory beneath it that has none, marking what it could not watch.
    pub(super) fn watch_tree(&mut self, rel: &[u8], fd: Option<OwnedFd>) {
        let mut stack: Vec<(Vec<u8>, Option<OwnedFd>)> = vec![(rel.to_vec(), fd)];
        while let Some((rel, fd)) = stack.pop() {
            if self.paths.contains_key(&rel) {
                continue;
            }
            let fd = match fd {
                Some(fd) => fd,
                None => match open_beneath_root(&self.root, &rel) {
                    Ok(fd) => fd,
                    // Gone, or not a directory any more: its parent's events say so.
                    Err(_) => continue,
                },
            };
            let Ok(st) = rustix::fs::fstat(&fd) else {
                continue;
            };
            if !rel.is_empty() && self.skip.contains(&dev_ino(&st)) {
                continue;
            }
            if self.max_watches.is_some_and(|max| self.wds.len() >= max) {
                self.unwatched
                    .insert(rel, "the watch limit (WatchOptions::max_watches)".into());
                continue;
            }
            if !rel.is_empty() && st.st_dev != self.root_id.0 {
                if let Some(name) = unwatchable(&fd) {
                    self.unwatched.insert(
                        rel,
                        format!("a {name} file system, which inotify cannot watch"),
                    );
                    continue;
                }
            }
            let proc_path = format!("/proc/self/fd/{}", fd_value(&fd));
            let wd = match inotify::add_watch(&self.fd, proc_path.as_str(), WATCH_FLAGS) {
                Ok(wd) => wd,
                Err(Errno::NOSPC) => {
                    self.unwatched.insert(
                        rel,
                        "the kernel's watch limit (fs.inotify.max_user_watches)".into(),
                    );
                    continue;
                }
                Err(Errno::NOENT) | Err(Errno::NOTDIR) => continue,
                Err(e) => {
                    self.unwatched
                        .insert(rel, format!("inotify_add_watch failed: {e}"));
                    continue;
                }
            };
            // Two paths for one inode (a bind mount inside the tree): one watch, its events
            // reported under both.
            match self.wds.get(&wd) {
                Some(p) if *p != rel => self.aliases.entry(wd).or_default().push(rel.clone()),
                Some(_) => {}
                None => {
                    self.wds.insert(wd, rel.clone());
                }
            }
            self.paths.insert(rel.clone(), wd);
            // Listed after the watch is in place: a directory made after the listing has an
            // event, one made before is listed.
            let mut subdirs = Vec::new();
            EVENT_BUF.with(|cell| {
                let mut buf = cell.borrow_mut();
                let mut dir = RawDir::new(fd.as_fd(), &mut buf[..]);
                while let Some(Ok(entry)) = dir.next() {
                    let name = entry.file_name().to_bytes();
                    if name == b"." || name == b".." || crate::Excludes::is_default(name) {
                        continue;
                    }
                    let is_dir = match entry.file_type() {
                        rustix::fs::FileType::Directory => true,
                        rustix::fs::FileType::Unknown => rustix::fs::statat(
                            &fd,
                            entry.file_name(),
                            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                        )
                        .is_ok_and(|st| {
                            rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::Directory
                        }),
                        _ => false,
                    };
                    if is_dir {
                        subdirs.push(name.to_vec());
                    }
                }
            });
            for name in subdirs {
                let child = join(&rel, &name);
                let cfd = cairn_store::fsutil::open_dir_beneath(&fd, &name).ok();
                if cfd.is_some() {
                    stack.push((child, cfd));
                }
            }
        }
    }

    /// Forgets the watches of `rel` and every directory beneath it (moved out or deleted).
    pub(super) fn unwatch_tree(&mut self, rel: &[u8]) {
        let mut gone: Vec<Vec<u8>> = Vec::new();
        if self.paths.contains_key(rel) {
            gone.push(rel.to_vec());
        }
        let mut lo = rel.to_vec();
        lo.push(b'/');
        let mut hi = rel.to_vec();
        hi.push(b'/' + 1);
        gone.extend(
            self.paths
                .range(lo.clone()..hi.clone())
                .map(|(p, _)| p.clone()),
        );
        for p in gone {
            if let Some(wd) = self.paths.remove(&p) {
                self.unwatch_path(&p, wd);
            }
        }
        let under: Vec<Vec<u8>> = self
            .unwatched
            .keys()
            .filter(|p| is_under(p, rel))
            .cloned()
            .collect();
        for p in under {
            self.unwatched.remove(&p);
        }
    }

    /// Forgets that the directory watched by `wd` is reached at `path`; its watch is removed
    /// once no path is left to it.
    pub(super) fn unwatch_path(&mut self, path: &[u8], wd: i32) {
        if let Some(others) = self.aliases.get_mut(&wd) {
            if let Some(i) = others.iter().position(|p| p == path) {
                others.swap_remove(i);
            } else if self.wds.get(&wd).is_some_and(|p| p == path) {
                let next = others.pop().expect("aliases are never left empty");
                self.wds.insert(wd, next);
            }
            if others.is_empty() {
                self.aliases.remove(&wd);
            }
        } else if self.wds.get(&wd).is_some_and(|p| p == path) {
            self.wds.remove(&wd);
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Every path the directory watched by `wd` is watched at (none for a watch forgotten).
    pub(super) fn paths_of(&self, wd: i32) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self.wds.get(&wd).cloned().into_iter().collect();
        if let Some(others) = self.aliases.get(&wd) {
            out.extend(others.iter().cloned());
        }
        out
    }

    /// Sees whether the mount table changed (a `poll` of its descriptor that does not wait)
    /// and if so makes each mount point beneath the root whose mounts changed walked whole by
    /// the next query, and watches it as it is now (issue 53). Returns whether the mounts
    /// beneath the root changed.
    pub(super) fn check_mounts(&mut self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let Some(mounts) = &self.mounts else {
            return false;
        };
        let mut fds = [PollFd::new(&mounts.fd, PollFlags::PRI)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if !matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0) && !mounts.moved {
            return false;
        }
        // A mount over the root or one of its ancestors replaces the root.
        self.check_root();
        let table = match std::fs::read(MOUNTINFO) {
            Ok(t) => t,
            Err(e) => {
                self.forget(&format!(
                    "the mount table changed and could not be read ({MOUNTINFO}: {e})"
                ));
                return true;
            }
        };
        let under = mounts_under(&table, self.root.as_os_str().as_bytes());
        // Also read after a directory moved, so that a later change is compared with the
        // paths as they are then. A change between the move and this reading keeps the old
        // path, whose parent is no longer watched: skipped below, as the move's own events
        // made the new path walked whole and watched after it.
        let old = self
            .mounts
            .as_mut()
            .map(|m| {
                m.moved = false;
                std::mem::replace(&mut m.under, under.clone())
            })
            .unwrap_or_default();
        let mut points: Vec<Vec<u8>> = old
            .symmetric_difference(&under)
            .map(|(p, _)| p.clone())
            .collect();
        if points.is_empty() {
            // A change elsewhere (another tree's mounts, a remount).
            return false;
        }
        points.sort();
        points.dedup();
        let mark = self.mark();
        let mut done: Vec<Vec<u8>> = Vec::new();
        for rel in points {
            if rel.is_empty() || done.iter().any(|d| is_under(&rel, d)) {
                continue;
            }
            let (parent, name) = split_parent(&rel);
            // Where the watcher does not look (left out, in the store, walked every time
            // anyway), neither does this.
            if rel.split(|&b| b == b'/').any(crate::Excludes::is_default)
                || !self.paths.contains_key(parent)
            {
                continue;
            }
            let parent = parent.to_vec();
            self.note(&parent, Some(name), mark);
            self.unwatch_tree(&rel);
            self.watch_tree(&rel, None);
            self.fresh.insert(rel.clone(), mark);
            done.push(rel);
        }
        self.find_file_mounts();
        true
    }

    /// Finds the directories holding a mount of something not a directory (a file bind
    /// mount), walked by every snapshot: a write through the file's source makes its event in
    /// the source's directory, not in theirs.
    pub(super) fn find_file_mounts(&mut self) {
        let Some(mounts) = &self.mounts else {
            return;
        };
        self.mount_walked.clear();
        let Ok((root_fd, _)) = crate::walk::open_root(&self.root) else {
            return;
        };
        let mut found = BTreeMap::new();
        for (rel, _) in &mounts.under {
            let (parent, name) = split_parent(rel);
            if rel.is_empty() || rel.split(|&b| b == b'/').any(crate::Excludes::is_default) {
                continue;
            }
            let dir = if parent.is_empty() {
                rustix::io::dup(&root_fd).map_err(std::io::Error::from)
            } else {
                cairn_store::fsutil::open_dir_path_beneath(&root_fd, parent)
            };
            let is_dir = dir.ok().and_then(|d| {
                rustix::fs::statat(
                    &d,
                    std::ffi::OsStr::from_bytes(name),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .ok()
            });
            if is_dir.is_some_and(|st| {
                rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory
            }) {
                found.insert(
                    parent.to_vec(),
                    format!(
                        "it holds a file bind mount ({}), whose writes make no event here",
                        String::from_utf8_lossy(name)
                    ),
                );
            }
        }
        self.mount_walked = found;
    }

    /// The subtrees walked by every snapshot, and why: those not watched, and those that
    /// mounts make walked.
    pub(super) fn walked_always(&self) -> impl Iterator<Item = (&Vec<u8>, &String)> {
        self.unwatched.iter().chain(self.mount_walked.iter())
    }

    /// Reads every event queued.
    pub(super) fn drain(&mut self) {
        let mut events: Vec<(i32, ReadFlags, Option<Vec<u8>>)> = Vec::new();
        EVENT_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            let mut reader = inotify::Reader::new(&self.fd, &mut buf[..]);
            loop {
                match reader.next() {
                    Ok(e) => events.push((
                        e.wd(),
                        e.events(),
                        e.file_name().map(|n| n.to_bytes().to_vec()),
                    )),
                    Err(Errno::INTR) => continue,
                    // AGAIN: nothing more; anything else: the next drain tries again.
                    Err(_) => break,
                }
            }
        });
        if !events.is_empty() {
            if let Some(fd) = &self.read_events {
                let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
            }
        }
        for (wd, mask, name) in events {
            self.event(wd, mask, name);
        }
        // After the events: a mount change before this drain is in the table now.
        if self.check_mounts() {
            self.last_event = Some(Instant::now());
            if let Some(fd) = &self.read_events {
                let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
            }
        }
        if self.changed.len() + self.fresh.len() > MAX_MARKS {
            self.forget("too many changes were remembered");
        }
    }

    pub(super) fn event(&mut self, wd: i32, mask: ReadFlags, name: Option<Vec<u8>>) {
        self.last_event = Some(Instant::now());
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.overflowed = true;
            return;
        }
        let dirs = self.paths_of(wd);
        if dirs.is_empty() {
            return;
        }
        if mask.contains(ReadFlags::IGNORED) {
            self.wds.remove(&wd);
            self.aliases.remove(&wd);
            for dir in &dirs {
                if self.paths.get(dir) == Some(&wd) {
                    self.paths.remove(dir);
                }
            }
            if dirs.iter().any(|d| d.is_empty()) {
                self.gone = true;
            }
            return;
        }
        if mask.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
            if dirs.iter().any(|d| d.is_empty()) {
                self.gone = true;
            }
            return;
        }
        let mark = self.mark();
        for dir in dirs {
            self.note(&dir, name.as_deref(), mark);
            let Some(name) = &name else { continue };
            if !mask.contains(ReadFlags::ISDIR) || crate::Excludes::is_default(name) {
                continue;
            }
            let path = join(&dir, name);
            if mask.intersects(ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO) {
                if let Some(m) = &mut self.mounts {
                    m.moved = true;
                }
            }
            if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
                if mask.contains(ReadFlags::DELETE) {
                    self.dead_elsewhere(&path, mark);
                }
                self.unwatch_tree(&path);
                self.fresh.insert(path, mark);
            } else if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                // Moved within the tree (a MOVED_FROM before) or in from outside: watched
                // anew, and walked whole by the next snapshot.
                self.unwatch_tree(&path);
                self.watch_tree(&path, None);
                self.fresh.insert(path, mark);
            }
        }
    }

    /// A directory deleted at `path` that the tree still reaches by another path (the source
    /// of a bind mount in it): there it is now a dead directory, which cannot be listed, so
    /// each other path is looked at again in its parent and walked whole.
    pub(super) fn dead_elsewhere(&mut self, path: &[u8], mark: Mark) {
        let Some(&wd) = self.paths.get(path) else {
            return;
        };
        for other in self.paths_of(wd) {
            if is_under(&other, path) || other.is_empty() {
                continue;
            }
            let (parent, name) = split_parent(&other);
            self.note(parent, Some(name), mark);
            self.fresh.insert(other.clone(), mark);
        }
    }

    /// Remembers that the entry `name` of `dir` changed (`None`: something in `dir` whose
    /// name the event did not give), keeping at most [`MAX_NAMES`] names per directory.
    pub(super) fn note(&mut self, dir: &[u8], name: Option<&[u8]>, mark: Mark) {
        let latest = self.reports(self.seq);
        let d = self
            .changed
            .entry(dir.to_vec())
            .or_insert_with(|| DirMarks {
                last: mark,
                names: HashMap::new(),
                unnamed: None,
            });
        d.last = d.last.max(mark);
        let Some(name) = name else {
            mark.widen(&mut d.unnamed);
            return;
        };
        d.names.insert(name.to_vec(), mark);
        if d.names.len() <= MAX_NAMES {
            return;
        }
        // Forget the names a query with the latest token would not report (only older tokens
        // need them: those now list the directory whole); then, if still too many, all.
        d.names.retain(|_, m| {
            let keep = latest(m);
            if !keep {
                m.widen(&mut d.unnamed);
            }
            keep
        });
        if d.names.len() > MAX_NAMES {
            for (_, m) in d.names.drain() {
                m.widen(&mut d.unnamed);
            }
        }
    }

    /// Whether a query with the token numbered `seq` reports a mark: one made after the token,
    /// or read within the racy window before the token was issued (a file recorded then is
    /// looked at once more, as by a walk). Every mark, for a token whose time is not known
    /// (none issued, or forgotten).
    pub(super) fn reports(&self, seq: u64) -> impl Fn(&Mark) -> bool {
        let cutoff = self
            .token_times
            .get(&seq)
            .and_then(|at| at.checked_sub(self.racy_window));
        move |m: &Mark| m.seq > seq || cutoff.is_none_or(|c| m.at >= c)
    }

    /// Sees whether the root is still the directory watched.
    pub(super) fn check_root(&mut self) {
        let same = rustix::fs::stat(&self.root).is_ok_and(|st| dev_ino(&st) == self.root_id);
        if !same {
            self.gone = true;
        }
    }

    /// Refuses every token issued so far (they get a full walk, with `why`) and forgets the
    /// marks.
    pub(super) fn forget(&mut self, why: &str) {
        self.floor = self.seq + 1;
        self.floor_reason = why.to_string();
        self.changed.clear();
        self.fresh.clear();
        self.token_times.clear();
    }

    /// After an overflow: events were lost, so every earlier token is refused, and the
    /// watches are set up again on a new inotify instance (directories made meanwhile had no
    /// watch added).
    pub(super) fn rebuild(&mut self) {
        self.overflowed = false;
        self.overflows += 1;
        self.forget("the inotify queue overflowed (events were lost)");
        let Ok(fd) = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC) else {
            self.gone = true;
            return;
        };
        self.fd = fd;
        self.generation += 1;
        self.wds.clear();
        self.aliases.clear();
        self.paths.clear();
        self.unwatched.clear();
        match crate::walk::open_root(&self.root) {
            Ok((root_fd, st)) if dev_ino(&st) == self.root_id => {
                self.watch_tree(b"", Some(root_fd));
            }
            _ => self.gone = true,
        }
    }

    /// The answer to a query since `since`, with a new token.
    pub(super) fn answer(&mut self, instance: [u8; 16], since: Option<Token>) -> Changes {
        self.seq += 1;
        self.queries += 1;
        let now = Instant::now();
        self.token_times.insert(self.seq, now);
        while self.token_times.len() > MAX_TOKEN_TIMES {
            self.token_times.pop_first();
        }
        let token = Token {
            instance,
            seq: self.seq,
        };
        let scope = match since {
            _ if self.gone => Scope::Full("the workspace root was moved or deleted".into()),
            None => Scope::Full("no earlier token (the first snapshot with this watcher)".into()),
            Some(t) if t.instance != instance => Scope::Full(
                "the stat cache was confirmed with another watcher (one restarted since)".into(),
            ),
            Some(t) if t.seq < self.floor => Scope::Full(self.floor_reason.clone()),
            Some(t) if t.seq >= self.seq => Scope::Full("a token this watcher never issued".into()),
            Some(t) => {
                let since_t = self.reports(t.seq);
                // The keys of `marks` that the query reports, sorted.
                let reported = |marks: &mut dyn Iterator<Item = (&Vec<u8>, &Mark)>| {
                    let mut out: Vec<Vec<u8>> = marks
                        .filter(|(_, m)| since_t(m))
                        .map(|(k, _)| k.clone())
                        .collect();
                    out.sort();
                    out
                };
                let mut dirs: Vec<Vec<u8>> = Vec::new();
                let mut names: Vec<(Vec<u8>, Vec<Vec<u8>>)> = Vec::new();
                for (p, d) in self.changed.iter().filter(|(_, d)| since_t(&d.last)) {
                    dirs.push(p.clone());
                    if d.unnamed.is_none_or(|u| !since_t(&u)) {
                        names.push((p.clone(), reported(&mut d.names.iter())));
                    }
                }
                dirs.sort();
                names.sort();
                let mut subtrees = reported(&mut self.fresh.iter());
                subtrees.extend(self.walked_always().map(|(p, _)| p.clone()));
                subtrees.sort();
                subtrees.dedup();
                let note = self.walked_always().next().map(|(first, why)| {
                    format!(
                        "{} directories not watched, walked every time ({}: {why})",
                        self.unwatched.len() + self.mount_walked.len(),
                        String::from_utf8_lossy(first)
                    )
                });
                Scope::Partial {
                    dirs,
                    names,
                    subtrees,
                    note,
                }
            }
        };
        Changes { token, scope }
    }
}

pub(super) fn open_beneath_root(root: &Path, rel: &[u8]) -> std::io::Result<OwnedFd> {
    let (root_fd, _) = crate::walk::open_root(root).map_err(|_| std::io::ErrorKind::NotFound)?;
    if rel.is_empty() {
        return Ok(root_fd);
    }
    cairn_store::fsutil::open_dir_beneath(&root_fd, rel)
}
