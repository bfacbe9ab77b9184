//! What a restore checks when a watcher spared its safety walk.
//!
//! A watched walk `lstat`s only what the watcher (this process's, or a `cairn watch`
//! daemon's) says changed, and takes every other entry from the stat cache. A restore then
//! overwrites and removes files on the word of that snapshot: were an event ever missed (a
//! watcher bug, a kernel that dropped one without saying so), the restore would write over an
//! edit its safety snapshot does not hold, the one loss Cairn exists to prevent. So before
//! anything changes, every path the plan writes over, removes or creates outside a directory
//! it makes is `lstat`ed and compared with the record the snapshot holds for it
//! ([`Prepared::dir_record`]): the same `lstat` for an entry, nothing for an absence. One
//! mismatch, or a path no record vouches for, and the restore walks the whole tree instead.
//! The cost is one `lstat` per changed path, never more than the walk it spares.

use crate::plan::{Action, Plan};
use cairn_snapshot::statcache::{CachedKind, DirRecord};
use cairn_snapshot::{Prepared, StatRecord};
use cairn_store::RelPath;
use rayon::prelude::*;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

/// The first path of `plan` found other than `prepared` (a watched walk of the workspace at
/// `root`) records it, or that no record vouches for; `None` when every one is as recorded.
pub(crate) fn unseen_change(root: &Path, prepared: &Prepared<'_>, plan: &Plan) -> Option<RelPath> {
    // Directories the plan makes: what it puts inside them replaces nothing.
    let mut made: HashSet<&[u8]> = HashSet::new();
    // The plan's paths come sorted, so most share the directory before them: its record is
    // looked up (and decoded) once for them.
    let mut last: Option<(&[u8], Option<Arc<DirRecord>>)> = None;
    let mut checks: Vec<(&RelPath, Option<StatRecord>)> = Vec::new();
    for a in &plan.actions {
        let path = a.path();
        let (parent, name) = path.split_last();
        if matches!(a, Action::MakeDir { .. }) {
            made.insert(&path.0);
        }
        // An `rmdir` fails on a directory holding anything, and a mode change loses no
        // content (a file whose mode is set by rewriting it is a hard link, which the stat
        // cache never vouches for: checked below).
        if made.contains(parent)
            || matches!(
                a,
                Action::RemoveDir { .. } | Action::SetMode { dir: true, .. }
            )
        {
            continue;
        }
        let record = match &last {
            Some((dir, record)) if *dir == parent => record.clone(),
            _ => {
                let record = prepared.dir_record(parent);
                last = Some((parent, record.clone()));
                record
            }
        };
        let Some(record) = record else {
            return Some(path.clone());
        };
        match record.get(name) {
            None => checks.push((path, None)),
            Some(e) => match e.kind {
                // Left in place by an exclude: no plan touches it, and no record vouches.
                CachedKind::Excluded(_) => return Some(path.clone()),
                // A directory the plan replaces is emptied first, each entry checked; its own
                // record's size is its tree's, not an `lstat`'s.
                CachedKind::Dir => {}
                CachedKind::File | CachedKind::Symlink => checks.push((path, Some(e.stat))),
            },
        }
    }
    checks
        .par_iter()
        .find_first(|(path, held)| !as_recorded(root, path, held.as_ref()))
        .map(|(path, _)| (*path).clone())
}

/// Whether the entry at `path` beneath `root` is what `held` says: absent for `None`, else
/// present with the same `lstat`. An `lstat` that fails otherwise is a mismatch.
fn as_recorded(root: &Path, path: &RelPath, held: Option<&StatRecord>) -> bool {
    let full = root.join(OsStr::from_bytes(&path.0));
    match rustix::fs::lstat(&full) {
        Ok(st) => held.is_some_and(|h| h.matches(&StatRecord::of(&st))),
        Err(rustix::io::Errno::NOENT) => held.is_none(),
        Err(_) => false,
    }
}
