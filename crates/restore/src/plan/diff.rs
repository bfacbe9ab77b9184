//! The comparison of the snapshot's tree with the current one, directory by directory: the
//! actions a restore takes, what it leaves alone, and what drifted.

use super::model::{Action, DriftPolicy, KeptPath, KeptReason};
use super::scope::{within, Scope};
use super::{entry_at, Inputs};
use crate::error::Result;
use cairn_store::relpath::join;
use cairn_store::{EntryKind, RelPath, Tree, TreeEntry, TreeId};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The comparison under way: what it has found so far, in the order a restore makes it.
pub(super) struct Planner<'a> {
    target_tree: &'a dyn Fn(&TreeId) -> Result<Tree>,
    current_tree: &'a dyn Fn(&TreeId) -> Result<Tree>,
    current_kept: BTreeMap<Vec<u8>, (KeptReason, bool)>,
    target_skipped: BTreeSet<Vec<u8>>,
    reference: Option<TreeId>,
    reference_cache: HashMap<TreeId, Tree>,
    on_drift: DriftPolicy,
    /// The chosen paths (empty: everything).
    scope: Vec<Vec<u8>>,
    pub(super) removals: Vec<Action>,
    pub(super) creations: Vec<Action>,
    pub(super) modes: Vec<Action>,
    pub(super) restored: Vec<RelPath>,
    pub(super) deleted: Vec<RelPath>,
    pub(super) unchanged: u64,
    /// Files and links of the target met in the directories the plan went through; the rest
    /// lie in subtrees identical on both sides, so they are unchanged.
    pub(super) visited_leaves: u64,
    /// Unchanged subtrees, counted only when the manifest's count cannot be used.
    pub(super) same_subtrees: Vec<TreeId>,
    /// Subtrees of the target outside the chosen paths, likewise.
    pub(super) outside_dirs: Vec<TreeId>,
    pub(super) kept: Vec<KeptPath>,
    pub(super) drifted: Vec<RelPath>,
    pub(super) denied: Vec<(RelPath, String)>,
}

impl<'a> Planner<'a> {
    /// A comparison of `inputs`' target with its current side, nothing found yet.
    pub(super) fn new(inputs: &Inputs<'a>) -> Planner<'a> {
        Planner {
            target_tree: inputs.target_tree,
            current_tree: inputs.current.trees,
            current_kept: inputs
                .current
                .kept
                .iter()
                .map(|(p, r, d)| (p.clone(), (*r, *d)))
                .collect(),
            target_skipped: inputs
                .target_skipped
                .iter()
                .map(|s| s.path.clone())
                .collect(),
            reference: inputs.reference.map(|r| r.1),
            reference_cache: HashMap::new(),
            on_drift: inputs.on_drift,
            scope: inputs.paths.iter().map(|p| p.0.clone()).collect(),
            removals: Vec::new(),
            creations: Vec::new(),
            modes: Vec::new(),
            restored: Vec::new(),
            deleted: Vec::new(),
            unchanged: 0,
            visited_leaves: 0,
            same_subtrees: Vec::new(),
            outside_dirs: Vec::new(),
            kept: Vec::new(),
            drifted: Vec::new(),
            denied: Vec::new(),
        }
    }
}

impl Planner<'_> {
    /// Where `path` lies with respect to the chosen paths.
    fn scope_of(&self, path: &[u8]) -> Scope {
        if self.scope.is_empty() {
            return Scope::Inside;
        }
        let mut above = false;
        for c in &self.scope {
            if within(path, c) {
                return Scope::Inside;
            }
            above |= within(c, path);
        }
        if above {
            Scope::Above
        } else {
            Scope::Outside
        }
    }

    /// Plans the directory `p` above a chosen path: `x` the target's entry, `y` the current
    /// one. Only what leads to the chosen paths is planned; `p` itself is made when the
    /// target has it and the workspace does not, removed only when the target lacks it and
    /// the removals under it leave it empty, and never re-moded.
    fn above(&mut self, p: &[u8], x: Option<&TreeEntry>, y: Option<&TreeEntry>) -> Result<()> {
        let tx = match x {
            Some(x) if x.kind == EntryKind::Dir => Some((self.target_tree)(&TreeId(x.id))?),
            _ => None,
        };
        match y {
            Some(y) if y.kind == EntryKind::Dir => {
                let ty = (self.current_tree)(&TreeId(y.id))?;
                self.compare_dirs(p, tx.as_ref(), Some(&ty))?;
                // A directory the target lacks, left empty by the removals under it, goes too:
                // it only held what the chosen paths remove (so restoring the safety snapshot
                // of a restore that made it takes it away again).
                let emptied = tx.is_none()
                    && !self.kept_under(p)
                    && ty.entries().iter().all(|e| {
                        let cp = join(p, &e.name);
                        self.deleted.iter().any(|d| d.as_bytes() == cp.as_slice())
                    });
                if emptied {
                    self.removals.push(Action::RemoveDir {
                        path: RelPath(p.to_vec()),
                    });
                    self.deleted.push(RelPath(p.to_vec()));
                }
                Ok(())
            }
            Some(_) if tx.is_some() => {
                self.denied.push((
                    RelPath(p.to_vec()),
                    "a chosen path lies under it in the snapshot, but the workspace has a file \
                     or link there; choose this path itself to restore it"
                        .into(),
                ));
                Ok(())
            }
            None => match (x, tx) {
                (Some(x), Some(tx)) => {
                    if let Some((kp, reason)) = self.kept_at_or_above(p) {
                        self.deny(&kp, reason);
                        return Ok(());
                    }
                    self.make_dir(p, x, &tx)
                }
                _ => Ok(()),
            },
            // Neither side has a directory here: nothing under it to restore.
            Some(_) => Ok(()),
        }
    }

    /// The kept entry at `path` or at one of its ancestors.
    fn kept_at_or_above(&self, path: &[u8]) -> Option<(Vec<u8>, KeptReason)> {
        let mut p = path;
        loop {
            if let Some((reason, _)) = self.current_kept.get(p) {
                return Some((p.to_vec(), *reason));
            }
            match p.iter().rposition(|&b| b == b'/') {
                Some(i) => p = &p[..i],
                None => return None,
            }
        }
    }

    /// Whether any kept entry lies under `dir`.
    fn kept_under(&self, dir: &[u8]) -> bool {
        let mut start = dir.to_vec();
        start.push(b'/');
        self.current_kept
            .range(start.clone()..)
            .next()
            .map(|(k, _)| k.starts_with(&start))
            .unwrap_or(false)
    }

    fn target_skips(&self, path: &[u8]) -> bool {
        let mut p = path;
        loop {
            if self.target_skipped.contains(p) {
                return true;
            }
            match p.iter().rposition(|&b| b == b'/') {
                Some(i) => p = &p[..i],
                None => return false,
            }
        }
    }

    fn reference_entry(&mut self, path: &[u8]) -> Result<Option<TreeEntry>> {
        match self.reference {
            Some(root) => entry_at(&mut self.reference_cache, self.target_tree, root, path),
            None => Ok(None),
        }
    }

    /// Whether the current entry at `path` differs from the reference; records it as drifted.
    /// Returns true when the change must be skipped.
    fn drift(&mut self, path: &[u8], current: Option<&TreeEntry>) -> Result<bool> {
        if self.reference.is_none() {
            return Ok(false);
        }
        let reference = self.reference_entry(path)?;
        let same = match (&reference, current) {
            (None, None) => true,
            (Some(r), Some(c)) => r.kind == c.kind && r.id == c.id && r.mode == c.mode,
            _ => false,
        };
        if same {
            return Ok(false);
        }
        self.drifted.push(RelPath(path.to_vec()));
        if self.on_drift == DriftPolicy::Skip {
            self.kept.push(KeptPath {
                path: RelPath(path.to_vec()),
                reason: KeptReason::Drifted,
            });
            return Ok(true);
        }
        Ok(false)
    }

    pub(super) fn count_files(&self, id: TreeId) -> Result<u64> {
        let t = (self.current_tree)(&id)?;
        let mut n = 0;
        for e in t.entries() {
            n += match e.kind {
                EntryKind::Dir => self.count_files(TreeId(e.id))?,
                _ => 1,
            };
        }
        Ok(n)
    }

    /// Plans directory `path` (the root is `b""`): `t` the target's tree, `c` the current
    /// one, either absent. Walks both entry lists in name order, each name planned once.
    pub(super) fn compare_dirs(
        &mut self,
        path: &[u8],
        t: Option<&Tree>,
        c: Option<&Tree>,
    ) -> Result<()> {
        let empty = Tree::default();
        let (te, ce) = (t.unwrap_or(&empty).entries(), c.unwrap_or(&empty).entries());
        self.visited_leaves += te.iter().filter(|e| e.kind != EntryKind::Dir).count() as u64;
        let (mut i, mut j) = (0, 0);
        while i < te.len() || j < ce.len() {
            let ord = match (te.get(i), ce.get(j)) {
                (Some(x), Some(y)) => x.name.cmp(&y.name),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, _) => std::cmp::Ordering::Greater,
            };
            if !self.scope.is_empty() {
                let name = match ord {
                    std::cmp::Ordering::Greater => &ce[j].name,
                    _ => &te[i].name,
                };
                let p = join(path, name);
                let x = (ord != std::cmp::Ordering::Greater).then(|| te[i].clone());
                let y = (ord != std::cmp::Ordering::Less).then(|| ce[j].clone());
                let scope = self.scope_of(&p);
                if scope != Scope::Inside {
                    if scope == Scope::Above {
                        self.above(&p, x.as_ref(), y.as_ref())?;
                    } else if let Some(x) = &x {
                        // Outside the chosen paths: left as it is, counted as unchanged.
                        match x.kind {
                            EntryKind::Dir => self.outside_dirs.push(TreeId(x.id)),
                            _ => self.unchanged += 1,
                        }
                    }
                    if x.is_some() {
                        i += 1;
                    }
                    if y.is_some() {
                        j += 1;
                    }
                    continue;
                }
            }
            match ord {
                std::cmp::Ordering::Less => {
                    let x = te[i].clone();
                    let p = join(path, &x.name);
                    if let Some((kp, reason)) = self.kept_at_or_above(&p) {
                        self.deny(&kp, reason);
                    } else if !self.drift(&p, None)? {
                        self.create(&p, &x)?;
                    }
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    let y = ce[j].clone();
                    let p = join(path, &y.name);
                    if self.target_skips(&p) {
                        self.kept.push(KeptPath {
                            path: RelPath(p),
                            reason: KeptReason::SkippedBySnapshot,
                        });
                    } else {
                        self.remove(&p, &y)?;
                    }
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let (x, y) = (te[i].clone(), ce[j].clone());
                    let p = join(path, &x.name);
                    self.compare_entries(&p, &x, &y)?;
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    /// Plans path `p`, which both sides have: `x` the target's entry, `y` the current one.
    fn compare_entries(&mut self, p: &[u8], x: &TreeEntry, y: &TreeEntry) -> Result<()> {
        if x.kind == EntryKind::Dir && y.kind == EntryKind::Dir {
            if x.id == y.id {
                self.same_subtrees.push(TreeId(y.id));
            } else {
                let tx = (self.target_tree)(&TreeId(x.id))?;
                let ty = (self.current_tree)(&TreeId(y.id))?;
                self.compare_dirs(p, Some(&tx), Some(&ty))?;
            }
            if x.mode != y.mode {
                self.modes.push(Action::SetMode {
                    path: RelPath(p.to_vec()),
                    mode: x.mode,
                    dir: true,
                });
            }
            return Ok(());
        }
        if x.kind == y.kind {
            if x.id == y.id {
                if x.mode != y.mode && x.kind == EntryKind::File {
                    if self.drift(p, Some(y))? {
                        return Ok(());
                    }
                    self.modes.push(Action::SetMode {
                        path: RelPath(p.to_vec()),
                        mode: x.mode,
                        dir: false,
                    });
                    self.restored.push(RelPath(p.to_vec()));
                } else {
                    self.unchanged += 1;
                }
                return Ok(());
            }
            if self.drift(p, Some(y))? {
                return Ok(());
            }
            self.create(p, x)?;
            return Ok(());
        }
        // The type changes: remove what is there, then create.
        if self.drift(p, Some(y))? {
            return Ok(());
        }
        let removed = self.remove(p, y)?;
        if !removed {
            self.deny(p, KeptReason::HoldsKept);
            return Ok(());
        }
        self.create(p, x)
    }

    /// Makes the target's directory `p` (`x`, whose tree is `tx`) with everything in it; a mode
    /// that does not let its owner in is set last, once what goes in it is written.
    fn make_dir(&mut self, p: &[u8], x: &TreeEntry, tx: &Tree) -> Result<()> {
        let path = RelPath(p.to_vec());
        self.creations.push(Action::MakeDir {
            path: path.clone(),
            mode: x.mode,
        });
        self.restored.push(path.clone());
        self.compare_dirs(p, Some(tx), None)?;
        if x.mode & 0o700 != 0o700 {
            self.modes.push(Action::SetMode {
                path,
                mode: x.mode,
                dir: true,
            });
        }
        Ok(())
    }

    fn create(&mut self, p: &[u8], x: &TreeEntry) -> Result<()> {
        let path = RelPath(p.to_vec());
        match x.kind {
            EntryKind::Dir => {
                let tx = (self.target_tree)(&TreeId(x.id))?;
                self.make_dir(p, x, &tx)?;
            }
            EntryKind::File => {
                self.creations.push(Action::WriteFile {
                    path: path.clone(),
                    blob: x.id,
                    mode: x.mode,
                    size: x.size,
                });
                self.restored.push(path);
            }
            EntryKind::Symlink => {
                self.creations.push(Action::MakeSymlink {
                    path: path.clone(),
                    target: x.id,
                });
                self.restored.push(path);
            }
        }
        Ok(())
    }

    /// Plans the removal of `y` at `p`; returns whether it goes entirely.
    fn remove(&mut self, p: &[u8], y: &TreeEntry) -> Result<bool> {
        if y.kind != EntryKind::Dir {
            if self.drift(p, Some(y))? {
                return Ok(false);
            }
            self.removals.push(Action::RemoveFile {
                path: RelPath(p.to_vec()),
            });
            self.deleted.push(RelPath(p.to_vec()));
            return Ok(true);
        }
        let ty = (self.current_tree)(&TreeId(y.id))?;
        let mut all = true;
        for e in ty.entries() {
            let cp = join(p, &e.name);
            if self.target_skips(&cp) {
                self.kept.push(KeptPath {
                    path: RelPath(cp),
                    reason: KeptReason::SkippedBySnapshot,
                });
                all = false;
                continue;
            }
            all &= self.remove(&cp, e)?;
        }
        if all && !self.kept_under(p) {
            self.removals.push(Action::RemoveDir {
                path: RelPath(p.to_vec()),
            });
            self.deleted.push(RelPath(p.to_vec()));
            Ok(true)
        } else {
            self.kept.push(KeptPath {
                path: RelPath(p.to_vec()),
                reason: KeptReason::HoldsKept,
            });
            Ok(false)
        }
    }

    /// Refuses the plan over `p`, which the safety snapshot could not keep: the reason says
    /// the cause and the way past it (issue 53: a size or hard-link refusal said to check
    /// permissions and ownership).
    fn deny(&mut self, p: &[u8], reason: KeptReason) {
        // The ways past that every such path has.
        const AWAY: &str = "move it out of the workspace first, or restore the other paths \
                            only (name them: `cairn restore SNAPSHOT PATH...`, the `paths` option)";
        let why = match reason {
            KeptReason::Ignored | KeptReason::Excluded | KeptReason::ExcludedByGlob => {
                format!("it is excluded or ignored now, so no snapshot could keep it; {AWAY}")
            }
            KeptReason::Unreadable => "it cannot be read".to_string(),
            KeptReason::TooLarge => format!(
                "it is larger than the snapshot's max_file_bytes, so the safety snapshot \
                 (taken with the snapshot's settings) could not keep it; {AWAY}"
            ),
            KeptReason::Special => format!(
                "it is a special file (a socket, FIFO or device), which no snapshot keeps; {AWAY}"
            ),
            KeptReason::HoldsKept => "it is a directory holding files no snapshot keeps; move \
                                      those files out of the workspace first, or restore the \
                                      other paths only (name them: `cairn restore SNAPSHOT \
                                      PATH...`, the `paths` option)"
                .to_string(),
            KeptReason::HardLink => format!(
                "it has several hard links and the snapshot refuses those (it was taken with \
                 refuse_hard_links), so the safety snapshot could not keep it; {AWAY}, or make it \
                 a file of its own (copy it, then put the copy in its place)"
            ),
            KeptReason::Changing => {
                "it keeps changing; stop what writes it, then try again".to_string()
            }
            _ => "it cannot be kept by the safety snapshot".to_string(),
        };
        self.denied.push((RelPath(p.to_vec()), why));
    }
}
