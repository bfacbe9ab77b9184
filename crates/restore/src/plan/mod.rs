//! Restore planning: every change is listed before any is made. The dry run *is* the plan.
//!
//! The plan as a value and its serde forms are in `model`, the chosen paths in `scope`, the
//! comparison of the two trees in `diff`; this module computes a plan from what the walk saw.

mod diff;
mod model;
mod scope;

pub use model::{Action, DriftPolicy, KeptPath, KeptReason, Plan, PlanOptions, Summary};
pub use scope::normalize_paths;

use crate::error::{Error, Result};
use crate::hold;
use crate::site::Site;
use cairn_snapshot::{Context, ExcludeReason, Kept, Options as SnapshotOptions};
use cairn_store::{
    CaptureSettings, EntryKind, RelPath, SkipReason, Skipped, SnapshotId, Tree, TreeEntry, TreeId,
};
use diff::Planner;
use rayon::prelude::*;
use scope::within;
use std::collections::{BTreeSet, HashMap};

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
    let mut p = Planner::new(&inputs);
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
    // its safety snapshot: said by the plan (and so by the dry run) as damage. Looked up in
    // parallel (a large index costs a `pread` per lookup); the first absent in plan order.
    let store = ws.store();
    let absent = actions.par_iter().find_map_first(|a| match a {
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
