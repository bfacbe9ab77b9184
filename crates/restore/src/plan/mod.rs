//! Restore planning: every change is listed before any is made. The dry run *is* the plan.

use crate::error::{Error, Result};
use crate::hold;
use crate::site::Site;
use cairn_snapshot::{Context, ExcludeReason, Kept, Options as SnapshotOptions};
use cairn_store::relpath::join;
use cairn_store::{
    CaptureSettings, EntryKind, ObjectId, RelPath, SkipReason, Skipped, SnapshotId, Tree,
    TreeEntry, TreeId,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Defines [`Action`] and the two serde forms of it from one list of variants.
macro_rules! actions {
    ($(
        $(#[$vdoc:meta])*
        $variant:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }
    )*) => {
        /// One change a restore makes, in the order it is made.
        ///
        /// In JSON (a dry run's plan) an action is an object tagged by `op`; in binary formats
        /// (a journal) it is the variant's index then its fields, which postcard can read back
        /// (it cannot read the tagged form, whose tag must be found among the fields first).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Action {
            $($(#[$vdoc])* $variant { $($(#[$fdoc])* $field: $ty,)* },)*
        }

        /// [`Action`] as JSON: an object tagged by `op`.
        #[derive(Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "schema", schemars(rename = "Action"))]
        #[serde(remote = "Action", tag = "op", rename_all = "snake_case")]
        enum TaggedAction {
            $($variant { $($field: $ty,)* },)*
        }

        /// [`Action`] in binary formats: the variant's index, then its fields.
        #[derive(Serialize, Deserialize)]
        #[serde(remote = "Action")]
        enum CompactAction {
            $($variant { $($field: $ty,)* },)*
        }
    };
}

actions! {
    /// Remove a file or a symlink.
    RemoveFile {
        /// The path.
        path: RelPath,
    }
    /// Remove a directory, empty once the removals listed before it are done.
    RemoveDir {
        /// The path.
        path: RelPath,
    }
    /// Create a directory.
    MakeDir {
        /// The path.
        path: RelPath,
        /// Its final mode.
        mode: u32,
    }
    /// Write a file (through a temporary file renamed over the path).
    WriteFile {
        /// The path.
        path: RelPath,
        /// Its content.
        blob: ObjectId,
        /// Its mode.
        mode: u32,
        /// Its size.
        size: u64,
    }
    /// Make a symlink (through a temporary link renamed over the path).
    MakeSymlink {
        /// The path.
        path: RelPath,
        /// The blob of its target bytes.
        target: ObjectId,
    }
    /// Set the mode of a file or directory whose content is right.
    SetMode {
        /// The path.
        path: RelPath,
        /// The mode.
        mode: u32,
        /// Whether it is a directory.
        dir: bool,
    }
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            TaggedAction::serialize(self, s)
        } else {
            CompactAction::serialize(self, s)
        }
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Action, D::Error> {
        if d.is_human_readable() {
            TaggedAction::deserialize(d)
        } else {
            CompactAction::deserialize(d)
        }
    }
}

impl Action {
    /// The path the action changes.
    pub fn path(&self) -> &RelPath {
        match self {
            Action::RemoveFile { path }
            | Action::RemoveDir { path }
            | Action::MakeDir { path, .. }
            | Action::WriteFile { path, .. }
            | Action::MakeSymlink { path, .. }
            | Action::SetMode { path, .. } => path,
        }
    }
}

/// Why a path is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum KeptReason {
    /// A default exclude (`.git`, `node_modules`, `.cairn`, the store).
    Excluded,
    /// An exclude glob of the snapshot.
    ExcludedByGlob,
    /// Ignored by `.gitignore` or `.cairnignore`.
    Ignored,
    /// A socket, FIFO or device.
    Special,
    /// The snapshot skipped it (too large, unreadable, changing, a hard link then).
    SkippedBySnapshot,
    /// It cannot be read now.
    Unreadable,
    /// It is larger than the snapshot's `max_file_bytes`.
    TooLarge,
    /// It changes while it is read.
    Changing,
    /// It has several hard links and the snapshot refuses those.
    HardLink,
    /// A directory that holds kept entries.
    HoldsKept,
    /// Edited since the reference snapshot, and the restore was told to skip such paths.
    Drifted,
    /// A file a restore staged (`.cairn-tmp-<journal>-<n>`), left by a crash or copied with the
    /// tree: Cairn's own, never planned as the user's (`cairn recover` removes it).
    Staged,
}

/// A path left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KeptPath {
    /// The path.
    pub path: RelPath,
    /// Why.
    pub reason: KeptReason,
}

/// What to do with paths edited since the reference snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DriftPolicy {
    /// Overwrite them (the safety snapshot keeps them) and list them in `drifted`.
    #[default]
    Overwrite,
    /// Refuse the restore with `CONFLICT`, naming them.
    Refuse,
    /// Leave them as they are (listed in `drifted` and `kept`); `keep` is read as this too.
    #[serde(alias = "keep")]
    Skip,
}

/// How a restore is planned. `Default` is the safest choice. A dry run is a plan:
/// [`crate::Workspace::plan`], and [`crate::Report::dry_run`] for its report.
///
/// It is also the scope a rewind keeps in its stored request (cairn-rewind's `Files` seam), in
/// JSON: `paths`, `reference`, `on_drift`, each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanOptions {
    /// Restore only these paths (each a file, link or directory with everything under it,
    /// relative to the root); empty: the whole workspace. Everything else is left untouched:
    /// the plan, the safety snapshot's undo and the journal cover exactly these paths.
    pub paths: Vec<RelPath>,
    /// A snapshot to compare the current files with (say, the last checkpoint of the thread
    /// being rewound): paths the restore would change that differ from it are `drifted`.
    pub reference: Option<SnapshotId>,
    /// What to do with drifted paths (kept in the plan: applying it checks it again with the
    /// same policy).
    pub on_drift: DriftPolicy,
}

impl PlanOptions {
    /// Whether it plans the whole workspace without a drift check.
    pub fn is_whole(&self) -> bool {
        self.paths.is_empty() && self.reference.is_none()
    }
}

/// What a restore changes and leaves alone: part of its [`Plan`], repeated in its [`crate::Report`].
/// In JSON its fields sit among the plan's (and the report's), not nested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Paths written or re-made.
    pub restored: Vec<RelPath>,
    /// Paths removed (a directory with everything in it).
    pub deleted: Vec<RelPath>,
    /// Files already as the snapshot holds them, and with chosen paths the snapshot's files
    /// outside them (left as they are, whatever they hold).
    pub unchanged: u64,
    /// Paths left alone, and why.
    pub kept: Vec<KeptPath>,
    /// Whether a hold stands (a restore would be refused with `BUSY`).
    pub busy: bool,
    /// Paths the restore changes that differ from the reference snapshot.
    pub drifted: Vec<RelPath>,
}

/// A restore plan: every change, before any is made. A plain value; [`crate::apply`] does
/// exactly what it lists.
///
/// In JSON (a dry run) it has every field; in binary formats (a journal, format 2) it has all
/// but `paths` and `on_drift`, which only planning again needs, so journals keep their format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The snapshot restored.
    pub snapshot_id: SnapshotId,
    /// Its root tree.
    pub target_root: TreeId,
    /// The tree the workspace had when planned.
    pub current_root: TreeId,
    /// The capture settings of the snapshot, with which the workspace was walked.
    pub capture: CaptureSettings,
    /// The changes, in order.
    pub actions: Vec<Action>,
    /// What the changes restore, delete and leave alone (what its [`crate::Report`] repeats).
    pub summary: Summary,
    /// The reference snapshot, if one was given.
    pub reference: Option<SnapshotId>,
    /// The paths the restore was restricted to (empty: the whole workspace).
    pub paths: Vec<RelPath>,
    /// What it was told to do with drifted paths.
    pub on_drift: DriftPolicy,
}

/// Defines a serde form of [`Plan`]: its fields, its summary (with `$summary`, if given),
/// then `paths` and `on_drift` with `$attr`.
macro_rules! plan_form {
    ($(#[$doc:meta])* $name:ident, summary $(#[$summary:meta])?, #[$attr:meta]) => {
        $(#[$doc])*
        #[derive(Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "schema", schemars(rename = "Plan"))]
        #[serde(remote = "Plan")]
        struct $name {
            snapshot_id: SnapshotId,
            target_root: TreeId,
            current_root: TreeId,
            capture: CaptureSettings,
            actions: Vec<Action>,
            $(#[$summary])?
            summary: Summary,
            reference: Option<SnapshotId>,
            #[$attr]
            paths: Vec<RelPath>,
            #[$attr]
            on_drift: DriftPolicy,
        }
    };
}

plan_form!(
    /// [`Plan`] as JSON: every field (`paths` and `on_drift` may be absent: the whole
    /// workspace, overwrite).
    JsonPlan,
    summary #[serde(flatten)],
    #[serde(default)]
);

plan_form!(
    /// [`Plan`] in binary formats: every field but `paths` and `on_drift` (journal format 2);
    /// the summary a nested struct, which postcard writes as its fields in line.
    CompactPlan,
    summary,
    #[serde(skip)]
);

/// The schema of a plan and of an action is their JSON form's.
#[cfg(feature = "schema")]
mod schema {
    use super::{Action, JsonPlan, Plan, TaggedAction};
    use schemars::{JsonSchema, Schema, SchemaGenerator};
    use std::borrow::Cow;

    impl JsonSchema for Action {
        fn schema_name() -> Cow<'static, str> {
            TaggedAction::schema_name()
        }
        fn json_schema(generator: &mut SchemaGenerator) -> Schema {
            TaggedAction::json_schema(generator)
        }
    }

    impl JsonSchema for Plan {
        fn schema_name() -> Cow<'static, str> {
            JsonPlan::schema_name()
        }
        fn json_schema(generator: &mut SchemaGenerator) -> Schema {
            JsonPlan::json_schema(generator)
        }
    }
}

impl Serialize for Plan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            JsonPlan::serialize(self, s)
        } else {
            CompactPlan::serialize(self, s)
        }
    }
}

impl<'de> Deserialize<'de> for Plan {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Plan, D::Error> {
        if d.is_human_readable() {
            JsonPlan::deserialize(d)
        } else {
            CompactPlan::deserialize(d)
        }
    }
}

/// Where a path lies with respect to the chosen paths of a restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// At or under a chosen path (or no paths were chosen): planned as usual.
    Inside,
    /// A directory above a chosen path: only what leads to it is planned.
    Above,
    /// Neither: left untouched.
    Outside,
}

/// The chosen paths of a restore, checked and made plain: no empty, `.` or `..` component,
/// no leading or doubled `/` (a trailing one is dropped), each kept once and none under
/// another (a directory covers everything under it). `INVALID_ARGUMENT` names a bad one.
pub fn normalize_paths(paths: &[RelPath]) -> Result<Vec<RelPath>> {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(paths.len());
    for p in paths {
        let mut b = p.as_bytes();
        while let Some(rest) = b.strip_suffix(b"/") {
            b = rest;
        }
        let bad = b.is_empty()
            || b.split(|&c| c == b'/')
                .any(|c| cairn_store::tree::check_name(c).is_err());
        if bad {
            return Err(Error::InvalidArgument(format!(
                "the path {:?} is not a plain path inside the workspace (relative to its root, \
                 without empty, `.` or `..` parts); name a file or directory under the root",
                p.display()
            )));
        }
        out.push(b.to_vec());
    }
    out.sort();
    out.dedup();
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(out.len());
    for p in out {
        if kept.last().map(|k| within(&p, k)).unwrap_or(false) {
            continue;
        }
        kept.push(p);
    }
    Ok(kept.into_iter().map(RelPath).collect())
}

/// Whether `path` is `dir` or lies under it.
fn within(path: &[u8], dir: &[u8]) -> bool {
    path.starts_with(dir) && (path.len() == dir.len() || path[dir.len()] == b'/')
}

/// The entry at `path` under tree `root`, reading trees through `read` and keeping them in
/// `cache`.
pub(crate) fn entry_at(
    cache: &mut HashMap<TreeId, Tree>,
    read: &dyn Fn(&TreeId) -> Result<Tree>,
    root: TreeId,
    path: &[u8],
) -> Result<Option<TreeEntry>> {
    let mut tree_id = root;
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        if let std::collections::hash_map::Entry::Vacant(v) = cache.entry(tree_id) {
            v.insert(read(&tree_id)?);
        }
        let Some(e) = cache[&tree_id].get(part) else {
            return Ok(None);
        };
        if i + 1 == parts.len() {
            return Ok(Some(e.clone()));
        }
        if e.kind != EntryKind::Dir {
            return Ok(None);
        }
        tree_id = TreeId(e.id);
    }
    Ok(None)
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_noop(&self) -> bool {
        self.actions.is_empty()
    }
}

/// The current side of a plan: the workspace as walked, or a snapshot of it.
pub(crate) struct Current<'a> {
    pub root: TreeId,
    pub trees: &'a dyn Fn(&TreeId) -> Result<Tree>,
    /// Entries the walk left in place: excluded, ignored, special, skipped.
    pub kept: Vec<(Vec<u8>, KeptReason, bool)>,
}

impl Current<'_> {
    pub(crate) fn from_walk(
        kept: &[Kept],
        skipped: &[Skipped],
    ) -> Vec<(Vec<u8>, KeptReason, bool)> {
        let mut out: Vec<(Vec<u8>, KeptReason, bool)> = kept
            .iter()
            .map(|k| {
                let reason = match k.reason {
                    ExcludeReason::Default => KeptReason::Excluded,
                    ExcludeReason::Glob => KeptReason::ExcludedByGlob,
                    ExcludeReason::Ignored => KeptReason::Ignored,
                    ExcludeReason::Special => KeptReason::Special,
                };
                (k.path.clone(), reason, k.is_dir)
            })
            .collect();
        out.extend(skipped.iter().map(|s| {
            let reason = match s.reason {
                SkipReason::TooLarge => KeptReason::TooLarge,
                SkipReason::Changing => KeptReason::Changing,
                SkipReason::Unreadable => KeptReason::Unreadable,
                SkipReason::HardLink => KeptReason::HardLink,
                SkipReason::Staged => KeptReason::Staged,
            };
            (s.path.clone(), reason, s.is_dir)
        }));
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

struct Planner<'a> {
    target_tree: &'a dyn Fn(&TreeId) -> Result<Tree>,
    current_tree: &'a dyn Fn(&TreeId) -> Result<Tree>,
    current_kept: BTreeMap<Vec<u8>, (KeptReason, bool)>,
    target_skipped: BTreeSet<Vec<u8>>,
    reference: Option<TreeId>,
    reference_cache: HashMap<TreeId, Tree>,
    on_drift: DriftPolicy,
    /// The chosen paths (empty: everything).
    scope: Vec<Vec<u8>>,
    removals: Vec<Action>,
    creations: Vec<Action>,
    modes: Vec<Action>,
    restored: Vec<RelPath>,
    deleted: Vec<RelPath>,
    unchanged: u64,
    /// Files and links of the target met in the directories the plan went through; the rest
    /// lie in subtrees identical on both sides, so they are unchanged.
    visited_leaves: u64,
    /// Unchanged subtrees, counted only when the manifest's count cannot be used.
    same_subtrees: Vec<TreeId>,
    /// Subtrees of the target outside the chosen paths, likewise.
    outside_dirs: Vec<TreeId>,
    kept: Vec<KeptPath>,
    drifted: Vec<RelPath>,
    denied: Vec<(RelPath, String)>,
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
                    let path = RelPath(p.to_vec());
                    self.creations.push(Action::MakeDir {
                        path: path.clone(),
                        mode: x.mode,
                    });
                    self.restored.push(path.clone());
                    self.compare_dirs(p, Some(&tx), None)?;
                    if x.mode & 0o700 != 0o700 {
                        self.modes.push(Action::SetMode {
                            path,
                            mode: x.mode,
                            dir: true,
                        });
                    }
                    Ok(())
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

    fn count_files(&self, id: TreeId) -> Result<u64> {
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
    fn compare_dirs(&mut self, path: &[u8], t: Option<&Tree>, c: Option<&Tree>) -> Result<()> {
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

    fn create(&mut self, p: &[u8], x: &TreeEntry) -> Result<()> {
        let path = RelPath(p.to_vec());
        match x.kind {
            EntryKind::Dir => {
                self.creations.push(Action::MakeDir {
                    path: path.clone(),
                    mode: x.mode,
                });
                self.restored.push(path.clone());
                let tx = (self.target_tree)(&TreeId(x.id))?;
                self.compare_dirs(p, Some(&tx), None)?;
                if x.mode & 0o700 != 0o700 {
                    self.modes.push(Action::SetMode {
                        path,
                        mode: x.mode,
                        dir: true,
                    });
                }
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

/// Everything a plan is computed from.
pub(crate) struct Inputs<'a> {
    pub snapshot_id: SnapshotId,
    pub target_root: TreeId,
    pub target_skipped: &'a [Skipped],
    /// Files and links the target holds, as its manifest counted them.
    pub target_leaves: u64,
    pub capture: CaptureSettings,
    pub current: Current<'a>,
    pub target_tree: &'a dyn Fn(&TreeId) -> Result<Tree>,
    pub reference: Option<(SnapshotId, TreeId)>,
    pub on_drift: DriftPolicy,
    /// The chosen paths, normalized (empty: everything).
    pub paths: &'a [RelPath],
}

/// Computes a plan; `DENIED` when it would lose data; `CONFLICT` for drift with `Refuse`.
pub(crate) fn compute(ws: &Site, inputs: Inputs<'_>) -> Result<Plan> {
    let mut p = Planner {
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
    };
    let t = (inputs.target_tree)(&inputs.target_root)?;
    let c = (inputs.current.trees)(&inputs.current.root)?;
    p.compare_dirs(b"", Some(&t), Some(&c))?;
    // A chosen path neither side has is a slip (a typo, a path of another workspace).
    if !inputs.paths.is_empty() {
        let (mut tc, mut cc) = (HashMap::new(), HashMap::new());
        for path in inputs.paths {
            let in_target = entry_at(
                &mut tc,
                inputs.target_tree,
                inputs.target_root,
                path.as_bytes(),
            )?
            .is_some();
            if !in_target
                && entry_at(
                    &mut cc,
                    inputs.current.trees,
                    inputs.current.root,
                    path.as_bytes(),
                )?
                .is_none()
                && !inputs
                    .current
                    .kept
                    .iter()
                    .any(|(k, _, _)| within(path.as_bytes(), k))
            {
                return Err(cairn_store::Error::NotFound {
                    what: format!(
                        "the chosen path {} (neither snapshot {} nor the workspace has it; \
                         check its spelling: paths are relative to the workspace root)",
                        path.display(),
                        inputs.snapshot_id.short()
                    ),
                    path: Some(ws.root.join(path.as_path())),
                }
                .into());
            }
        }
    }
    // What the identical subtrees hold: the manifest's count less what the walk met, without
    // reading them; read and counted only when the count cannot be right (a hand-made manifest).
    match inputs.target_leaves.checked_sub(p.visited_leaves) {
        Some(rest) if rest > 0 || (p.same_subtrees.is_empty() && p.outside_dirs.is_empty()) => {
            p.unchanged += rest
        }
        _ => {
            let mut subtrees = std::mem::take(&mut p.same_subtrees);
            subtrees.append(&mut p.outside_dirs);
            for id in subtrees {
                p.unchanged += p.count_files(id)?;
            }
        }
    }
    for (path, reason, _) in &inputs.current.kept {
        p.kept.push(KeptPath {
            path: RelPath(path.clone()),
            reason: *reason,
        });
    }
    p.kept.sort_by(|a, b| a.path.cmp(&b.path));
    p.kept.dedup_by(|a, b| a.path == b.path);
    // Directory modes: deepest first, so a read-only directory is finished last.
    p.modes.sort_by(|a, b| {
        let depth = |x: &Action| x.path().0.iter().filter(|&&c| c == b'/').count();
        let dir = |x: &Action| matches!(x, Action::SetMode { dir: true, .. });
        dir(a).cmp(&dir(b)).then(depth(b).cmp(&depth(a)))
    });
    let mut actions = p.removals;
    actions.extend(p.creations);
    actions.extend(p.modes);
    // Every object the restore writes must be in the store, or the restore would fail after
    // its safety snapshot: said by the plan (and so by the dry run) as damage.
    let store = ws.store();
    let absent = actions.iter().find_map(|a| match a {
        Action::WriteFile { blob: id, .. } | Action::MakeSymlink { target: id, .. } => {
            (!store.contains(id)).then_some(*id)
        }
        _ => None,
    });
    if let Some(id) = absent {
        return Err(cairn_store::Error::NotFound {
            what: format!("object {id}"),
            path: None,
        }
        .into());
    }
    // Directories we change must be ours.
    let mut denied = p.denied;
    check_owners(ws, &actions, &mut denied)?;
    if !denied.is_empty() {
        denied.sort();
        let detail = denied
            .first()
            .map(|(_, why)| why.clone())
            .unwrap_or_default();
        return Err(Error::Denied {
            detail: format!(
                "a path the restore would overwrite or delete is not safe to change ({detail})"
            ),
            first: denied.first().map(|(p, _)| ws.root.join(p.as_path())),
            paths: denied.into_iter().map(|(p, _)| p).collect(),
        });
    }
    if inputs.on_drift == DriftPolicy::Refuse && !p.drifted.is_empty() {
        let reference = inputs.reference.map(|r| r.0.short()).unwrap_or_default();
        return Err(Error::Conflict {
            detail: format!(
                "nothing was changed: files the restore would change were edited since snapshot \
                 {reference}, the files being left, by someone other than the restore (drift is \
                 refused); see them with `cairn diff {reference}`, then leave them as they are \
                 (--on-drift keep, on_drift \"keep\") or overwrite them (--on-drift overwrite; the \
                 safety snapshot keeps them)"
            ),
            first: p.drifted.first().map(|d| ws.root.join(d.as_path())),
            paths: p.drifted,
        });
    }
    let busy = !hold::list(ws)?.is_empty();
    Ok(Plan {
        snapshot_id: inputs.snapshot_id,
        target_root: inputs.target_root,
        current_root: inputs.current.root,
        capture: inputs.capture,
        actions,
        summary: Summary {
            restored: p.restored,
            deleted: p.deleted,
            unchanged: p.unchanged,
            kept: p.kept,
            busy,
            drifted: p.drifted,
        },
        reference: inputs.reference.map(|r| r.0),
        paths: inputs.paths.to_vec(),
        on_drift: inputs.on_drift,
    })
}

fn check_owners(ws: &Site, actions: &[Action], denied: &mut Vec<(RelPath, String)>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let mut dirs: BTreeSet<Vec<u8>> = BTreeSet::new();
    for a in actions {
        let (parent, _) = a.path().split_last();
        dirs.insert(parent.to_vec());
        if matches!(
            a,
            Action::SetMode { dir: true, .. } | Action::RemoveDir { .. }
        ) {
            dirs.insert(a.path().0.clone());
        }
    }
    for d in dirs {
        let abs = if d.is_empty() {
            ws.root.clone()
        } else {
            ws.root.join(RelPath(d.clone()).as_path())
        };
        match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() && m.uid() != me => denied.push((
                RelPath(d),
                format!("the directory is owned by user {}, not by you", m.uid()),
            )),
            _ => {}
        }
    }
    Ok(())
}

/// Refuses a restore into a root that holds the workspace the snapshot was taken of (a strict
/// ancestor of the manifest's root, which still exists): its tree does not have that
/// workspace in it, so the restore would delete it.
fn refuse_enclosing_root(
    ws: &Site,
    snapshot_id: &SnapshotId,
    manifest: &cairn_store::Manifest,
) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let taken_of = std::path::Path::new(std::ffi::OsStr::from_bytes(&manifest.workspace_root));
    if taken_of != ws.root()
        && taken_of.starts_with(ws.root())
        && std::fs::symlink_metadata(taken_of).is_ok()
    {
        return Err(Error::UnsafeRoot {
            detail: format!(
                "snapshot {} was taken of {}, which lies inside {}: restoring it there would \
                 delete that workspace; restore it into {} itself or into a directory outside it",
                snapshot_id.short(),
                taken_of.display(),
                ws.root().display(),
                taken_of.display()
            ),
            root: ws.root().to_path_buf(),
        });
    }
    Ok(())
}

/// Computes the plan of restoring `snapshot_id` (whose manifest is `manifest`) over
/// `current`, the files as a walk saw them; `reference` names the snapshot of a drift check.
pub(crate) fn against(
    ws: &Site,
    snapshot_id: SnapshotId,
    manifest: &cairn_store::Manifest,
    current: Current<'_>,
    reference: Option<&SnapshotId>,
    on_drift: DriftPolicy,
    paths: &[RelPath],
) -> Result<Plan> {
    refuse_enclosing_root(ws, &snapshot_id, manifest)?;
    let store = ws.store();
    let target_tree = |id: &TreeId| -> Result<Tree> { Ok(store.read_tree(id)?) };
    let reference = match reference {
        Some(r) => Some((*r, store.read_manifest(r)?.root)),
        None => None,
    };
    compute(
        ws,
        Inputs {
            snapshot_id,
            target_root: manifest.root,
            target_skipped: &manifest.skipped,
            target_leaves: manifest.stats.files + manifest.stats.symlinks,
            capture: manifest.capture.clone(),
            current,
            target_tree: &target_tree,
            reference,
            on_drift,
            paths,
        },
    )
}

/// Plans restoring `snapshot` into the workspace: walks the current files with the snapshot's
/// capture settings and the stat cache (the walk watched and steered by `ctx`), and lists
/// every change. Changes nothing.
pub(crate) fn plan(
    ws: &Site,
    snapshot: &SnapshotId,
    options: &PlanOptions,
    ctx: Context<'_>,
) -> Result<Plan> {
    plan_inner(ws, snapshot, options, ctx)
        .map_err(|e| crate::error::missing_object_is_damage(ws.store(), snapshot, e))
}

fn plan_inner(
    ws: &Site,
    snapshot: &SnapshotId,
    options: &PlanOptions,
    ctx: Context<'_>,
) -> Result<Plan> {
    let store = ws.store();
    let manifest = store.read_manifest(snapshot)?;
    let scan_opts = SnapshotOptions {
        capture: manifest.capture.clone(),
        own_files: ws.own_files(),
        ..SnapshotOptions::default()
    };
    let ctx = ws.walk_context(ctx);
    let scan = cairn_snapshot::scan(store, ws.root(), ws.id(), &scan_opts, ctx)?;
    let current_tree = |id: &TreeId| -> Result<Tree> {
        match scan.trees.get(id) {
            Some(t) => Ok(t.clone()),
            None => Ok(store.read_tree(id)?),
        }
    };
    against(
        ws,
        *snapshot,
        &manifest,
        Current {
            root: scan.root,
            trees: &current_tree,
            kept: Current::from_walk(&scan.kept, &scan.skipped),
        },
        options.reference.as_ref(),
        options.on_drift,
        &normalize_paths(&options.paths)?,
    )
}
