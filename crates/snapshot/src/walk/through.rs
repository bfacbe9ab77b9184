//! The walk of a directory the watcher vouches for: taken whole from the stat cache's records
//! ([`Walker::reuse`]), or only through to what changed beneath it ([`Walker::through`]).

use super::*;

impl Walker<'_> {
    /// A directory the watcher vouches for, with everything beneath it (nothing there changed
    /// since the cache was confirmed): its records are counted and its excluded entries
    /// reported as a walk would, without a system call. `false` when some directory beneath
    /// has no record, or one the cache does not vouch for (it held an entry skipped, or a
    /// file with several links): then the directory is walked.
    pub(super) fn reuse(&self, rel: &[u8]) -> bool {
        let Some(t) = self.cache.count_subtree(rel) else {
            return false;
        };
        self.taken(t.files, t.bytes, t.symlinks, t.dirs, t.kept.clone());
        true
    }

    /// A directory whose own entries did not change but beneath which something did, or
    /// whose changed entries the watcher named (`names`, sorted): its entries are the cache's
    /// record (not `lstat`ed) but for those named, which are `lstat`ed and looked at as a walk
    /// does; each subdirectory on the way to a change is walked, and the tree is built again
    /// if something changed. `None` when what it finds does not agree with the record (an
    /// ignore file named, or one or a subdirectory gone or replaced since): then the
    /// directory is walked.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn through(
        &self,
        dir: &Handle<'_>,
        rel: &[u8],
        chain: &Arc<IgnoreChain>,
        tree: (TreeId, u64),
        record: &DirRecord,
        names: &[Vec<u8>],
        decisions: bool,
    ) -> Result<Option<DirOut>> {
        let scope = self.partial.expect("only called in a partial walk");
        if names
            .iter()
            .any(|n| IGNORE_FILES.iter().any(|f| f.to_bytes() == n.as_slice()))
        {
            return Ok(None);
        }
        let mut ignore: Vec<(&CStr, rustix::fs::Stat)> = Vec::new();
        if self.rules.gitignore {
            for name in IGNORE_FILES {
                if record.get(name.to_bytes()).is_some() {
                    match dir.stat(name) {
                        Ok(st) => ignore.push((name, st)),
                        Err(_) => return Ok(None),
                    }
                }
            }
        }
        if !self.ignore_files_unchanged(&ignore, record) {
            return Ok(None);
        }
        let chain = if self.rules.gitignore {
            self.ignore_files(dir, rel, &ignore, chain)?
        } else {
            chain.clone()
        };
        // The named entries still there, as they are now.
        let mut named: Vec<(std::ffi::CString, rustix::fs::Stat)> = Vec::with_capacity(names.len());
        // An entry that cannot be `lstat`ed is left out, so the listing is not vouched for.
        let mut unreadable = false;
        for n in names {
            let Ok(name) = std::ffi::CString::new(n.clone()) else {
                return Ok(None);
            };
            match dir.stat(&name) {
                Ok(st) => named.push((name, st)),
                Err(Errno::NOENT) => {}
                Err(e) if is_unreadable(e) => {
                    self.skip(join(rel, n), SkipReason::Unreadable, false);
                    unreadable = true;
                }
                Err(e) => return Err(Error::io("lstat", self.abs(&join(rel, n)), e.into())),
            }
        }
        // The record's entries but the named ones (both sorted by name): the slices between
        // them, found by a search per name rather than a comparison per entry.
        let mut records: Vec<CachedEntry> = Vec::with_capacity(record.entries.len() + 1);
        let mut from = 0;
        for n in names {
            let rest = &record.entries[from..];
            if let Ok(at) = rest.binary_search_by(|e| e.name.as_bytes().cmp(n)) {
                records.extend_from_slice(&rest[..at]);
                from += at + 1;
            }
        }
        records.extend_from_slice(&record.entries[from..]);
        let mut changed = !names.is_empty();
        // A subdirectory's record replaced or removed below: the entries differ from the
        // record's whatever the named ones turn out to be.
        let mut subdir_changed = false;
        // What is taken from the record without looking: its files and links, and each
        // subdirectory off the way to every change, whole (added up here and counted once,
        // after every subdirectory that could send the directory to be walked was looked at).
        let (mut files, mut bytes, mut symlinks, mut dirs) = (0u64, 0u64, 0u64, 1u64);
        let mut kept = Vec::new();
        // The subdirectories on the way to a change (or that the cache cannot vouch for),
        // each `lstat`ed first: one gone or replaced since leaves the directory to be walked
        // before anything beneath it was.
        let mut descend: Vec<(usize, std::ffi::CString, rustix::fs::Stat)> = Vec::new();
        // Each subdirectory's path, written over the directory's own.
        let mut path = rel.to_vec();
        if !rel.is_empty() {
            path.push(b'/');
        }
        let prefix = path.len();
        for (i, e) in records.iter().enumerate() {
            match e.kind {
                CachedKind::File => {
                    files += 1;
                    bytes += e.stat.size;
                }
                CachedKind::Symlink => symlinks += 1,
                CachedKind::Excluded(reason) => kept.push(Kept {
                    path: join(rel, &e.name),
                    reason,
                    is_dir: e.stat.mode & S_IFMT == S_IFDIR,
                }),
                CachedKind::Dir => {
                    path.truncate(prefix);
                    path.extend_from_slice(&e.name);
                    // A subdirectory off the way to every change is taken whole from the
                    // cache (as `reuse` takes it), unless the cache cannot vouch for all of it.
                    let off_the_way = !(scope.dirs.contains(&path)
                        || scope.ancestors.contains(&path)
                        || scope.in_subtree(&path));
                    if let Some(t) = off_the_way
                        .then(|| self.cache.count_subtree(&path))
                        .flatten()
                    {
                        files += t.files;
                        bytes += t.bytes;
                        symlinks += t.symlinks;
                        dirs += t.dirs;
                        kept.extend(t.kept.iter().cloned());
                        continue;
                    }
                    let Ok(name) = std::ffi::CString::new(e.name.to_vec()) else {
                        return Ok(None);
                    };
                    match dir.stat(&name) {
                        Ok(st)
                            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::Directory =>
                        {
                            descend.push((i, name, st));
                        }
                        _ => return Ok(None),
                    }
                }
            }
        }
        // Walked in rayon's pool when there are several (changes in several subtrees), as a
        // listing's entries are (`look_all`).
        let one = |(i, name, st): &(usize, std::ffi::CString, rustix::fs::Stat)| {
            let work = Work {
                name,
                st: *st,
                cached: Some(&records[*i]),
            };
            self.entry(dir, rel, &work, &chain, true, true)
        };
        let walked: Vec<Result<Option<CachedEntry>>> = if descend.len() > 1 {
            descend.par_iter().map(one).collect()
        } else {
            descend.iter().map(one).collect()
        };
        // From the last, so that a removal leaves the places still to come where they were.
        for ((i, _, _), now) in descend.iter().zip(walked).rev() {
            match now? {
                Some(new) => {
                    if new != records[*i] {
                        records[*i] = new;
                        changed = true;
                        subdir_changed = true;
                    }
                }
                None => {
                    records.remove(*i);
                    changed = true;
                    subdir_changed = true;
                }
            }
        }
        self.taken(files, bytes, symlinks, dirs, kept);
        if !changed {
            return Ok(Some(DirOut {
                id: tree.0,
                size: tree.1,
            }));
        }
        // The named entries, looked at as a walk looks at a listing's.
        if !names.is_empty() {
            self.counters.named.fetch_add(1, Ordering::Relaxed);
        }
        let present: Vec<(&CStr, rustix::fs::Stat)> =
            named.iter().map(|(n, st)| (n.as_c_str(), *st)).collect();
        let look = Look {
            dir,
            rel,
            cached: Some(record),
            decisions: decisions && self.same_rules,
            chain: &chain,
            partial: true,
        };
        let base = records.len();
        let recorded = self.look_all(&look, &present, &mut records)?;
        let records = merge_sorted(records, base);
        // The same entries as the record's when no subdirectory's changed and each named one
        // is as the record has it (or absent from both): every other entry is the record's.
        // The same tree when that holds of the entries it includes (not the excluded ones).
        let now = |n: &[u8]| {
            records
                .binary_search_by(|e| e.name.as_bytes().cmp(n))
                .ok()
                .map(|i| &records[i])
        };
        fn included(e: Option<&CachedEntry>) -> Option<&CachedEntry> {
            e.filter(|e| !matches!(e.kind, CachedKind::Excluded(_)))
        }
        let same_entries = !subdir_changed && names.iter().all(|n| now(n) == record.get(n));
        let same_tree = !subdir_changed
            && names
                .iter()
                .all(|n| included(now(n)) == included(record.get(n)));
        let out = self.tree_of(&records, Some(record), Some(tree), Some(same_tree))?;
        // As for a listing (see `walk_dir`): vouched for only when every entry present has a
        // record and none is a file with several links.
        let vouched = recorded == present.len() && !has_linked_file(&present) && !unreadable;
        let stat = record.stat.filter(|_| vouched);
        let new = if same_entries && record.stat == stat {
            Update::Same(rel.to_vec())
        } else {
            let gone = Some(record.subdirs_gone(&records));
            let new = DirRecord {
                path: rel.to_vec(),
                stat,
                entries: records,
            };
            Update::Fresh(new, gone)
        };
        self.dirs.lock().push(new);
        Ok(Some(out))
    }
}
